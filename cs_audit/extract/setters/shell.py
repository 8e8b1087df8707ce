"""Setters in shell scripts, parsed with tree-sitter-bash (see the package's docstring for
what counts); the Makefile reader parses recipe lines with it too."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from tree_sitter import Language, Node, Parser

from cs_audit.extract.setters.sites import NAME_PATTERN, NAME_RE, Site, as_commented, bind, classify
from cs_audit.model import EnvSetter

#: commands that run their arguments as a command, so ``nohup env X=1 cmd`` sets X
_COMMAND_WRAPPERS = frozenset(
    {"nohup", "exec", "time", "sudo", "nice", "setsid", "stdbuf"}
)
#: ``env`` options that consume the next argument
_ENV_OPTIONS_WITH_ARGUMENT = frozenset(
    {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}
)
_LITERAL_STRING_TYPES = frozenset({"raw_string", "ansi_c_string"})
_MAX_COMMENT_DEPTH = 2


@lru_cache(maxsize=1)
def _bash_language() -> Language:
    import tree_sitter_bash

    return Language(tree_sitter_bash.language())


def _node_text(node: Node, source: bytes) -> str:
    """The text of ``node`` in ``source`` (the unsanitised bytes, see ``_bash_input``)."""
    return source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")


def _unquote_node(node: Node, source: bytes) -> str:
    """Shell word text with one layer of quotes removed; expansions stay raw."""
    text = _node_text(node, source)
    if node.type in ("string", "raw_string") and len(text) >= 2:
        return text[1:-1]
    if node.type == "ansi_c_string" and len(text) >= 3:
        return text[2:-1]
    if node.type == "concatenation":
        return "".join(_unquote_node(child, source) for child in node.children)
    return text


#: code points outside the BMP; tree-sitter-bash 0.25.1 intermittently segfaults on
#: some of them (e.g. ``{`` followed by U+DE10E), so they never reach the parser
_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff]")
#: same UTF-8 length (4 bytes) as any astral code point, so byte offsets still match
_ASTRAL_STAND_IN = "\u00e9\u00e9"


def _bash_input(text: str) -> tuple[bytes, bytes]:
    """(source bytes, bytes safe to hand to tree-sitter); both have the same offsets."""
    source = text.encode("utf-8", errors="replace")
    if _ASTRAL_RE.search(text) is None:
        return source, source
    safe = _ASTRAL_RE.sub(_ASTRAL_STAND_IN, text).encode("utf-8", errors="replace")
    return source, safe


def _has_literal_quoting(node: Node) -> bool:
    if node.type in _LITERAL_STRING_TYPES:
        return True
    return node.type == "concatenation" and any(
        child.type in _LITERAL_STRING_TYPES for child in node.children
    )


def _iter_nodes(root: Node) -> Iterator[Node]:
    """Depth-first, document order, without recursion."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


