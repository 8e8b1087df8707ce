"""Find every place an environment variable ("switch") is *set* outside the code that reads it.

Runner scripts, ``.env`` files, Dockerfiles, Makefiles, CI workflows and Python
launchers turn debug switches on.  Each function here takes one file's text and
returns ``EnvSetter`` rows; nothing reads the disk, imports or executes anything.

Classification (``EnvSetter.kind``)
-----------------------------------
``set``
    A real setting.  ``value`` is the literal text after ``=`` with one layer of
    quoting removed; a computed value (``$(date)``, ``"$HOME/x"``, a Python
    expression) keeps its raw text.
``off``
    A real setting to an off value: ``0``, ``false``, ``no``, ``off`` or the empty
    string, compared case-insensitively (``False``, ``OFF`` are off too).
``passthrough``
    The setting only forwards what the caller already had: ``X=${X:-0}``,
    ``X=${X-0}``, ``X=${X:=0}``, ``X=${X}``, ``X="$X"``, a bare ``export X``,
    make ``X ?= 0``, ``os.environ.setdefault("X", "0")``,
    ``env={"X": os.environ.get("X", "0")}``, CI ``X: ${{ env.X }}``.
    ``value`` is the default (``"0"``) or ``None`` when there is none.
``commented``
    The setting sits in a commented-out line (``# export X=1``, ``#X=1`` in a
    ``.env``, ``# ENV X=1``, ``# os.environ["X"] = "1"``).  ``value`` is computed
    as for the live line (for a commented passthrough, its default).  A comment
    that follows code on the same line is not a commented-out line and is ignored.

Scope decisions
---------------
* Shell: every syntactic assignment counts, including lower-case names (``i=0``)
  and plain ``X=1`` that is never exported — runners do ``X=1`` then ``export X``.
  Callers filter by the switches they know.  A bare ``export X`` adds a
  passthrough site only when the file never assigns ``X`` plainly (anywhere in
  the file, so ``export X; X=1`` is one site, not two).  ``local`` (with or
  without ``-x``), array assignments (``X=(a b)``) and subscripted targets
  (``X[0]=1``) are skipped; ``declare X=1`` and ``readonly X=1`` are plain
  assignments.  ``X+=v`` appends: always ``set``, value ``v``.
  ``env [-i] [-u NAME] X=1 cmd`` counts, also behind ``nohup``/``exec``/``time``/
  ``sudo``/``nice``/``setsid``/``stdbuf`` wrappers.  Assignments in heredoc bodies
  are text and are skipped.  A comment is read by parsing its body as shell, so
  prose (``# set X=1 to enable``) stays silent.  Lines inside a tree-sitter ERROR
  region that yielded nothing are re-parsed one by one.  ``docker run -e``,
  ``srun --export=`` and ``RUN`` bodies of Dockerfiles are not parsed.
* ``.env``: ``X=1``, ``export X=1``, ``X = 1``, quoted values, `` # note`` after an
  unquoted value dropped; a commented line needs ``#X=1`` without spaces around
  ``=`` (``# N = number of ...`` is prose).
* Dockerfile: ``ENV X=1 Y=2`` (shell-style quotes), legacy ``ENV X value``,
  ``\\`` continuations (each var gets the physical line it sits on);
  ``ARG`` is a build argument, not a setter.
* Makefile: ``export X=1`` / ``X := 1`` + ``export X`` / ``.EXPORT_ALL_VARIABLES``
  / a bare ``export`` line, target-specific ``target: export X=1``,
  ``$(eval export X=1)``, and recipe lines parsed as shell (``$$`` -> ``$``).
  A make value keeps no quotes here either (make would pass them literally).
* CI YAML: any mapping under a key named ``env`` or ``variables`` at any depth;
  line numbers come from the YAML node marks (``yaml.compose`` with the safe
  loader).  A null value is the empty string (off).  Shell in ``run:`` blocks
  is not parsed.
* Python: ``os.environ[...] = v``, ``os.putenv``, ``os.environ.setdefault``
  (passthrough), ``os.environ.update``, ``env=`` keywords of any call, and dicts
  bound to a name that is passed as ``env=`` or copied from ``os.environ``.
  Keys must be string literals.  A whole-line comment mentioning ``env`` is
  parsed as Python; prose does not parse and stays silent.  Line ends are
  normalised first, so line numbers follow ``ast``.
* Results are ordered by (line, column).  ``count_setters`` removes exact
  duplicates before counting; its ``count`` is the number of ``set`` sites.
* Nothing raises on odd input: unparsable YAML or Python gives ``[]``, shell
  with syntax errors gives what tree-sitter recovers.
"""

