"""Which rules a scan reports, as ruff chooses them: ``select`` (default: every rule; ``ALL``
names every rule) plus ``extend_select``, minus ``ignore``, minus ``per_file_ignores``
(path globs -> rules) for the files a glob matches.  A finding of a rule not reported is
dropped from the result, and so are the rules it names from the suppression comments (a
comment for a rule the scan does not report is not "unused").  Pure: applied to a result
after the analysis, so the caches hold every rule's findings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cs_audit.model import Finding, Suppression


ALL = "ALL"


@dataclass(frozen=True, slots=True)
class RuleSelection:
    """The reported rules: ``reported`` everywhere, less ``per_file`` ignores by glob."""

    reported: frozenset[str]
    per_file: tuple[tuple[str, frozenset[str]], ...] = ()

    def enabled(self, rule: str, path: str) -> bool:
        if rule not in self.reported:
            return False
        return not any(rule in rules and _matches(path, glob) for glob, rules in self.per_file)


def _matches(path: str, glob: str) -> bool:
    """A per-file glob matches a path under the scanned root as ``exclude`` globs do (a
    folder name matches what is in it)."""
    return fnmatchcase(path, glob) or fnmatchcase(path, glob.rstrip("/") + "/*")


def rule_selection(known: Iterable[str], select: tuple[str, ...] | None, extend_select: tuple[str, ...],
                   ignore: tuple[str, ...], per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...]) -> RuleSelection:
    """The selection from checked rule ids (``ALL`` expanded)."""
    every = tuple(known)

    def expand(ids: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for rule in ids:
            out.update(every if rule == ALL else (rule,))
        return out

    chosen = expand(select if select is not None else every) | expand(extend_select)
    reported = frozenset(chosen - expand(ignore))
    return RuleSelection(reported, tuple((glob, frozenset(expand(rules))) for glob, rules in per_file_ignores))


def unknown_rules(ids: Iterable[str], known: Iterable[str]) -> list[str]:
    """The ids of ``ids`` that are neither a rule of ``known`` nor ``ALL``."""
    names = set(known) | {ALL}
    return [rule for rule in ids if rule not in names]


def selected(findings: Iterable[Finding], suppressions: Iterable[Suppression],
             selection: RuleSelection) -> tuple[tuple[Finding, ...], tuple[Suppression, ...]]:
    """The findings the selection reports, and the suppressions with the rules it does not
    report taken out (a valid one left with no rule goes; an invalid one stays)."""
    kept = tuple(f for f in findings if selection.enabled(f.rule, f.path))
    out: list[Suppression] = []
    for sup in suppressions:
        if sup.problem:
            out.append(sup)
            continue
        rules = tuple(r for r in sup.rules if selection.enabled(r, sup.path))
        if rules:
            out.append(sup if rules == sup.rules else replace(sup, rules=rules))
    return kept, tuple(out)
