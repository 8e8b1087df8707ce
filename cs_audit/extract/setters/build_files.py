"""Setters in the files that build and launch the engine besides its scripts: ``.env`` files,
Dockerfiles, Makefiles (recipe lines parsed as shell) and CI workflows."""

from __future__ import annotations

import re
import shlex
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

import yaml

from cs_audit.extract.setters.shell import shell_sites
from cs_audit.extract.setters.sites import NAME_PATTERN, NAME_RE, Site, bind, classify, physical_lines, strip_matching_quotes
from cs_audit.model import EnvSetter

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


def _dotenv_sites(text: str) -> list[Site]:
    sites: list[Site] = []
    for line_number, line in enumerate(physical_lines(text), start=1):
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
        reported, kind = classify(var, value, may_reference=may_reference)
        sites.append(
            Site(
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
    return bind(_dotenv_sites(text), path, "dotenv")


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
        value = strip_matching_quotes(first[1].strip()) if len(first) > 1 else ""
        return [(var, value)] if NAME_RE.match(var) else []
    pairs = []
    for word in _shell_words(arguments):
        var, _, value = word.partition("=")
        if NAME_RE.match(var):
            pairs.append((var, value))
    return pairs


def _docker_instructions(text: str) -> Iterator[tuple[list[tuple[int, str]], bool]]:
    """Logical lines as (physical (line number, text) pairs, commented-out?)."""
    lines = physical_lines(text)
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


def _dockerfile_sites(text: str) -> list[Site]:
    sites: list[Site] = []
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
            reported, kind = classify(var, value)
            sites.append(
                Site(
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
    return bind(_dockerfile_sites(text), path, "docker")


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


def _make_site(match: re.Match[str], line: int) -> Site:
    """The site of a make assignment ``match`` (groups ``var``, ``op``, ``value``) on ``line``."""
    var, column, operator = match.group("var"), match.start("var"), match.group("op")
    value = strip_matching_quotes(_make_strip_comment(match.group("value")).strip())
    if operator == "?=":
        return Site(var, line, column, value, "passthrough")
    reported, kind = classify(
        var, value, always_set=operator in ("+=", "!="), make_style=True
    )
    return Site(var, line, column, reported, kind)


_MAKE_CONDITIONAL_RE = re.compile(r"^\s*(?:ifeq|ifneq|ifdef|ifndef|else|endif)\b")
_MAKE_RULE_RE = re.compile(r"^[^#=\t][^#=]*?:(?!=)")


class _MakeScan:
    def __init__(self, text: str) -> None:
        self.lines = physical_lines(text)
        self.sites: list[Site] = []
        self.plain_assignments: list[
            Site
        ] = []  # unexported: count only if exported elsewhere
        self.bare_exports: list[Site] = []
        self.export_all = False
        #: recipe text per physical line ("" elsewhere) so the shell scan keeps line numbers
        self.recipe_lines = [""] * len(self.lines)

    def run(self) -> list[Site]:
        in_define = False
        in_rule = False  # a tab-led line after a rule header is recipe (shell), else make syntax
        recipe_continues = False
        index = 0
        while index < len(self.lines):
            line = self.lines[index]
            for match in _MAKE_EVAL_EXPORT_RE.finditer(line):
                self.sites.append(
                    _make_site(match, index + 1)
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
            site = _make_site(commented, line_number)
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
                    Site(name, line_number, column, None, "passthrough")
                )
            return False
        target_export = _MAKE_TARGET_EXPORT_RE.match(logical)
        if target_export is not None:
            self.sites.append(
                _make_site(target_export, line_number)
            )
            return True
        assignment = _MAKE_ASSIGN_RE.match(logical)
        if assignment is not None:
            site = _make_site(assignment, line_number)
            (
                self.sites if assignment.group("export") else self.plain_assignments
            ).append(site)
            return False
        return _MAKE_RULE_RE.match(logical) is not None

    def _finish(self) -> list[Site]:
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
            sites.extend(shell_sites("\n".join(self.recipe_lines)))
        return sites


def setters_in_makefile(path: str, text: str) -> list[EnvSetter]:
    """Exported make variables and shell settings in recipe lines (``X ?= v`` is a passthrough)."""
    return bind(_MakeScan(text).run(), path, "make")


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


def _ci_sites(text: str) -> list[Site]:
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except (yaml.YAMLError, ValueError, RecursionError):
        return []
    sites: list[Site] = []
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
                if not isinstance(var_node, yaml.ScalarNode) or not NAME_RE.match(
                    str(var_node.value)
                ):
                    continue
                value = _ci_scalar_value(var_value_node)
                if value is None:
                    continue
                var = str(var_node.value)
                reported, kind = classify(var, value, ci_style=True)
                index = (
                    var_node.start_mark.index
                )  # count "\n" only, like the other readers
                line = text.count("\n", 0, index) + 1
                column = index - (text.rfind("\n", 0, index) + 1)
                sites.append(Site(var, line, column, reported, kind))
    return sites


def setters_in_ci_yaml(path: str, text: str) -> list[EnvSetter]:
    """Mappings under ``env:`` / ``variables:`` at any depth; invalid YAML -> []."""
    return bind(_ci_sites(text), path, "ci")
