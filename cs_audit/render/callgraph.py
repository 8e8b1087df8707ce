"""The resolved call graph written out: cs-audit's JSON, PyCG's JSON shape, Graphviz dot."""

from __future__ import annotations

import json
from collections import defaultdict

from cs_audit.model import CallGraph

GRAPH_FORMATS = ("json", "pycg", "dot")


def pycg_name(name: str) -> str:
    """A function's id as PyCG names it: nested functions without `<locals>`."""
    return name.replace(".<locals>", "")


def render_pycg(graph: CallGraph) -> str:
    """PyCG's shape: every module and function a key, its in-tree callees sorted."""
    out: dict[str, set[str]] = {m: set() for m in graph.modules}
    for f in graph.functions:
        out.setdefault(pycg_name(f.id), set())
    for e in graph.edges:
        out.setdefault(pycg_name(e.caller), set()).add(pycg_name(e.callee))
    return json.dumps({k: sorted(v) for k, v in sorted(out.items())}, indent=2, ensure_ascii=False) + "\n"


def render_graph_json(graph: CallGraph) -> str:
    data = {
        "root": graph.root,
        "hot_roots": {"configured": graph.roots_configured, "matched": sorted(f.id for f in graph.functions if f.root)},
        "modules": list(graph.modules),
        "functions": [
            {"id": f.id, "path": f.path, "line": f.line, "frequency": f.frequency, **({"root": f.root} if f.root else {})}
            for f in graph.functions
        ],
        "edges": [
            {"caller": e.caller, "callee": e.callee, "path": e.path, "line": e.line, "how": e.how, "switch": e.switch}
            for e in graph.edges
        ],
        "errors": [{"path": e.path, "kind": e.kind, "message": e.message} for e in graph.errors],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def render_dot(graph: CallGraph) -> str:
    """Graphviz: hot functions filled, gated edges dashed, each edge labelled how it was found."""
    hot = {f.id: f.frequency for f in graph.functions if f.frequency}
    lines = ["digraph callgraph {", '  node [shape=box, fontsize=10];']
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for e in graph.edges:
        seen[(e.caller, e.callee)].add(e.how + (" (gated)" if e.switch else ""))
    for name in sorted({n for pair in seen for n in pair}):
        style = f', style=filled, fillcolor="#f4b6b6", xlabel={json.dumps(hot[name])}' if name in hot else ""
        lines.append(f"  {json.dumps(name)} [label={json.dumps(name)}{style}];")
    for (caller, callee), hows in sorted(seen.items()):
        dashed = ", style=dashed" if all(h.endswith("(gated)") for h in hows) else ""
        lines.append(f"  {json.dumps(caller)} -> {json.dumps(callee)} [label={json.dumps(', '.join(sorted(hows)))}{dashed}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_graph(graph: CallGraph, format: str) -> str:
    if format == "pycg":
        return render_pycg(graph)
    if format == "dot":
        return render_dot(graph)
    return render_graph_json(graph)
