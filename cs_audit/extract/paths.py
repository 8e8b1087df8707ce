"""What kind of path a block of code is on, read from the code around it (``path_kind``):
``error`` (an ``except`` block, a branch that ends in ``raise`` or an error return) or
``rare`` (a branch that runs once or seldom: a once-flag, lazy initialisation, a cache miss
that fills the cache, a counter compared with a constant).  Anything else is ``normal``.

A context is ``(kind, reason, counter)``: ``counter`` names a value the branch is rare by
only if the module increments it (``self.n += 1``), which is known once the module is read."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Literal

from cs_audit.pyast import dotted_name, scope_nodes

PathKind = Literal["normal", "error", "rare"]
PathContext = tuple[str, str, str]

EXCEPT: PathContext = ("error", "in an `except` block", "")
_ERROR_NAME = re.compile(r"(?i)(error|fail|abort)")
_EXIT_CALLS = frozenset({"sys.exit", "exit", "os._exit", "os.abort", "quit"})
#: methods that store into a container (a cache filled on a miss, a `seen` set)
_STORES = frozenset({"add", "append", "setdefault", "update", "__setitem__", "put", "insert"})


def _error_exit(stmt: ast.stmt) -> str | None:
    """Why a branch's last statement ends it on an error (None: it does not)."""
    if isinstance(stmt, ast.Raise):
        return "on a branch that ends in `raise`"
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) in _EXIT_CALLS:
        return "on a branch that exits the process"
    if isinstance(stmt, ast.Return) and stmt.value is not None:
        value = stmt.value.func if isinstance(stmt.value, ast.Call) else stmt.value
        name = dotted_name(value)
        if name and _ERROR_NAME.search(name.rsplit(".", 1)[-1]):
            return f"on a branch that returns an error (`{name}`)"
    return None


#: record methods at warning level or above: a branch that only reports a problem is one
_PROBLEM_RECORDS = frozenset({"warning", "warn", "error", "exception", "critical", "fatal", "warning_once"})
_LEAVES = (ast.Return, ast.Continue, ast.Break)


