"""Draw a seeded sample of mutants of cs_audit/analysis and cs_audit/joins and run each against the
tests that execute its line (issue #45). Not run by CI: a full pass is the suite once under coverage
plus a few minutes per mutant.

    # 1. which tests run which line: the suite once under coverage, in a copy of the checkout
    python benchmarks/mutation_sample.py map --work /tmp/mut --out /tmp/mut/map.json
    # 2. the sample: each mutant applied alone to the copy, its covering tests run with -x
    python benchmarks/mutation_sample.py run --work /tmp/mut --map /tmp/mut/map.json \\
        --seed 4501 --size 60 --out /tmp/mut/results.json
    # rerun some mutants against every covering test, and tests newer than the map after them
    python benchmarks/mutation_sample.py run ... --test-budget 1e9 --only 'joins/defaults.py:119:110:compare0,...' \\
        --also 'tests/test_levels.py::test_x,...'

Mutations (one per mutant, applied to the source text so every other line keeps its number): a
comparison operator (== / !=, < / <=, > / >=, is / is not, in / not in), `and` / `or`, `not x` -> `x`,
an arithmetic operator (+ / -, * / /, // / /, % / /), True / False, a number + 1, a string wrapped in
"XX", `return v` -> `return None`, break / continue. Docstrings, annotations, f-string parts and
`if TYPE_CHECKING:` blocks are not mutated. The sample is `random.Random(seed).sample` over every
candidate of every module (sorted by module, line, column, kind), so each module gets its share.

Each mutant runs only the test functions whose coverage context executed its first line, or the first
line of its statement when coverage records none for it (the map;
tests a subprocess runs are not seen by it), fastest first, until their summed time in the map
reaches `--test-budget` seconds (module-level code run at import: every test that runs the module);
`-x` stops at the first failure. A mutant no test executes is a
survivor ("no test"). The checkout itself is never written: everything runs in `--work`/tree.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("analysis", "joins")
COMPARE_SWAP = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
                ast.GtE: ast.Gt, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
              ast.Mod: ast.Div, ast.BitOr: ast.BitAnd, ast.BitAnd: ast.BitOr}


@dataclass(frozen=True)
class Mutant:
    module: str  # e.g. "joins/defaults.py"
    line: int
    col: int
    end_line: int
    end_col: int
    kind: str
    replacement: str
    description: str
    statement_line: int = 0  # first line of the statement holding it (what coverage records)

    @property
    def ident(self) -> str:
        return f"{self.module}:{self.line}:{self.col}:{self.kind}"


def copy_tree(work: Path) -> Path:
    """A fresh copy of the checkout's files (no .git, no caches) under work/tree."""
    tree = work / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache", ".pytest_cache", "reports"))
    return tree


