"""The eager-format fix for a helper that checks its own gate: ``cptrace(1, "alloc",
h=khash(t))``, whose body starts ``if not trace_enabled(level): return``, becomes
``if trace_enabled(1): cptrace(1, "alloc", h=khash(t))``: the tree's own predicate, with the
helper's parameters replaced by the call's arguments, tested before the arguments are built.

A helper with no such predicate (its gate is a local, `if not run_dir: return`), a call that
is not a statement of its own, or a predicate the call site cannot name is left alone with a
note.  The predicate then runs twice when on (here and in the helper): it must be a call of a
function, whose arguments are literals or the helper's parameters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from cs_audit.fix.base import Target
from cs_audit.fix.env_read_hot import module_imports

CASES = [
    ('from tr import cptrace\n\n\ndef khash(t):\n    return hash(t)\n\n\ndef execute_model(t):\n    cptrace(1, "alloc", h=khash(t))\n',
     'from tr import cptrace, trace_enabled\n\n\ndef khash(t):\n    return hash(t)\n\n\ndef execute_model(t):\n'
     '    if trace_enabled(1):\n        cptrace(1, "alloc", h=khash(t))\n'),
    ('import tr\n\n\ndef execute_model(t):\n    tr.cptrace(2, f"step {t}")\n',
     'import tr\n\n\ndef execute_model(t):\n    if tr.trace_enabled(2):\n        tr.cptrace(2, f"step {t}")\n'),
]
#: the helper module the case imports from
CASE_HELPER = ('import os\n\n\ndef trace_enabled(level):\n    return int(os.environ.get("CP_TRACE", "0")) >= level\n\n\n'
               'def cptrace(level, tag, **kv):\n    if not trace_enabled(level):\n        return\n    print(tag, kv)\n')


@dataclass(frozen=True)
class Predicate:
    func: str  # as written in the helper: `trace_enabled`, `self._on`
    args: tuple[str, ...]  # each a literal's source or `param:NAME`
    params: tuple[str, ...]  # the helper's parameters, in order
    defaults: tuple[tuple[str, str], ...]  # param -> default source
    #: an expression predicate (`os.environ.get("X")`): the module name the call site must import
    needs: str | None = None


def predicate_of(text: str, qualname: str) -> Predicate | str:
    """The predicate the helper ``qualname`` tests first in ``text``, or why there is none."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return "the helper's file does not parse"
    parts = qualname.split(".")
    body: list = list(module.body)
    func: cst.FunctionDef | None = None
    for i, part in enumerate(parts):
        found = next((s for s in body if isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == part), None)
        if found is None:
            return f"`{qualname}` is not found in its file"
        if i == len(parts) - 1:
            func = found if isinstance(found, cst.FunctionDef) else None
        else:
            body = list(found.body.body) if isinstance(found.body, cst.IndentedBlock) else []
    if func is None or not isinstance(func.body, cst.IndentedBlock):
        return f"`{qualname}` is not a function"
    stmts = [s for s in func.body.body]
    if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and isinstance(stmts[0].body[0], cst.Expr) and \
            isinstance(stmts[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        stmts = stmts[1:]  # the docstring
    params = tuple(p.name.value for p in func.params.params)
    local = _local_gate(stmts, module)
    if local is not None:
        return local
    first = stmts[0] if stmts else None
    if not (isinstance(first, cst.If) and first.orelse is None and isinstance(first.test, cst.UnaryOperation)
            and isinstance(first.test.operator, cst.Not) and _returns_only(first.body)):
        return "its gate is not `if not predicate(...): return` at its top"
    call = first.test.expression
    if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
        return "its gate is not a call of a predicate function"
    defaults = tuple((p.name.value, module.code_for_node(p.default)) for p in func.params.params if p.default is not None)
    args: list[str] = []
    for a in call.args:
        if a.star or a.keyword is not None:
            return "its predicate takes keyword or starred arguments"
        v = a.value
        if isinstance(v, cst.Name) and v.value in params:
            args.append(f"param:{v.value}")
        elif isinstance(v, (cst.SimpleString, cst.Integer, cst.Float)):
            args.append(module.code_for_node(v))
        else:
            return "its predicate's arguments are not literals or the helper's parameters"
    return Predicate(module.code_for_node(call.func), tuple(args), params, defaults)


def _local_gate(stmts: list, module: cst.Module) -> Predicate | None:
    """`v = os.environ.get("X")` then `if not v: return`: the value read is the predicate
    (its arguments literals, its root a module the call site must import too)."""
    if len(stmts) < 2 or not isinstance(stmts[0], cst.SimpleStatementLine) or not isinstance(stmts[1], cst.If):
        return None
    assign = stmts[0].body[0]
    test = stmts[1].test
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)
            and isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
            and isinstance(test.expression, cst.Name) and test.expression.value == assign.targets[0].target.value
            and stmts[1].orelse is None and _returns_only(stmts[1].body)):
        return None
    value = assign.value
    if not (isinstance(value, cst.Call) and all(isinstance(a.value, (cst.SimpleString, cst.Integer)) and not a.star
                                                and a.keyword is None for a in value.args)):
        return None
    root = value.func
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name):
        return None
    return Predicate(module.code_for_node(value), (), (), (), needs=root.value)


