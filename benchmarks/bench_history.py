"""History benchmark: what git blame costs a scan, and what ``report --range`` costs per commit.

Run from the project root (the tree is a clone of vllm-ascend, made from the local mirror if
missing; nothing is ever written into it)::

    python benchmarks/bench_history.py                      # both parts, one run each
    python benchmarks/bench_history.py --repeat 3           # medians of three runs
    python benchmarks/bench_history.py --part range --verify
    python benchmarks/bench_history.py --part blame --repeat 5   # the history phase alone

Part ``scan`` (the added-in column, git blame)::

    cs-audit scan TREE --format json -o FILE -j N -v               history on
    cs-audit scan TREE --format json -o FILE -j N -v --no-history  history off

each first with an empty cache (cold: ``XDG_CACHE_HOME`` is a fresh temp dir per run, so the
user's cache is never touched) and then again with the same cache (warm).  ``history s`` is
the ``history`` phase printed by ``-v`` (blame and nothing else); the wall and CPU differences
between history on and off are printed too (CPU: user+sys of cs-audit and everything it
waited for, git included; steadier than wall time on a shared machine).  The JSON of the cold
and warm runs must be byte-identical (checked on every run; with ``--verify`` also against a
``--no-cache`` run).

Part ``blame`` (only with ``--part blame``): the history phase alone, repeated.  One scan
primes the facts cache; then, ``--repeat`` times, the blame cache is deleted and the same
scan runs twice (cold blame, warm blame) — parsing costs next to nothing there, so many
samples of the blame cost are cheap to take on a noisy machine.

Part ``range`` (audits of past commits)::

    cs-audit report TREE --range A..B --format json -o DIR -j N

cold (fresh ``XDG_CACHE_HOME``), printing the total and the per-commit seconds cs-audit
reports on stderr (first commit, then the mean / median / max of the others).  With
``--verify`` the reports are compared byte for byte with audits of the same commits done
without any cross-commit reuse (``TreeAuditor(reuse=False)``, in a child process).

The machine may be shared: repeat and read the medians.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import entry_point  # noqa: E402  (the console script, not a version manager's shim)

CS_AUDIT = entry_point("cs-audit")

DEFAULT_TREE = Path("/tmp/ascend")
MIRROR = Path("/work/.mirror/vllm-project+vllm-ascend/repo")
_PHASES = re.compile(r"phases: (.*)")
_COMMIT_LINE = re.compile(r"^\[(\d+)/(\d+)\] (\S+) \S+ ([0-9.]+)s ")


@dataclass
class ScanRun:
    wall: float
    cpu: float
    phases: dict[str, float]


@dataclass
class RangeRun:
    wall: float
    cpu: float
    per_commit: list[float] = field(default_factory=list)
    summary: str = ""


def ensure_tree(tree: Path) -> None:
    if tree.exists():
        return
    if tree != DEFAULT_TREE or not MIRROR.exists():
        sys.exit(f"{tree}: no such tree")
    print(f"# cloning {MIRROR} to {tree}", file=sys.stderr, flush=True)
    subprocess.run(["git", "clone", "-q", str(MIRROR), str(tree)], check=True)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], cache: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user+sys of the process and every descendant it waited
    for: the worker pool, git) and stderr of one command."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          stdin=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    cpu = _children_cpu() - cpu
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed (rc={proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, cpu, proc.stderr


def phases(stderr: str) -> dict[str, float]:
    text = " ".join(stderr.split())  # rich may wrap the line
    m = _PHASES.search(text)
    out: dict[str, float] = {}
    if m:
        for part in m.group(1).split(","):
            bits = part.split()
            if len(bits) >= 2 and bits[-1].endswith("s"):
                try:
                    out[" ".join(bits[:-1])] = float(bits[-1][:-1])
                except ValueError:
                    pass
    return out


def scan_pair(tree: Path, jobs: int, history: bool, work: Path, no_cache: bool) -> tuple[ScanRun, ScanRun]:
    """Cold then warm, in one fresh cache directory; the two JSON outputs must be identical
    (and identical to a ``--no-cache`` run when ``no_cache``)."""
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
    outs = []
    runs = []
    for label in ("cold", "warm", "no-cache") if no_cache else ("cold", "warm"):
        out = work / f"scan-{'hist' if history else 'nohist'}-{label}.json"
        cmd = [CS_AUDIT, "scan", str(tree), "--format", "json", "-o", str(out), "-j", str(jobs), "-v"]
        if not history:
            cmd.append("--no-history")
        if label == "no-cache":
            cmd.append("--no-cache")
            print("# verify: the same scan with --no-cache ...", file=sys.stderr, flush=True)
        wall, cpu, err = run(cmd, cache)
        runs.append(ScanRun(wall, cpu, phases(err)))
        outs.append(out)
    for other in outs[1:]:
        if not filecmp.cmp(outs[0], other, shallow=False):
            sys.exit(f"scans differ with and without caches: {outs[0]} {other}")
    shutil.rmtree(cache, ignore_errors=True)
    return runs[0], runs[1]


def blame_runs(tree: Path, jobs: int, repeat: int, work: Path) -> tuple[list[ScanRun], list[ScanRun]]:
    """The history phase alone, ``repeat`` times cold and warm: one scan primes the facts
    cache, then before each cold run the blame cache (``<cache>/cs-audit/blame``) is
    deleted, and the warm run follows it."""
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
    cmd = [CS_AUDIT, "scan", str(tree), "--format", "json", "-o", os.devnull, "-j", str(jobs), "-v"]
    print("# blame: priming the facts cache ...", file=sys.stderr, flush=True)
    run(cmd, cache)
    cold: list[ScanRun] = []
    warm: list[ScanRun] = []
    for i in range(repeat):
        print(f"# blame cold+warm, run {i + 1}/{repeat} ...", file=sys.stderr, flush=True)
        shutil.rmtree(cache / "cs-audit" / "blame", ignore_errors=True)
        for runs in (cold, warm):
            wall, cpu, err = run(cmd, cache)
            runs.append(ScanRun(wall, cpu, phases(err)))
    shutil.rmtree(cache, ignore_errors=True)
    return cold, warm


def range_run(tree: Path, spec: str, jobs: int, out: Path) -> RangeRun:
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=out.parent))
    cmd = [CS_AUDIT, "report", str(tree), "--range", spec, "--format", "json", "-o", str(out), "-j", str(jobs)]
    wall, cpu, err = run(cmd, cache)
    shutil.rmtree(cache, ignore_errors=True)
    result = RangeRun(wall, cpu)
    for line in err.splitlines():
        m = _COMMIT_LINE.match(line)
        if m:
            result.per_commit.append(float(m.group(4)))
        elif line.startswith("cs-audit:") and "commits in" in line:
            result.summary = line
    return result


_REFERENCE = r"""
import sys
from pathlib import Path
from cs_audit.ci.revisions import TreeAuditor
from cs_audit.git.repo import GitRepo
from cs_audit.render.json import render_json
tree, spec, out, jobs = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
repo = GitRepo.open(Path(tree))
with TreeAuditor(repo, tree, reuse=False, jobs=jobs) as auditor:
    for sha in repo.rev_range(spec):
        info = repo.commit_info(sha)
        (out / f"{info.date}_{info.short}.json").write_text(render_json(auditor.audit(sha)), encoding="utf-8")
