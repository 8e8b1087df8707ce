"""Event loops of one file: `while` loops that never end on their own and call a step.

A serving engine's scheduler or engine core runs in a loop like
``while True: self.scheduler.step()`` (or ``while not self._shutdown: ...``); the function
holding it is where every step starts, so the joins make it a hot root
(``joins.roots``).  The rule, from the rule data (``rules/hot_paths.yaml`` ``event_loops``):

* the test cannot turn false through the loop's own work: a true constant, or a check of
  stop/run flags (names matching ``stop_flags``: a name, an attribute or a call without
  arguments, negated or not, joined by ``and``/``or``);
* no ``break`` of this loop and no ``return`` on the normal path: one inside an ``except``
  handler (the error path) or under an ``if`` whose test checks a stop flag (the shutdown
  path) does not end the loop on its own; ``raise`` never counts;
* its body (the test included, nested functions left out) calls a method named like a step
  (``step_calls``, leading underscores ignored).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from cs_audit.extract.scopes import raw_dotted
from cs_audit.model import EventLoop

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def event_loops(whiles: Sequence[tuple[ast.While, str]], step_calls: frozenset[str],
                stop_flags: re.Pattern[str]) -> tuple[EventLoop, ...]:
    """The event loops among ``whiles`` (each `while` of a function with the function's
    qualname: the index meets them as it walks the statements), in file order."""
    if not whiles or not step_calls:
        return ()
    found = [loop for loop in (_event_loop(stmt, function, step_calls, stop_flags) for stmt, function in whiles) if loop is not None]
    found.sort(key=lambda loop: (loop.line, loop.function))
    return tuple(found)


def step_loops(top_whiles: Sequence[tuple[ast.While, str]], root_names: frozenset[str]) -> tuple[EventLoop, ...]:
    """The step loop of each function named like a root that drives its steps from one (a hot
    root marked ``loop``: a generation loop such as `while not finished: ...`, whatever its
    test): the longest of its `while` loops in no loop and no branch (``top_whiles``; a set-up
    loop before it is prologue), its `else:` left out (it runs once, when the loop ends)."""
    if not top_whiles or not root_names:
        return ()
    longest: dict[str, ast.While] = {}
    for stmt, function in top_whiles:
        if function.rpartition(".")[2] not in root_names:
            continue
        best = longest.get(function)
        if best is None or _span(stmt) >= _span(best):  # the later of two alike: set-up comes first
            longest[function] = stmt
    found = [EventLoop(function, stmt.lineno, stmt.body[-1].end_lineno or stmt.lineno, stmt.body[0].lineno, ())
             for function, stmt in longest.items()]
    found.sort(key=lambda loop: (loop.line, loop.function))
    return tuple(found)


def _span(loop: ast.While) -> int:
    return (loop.body[-1].end_lineno or loop.lineno) - loop.lineno


def _event_loop(loop: ast.While, function: str, step_calls: frozenset[str], stop_flags: re.Pattern[str]) -> EventLoop | None:
    if not _never_false(loop.test, stop_flags) or _exits_on_its_own(loop.body, stop_flags):
        return None
    steps = sorted(_step_calls([loop.test, *loop.body], step_calls))
    if not steps:
        return None
    return EventLoop(function, loop.lineno, loop.end_lineno or loop.lineno, loop.body[0].lineno, tuple(steps))


def _is_stop_flag(test: ast.expr, stop_flags: re.Pattern[str]) -> bool:
    """A name, attribute or argument-free call named like a stop/run flag (`self._running`,
    `self._handle_shutdown()`, `self._stop_event.is_set()`), negated or not."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Call):
        if test.args or test.keywords:
            return False
        test = test.func
    name = raw_dotted(test)
    return name is not None and stop_flags.search(name) is not None


def _never_false(test: ast.expr, stop_flags: re.Pattern[str]) -> bool:
    """The loop's test turns false only when someone asks the loop to stop."""
    if isinstance(test, ast.Constant):
        return bool(test.value) and test.value is not Ellipsis
    if isinstance(test, ast.BoolOp):
        return all(_never_false(value, stop_flags) for value in test.values)
    return _is_stop_flag(test, stop_flags)


def _checks_stop_flag(test: ast.expr, stop_flags: re.Pattern[str]) -> bool:
    """Whether an `if` test reads a stop flag anywhere (`if self._stop and not pending:`)."""
    return any(_is_stop_flag(node, stop_flags) for node in ast.walk(test) if isinstance(node, (ast.Name, ast.Attribute, ast.Call)))


def _exits_on_its_own(body: list[ast.stmt], stop_flags: re.Pattern[str]) -> bool:
    """A `return`, or a `break` of this loop, on the normal path of ``body``: not in an
    `except` handler, not under an `if` that checks a stop flag."""
    work: list[tuple[ast.AST, bool]] = [(stmt, False) for stmt in body]  # (node, inside a nested loop)
    while work:
        node, nested = work.pop()
        if isinstance(node, ast.Return) or (isinstance(node, ast.Break) and not nested):
            return True
        if isinstance(node, _SCOPES) or isinstance(node, ast.expr):
            continue
        if isinstance(node, ast.If) and _checks_stop_flag(node.test, stop_flags):
            continue  # the shutdown path
        if isinstance(node, (ast.Try, ast.TryStar)):
            for stmt in (*node.body, *node.orelse, *node.finalbody):
                work.append((stmt, nested))
            continue  # the handlers are the error path
        inner = nested or isinstance(node, _LOOPS)
        for child in ast.iter_child_nodes(node):
            # a nested loop's `else` runs after it, inside this loop: its `break` is this loop's
            work.append((child, nested if isinstance(node, _LOOPS) and child in node.orelse else inner))
    return False


def _step_calls(nodes: list[ast.AST], step_calls: frozenset[str]) -> set[str]:
    """The calls of step-like methods among ``nodes`` (nested functions left out), as written."""
    out: set[str] = set()
    work = list(nodes)
    while work:
        node = work.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name is not None and name.lstrip("_") in step_calls:
                out.add(raw_dotted(func) or name)
        work.extend(ast.iter_child_nodes(node))
    return out
