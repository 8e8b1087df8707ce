"""Names and scopes for the ``ast`` index: module names and relative imports, dotted
names through the import aliases, the names a function stores (``StoredNames``) and a
function's scope as the walk keeps it (``Scope``)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

from cs_audit.extract.paths import PathContext
from cs_audit.extract.tokens import SNIPPET_TOKENS, STORING_LITERALS, line_prefix
from cs_audit.model import BuiltMessage, GateRef
from cs_audit.pyast import CHILD_FIELDS as _CHILD_FIELDS
from cs_audit.pyast import SCOPES, scope_nodes
from cs_audit.pyast import child_fields as _child_fields


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
        parts = parts[: max(0, len(parts) - (level - 1))]
    base = ".".join(parts)
    if target:
        return f"{base}.{target}" if base else target
    return base


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`a.b.c` with the first name resolved through the import aliases."""
    cls = node.__class__
    if cls is ast.Name:  # the common cases first: `a`, `a.b`
        return aliases.get(node.id, node.id)  # type: ignore[attr-defined]
    if cls is ast.Attribute and node.value.__class__ is ast.Name:  # type: ignore[attr-defined]
        head = node.value.id  # type: ignore[attr-defined]
        return f"{aliases.get(head, head)}.{node.attr}"  # type: ignore[attr-defined]
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


def raw_dotted(node: ast.AST) -> str | None:
    cls = node.__class__
    if cls is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if cls is ast.Attribute and node.value.__class__ is ast.Name:  # type: ignore[attr-defined]
        return f"{node.value.id}.{node.attr}"  # type: ignore[attr-defined]
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def local_names(func: ast.FunctionDef | ast.AsyncFunctionDef, stores: StoredNames | None = None) -> set[str]:
    """Its parameters and the names stored anywhere in it (nested functions included);
    ``stores``: the module's ``StoredNames``, which skips the expressions that store nothing."""
    names = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    for extra in (func.args.vararg, func.args.kwarg):
        if extra:
            names.add(extra.arg)
    names.update(name_ids(func, stored_only=True) if stores is None else stores.stored_in([func], own_scope=False)[0])
    return names


#: the fields of a statement whose expressions are assigned to (their names are stored)
_TARGET_FIELDS = frozenset({"targets", "target", "optional_vars"})


