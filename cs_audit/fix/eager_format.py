"""The fix of ``eager-format``: a log call's eager message becomes lazy %-style arguments
(``lazy_logging``).  Cases, as Fixit's ``Invalid(..., expected_replacement=...)``: each
``(example, fixed)`` pair is what the fix makes of the example, and each ``DECLINED`` source
is left as it is (``tests/test_fix.py`` runs them all)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from cs_audit.fix.base import Target
from cs_audit.fix.gate_helpers import gate_calls
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
    log_targets = [t for t in targets if t.data and t.data[0] == "log"]
    helper_targets = [t for t in targets if t.data and t.data[0] == "helper"]
    fixed = 0
    if log_targets:
        module, fixed = _lazy(module, log_targets, note)
    if helper_targets:
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        chosen = _match(helper_targets, _calls(wrapper))
        for target in helper_targets:
            if not any(t is target for t, _ in chosen):
                note(target.line, f"`{target.callee}` not found at the line the scan gave")
        module, gated = gate_calls(wrapper.module, chosen, note)
        fixed += gated
    return module, fixed


def _lazy(module: cst.Module, log_targets: list[Target], note: Callable[[int, str], None]) -> tuple[cst.Module, int]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    calls = _calls(wrapper)
    chosen = _match(log_targets, calls)
    replacements: dict[cst.Call, cst.Call] = {}
    for target, call in chosen:
        msg_index = 1 if _name(call.func).rsplit(".", 1)[-1] == "log" else 0
        new = lazy_call(call, msg_index)
        if isinstance(new, Decline):
            note(target.line, f"`{target.callee}` left eager: {new.reason}")
        elif not new.deep_equals(call):
            replacements[call] = new
    for target in log_targets:
        if not any(t is target for t, _ in chosen):
            note(target.line, f"`{target.callee}` not found at the line the scan gave")
    if not replacements:
        return module, 0
    return wrapper.module.visit(_Replace(replacements)), len(replacements)


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


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict[cst.Call, cst.Call]) -> None:
        self.replacements = replacements

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        new = self.replacements.get(original)
        return new if new is not None else updated
