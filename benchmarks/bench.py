"""Cold-run benchmark of cs-audit on the real corpora (vLLM 0.33.0, SGLang 0.5.23), with ruff G004, Semgrep and Fixit for scale.

Run from the project root::

    python benchmarks/bench.py                                   # both trees, every tool, one run each
    python benchmarks/bench.py --trees vllm --repeat 3           # median of three runs
    python benchmarks/bench.py --trees vllm --tools semgrep,fixit,ruff
    python benchmarks/bench.py --no-install                      # skip Semgrep/Fixit unless their venvs exist

Corpus roots come from ``../shared/corpus/get-real-corpora.sh``.  ``--tools`` picks among
cs-audit, floor, ruff, semgrep, fixit (default: all five).  ``floor`` is no tool: it reads and
``ast.parse``-s every ``.py`` file in one process (one core), the floor the issue measured its
targets against; cs-audit cold / floor compares across machines.  Commands measured (``-j`` is ``--jobs``, 2):

    cs-audit scan ROOT --format json --no-history -o REPORT -j 2 -v
    ruff check --select G004 --no-cache --isolated --output-format json ROOT
    semgrep scan --config benchmarks/semgrep_fstring_logging.yaml --metrics=off --jobs 2 --json -q
                 --disable-version-check --no-git-ignore --x-ignore-semgrepignore-files
                 --max-target-bytes=0 ROOT
    fixit -c fixit.toml --rules .cs_bench_rules:CsBenchLoggingEagerFormat lint ROOT
                 (run in benchmarks/fixit_rules/)

The Semgrep and Fixit rules have one meaning, that of ruff G004 widened to G001/G002: the
message of a logging call (``debug info warn warning error exception critical``, or the second
argument of ``log``) on a receiver named like a logger is an f-string, a ``%``-formatted or a
``.format``-ed string literal (``benchmarks/semgrep_fstring_logging.yaml``;
``benchmarks/fixit_rules/cs_bench_rules``, a local Fixit 2 rule loaded through ``--rules``).
Semgrep's extra flags make it scan every ``.py`` file: without them its built-in default
ignore list drops ``test/`` and ``tests/`` directories and files over 1 MB; the number of files
it reports as scanned (JSON ``paths.scanned``) is printed next to the number of ``.py`` files.
Fixit has no worker-count option: its process pool has ``os.cpu_count()`` workers.

Semgrep and Fixit are never installed into this environment (Fixit pins libcst): each lives
in its own venv, created on first use with ``python -m venv`` + ``pip install semgrep`` /
``pip install fixit`` and reused after that::

    ${XDG_CACHE_HOME:-~/.cache}/cs-audit-bench/venv-semgrep
    ${XDG_CACHE_HOME:-~/.cache}/cs-audit-bench/venv-fixit

With ``--no-install`` a missing venv is not created; a tool whose venv is missing or whose
install fails is skipped with a printed note.

cs-audit and ruff run from the console scripts next to this interpreter when they are there
(not through a version manager's shim on PATH), and cs-audit's bytecode is written first, as
installing a wheel does.  cs-audit is measured three ways, each with its own empty facts cache (``XDG_CACHE_HOME``
pointed at a temp dir, so the user's cache is never touched):
  cold              first run, empty cache (the cache is written)
  warm              the same command again, nothing changed
  one file changed  on a temp copy of the tree (the corpus is never modified): a primed
                    cache, then one edit of the largest Python file, then the run measured;
                    two edits, each before the statement in the middle of the file:
      lines moved   a comment line (every fact below it moves: the stored result is
                    reused with that file's lines moved)
      call added    a ``print(...)`` statement (a new fact: the tree is joined again)
ruff runs with ``--no-cache``; Semgrep and Fixit keep no cache between runs.  The OS page
cache is warm after the first run.  Each tool's output goes to a temp file (cs-audit: the
JSON report of the cold run, else ``/dev/null``), read after the run for the hit counts.

Measurement, per run, of the tool's whole process tree:
  wall s         ``time.perf_counter()`` around start .. exit
  cpu s          user+sys from ``os.wait4()`` on the tool's process: the process plus every
                 descendant it waited for (the cs-audit worker pool, ruff's threads,
                 semgrep-core, Fixit's worker processes)
  peak RSS MiB   ``ru_maxrss`` from the same ``os.wait4()``: the peak of the *largest single
                 process* in the tree (this is what ``/usr/bin/time -v`` reports too).  Not
                 ``getrusage(RUSAGE_CHILDREN)``: that high-water mark never resets between runs.
  tree RSS MiB   extra column: the peak of the *sum* of RSS over the tree, sampled from /proc
                 every 50 ms (what the machine needs with ``-j 2``; may miss short spikes)
  × cs-audit cold  the row's wall / the cs-audit cold wall on the same tree (> 1: cs-audit is
                 faster); only when cs-audit is among ``--tools``
With ``--repeat N`` each column is the median of the N runs.  files/lines count the ``.py``
files under the root (the corpora hold nothing else).

A second table gives each tool's hits on the tree, so that the timings compare tools that
did the work: cs-audit's ``eager-format`` findings (all, and those with an f-string on a
direct logging call, the G004 analogue), ruff's G004 diagnostics, and the Semgrep and Fixit
hits (all, and those whose message is an f-string), with files scanned and errors.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
BENCH_DIR = PROJECT / "benchmarks"
CORPORA_SCRIPT = PROJECT.parent / "shared" / "corpus" / "get-real-corpora.sh"
TREE_NAMES = {"vllm": "vllm 0.33.0", "sglang": "sglang 0.5.23"}
TOOLS = ("cs-audit", "floor", "ruff", "semgrep", "fixit")

#: the "floor" row: every ``.py`` file of the tree read and parsed by the stdlib ``ast``, in one
#: process (one core), as the issue's floor was measured; cs-audit's cold wall divided by it is
#: a figure that carries across machines (a faster machine parses faster and scans faster)
FLOOR_SCRIPT = """
import ast, os, sys, warnings
warnings.simplefilter("ignore")
for top, dirs, names in os.walk(sys.argv[1]):
    dirs.sort()
    for name in sorted(names):
        if name.endswith(".py"):
            with open(os.path.join(top, name), "rb") as handle:
                data = handle.read()
            try:
                ast.parse(data)
            except (SyntaxError, ValueError):
                pass