"""


def verify_range(tree: Path, spec: str, jobs: int, got: Path, work: Path) -> None:
    """The range's reports against audits without cross-commit reuse (same facts cache: warm)."""
    ref = work / "range-reference"
    ref.mkdir()
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    print("# verify: auditing the range again without reuse ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-c", _REFERENCE, str(tree), spec, str(ref), str(jobs)], env=env, check=True)
    shutil.rmtree(cache, ignore_errors=True)
    names = sorted(p.name for p in got.iterdir())
    if names != sorted(p.name for p in ref.iterdir()):
        sys.exit("verify: the range wrote other reports than the reference")
    bad = [n for n in names if not filecmp.cmp(got / n, ref / n, shallow=False)]
    if bad:
        sys.exit(f"verify: {len(bad)} reports differ from the reference, e.g. {bad[0]} ({got} vs {ref})")
    print(f"# verify: {len(names)} reports identical to the reference", file=sys.stderr, flush=True)


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=DEFAULT_TREE, help="git work tree (default /tmp/ascend)")
    ap.add_argument("--range", dest="spec", default="HEAD~20..HEAD", help="A..B for report --range (default: 20 commits)")
    ap.add_argument("--part", choices=("scan", "blame", "range", "both"), default="both",
                    help="both = scan + range; blame = the history phase alone, repeated (not in both)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each measurement; medians are printed")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--verify", action="store_true",
                    help="scan: compare with a --no-cache run; range: compare with audits done without reuse")
    args = ap.parse_args()
    ensure_tree(args.tree)
    tree = args.tree.resolve()
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    count = subprocess.run(["git", "-C", str(tree), "rev-list", "--count", "HEAD"], capture_output=True,
                           text=True, check=True).stdout.strip()
    print(f"tree {tree} HEAD {head} ({count} commits), -j {args.jobs}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f}, repeat {args.repeat}")

    with tempfile.TemporaryDirectory(prefix="cs-audit-bench-history-") as tmp:
        work = Path(tmp)
        if args.part in ("scan", "both"):
            rows: dict[str, list[ScanRun]] = {}
            for i in range(args.repeat):
                for history in (True, False):
                    name = "history" if history else "no-history"
                    print(f"# scan {name} cold+warm, run {i + 1}/{args.repeat} ...", file=sys.stderr, flush=True)
                    cold, warm = scan_pair(tree, args.jobs, history, work, args.verify and i == 0)
                    rows.setdefault(f"{name} cold", []).append(cold)
                    rows.setdefault(f"{name} warm", []).append(warm)
            print("\n| scan | wall s | cpu s | history phase s | parse s | joins+analysis s |")
            print("|---|---|---|---|---|---|")
            for name, runs in rows.items():
                print(f"| {name} | {med([r.wall for r in runs]):.2f} | {med([r.cpu for r in runs]):.2f} "
                      f"| {med([r.phases.get('history', float('nan')) for r in runs]):.2f} "
                      f"| {med([r.phases.get('parse/extract', float('nan')) for r in runs]):.2f} "
                      f"| {med([r.phases.get('joins', 0) + r.phases.get('analysis', 0) for r in runs]):.2f} |")
            for mode in ("cold", "warm"):
                diff = med([r.wall for r in rows[f"history {mode}"]]) - med([r.wall for r in rows[f"no-history {mode}"]])
                cpu = med([r.cpu for r in rows[f"history {mode}"]]) - med([r.cpu for r in rows[f"no-history {mode}"]])
                print(f"\nblame cost, {mode}: history phase {med([r.phases.get('history', 0) for r in rows[f'history {mode}']]):.2f} s; "
                      f"with - without history: wall {diff:+.2f} s, cpu {cpu:+.2f} s", end="")
            print()
        if args.part == "blame":
            cold, warm = blame_runs(tree, args.jobs, args.repeat, work)
            print("\n| blame (history phase of a scan whose facts are cached) | history s, median | min | max "
                  "| scan cpu s, median |")
            print("|---|---|---|---|---|")
            for name, runs in (("cold (no blame cache)", cold), ("warm", warm)):
                hist = [r.phases.get("history", float("nan")) for r in runs]
                print(f"| {name} | {med(hist):.2f} | {min(hist):.2f} | {max(hist):.2f} | {med([r.cpu for r in runs]):.2f} |")
            print("history s per run, cold: " + " ".join(f"{r.phases.get('history', float('nan')):.2f}" for r in cold))
        if args.part in ("range", "both"):
            runs: list[RangeRun] = []
            for i in range(args.repeat):
                out = work / f"range-{i}"
                print(f"# report --range {args.spec} cold, run {i + 1}/{args.repeat} ...", file=sys.stderr, flush=True)
                runs.append(range_run(tree, args.spec, args.jobs, out))
                if args.verify and i == 0:
                    verify_range(tree, args.spec, args.jobs, out, work)
            n = len(runs[0].per_commit)
            print(f"\n| report --range {args.spec} ({n} commits, cold) | run | total s | cpu s | first s | "
                  f"later mean s | later median s | later max s |")
            print("|---|---|---|---|---|---|---|---|")
            for i, r in enumerate(runs, 1):
                later = r.per_commit[1:]
                print(f"| | {i} | {r.wall:.2f} | {r.cpu:.2f} | {r.per_commit[0] if r.per_commit else float('nan'):.2f} "
                      f"| {statistics.fmean(later) if later else float('nan'):.2f} | {med(later):.2f} "
                      f"| {max(later) if later else float('nan'):.2f} |")
            if len(runs) > 1:
                print(f"| median | | {med([r.wall for r in runs]):.2f} | {med([r.cpu for r in runs]):.2f} "
                      f"| {med([r.per_commit[0] for r in runs]):.2f} "
                      f"| {med([statistics.fmean(r.per_commit[1:]) for r in runs]):.2f} "
                      f"| {med([med(r.per_commit[1:]) for r in runs]):.2f} "
                      f"| {med([max(r.per_commit[1:]) for r in runs]):.2f} |")
            print("\nper commit s (run 1): " + " ".join(f"{s:.2f}" for s in runs[0].per_commit))
            print(runs[0].summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
