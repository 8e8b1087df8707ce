"""Messages formatted into a local for a later call: `msg = f"step {i}"` ... `logger.debug(msg)`.

The ``ast`` pass notes each assignment of a formatted string to a plain local
(``format_kinds``) and, once its function is walked, the calls that take the local as a
bare argument (``argument_uses``).  A local read any other way (returned, stored, tested,
formatted again, read in a nested function) is dropped here.  Whether every such call is an
emitter that drops the message by default is for the joined tree to say
(``analysis/eager_format.py``)."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable

#: calls whose result is the text of their argument: `"a" + str(n)` joins strings
_TO_TEXT = frozenset({"str", "repr", "format"})
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _is_text(node: ast.expr) -> bool:
    if node.__class__ is ast.Constant:
        return isinstance(node.value, str)
    if node.__class__ is ast.JoinedStr:
        return True
    return node.__class__ is ast.Call and node.func.__class__ is ast.Name and node.func.id in _TO_TEXT


def _concat_leaves(node: ast.expr, out: list[ast.expr]) -> None:
    while node.__class__ is ast.BinOp and node.op.__class__ is ast.Add:
        _concat_leaves(node.right, out)
        node = node.left
    out.append(node)


def format_kinds(value: ast.expr, eager_calls: frozenset[str], dotted: Callable[[ast.AST], str | None]) -> tuple[str, ...]:
    """The formatting an assigned value does, in ``CallSite.eager``'s words: an f-string with
    fields, `%` or `.format` on a literal, `+` joining text with something not literal,
    a call of the rules' ``eager_calls`` (`json.dumps`, `", ".join`); () for anything else."""
    if value.__class__ is ast.JoinedStr:
        return ("f-string",) if any(p.__class__ is ast.FormattedValue for p in value.values) else ()
    if value.__class__ is ast.BinOp:
        op = value.op.__class__
        if op is ast.Mod:
            return ("percent",) if value.left.__class__ in (ast.Constant, ast.JoinedStr) and _is_text(value.left) else ()
        if op is ast.Add:
            leaves: list[ast.expr] = []
            _concat_leaves(value, leaves)
            if any(_is_text(leaf) for leaf in leaves) and any(leaf.__class__ is not ast.Constant for leaf in leaves):
                return ("concat",)
        return ()
    if value.__class__ is ast.Call:
        func = value.func
        if func.__class__ is ast.Attribute and func.value.__class__ in (ast.Constant, ast.JoinedStr) and _is_text(func.value):
            if func.attr == "format":
                return ("format",)
            return ("str.join",) if func.attr == "join" and "str.join" in eager_calls else ()
        callee = dotted(func)
        return (callee,) if callee in eager_calls else ()
    return ()


def argument_uses(func: ast.FunctionDef | ast.AsyncFunctionDef, names: set[str]) -> dict[str, list[tuple[int, int, str]]]:
    """For each of ``names`` read only as a bare argument of calls in the function's own
    scope: (line, end line, callee's last name) of each such call.  A name read anywhere
    else, a nested function included, is left out."""
    loads: Counter[str] = Counter()
    taken: Counter[str] = Counter()
    uses: dict[str, list[tuple[int, int, str]]] = {}
    stack: list[tuple[ast.AST, bool]] = [(stmt, False) for stmt in func.body]
    while stack:
        node, nested = stack.pop()
        if node.__class__ is ast.Name:
            if node.id in names and node.ctx.__class__ is ast.Load:
                loads[node.id] += 1
            continue
        if node.__class__ is ast.Call and not nested:
            callee = node.func
            method = callee.attr if callee.__class__ is ast.Attribute else callee.id if callee.__class__ is ast.Name else ""
            for arg in (*node.args, *(k.value for k in node.keywords)):
                if arg.__class__ is ast.Name and arg.id in names:
                    taken[arg.id] += 1
                    uses.setdefault(arg.id, []).append((node.lineno, node.end_lineno or node.lineno, method))
        inner = nested or isinstance(node, _NESTED)
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return {name: found for name, found in uses.items() if taken[name] == loads[name]}