from __future__ import annotations

import ast
import io
import re
import shlex
import tokenize
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import Any, NamedTuple

import yaml
from tree_sitter import Language, Node, Parser

from cs_audit.model import EnvSetter, SetterKind, SetterSource
from cs_audit.pyast import parse_quietly

__all__ = [
    "count_setters",
    "setters_in_ci_yaml",
    "setters_in_dockerfile",
    "setters_in_dotenv",
    "setters_in_file",
    "setters_in_makefile",
    "setters_in_python",
    "setters_in_shell",
]

NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME_RE = re.compile(rf"^{NAME_PATTERN}$")
#: values that switch a flag off (compared lower-cased)
OFF_VALUES = frozenset({"0", "false", "no", "off", ""})

# --------------------------------------------------------------------------- #
# shared value classification
# --------------------------------------------------------------------------- #


class _Site(NamedTuple):
    """One setter before it is bound to a path/source; ``column`` orders a line."""

    var: str
    line: int
    column: int
    value: str | None
    kind: SetterKind


def _strip_matching_quotes(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _braces_balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _self_reference(
    var: str, value: str, make_style: bool = False, ci_style: bool = False
) -> tuple[bool, str | None]:
    """Whether ``value`` only forwards ``var`` itself; returns (matched, default)."""
    if "$" not in value or var not in value:
        return False, None  # no expansion of it at all (and no pattern to build per name)
    name = re.escape(var)
    forms = [
        rf"\${name}",
        rf"\$\{{{name}\}}",
        rf"\$\{{{name}(?::?[-=])(?P<default>.*)\}}",
    ]
    if make_style:
        forms.append(rf"\$\({name}\)")
    if ci_style:
        forms.append(rf"\$\{{\{{\s*env\.{name}\s*\}}\}}")
    match = re.fullmatch("|".join(forms), value, flags=re.DOTALL)
    if match is None:
        return False, None
    default = match.group("default")
    if default is None:
        return True, None
    if not _braces_balanced(default):
        return False, None  # `${X:-a}${X:-b}`: two expansions, not one default
    return True, _strip_matching_quotes(default)


def _classify(
    var: str,
    value: str,
    *,
    may_reference: bool = True,
    always_set: bool = False,
    make_style: bool = False,
    ci_style: bool = False,
) -> tuple[str | None, SetterKind]:
    """Kind and reported value of ``var=value`` (value already unquoted)."""
    if always_set:
        return value, "set"
    if may_reference:
        forwards, default = _self_reference(
            var, value, make_style=make_style, ci_style=ci_style
        )
        if forwards:
            return default, "passthrough"
    if value.lower() in OFF_VALUES:
        return value, "off"
    return value, "set"


def _as_commented(sites: Iterable[_Site]) -> list[_Site]:
    return [site._replace(kind="commented") for site in sites]


def _bind(sites: Iterable[_Site], path: str, source: SetterSource) -> list[EnvSetter]:
    ordered = sorted(sites, key=lambda site: (site.line, site.column))
    return [
        EnvSetter(
            var=site.var,
            path=path,
            line=site.line,
            value=site.value,
            kind=site.kind,
            source=source,
        )
        for site in ordered
    ]


def _physical_lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only (as tree-sitter, grep and editors count them)."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def _is_whole_line_comment(line_text: str, column: int) -> bool:
    return line_text[:column].strip() == ""


def setters_in_file(path: str, text: str, kind: str) -> list[EnvSetter]:
    """Dispatch on ``kind`` (as ``cs_audit.extract.discover.file_kind`` names it); unknown kinds -> []."""
    reader = _READERS.get(kind)
    return reader(path, text) if reader is not None else []


# --------------------------------------------------------------------------- #
# shell (tree-sitter-bash)
# --------------------------------------------------------------------------- #

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
        self.sites: list[_Site] = []
        self.plainly_assigned: set[str] = set()
        self.bare_exports: list[_Site] = []
        #: 0-based rows covered by ERROR nodes (re-read line by line afterwards)
        self.error_rows: set[int] = set()

    def text_of(self, node: Node) -> str:
        return _node_text(node, self.source_bytes)

    def unquote(self, node: Node) -> str:
        return _unquote_node(node, self.source_bytes)

    def run(self) -> list[_Site]:
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
        if not _NAME_RE.match(var):
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
        reported, kind = _classify(
            var, value, may_reference=not literal, always_set=operator == "+="
        )
        self.sites.append(
            _Site(
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
                    _Site(
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
        reported, kind = _classify(
            var, value, may_reference=not _has_literal_quoting(node)
        )
        self.sites.append(
            _Site(
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
        for site in _as_commented(nested.sites):
            self.sites.append(
                site._replace(
                    line=row + site.line, column=column + offset + site.column
                )
            )


def _shell_sites(text: str) -> list[_Site]:
    return _ShellScan(text).run()


def setters_in_shell(path: str, text: str) -> list[EnvSetter]:
    """Settings in a shell script (parsed with tree-sitter-bash; ERROR regions yield what they can)."""
    return _bind(_shell_sites(text), path, "shell")


# --------------------------------------------------------------------------- #
# .env
# --------------------------------------------------------------------------- #

_DOTENV_LINE_RE = re.compile(
    rf"^\s*(?:export\s+)?(?P<var>{NAME_PATTERN})\s*=\s*(?P<rest>.*)$"
)
_DOTENV_COMMENTED_RE = re.compile(
    rf"^\s*#+\s*(?:export\s+)?(?P<var>{NAME_PATTERN})=(?P<rest>.*)$"
)


def _dotenv_value(rest: str) -> tuple[str, bool]:
    """(value, may_reference) of the text after ``=`` in a .env line."""
    rest = rest.strip()
    if rest[:1] in ("'", '"'):
        quote = rest[0]
        position = 1
        while position < len(rest):
            if rest[position] == "\\" and quote == '"':
                position += 2
                continue
            if rest[position] == quote:
                return rest[1:position], quote == '"'
            position += 1
        return rest[1:], quote == '"'  # unterminated: best effort
    comment = re.search(r"\s#", rest)
    if comment is not None:
        rest = rest[: comment.start()]
    return rest.strip(), True


def _dotenv_sites(text: str) -> list[_Site]:
    sites: list[_Site] = []
    for line_number, line in enumerate(_physical_lines(text), start=1):
        if not line.strip():
            continue
        commented = _DOTENV_COMMENTED_RE.match(line)
        match = commented or (
            None if line.lstrip().startswith("#") else _DOTENV_LINE_RE.match(line)
        )
        if match is None:
            continue
        var = match.group("var")
        value, may_reference = _dotenv_value(match.group("rest"))
        reported, kind = _classify(var, value, may_reference=may_reference)
        sites.append(
            _Site(
                var,
                line_number,
                match.start("var"),
                reported,
                "commented" if commented else kind,
            )
        )
    return sites


def setters_in_dotenv(path: str, text: str) -> list[EnvSetter]:
    """``X=1``, ``export X=1``, ``X="a b"`` (inline `` # note`` dropped), ``# X=1`` commented."""
    return _bind(_dotenv_sites(text), path, "dotenv")


# --------------------------------------------------------------------------- #
# Dockerfile
# --------------------------------------------------------------------------- #

#: a run of name characters: a variable stands in a line as one whole run
_WORD = re.compile(r"[A-Za-z0-9_]+")
_DOCKER_ENV_RE = re.compile(r"^\s*ENV\s+(?P<args>.*)$", flags=re.IGNORECASE | re.DOTALL)


def _shell_words(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


def _docker_env_pairs(arguments: str) -> list[tuple[str, str]]:
    """(var, value) pairs of the arguments of one ENV instruction."""
    arguments = arguments.strip()
    first = arguments.split(None, 1)
    if not first:
        return []
    if "=" not in first[0]:  # legacy `ENV X value with spaces`
        var = first[0]
        value = _strip_matching_quotes(first[1].strip()) if len(first) > 1 else ""
        return [(var, value)] if _NAME_RE.match(var) else []
    pairs = []
    for word in _shell_words(arguments):
        var, _, value = word.partition("=")
        if _NAME_RE.match(var):
            pairs.append((var, value))
    return pairs


def _docker_instructions(text: str) -> Iterator[tuple[list[tuple[int, str]], bool]]:
    """Logical lines as (physical (line number, text) pairs, commented-out?)."""
    lines = _physical_lines(text)
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if not stripped:
            index += 1
            continue
        if stripped.startswith("#"):
            yield [(index + 1, stripped.lstrip("#"))], True
            index += 1
            continue
        physical = [(index + 1, line)]
        while physical[-1][1].rstrip().endswith("\\") and index + 1 < len(lines):
            index += 1
            if lines[index].strip().startswith("#"):
                continue  # Docker drops comment lines inside a continuation
            physical.append((index + 1, lines[index]))
        index += 1
        yield physical, False


def _dockerfile_sites(text: str) -> list[_Site]:
    sites: list[_Site] = []
    for physical, commented in _docker_instructions(text):
        joined = " ".join(re.sub(r"\\\s*$", "", line_text) for _, line_text in physical)
        match = _DOCKER_ENV_RE.match(joined)
        if match is None:
            continue
        # the pairs come in the order of the text: each is looked for from where the one
        # before it was found (a line of many pairs is scanned once, not once per pair)
        cursor, position = 0, 0
        words: dict[int, dict[str, list[int]]] = {}  # physical line -> word -> its columns
        for var, value in _docker_env_pairs(match.group("args")):
            column = 0
            for at in range(cursor, len(physical)):
                if at not in words:
                    found_words: dict[str, list[int]] = {}
                    for word in _WORD.finditer(physical[at][1]):
                        found_words.setdefault(word.group(), []).append(word.start())
                    words[at] = found_words
                starts = words[at].get(var, ())
                index = bisect_left(starts, position) if at == cursor else 0
                if index < len(starts):
                    cursor, column = at, starts[index]
                    position = column + len(var)
                    break
            reported, kind = _classify(var, value)
            sites.append(
                _Site(
                    var,
                    physical[cursor][0],
                    column,
                    reported,
                    "commented" if commented else kind,
                )
            )
    return sites


def setters_in_dockerfile(path: str, text: str) -> list[EnvSetter]:
    """``ENV X=1 Y=2`` and legacy ``ENV X 1``; ``# ENV X=1`` commented; ``ARG`` and ``RUN`` ignored."""
    return _bind(_dockerfile_sites(text), path, "docker")


# --------------------------------------------------------------------------- #
# Makefile
# --------------------------------------------------------------------------- #

_MAKE_OPERATOR = r"(?P<op>:::=|::?=|\?=|\+=|!=|=)"
_MAKE_ASSIGN_RE = re.compile(
    rf"^\s*(?:override\s+)?(?P<export>export\s+)?(?:override\s+)?(?P<var>{NAME_PATTERN})\s*{_MAKE_OPERATOR}\s*(?P<value>.*)$",
    flags=re.DOTALL,
)
_MAKE_TARGET_EXPORT_RE = re.compile(
    rf"^[^:=#\t][^:=#]*:(?![:=])\s*(?:override\s+)?export\s+(?P<var>{NAME_PATTERN})\s*{_MAKE_OPERATOR}\s*(?P<value>.*)$",
    flags=re.DOTALL,
)
_MAKE_BARE_EXPORT_RE = re.compile(rf"^\s*export(?P<names>(?:\s+{NAME_PATTERN})*)\s*$")
_MAKE_EVAL_EXPORT_RE = re.compile(
    rf"\$[({{]eval\s+export\s+(?P<var>{NAME_PATTERN})\s*{_MAKE_OPERATOR}\s*(?P<value>[^)}}]*)[)}}]"
)
_MAKE_COMMENTED_EXPORT_RE = re.compile(
    rf"^\s*#+\s*export\s+(?P<var>{NAME_PATTERN})\s*{_MAKE_OPERATOR}\s*(?P<value>.*)$",
    flags=re.DOTALL,
)


def _make_strip_comment(value: str) -> str:
    match = re.search(r"(?<!\\)#", value)
    return value[: match.start()] if match is not None else value


def _make_site(
    var: str, line: int, column: int, operator: str, raw_value: str
) -> _Site:
    value = _strip_matching_quotes(_make_strip_comment(raw_value).strip())
    if operator == "?=":
        return _Site(var, line, column, value, "passthrough")
    reported, kind = _classify(
        var, value, always_set=operator in ("+=", "!="), make_style=True
    )
    return _Site(var, line, column, reported, kind)


_MAKE_CONDITIONAL_RE = re.compile(r"^\s*(?:ifeq|ifneq|ifdef|ifndef|else|endif)\b")
_MAKE_RULE_RE = re.compile(r"^[^#=\t][^#=]*?:(?!=)")


class _MakeScan:
    def __init__(self, text: str) -> None:
        self.lines = _physical_lines(text)
        self.sites: list[_Site] = []
        self.plain_assignments: list[
            _Site
        ] = []  # unexported: count only if exported elsewhere
        self.bare_exports: list[_Site] = []
        self.export_all = False
        #: recipe text per physical line ("" elsewhere) so the shell scan keeps line numbers
        self.recipe_lines = [""] * len(self.lines)

    def run(self) -> list[_Site]:
        in_define = False
        in_rule = False  # a tab-led line after a rule header is recipe (shell), else make syntax
        recipe_continues = False
        index = 0
        while index < len(self.lines):
            line = self.lines[index]
            for match in _MAKE_EVAL_EXPORT_RE.finditer(line):
                self.sites.append(
                    _make_site(
                        match.group("var"),
                        index + 1,
                        match.start("var"),
                        match.group("op"),
                        match.group("value"),
                    )
                )
            if in_define:
                in_define = not re.match(r"^\s*endef\b", line)
                index += 1
                continue
            if recipe_continues or (line.startswith("\t") and in_rule):
                recipe_text = line.removeprefix("\t")
                self.recipe_lines[index] = re.sub(
                    r"^[@+\-\s]*", "", recipe_text
                ).replace("$$", "$")
                recipe_continues = line.rstrip().endswith("\\")
                index += 1
                continue
            first_index = index
            logical = line
            while logical.rstrip().endswith("\\") and index + 1 < len(self.lines):
                index += 1
                logical = logical.rstrip()[:-1] + " " + self.lines[index].strip()
            index += 1
            stripped = logical.strip()
            if not stripped or _MAKE_CONDITIONAL_RE.match(logical):
                continue
            if re.match(r"^(?:(?:override|export)\s+)*define\b", stripped):
                in_define = True
                continue
            if stripped.startswith("#"):
                self._make_comment(
                    logical, first_index + 1
                )  # comments do not end a rule
                continue
            in_rule = self._make_line(logical.lstrip("\t"), first_index + 1)
        return self._finish()

    def _make_comment(self, logical: str, line_number: int) -> None:
        commented = _MAKE_COMMENTED_EXPORT_RE.match(logical)
        if commented is not None:
            site = _make_site(
                commented.group("var"),
                line_number,
                commented.start("var"),
                commented.group("op"),
                commented.group("value"),
            )
            self.sites.append(site._replace(kind="commented"))

    def _make_line(self, logical: str, line_number: int) -> bool:
        """Record the settings of one logical make line; True when it is a rule header."""
        stripped = logical.strip()
        if stripped.startswith(".EXPORT_ALL_VARIABLES"):
            self.export_all = True
            return True
        bare = _MAKE_BARE_EXPORT_RE.match(_make_strip_comment(logical))
        if bare is not None:
            names = bare.group("names").split()
            self.export_all = self.export_all or not names
            for name in names:
                column = logical.find(name, logical.find("export") + len("export"))
                self.bare_exports.append(
                    _Site(name, line_number, column, None, "passthrough")
                )
            return False
        target_export = _MAKE_TARGET_EXPORT_RE.match(logical)
        if target_export is not None:
            self.sites.append(
                _make_site(
                    target_export.group("var"),
                    line_number,
                    target_export.start("var"),
                    target_export.group("op"),
                    target_export.group("value"),
                )
            )
            return True
        assignment = _MAKE_ASSIGN_RE.match(logical)
        if assignment is not None:
            site = _make_site(
                assignment.group("var"),
                line_number,
                assignment.start("var"),
                assignment.group("op"),
                assignment.group("value"),
            )
            (
                self.sites if assignment.group("export") else self.plain_assignments
            ).append(site)
            return False
        return _MAKE_RULE_RE.match(logical) is not None

    def _finish(self) -> list[_Site]:
        exported_names = {site.var for site in self.bare_exports}
        assigned_names = {site.var for site in self.plain_assignments}
        sites = list(self.sites)
        sites.extend(
            site
            for site in self.plain_assignments
            if self.export_all or site.var in exported_names
        )
        sites.extend(
            site for site in self.bare_exports if site.var not in assigned_names
        )
        if any(self.recipe_lines):
            sites.extend(_shell_sites("\n".join(self.recipe_lines)))
        return sites


def setters_in_makefile(path: str, text: str) -> list[EnvSetter]:
    """Exported make variables and shell settings in recipe lines (``X ?= v`` is a passthrough)."""
    return _bind(_MakeScan(text).run(), path, "make")


# --------------------------------------------------------------------------- #
# CI YAML
# --------------------------------------------------------------------------- #

_CI_ENV_KEYS = frozenset({"env", "variables"})


def _ci_scalar_value(node: yaml.Node) -> str | None:
    if isinstance(node, yaml.ScalarNode):
        return "" if node.tag == "tag:yaml.org,2002:null" else str(node.value)
    if isinstance(node, yaml.MappingNode):  # GitLab `X: {value: "1", description: ...}`
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == "value":
                return _ci_scalar_value(value_node)
    return None


def _ci_sites(text: str) -> list[_Site]:
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except (yaml.YAMLError, ValueError, RecursionError):
        return []
    sites: list[_Site] = []
    visited: set[int] = set()
    stack: list[Any] = [doc for doc in documents if doc is not None]
    while stack:
        node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
            continue
        if not isinstance(node, yaml.MappingNode):
            continue
        for key_node, value_node in node.value:
            is_env_block = (
                isinstance(key_node, yaml.ScalarNode)
                and key_node.value in _CI_ENV_KEYS
                and isinstance(value_node, yaml.MappingNode)
            )
            if not is_env_block:
                stack.append(value_node)
                continue
            for var_node, var_value_node in value_node.value:
                if not isinstance(var_node, yaml.ScalarNode) or not _NAME_RE.match(
                    str(var_node.value)
                ):
                    continue
                value = _ci_scalar_value(var_value_node)
                if value is None:
                    continue
                var = str(var_node.value)
                reported, kind = _classify(var, value, ci_style=True)
                index = (
                    var_node.start_mark.index
                )  # count "\n" only, like the other readers
                line = text.count("\n", 0, index) + 1
                column = index - (text.rfind("\n", 0, index) + 1)
                sites.append(_Site(var, line, column, reported, kind))
    return sites


def setters_in_ci_yaml(path: str, text: str) -> list[EnvSetter]:
    """Mappings under ``env:`` / ``variables:`` at any depth; invalid YAML -> []."""
    return _bind(_ci_sites(text), path, "ci")


# --------------------------------------------------------------------------- #
# Python launchers (ast only)
# --------------------------------------------------------------------------- #

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
        self.sites: list[_Site] = []

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
        if not isinstance(var, str) or not _NAME_RE.match(var):
            return
        if kind == "passthrough":
            reported: str | None = self.literal(value_node)
        else:
            reported, kind = self.classify(var, value_node)
        line = getattr(anchor, "lineno", 1)
        column = getattr(anchor, "col_offset", 0)
        self.sites.append(_Site(var, line, column, reported, kind))

    def add_mapping(self, node: ast.AST) -> None:
        """Entries of a dict-like env expression: dict literal, ``dict(...)``, ``a | b``."""
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is None:
                    self.add_mapping(value)
                elif isinstance(key, ast.Constant):
                    self.add(key.value, value, key)
        elif isinstance(node, ast.Call) and self.dotted(node.func) == "dict":
            for argument in node.args[:1]:
                self.add_mapping(argument)
            for keyword in node.keywords:
                if keyword.arg is None:
                    self.add_mapping(keyword.value)
                else:
                    self.add(keyword.arg, keyword.value, keyword)
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

    def scan(self, nodes: list[ast.AST]) -> list[_Site]:
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
            for argument in node.args[:1]:
                self.add_mapping(argument)
            for keyword in node.keywords:
                if keyword.arg is None:
                    self.add_mapping(keyword.value)
                else:
                    self.add(keyword.arg, keyword.value, keyword)
        for keyword in node.keywords:
            if keyword.arg == "env":
                self.add_mapping(keyword.value)


#: a whole-line comment that mentions env (``environ``, ``putenv``, ``env=``, ``env[``)
_ENV_COMMENT_HINT = re.compile(r"^[ \t\f]*#[^\n]*env", flags=re.MULTILINE)


def _python_comment_sites(
    text: str, aliases: dict[str, str], env_dict_names: set[str], nodes: list[ast.AST]
) -> list[_Site]:
    """Settings in whole-line comments, found by parsing the comment body as Python."""
    sites: list[_Site] = []
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
        for site in _as_commented(scan.scan(list(ast.walk(comment_tree)))):
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
        and _is_whole_line_comment(lines[token.start[0] - 1], token.start[1])
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
    return _bind(sites, path, "python")


_READERS: dict[str, Callable[[str, str], list[EnvSetter]]] = {
    "shell": setters_in_shell,
    "dotenv": setters_in_dotenv,
    "docker": setters_in_dockerfile,
    "make": setters_in_makefile,
    "ci": setters_in_ci_yaml,
    "python": setters_in_python,
}

# --------------------------------------------------------------------------- #
# aggregation
# --------------------------------------------------------------------------- #


def count_setters(setters: Iterable[EnvSetter]) -> dict[str, dict[str, Any]]:
    """Per var: ``count`` (kind ``set``), ``passthrough``, ``commented``, ``off`` and every site.

    Exact duplicate rows are counted once.  Vars are in sorted order; sites are
    sorted by (path, line, kind, value, source).  Each site is
    ``{"path", "line", "value", "kind"}``.
    """

    def site_order(setter: EnvSetter) -> tuple[str, int, str, bool, str, str]:
        return (
            setter.path,
            setter.line,
            setter.kind,
            setter.value is None,
            setter.value or "",
            setter.source,
        )

    by_var: dict[str, list[EnvSetter]] = {}
    for setter in set(setters):
        by_var.setdefault(setter.var, []).append(setter)
    summary: dict[str, dict[str, Any]] = {}
    for var in sorted(by_var):
        rows = sorted(by_var[var], key=site_order)
        summary[var] = {
            "count": sum(row.kind == "set" for row in rows),
            "passthrough": sum(row.kind == "passthrough" for row in rows),
            "commented": sum(row.kind == "commented" for row in rows),
            "off": sum(row.kind == "off" for row in rows),
            "sites": [
                {
                    "path": row.path,
                    "line": row.line,
                    "value": row.value,
                    "kind": row.kind,
                }
                for row in rows
            ],
        }
    return summary
