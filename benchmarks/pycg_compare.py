"""Compare cs-audit's static call graph with PyCG's on PyCG's public micro-benchmark.

Usage::

    python benchmarks/pycg_compare.py /tmp/pycg-src [--details] [--json out.json]
    python benchmarks/pycg_compare.py /tmp/pycg-src --tools pycg            # PyCG alone
    python benchmarks/pycg_compare.py /tmp/pycg-src --cs-audit-cmd "env PYTHONPATH=/other/checkout python -m cs_audit"

The positional argument is a work tree of https://github.com/vitsalis/PyCG (a clone, a
``git worktree`` or an unpacked ``git archive``).  Nothing of PyCG is copied into this
project: the script reads ``<clone>/micro-benchmark/snippets/<category>/<name>/`` (``main.py``,
the other ``.py`` files, and ``callgraph.json``, the expected graph ``{"main.func": ["main.g",
"<builtin>.print", ...]}``) and runs PyCG from the clone's source tree (its PyPI wheel 0.0.8 is
broken).  Commands, one subprocess per snippet and tool, cwd an empty temporary directory::

    PYTHONPATH=<clone> <pycg-python> -m pycg --package <snippet> <snippet>/main.py
    <cs-audit-cmd> callgraph <snippet> --format pycg [--no-cache]

``--pycg-python`` defaults to this interpreter (PyCG has no dependencies beyond the standard
library and ``pkg_resources``); ``--cs-audit-cmd`` defaults to ``python -m cs_audit``, a leading
``python`` standing for this interpreter, and the project root is appended to ``PYTHONPATH`` so
that this checkout is found when nothing earlier on ``PYTHONPATH`` provides ``cs_audit``.
``--no-cache`` is passed when ``<cs-audit-cmd> callgraph --help`` mentions it.  A tool that
cannot be run, exits non-zero, times out or prints no JSON object is an *error* for that
snippet: it counts as an empty graph (its expected edges are missed) and is counted in the
``err`` columns.

Scoring (the same for both tools and for the expected graph):

* A graph is a set of edges (caller, callee), read from ``{caller: [callee, ...]}``.
* Names are normalised: every ``.<locals>`` segment is dropped (``m.f.<locals>.g`` -> ``m.f.g``,
  PyCG's own spelling); surrounding whitespace is stripped.  Nothing else is rewritten: lambdas
  keep PyCG's per-scope numbering (``main.<lambda1>``), a class instantiation is an edge to
  ``module.Class.__init__`` (the expected graphs never name a bare class or module as callee; a
  class without its own ``__init__`` gets no instantiation edge, an inherited one points to the
  base class's ``__init__``).
* Only in-tree edges count: both the caller and the callee must be in-tree.  A name is in-tree
  when its leading dotted parts name a module of the snippet, i.e. it equals a module name or
  starts with one followed by ``.``.  Module names are the snippet's ``.py`` file paths relative
  to the snippet directory, dotted, ``pkg/__init__.py`` naming ``pkg`` (a ``__init__.py`` at the
  snippet root names no module).  This drops ``<builtin>.*``, ``<**PyStr**>.*`` and external
  names such as ``ext.function``.
* Per snippet: true positives = expected & produced, missing = expected - produced, extra =
  produced - expected.  Precision and recall are micro-averaged over edges per category and in
  total (sum of true positives over sum of produced / expected edges); ``-`` when the
  denominator is zero.

Output: a markdown table (category | snippets | cs-audit P | cs-audit R | pycg P | pycg R |
cs-audit err | pycg err) on stdout; ``--details`` adds, per snippet, each tool's error and its
missing and extra edges; ``--json OUT`` writes the raw numbers, per snippet, per category and in
total.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("cs-audit", "pycg")
Edge = tuple[str, str]
BOX_CHARS = " \t│╭╮╰╯─┃━┏┓┗┛"


@dataclass
class ToolResult:
    edges: set[Edge] = field(default_factory=set)
    error: str | None = None


@dataclass
class Snippet:
    category: str
    name: str
    path: Path
    modules: frozenset[str]
    expected: set[Edge]
    results: dict[str, ToolResult] = field(default_factory=dict)


# ---------------------------------------------------------------------------- normalisation


def normalise(name: str) -> str:
    return ".".join(part for part in name.strip().split(".") if part != "<locals>")


def snippet_modules(snippet: Path) -> frozenset[str]:
    mods = set()
    for py in snippet.rglob("*.py"):
        parts = list(py.relative_to(snippet).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            mods.add(".".join(parts))
    return frozenset(mods)


def in_tree(name: str, modules: frozenset[str]) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:i]) in modules for i in range(1, len(parts) + 1))


def graph_edges(graph: object, modules: frozenset[str]) -> set[Edge]:
    if not isinstance(graph, dict):
        raise ValueError(f"expected a JSON object, got {type(graph).__name__}")
    edges = set()
    for caller, callees in graph.items():
        if not isinstance(callees, list):
            raise ValueError(f"callees of {caller!r} are not a list")
        src = normalise(str(caller))
        if not in_tree(src, modules):
            continue
        for callee in callees:
            dst = normalise(str(callee))
            if in_tree(dst, modules):
                edges.add((src, dst))
    return edges


# ---------------------------------------------------------------------------- running the tools


def run_json(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[object | None, str | None]:
    with tempfile.TemporaryDirectory(prefix="pycg-compare-") as cwd:
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError as exc:
            return None, f"command not found: {exc.filename or cmd[0]}"
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout:g}s"
    if proc.returncode != 0:
        # last line that says something (rich draws a box round typer's errors)
        lines = [ln.strip(BOX_CHARS) for ln in (proc.stderr or proc.stdout).splitlines()]
        said = [ln for ln in lines if ln]
        return None, f"exit {proc.returncode}: {said[-1][:300] if said else '(no output)'}"
    try:
        return json.loads(proc.stdout), None
    except json.JSONDecodeError as exc:
        return None, f"no JSON on stdout ({exc.msg})"


def with_pythonpath(env: dict[str, str], first: str | None = None, last: str | None = None) -> dict[str, str]:
    env = dict(env)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if first:
        parts.insert(0, first)
    if last:
        parts.append(last)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def cs_audit_base(cmd: str) -> list[str]:
    argv = shlex.split(cmd)
    if argv and argv[0] == "python":
        argv[0] = sys.executable
    return argv


def cs_audit_accepts_no_cache(base: list[str], env: dict[str, str]) -> bool:
    try:
        proc = subprocess.run([*base, "callgraph", "--help"], env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and "--no-cache" in proc.stdout


def run_tool(tool: str, snip: Snippet, args: argparse.Namespace, ctx: dict) -> ToolResult:
    if tool == "pycg":
        cmd = [args.pycg_python, "-m", "pycg", "--package", str(snip.path), str(snip.path / "main.py")]
        env = ctx["pycg_env"]
    else:
        cmd = [*ctx["cs_base"], "callgraph", str(snip.path), "--format", "pycg", *ctx["cs_extra"]]
        env = ctx["cs_env"]
    graph, error = run_json(cmd, env, args.timeout)
    if error is not None:
        return ToolResult(error=error)
    try:
        return ToolResult(edges=graph_edges(graph, snip.modules))
    except ValueError as exc:
        return ToolResult(error=f"bad graph: {exc}")


# ---------------------------------------------------------------------------- scoring


def load_snippets(clone: Path, categories: set[str] | None) -> list[Snippet]:
    root = clone / "micro-benchmark" / "snippets"
    if not root.is_dir():
        sys.exit(f"no micro-benchmark at {root}")
    snippets = []
    for cg in sorted(root.glob("*/*/callgraph.json")):
        path = cg.parent
        category = path.parent.name
        if categories and category not in categories:
            continue
        modules = snippet_modules(path)
        expected = graph_edges(json.loads(cg.read_text()), modules)
        snippets.append(Snippet(category, path.name, path.resolve(), modules, expected))
    return snippets


def ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def score(snippets: Iterable[Snippet], tools: Iterable[str]) -> dict:
    snippets = list(snippets)
    out: dict = {"snippets": len(snippets), "expected_edges": sum(len(s.expected) for s in snippets)}
    for tool in tools:
        tp = produced = errors = 0
        for s in snippets:
            res = s.results[tool]
            errors += res.error is not None
            tp += len(res.edges & s.expected)
            produced += len(res.edges)
        out[tool] = {
            "precision": ratio(tp, produced),
            "recall": ratio(tp, out["expected_edges"]),
            "tp": tp,
            "produced": produced,
            "errors": errors,
        }
    return out


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def markdown_table(per_cat: dict[str, dict], total: dict, tools: list[str]) -> str:
    head = "| category | snippets | cs-audit P | cs-audit R | pycg P | pycg R | cs-audit err | pycg err |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def row(label: str, s: dict) -> str:
        cells = [label, str(s["snippets"])]
        for tool in TOOLS:
            cells += [fmt(s[tool]["precision"]), fmt(s[tool]["recall"])] if tool in tools else ["n/r", "n/r"]
        cells += [str(s[tool]["errors"]) if tool in tools else "n/r" for tool in TOOLS]
        return "| " + " | ".join(cells) + " |"

    lines += [row(cat, s) for cat, s in per_cat.items()]
    lines.append(row("**total**", total))
    return "\n".join(lines)


def details(snippets: list[Snippet], tools: list[str]) -> str:
    out = ["", "## Details", ""]
    for s in snippets:
        out.append(f"### {s.category}/{s.name} ({len(s.expected)} expected in-tree edges)")
        for tool in tools:
            res = s.results[tool]
            missing = sorted(s.expected - res.edges)
            extra = sorted(res.edges - s.expected)
            status = f"error: {res.error}" if res.error else "ok"
            out.append(f"- {tool}: {status}; tp {len(res.edges & s.expected)}, missing {len(missing)}, extra {len(extra)}")
            out += [f"  - missing `{a} -> {b}`" for a, b in missing]
            out += [f"  - extra `{a} -> {b}`" for a, b in extra]
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clone", type=Path, help="work tree of github.com/vitsalis/PyCG")
    ap.add_argument("--details", action="store_true", help="list missing and extra edges per snippet")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write the raw numbers to OUT")
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset of: cs-audit,pycg (default both)")
    ap.add_argument("--cs-audit-cmd", default="python -m cs_audit", help="command that runs cs-audit (default: %(default)s)")
    ap.add_argument("--pycg-python", default=sys.executable, help="interpreter that runs pycg from the clone (default: this one)")
    ap.add_argument("--categories", help="comma-separated categories to run (default: all)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per tool run (default: %(default)s)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="snippets run in parallel")
    args = ap.parse_args(argv)

    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if bad := [t for t in tools if t not in TOOLS]:
        ap.error(f"unknown tool(s): {', '.join(bad)}")
    clone = args.clone.resolve()
    if "pycg" in tools and not (clone / "pycg" / "__main__.py").is_file():
        ap.error(f"{clone} has no pycg/__main__.py")
    categories = {c.strip() for c in args.categories.split(",")} if args.categories else None
    snippets = load_snippets(clone, categories)

    ctx: dict = {"pycg_env": with_pythonpath(os.environ, first=str(clone))}
    if "cs-audit" in tools:
        ctx["cs_base"] = cs_audit_base(args.cs_audit_cmd)
        ctx["cs_env"] = with_pythonpath(os.environ, last=str(PROJECT_ROOT))
        ctx["cs_extra"] = ["--no-cache"] if cs_audit_accepts_no_cache(ctx["cs_base"], ctx["cs_env"]) else []

    jobs = [(s, t) for s in snippets for t in tools]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for (s, t), res in zip(jobs, pool.map(lambda job: run_tool(job[1], job[0], args, ctx), jobs)):
            s.results[t] = res

    for tool in tools:
        failed = [s for s in snippets if s.results[tool].error]
        if failed:
            first = failed[0]
            print(
                f"{tool}: error on {len(failed)}/{len(snippets)} snippets; first, {first.category}/{first.name}: {first.results[tool].error}",
                file=sys.stderr,
            )

    by_cat: dict[str, list[Snippet]] = {}
    for s in snippets:
        by_cat.setdefault(s.category, []).append(s)
    per_cat = {cat: score(group, tools) for cat, group in by_cat.items()}
    total = score(snippets, tools)

    print(markdown_table(per_cat, total, tools))
    if args.details:
        print(details(snippets, tools))
    if args.json:
        raw = {
            "tools": tools,
            "commands": {
                "pycg": f"PYTHONPATH={clone} {args.pycg_python} -m pycg --package SNIPPET SNIPPET/main.py",
                "cs-audit": shlex.join([*ctx["cs_base"], "callgraph", "SNIPPET", "--format", "pycg", *ctx["cs_extra"]])
                if "cs-audit" in tools
                else None,
            },
            "total": total,
            "categories": per_cat,
            "snippets": [
                {
                    "category": s.category,
                    "name": s.name,
                    "modules": sorted(s.modules),
                    "expected": sorted(map(list, s.expected)),
                    **{
                        t: {
                            "error": s.results[t].error,
                            "tp": len(s.results[t].edges & s.expected),
                            "produced": len(s.results[t].edges),
                            "missing": sorted(map(list, s.expected - s.results[t].edges)),
                            "extra": sorted(map(list, s.results[t].edges - s.expected)),
                        }
                        for t in tools
                    },
                }
                for s in snippets
            ],
        }
        args.json.write_text(json.dumps(raw, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
