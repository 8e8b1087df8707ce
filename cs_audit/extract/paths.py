"""What kind of path a block of code is on, read from the code around it (``path_kind``):
``error`` (an ``except`` block, a branch that ends in ``raise`` or an error return) or
``rare`` (a branch that runs once or seldom: a once-flag, lazy initialisation, a cache miss
that fills the cache, a counter compared with a constant).  Anything else is ``normal``.

A context is ``(kind, reason, counter, line)``: ``counter`` names a value the branch is rare by
only if the module increments it (``self.n += 1``), which is known once the module is read;
``line`` is the guard's (the test, the ``except``, the ``def``), which reports name."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Literal

from cs_audit.frequency import PERIODIC_AT_LEAST
from cs_audit.pyast import dotted_name, is_none, scope_nodes

PathKind = Literal["normal", "error", "rare"]
PathContext = tuple[PathKind, str, str, int]


def except_context(line: int) -> PathContext:
    return ("error", "in an `except` block", "", line)
_ERROR_NAME = re.compile(r"(?i)(error|fail|abort)")
_EXIT_CALLS = frozenset({"sys.exit", "exit", "os._exit", "os.abort", "quit"})
#: methods that store into a container (a cache filled on a miss, a `seen` set)
_STORES = frozenset({"add", "append", "setdefault", "update", "__setitem__", "put", "insert"})


def _returns_normally_first(stmts: list[ast.stmt]) -> bool:
    """Whether one of ``stmts`` (a block's top-level statements) is an `if` whose branch ends
    in a `return` that is no error (``_error_exit``): a dispatch the block may leave by."""
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            for branch in (stmt.body, stmt.orelse):
                last = branch[-1] if branch else None
                if isinstance(last, ast.Return) and _error_exit(last) is None:
                    return True
    return False


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


def _rejects(rest: list[ast.stmt]) -> str | None:
    """Why what follows a check's `if ok: return False` is its anomaly path: it reports a
    problem and answers True (`logger.warning(...); ...; return True`: the call is rejected)."""
    return _problem_then(rest, True, "rejects")


def _fails(rest: list[ast.stmt]) -> str | None:
    """Why what follows `if ok: return True` is its failure path: it reports a problem and
    answers False or nothing (`if cache.put_if_fits(k, v): return True`; `logger.warning(...)`;
    `return False`)."""
    return _problem_then(rest, False, "fails")


def _problem_then(rest: list[ast.stmt], truthy: bool, how: str) -> str | None:
    """Why ``rest`` is the path a check ``how``s on: it reports a problem and its last statement
    returns a ``truthy`` constant (True), or, when not, False or nothing."""
    last = rest[-1]
    if not isinstance(last, ast.Return):
        return None
    value = last.value
    if truthy != (isinstance(value, ast.Constant) and value.value is True) or not truthy and not (
            value is None or isinstance(value, ast.Constant) and not value.value):
        return None
    record = next((r for r in map(_problem_record, rest) if r), None)
    return f"on the path a check {how} on (`{record}`, then `{ast.unparse(last)}`)" if record else None


def _attribute_of(call: ast.expr) -> str | None:
    """`owner.attr` of `getattr(owner, "attr", ...)` / `hasattr(owner, "attr")` (None otherwise)."""
    if not (isinstance(call, ast.Call) and dotted_name(call.func) in ("getattr", "hasattr") and 2 <= len(call.args) <= 3):
        return None
    owner, attr = dotted_name(call.args[0]), call.args[1]
    if owner and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
        return f"{owner}.{attr.value}"
    return None


def _name_or_attribute(node: ast.expr) -> str | None:
    """The value a test reads: a dotted name, or what `getattr(self, "x", d)` reads."""
    return dotted_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else _attribute_of(node)


#: the name of a module constant (`_UNRESOLVED`, `MISSING`)
_SENTINEL = re.compile(r"_*[A-Z][A-Z0-9_]*\Z")
#: a ``PathContext``'s counter for `X % interval == 0` with a named modulus: the branch is
#: periodic when the modulus holds at least ``PERIODIC_AT_LEAST`` by default (the joins decide)
PERIODIC_BY = "mod:"


def _unset_names(test: ast.expr, active: bool) -> list[tuple[str, str]]:
    """``(name, shape)`` of the values a branch runs while they are unset: ``flag`` (`not X`,
    `not getattr(self, "x", False)`), ``lazy`` (`X is None`, `not hasattr(self, "x")`),
    ``cache`` (`k not in C`: C), ``counter`` (`X == 3`, `X < 3` with X a name),
    ``throttle`` (`now - X >= T`, `now >= X`: X moved on in the branch), ``periodic``
    (`X % 100 == 0`)."""
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And) == active:
            return [found for value in test.values for found in _unset_names(value, active)]
        return []
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _unset_names(test.operand, not active)
    if isinstance(test, ast.Call) and dotted_name(test.func) == "hasattr":
        name = _attribute_of(test)
        return [(name, "lazy")] if name and not active else []
    if isinstance(test, (ast.Name, ast.Attribute, ast.Call)):
        name = _name_or_attribute(test)
        return [(name, "flag")] if name and not active else []
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return []
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if active and isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
        moved = [_name_or_attribute(side.right if isinstance(side, ast.BinOp) and isinstance(side.op, ast.Sub) else side)
                 for side in (left, right)]
        throttles = [(name, "throttle") for name in moved if name]
    else:
        throttles = []
    if isinstance(op, ast.Eq if active else ast.NotEq) and isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod):
        modulus = left.right
        counted = _name_or_attribute(left.left)
        if counted and isinstance(modulus, ast.Constant) and type(modulus.value) is int and modulus.value >= PERIODIC_AT_LEAST:
            return [(counted, "periodic")]
        # a named modulus may be 1 (`flush_every` defaults to every row): the value it holds by
        # default decides, in the joins (``PERIODIC_BY``)
        named = _name_or_attribute(modulus) if isinstance(modulus, (ast.Name, ast.Attribute)) else None
        if counted and named:
            return [(counted, PERIODIC_BY + named)]
    name = _name_or_attribute(left)
    # a sentinel constant stands for "not worked out yet" as None does (`X is _UNRESOLVED`)
    none_right = isinstance(right, ast.Constant) and right.value is None or (
        isinstance(right, (ast.Name, ast.Attribute)) and _SENTINEL.match((dotted_name(right) or "").rpartition(".")[2]) is not None)
    if name and none_right and isinstance(op, (ast.Is, ast.IsNot)):
        return [(name, "lazy")] if isinstance(op, ast.Is) == active else []
    if isinstance(op, (ast.In, ast.NotIn)):
        container = dotted_name(right)
        return [(container, "cache")] if container and isinstance(op, ast.NotIn) == active else []
    int_right = isinstance(right, ast.Constant) and isinstance(right.value, int) and not isinstance(right.value, bool)
    if name and int_right and active and isinstance(op, (ast.Eq, ast.Lt, ast.LtE)):
        return [(name, "counter")]
    return throttles


def _waited_past(test: ast.expr, active: bool, elapsed: Callable[[ast.expr], bool]) -> str | None:
    """The waited time a branch needs past a bound (`elapsed > limit`, or `elapsed < limit`
    failing), as its source text; None when it needs none (``_guard_bound``: no wait)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _waited_past(test.operand, not active, elapsed)
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And) != active:
            return None
        return next((w for v in test.values if (w := _waited_past(v, active, elapsed)) is not None), None)
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    op, left, right = test.ops[0], test.left, test.comparators[0]
    above = isinstance(op, (ast.Gt, ast.GtE)) == active
    if not isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
        return None
    waited, bound = (left, right) if above else (right, left)
    if _guard_bound(bound) or not elapsed(waited):
        return None
    return dotted_name(waited) or "the time waited"


