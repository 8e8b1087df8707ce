"""Which classes a call's receiver cannot hold where it is made.

`if runner.can_run_graph(batch): runner.execute(batch)`, with `runner` typed as a base whose
subclasses override `execute`: a subclass whose `can_run_graph` returns `False` on every path
never gets here, so the call does not land in its `execute`. Extraction records which methods
of the receiver a call needs to have returned true (``FileFacts.receiver_tests``: a test of the
call, or of a local its latest assignment set to a conjunction holding one); an edge into a
method is dropped when every class that may run it there (the method's class and the classes
built on it that keep it) answers one of those methods with a `False` literal."""

from __future__ import annotations

from typing import Protocol

from cs_audit.joins.values import Types
from cs_audit.model import FileFacts, FuncKey, FunctionDef


class Typed(Protocol):
    facts: dict[str, FileFacts]
    functions: dict[FuncKey, FunctionDef]


def needed_predicates(ff: FileFacts) -> dict[tuple[int, str], tuple[str, ...]]:
    """(line, callee) -> the receiver's methods the call needs to have returned true."""
    return {(line, callee): predicates for line, callee, predicates in ff.receiver_tests}


def refused_by_receiver(model: Typed, types: Types, target: FuncKey, predicates: tuple[str, ...]) -> bool:
    """Whether no class that may run ``target`` there passes the receiver's tests: each answers
    one of ``predicates`` with `False` on every path."""
    owner, _, method = target[1].rpartition(".")
    if not owner or "<locals>" in owner:
        return False
    cls = (target[0], owner)
    if cls not in types.classes:
        return False
    runners = [cls, *(sub for sub in types.subclasses(cls) if types.find_method(sub, method) == target)]
    return all(any(_always_false(model, types.find_method(runner, p)) for p in predicates) for runner in runners)


def _always_false(model: Typed, key: FuncKey | None) -> bool:
    f = model.functions.get(key) if key is not None else None
    return f is not None and bool(f.returns) and all(what == "false" and not gates for gates, what, _ in f.returns)