def _problem_record(stmt: ast.stmt) -> str | None:
    """`logger.warning(...)` as a statement: the record's callee (None for anything else)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        if stmt.value.func.attr in _PROBLEM_RECORDS:
            return dotted_name(stmt.value.func)
    return None


def _reports_a_problem(body: list[ast.stmt]) -> str | None:
    """Why a branch is an anomaly branch: it does nothing but warn (and maybe leave), or it
    warns, sets defaults and leaves (`logger.warning(...); return None`)."""
    records = [r for r in map(_problem_record, body) if r]
    if not records:
        return None
    leaves = isinstance(body[-1], _LEAVES)
    rest = [stmt for stmt in body if _problem_record(stmt) is None and not isinstance(stmt, (ast.Pass, *_LEAVES))]
    if rest and not (leaves and all(isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) for stmt in rest)):
        return None
    return f"on a branch that only reports a problem (`{records[0]}`)"


def _unset_names(test: ast.expr, active: bool) -> list[tuple[str, str]]:
    """``(name, shape)`` of the values a branch runs while they are unset: ``flag`` (`not X`),
    ``lazy`` (`X is None`, `not hasattr(self, "x")`), ``cache`` (`k not in C`: C),
    ``counter`` (`X == 3`, `X < 3` with X a name)."""
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And) == active:
            return [found for value in test.values for found in _unset_names(value, active)]
        return []
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _unset_names(test.operand, not active)
    if isinstance(test, (ast.Name, ast.Attribute)):
        name = dotted_name(test)
        return [(name, "flag")] if name and not active else []
    if isinstance(test, ast.Call) and not active and dotted_name(test.func) == "hasattr" and len(test.args) == 2:
        owner, attr = dotted_name(test.args[0]), test.args[1]
        if owner and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
            return [(f"{owner}.{attr.value}", "lazy")]
        return []
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return []
    op, left, right = test.ops[0], test.left, test.comparators[0]
    name = dotted_name(left)
    none_right = isinstance(right, ast.Constant) and right.value is None
    if name and none_right and isinstance(op, (ast.Is, ast.IsNot)):
        return [(name, "lazy")] if isinstance(op, ast.Is) == active else []
    if isinstance(op, (ast.In, ast.NotIn)):
        container = dotted_name(right)
        return [(container, "cache")] if container and isinstance(op, ast.NotIn) == active else []
    int_right = isinstance(right, ast.Constant) and isinstance(right.value, int) and not isinstance(right.value, bool)
    if name and int_right and active and isinstance(op, (ast.Eq, ast.Lt, ast.LtE)):
        return [(name, "counter")]
    return []


def _stores(body: list[ast.stmt]) -> tuple[set[str], set[str]]:
    """The names a branch assigns, and the containers it stores into (outside nested defs)."""
    assigned: set[str] = set()
    stored: set[str] = set()
    for node in scope_nodes(body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STORES:
            owner = dotted_name(node.func.value)
            if owner:
                stored.add(owner)
        elif isinstance(node, ast.Call) and dotted_name(node.func) == "setattr" and len(node.args) >= 2:
            owner, attr = dotted_name(node.args[0]), node.args[1]
            if owner and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                assigned.add(f"{owner}.{attr.value}")
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Subscript):
                    owner = dotted_name(part.value)
                    if owner:
                        stored.add(owner)
                elif isinstance(part, (ast.Name, ast.Attribute)):
                    name = dotted_name(part)
                    if name:
                        assigned.add(name)
    return assigned, stored


_SHAPE_REASONS = {
    "flag": "under a once-flag (`{}` is set in the branch)",
    "lazy": "in lazy initialisation (`{}` is set in the branch)",
    "cache": "on a cache miss (the branch stores into `{}`)",
    "counter": "under a counter compared with a constant (`{}`)",
}


def branch_context(test: ast.expr, active: bool, body: list[ast.stmt],
                   persistent: Callable[[str], bool]) -> PathContext | None:
    """The path kind of ``body``, the branch of ``test`` that runs when it is ``active``;
    ``persistent(name)``: whether a name outlives a call (an attribute of `self`, a global),
    as a once-flag, a lazily set value or a cache must (a local is unset on every call)."""
    if body:
        why = _error_exit(body[-1]) or _reports_a_problem(body)
        if why is not None:
            return ("error", why, "")
    candidates = [(name, shape) for name, shape in _unset_names(test, active) if persistent(name)]
    if not candidates:
        return None
    assigned, stored = _stores(body)
    for name, shape in candidates:
        if shape == "counter":
            return ("rare", _SHAPE_REASONS[shape].format(name), name)
        if (name in stored) if shape == "cache" else (name in assigned):
            return ("rare", _SHAPE_REASONS[shape].format(name), "")
    return None


_HANDLER_NAME = re.compile(
    r"(?i)((^|_)(handle|on|log|report|record|notify)_(\w+_)?(fail(ure|ed)?|errors?|exception|abort(ed)?)(_|$)"
    r"|^_*(fail|abort)(_|$))")


def function_context(name: str) -> PathContext | None:
    """The path kind of a whole function's body by its name: a failure handler
    (`_log_failure`, `handle_error`, `on_exception`) runs when something failed."""
    if _HANDLER_NAME.search(name):
        return ("error", f"in `{name}`, a failure handler", "")
    return None


def resolve(contexts: tuple[PathContext, ...], incremented: frozenset[str]) -> tuple[str, str]:
    """``(path_kind, reason)`` of code under ``contexts`` (outermost first): the innermost
    context that holds (a counter only when the module increments it)."""
    for kind, reason, counter in reversed(contexts):
        if not counter or counter in incremented:
            return kind, reason
    return "normal", ""


ONCE_REASON = "a `*_once` record with a constant message: logged once per process"