def _guard_bound(bound: ast.expr) -> bool:
    """A bound no wait is measured against: zero, a negative number or one under a millisecond
    (`> 1e-9` guards a division)."""
    if isinstance(bound, ast.UnaryOp) and isinstance(bound.op, ast.USub):
        return True
    return isinstance(bound, ast.Constant) and isinstance(bound.value, (int, float)) and bound.value < 1e-3


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
    "throttle": "under a throttle (`{}` is moved on in the branch)",
    "periodic": "on every n-th call (`{} % n`)",
}


_CALLED_REASONS = {
    "flag": "under a once-flag (`{}` is set by a method the branch calls)",
    "lazy": "in lazy initialisation (`{}` is set by a method the branch calls)",
}


def _test_names(test: ast.expr) -> list[str]:
    return [n for n in (dotted_name(node) for node in ast.walk(test) if isinstance(node, (ast.Name, ast.Attribute))) if n]


def _event_names(test: ast.expr, events: re.Pattern[str], holds: bool = True,
                 persistent: Callable[[str], bool] | None = None) -> list[str]:
    """The names of events (``events`` searched in each name's last part) that must happen
    for ``test`` to hold (``holds``) or to fail: any operand of an `and` that holds (of an `or`
    that fails) may name one, every operand of an `or` that holds must (else the branch runs
    without it); a `not`, `!=` or `not in` turns that round (`if not in_capture:` runs on every
    step but the event's; what follows `if mode != EXTEND: return` runs on the event). A test
    of state that outlives the call (``persistent``) against None is one of presence: `is None`
    turns it round, `is not None` does not (`if self.chunked_req is not None:` runs while there
    is one); a parameter or local so tested (`timeout is not None`) is a value handed in."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _event_names(test.operand, events, not holds, persistent)
    if isinstance(test, ast.BoolOp):
        found = [_event_names(value, events, holds, persistent) for value in test.values]
        if isinstance(test.op, ast.Or) == holds and not all(found):
            return []
        return [name for names in found for name in names]
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right = test.left, test.comparators[0]
        if is_none(left):  # `None is not x`
            left, right = right, left
        tested = _name_or_attribute(left) if is_none(right) and persistent is not None else None
        presence = tested and persistent is not None and persistent(tested)
        turned = (ast.Eq, ast.Is) if presence else (ast.NotEq, ast.IsNot, ast.NotIn)
        if isinstance(test.ops[0], turned):
            holds = not holds
    if not holds:
        return []
    return [name for name in _test_names(test) if events.search(name.rsplit(".", 1)[-1])
            and not _PAST_EVENT.search(name.rsplit(".", 1)[-1])]


#: a name that says an event is over (`warmup_done`): it holds in the steady state
_PAST_EVENT = re.compile(r"(?i)_(done|finished|complete[d]?|over|ended)$")


def _steady_off_names(test: ast.expr, active: bool, steady: re.Pattern[str]) -> list[str]:
    """The names of steady-state tests (``steady`` matched in full on each name's last part)
    that must be false for the branch of ``test`` taken when it is ``active`` to run: the
    `else` of `if mode.is_decode():`, `if not mode.is_decode():`, an operand of an `and` in
    either (an `or` in the `else`), `x is None` and `n == 0` as `not x`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _steady_off_names(test.operand, not active, steady)
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And) != active:
            return []  # one false operand of an `and` (one true of an `or`) is enough
        return [name for value in test.values for name in _steady_off_names(value, active, steady)]
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot))
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
        # `x is None` holds where `x` is false, `x is not None` where it is true
        return _steady_off_names(test.left, active != isinstance(test.ops[0], ast.Is), steady)
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.Gt))
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0
            and type(test.comparators[0].value) is int):
        # `n == 0` holds where `n` is false, `n != 0` and `n > 0` where it is true
        return _steady_off_names(test.left, active != isinstance(test.ops[0], ast.Eq), steady)
    if active or not isinstance(test, (ast.Name, ast.Attribute, ast.Call)):
        return []
    name = dotted_name(test.func if isinstance(test, ast.Call) else test)  # not the call's arguments
    return [name] if name and steady.fullmatch(name.rsplit(".", 1)[-1]) else []