class StoredNames:
    """The names a function stores, found through its statements: outside an assignment's
    targets an expression stores a name only in a comprehension (`for`) or an assignment
    expression (`:=`), so the expressions whose lines hold neither are not walked (most of
    a function's nodes).  ``storing_lines``: prefix counts of the lines holding either."""

    def __init__(self, lines: list[str], text: str, line_starts: list[int]) -> None:
        # the file's lines, not the indexer: a reference back to it would make a cycle, and the
        # workers run with the collector off
        self._lines, self._text, self._starts = lines, text, line_starts
        self._prefix: list[int] | None = None
        #: id of a function node -> ``local_names`` of it (the type walk and the body hashes ask again)
        self._local: dict[int, set[str]] = {}

    def local_names(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
        names = self._local.get(id(func))
        if names is None:
            names = self._local[id(func)] = local_names(func, self)
        return names

    def stored_in(self, body: list[ast.stmt], own_scope: bool) -> tuple[set[str], set[str], set[str]]:
        """``_own_scope_names(body)`` when ``own_scope``; else the names ``name_ids(..., stored_only=True)``
        finds under each of ``body`` (first of the three sets; the others empty)."""
        prefix = self._prefix
        if prefix is None:
            prefix = self._prefix = line_prefix(self._lines, self._text, self._starts, SNIPPET_TOKENS, STORING_LITERALS)
        walked: list[ast.expr] = []
        global_names: set[str] = set()
        declared: set[str] = set()
        stack: list[ast.AST] = list(body)
        pop, push, keep = stack.pop, stack.append, walked.append
        fields_of, AST, expr, targets = _CHILD_FIELDS, ast.AST, ast.expr, _TARGET_FIELDS
        Global, Nonlocal, stops = ast.Global, ast.Nonlocal, SCOPES
        while stack:
            node = pop()
            cls = node.__class__
            if own_scope:
                if cls is Global:
                    global_names.update(node.names)  # type: ignore[attr-defined]
                    declared.update(node.names)  # type: ignore[attr-defined]
                    continue
                if cls is Nonlocal:
                    declared.update(node.names)  # type: ignore[attr-defined]
                    continue
                if cls in stops:
                    continue
            fields = fields_of.get(cls)
            if fields is None:
                fields = _child_fields(cls)
            for name in fields:
                value = getattr(node, name, None)
                for item in value if value.__class__ is list else (value,):
                    if isinstance(item, expr):
                        if name in targets or prefix[item.end_lineno] > prefix[item.lineno - 1]:  # type: ignore[index]
                            keep(item)
                    elif isinstance(item, AST):
                        push(item)
        if own_scope:
            return _own_scope_names(walked)[0], global_names, declared
        return _name_ids_of(walked, stored_only=True), global_names, declared


def name_ids(root: ast.AST, stored_only: bool = False) -> set[str]:
    """The ids of the ``ast.Name`` nodes under ``root`` (the nodes ``pyast.nodes`` gives),
    only those stored to when ``stored_only``, collected as the walk goes."""
    return _name_ids_of([root], stored_only)


def _name_ids_of(roots: Sequence[ast.AST], stored_only: bool) -> set[str]:
    """``name_ids`` of each of ``roots``, together."""
    out: set[str] = set()
    add = out.add
    stack: list[ast.AST] = list(roots)
    pop, push, extend = stack.pop, stack.append, stack.extend
    fields_of, AST, Name, Store = _CHILD_FIELDS, ast.AST, ast.Name, ast.Store
    while stack:
        node = pop()
        cls = node.__class__
        if cls is Name:  # no children
            if not stored_only or node.ctx.__class__ is Store:  # type: ignore[attr-defined]
                add(node.id)  # type: ignore[attr-defined]
            continue
        fields = fields_of.get(cls)
        if fields is None:
            fields = _child_fields(cls)
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                extend([v for v in value if isinstance(v, AST)])
            elif isinstance(value, AST):
                push(value)
    return out


@dataclass
class Scope:
    kind: str  # "def" | "class"
    name: str
    qualname: str
    params: tuple[str, ...] = ()
    once: bool = False
    returned: set[str] = field(default_factory=set)
    returns_value: bool = False
    #: (gates, what it returns, the gates of a returned test) of each `return` (``FunctionDef.returns``)
    return_facts: list[tuple[tuple[GateRef, ...], str, tuple[GateRef, ...]]] = field(default_factory=list)
    #: the attribute each `return` reads off another object (`return moe.backend`), "" for any
    #: other value (``FunctionDef.returned_field``)
    returned_attrs: list[str] = field(default_factory=list)
    #: a context manager written as a generator (`@contextmanager`): what a `with` binds is
    #: what it yields, so its yields stand for its returns
    managed: bool = False
    #: the names a `with ... as name` binds in it, as the walk meets them
    with_names: set[str] = field(default_factory=set)
    #: local name -> the values assigned to it so far, as the walk meets them
    assigned: dict[str, list[ast.expr]] = field(default_factory=dict)
    #: name -> how many times the function binds it (any store, `global`/`nonlocal` many)
    store_counts: dict[str, int] = field(default_factory=dict)
    #: the names it binds only by plain assignments (`x = ...`): what a gate on one holds
    #: follows from its assignments' values
    assigned_only: frozenset[str] = frozenset()
    #: a generator whose `return`s give no value a caller sees (``FunctionDef.returns`` left out)
    generator: bool = False
    #: local name -> literal default of the env read assigned to it (`m = getenv("M", "block")`)
    env_defaults: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    node: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    #: its locals that are not declared `global`/`nonlocal` (worked out when first needed)
    locals: set[str] | None = None
    #: the names it declares `global` (worked out with ``locals``)
    globals: frozenset[str] = frozenset()
    #: free name -> the enclosing function binding it, for a nested function (``_Indexer.closure``)
    closure: dict[str, Scope] | None = None
    #: names assigned a value that starts as a path (``starts_as_path``)
    path_names: set[str] = field(default_factory=set)
    #: the names it declares `global`, as the walk meets them (``FunctionDef.global_names``)
    global_names: set[str] = field(default_factory=set)
    #: its locals assigned the served model's architecture (`arch = hf_config.architectures[0]`)
    architecture_names: set[str] = field(default_factory=set)
    #: its assignments of formatted strings to plain names (``_Indexer._note_message``)
    messages: list[tuple[BuiltMessage, tuple[PathContext, ...]]] | None = None
    #: the module's ``StoredNames`` (``locals`` is worked out through it)
    stores: StoredNames | None = None
    #: locals holding what a lookup in a container gave (`v = C.get(k)`: v -> C)
    lookups: dict[str, str] = field(default_factory=dict)
    #: locals holding the time a wait has taken (`elapsed = time.monotonic() - start`)
    waited: set[str] = field(default_factory=set)
    #: locals holding when one started (`start = time.monotonic()`)
    wait_starts: set[str] = field(default_factory=set)
    #: each parameter's assignment lines and the function's loops' spans (``rebound_after``)
    rebinds: tuple[dict[str, list[int]], list[tuple[int, int]]] | None = None

    def persistent(self, name: str) -> bool:
        """Whether ``name`` outlives a call of this function: an attribute of `self`/`cls`,
        or a name that is not one of its locals (a global)."""
        root = name.split(".", 1)[0]
        if root in ("self", "cls") and "." in name:
            return True
        return not self.binds(root)

    def binds(self, name: str) -> bool:
        """Whether ``name`` is one of its locals (a parameter or assigned, not declared
        `global`/`nonlocal`)."""
        if self.locals is None:
            if self.node is None:
                return False
            body = self.node.body
            stored, global_names, declared = _own_scope_names(body) if self.stores is None else self.stores.stored_in(body, True)
            self.globals = frozenset(global_names)
            args = self.node.args
            params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
            self.locals = (params | stored) - declared
        return name in self.locals
    #: names that hold host data (``Snippet.host``), as of the statement being walked
    host: frozenset[str] = frozenset()
    #: its parameters assigned a value before the statement being walked (``Snippet.rebound``)
    rebound: frozenset[str] = frozenset()


def _own_scope_names(body: Sequence[ast.AST]) -> tuple[set[str], set[str], set[str]]:
    """The names ``body`` stores, declares `global`, and declares `global` or `nonlocal`, in
    its own scope (the nodes ``pyast.scope_nodes`` gives), collected as the walk goes."""
    stored: set[str] = set()
    global_names: set[str] = set()
    declared: set[str] = set()
    stack: list[ast.AST] = list(body)
    pop, push, extend = stack.pop, stack.append, stack.extend
    fields_of, AST, stops = _CHILD_FIELDS, ast.AST, SCOPES
    Name, Load, Global, Nonlocal = ast.Name, ast.Load, ast.Global, ast.Nonlocal
    while stack:
        node = pop()
        cls = node.__class__
        if cls is Name:  # no children
            if node.ctx.__class__ is not Load:  # type: ignore[attr-defined]
                stored.add(node.id)  # type: ignore[attr-defined]
            continue
        if cls is Global:
            global_names.update(node.names)  # type: ignore[attr-defined]
            declared.update(node.names)  # type: ignore[attr-defined]
            continue
        if cls is Nonlocal:
            declared.update(node.names)  # type: ignore[attr-defined]
            continue
        if cls in stops:
            continue
        fields = fields_of.get(cls)
        if fields is None:
            fields = _child_fields(cls)
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                extend([v for v in value if isinstance(v, AST)])
            elif isinstance(value, AST):
                push(value)
    return stored, global_names, declared


def rebound_after(scope: Scope, name: str, line: int) -> bool:
    """Whether the function assigns its parameter ``name`` only after ``line`` and in no loop
    around it (`if hits is None: return` ... `hits = {...}`): a test there sees the argument."""
    if scope.rebinds is None:
        stores: dict[str, list[int]] = {}
        loops: list[tuple[int, int]] = []
        for node in scope_nodes(scope.node.body) if scope.node is not None else ():
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                loops.append((node.lineno, node.end_lineno or node.lineno))
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)) else ()
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Name) and part.id in scope.params:
                        stores.setdefault(part.id, []).append(part.lineno)
        scope.rebinds = (stores, loops)
    stores, loops = scope.rebinds
    lines = stores.get(name, [])
    return bool(lines) and all(at > line for at in lines) and not any(
        start <= line <= end and any(start <= at <= end for at in lines) for start, end in loops)
