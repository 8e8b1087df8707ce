"""The fix of ``per-call-open``, only with ``--unsafe-fixes``: ``with open(p, "a") as fh:``
in an emitter becomes ``fh = _append_handle(p)``, a module-level handle per path opened
once (line-buffered) and kept open, and the body runs as it did.  Unsafe because it changes
when the file is closed (at exit, not after each event) and a file moved or deleted while
the process runs is no longer re-created; append mode only (a per-call "w" truncates)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from cs_audit.fix.base import Target

RULE = "per-call-open"

HELPER_STATEMENTS = ("_APPEND_HANDLES = {}", '''def _append_handle(path, **kwargs):
    """One append handle per path, opened once and kept open, line-buffered (cs-audit fix)."""
    handle = _APPEND_HANDLES.get(path)
    if handle is None or handle.closed:
        handle = _APPEND_HANDLES[path] = open(path, "a", buffering=1, **kwargs)
    return handle
''')
HELPER = HELPER_STATEMENTS[0] + "\n\n\n" + HELPER_STATEMENTS[1]

CASES = [
    ('import os\n\n\ndef log_row(d, row):\n    with open(os.path.join(d, "rows.jsonl"), "a") as fh:\n        fh.write(row + "\\n")\n',
     'import os\n\n' + HELPER + '\n\ndef log_row(d, row):\n    fh = _append_handle(os.path.join(d, "rows.jsonl"))\n'
     '    fh.write(row + "\\n")\n'),
]
DECLINED = [
    'def log_req(d, req):\n    with open(f"{d}/{req}.jsonl", "a") as fh:\n        fh.write(req + "\\n")\n',
    'import os\n\n\ndef dump(d, row):\n    with open(os.path.join(d, "last.json"), "w") as fh:\n        fh.write(row)\n',
]


def transform(module: cst.Module, targets: list[Target], note: Callable[[int, str], None]) -> tuple[cst.Module, int]:
    if not targets:
        return module, 0
    if not targets[0].data or not targets[0].data[0]:
        for t in targets:
            note(t.line, "a cached handle changes when the file is closed: only with --unsafe-fixes")
        return module, 0
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    lines = {t.line: t for t in targets}
    chosen: dict[cst.With, str] = {}
    seen: set[int] = set()

    class Find(cst.CSTVisitor):
        def visit_With(self, node: cst.With) -> None:
            line = positions[node].start.line
            if line not in lines:
                return
            seen.add(line)
            why = _why_not(node)
            if why:
                note(line, f"open() kept per call: {why}")
            else:
                chosen[node] = ""

    wrapper.module.visit(Find())
    for line in lines:
        if line not in seen:
            note(line, "open() kept per call: it is not the item of a `with` statement")
    if not chosen:
        return module, 0
    new = wrapper.module.visit(_Rewrite(chosen))
    if "_append_handle" not in {getattr(s, "name", cst.Name("x")).value for s in new.body if isinstance(s, cst.FunctionDef)}:
        from cs_audit.fix.env_read_hot import insert_statements

        new = insert_statements(new, list(HELPER_STATEMENTS))
    return new, len(chosen)


def _why_not(node: cst.With) -> str | None:
    if len(node.items) != 1 or node.asynchronous is not None:
        return "a `with` of several items"
    item = node.items[0]
    call = item.item
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "open"):
        return "not a plain open()"
    if not (item.asname and isinstance(item.asname.name, cst.Name)):
        return "the handle is not bound to a name"
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
    mode = positional[1].value if len(positional) > 1 else keywords["mode"].value if "mode" in keywords else None
    if not (isinstance(mode, cst.SimpleString) and mode.evaluated_value == "a"):
        return "not opened in append mode (\"a\")"
    if _built_name(positional[0].value if positional else None):
        return "the file name is built per call (a handle kept per name would pile up)"
    if len(positional) > 2 or set(keywords) - {"mode", "encoding", "errors", "newline"} or any(a.star for a in call.args):
        return "open() takes arguments other than the path, mode and encoding"
    return None


def _built_name(path: cst.BaseExpression | None) -> bool:
    """The last part of the path is an f-string, `.format`, `%` or `+`: a name per event."""
    if isinstance(path, cst.Call) and isinstance(path.func, cst.Attribute) and path.func.attr.value == "join" and path.args:
        path = path.args[-1].value
    if isinstance(path, cst.BinaryOperation) and isinstance(path.operator, cst.Divide):
        path = path.right
    return isinstance(path, (cst.FormattedString, cst.BinaryOperation)) or (
        isinstance(path, cst.Call) and isinstance(path.func, cst.Attribute) and path.func.attr.value == "format")


class _Rewrite(cst.CSTTransformer):
    def __init__(self, chosen: dict[cst.With, str]) -> None:
        self.chosen = chosen

    def leave_With(self, original: cst.With, updated: cst.With) -> cst.With | cst.FlattenSentinel[cst.BaseStatement]:
        if original not in self.chosen:
            return updated
        item = original.items[0]
        call = item.item
        assert isinstance(call, cst.Call) and item.asname is not None
        args = [a for i, a in enumerate(call.args) if i != 1 and (a.keyword is None or a.keyword.value != "mode")]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        target = item.asname.name
        assign = cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(target)], cst.Call(cst.Name("_append_handle"), args))],
            leading_lines=updated.leading_lines,
        )
        body = [cst.SimpleStatementLine(updated.body.body)] if isinstance(updated.body, cst.SimpleStatementSuite) else updated.body.body
        return cst.FlattenSentinel([assign, *body])