class _ShellScan:
    """Collects the sites of one shell text.

    ``depth`` counts nested scans (a comment body, one line of an ERROR region);
    nested scans do not nest further than ``_MAX_COMMENT_DEPTH``.
    """

    def __init__(self, text: str, depth: int = 0, parser: Parser | None = None) -> None:
        self.parser = parser if parser is not None else Parser(_bash_language())
        self.source_bytes, self.parser_bytes = _bash_input(text)
        self.lines = self.source_bytes.split(b"\n")
        self.depth = depth
        self.sites: list[Site] = []
        self.plainly_assigned: set[str] = set()
        self.bare_exports: list[Site] = []
        #: 0-based rows covered by ERROR nodes (re-read line by line afterwards)
        self.error_rows: set[int] = set()

    def text_of(self, node: Node) -> str:
        return _node_text(node, self.source_bytes)

    def unquote(self, node: Node) -> str:
        return _unquote_node(node, self.source_bytes)

    def run(self) -> list[Site]:
        tree = self.parser.parse(self.parser_bytes)
        for node in _iter_nodes(tree.root_node):
            if node.type == "ERROR":
                self.error_rows.update(
                    range(node.start_point.row, node.end_point.row + 1)
                )
            elif node.type == "variable_assignment":
                self._assignment(node)
            elif node.type == "declaration_command":
                self._declaration(node)
            elif node.type == "command":
                self._command(node)
            elif node.type == "comment":
                self._comment(node)
        if self.error_rows and self.depth == 0:
            self._reread_error_rows()
        passthroughs = [
            site for site in self.bare_exports if site.var not in self.plainly_assigned
        ]
        return self.sites + passthroughs

    def _reread_error_rows(self) -> None:
        """Parse each line of an ERROR region that yielded nothing on its own."""
        rows_with_sites = {site.line - 1 for site in self.sites + self.bare_exports}
        for row in sorted(self.error_rows - rows_with_sites):
            line_bytes = self.lines[row] if row < len(self.lines) else b""
            if b"=" not in line_bytes and b"export" not in line_bytes:
                continue
            line_text = line_bytes.decode("utf-8", errors="replace")
            nested = _ShellScan(line_text, depth=self.depth + 1, parser=self.parser)
            nested.run()
            self.sites.extend(site._replace(line=row + 1) for site in nested.sites)
            self.bare_exports.extend(
                site._replace(line=row + 1) for site in nested.bare_exports
            )
            self.plainly_assigned |= nested.plainly_assigned

    # -- assignments --------------------------------------------------------
    def _assignment(self, node: Node) -> None:
        parent = node.parent
        if (
            parent is not None
            and parent.type == "declaration_command"
            and parent.children[0].type == "local"
        ):
            return  # `local X=1` is function scope, not the environment
        name_node = node.child_by_field_name("name") or (
            node.children[0] if node.children else None
        )
        if name_node is None or name_node.type != "variable_name":
            return  # subscript target X[0]=1
        var = self.text_of(name_node)
        if not NAME_RE.match(var):
            return
        operator = ""
        value_node: Node | None = None
        for child in node.children[1:]:
            if not child.is_named and child.type in ("=", "+="):
                operator = child.type
            elif child.is_named and operator:
                value_node = child
                break
        if value_node is not None and value_node.type == "array":
            return
        value = self.unquote(value_node) if value_node is not None else ""
        literal = value_node is not None and _has_literal_quoting(value_node)
        reported, kind = classify(
            var, value, may_reference=not literal, always_set=operator == "+="
        )
        self.sites.append(
            Site(
                var, node.start_point.row + 1, node.start_point.column, reported, kind
            )
        )
        is_command_prefix = parent is not None and parent.type == "command"
        if not is_command_prefix:
            self.plainly_assigned.add(var)

    def _declaration(self, node: Node) -> None:
        if not node.children:
            return
        keyword = node.children[0].type
        flags = [
            self.text_of(child)
            for child in node.children[1:]
            if child.type == "word" and self.text_of(child).startswith(("-", "+"))
        ]
        if keyword == "export":
            if any(
                flag.startswith("-") and ("n" in flag or "f" in flag) for flag in flags
            ):
                return
            exporting = True
        elif keyword in ("declare", "typeset"):
            exporting = any(flag.startswith("-") and "x" in flag for flag in flags)
        else:
            return
        for child in node.children[1:]:
            if child.type == "variable_name" and exporting:
                var = self.text_of(child)
                self.bare_exports.append(
                    Site(
                        var,
                        child.start_point.row + 1,
                        child.start_point.column,
                        None,
                        "passthrough",
                    )
                )
            elif child.type in ("string", "raw_string", "concatenation") and exporting:
                self._assignment_word(child)  # export "X=1"

    def _assignment_word(self, node: Node) -> bool:
        """``X=1`` as a plain word (``env`` argument, quoted export); False if it is not one."""
        unquoted = self.unquote(node)
        match = re.match(rf"^({NAME_PATTERN})=(.*)$", unquoted, flags=re.DOTALL)
        if match is None:
            return False
        var, value = match.group(1), match.group(2)
        reported, kind = classify(
            var, value, may_reference=not _has_literal_quoting(node)
        )
        self.sites.append(
            Site(
                var, node.start_point.row + 1, node.start_point.column, reported, kind
            )
        )
        return True

    # -- env X=1 cmd --------------------------------------------------------
    def _command(self, node: Node) -> None:
        words = [
            child
            for child in node.children
            if child.is_named
            and child.type
            not in ("variable_assignment", "file_redirect", "herestring_redirect")
        ]
        if not words or words[0].type != "command_name":
            return
        names = [self.text_of(word).rsplit("/", 1)[-1] for word in words]
        start = None
        if names[0] == "env":
            start = 1
        elif names[0] in _COMMAND_WRAPPERS and "env" in names[1:]:
            start = names.index("env", 1) + 1
        if start is None:
            return
        index = start
        while index < len(words):
            word = words[index]
            text = self.text_of(word)
            if word.type == "word" and text.startswith("-"):
                index += 2 if text in _ENV_OPTIONS_WITH_ARGUMENT else 1
                continue
            if not self._assignment_word(word):
                break
            index += 1

    # -- commented-out lines ------------------------------------------------
    def _comment(self, node: Node) -> None:
        if self.depth >= _MAX_COMMENT_DEPTH:
            return
        row, column = node.start_point.row, node.start_point.column
        line_bytes = self.lines[row] if row < len(self.lines) else b""
        if line_bytes[:column].strip():
            return  # trailing comment after code
        text = self.text_of(node)
        if text.startswith("#!"):
            return
        body = text.lstrip("#")
        if "=" not in body:
            return
        nested = _ShellScan(body, depth=self.depth + 1, parser=self.parser)
        nested.run()
        # a bare `# export X` is not a commented setting: only assignments count
        offset = len(text) - len(body)
        for site in as_commented(nested.sites):
            self.sites.append(
                site._replace(
                    line=row + site.line, column=column + offset + site.column
                )
            )


def shell_sites(text: str) -> list[Site]:
    return _ShellScan(text).run()


def setters_in_shell(path: str, text: str) -> list[EnvSetter]:
    """Settings in a shell script (parsed with tree-sitter-bash; ERROR regions yield what they can)."""
    return bind(shell_sites(text), path, "shell")
