"""The fix of ``eager-format``: a log call's eager message becomes lazy %-style arguments
(``lazy_logging``).  Cases, as Fixit's ``Invalid(..., expected_replacement=...)``: each
``(example, fixed)`` pair is what the fix makes of the example, and each ``DECLINED`` source
is left as it is (``tests/test_fix.py`` runs them all)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from cs_audit.fix.base import Target
from cs_audit.fix.gate_helpers import Gates, GateWrap, plan_gates
from cs_audit.fix.lazy_logging import Decline, lazy_call

RULE = "eager-format"

CASES = [
    ('logger.info(f"a {x} b {y!r} c {x:.3f}")\n', 'logger.info("a %s b %r c %.3f", x, y, x)\n'),
    ('logger.warning(f"{n:>8d} done, 100% of {total:,}")\n', None),
    ('logger.debug(f"{rate:5.1f}% of {name}")\n', 'logger.debug("%5.1f%% of %s", rate, name)\n'),
    ('logger.info("loaded {} in {:.2f}s".format(name, secs))\n', 'logger.info("loaded %s in %.2fs", name, secs)\n'),
    ('logger.info("pool %s size %d" % (pool, size))\n', 'logger.info("pool %s size %d", pool, size)\n'),
    ('logger.error("failed: " + str(exc))\n', 'logger.error("failed: %s", exc)\n'),
    ('logger.info(\n    f"rank {rank} "\n    f"got {n} tokens"\n)\n',
     'logger.info(\n    "rank %s "\n    "got %s tokens",\n    rank,\n    n\n)\n'),
    ('logger.warning_once(f"{name} is slow")\n', 'logger.warning_once("%s is slow", name)\n'),
    ('logger.info(f"done", exc_info=True)\n', 'logger.info("done", exc_info=True)\n'),
    ('logger.log(logging.INFO, f"step {i}")\n', 'logger.log(logging.INFO, "step %s", i)\n'),
    ('logger.debug(f"{x=} {y = :.2f} {z=!s}")\n', 'logger.debug("x=%r y = %.2f z=%s", x, y, z)\n'),
]
#: left alone, with a note: the message has no exact %-form
DECLINED = [
    'logger.info(f"{x:>{w}}")\n',
    'logger.info(f"{x:^10}")\n',
    'logger.info(f"{n:,}")\n',
    'logger.info(f"{x:10}")\n',
    'logger.info("a {0.name}".format(obj))\n',
    'logger.info("%s" % value)\n',
]


def transform(module: cst.Module, targets: list[Target], note: Callable[[int, str], None]) -> tuple[cst.Module, int]:
    """Log calls made lazy and helper calls gated in one visit of the module the scan's
    positions describe: a log call inside another's message, or a gated helper call below a
    message that grew, is found where the scan saw it."""
    log_targets = [t for t in targets if t.data and t.data[0] == "log"]
    helper_targets = [t for t in targets if t.data and t.data[0] == "helper"]
    if not log_targets and not helper_targets:
        return module, 0
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    calls = _calls(wrapper)
    lazy = _lazy_calls(_found(log_targets, calls, note), note)
    gates = plan_gates(wrapper.module, _found(helper_targets, calls, note), note)
    if not lazy and not gates.wrap:
        return module, 0
    return wrapper.module.visit(_Fix(lazy, gates)), len(lazy) + len(gates.wrap)


def _found(targets: list[Target], calls: list[tuple[cst.Call, int, int, int]],
           note: Callable[[int, str], None]) -> list[tuple[Target, cst.Call]]:
    """``_match``, with a note for each target whose call is not there."""
    chosen = _match(targets, calls)
    for target in targets:
        if not any(t is target for t, _ in chosen):
            note(target.line, f"`{target.callee}` not found at the line the scan gave")
    return chosen


def _lazy_calls(chosen: list[tuple[Target, cst.Call]], note: Callable[[int, str], None]) -> dict[cst.Call, int]:
    """Each chosen call that has a lazy form, with the index of its message."""
    out: dict[cst.Call, int] = {}
    for target, call in chosen:
        msg_index = _message_index(call)
        new = lazy_call(call, msg_index)
        if isinstance(new, Decline):
            note(target.line, f"`{target.callee}` left eager: {new.reason}")
        elif not new.deep_equals(call):
            out[call] = msg_index
    return out


def _message_index(call: cst.Call) -> int:
    return 1 if _name(call.func).rsplit(".", 1)[-1] == "log" else 0


def _name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_name(node.value)}.{node.attr.value}"
    return ""


def _calls(wrapper: MetadataWrapper) -> list[tuple[cst.Call, int, int, int]]:
    """Every call with its start line and column and end line."""
    positions = wrapper.resolve(PositionProvider)
    out = []

    class Collect(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            pos = positions[node]
            out.append((node, pos.start.line, pos.start.column, pos.end.line))

    wrapper.module.visit(Collect())
    return out


def _match(targets: list[Target], calls: list[tuple[cst.Call, int, int, int]]) -> list[tuple[Target, cst.Call]]:
    """Each target's call: the one of its name that starts where the scan said, else the only
    one of its name within the statement's lines."""
    out = []
    taken: set[int] = set()
    for target in targets:
        last = target.callee.rsplit(".", 1)[-1]
        named = [c for c in calls if _name(c[0].func).rsplit(".", 1)[-1] == last
                 and target.line <= c[1] <= target.end_line and id(c[0]) not in taken]
        exact = [c for c in named if c[1] == target.line and c[2] == target.col]
        pick = exact[0] if exact else named[0] if len(named) == 1 else None
        if pick is not None:
            taken.add(id(pick[0]))
            out.append((target, pick[0]))
    return out


class _Fix(GateWrap):
    """The lazy form is built from the updated call, so a log call in another's message is
    made lazy in both."""

    def __init__(self, lazy: dict[cst.Call, int], gates: Gates) -> None:
        super().__init__(gates)
        self.lazy = lazy

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        msg_index = self.lazy.get(original)
        if msg_index is None:
            return updated
        new = lazy_call(updated, msg_index)
        return updated if isinstance(new, Decline) else new
