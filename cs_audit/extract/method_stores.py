"""The `self.` attributes a method of one module's classes sets, itself or through the methods
of the module it calls on `self` or `super()`.

Lazy initialisation often hands the work to a method: `if not self.initialized:
self.initialize(...)`, where `initialize` (or the base's, through `super().initialize()`)
ends with `self.initialized = True`. The branch runs once, as one that sets the flag itself
does (``extract.paths``). Only the module's own top-level classes and methods are read; a
store of a constant that leaves the flag unset (`False`, `None`, `0`, an empty literal) or one
in an `except` handler (set when something fails) does not count. A class of the module built
on the branch's class that overrides a method on the way must set the flag too, and a chain
with several bases of the module, or one outside it ahead of one of it, is not followed (the
method Python finds may be another). Built on first use: most modules never ask.
"""

from __future__ import annotations

import ast

from cs_audit.pyast import dotted_name, normal_path_nodes

#: how many calls down a method's stores are followed
MAX_DEPTH = 3

#: (stores of `self.X`, methods called on `self`, methods called on `super()`)
_Method = tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]


class MethodStores:
    def __init__(self, tree: ast.Module) -> None:
        self._tree = tree
        #: top-level class name -> (its bases as written, method name -> its definition)
        self._classes: dict[str, tuple[tuple[str | None, ...], dict[str, ast.FunctionDef | ast.AsyncFunctionDef]]] | None = None
        #: what each method does, read on first use
        self._methods: dict[tuple[str, str], _Method] = {}
        self._chains: dict[str, list[str] | None] = {}
        self._subclasses: dict[str, list[str]] = {}

    def stores_of_calls(self, function: str, body: list[ast.stmt]) -> frozenset[str]:
        """The `self.` attributes (as `self.x`) that the calls ``body`` makes as whole
        statements on `self` or `super()` set, for ``body`` in the method ``function`` (a
        qualname) of a top-level class here, whichever class of the module built on it the
        instance is."""
        cls, _, method = function.rpartition(".")
        calls = [(kind, name) for kind, name in (_self_call(_statement_call(stmt)) for stmt in body) if name]
        if not cls or not calls or cls not in self._table():
            return frozenset()
        out: set[str] = set()
        for kind, name in calls:
            found: set[str] | None = None
            for receiver in [cls, *self._built_on(cls)]:
                chain = self._mro(receiver)
                if chain is None or cls not in chain:
                    found = set()
                    break
                start = chain[chain.index(cls) + 1:] if kind == "super" else chain
                owner = self._lookup(start, name)
                stores = self._stores(receiver, owner, name, MAX_DEPTH, frozenset()) if owner is not None else set()
                found = stores if found is None else found & stores
            out |= found or set()
        return frozenset(out)

    def _stores(self, receiver: str, owner: str, method: str, depth: int, path: frozenset[tuple[str, str]]) -> set[str]:
        """What ``owner``'s ``method`` sets on an instance of ``receiver``; ``path``: the
        methods on the way down (a call back into one of them adds nothing)."""
        if (owner, method) in path or depth <= 0:
            return set()
        path = path | {(owner, method)}
        summary = self._methods.get((owner, method))
        if summary is None:
            summary = self._methods[(owner, method)] = _method(self._table()[owner][1][method])
        stores, on_self, on_super = summary
        out = set(stores)
        chain = self._mro(receiver) or []
        for name in on_self:
            found = self._lookup(chain, name)
            if found is not None:
                out |= self._stores(receiver, found, name, depth - 1, path)
        for name in on_super:
            after = chain[chain.index(owner) + 1:] if owner in chain else []
            found = self._lookup(after, name)
            if found is not None:
                out |= self._stores(receiver, found, name, depth - 1, path)
        return out

    def _mro(self, cls: str) -> list[str] | None:
        """``cls`` and its bases of the module, in the order Python looks them up; None when
        that order is not a single chain of the module's classes (several bases of the
        module, or a base from elsewhere ahead of one of the module)."""
        if cls not in self._chains:
            self._chains[cls] = self._chain(cls)
        return self._chains[cls]

    def _chain(self, cls: str) -> list[str] | None:
        classes = self._table()
        out: list[str] = []
        current: str | None = cls
        while current is not None and current not in out:
            out.append(current)
            bases = classes[current][0]
            local = [i for i, base in enumerate(bases) if base in classes]
            if len(local) > 1 or (local and local[0] > 0):
                return None
            current = bases[local[0]] if local else None
        return out

    def _built_on(self, cls: str) -> list[str]:
        """The module's classes built on ``cls``, in name order."""
        if cls not in self._subclasses:
            self._subclasses[cls] = sorted(c for c in self._table() if c != cls and cls in (self._mro(c) or ()))
        return self._subclasses[cls]

    def _lookup(self, chain: list[str], method: str) -> str | None:
        classes = self._table()
        return next((c for c in chain if method in classes[c][1]), None)

    def _table(self) -> dict[str, tuple[tuple[str | None, ...], dict[str, ast.FunctionDef | ast.AsyncFunctionDef]]]:
        if self._classes is None:
            self._classes = {}
            for stmt in self._tree.body:
                if isinstance(stmt, ast.ClassDef):
                    # only a bare name is one of the module's classes (`lib.Base` is not `Base`)
                    bases = tuple(b.id if isinstance(b, ast.Name) else None for b in stmt.bases)
                    methods = {s.name: s for s in stmt.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
                    self._classes[stmt.name] = (bases, methods)
        return self._classes


def _statement_call(stmt: ast.stmt) -> ast.AST:
    """The call a statement of a branch makes as a whole (`self.set_up()`, `x = self.build()`,
    `await self.start()`)."""
    value: ast.AST = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else stmt
    return value.value if isinstance(value, ast.Await) else value


def _self_call(node: ast.AST) -> tuple[str, str | None]:
    """("self"|"super", method) of a call `self.m(...)` / `super().m(...)`."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return "", None
    owner = node.func.value
    if isinstance(owner, ast.Name) and owner.id == "self":
        return "self", node.func.attr
    if isinstance(owner, ast.Call) and dotted_name(owner.func) == "super" and not owner.args:
        return "super", node.func.attr
    return "", None


def _method(node: ast.FunctionDef | ast.AsyncFunctionDef) -> _Method:
    stores: set[str] = set()
    on_self: set[str] = set()
    on_super: set[str] = set()
    for inner in normal_path_nodes(node.body):
        kind, name = _self_call(inner)
        if name is not None:
            (on_self if kind == "self" else on_super).add(name)
            continue
        if isinstance(inner, ast.Assign):
            pairs = [pair for target in inner.targets for pair in _assigned(target, inner.value)]
        elif isinstance(inner, ast.AnnAssign) and inner.value is not None:
            pairs = _assigned(inner.target, inner.value)
        else:
            continue
        for target, value in pairs:
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
                    and not (value is not None and _unset_value(value))):
                stores.add("self." + target.attr)
    return frozenset(stores), tuple(sorted(on_self)), tuple(sorted(on_super))


def _assigned(target: ast.expr, value: ast.expr | None) -> list[tuple[ast.expr, ast.expr | None]]:
    """(target, the value it gets, None when unknown) of each name an assignment sets:
    `self.a, self.b = x, False` pairs them off."""
    if isinstance(target, (ast.Tuple, ast.List)):
        values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
        return [pair for i, elt in enumerate(target.elts) for pair in _assigned(elt, values[i] if values else None)]
    return [(target, value)]


def _unset_value(value: ast.expr) -> bool:
    """A constant a flag or a lazily set value still counts as unset with."""
    if isinstance(value, ast.Constant):
        return not value.value
    return isinstance(value, (ast.List, ast.Tuple, ast.Set, ast.Dict)) and not getattr(value, "elts", getattr(value, "keys", None))
