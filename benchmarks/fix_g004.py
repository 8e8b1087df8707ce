"""`cs-audit fix --rule eager-format --write` on copies of SGLang 0.5.23 and vLLM 0.33, next
to ruff's own G004 fix (`ruff check --select G004 --fix --unsafe-fixes --preview`).

Run from the project root (each corpus is copied to a temporary folder; the corpora are
never written)::

    python benchmarks/fix_g004.py                    # both corpora
    python benchmarks/fix_g004.py --tree sglang

Per corpus it prints: ruff's G004 count before, after cs-audit's fix (each remaining site
listed with the fix's note for it, or "no note"), whether every changed file compiles
(`python -m compileall -q`), whether a second `cs-audit fix` finds nothing, the changed-line
count, and the same for ruff's own fix on a fresh copy.  Exits 1 if cs-audit leaves more
than 5% of the sites, a changed file does not compile or the second run has something to fix.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
CORPORA = {
    "sglang": Path("/root/.cache/cs-audit-corpora/sglang-0.5.23/sglang"),
    "vllm": Path("/root/.cache/cs-audit-corpora/vllm-0.33.0/vllm"),
}


def g004(root: Path) -> list[tuple[str, int]]:
    proc = subprocess.run(["ruff", "check", "--select", "G004", "--output-format", "json", "--no-cache", "--isolated",
                           "--exit-zero", str(root)], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"ruff failed: {proc.stderr[-2000:]}")
    return sorted((os.path.relpath(d["filename"], root), d["location"]["row"]) for d in json.loads(proc.stdout))


def cs_audit(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    return subprocess.run([sys.executable, "-m", "cs_audit", *args], capture_output=True, text=True, env=env)


def changed(original: Path, copy: Path) -> tuple[list[str], int]:
    files, lines = [], 0
    for path in sorted(original.rglob("*.py")):
        rel = path.relative_to(original)
        old, new = path.read_bytes(), (copy / rel).read_bytes()
        if old == new:
            continue
        files.append(str(rel))
        diff = difflib.unified_diff(old.decode("utf-8", "replace").splitlines(), new.decode("utf-8", "replace").splitlines(),
                                    lineterm="", n=0)
        lines += sum(1 for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---")))
    return files, lines


def _original_line(original: Path, fixed: Path, row: int) -> int:
    """The line of the original file that line ``row`` of the fixed one came from."""
    old = original.read_text(encoding="utf-8", errors="replace").splitlines()
    new = fixed.read_text(encoding="utf-8", errors="replace").splitlines()
    for tag, a1, _a2, b1, b2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if b1 <= row - 1 < b2:
            return a1 + (row - 1 - b1) + 1 if tag == "equal" else a1 + 1
    return row


def compiles(copy: Path, files: list[str]) -> bool:
    if not files:
        return True
    proc = subprocess.run([sys.executable, "-m", "compileall", "-q", *[str(copy / f) for f in files]],
                          capture_output=True, text=True)
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.returncode == 0


def run(name: str, source: Path, tmp: Path) -> bool:
    print(f"{name}: copying, fixing, checking (a few minutes)", file=sys.stderr, flush=True)
    before = g004(source)
    copy = tmp / f"{name}-cs" / name
    shutil.copytree(source, copy, symlinks=True)
    started = time.perf_counter()
    fixed = cs_audit("fix", str(copy), "--rule", "eager-format", "--write")
    secs = time.perf_counter() - started
    if fixed.returncode != 0:
        print(f"cs-audit fix failed (rc={fixed.returncode}): {fixed.stderr[-2000:]}")
        return False
    notes: dict[tuple[str, int], str] = {}
    for line in fixed.stderr.splitlines():
        m = re.match(r"(.+?):(\d+): eager-format: (.*)", line)
        if m:
            notes[(m.group(1), int(m.group(2)))] = m.group(3)
    after = g004(copy)
    files, lines = changed(source, copy)
    ok_compile = compiles(copy, files)
    second = cs_audit("fix", str(copy), "--rule", "eager-format")
    ok_second = second.returncode == 0 and second.stdout == ""

    ruff_copy = tmp / f"{name}-ruff" / name
    shutil.copytree(source, ruff_copy, symlinks=True)
    subprocess.run(["ruff", "check", "--select", "G004", "--fix", "--unsafe-fixes", "--preview", "--no-cache", "--isolated",
                    "--exit-zero", "-q", str(ruff_copy)], capture_output=True, text=True)
    ruff_after = g004(ruff_copy)
    ruff_files, ruff_lines = changed(source, ruff_copy)
    ruff_compile = compiles(ruff_copy, ruff_files)

    share = len(after) / len(before) if before else 0.0
    print(f"\n## {name}: {len(before)} G004 sites before\n")
    print("| fixer | G004 left | share left | files changed | lines changed | compiles | second run | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| cs-audit fix --rule eager-format --write | {len(after)} | {share:.1%} | {len(files)} | {lines} | "
          f"{'yes' if ok_compile else 'NO'} | {'nothing to fix' if ok_second else 'CHANGES AGAIN'} | {secs:.0f} |")
    rshare = len(ruff_after) / len(before) if before else 0.0
    print(f"| ruff --fix --unsafe-fixes --preview --select G004 | {len(ruff_after)} | {rshare:.1%} | {len(ruff_files)} | "
          f"{ruff_lines} | {'yes' if ruff_compile else 'NO'} | - | - |")
    print(f"\nLeft by cs-audit ({len(after)}), with the fix's note (lines of the original file):\n")
    for path, row in after:
        line = _original_line(source / path, copy / path, row)
        near = [(ln, n) for (p, ln), n in notes.items() if p == path and 0 <= line - ln <= 6]
        note = max(near)[1] if near else "no note: the scan saw no eager log call here"
        text = (source / path).read_text(encoding="utf-8", errors="replace").splitlines()[line - 1].strip()
        print(f"- `{path}:{line}` `{text[:90]}`: {note}")
    return share <= 0.05 and ok_compile and ok_second


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", choices=sorted(CORPORA), action="append")
    args = parser.parse_args()
    good = True
    with tempfile.TemporaryDirectory(prefix="cs-audit-fix-g004-") as tmp:
        for name in args.tree or sorted(CORPORA):
            if not CORPORA[name].is_dir():
                print(f"{name}: corpus not found at {CORPORA[name]}")
                good = False
                continue
            good = run(name, CORPORA[name], Path(tmp)) and good
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
