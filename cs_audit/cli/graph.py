"""``callgraph`` (the resolved call graph, exported) and ``why`` (why a line is hot, or not)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from cs_audit.cli.common import CONFIG, app, check_writable, fail, output_path, plain, plural, write_output

_NO_CACHE = typer.Option(False, "--no-cache", help="neither read nor write the per-file facts cache")
_JOBS = typer.Option(None, "--jobs", "-j", min=1, help="worker processes (default: cores)")


def _model(path: Path, jobs: int | None, no_cache: bool, config_file: Path | None = None):
    from cs_audit.api import tree_model
    from cs_audit.cli import common as state
    from cs_audit.cli.scan import _load

    config, rs = _load(path, config_file, jobs=jobs, cache=False if no_cache else None)
    model, errors = tree_model(config, rs, keep=state.KEPT)
    return config, rs, model, errors


@app.command()
def callgraph(
    path: Path = typer.Argument(Path("."), help="tree to build the call graph of"),
    format: str = typer.Option("json", "--format", "-f", help="json (functions, edges, how each was found), pycg, dot"),
    output_raw: Optional[str] = typer.Option(None, "--output", "-o", help="write it here"),
    jobs: Optional[int] = _JOBS,
    no_cache: bool = _NO_CACHE,
    config_file: Optional[Path] = CONFIG,
) -> None:
    """Export the resolved call graph of PATH (pycg: PyCG's JSON shape, for its benchmarks)."""
    from cs_audit.render.callgraph import GRAPH_FORMATS, render_graph

    if format not in GRAPH_FORMATS:
        fail(f"unknown format {format!r}; choose from {', '.join(GRAPH_FORMATS)}")
    if not path.is_dir():
        fail(f"{path}: not a directory")
    output = output_path(output_raw)
    if output is not None:
        check_writable(output)
    from cs_audit.extract.discover import display_path
    from cs_audit.joins.callgraph import export_graph

    _, rs, model, errors = _model(path, jobs, no_cache, config_file)
    text = render_graph(export_graph(model, rs, display_path(str(path)), errors), format)
    if output:
        write_output(output, text)
    else:
        sys.stdout.write(text)


def _tree_of(file: Path) -> Path:
    """The tree a file belongs to: the nearest folder above it with a `.git`, a
    `pyproject.toml` or a `cs-audit.yaml`, else the outermost package holding it."""
    here = file.resolve().parent
    for folder in (here, *here.parents):
        if any((folder / marker).exists() for marker in (".git", "pyproject.toml", "cs-audit.yaml")):
            return folder
    top = here
    while (top / "__init__.py").is_file() and (top.parent / "__init__.py").is_file():
        top = top.parent
    return top


@app.command()
def why(
    location: str = typer.Argument(..., help="FILE:LINE of the site"),
    root: Optional[str] = typer.Argument(None, help="a hot root (qualname or its last part) to start from"),
    tree: Optional[Path] = typer.Option(None, "--tree", help="the scanned tree (default: the project holding FILE)"),
    jobs: Optional[int] = _JOBS,
    no_cache: bool = _NO_CACHE,
    config_file: Optional[Path] = CONFIG,
) -> None:
    """Print the chain of calls that makes FILE:LINE hot, with how each call was resolved,
    or say why it is not hot."""
    from cs_audit.joins.callgraph import chain_from, function_at, function_id, hot_chain_edges

    file_text, sep, line_text = location.rpartition(":")
    if not sep or not line_text.isdigit():
        fail(f"{location}: expected FILE:LINE")
    file, line = Path(file_text), int(line_text)
    if not file.is_file():
        fail(f"{file}: no such file")
    _check_line(file, line)
    tree = tree or _tree_of(file)
    try:
        rel = file.resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        fail(f"{file} is not inside {tree}")
    _, rs, model, _ = _model(tree, jobs, no_cache, config_file)
    ff = model.facts.get(rel)
    if ff is None:
        fail(f"{rel}: not analysed (not Python, excluded, or it failed to parse)")
    f = function_at(ff, line)
    if f is None:
        print(f"{plain(rel)}:{line} is module-level code: it runs once, on import")
        return
    key = (rel, f.qualname)
    name = function_id(model, key)
    if root:
        starts = sorted(k for k in model.functions if function_id(model, k) == root or k[1] == root or k[1].endswith(f".{root}"))
        if not starts:
            fail(f"{root}: no function of {tree} is so named")
        chains = [(s, chain_from(model, s, key)) for s in starts]
        chains = [(s, c) for s, c in chains if c or s == key]
        if not chains:
            print(f"{plain(rel)}:{line} is in {plain(name)}, which {plain(root)} does not reach through default-on calls")
            _why_not(model, key, rs)
            return
        start, edges = min(chains, key=lambda sc: len(sc[1]))
        _print_chain(model, rel, line, name, start, edges, f"from {function_id(model, start)}")
        return
    freq = model.freq_default.get(key)
    if freq is None:
        reach = model.freq_any.get(key)
        if reach is not None:
            edges = hot_chain_edges(model, key, default_only=False)
            start = edges[0].caller if edges else key
            gated = [e.switch.text for e in edges if e.switch]
            _print_chain(model, rel, line, name, start, edges,
                         f"hot ({reach}) only with {', '.join(dict.fromkeys(gated)) or 'a switch'} set")
            return
        print(f"{plain(rel)}:{line} is in {plain(name)}, which no hot root reaches")
        _why_not(model, key, rs)
        return
    edges = hot_chain_edges(model, key)
    start = edges[0].caller if edges else key
    _print_chain(model, rel, line, name, start, edges, _default_verdict(model, rs, rel, f.qualname, line, freq))


def _check_line(file: Path, line: int) -> None:
    """End the command (exit 2) unless ``file`` has a line ``line``: asking past its end is
    a typo, not module-level code, and is answered before the scan."""
    from cs_audit.files import text_lines

    try:
        lines = text_lines(file.resolve(), -1)  # a symlink's file, as the scan's facts are
    except OSError as exc:
        fail(f"{file}: {exc}")
    count = len(lines) - (lines[-1] == "")  # the empty rest after the last line break is no line
    if not 1 <= line <= count:
        fail(f"{file}:{line}: no such line (the file has {plural(count, 'line')})")


def _default_verdict(model, rs, rel: str, function: str, line: int, freq: str) -> str:
    """"hot by default"; or the switch that gates the line's own sites (``joins.runs.run_of``),
    when its function runs by default but the line only with a switch set; or the guard
    (``joins.runs.path_at``) that keeps the line from running every time its chain does."""
    from cs_audit.joins.runs import first, path_at, run_of

    ff = model.facts[rel]
    facts = [c for c in ff.calls if c.line == line] + [r for r in ff.env_reads if r.line == line]
    switch = first(run_of(model, rel, function, fact.gates, fact, rs).switch for fact in facts)
    if switch is not None:
        return f"its function is hot ({freq}) by default, but this line runs only with {plain(switch.text)} set"
    kind, reason, _ = path_at(model, rel, function, line)
    if kind == "normal":
        return f"hot ({freq}) by default"
    return f"reached ({freq}) by default, but not every time: {kind} path, {plain(reason)}"


def _print_chain(model, rel: str, line: int, name: str, start, edges, verdict: str) -> None:
    from cs_audit.joins.chains import chain_lines

    print(f"{plain(rel)}:{line} is in {plain(name)}: {verdict}")
    for text in chain_lines(model, start, edges):
        print(f"  {plain(text)}")


def _why_not(model, key, rs) -> None:
    from cs_audit.joins.callgraph import function_id, is_once_function, unresolved_calls_of

    callers = model.callers.get(key, [])
    if callers and all(e.how == "property" for e in callers) and is_once_function(model.functions.get(key), rs) \
            and any(e.caller in model.freq_any for e in callers):
        print("  a cached property: its getter runs on the first read of each instance, not on every read; read at:")
        for e in callers[:5]:
            print(f"    {plain(e.path)}:{e.site.line} `{plain(e.site.code)}`")
        return
    if callers:
        print("  its callers in the graph, none reached from a hot root:")
        for e in callers[:5]:
            who = function_id(model, e.caller) if e.caller else model.facts[e.path].module
            print(f"    {plain(who)}  ({plain(e.path)}:{e.site.line}, {e.how})")
    else:
        print("  no caller found in the tree")
    missing = unresolved_calls_of(model, key)
    if missing:
        print("  calls so named that resolved to nothing (a caller may hide there):")
        for path, site in missing:
            print(f"    {plain(path)}:{site.line} `{plain(site.code)}`")