def _returns_only(block: cst.BaseSuite) -> bool:
    if not isinstance(block, cst.IndentedBlock) or len(block.body) != 1:
        return False
    line = block.body[0]
    return isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.Return) and \
        (line.body[0].value is None or (isinstance(line.body[0].value, cst.Name) and line.body[0].value.value == "None"))


def plan_gates(module: cst.Module, chosen: list[tuple[Target, cst.Call]], note: Callable[[int, str], None]) -> Gates:
    """The ``if <predicate>:`` that wraps each chosen helper call's statement (nodes of ``module``)."""
    parents: dict[cst.Call, cst.SimpleStatementLine] = {}
    stmt: cst.SimpleStatementLine | None
    for stmt in _simple_lines(module):
        if len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call):
            parents[stmt.body[0].value] = stmt
    wrap: dict[cst.SimpleStatementLine, cst.BaseExpression] = {}
    imports: dict[str, str] = {}  # helper name -> predicate name to add to its `from M import helper`
    for target, call in chosen:
        pred = target.data[1]
        if not isinstance(pred, Predicate):
            note(target.line, f"arguments of `{target.callee}` left eager: {pred}")
            continue
        stmt = parents.get(call)
        if stmt is None:
            note(target.line, f"arguments of `{target.callee}` left eager: the call is not a statement of its own")
            continue
        if pred.needs is not None and pred.needs not in module_imports(module):
            note(target.line, f"arguments of `{target.callee}` left eager: its gate `{pred.func}` needs `{pred.needs}`, "
                              "not imported here")
            continue
        test = _predicate_call(pred, call, target, imports)
        if isinstance(test, str):
            note(target.line, f"arguments of `{target.callee}` left eager: {test}")
            continue
        wrap[stmt] = test
    return Gates(wrap, imports)


def _simple_lines(module: cst.Module) -> list[cst.SimpleStatementLine]:
    out: list[cst.SimpleStatementLine] = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            out.append(node)

    module.visit(V())
    return out


def _predicate_call(pred: Predicate, call: cst.Call, target: Target, imports: dict[str, str]) -> cst.BaseExpression | str:
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if any(a.star for a in call.args):
        return "the call passes `*args` or `**kwargs`"
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    defaults = dict(pred.defaults)
    code = cst.Module([]).code_for_node
    args: list[str] = []
    for a in pred.args:
        if not a.startswith("param:"):
            args.append(a)
            continue
        name = a[len("param:"):]
        index = pred.params.index(name)
        # a method's `self` is bound: the call's arguments start at the next parameter
        if pred.params and pred.params[0] == "self":
            index -= 1
        value = positional[index] if 0 <= index < len(positional) else keywords.get(name)
        if value is None:
            if name not in defaults:
                return f"the predicate needs `{name}`, which the call does not pass"
            args.append(defaults[name])
            continue
        if not isinstance(value, (cst.Name, cst.SimpleString, cst.Integer, cst.Float, cst.Attribute)):
            return f"the argument for `{name}` is not a plain value (it would be evaluated twice)"
        args.append(code(value))
    func = call.func
    if pred.needs is not None:
        return cst.parse_expression(pred.func)
    if pred.func.startswith("self."):
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return "the predicate is a method and the call is not on `self`"
        where = pred.func
    elif "." in pred.func:
        return "the predicate is an attribute the call site cannot name"
    elif isinstance(func, cst.Attribute):
        where = f"{code(func.value)}.{pred.func}"
    elif isinstance(func, cst.Name):
        where = pred.func
        if target.data[2] != "local":
            imports[func.value] = pred.func
    else:
        return "the helper is not called by name"
    return cst.parse_expression(f"{where}({', '.join(args)})")


@dataclass
class Gates:
    #: statement of a helper call -> the test it is wrapped in
    wrap: dict[cst.SimpleStatementLine, cst.BaseExpression]
    #: helper name -> predicate name to add to its `from M import helper`
    imports: dict[str, str]


class GateWrap(cst.CSTTransformer):
    """Applies ``Gates`` to the module they were planned on; a subclass may change the
    statements' calls in the same visit (it wraps the updated statement)."""

    def __init__(self, gates: Gates) -> None:
        self.wrap, self.imports = gates.wrap, gates.imports

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
                                  ) -> cst.SimpleStatementLine | cst.If:
        test = self.wrap.get(original)
        if test is None:
            return updated
        inner = updated.with_changes(leading_lines=())
        return cst.If(test=test, body=cst.IndentedBlock(body=[inner]), leading_lines=updated.leading_lines)

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        if isinstance(updated.names, cst.ImportStar):
            return updated
        bound = {(a.evaluated_alias or a.name.value) for a in updated.names if isinstance(a.name, cst.Name)}
        add = [p for h, p in self.imports.items() if h in bound and p not in bound]
        if not add:
            return updated
        names = list(updated.names)
        last = names[-1]
        names[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        names += [cst.ImportAlias(name=cst.Name(p)) for p in dict.fromkeys(add)]
        return updated.with_changes(names=names)
