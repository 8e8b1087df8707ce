"""What the ``ast`` index knows as it walks a module: the file's text and lines, the rule
set, the import aliases, the enclosing scopes and loops; the source and columns of a node."""

from __future__ import annotations

import ast
import re
from itertools import accumulate, count
from operator import add

from cs_audit.extract.scopes import Scope, module_name, name_ids
from cs_audit.extract.tokens import line_prefix
from cs_audit.model import FunctionDef
from cs_audit.ruleset import RuleSet


def _char_offset(line: str, byte_offset: int) -> int:
    """`ast` columns count UTF-8 bytes; str slicing counts characters."""
    if line.isascii():
        return byte_offset
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


class IndexState:
    """The walk's state shared by the gates, the call edges and the statements (``index._Indexer``)."""

    def __init__(self, path: str, text: str, rs: RuleSet) -> None:
        self.path = path
        self.text = text
        self.lines = lines = text.split("\n")
        self.module = module_name(path)
        self.is_package = path.endswith("__init__.py")
        self.rs = rs
        self.aliases: dict[str, str] = {}
        self.string_constants: dict[str, str] = {}
        self.functions: list[FunctionDef] = []
        self.scopes: list[Scope] = []
        #: the innermost enclosing def scope (a class body inside a def keeps the def's), None at module level
        self.function: Scope | None = None
        self.loop_depth = 0
        self.loop_iters: list[str] = []
        #: line starts (offsets into the text) and, per pattern, prefix counts of matching lines
        # line i starts after the lines before it and their i newlines (all in C: map, accumulate)
        self.line_starts: list[int] = list(map(add, accumulate(map(len, lines), initial=0), count()))
        self.line_starts.pop()
        #: builtin names this module binds itself (calls to them are edges)
        self.shadowed: frozenset[str] = frozenset()

    def _qualname(self, name: str) -> str:
        if not self.scopes:
            return name
        parent = self.scopes[-1]
        return f"{parent.qualname}.<locals>.{name}" if parent.kind == "def" else f"{parent.qualname}.{name}"

    def _source(self, node: ast.stmt | ast.expr) -> str:
        """Exact source of a node (first line from its column), no re-split of the file."""
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        start = _char_offset(self.lines[first], node.col_offset)
        end = _char_offset(self.lines[last], node.end_col_offset or 0)
        if first == last:
            return self.lines[first][start:end]
        parts = [self.lines[first][start:]]
        parts.extend(self.lines[first + 1:last])
        parts.append(self.lines[last][:end])
        return "\n".join(parts)

    def closure(self, scope: Scope) -> dict[str, Scope]:
        """The free names of a nested function that an enclosing function binds, each with that
        function (worked out on entering it, while the enclosing scopes are known): they hold what the enclosing call put there (`trace_e2e = ...;
        def trace_sync(): if not trace_e2e: return`), so a gate on one is the enclosing local."""
        if scope.closure is not None:
            return scope.closure
        scope.closure = {}
        if scope.node is None or ".<locals>." not in scope.qualname:
            return scope.closure
        enclosing: list[Scope] = []
        for outer in self.scopes:
            if outer is scope:
                break
            if outer.kind == "def":  # a class body's names are not seen by the functions in it
                enclosing.append(outer)
        scope.binds("")  # works out its globals
        # every name it uses: the ones it assigns are its own unless declared `nonlocal`
        used = name_ids(scope.node)
        for name in sorted(used):
            if scope.binds(name) or name in scope.globals:
                continue
            for outer in reversed(enclosing):
                if outer.binds(name):
                    scope.closure[name] = outer
                    break
                if outer.node is None or name in outer.globals:
                    break
        return scope.closure

    def _column(self, line: int, byte_offset: int) -> int:
        """The 0-based character column of an ``ast`` offset (UTF-8 bytes) on a 1-based line."""
        return _char_offset(self.lines[line - 1], byte_offset)

    def _line_prefix(self, pattern: re.Pattern[str], literals: tuple[tuple[str, bool], ...]) -> list[int]:
        return line_prefix(self.lines, self.text, self.line_starts, pattern, literals)
