"""The records every setter reader shares: a site before it is bound to its file, how a
value is classified (set, off, passthrough) and the line helpers (see the package's docstring)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from cs_audit.model import EnvSetter, SetterKind, SetterSource

NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
NAME_RE = re.compile(rf"^{NAME_PATTERN}$")
#: values that switch a flag off (compared lower-cased)
OFF_VALUES = frozenset({"0", "false", "no", "off", ""})


class Site(NamedTuple):
    """One setter before it is bound to a path/source; ``column`` orders a line."""

    var: str
    line: int
    column: int
    value: str | None
    kind: SetterKind


def strip_matching_quotes(text: str) -> str:
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
    return True, strip_matching_quotes(default)


def classify(
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


def as_commented(sites: Iterable[Site]) -> list[Site]:
    return [site._replace(kind="commented") for site in sites]


def bind(sites: Iterable[Site], path: str, source: SetterSource) -> list[EnvSetter]:
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


def physical_lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only (as tree-sitter, grep and editors count them)."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def is_whole_line_comment(line_text: str, column: int) -> bool:
    return line_text[:column].strip() == ""
