"""Which names a version of a Python file *reads* as switches, from its source alone: what
the history pass (``cs_audit.git.introduced``) asks of a past version of a file to tell a
read from a mention.

A name counts where code uses it as a key or an attribute: an argument of a call
(``os.getenv("X")``, ``get_bool_env("X")``), a subscript that is read (``os.environ["X"]``),
an operand of a comparison (``"X" in os.environ``), a registry declaration (a dict key whose
value is a function: ``{"X": lambda: ...}``, or a class field made by a call:
``X = EnvBool(False)``) or a registry attribute (``envs.X``).  Not: a
comment, a docstring, a string that only holds the name among other text, an assignment
into the environment (``os.environ["X"] = "1"``, ``os.putenv``) or a dict of values handed
to a child process.
"""

from __future__ import annotations

import ast

from cs_audit.extract.python import decode_source
from cs_audit.pyast import parse_quietly

#: calls whose string argument sets the environment rather than reads it
_SETTING_CALLS = frozenset({"putenv", "unsetenv"})


def names_read(data: bytes) -> frozenset[str] | None:
    """Every identifier-like name the source ``data`` reads as above; None when it does not
    parse (a version of the file with a syntax error proves nothing)."""
    try:
        tree = parse_quietly(decode_source(data))
    except (SyntaxError, UnicodeError, LookupError, ValueError, MemoryError, RecursionError):
        return None
    found: set[str] = set()

    def key(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            found.add(node.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            found.add(node.attr)
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called not in _SETTING_CALLS:
                for arg in node.args:
                    key(arg)
                for kw in node.keywords:
                    key(kw.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key(node.slice)
        elif isinstance(node, ast.Compare):
            key(node.left)
            for other in node.comparators:
                key(other)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(v, ast.Lambda):
                    key(k)
        elif isinstance(node, ast.ClassDef):
            # a registry class declares its fields as calls (``X = EnvBool(False)``)
            for stmt in node.body:
                value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
                if isinstance(value, ast.Call):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                    found.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(found)
