"""Function bodies hashed up to renamed parameters and locals: duplicated helpers."""

from __future__ import annotations

import ast
import hashlib

from cs_audit.extract.scopes import StoredNames, local_names

#: functions shorter than this are too small to call a duplicated helper
MIN_DUPLICATE_STATEMENTS = 3


#: functions longer than this are not hashed for duplicates (helpers are short)
MAX_DUPLICATE_LINES = 200


def _walk_count_below(nodes: list[ast.stmt], limit: int) -> bool:
    """Whether ``ast.walk`` of a module holding ``nodes`` yields fewer than ``limit`` nodes."""
    count = 1
    stack: list[ast.AST] = list(nodes)
    while stack:
        node = stack.pop()
        count += 1
        if count >= limit:
            return False
        stack.extend(ast.iter_child_nodes(node))
    return True


def _shape(node: ast.AST, rename: dict[str, str], local_names: set[str], out: list[str]) -> None:
    """Serialise a subtree with params/locals renamed positionally (no copy of the tree)."""
    if isinstance(node, ast.Name):
        name = node.id
        if name in local_names:
            name = rename.setdefault(name, f"_v{len(rename)}")
        out.append(f"N:{name}")
        return
    if isinstance(node, ast.arg):
        out.append(f"A:{rename.setdefault(node.arg, f'_v{len(rename)}')}")
        return
    cls = node.__class__
    out.append(cls.__name__)
    fields = _SHAPE_FIELDS.get(cls)
    if fields is None:
        fields = _SHAPE_FIELDS[cls] = tuple(f for f in cls._fields if f not in ("ctx", "type_comment", "annotation", "returns"))
    for name in fields:
        try:
            value = getattr(node, name)
        except AttributeError:
            continue
        if isinstance(value, ast.AST):
            _shape(value, rename, local_names, out)
        elif isinstance(value, list):
            out.append("[")
            for item in value:
                if isinstance(item, ast.AST):
                    _shape(item, rename, local_names, out)
                else:
                    out.append(repr(item))
            out.append("]")
        else:
            out.append(repr(value))


_SHAPE_FIELDS: dict[type, tuple[str, ...]] = {}


def body_hash(func: ast.FunctionDef | ast.AsyncFunctionDef, stores: StoredNames | None = None) -> str:
    """Hash of the body identical up to renamed params/locals; "" for bodies too small or too large."""
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body or (func.end_lineno or func.lineno) - func.lineno > MAX_DUPLICATE_LINES:
        return ""
    if len(body) < MIN_DUPLICATE_STATEMENTS and _walk_count_below(body, 25):
        return ""
    own_names = local_names(func) if stores is None else stores.local_names(func)
    rename: dict[str, str] = {}
    out: list[str] = []
    _shape(func.args, rename, own_names, out)
    for stmt in body:
        _shape(stmt, rename, own_names, out)
    return hashlib.sha1("\x00".join(out).encode()).hexdigest()[:16]