def assert_context(test: ast.expr, event_names: re.Pattern[str] | None, line: int) -> PathContext | None:
    """What follows `assert <test>` runs only when the test holds: on an event when it names
    one (`assert batch.forward_mode.is_extend()`: a prefill-only function). A comparison
    checks a value, not the event (`assert is_prefilling is not None`: a mask that exists)."""
    tested = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    asserted = [value for value in tested if isinstance(value, (ast.Name, ast.Attribute, ast.Call))]
    events = [name for value in asserted for name in _event_names(value, event_names)] if event_names is not None else []
    return ("rare", f"on an event (`{events[0]}`, asserted)", "", line) if events else None


def branch_context(test: ast.expr, active: bool, body: list[ast.stmt], persistent: Callable[[str], bool],
                   line: int = 0, lookups: dict[str, str] | None = None,
                   event_names: re.Pattern[str] | None = None, loop: bool = False, rest: bool = False,
                   after_false: bool = False, steady_names: re.Pattern[str] | None = None,
                   precondition: bool = False, after_true: bool = False,
                   elapsed: Callable[[ast.expr], bool] | None = None,
                   called_stores: Callable[[list[ast.stmt]], frozenset[str]] | None = None) -> PathContext | None:
    """The path kind of ``body``, the branch of ``test`` that runs when it is ``active``;
    ``persistent(name)``: whether a name outlives a call (an attribute of `self`, a global),
    as a once-flag, a lazily set value or a cache must (a local is unset on every call);
    ``lookups``: locals that hold what a lookup in a container gave (`v = C.get(k)`: v -> C),
    so `if v is None:` is a miss of C; ``event_names``: names whose test is an event
    (a timeout, a warm-up) whatever the branch does; ``loop``: the body of a `while` on the
    test, which moving a bound on does not make rare; ``rest``: ``body`` is what follows
    `if <test>: return` in its block (whose warnings are not a branch of their own);
    ``after_false``: that `return` gives False or nothing (the normal answer of a check);
    ``after_true``: it gives True (a check's success, past which it fails);
    ``steady_names``: names whose test is true in the steady state (a decode step), so a
    branch that needs one false runs on an event; ``precondition``: ``body`` follows `if <test>:
    raise`, a check of the state every call passes, not the hit of a cache or a once-flag;
    ``elapsed(expr)``: whether an operand is the time a wait has taken, which a branch that
    runs once it passes a bound waits for (a slow reply, a stalled reader);
    ``called_stores(body)``: the `self.` attributes the methods ``body`` calls on `self` or
    `super()` set (`if not self.ready: self.set_up()`, which sets `self.ready`)."""
    # what follows `if C: return` and dispatches on (`if D: return run(...)`) before a final
    # `raise` returns normally on those: only the part past the last of them is the error path
    if body and not (rest and _returns_normally_first(body[:-1])):
        why = _error_exit(body[-1]) or (None if rest else _reports_a_problem(body)) or (_rejects(body) if after_false else None) or (
            _fails(body) if after_true else None)
        if why is not None:
            return ("error", why, "", line)
    waited = _waited_past(test, active, elapsed) if elapsed is not None and not loop else None
    if waited is not None:
        return ("rare", f"after a wait (`{waited}` past its bound)", "", line)
    found = _unset_names(test, active) if not precondition else []
    if lookups:
        found = [(lookups[name], "cache") if name in lookups and shape in ("lazy", "flag") else (name, shape)
                 for name, shape in found]
    candidates = [(name, shape) for name, shape in found if persistent(name)
                  and not (loop and (shape in ("throttle", "periodic") or shape.startswith(PERIODIC_BY)))]
    # a counter holds only if the module counts it up (``resolve``): an event in the same
    # test still makes the branch rare when it does not
    counted: PathContext | None = None
    if candidates:
        assigned, stored = _stores(body)
        for name, shape in candidates:
            if shape == "periodic":
                return ("rare", _SHAPE_REASONS[shape].format(name), "", line)
            if shape.startswith(PERIODIC_BY):
                modulus = shape[len(PERIODIC_BY):]
                return ("rare", f"on every n-th call (`{name} % {modulus}`)", shape, line)
            if shape == "counter":
                counted = counted or ("rare", _SHAPE_REASONS[shape].format(name), name, line)
            elif (name in stored) if shape == "cache" else (name in assigned):
                return ("rare", _SHAPE_REASONS[shape].format(name), "", line)
            elif shape in ("flag", "lazy") and called_stores is not None and name.startswith("self.") and name in called_stores(body):
                return ("rare", _CALLED_REASONS[shape].format(name), "", line)
    if event_names is not None and not loop:
        events = _event_names(test, event_names, active, persistent)
        if events:
            return ("rare", f"on an event (`{events[0]}`)", "", line)
    if steady_names is not None and not loop:
        off = _steady_off_names(test, active, steady_names)
        if off:
            return ("rare", f"off the steady state (`{off[0]}` false)", "", line)
    return counted


