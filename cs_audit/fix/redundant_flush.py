"""The fix of ``redundant-flush``: drop the explicit ``flush()`` statement on a handle opened
with ``buffering=1`` (a block left empty gets ``pass``).  Line buffering writes at each
newline, so this keeps the output the same for writes that end their lines, which is what
the rule's finding says of the handle."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from cs_audit.fix.base import Target

RULE = "redundant-flush"

CASES = [
    ('fh = open(p, "a", buffering=1)\n\n\ndef emit(row):\n    fh.write(row + "\\n")\n    fh.flush()\n',
     'fh = open(p, "a", buffering=1)\n\n\ndef emit(row):\n    fh.write(row + "\\n")\n'),
    ('fh = open(p, "a", buffering=1)\n\n\ndef emit(row):\n    if row:\n        fh.flush()\n',
     'fh = open(p, "a", buffering=1)\n\n\ndef emit(row):\n    if row:\n        pass\n'),
]
DECLINED: list[str] = []


def transform(module: cst.Module, targets: list[Target], note: Callable[[int, str], None]) -> tuple[cst.Module, int]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    lines = {t.line for t in targets}
    drop: set[cst.SimpleStatementLine] = set()
    done: set[int] = set()

    class Find(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            line = positions[node].start.line
            if line in lines and len(node.body) == 1 and isinstance(node.body[0], cst.Expr):
                call = node.body[0].value
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "flush" \
                        and not call.args:
                    drop.add(node)
                    done.add(line)

    wrapper.module.visit(Find())
    for t in targets:
        if t.line not in done:
            note(t.line, "the flush() is not a statement of its own: left alone")
    if not drop:
        return module, 0
    return wrapper.module.visit(_Drop(drop)), len(drop)


class _Drop(cst.CSTTransformer):
    def __init__(self, drop: set[cst.SimpleStatementLine]) -> None:
        self.drop = drop

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        return cst.RemoveFromParent() if original in self.drop else updated

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated
