"""Setters in Python launchers (stdlib ``ast`` only): ``os.environ`` writes, ``env=`` keywords
and the dicts handed to them, and whole-line comments that hold one."""

from __future__ import annotations

import ast
import io
import re
import tokenize

from cs_audit.extract.setters.sites import NAME_RE, OFF_VALUES, Site, as_commented, bind, is_whole_line_comment
from cs_audit.model import EnvSetter, SetterKind
from cs_audit.pyast import parse_quietly

#: what a Python file that may set env vars for children (a launcher) holds, each form anchored
#: at its "env": `environ[...] =`, `environ.update(`/`.setdefault(`, `env =` (a word), `putenv(`
_ENVIRON_WRITE = re.compile(rb"environ(?:\s*\[[^\]]+\]\s*=|\.(?:update|setdefault)\()")
_ENV_ASSIGN = re.compile(rb"env\s*=")
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def may_set_env(data: bytes) -> bool:
    """Whether ``data`` holds an env write a launcher makes (worth the setter pass).  Every
    form contains "env": its occurrences are found with ``bytes.find`` and each is checked in
    place (much faster than one regex search for the alternatives over the whole file)."""
    find, pos = data.find, data.find(b"env")
    while pos != -1:
        if _ENVIRON_WRITE.match(data, pos) or (pos >= 3 and data.startswith(b"put", pos - 3) and data.startswith(b"(", pos + 3)):
            return True
        if (pos == 0 or data[pos - 1] not in _WORD_BYTES) and _ENV_ASSIGN.match(data, pos):
            return True
        pos = find(b"env", pos + 1)
    return False


_ENVIRON = "os.environ"
_ENV_READERS = frozenset({"os.environ.get", "os.getenv"})
_ENVIRON_COPIES = frozenset({"os.environ.copy", "copy.copy", "copy.deepcopy", "dict"})


def _python_aliases(nodes: list[ast.AST]) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


class _PythonScan:
    def __init__(self, text: str, aliases: dict[str, str]) -> None:
        #: source lines ("\n"-split; callers normalise line ends first)
        self.lines = text.split("\n")
        self.aliases = aliases
        self.env_dict_names: set[str] = set()
        self.sites: list[Site] = []

    # -- name resolution ----------------------------------------------------
    def dotted(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        return None

    def is_environ(self, node: ast.AST) -> bool:
        return self.dotted(node) == _ENVIRON

    def is_env_dict(self, node: ast.AST) -> bool:
        name = self.dotted(node)
        return name is not None and (name == _ENVIRON or name in self.env_dict_names)

    def copies_environ(self, node: ast.AST) -> bool:
        """``os.environ.copy()``, ``dict(os.environ, ...)``, ``{**os.environ, ...}``, ``os.environ | {...}``."""
        if isinstance(node, ast.Call):
            callee = self.dotted(node.func)
            if callee == "os.environ.copy":
                return True
            return (
                callee in _ENVIRON_COPIES
                and bool(node.args)
                and self.is_environ(node.args[0])
            )
        if isinstance(node, ast.Dict):
            return any(
                key is None and self.is_environ(value)
                for key, value in zip(node.keys, node.values)
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.copies_environ(node.left) or self.is_environ(node.left)
        return False

    # -- values -------------------------------------------------------------
    def segment(self, node: ast.AST) -> str:
        """Source text of ``node`` (``ast.get_source_segment`` re-splits the file per call)."""
        first: int | None = getattr(node, "lineno", None)
        last: int | None = getattr(node, "end_lineno", None)
        start: int | None = getattr(node, "col_offset", None)
        end: int | None = getattr(node, "end_col_offset", None)
        if (
            first is not None
            and last is not None
            and start is not None
            and end is not None
            and 1 <= first <= last <= len(self.lines)
        ):
            # ast columns are UTF-8 byte offsets
            chunk = [
                line.encode("utf-8", errors="surrogatepass")
                for line in self.lines[first - 1 : last]
            ]
            chunk[-1] = chunk[-1][:end]
            chunk[0] = chunk[0][start:]
            return b"\n".join(chunk).decode("utf-8", errors="replace")
        try:
            return ast.unparse(node)
        except (RecursionError, ValueError):
            return ""

    def literal(self, node: ast.AST | None) -> str | None:
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Constant) and isinstance(
            node.value, (bool, int, float)
        ):
            return repr(node.value)
        return self.segment(node)

    def classify(self, var: str, node: ast.AST) -> tuple[str | None, SetterKind]:
        if (
            isinstance(node, ast.Call)
            and node.args
            and self.dotted(node.func) in _ENV_READERS
        ):
            key = node.args[0]
            if isinstance(key, ast.Constant) and key.value == var:
                default = node.args[1] if len(node.args) > 1 else None
                return self.literal(default), "passthrough"
        if isinstance(node, ast.Subscript) and self.is_environ(node.value):
            key = node.slice
            if isinstance(key, ast.Constant) and key.value == var:
                return None, "passthrough"
        if isinstance(node, ast.Constant) and isinstance(
            node.value, (str, bool, int, float)
        ):
            value = self.literal(node) or ""
            return value, "off" if value.lower() in OFF_VALUES else "set"
        return self.segment(node), "set"

    def add(
        self,
        var: object,
        value_node: ast.AST,
        anchor: ast.AST,
        kind: SetterKind | None = None,
    ) -> None:
        if not isinstance(var, str) or not NAME_RE.match(var):
            return
        if kind == "passthrough":
            reported: str | None = self.literal(value_node)
        else:
            reported, kind = self.classify(var, value_node)
        line = getattr(anchor, "lineno", 1)
        column = getattr(anchor, "col_offset", 0)
        self.sites.append(Site(var, line, column, reported, kind))

    def add_call_mapping(self, node: ast.Call) -> None:
        """Entries a call's arguments give a mapping, as ``dict(...)`` and ``.update(...)`` take them:
        a first positional mapping, then keywords (``**m`` a mapping too)."""
        for argument in node.args[:1]:
            self.add_mapping(argument)
        for keyword in node.keywords:
            if keyword.arg is None:
                self.add_mapping(keyword.value)
            else:
                self.add(keyword.arg, keyword.value, keyword)

    def add_mapping(self, node: ast.AST) -> None:
        """Entries of a dict-like env expression: dict literal, ``dict(...)``, ``a | b``."""
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is None:
                    self.add_mapping(value)
                elif isinstance(key, ast.Constant):
                    self.add(key.value, value, key)
        elif isinstance(node, ast.Call) and self.dotted(node.func) == "dict":
            self.add_call_mapping(node)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            self.add_mapping(node.left)
            self.add_mapping(node.right)

    # -- passes -------------------------------------------------------------
    def collect_env_dict_names(self, nodes: list[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "env":
                        name = self.dotted(keyword.value)
                        if name is not None and name != _ENVIRON:
                            self.env_dict_names.add(name)
            elif isinstance(node, ast.Assign) and self.copies_environ(node.value):
                for target in node.targets:
                    name = self.dotted(target)
                    if name is not None:
                        self.env_dict_names.add(name)

    def scan(self, nodes: list[ast.AST]) -> list[Site]:
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                self.assignment(node)
            elif isinstance(node, ast.Call):
                self.call(node)
        return self.sites

    def assignment(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if node.value is None:
            return
        for target in targets:
            if isinstance(target, ast.Subscript) and self.is_env_dict(target.value):
                key = target.slice
                if isinstance(key, ast.Constant):
                    self.add(key.value, node.value, target)
            elif self.dotted(target) in self.env_dict_names:
                self.add_mapping(node.value)

    def call(self, node: ast.Call) -> None:
        callee = self.dotted(node.func)
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if (
            callee == "os.putenv"
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
        ):
            self.add(node.args[0].value, node.args[1], node)
        elif (
            receiver is not None
            and self.is_env_dict(receiver)
            and method == "setdefault"
        ):
            if len(node.args) >= 2 and isinstance(node.args[0], ast.Constant):
                self.add(node.args[0].value, node.args[1], node, kind="passthrough")
        elif receiver is not None and self.is_env_dict(receiver) and method == "update":
            self.add_call_mapping(node)
        for keyword in node.keywords:
            if keyword.arg == "env":
                self.add_mapping(keyword.value)


#: a whole-line comment that mentions env (``environ``, ``putenv``, ``env=``, ``env[``)
_ENV_COMMENT_HINT = re.compile(r"^[ \t\f]*#[^\n]*env", flags=re.MULTILINE)


def _python_comment_sites(
    text: str, aliases: dict[str, str], env_dict_names: set[str], nodes: list[ast.AST]
) -> list[Site]:
    """Settings in whole-line comments, found by parsing the comment body as Python."""
    sites: list[Site] = []
    candidates = [m.start() for m in _ENV_COMMENT_HINT.finditer(text)]
    if not candidates:
        return sites
    lines = text.split("\n")
    comments = _whole_line_comments(text, lines, candidates, nodes)
    if comments is None:
        return []
    for row, column, comment in comments:
        body = comment.lstrip("#").strip()
        if "env" not in body:
            continue
        try:
            comment_tree = parse_quietly(body)
        except (SyntaxError, ValueError, RecursionError):
            continue
        scan = _PythonScan(body, aliases)
        scan.env_dict_names = set(env_dict_names)
        for site in as_commented(scan.scan(list(ast.walk(comment_tree)))):
            sites.append(
                site._replace(line=row + site.line - 1, column=column + site.column)
            )
    return sites


def _whole_line_comments(
    text: str, lines: list[str], candidates: list[int], nodes: list[ast.AST]
) -> list[tuple[int, int, str]] | None:
    """(row, column, text) of every whole-line comment token; None when the file does not
    tokenize.  A line that starts with ``#`` is a comment unless it lies inside a string
    literal that spans lines: when no candidate line (``_ENV_COMMENT_HINT``'s matches, at
    offsets ``candidates``) does, they are the comments that matter, read off the lines;
    else the tokenizer decides, for every comment."""
    spans = [
        (node.lineno, node.end_lineno)
        for node in nodes
        if isinstance(node, (ast.Constant, ast.JoinedStr))
        and node.end_lineno is not None and node.end_lineno > node.lineno
    ]
    rows, row, counted = [], 1, 0
    for offset in candidates:  # in order: each stretch of the text counted once
        row += text.count("\n", counted, offset)
        counted = offset
        rows.append(row)
    if not any(first < row <= last for row in rows for first, last in spans):
        out = []
        for row in rows:
            line = lines[row - 1]
            column = line.index("#")
            out.append((row, column, line[column:]))
        return out
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    return [
        (token.start[0], token.start[1], token.string)
        for token in tokens
        if token.type == tokenize.COMMENT
        and token.start[0] <= len(lines)
        and is_whole_line_comment(lines[token.start[0] - 1], token.start[1])
    ]


def _walk_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes ``ast.walk`` yields, in its order (breadth first), much faster; nodes with no
    fields (contexts, operators: no children, never scanned) are left out, which changes
    the order of no other node."""
    out: list[ast.AST] = [tree]
    append, AST = out.append, ast.AST
    index = 0
    while index < len(out):
        node = out[index]
        index += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, AST):
                if value._fields:
                    append(value)
            elif value.__class__ is list:
                for item in value:
                    if isinstance(item, AST) and item._fields:
                        append(item)
    return out


def setters_in_python(path: str, text: str, tree: ast.Module | None = None) -> list[EnvSetter]:
    """Settings made by a Python launcher (stdlib ``ast`` only); a file that does not parse -> [].
    ``tree``: ``text`` already parsed (it must hold no carriage return: the tree's lines are
    those of ``text`` as it is)."""
    # Python counts a lone "\r" as a line break; normalise so ast and tokenize agree
    if tree is None or "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        try:
            tree = parse_quietly(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
    nodes = _walk_nodes(tree)
    aliases = _python_aliases(nodes)
    scan = _PythonScan(text, aliases)
    scan.collect_env_dict_names(nodes)
    sites = scan.scan(nodes)
    sites += _python_comment_sites(text, aliases, scan.env_dict_names, nodes)
    return bind(sites, path, "python")
