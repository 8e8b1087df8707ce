"""Interleaved A/B timing of two checkouts of cs-audit on the real corpora.

    python benchmarks/bench_pairs.py --a /path/to/old/checkout --b . --pairs 3 [--trees vllm,sglang]

Each pair runs A then B (B then A on odd pairs), so both see the same machine minutes apart
(wall seconds, and CPU seconds: user+sys of the run's whole process tree, the figure to compare
when other work shares the cores):
  cold         an empty cache (``XDG_CACHE_HOME`` a fresh temp dir), history off, ``-j 2``
  warm         the same command again (median of ``--repeats`` runs: the first one right after a
               long cold scan is the noisiest)
  call added   on a temp copy of the tree, primed, then a ``print(...)`` inserted before the
               middle statement of its largest Python file and scanned (median of ``--repeats``
               rounds, each adding one more call)
A checkout is run as ``python -m cs_audit`` with ``PYTHONPATH`` at it (its own ``rules/`` must
be importable as ``cs_audit.rules``, as in a checkout with a ``cs_audit/rules`` link or an
installed copy); its bytecode is written first, as installing a wheel does (with
``PYTHONDONTWRITEBYTECODE`` set, a checkout would otherwise be compiled on every run).  Prints the median wall seconds per measure and version, and whether the JSON
reports of A and B were identical.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import precompile_cs_audit  # this folder's bench.py (run as a script, it is on the path)

CORPORA = Path(os.environ.get("CS_AUDIT_CORPORA", Path.home() / ".cache" / "cs-audit-corpora"))
TREES = {"vllm": CORPORA / "vllm-0.33.0" / "vllm", "sglang": CORPORA / "sglang-0.5.23" / "sglang"}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # totals of the waited-for children
    return usage.ru_utime + usage.ru_stime


def run(code: Path, root: Path, cache: Path, out: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one scan."""
    env = {**os.environ, "PYTHONPATH": str(code), "XDG_CACHE_HOME": str(cache)}
    cpu = _children_cpu()
    start = time.perf_counter()
    # -P and a neutral cwd: the checkout comes from PYTHONPATH alone, not from the current directory
    subprocess.run([sys.executable, "-P", "-m", "cs_audit", "scan", str(root), "--format", "json", "--no-history",
                    "-j", "2", "-o", str(out)], env=env, check=True, stdout=subprocess.DEVNULL, cwd=out.parent)
    return time.perf_counter() - start, _children_cpu() - cpu


def add_call(root: Path) -> None:
    largest = max(root.rglob("*.py"), key=lambda p: p.stat().st_size)
    lines = largest.read_text(encoding="utf-8").split("\n")
    middle = len(lines) // 2
    while middle < len(lines) and (not lines[middle].strip() or lines[middle][0] in " \t#)]}"):
        middle += 1
    lines.insert(middle, 'print("cs-audit bench: call added")')
    largest.write_text("\n".join(lines), encoding="utf-8")


def _median_run(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The run of median wall time (its CPU with it), of an odd or even number of runs."""
    return sorted(runs)[(len(runs) - 1) // 2]


def measure(code: Path, tree: Path, work: Path, edit_only: bool = False, repeats: int = 1) -> dict[str, tuple[float, float]]:
    cache = Path(tempfile.mkdtemp(dir=work))
    out = work / "report.json"
    times: dict[str, tuple[float, float]] = {}
    if not edit_only:
        times["cold"] = run(code, tree, cache, out)
        times["warm"] = _median_run([run(code, tree, cache, work / "warm.json") for _ in range(repeats)])
    copy = work / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(tree, copy)
    run(code, copy, cache, work / "primed.json")
    edits = []
    for _ in range(repeats):
        add_call(copy)
        edits.append(run(code, copy, cache, work / "edited.json"))
    times["call added"] = _median_run(edits)
    if edit_only:
        shutil.copy(work / "edited.json", out)
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(copy, ignore_errors=True)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, required=True, help="checkout A (the reference)")
    ap.add_argument("--b", type=Path, required=True, help="checkout B")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--trees", default="vllm,sglang")
    ap.add_argument("--edit-only", action="store_true", help="measure only the call-added edit (skip cold and warm)")
    ap.add_argument("--repeats", type=int, default=3, help="warm runs and call-added rounds per pair (their median is kept)")
    args = ap.parse_args()
    for code in (args.a, args.b):
        precompile_cs_audit(code.resolve() / "cs_audit")
    for name in args.trees.split(","):
        tree = TREES[name]
        results: dict[str, dict[str, list[tuple[float, float]]]] = {"A": {}, "B": {}}
        identical = True
        for pair in range(args.pairs):
            order = [("A", args.a), ("B", args.b)] if pair % 2 == 0 else [("B", args.b), ("A", args.a)]
            reports = {}
            for label, code in order:
                with tempfile.TemporaryDirectory() as work:
                    times = measure(code.resolve(), tree, Path(work), args.edit_only, args.repeats)
                    reports[label] = (Path(work) / "report.json").read_bytes()
                    # cold and warm must give the same bytes (the cache never changes the output)
                    digests = {name: hashlib.md5((Path(work) / name).read_bytes()).hexdigest()[:12]
                               for name in ("report.json", "warm.json") if (Path(work) / name).exists()}
                for key, value in times.items():
                    results[label].setdefault(key, []).append(value)
                print(f"{name} pair {pair + 1} {label}: " + ", ".join(f"{k} {w:.2f}s (cpu {c:.2f}s)" for k, (w, c) in times.items())
                      + f"; JSON md5 {digests}", flush=True)
            identical = identical and reports["A"] == reports["B"]
        print(f"\n{name}: median of {args.pairs} (JSON of A and B identical: {identical})")
        for key in results["A"]:
            for i, what in enumerate(("wall", "cpu")):
                a = statistics.median(r[i] for r in results["A"][key])
                b = statistics.median(r[i] for r in results["B"][key])
                print(f"  {key:<11} {what:<4} A {a:6.2f}s  B {b:6.2f}s  B/A {b / a:5.2f}")


if __name__ == "__main__":
    main()
