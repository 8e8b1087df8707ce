"""Event loops as hot roots: the functions holding an event loop (``extract.loops``) that no
configured root matches become roots at ``step``, through the calls inside their loops.

Imported by ``joins.callgraph`` (hotness); the report of which roots a tree has is
``analysis.roots``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from cs_audit.model import EventLoop, FuncKey
from cs_audit.ruleset import RuleSet


def event_loop_roots(model: Any, rs: RuleSet) -> dict[FuncKey, tuple[EventLoop, ...]]:
    """The functions of ``model`` (a ``TreeModel``) holding an event loop that no configured
    root matches, with their loops, in key order."""
    out: dict[FuncKey, list[EventLoop]] = defaultdict(list)
    for path, ff in model.facts.items():
        for loop in ff.event_loops:
            key = (path, loop.function)
            f = model.functions.get(key)
            if f is not None and rs.hot_root_for(f.name, f.class_name, path) is None:
                out[key].append(loop)
    return {key: tuple(loops) for key, loops in sorted(out.items())}


def in_event_loop(loops: tuple[EventLoop, ...], line: int, with_test: bool = True) -> bool:
    """Whether ``line`` lies inside one of ``loops``: what runs per step (the rest of the
    function runs once).  ``with_test`` False: in a body only; the test is a stop check, and
    what a stop check calls when it stops is the shutdown path."""
    return any((loop.line if with_test else loop.body_line) <= line <= loop.end_line for loop in loops)