_HANDLER_NAME = re.compile(
    r"(?i)((^|_)(handle|on|log|report|record|notify)_(\w+_)?(fail(ure|ed)?|errors?|exception|abort(ed)?)(_|$)"
    r"|^_*(fail|abort|reject)(?!\w*_(if|unless|when)_)(_|$)|^_*((on|handle|report|log|warn)_)?(not_supported|unsupported)$)")


def function_context(name: str, line: int = 0) -> PathContext | None:
    """The path kind of a whole function's body by its name: a failure handler
    (`_log_failure`, `handle_error`, `on_exception`) runs when something failed, a rejection
    (`_reject_request`, `_not_supported`) when a request was refused; `reject_if_...` decides."""
    if _HANDLER_NAME.search(name):
        return ("error", f"in `{name}`, a failure handler", "", line)
    return None


def resolve(contexts: tuple[PathContext, ...], incremented: frozenset[str]) -> tuple[PathKind, str]:
    """``(path_kind, reason)`` of code under ``contexts`` (outermost first): the innermost
    context that holds (a counter only when the module increments it; a named modulus only in
    the joins, which know what it holds)."""
    for context in reversed(contexts):
        if holds(context, incremented):
            return context[0], context[1]
    return "normal", ""


def holds(context: PathContext, incremented: frozenset[str]) -> bool:
    # (a named modulus, ``PERIODIC_BY``, is never among the incremented names: the joins decide it)
    return not context[2] or context[2] in incremented


ONCE_REASON = "a `*_once` record with a constant message: logged once per process"
#: the record levels that report a problem: under an `if`, such a record is logged when
#: something went wrong (a timeout, a failed transfer, a mismatch), not every time
PROBLEM_LEVELS = frozenset({"warning", "error", "critical"})
CONDITIONAL_PROBLEM_REASON = "a {} record under a condition: logged when something goes wrong"
