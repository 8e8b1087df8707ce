"""The stdlib-``ast`` index of one Python file: cheap structure for the whole tree.

Every Python file gets this index (about 8x faster than a libcst parse): import
aliases, logger names, module string constants, function definitions with a
normalised body hash, and — for files that hold no token worth a libcst pass —
the call edges the hot-path analysis needs.  The detailed facts (env reads,
emitters, syncs, gates) come from the libcst walker in ``facts.py``.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass

from cs_audit.model import CallSite, FunctionDef
from cs_audit.ruleset import RuleSet

#: functions shorter than this are too small to call a duplicated helper
MIN_DUPLICATE_STATEMENTS = 3


@dataclass(frozen=True, slots=True)
class ModuleIndex:
    aliases: dict[str, str]
    logger_names: frozenset[str]
    string_constants: dict[str, str]
    functions: tuple[FunctionDef, ...]
    calls: tuple[CallSite, ...]  # filled only when asked (files without a libcst pass)


def module_name(path: str) -> str:
    stem = path[:-3] if path.endswith(".py") else path
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    return stem.replace("/", ".")


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    base = ".".join(parts)
    if target:
        return f"{base}.{target}" if base else target
    return base


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`a.b.c` with the first name resolved through the import aliases."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(aliases.get(node.id, node.id))
    elif isinstance(node, ast.Call):
        inner = dotted(node.func, aliases)
        if inner is None:
            return None
        parts.append(inner + "()")
    else:
        return None
    return ".".join(reversed(parts))


class _Normaliser(ast.NodeTransformer):
    """Renames params and locals positionally and drops docstrings, so bodies that
    differ only by local names hash the same."""

    def __init__(self, local_names: set[str]) -> None:
        self.local_names = local_names
        self.mapping: dict[str, str] = {}

    def _rename(self, name: str) -> str:
        if name not in self.local_names:
            return name
        return self.mapping.setdefault(name, f"_v{len(self.mapping)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name(id=self._rename(node.id), ctx=node.ctx), node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        return ast.arg(arg=self._rename(node.arg), annotation=None)


def _local_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    if func.args.vararg:
        names.add(func.args.vararg.arg)
    if func.args.kwarg:
        names.add(func.args.kwarg.arg)
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def body_hash(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) < MIN_DUPLICATE_STATEMENTS and sum(1 for _ in ast.walk(ast.Module(body=body, type_ignores=[]))) < 25:
        return ""
    normaliser = _Normaliser(_local_names(func))
    args = normaliser.visit(func.args)
    normalised = [normaliser.visit(stmt) for stmt in body]
    dump = ast.dump(args, annotate_fields=False) + "".join(ast.dump(s, annotate_fields=False) for s in normalised)
    return hashlib.sha1(dump.encode()).hexdigest()[:16]


class _Indexer(ast.NodeVisitor):
    def __init__(self, path: str, rs: RuleSet, with_calls: bool) -> None:
        self.module = module_name(path)
        self.is_package = path.endswith("__init__.py")
        self.rs = rs
        self.with_calls = with_calls
        self.aliases: dict[str, str] = {}
        self.logger_names: set[str] = set()
        self.string_constants: dict[str, str] = {}
        self.functions: list[FunctionDef] = []
        self.calls: list[CallSite] = []
        self.scope: list[tuple[str, str]] = []  # (kind, name)
        self.loop_depth = 0

    # imports -------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                head = alias.name.split(".")[0]
                self.aliases.setdefault(head, head)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            base = resolve_relative(self.module, self.is_package, node.level, node.module)
        for alias in node.names:
            if alias.name == "*":
                continue
            self.aliases[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name

    # scopes --------------------------------------------------------------
    def _qualname(self, name: str) -> str:
        parts: list[str] = []
        for kind, scope_name in self.scope:
            parts.append(scope_name)
            if kind == "def":
                parts.append("<locals>")
        parts.append(name)
        return ".".join(parts)

    def _class_name(self) -> str | None:
        return self.scope[-1][1] if self.scope and self.scope[-1][0] == "class" else None

    def current_function(self) -> str | None:
        for i in range(len(self.scope) - 1, -1, -1):
            if self.scope[i][0] == "def":
                return self._qualname_at(i)
        return None

    def _qualname_at(self, index: int) -> str:
        parts: list[str] = []
        for i, (kind, scope_name) in enumerate(self.scope[: index + 1]):
            parts.append(scope_name)
            if kind == "def" and i < index:
                parts.append("<locals>")
        return ".".join(parts)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(("class", node.name))
        self.generic_visit(node)
        self.scope.pop()

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        qualname = self._qualname(node.name)
        params = tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs))
        returns_value = any(
            isinstance(n, ast.Return) and n.value is not None and not (isinstance(n.value, ast.Constant) and n.value.value is None)
            for n in _own_nodes(node)
        )
        decorators = tuple(
            d for d in (dotted(dec.func if isinstance(dec, ast.Call) else dec, self.aliases) for dec in node.decorator_list) if d
        )
        end = node.end_lineno or node.lineno
        self.functions.append(
            FunctionDef(
                qualname=qualname, name=node.name, class_name=self._class_name(),
                line=node.lineno, end_line=end, params=params, returns_value=returns_value,
                body_hash=body_hash(node), body_lines=end - node.lineno + 1, decorators=decorators,
            )
        )
        self.scope.append(("def", node.name))
        saved_loops, self.loop_depth = self.loop_depth, 0
        self.generic_visit(node)
        self.loop_depth = saved_loops
        self.scope.pop()

    visit_FunctionDef = _visit_def
    visit_AsyncFunctionDef = _visit_def

    # facts ---------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        if isinstance(value, ast.Call):
            factory = dotted(value.func, self.aliases)
            if factory in self.rs.logger_factories:
                for target in node.targets:
                    name = dotted(target, {})
                    if name:
                        self.logger_names.add(name)
        elif not self.scope and isinstance(value, ast.Constant) and isinstance(value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.string_constants[target.id] = value.value
        elif isinstance(value, (ast.Name, ast.Attribute)):
            origin = dotted(value, self.aliases)
            if origin in self.rs.env_mappings or origin in self.rs.env_calls:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.aliases[target.id] = origin
        self.generic_visit(node)

    def _visit_loop(self, node: ast.AST) -> None:
        self.loop_depth += 1
        self.generic_visit(node)
        self.loop_depth -= 1

    visit_For = _visit_loop
    visit_AsyncFor = _visit_loop
    visit_While = _visit_loop
    visit_ListComp = _visit_loop
    visit_SetComp = _visit_loop
    visit_DictComp = _visit_loop
    visit_GeneratorExp = _visit_loop

    def visit_Call(self, node: ast.Call) -> None:
        if self.with_calls:
            callee = dotted(node.func, self.aliases)
            if callee is not None:
                self.calls.append(
                    CallSite(
                        callee=callee, function=self.current_function(), line=node.lineno,
                        end_line=node.end_lineno or node.lineno, gates=(), loop_depth=self.loop_depth,
                        literal_args=(), eager=(), arg_calls=(), role=None, level=None, resolution="exact",
                        in_emitter_args=False, receiver=None, mode=None, line_buffered=False,
                        builds_path=False, bound_to=None, code="",
                    )
                )
        self.generic_visit(node)


def _own_nodes(func: ast.AST):
    """Nodes of a function body, not descending into nested defs/classes/lambdas."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def index_module(tree: ast.Module, path: str, rs: RuleSet, with_calls: bool) -> ModuleIndex:
    indexer = _Indexer(path, rs, with_calls)
    indexer.visit(tree)
    return ModuleIndex(
        aliases=indexer.aliases,
        logger_names=frozenset(indexer.logger_names),
        string_constants=indexer.string_constants,
        functions=tuple(indexer.functions),
        calls=tuple(indexer.calls),
    )
