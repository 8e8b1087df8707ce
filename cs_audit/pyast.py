"""``ast.parse`` as cs-audit needs it: the scanned code's warnings are not ours to show."""

from __future__ import annotations

import ast
import warnings


def parse_quietly(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source)`` with the compiler's warnings silenced: an invalid escape sequence
    or a literal compared with ``is`` in the scanned code is no concern of the scan, and under
    ``python -W error`` a warning would be raised as a ``SyntaxError`` and the file dropped.
    Raises what ``ast.parse`` raises for code that does not parse."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, filename=filename)


def dotted_name(node: ast.AST) -> str | None:
    """`a.b.c` of a chain of names and attributes as written (no alias resolution), else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


#: fields that never hold an AST node with children, per node class (names, literals,
#: operators): the walkers below skip them, as they skip contexts and type comments.
_LEAF_FIELDS: dict[type, frozenset[str]] = {
    ast.Name: frozenset({"id"}), ast.Constant: frozenset({"value", "kind"}), ast.Attribute: frozenset({"attr"}),
    ast.keyword: frozenset({"arg"}), ast.arg: frozenset({"arg"}), ast.alias: frozenset({"name", "asname"}),
    ast.FormattedValue: frozenset({"conversion"}), ast.ImportFrom: frozenset({"module", "level"}),
    ast.FunctionDef: frozenset({"name"}), ast.AsyncFunctionDef: frozenset({"name"}), ast.ClassDef: frozenset({"name"}),
    ast.Global: frozenset({"names"}), ast.Nonlocal: frozenset({"names"}),
    ast.BinOp: frozenset({"op"}), ast.UnaryOp: frozenset({"op"}), ast.BoolOp: frozenset({"op"}),
    ast.Compare: frozenset({"ops"}), ast.AugAssign: frozenset({"op"}),
}
_SKIP_FIELDS = frozenset({"ctx", "type_comment"})
#: node class -> the fields that may hold child nodes (filled on first use)
CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
#: the nodes that open a scope of their own
SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})


def is_none(node: ast.AST) -> bool:
    """Whether ``node`` is the literal `None`."""
    return node.__class__ is ast.Constant and node.value is None


def child_fields(cls: type) -> tuple[str, ...]:
    fields = CHILD_FIELDS.get(cls)
    if fields is None:
        leaf = _LEAF_FIELDS.get(cls, frozenset())
        fields = CHILD_FIELDS[cls] = tuple(f for f in cls._fields if f not in _SKIP_FIELDS and f not in leaf)  # type: ignore[attr-defined]
    return fields


def nodes(root: ast.AST) -> list[ast.AST]:
    """``root`` and its descendants (except contexts, operators and type comments), any order."""
    return _walk([root], frozenset())


def scope_nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """The nodes of ``body`` in its own scope, any order: the functions, lambdas and classes
    defined in it are there, their insides are not (their names are theirs)."""
    return _walk(list(body), SCOPES)


def normal_path_nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """``scope_nodes`` of ``body`` but the insides of its `except` handlers (the error path)."""
    return _walk(list(body), _SCOPES_AND_HANDLERS)


_SCOPES_AND_HANDLERS = SCOPES | {ast.ExceptHandler}


def _walk(stack: list[ast.AST], stop: frozenset[type]) -> list[ast.AST]:
    out: list[ast.AST] = []
    pop, push, extend, append = stack.pop, stack.append, stack.extend, out.append
    fields_of, AST = CHILD_FIELDS, ast.AST
    while stack:
        node = pop()
        append(node)
        cls = node.__class__
        if cls in stop:
            continue
        fields = fields_of.get(cls)
        if fields is None:
            fields = child_fields(cls)
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                extend([v for v in value if isinstance(v, AST)])
            elif isinstance(value, AST):
                push(value)
    return out
