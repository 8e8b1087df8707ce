"""Env registries found by their shape, under any module name.

Two shapes are recognised (the shipped ``registries`` in ``rules/env_apis.yaml`` stay as
configuration, and a project can add its own there):

- a field class whose accessor reads the env under its own name (``os.getenv(self.name)``,
  ``self.name in os.environ``), with instances declared on a container class and the
  container instantiated at module level (``envs = Envs()``; reads: ``envs.X.get()``);
- a module whose ``__getattr__`` calls a getter out of a module table
  (``environment_variables[name]()``; reads: ``envs.X`` on the module).

A file is parsed here only when its bytes hold both tokens of a shape.
"""

from __future__ import annotations

import ast
import re

from cs_audit.pyast import dotted_name, parse_quietly
from cs_audit.ruleset import Registry

_ENV_MAPPING = "os.environ"
_READ_CALLS = {"os.getenv", "os.environ.get", "getenv", "environ.get"}


def module_name(path: str) -> str:
    """``extract.scopes.module_name``, which a warm scan must not import (it pulls in the model)."""
    stem = path[:-3] if path.endswith(".py") else path
    return stem.removesuffix("/__init__").replace("/", ".")


def _is_self_attr(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _reads_own_name(fn: ast.FunctionDef) -> bool:
    """The method reads the env under an attribute of ``self`` and never writes the env."""
    reads = False
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and dotted_name(node.func) in _READ_CALLS and node.args and _is_self_attr(node.args[0]):
            reads = True
        elif isinstance(node, ast.Compare) and _is_self_attr(node.left) and any(
                isinstance(op, (ast.In, ast.NotIn)) and (dotted_name(c) or "").endswith("environ")
                for op, c in zip(node.ops, node.comparators)):
            reads = True
        elif isinstance(node, ast.Subscript) and (dotted_name(node.value) or "").endswith("environ"):
            if isinstance(node.ctx, ast.Store | ast.Del):
                return False
            reads = reads or _is_self_attr(node.slice)
        elif isinstance(node, ast.Call) and (dotted_name(node.func) or "").endswith(("environ.pop", "environ.setdefault", "putenv")):
            return False
    return reads


def _field_registries(tree: ast.Module, module: str) -> list[tuple[str, tuple[str, ...]]]:
    """(object, accessor methods) of each container instance of env fields in the module."""
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    accessors: dict[str, set[str]] = {}
    for name, cls in classes.items():
        methods = {fn.name for fn in cls.body if isinstance(fn, ast.FunctionDef) and _reads_own_name(fn)}
        if methods:
            # a method that calls an accessor (`__bool__` returning `self.get()`) reads too
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and not fn.name.startswith("__") and any(
                        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _is_self_attr(n.func)
                        and n.func.attr in methods for n in ast.walk(fn)) and _reads_own_name_or_calls(fn):
                    methods.add(fn.name)
            accessors[name] = methods
    # subclasses inherit the accessors (`class EnvBool(EnvField)`), to a fixed point
    grown = True
    while grown:
        grown = False
        for name, cls in classes.items():
            inherited = set().union(*(accessors.get(dotted_name(b) or "", set()) for b in cls.bases))
            if inherited - accessors.get(name, set()):
                accessors[name] = accessors.get(name, set()) | inherited
                grown = True
    field_classes = {n for n, m in accessors.items() if m}
    containers: dict[str, set[str]] = {}
    for name, cls in classes.items():
        for stmt in cls.body:
            value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
            if isinstance(value, ast.Call) and dotted_name(value.func) in field_classes:
                containers.setdefault(name, set()).update(accessors[dotted_name(value.func) or ""])
    out = []
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) in containers):
            methods = containers[dotted_name(stmt.value.func) or ""]
            out.append((f"{module}.{stmt.targets[0].id}", tuple(sorted(m for m in methods if not m.startswith("_")))))
    return out


def _reads_own_name_or_calls(fn: ast.FunctionDef) -> bool:
    """A caller of an accessor that writes no env (``override`` saves and sets: not a read)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and (dotted_name(node.value) or "").endswith("environ") and isinstance(node.ctx, ast.Store | ast.Del):
            return False
        if isinstance(node, ast.Call) and (dotted_name(node.func) or "").endswith(("environ.pop", "environ.setdefault", "putenv")):
            return False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("set", "clear"):
            return False
    return True


def _getattr_registry(tree: ast.Module) -> tuple[str, ...] | None:
    """The names of the module table a module ``__getattr__`` calls a getter out of, or None."""
    tables: dict[str, tuple[str, ...]] = {}
    for stmt in tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else (
            stmt.target if isinstance(stmt, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(stmt.value, ast.Dict):
            keys = tuple(k.value for k in stmt.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
            tables[target.id] = keys
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__" and stmt.args.args:
            param = stmt.args.args[0].arg
            for node in ast.walk(stmt):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                        and isinstance(node.func.value, ast.Name) and node.func.value.id in tables
                        and isinstance(node.func.slice, ast.Name) and node.func.slice.id == param):
                    return tables[node.func.value.id]
    return None


#: cheap test of the bytes before a parse: a `__getattr__` calling `table[name](`
_GETATTR = re.compile(rb"def __getattr__\(\s*(\w+)[^)]*\)[^\n]*:(?:.|\n){0,400}?\[\s*\1\s*\]\s*\(")
#: and a read keyed by `self.<attr>` (`getenv(self.name)`, `self.name in os.environ`): literals,
#: which the bytes of every file of a tree are searched for
_OWN_NAME = (b"getenv(self.", b"environ.get(self.", b" in os.environ", b" in environ")


def registries_in(path: str, data: bytes) -> list[Registry]:
    """The env registries one Python file defines (none when it does not parse)."""
    getattr_shape = b"def __getattr__(" in data and _GETATTR.search(data) is not None
    field_shape = b"environ" in data and any(token in data for token in _OWN_NAME) and b"self." in data
    if not (getattr_shape or field_shape):
        return []
    try:
        tree = parse_quietly(data, path)
    except (SyntaxError, ValueError):
        return []
    module = module_name(path)
    out: list[Registry] = []
    if getattr_shape:
        names = _getattr_registry(tree)
        if names:
            pattern = "^(" + "|".join(re.escape(n) for n in sorted(names)) + ")$"
            out.append(Registry(id=f"found:{module}", object=module, access="attribute", methods=(), name_pattern=pattern))
    if field_shape:
        for obj, methods in _field_registries(tree, module):
            if methods:
                out.append(Registry(id=f"found:{obj}", object=obj, access="method", methods=methods,
                                    name_pattern=r"^[A-Za-z_]\w*$"))
    return out


def tree_registries(per_file: list[tuple[Registry, ...]], package: str | None, shipped: tuple[Registry, ...]) -> tuple[Registry, ...]:
    """The registries the files of a tree define (``registries_in`` of each), each under every
    name an import may give its object (the module's dotted suffixes, and the scanned
    package's prefix), less the objects a shipped registry already names."""
    known = {r.object for r in shipped}
    out: dict[str, Registry] = {}
    for found in per_file:
        for registry in found:
            parts = registry.object.split(".")
            names = {".".join(parts[i:]) for i in range(max(1, len(parts) - 1))}
            if package:
                names.add(f"{package}.{registry.object}")
            for name in sorted(names - known):
                out.setdefault(name, Registry(id=f"found:{name}", object=name, access=registry.access,
                                              methods=registry.methods, name_pattern=registry.name_pattern))
    return tuple(out[name] for name in sorted(out))