"""
SEMGREP_RULE = BENCH_DIR / "semgrep_fstring_logging.yaml"
FIXIT_DIR = BENCH_DIR / "fixit_rules"  # fixit runs here: `.cs_bench_rules` is imported from it
FIXIT_RULE = ".cs_bench_rules:CsBenchLoggingEagerFormat"
#: ruff's logging methods whose first argument is the message (``log`` takes it second)
LOG_METHODS = frozenset({"debug", "info", "warn", "warning", "error", "exception", "critical"})


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    tree_rss_mib: float


@dataclass(frozen=True)
class Hits:
    """What one tool found on one tree (from the output of its last measured run)."""

    tool: str
    tree: str
    hits: int
    fstring_hits: int | None = None  # None: the tool only reports f-strings, or cannot tell
    scanned: str = ""
    errors: str = ""


def corpus_roots() -> dict[str, Path]:
    out = subprocess.run(["bash", str(CORPORA_SCRIPT)], check=True, capture_output=True, text=True).stdout
    return {Path(line.strip()).name: Path(line.strip()) for line in out.splitlines() if line.strip()}


def count_python(root: Path) -> tuple[int, int]:
    files = lines = 0
    for path in root.rglob("*.py"):
        files += 1
        lines += path.read_bytes().count(b"\n")
    return files, lines


def _tree_rss_kib(pid: int) -> int:
    """Sum of VmRSS over ``pid`` and its descendants (one /proc scan)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, frontier = {pid}, [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in tree]
        tree.update(kids)
        frontier.extend(kids)
    total = 0
    for p in tree:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


