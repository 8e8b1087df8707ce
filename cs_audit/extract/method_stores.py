"""The `self.` attributes a method of one module's classes sets, itself or through the methods
of the module it calls on `self` or `super()`.

Lazy initialisation often hands the work to a method: `if not self.initialized:
self.initialize(...)`, where `initialize` (or the base's, through `super().initialize()`)
ends with `self.initialized = True`. The branch runs once, as one that sets the flag itself
does (``extract.paths``). Only the module's own classes and methods are read, and a store of a
constant that leaves the flag unset (`False`, `None`, `0`, an empty literal) does not count.
Built on first use: most modules never ask.
"""

from __future__ import annotations

import ast

from cs_audit.pyast import dotted_name, normal_path_nodes

#: how many calls down a method's stores are followed
MAX_DEPTH = 3

#: (stores of `self.X`, methods called on `self`, methods called on `super()`)
_Method = tuple[frozenset[str], frozenset[str], frozenset[str]]


class MethodStores:
    def __init__(self, tree: ast.Module) -> None:
        self._tree = tree
        #: class qualname -> (its bases' last names, method name -> what it does)
        self._classes: dict[str, tuple[tuple[str, ...], dict[str, _Method]]] | None = None
        #: a class's last name -> its qualnames in the module
        self._by_name: dict[str, list[str]] = {}

    def stores_of_calls(self, function: str, body: list[ast.stmt]) -> frozenset[str]:
        """The `self.` attributes (as `self.x`) that the calls ``body`` makes on `self` or
        `super()` set, for ``body`` in the method ``function`` (a qualname) of a class here."""
        cls, _, method = function.rpartition(".")
        calls = [(kind, name) for kind, name in (_self_call(_statement_call(stmt)) for stmt in body) if name]
        if not cls or not calls:
            return frozenset()
        classes = self._table()
        if cls not in classes:
            return frozenset()
        out: set[str] = set()
        for kind, name in calls:
            owner = self._lookup_from(self._after(cls, cls, method), name) if kind == "super" else self._lookup(cls, name)
            if owner is not None:
                out |= self._stores(cls, owner, name, MAX_DEPTH, set())
        return frozenset(out)

    def _stores(self, receiver: str, owner: str, method: str, depth: int, seen: set[tuple[str, str]]) -> set[str]:
        if (owner, method) in seen or depth <= 0:
            return set()
        seen.add((owner, method))
        stores, on_self, on_super = self._table()[owner][1][method]
        out = set(stores)
        for name in on_self:
            found = self._lookup(receiver, name)
            if found is not None:
                out |= self._stores(receiver, found, name, depth - 1, seen)
        for name in on_super:
            found = self._lookup_from(self._after(receiver, owner, method), name)
            if found is not None:
                out |= self._stores(receiver, found, name, depth - 1, seen)
        return out

    def _mro(self, cls: str) -> list[str]:
        """``cls`` and its bases defined here, depth first (enough for the single chains lazy
        set-up is written in)."""
        out: list[str] = []
        work = [cls]
        classes = self._table()
        while work:
            current = work.pop(0)
            if current in out or current not in classes:
                continue
            out.append(current)
            for base in classes[current][0]:
                work.extend(self._by_name.get(base, ()))
        return out

    def _lookup(self, cls: str, method: str) -> str | None:
        return self._lookup_from(self._mro(cls), method)

    def _lookup_from(self, chain: list[str] | None, method: str) -> str | None:
        classes = self._table()
        return next((c for c in chain or () if method in classes[c][1]), None)

    def _after(self, receiver: str, owner: str, method: str) -> list[str]:
        """The classes `super()` in ``owner``'s ``method`` looks in, for an instance of ``receiver``."""
        chain = self._mro(receiver)
        return chain[chain.index(owner) + 1:] if owner in chain else []

    def _table(self) -> dict[str, tuple[tuple[str, ...], dict[str, _Method]]]:
        if self._classes is None:
            self._classes = {}
            self._collect(self._tree.body, "")
        return self._classes

    def _collect(self, body: list[ast.stmt], prefix: str) -> None:
        assert self._classes is not None
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                qualname = prefix + stmt.name
                bases = tuple(name.rpartition(".")[2] for name in (dotted_name(b) for b in stmt.bases) if name)
                methods = {s.name: _method(s) for s in stmt.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
                self._classes[qualname] = (bases, methods)
                self._by_name.setdefault(stmt.name, []).append(qualname)
                self._collect(stmt.body, qualname + ".")
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._collect(stmt.body, f"{prefix}{stmt.name}.<locals>.")


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
        value: ast.expr | None = None
        targets: list[ast.expr] = []
        if isinstance(inner, ast.Assign):
            targets, value = inner.targets, inner.value
        elif isinstance(inner, ast.AnnAssign) and inner.value is not None:
            targets, value = [inner.target], inner.value
        if value is None or _unset_value(value):
            continue
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "self":
                    stores.add("self." + part.attr)
    return frozenset(stores), frozenset(on_self), frozenset(on_super)


def _statement_call(stmt: ast.stmt) -> ast.AST:
    """The call a statement of a branch makes as a whole (`self.set_up()`, `x = self.build()`)."""
    if isinstance(stmt, (ast.Expr, ast.Assign)):
        return stmt.value
    return stmt


def _unset_value(value: ast.expr) -> bool:
    """A constant a flag or a lazily set value still counts as unset with."""
    if isinstance(value, ast.Constant):
        return not value.value
    return isinstance(value, (ast.List, ast.Tuple, ast.Set, ast.Dict)) and not getattr(value, "elts", getattr(value, "keys", None))