def _excluded_nodes(tree: ast.Module) -> set[int]:
    """ids of nodes never mutated: docstrings, annotations, f-string parts, TYPE_CHECKING blocks."""
    skip: set[int] = set()

    def drop(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                drop(body[0])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            drop(node.returns)
        if isinstance(node, ast.arg):
            drop(node.annotation)
        if isinstance(node, ast.AnnAssign):
            drop(node.annotation)
        if isinstance(node, ast.JoinedStr):
            drop(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            drop(node)
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            drop(node)
    return skip


def _span(node: ast.AST) -> tuple[int, int, int, int]:
    return node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0


def _expr(node: ast.expr) -> str:
    """The mutated expression in parentheses, on one line (`apply` keeps the span's line count)."""
    return f"({ast.unparse(node)})"


def candidates(module: str, source: str) -> list[Mutant]:
    tree = ast.parse(source)
    skip = _excluded_nodes(tree)
    statement_of: dict[int, int] = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.stmt):
            for child in ast.iter_child_nodes(stmt):
                if not isinstance(child, ast.stmt):
                    statement_of.update((id(n), stmt.lineno) for n in ast.walk(child))
    found: list[Mutant] = []

    def add(node: ast.AST, kind: str, replacement: str, description: str) -> None:
        line, col, end_line, end_col = _span(node)
        found.append(Mutant(module, line, col, end_line, end_col, kind, replacement, description,
                            statement_of.get(id(node), line)))

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                swapped = COMPARE_SWAP.get(type(op))
                if swapped is None:
                    continue
                new = ast.Compare(node.left, [*node.ops[:i], swapped(), *node.ops[i + 1:]], node.comparators)
                add(node, f"compare{i}", _expr(new), f"{type(op).__name__} -> {swapped.__name__}")
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            add(node, "boolop", _expr(ast.BoolOp(other, node.values)),
                f"{type(node.op).__name__.lower()} -> {type(other).__name__.lower()}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add(node, "not", _expr(node.operand), "not x -> x")
        elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAP:
            swapped_op = BINOP_SWAP[type(node.op)]()
            add(node, "binop", _expr(ast.BinOp(node.left, swapped_op, node.right)),
                f"{type(node.op).__name__} -> {type(swapped_op).__name__}")
        elif isinstance(node, ast.AugAssign) and type(node.op) in BINOP_SWAP and node.lineno == node.end_lineno:
            swapped_op = BINOP_SWAP[type(node.op)]()
            add(node, "augassign", ast.unparse(ast.AugAssign(node.target, swapped_op, node.value)),
                f"{type(node.op).__name__}= -> {type(swapped_op).__name__}=")
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool):
                add(node, "const", repr(not value), f"{value} -> {not value}")
            elif isinstance(value, (int, float)):
                add(node, "const", repr(value + 1), f"{value!r} -> {value + 1!r}")
            elif isinstance(value, str):
                add(node, "const", repr("XX" + value + "XX"), f"{_short(value)!r} -> 'XX...XX'")
        elif isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            line, col, end_line, end_col = _span(node.value)
            found.append(Mutant(module, line, col, end_line, end_col, "return", "(None)", "return v -> return None",
                                node.lineno))
        elif isinstance(node, (ast.Break, ast.Continue)):
            other = "continue" if isinstance(node, ast.Break) else "break"
            add(node, "loopjump", other, f"{type(node).__name__.lower()} -> {other}")
    found.sort(key=lambda m: (m.module, m.line, m.col, m.kind))
    return found


def _short(text: str) -> str:
    return text if len(text) <= 24 else text[:21] + "..."


def apply(source: str, mutant: Mutant) -> str:
    """The source with the mutant's span replaced; a span over k lines keeps its k-1 line breaks in parentheses."""
    data = source.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    begin = starts[mutant.line - 1] + mutant.col
    end = starts[mutant.end_line - 1] + mutant.end_col
    replacement = mutant.replacement
    breaks = mutant.end_line - mutant.line
    if breaks:
        replacement = "(" + replacement + "\n" * breaks + ")"
    mutated = (data[:begin] + replacement.encode() + data[end:]).decode()
    compile(mutated, mutant.module, "exec")
    return mutated


def all_candidates(tree: Path) -> list[Mutant]:
    found: list[Mutant] = []
    for package in PACKAGES:
        for path in sorted((tree / "cs_audit" / package).glob("*.py")):
            module = f"{package}/{path.name}"
            found.extend(candidates(module, path.read_text()))
    return found


# --- the coverage map -------------------------------------------------------------------------

IMPORTED = "<import>"
DURATION = re.compile(r"^\s*([0-9.]+)s\s+(?:setup|call|teardown)\s+(\S+)")


def build_map(work: Path, out: Path) -> None:
    tree = copy_tree(work)
    rc = work / "coveragerc"
    data_file = work / ".coverage"
    rc.write_text(f"[run]\nsource = {', '.join('cs_audit.' + p for p in PACKAGES)}\n"
                  f"dynamic_context = test_function\ndata_file = {data_file}\n")
    log = work / "coverage-run.log"
    with log.open("w") as handle:
        subprocess.run([sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q",
                        "-p", "no:cacheprovider", "--durations=0", "-o", "addopts="],
                       cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stdout=handle, stderr=subprocess.STDOUT)
    write_map(tree, data_file, log, out)


def write_map(tree: Path, data_file: Path, log: Path, out: Path) -> None:
    from coverage import CoverageData  # only this script needs coverage

    data = CoverageData(basename=str(data_file))
    data.read()
    lines: dict[str, dict[str, list[str]]] = {}
    for filename in data.measured_files():
        rel = Path(filename).resolve().relative_to(tree.resolve() / "cs_audit").as_posix()
        by_line = data.contexts_by_lineno(filename)
        # "" is code run at import, before any test (module constants): IMPORTED stands for it
        lines[rel] = {str(n): sorted({t for c in ctxs if (t := _node_id(tree, c) if c else IMPORTED)})
                      for n, ctxs in by_line.items()}
    durations: dict[str, float] = {}
    for text in log.read_text().splitlines():
        match = DURATION.match(text)
        if match:
            node = match.group(2).split("[", 1)[0]
            durations[node] = durations.get(node, 0.0) + float(match.group(1))
    failed = sorted({m.group(1) for m in re.finditer(r"^FAILED (\S+)", log.read_text(), re.M)})
    out.write_text(json.dumps({"lines": lines, "durations": durations, "failed": failed}))


def _node_id(tree: Path, context: str) -> str | None:
    """'tests.test_x.TestY.test_z' -> 'tests/test_x.py::TestY::test_z'."""
    parts = context.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = Path(*parts[:cut]).with_suffix(".py")
        if (tree / path).is_file():
            return path.as_posix() + "::" + "::".join(parts[cut:])
    return None


# --- the runs ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    mutant: str
    description: str
    status: str  # killed / survived / timeout / no test
    tests_run: int
    tests_covering: int
    seconds: float
    killer: str = ""


def select_tests(mutant: Mutant, coverage_map: dict, budget: float) -> tuple[list[str], int]:
    lines = coverage_map["lines"].get(mutant.module, {})
    covering = lines.get(str(mutant.line)) or lines.get(str(mutant.statement_line), [])
    if covering == [IMPORTED]:  # module-level code: every test that runs the module's functions
        covering = sorted({t for tests in lines.values() for t in tests})
    covering = [t for t in covering if t != IMPORTED]
    failing = set(coverage_map.get("failed", ()))
    covering = [t for t in covering if t not in failing]
    durations = coverage_map["durations"]
    chosen: list[str] = []
    spent = 0.0
    for test in sorted(covering, key=lambda t: (durations.get(t, 0.0), t)):
        if chosen and spent + durations.get(test, 0.0) > budget:
            break
        chosen.append(test)
        spent += durations.get(test, 0.0)
    return chosen, len(covering)


def run_one(tree: Path, mutant: Mutant, tests: list[str], covering: int, timeout: float) -> Outcome:
    if not tests:
        return Outcome(mutant.ident, mutant.description, "no test", 0, covering, 0.0)
    path = tree / "cs_audit" / mutant.module
    original = path.read_text()
    path.write_text(apply(original, mutant))
    started = time.monotonic()
    try:
        process = subprocess.Popen([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                    "-o", "addopts=", *tests], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return Outcome(mutant.ident, mutant.description, "timeout", len(tests), covering,
                           time.monotonic() - started)
    finally:
        path.write_text(original)
        for cached in path.parent.glob(f"__pycache__/{path.stem}.*.pyc"):
            cached.unlink()
    seconds = time.monotonic() - started
    if process.returncode == 0:
        return Outcome(mutant.ident, mutant.description, "survived", len(tests), covering, seconds)
    killer = next((m.group(1) for m in re.finditer(r"^FAILED (\S+)", output, re.M)), f"exit {process.returncode}")
    return Outcome(mutant.ident, mutant.description, "killed", len(tests), covering, seconds, killer)


def draw(tree: Path, seed: int, size: int) -> tuple[list[Mutant], int]:
    everything = all_candidates(tree)
    sample = random.Random(seed).sample(everything, size)
    return sorted(sample, key=lambda m: (m.module, m.line, m.col, m.kind)), len(everything)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    cov = sub.add_parser("map")
    cov.add_argument("--work", type=Path, required=True)
    cov.add_argument("--out", type=Path, required=True)
    run = sub.add_parser("run")
    run.add_argument("--work", type=Path, required=True)
    run.add_argument("--map", type=Path, required=True)
    run.add_argument("--seed", type=int, default=4501)
    run.add_argument("--size", type=int, default=60)
    run.add_argument("--test-budget", type=float, default=90.0, help="seconds of covering tests per mutant")
    run.add_argument("--only", default="", help="comma-separated mutant ids to run instead of the sample")
    run.add_argument("--also", default="", help="comma-separated test ids run after the covering ones (tests newer than the map)")
    run.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.command == "map":
        build_map(args.work, args.out)
        return
    tree = copy_tree(args.work)
    sample, total = draw(tree, args.seed, args.size)
    if args.only:
        wanted = set(args.only.split(","))
        sample = [m for m in all_candidates(tree) if m.ident in wanted]
    coverage_map = json.loads(args.map.read_text())
    outcomes: list[Outcome] = []
    for mutant in sample:
        tests, covering = select_tests(mutant, coverage_map, args.test_budget)
        tests += [t for t in args.also.split(",") if t and t not in tests]
        timeout = 60 + 3 * sum(coverage_map["durations"].get(t, 0.0) for t in tests)
        outcome = run_one(tree, mutant, tests, covering, timeout)
        outcomes.append(outcome)
        print(f"{outcome.status:8} {outcome.seconds:6.1f}s {outcome.tests_run:3}/{outcome.tests_covering:<4} "
              f"{mutant.ident}  {mutant.description}  {outcome.killer}", flush=True)
        args.out.write_text(json.dumps({"seed": args.seed, "size": args.size, "candidates": total,
                                        "mutants": [asdict(m) for m in sample],
                                        "outcomes": [asdict(o) for o in outcomes]}, indent=1))
    counts = {s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "timeout", "no test")}
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
