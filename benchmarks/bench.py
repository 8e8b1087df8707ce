"""Cold-run benchmark of cs-audit on the real corpora (vLLM 0.33.0, SGLang 0.5.23), with ruff G004 for scale.

Run from the project root::

    python benchmarks/bench.py                          # both trees, one run each
    python benchmarks/bench.py --trees vllm --repeat 3  # median of three runs

Corpus roots come from ``../shared/corpus/get-real-corpora.sh``.  Commands measured:

    cs-audit scan ROOT --format json --no-history -o /dev/null -j 2 -v
    ruff check --select G004 --no-cache --isolated --output-format json ROOT   (stdout to /dev/null)

cs-audit is measured three ways, each with its own empty facts cache (``XDG_CACHE_HOME``
pointed at a temp dir, so the user's cache is never touched):
  cold              first run, empty cache (the cache is written)
  warm              the same command again, nothing changed
  one file changed  on a temp copy of the tree (the corpus is never modified): a primed
                    cache, then one line appended to one Python file, then the run measured
ruff runs with ``--no-cache``.  The OS page cache is warm after the first run.

Measurement, per run, of the tool's whole process tree:
  wall s         ``time.perf_counter()`` around start .. exit
  cpu s          user+sys from ``os.wait4()`` on the tool's process: the process plus every
                 descendant it waited for (the cs-audit worker pool, ruff's threads)
  peak RSS MiB   ``ru_maxrss`` from the same ``os.wait4()``: the peak of the *largest single
                 process* in the tree (this is what ``/usr/bin/time -v`` reports too).  Not
                 ``getrusage(RUSAGE_CHILDREN)``: that high-water mark never resets between runs.
  tree RSS MiB   extra column: the peak of the *sum* of RSS over the tree, sampled from /proc
                 every 50 ms (what the machine needs with ``-j 2``; may miss short spikes)
With ``--repeat N`` each column is the median of the N runs.  files/lines count the ``.py``
files under the root (the corpora hold nothing else).

TODO (future work, not done yet): the same table for Semgrep (a rule equivalent to
eager-format / default-on-emitter) and for Fixit (a lint rule over LibCST), to compare
cs-audit's cost with the other AST/CST-based tools.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
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
CORPORA_SCRIPT = PROJECT.parent / "shared" / "corpus" / "get-real-corpora.sh"
TREE_NAMES = {"vllm": "vllm 0.33.0", "sglang": "sglang 0.5.23"}


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    tree_rss_mib: float


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


def measure(cmd: list[str], env: dict[str, str] | None = None) -> Run:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
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
    if proc.returncode not in (0, 1):  # ruff exits 1 when it finds something; cs-audit exits 1 on findings
        sys.exit(f"{' '.join(cmd)} failed (rc={proc.returncode}):\n{err.decode(errors='replace')[-2000:]}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, peak[0] / 1024)


def _cs_audit_cmd(root: Path, jobs: int) -> list[str]:
    return ["cs-audit", "scan", str(root), "--format", "json", "--no-history", "-o", os.devnull, "-j", str(jobs), "-v"]


def measure_cs_audit(root: Path, jobs: int, mode: str) -> Run:
    """One cs-audit run in ``mode`` (cold / warm / one file changed), with a private cache dir."""
    with tempfile.TemporaryDirectory(prefix="cs-audit-bench-") as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=str(Path(tmp) / "cache"))
        if mode == "cold":
            return measure(_cs_audit_cmd(root, jobs), env)
        if mode == "warm":
            measure(_cs_audit_cmd(root, jobs), env)  # prime
            return measure(_cs_audit_cmd(root, jobs), env)
        copy = Path(tmp) / "tree" / root.name  # same relative paths as the corpus
        shutil.copytree(root, copy, symlinks=True)
        measure(_cs_audit_cmd(copy, jobs), env)  # prime
        target = max(copy.rglob("*.py"), key=lambda p: (p.stat().st_size, str(p)))  # the largest file
        with open(target, "a", encoding="utf-8") as handle:
            handle.write("\n_CS_AUDIT_BENCH_EDIT = 1\n")
        return measure(_cs_audit_cmd(copy, jobs), env)


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", default="vllm,sglang", help="comma-separated: vllm, sglang")
    ap.add_argument("--repeat", type=int, default=1, help="runs per (tool, tree); the median is reported")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="cs-audit worker processes (default 2)")
    args = ap.parse_args()

    roots = corpus_roots()
    trees = [t.strip() for t in args.trees.split(",") if t.strip()]
    unknown = [t for t in trees if t not in roots]
    if unknown:
        sys.exit(f"unknown tree(s) {unknown}; known: {sorted(roots)}")

    from cs_audit import __version__ as cs_version

    rows: list[tuple[str, str, int, int, Run]] = []
    for tree in trees:
        root = roots[tree]
        files, lines = count_python(root)
        cs_name = f"cs-audit {cs_version} (-j {args.jobs})"
        for mode in ("cold", "warm", "one file changed"):
            runs = []
            for i in range(args.repeat):
                print(f"# {cs_name} {mode} on {tree} run {i + 1}/{args.repeat} ...", file=sys.stderr, flush=True)
                runs.append(measure_cs_audit(root, args.jobs, mode))
            rows.append((f"{cs_name} {mode}", TREE_NAMES.get(tree, tree), files, lines, median_run(runs)))
        ruff = f"{tool_version(['ruff', '--version'])} G004"
        cmd = ["ruff", "check", "--select", "G004", "--no-cache", "--isolated", "--output-format", "json", str(root)]
        runs = []
        for i in range(args.repeat):
            print(f"# {ruff} on {tree} run {i + 1}/{args.repeat} ...", file=sys.stderr, flush=True)
            runs.append(measure(cmd))
        rows.append((ruff, TREE_NAMES.get(tree, tree), files, lines, median_run(runs)))

    print(f"Date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}  "
          f"nproc: {len(os.sched_getaffinity(0))}  CPU: {cpu_model()}  Python {platform.python_version()}  "
          f"repeat: {args.repeat} (median)\n")
    print("| tool | tree | files | lines | wall s | cpu s | peak RSS MiB | tree RSS MiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for tool, tree, files, lines, r in rows:
        print(f"| {tool} | {tree} | {files:,} | {lines:,} | {r.wall_s:.1f} | {r.cpu_s:.1f} | "
              f"{r.peak_rss_mib:.0f} | {r.tree_rss_mib:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
