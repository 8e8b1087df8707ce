"""Every rule's ``example`` (must be flagged) and ``ok`` (must stay silent) in rules/rules.yaml, scanned.

Each snippet is scanned as it stands, as the module ``mod.py`` of a one-file tree: the
examples of the hot-path rules define ``execute_model``, a hot root of rules/hot_paths.yaml
with no class constraint, and the snippets may use names they do not import (``os``,
``logger``), which cs-audit reads by name.  duplicate-helper is about a body found in two
places, so ``_WRAPPED`` builds the tree its data implies: the example is scanned as two
copies (``a.py`` and ``b.py``; identical copies are duplicates "up to local renames" a
fortiori), and the ok ("same name, different body") as ``c.py`` beside those two copies,
silent in ``c.py``.

A test asks for at least one finding of the rule, not one per line: eager-format's example
is flagged on its first line only, since its second, ``cptrace(1, "alloc", h=khash(t))``, is
eager only once ``cptrace`` is known to gate inside and ``khash`` to be a function of the
tree, and the snippet defines neither (tests/test_rules.py does).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from cs_audit.ruleset import RuleSpec, load_ruleset
from cs_audit.testing import scan_files

RULESET = load_ruleset()
RULES = list(RULESET.rules)


@dataclass(frozen=True)
class Case:
    """A tree to scan and the file in it that holds the snippet under test."""

    files: dict[str, str]
    path: str = "mod.py"


def _two_copies(spec: RuleSpec) -> Case:
    return Case({"a.py": spec.example, "b.py": spec.example}, "a.py")


def _beside_two_copies(spec: RuleSpec) -> Case:
    return Case({"a.py": spec.example, "b.py": spec.example, "c.py": spec.ok}, "c.py")


#: (rule, kind) -> the tree its snippet is scanned in, when not ``mod.py`` alone (see the docstring)
_WRAPPED: dict[tuple[str, str], Callable[[RuleSpec], Case]] = {
    ("duplicate-helper", "example"): _two_copies,
    ("duplicate-helper", "ok"): _beside_two_copies,
}
#: (rule, kind) -> why the snippet cannot pass as written in rules.yaml (strict: fix the data, then drop it)
_BROKEN: dict[tuple[str, str], str] = {}


def case_of(rule: str, kind: str) -> Case:
    spec = RULESET.rules[rule]
    wrap = _WRAPPED.get((rule, kind))
    return wrap(spec) if wrap else Case({"mod.py": getattr(spec, kind)})


def _params(kind: str) -> list[object]:
    return [
        pytest.param(rule, id=rule, marks=pytest.mark.xfail(strict=True, reason=_BROKEN[(rule, kind)]))
        if (rule, kind) in _BROKEN else pytest.param(rule, id=rule)
        for rule in RULES
    ]


def _findings(case: Case, rule: str) -> list[tuple[str, int]]:
    result = scan_files(case.files, cache=False)
    assert result.errors == (), result.errors
    return [(f.path, f.line) for f in result.findings if f.rule == rule and f.path == case.path]


@pytest.mark.parametrize("rule", _params("example"))
def test_example_is_flagged(rule: str) -> None:
    case = case_of(rule, "example")
    assert _findings(case, rule), f"{rule}: its example yields no {rule} finding:\n{RULESET.rules[rule].example}"


@pytest.mark.parametrize("rule", _params("ok"))
def test_ok_is_silent(rule: str) -> None:
    case = case_of(rule, "ok")
    assert _findings(case, rule) == [], f"{rule}: its ok snippet is flagged:\n{RULESET.rules[rule].ok}"


def test_every_rule_has_an_example_and_an_ok() -> None:
    empty = [f"{rule}.{kind}" for rule, spec in RULESET.rules.items() for kind in ("example", "ok")
             if not getattr(spec, kind).strip()]
    assert RULES and empty == []


def test_every_snippet_parses_as_python() -> None:
    broken = []
    for rule, spec in RULESET.rules.items():
        for kind in ("example", "ok"):
            try:
                ast.parse(getattr(spec, kind))
            except SyntaxError as exc:
                broken.append(f"{rule}.{kind}: {exc}")
    assert broken == []


def test_the_exceptions_name_real_rules() -> None:
    assert {rule for rule, _ in _WRAPPED} | {rule for rule, _ in _BROKEN} <= set(RULES)
