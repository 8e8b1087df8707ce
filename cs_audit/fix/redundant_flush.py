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
    ('fh = open(p, "a", buffering=1)\n\n\ndef emit(row):\n    fh.write(row)\n    if n % every == 0:\n        fh.flush()\n',
     'fh = open(p, "a", buffering=1)\n\n\ndef emit(row):\n    fh.write(row)\n'),
    ('fh = open(p, "a", buffering=1)\n\n\ndef emit(row):\n    if row:\n        fh.flush()\n    else:\n        fh.write(row)\n',
     'fh = open(p, "a", buffering=1)\n\n\ndef emit(row):\n    if row:\n        pass\n    else:\n        fh.write(row)\n'),
]


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

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
                                  ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        return cst.RemoveFromParent() if original in self.drop else updated

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        if not updated.body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.If | cst.RemovalSentinel:
        """An `if` left with nothing but `pass` and no `else` goes too, when its test has no
        side effects (names, attributes, literals, arithmetic and comparisons)."""
        body = updated.body
        if updated.orelse is None and isinstance(body, cst.IndentedBlock) and len(body.body) == 1 and \
                isinstance(body.body[0], cst.SimpleStatementLine) and isinstance(body.body[0].body[0], cst.Pass) and \
                not any(isinstance(s, cst.Pass) for s in _statements(original)) and _pure(updated.test):
            return cst.RemoveFromParent()
        return updated


def _statements(node: cst.If) -> list[cst.BaseSmallStatement]:
    body = node.body
    return [s for line in getattr(body, "body", ()) if isinstance(line, cst.SimpleStatementLine) for s in line.body]


def _pure(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(expr, cst.Attribute):
        return _pure(expr.value)
    if isinstance(expr, cst.BinaryOperation):
        return _pure(expr.left) and _pure(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _pure(expr.expression)
    if isinstance(expr, cst.BooleanOperation):
        return _pure(expr.left) and _pure(expr.right)
    if isinstance(expr, cst.Comparison):
        return _pure(expr.left) and all(_pure(c.comparator) for c in expr.comparisons)
    return False
