"""The hot roots of a tree: the functions the configured root rules match (a rule's `class`
pattern matches a class or any class built on one it matches), and the functions holding an
event loop (``extract.loops``) that no rule matches, roots at ``step`` through the calls
inside their loops.

Imported by ``joins.callgraph`` (hotness); the report of which roots a tree has is
``analysis.roots``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from cs_audit.joins.values import Types
from cs_audit.model import EventLoop, FuncKey, FunctionDef
from cs_audit.ruleset import HotRoot, RuleSet


def configured_roots(functions: dict[FuncKey, FunctionDef], rs: RuleSet, types: Types) -> dict[FuncKey, HotRoot]:
    """The functions the root rules match, each with the rule that decides it: the first rule
    that matches its own class, else the first that matches a class its class is built on,
    nearest first (the tree's bases, transitively, as the call graph resolves them:
    ``Types.mro``), so `FastEngine(MyEngine).step` is a root by `{name: step, class: MyEngine}`.
    A base counts only when it defines the method itself: a class built on a marker whose
    name matches (`Model(IsAttentionFree)`, no `forward` of its own) is not its override."""
    names = {r.name for r in rs.hot_roots}
    by_class = {r.name for r in rs.hot_roots if r.class_glob is not None}
    out: dict[FuncKey, HotRoot] = {}
    for key, f in functions.items():
        if f.name not in names:
            continue
        rule = rs.hot_root_for(f.name, f.class_name, key[0])
        if rule is None and f.class_name is not None and f.name in by_class:
            cls = (key[0], f.qualname.rpartition(".")[0])
            for base in types.mro(cls)[1:] if cls in types.classes else ():
                if f.name not in types.methods.get(base, ()):
                    continue  # an override of the matched class's own method, not of a marker base's
                rule = rs.hot_root_for(f.name, base[1].rpartition(".")[2], key[0])
                if rule is not None:
                    break
        if rule is not None:
            out[key] = rule
    return out


def root_process(model: Any, rs: RuleSet, key: FuncKey) -> str:
    """The process side of a root function (a ``TreeModel``'s): its rule's, else an event loop's."""
    rule = model.root_rules.get(key)
    return rule.process if rule is not None else rs.event_loop_process


def event_loop_roots(model: Any, rs: RuleSet) -> dict[FuncKey, tuple[EventLoop, ...]]:
    """The functions of ``model`` (a ``TreeModel``) holding an event loop that no configured
    root matches, with their loops, in key order."""
    out: dict[FuncKey, list[EventLoop]] = defaultdict(list)
    for path, ff in model.facts.items():
        for loop in ff.event_loops:
            key = (path, loop.function)
            f = model.functions.get(key)
            if f is not None and key not in model.root_rules:
                out[key].append(loop)
    return {key: tuple(loops) for key, loops in sorted(out.items())}


def root_loops(model: Any) -> dict[FuncKey, tuple[EventLoop, ...]]:
    """The configured roots (of ``model``, a ``TreeModel``) whose steps are the times round a
    loop of theirs, with those loops: an event loop found in the function (the set-up before
    it and the clean-up after it run once, as for an event loop no rule matches), or, for a
    root marked ``loop``, its step loop (``FileFacts.step_loops``). Not a root another root
    reaches, through any chain: called within a step, it is no driver of steps, and all of it
    runs each time."""
    out: dict[FuncKey, tuple[EventLoop, ...]] = {}
    for key, rule in model.root_rules.items():
        ff = model.facts.get(key[0])
        if ff is None:
            continue
        loops = tuple(loop for loop in ff.event_loops if loop.function == key[1])
        if rule.loop and not loops:
            loops = tuple(loop for loop in ff.step_loops if loop.function == key[1])
        if loops and not _reached_from_another_root(model, key):
            out[key] = loops
    return dict(sorted(out.items()))


def _reached_from_another_root(model: Any, key: FuncKey) -> bool:
    """Whether a chain of calls leads from another root (configured or an event loop) to ``key``."""
    roots = model.root_rules.keys() | model.event_loops.keys()
    seen = {key}
    work = [key]
    while work:
        for edge in model.callers.get(work.pop(), ()):
            caller = edge.caller
            if caller is None or caller in seen:
                continue
            if caller in roots:
                return True
            seen.add(caller)
            work.append(caller)
    return False


def in_event_loop(loops: tuple[EventLoop, ...], line: int, with_test: bool = True) -> bool:
    """Whether ``line`` lies inside one of ``loops``: what runs per step (the rest of the
    function runs once).  ``with_test`` False: in an event loop's body only; its test is a stop
    check, and what a stop check calls when it stops is the shutdown path (a generation loop's
    test, `while self.unfinished(...)`, runs every time round)."""
    return any((loop.line if with_test or not loop.steps else loop.body_line) <= line <= loop.end_line for loop in loops)