def measure_full(
    cmd: list[str],
    env: dict[str, str] | None = None,
    *,
    stdout: Path | None = None,
    cwd: Path | None = None,
    ok_codes: tuple[int, ...] = (0, 1),
) -> tuple[Run, str]:
    """One measured run of ``cmd``; returns the figures and the tool's stderr.

    ``stdout`` names a file for the tool's standard output (default: /dev/null)."""
    out = open(stdout, "wb") if stdout is not None else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    try:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env, cwd=cwd)
    finally:
        if stdout is not None:
            out.close()  # the child holds its own copy
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_kib(proc.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stderr is not None
    err = proc.stderr.read()  # drain before waiting (cs-audit -v writes here)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in ok_codes:  # ruff and cs-audit exit 1 when they find something
        sys.exit(f"{' '.join(cmd)} failed (rc={proc.returncode}):\n{err.decode(errors='replace')[-2000:]}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, peak[0] / 1024), err.decode(errors="replace")


def measure(cmd: list[str], env: dict[str, str] | None = None, **kwargs: object) -> Run:
    return measure_full(cmd, env, **kwargs)[0]  # type: ignore[arg-type]


def entry_point(name: str) -> str:
    """``name``'s console script next to this interpreter when there is one, else ``name`` from
    PATH.  A version manager's shim on PATH (pyenv's is a bash script that runs ``pyenv exec``)
    adds 0.1-0.3 s to every call, which is a third of a warm cs-audit run."""
    script = Path(sys.executable).parent / name
    return str(script) if script.is_file() and os.access(script, os.X_OK) else name


def precompile_cs_audit(package: Path | None = None) -> None:
    """Write the bytecode of cs-audit (the imported one, or the ``package`` folder of a
    checkout), as ``pip install`` of a wheel does: an editable install compiles on first
    import, or on every run when ``PYTHONDONTWRITEBYTECODE`` is set."""
    import compileall

    if package is None:
        import cs_audit

        package = Path(cs_audit.__file__).parent
    compileall.compile_dir(str(package), quiet=1)


def _cs_audit_cmd(root: Path, jobs: int, output: str = os.devnull) -> list[str]:
    return [entry_point("cs-audit"), "scan", str(root), "--format", "json", "--no-history", "-o", output, "-j", str(jobs), "-v"]


def measure_cs_audit(root: Path, jobs: int, mode: str, report: Path | None = None) -> Run:
    """One cs-audit run in ``mode`` (cold / warm / one file changed), with a private cache dir.

    ``report``: where the cold run writes its JSON report (default: /dev/null)."""
    with tempfile.TemporaryDirectory(prefix="cs-audit-bench-") as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=str(Path(tmp) / "cache"))
        if mode == "cold":
            return measure(_cs_audit_cmd(root, jobs, str(report) if report else os.devnull), env)
        if mode == "warm":
            measure(_cs_audit_cmd(root, jobs), env)  # prime
            return measure(_cs_audit_cmd(root, jobs), env)
        copy = Path(tmp) / "tree" / root.name  # same relative paths as the corpus
        shutil.copytree(root, copy, symlinks=True)
        # a file changed less than ``cache.RACY_NS`` (3 s) before it is hashed is hashed again on
        # the next run (git's "racily clean" rule): every file of a copy just made would be, which
        # a tree in use is not; the edit below is made after the prime, as in use
        time.sleep(3.5)
        measure(_cs_audit_cmd(copy, jobs), env)  # prime
        target = max(copy.rglob("*.py"), key=lambda p: (p.stat().st_size, str(p)))  # the largest file
        edit = "# cs-audit bench edit" if mode.endswith("lines moved") else "print('cs-audit bench edit')"
        insert_before_middle_statement(target, edit)
        return measure(_cs_audit_cmd(copy, jobs), env)


def insert_before_middle_statement(path: Path, text: str) -> None:
    """Insert ``text`` as a line of its own, indented like the statement in the middle of
    the file (in source order; not a def/class, whose decorators come first) and before it."""
    source = path.read_text(encoding="utf-8")
    statements = sorted(
        (node.lineno, node.col_offset) for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    )
    line, column = statements[len(statements) // 2]
    lines = source.splitlines(keepends=True)
    lines.insert(line - 1, " " * column + text + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def median_run(runs: list[Run]) -> Run:
    return Run(*(statistics.median(getattr(r, f) for r in runs) for f in ("wall_s", "cpu_s", "peak_rss_mib", "tree_rss_mib")))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def tool_version(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, check=False, capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


# --- Semgrep and Fixit: private venvs -------------------------------------------------------


def bench_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cs-audit-bench"


def venv_tool(tool: str, install: bool) -> Path | None:
    """The ``tool`` executable in its venv under :func:`bench_cache`, created with
    ``python -m venv`` + ``pip install TOOL`` unless it exists; None (with a printed note)
    when it is missing and ``install`` is off, or the install fails."""
    venv = bench_cache() / f"venv-{tool}"
    exe = venv / "bin" / tool
    if exe.is_file():
        return exe
    if not install:
        print(f"note: skipping {tool}: {exe} does not exist and --no-install was given", file=sys.stderr)
        return None
    print(f"# installing {tool} into {venv} (python -m venv; pip install {tool}) ...", file=sys.stderr, flush=True)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", tool],
    ]
    for step in steps:
        try:
            proc = subprocess.run(step, check=False, capture_output=True, text=True)
        except OSError as exc:
            print(f"note: skipping {tool}: {' '.join(step)}: {exc}", file=sys.stderr)
            return None
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            print(f"note: skipping {tool}: {' '.join(step)} failed (rc={proc.returncode}):", *tail, sep="\n  ", file=sys.stderr)
            return None
    if not exe.is_file():
        print(f"note: skipping {tool}: installed, but {exe} is missing", file=sys.stderr)
        return None
    return exe


def semgrep_cmd(exe: Path, root: Path, jobs: int) -> list[str]:
    return [
        str(exe), "scan", "--config", str(SEMGREP_RULE), "--metrics=off", "--jobs", str(jobs), "--json", "-q",
        "--disable-version-check",
        "--no-git-ignore",                  # no .gitignore filtering, should the tree sit in a git checkout
        "--x-ignore-semgrepignore-files",   # no built-in default ignore list (it drops test/ and tests/)
        "--max-target-bytes=0",             # no 1 MB file-size cut-off
        str(root),
    ]  # fmt: skip


def fixit_cmd(exe: Path, root: Path) -> list[str]:
    return [str(exe), "-c", str(FIXIT_DIR / "fixit.toml"), "--rules", FIXIT_RULE, "lint", str(root)]


# --- hit counts -------------------------------------------------------------------------------


def _message_kind(call_source: str) -> str | None:
    """The kind of the logging message in the source text of one matched call (a Semgrep
    match): ``f-string``, ``%-format``, ``str.format``; None when it cannot be told."""
    try:
        call = ast.parse(call_source.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return None
    position = 1 if call.func.attr == "log" else 0
    message = next((k.value for k in call.keywords if k.arg == "msg"), None)
    if message is None and len(call.args) > position:
        message = call.args[position]
    if message is not None and any(isinstance(node, ast.JoinedStr) for node in ast.walk(message)) and (
        isinstance(message, ast.JoinedStr) or (isinstance(message, ast.BinOp) and isinstance(message.op, ast.Add))
    ):
        return "f-string"  # f"..." (implicit concatenation included), or f"..." + s
    if isinstance(message, ast.BinOp) and isinstance(message.op, ast.Mod):
        return "%-format"
    if isinstance(message, ast.Call):
        return "str.format"
    return None


def cs_audit_hits(tree: str, report: Path, files: int) -> Hits:
    data = json.loads(report.read_text(encoding="utf-8"))
    eager = [f for f in data["findings"] if f["rule"] == "eager-format"]
    direct = [f for f in eager if "f-string" in f.get("eager_kinds", ()) and f.get("level") != "helper"]
    errors = len(data.get("errors", ()))
    return Hits("cs-audit eager-format", tree, len(eager), len(direct), f"{files - errors:,} of {files:,}", str(errors))


def ruff_hits(tree: str, out: Path) -> Hits:
    diagnostics = json.loads(out.read_text(encoding="utf-8") or "[]")
    g004 = sum(1 for d in diagnostics if d.get("code") == "G004")
    syntax = sum(1 for d in diagnostics if d.get("code") is None)  # parse errors carry no code
    return Hits("ruff G004", tree, g004, None, "", f"{syntax} syntax" if syntax else "0")


def semgrep_hits(tree: str, out: Path, files: int) -> Hits:
    data = json.loads(out.read_text(encoding="utf-8"))
    results = data.get("results", [])
    fstrings = 0
    for result in results:
        try:
            source = Path(result["path"]).read_bytes()[result["start"]["offset"] : result["end"]["offset"]]
        except (OSError, KeyError):
            continue
        fstrings += _message_kind(source.decode("utf-8", errors="replace")) == "f-string"
    scanned = len(data.get("paths", {}).get("scanned", []))
    kinds: dict[str, int] = {}
    for error in data.get("errors", []):
        kind = error.get("type", "?")
        kind = kind[0] if isinstance(kind, list) and kind else str(kind)  # e.g. ["PartialParsing", [spans]]
        kinds[kind] = kinds.get(kind, 0) + 1
        where = error.get("path") or ", ".join(str(s.get("file", "?")) for s in error.get("spans", [])[:1]) or "?"
        print(f"note: semgrep on {tree}: {kind} ({error.get('level', '?')}) in {where}: "
              f"{' '.join(str(error.get('message', '')).split())[:200]}", file=sys.stderr)
    if scanned != files:
        print(f"note: semgrep on {tree}: paths.scanned = {scanned:,}, the tree has {files:,} .py files", file=sys.stderr)
    detail = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) if kinds else "0"
    return Hits("semgrep", tree, len(results), fstrings, f"{scanned:,} of {files:,}", detail)


FIXIT_HIT = re.compile(r"@\d+:\d+ CsBenchLoggingEagerFormat: (\S+) message")
FIXIT_CHECKED = re.compile(r"(\d+) files? (?:checked|clean)")  # the closing line on stderr


def fixit_hits(tree: str, out: Path, err: str, files: int) -> Hits:
    hits = fstrings = exceptions = 0
    for line in out.read_text(encoding="utf-8", errors="replace").splitlines():
        if match := FIXIT_HIT.search(line):
            hits += 1
            fstrings += match.group(1) == "f-string"
        elif ": EXCEPTION: " in line:
            exceptions += 1
    checked = FIXIT_CHECKED.search(err)
    scanned = f"{int(checked.group(1)):,} of {files:,}" if checked else ""
    return Hits("fixit", tree, hits, fstrings, scanned, str(exceptions))


# --- main -------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", default="vllm,sglang", help="comma-separated: vllm, sglang")
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated among {', '.join(TOOLS)} (default: all)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per (tool, tree); the median is reported")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="cs-audit worker processes and semgrep --jobs (default 2)")
    ap.add_argument("--no-install", action="store_true", help="do not create the Semgrep/Fixit venvs; skip a tool whose venv is missing")
    args = ap.parse_args()

    roots = corpus_roots()
    trees = [t.strip() for t in args.trees.split(",") if t.strip()]
    unknown = [t for t in trees if t not in roots]
    if unknown:
        sys.exit(f"unknown tree(s) {unknown}; known: {sorted(roots)}")
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    bad = [t for t in tools if t not in TOOLS]
    if bad or not tools:
        sys.exit(f"unknown tool(s) {bad}; known: {', '.join(TOOLS)}")

    exes: dict[str, Path] = {}
    for tool in ("semgrep", "fixit"):
        if tool in tools and (exe := venv_tool(tool, install=not args.no_install)) is not None:
            exes[tool] = exe
    tools = [t for t in tools if t not in ("semgrep", "fixit") or t in exes]
    if "ruff" in tools and shutil.which(entry_point("ruff")) is None:
        print("note: skipping ruff: not installed next to this interpreter nor on PATH (pip install ruff)", file=sys.stderr)
        tools.remove("ruff")
    names = {}
    if "cs-audit" in tools:
        from cs_audit import __version__ as cs_version

        names["cs-audit"] = f"cs-audit {cs_version} (-j {args.jobs})"
        precompile_cs_audit()
    if "ruff" in tools:
        names["ruff"] = f"{tool_version([entry_point('ruff'), '--version'])} G004"
    if "semgrep" in tools:
        names["semgrep"] = f"semgrep {tool_version([str(exes['semgrep']), '--version', '--disable-version-check'])} (--jobs {args.jobs})"
    if "fixit" in tools:
        version = tool_version([str(exes["fixit"]), "--version"]).removeprefix("fixit, version ")
        names["fixit"] = f"fixit {version} ({os.cpu_count()} workers)"
        if os.cpu_count() != args.jobs:
            print(f"note: fixit has no worker option; it uses os.cpu_count() = {os.cpu_count()} workers, not {args.jobs}", file=sys.stderr)

    def progress(name: str, what: str, tree: str, i: int) -> None:
        print(f"# {name}{what} on {tree} run {i + 1}/{args.repeat} ...", file=sys.stderr, flush=True)

    rows: list[tuple[str, str, int, int, Run, float | None]] = []  # ..., cs-audit cold wall of the tree
    hits: list[Hits] = []
    with tempfile.TemporaryDirectory(prefix="cs-audit-bench-out-") as tmp_dir:
        tmp = Path(tmp_dir)
        for tree in trees:
            root = roots[tree]
            label = TREE_NAMES.get(tree, tree)
            files, lines = count_python(root)
            tree_rows: list[tuple[str, Run]] = []
            cold_wall: float | None = None
            if "cs-audit" in tools:
                report = tmp / f"cs-audit-{tree}.json"
                for mode in ("cold", "warm", "one file changed, lines moved", "one file changed, call added"):
                    runs = []
                    for i in range(args.repeat):
                        progress(names["cs-audit"], f" {mode}", tree, i)
                        runs.append(measure_cs_audit(root, args.jobs, mode, report if mode == "cold" else None))
                    run = median_run(runs)
                    tree_rows.append((f"{names['cs-audit']} {mode}", run))
                    if mode == "cold":
                        cold_wall = run.wall_s
                hits.append(cs_audit_hits(label, report, files))
            if "floor" in tools:
                runs = []
                for i in range(args.repeat):
                    progress("floor: ast.parse, one core", "", tree, i)
                    runs.append(measure([sys.executable, "-c", FLOOR_SCRIPT, str(root)]))
                tree_rows.append(("floor: ast.parse of every file, one core", median_run(runs)))
            if "ruff" in tools:
                cmd = [entry_point("ruff"), "check", "--select", "G004", "--no-cache", "--isolated", "--output-format", "json", str(root)]
                out = tmp / f"ruff-{tree}.json"
                runs = []
                for i in range(args.repeat):
                    progress(names["ruff"], "", tree, i)
                    runs.append(measure(cmd, stdout=out))
                tree_rows.append((names["ruff"], median_run(runs)))
                hits.append(ruff_hits(label, out))
            if "semgrep" in tools:
                out = tmp / f"semgrep-{tree}.json"
                runs = []
                for i in range(args.repeat):
                    progress(names["semgrep"], "", tree, i)
                    runs.append(measure(semgrep_cmd(exes["semgrep"], root, args.jobs), stdout=out, ok_codes=(0, 1, 2)))
                tree_rows.append((names["semgrep"], median_run(runs)))
                hits.append(semgrep_hits(label, out, files))
            if "fixit" in tools:
                out = tmp / f"fixit-{tree}.txt"
                runs, err = [], ""
                for i in range(args.repeat):
                    progress(names["fixit"], "", tree, i)
                    # exit status: 1 = lint hits, 2 = some file raised (reported), 3 = both
                    run, err = measure_full(fixit_cmd(exes["fixit"], root), stdout=out, cwd=FIXIT_DIR, ok_codes=(0, 1, 2, 3))
                    runs.append(run)
                tree_rows.append((names["fixit"], median_run(runs)))
                hits.append(fixit_hits(label, out, err, files))
            rows.extend((tool, label, files, lines, run, cold_wall) for tool, run in tree_rows)

    print(f"Date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}  "
          f"nproc: {len(os.sched_getaffinity(0))}  CPU: {cpu_model()}  Python {platform.python_version()}  "
          f"repeat: {args.repeat} (median)\n")
    print("| tool | tree | files | lines | wall s | cpu s | peak RSS MiB | tree RSS MiB | × cs-audit cold |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for tool, tree, files, lines, r, cold in rows:
        ratio = f"{r.wall_s / cold:.2f}" if cold else "—"
        print(f"| {tool} | {tree} | {files:,} | {lines:,} | {r.wall_s:.1f} | {r.cpu_s:.1f} | "
              f"{r.peak_rss_mib:.0f} | {r.tree_rss_mib:.0f} | {ratio} |")
    print("\nHits (the last run of each tool; f-string: the message is an f-string, for cs-audit an "
          "f-string on a direct logging call; ruff G004 counts f-strings only):\n")
    print("| tool | tree | hits | f-string hits | files scanned | errors |")
    print("|---|---|---:|---:|---:|---:|")
    for h in hits:
        fs = f"{h.fstring_hits:,}" if h.fstring_hits is not None else "—"
        print(f"| {h.tool} | {h.tree} | {h.hits:,} | {fs} | {h.scanned or '—'} | {h.errors} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
