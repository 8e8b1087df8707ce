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
