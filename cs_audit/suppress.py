"""In-source suppressions: ``# cs-audit: ignore[rule-id] reason``.

A suppression sits in a comment on the finding's line or on the first line of the
statement that holds it, names one or more rule ids (``ignore[a, b]``) and gives a
reason after the bracket.  It is read with ``tokenize`` (so text inside strings never
counts) and only in files that contain the marker at all.

What is reported (as :class:`Notification`, never as a finding of a new rule id):

* ``invalid-suppression``: no reason, no rule named, an unknown rule id, or a
  ``cs-audit:`` comment that is not ``ignore[...]``.  An invalid suppression
  suppresses nothing: the finding it was meant for still counts.
* ``unused-suppression``: a valid suppression (or one of its rule ids) that matched
  no finding.  Reported only; it does not change the exit code.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cs_audit.discover import discover
from cs_audit.model import AuditResult, Finding
from cs_audit.pyast import parse_quietly
from cs_audit.ruleset import RuleSet

MARKER = b"cs-audit"
_DIRECTIVE = re.compile(r"#\s*cs-audit\s*:\s*(?P<body>.*)$")
_IGNORE = re.compile(r"^ignore\s*(?:\[(?P<rules>[^\]]*)\])?(?P<reason>.*)$")
_REASON_LEAD = " \t:;,-\u2013\u2014"

INVALID = "invalid-suppression"
UNUSED = "unused-suppression"
SKIPPED = "file-skipped"
NOTIFICATION_IDS = {
    INVALID: "a `# cs-audit: ignore[...]` comment without a reason, without a known rule id, or malformed: it suppresses nothing",
    UNUSED: "a `# cs-audit: ignore[...]` comment that matches no finding on its line or statement",
    SKIPPED: "a file cs-audit could not analyse (syntax, encoding, size, ...): its findings are unknown",
}


@dataclass(frozen=True, slots=True)
class Suppression:
    path: str
    line: int
    rules: tuple[str, ...]
    reason: str
    #: why it is invalid (None: valid)
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    """Something about the run that is not a finding: a bad suppression, a skipped file."""

    id: str  # one of NOTIFICATION_IDS
    path: str
    line: int | None
    message: str
    level: str = "warning"  # SARIF notification level: error | warning | note


@dataclass(frozen=True)
class Suppressed:
    """The result of applying suppressions to an audit."""

    kept: tuple[Finding, ...]
    #: fingerprint -> the reason of the suppression that silenced it
    suppressed: dict[str, str]
    notes: tuple[Notification, ...]

    @property
    def suppressed_findings(self) -> int:
        return len(self.suppressed)


def parse_comment(path: str, line: int, comment: str, known: Iterable[str]) -> Suppression | None:
    """The suppression in one comment token, or None when it holds no ``cs-audit:``."""
    m = _DIRECTIVE.search(comment)
    if not m:
        return None
    body = m.group("body").strip()
    ig = _IGNORE.match(body)
    if not ig:
        return Suppression(path, line, (), "", f"unknown directive {body[:40]!r}: write `# cs-audit: ignore[rule-id] reason`")
    raw_rules = ig.group("rules")
    reason = ig.group("reason").strip().lstrip(_REASON_LEAD).strip()
    rules = tuple(r.strip() for r in (raw_rules or "").split(",") if r.strip())
    if not rules:
        return Suppression(path, line, (), reason, "names no rule: write `# cs-audit: ignore[rule-id] reason`")
    known = set(known)
    unknown = [r for r in rules if r not in known]
    if unknown:
        return Suppression(path, line, rules, reason, f"unknown rule id {', '.join(unknown)}")
    if not reason:
        return Suppression(path, line, rules, "", "no reason given: say why after the bracket")
    return Suppression(path, line, rules, reason)


def suppressions_in(path: str, data: bytes, known: Iterable[str]) -> list[Suppression]:
    """Every ``cs-audit:`` comment of one Python file (tokenized: strings never count)."""
    if MARKER not in data:
        return []
    known = tuple(known)
    out: list[Suppression] = []
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type == tokenize.COMMENT and "cs-audit" in tok.string:
                found = parse_comment(path, tok.start[0], tok.string, known)
                if found is not None:
                    out.append(found)
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, ValueError):
        return out  # a file that does not tokenize has no findings either
    return out


def statement_starts(data: bytes) -> dict[int, int]:
    """line -> first line of the innermost statement that holds it."""
    try:
        tree = parse_quietly(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    spans: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.end_lineno is not None:
            spans.append((node.lineno, node.end_lineno))
    # widest first, so the innermost statement writes last
    spans.sort(key=lambda s: (-(s[1] - s[0]), s[0]))
    first: dict[int, int] = {}
    for start, end in spans:
        for line in range(start, end + 1):
            first[line] = start
    return first


def apply_suppressions(result: AuditResult, rs: RuleSet, root: Path | None = None,
                       exclude: tuple[str, ...] = (), max_bytes: int = 1 << 20) -> Suppressed:
    """Split ``result.findings`` into kept and suppressed; report bad and unused suppressions.

    ``root`` is where the scanned files are read from (default: ``result.root``).
    """
    root = Path(result.root if root is None else root)
    base = root if root.is_dir() else root.parent
    skipped = {e.path for e in result.errors}
    if root.is_dir():
        sources, _ = discover(root, exclude)
        paths = sorted(s.path for s in sources if s.kind == "python" and s.path not in skipped)
    else:
        paths = [root.name] if root.name not in skipped else []
    by_path: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_path.setdefault(f.path, []).append(f)

    suppressed: dict[str, str] = {}
    notes: list[Notification] = []
    for path in paths:
        try:
            with open(base / path, "rb") as handle:
                data = handle.read(max_bytes + 1)
        except OSError:
            continue
        if len(data) > max_bytes or MARKER not in data:
            continue
        found = suppressions_in(path, data, rs.rules)
        if not found:
            continue
        findings = by_path.get(path, [])
        starts = statement_starts(data) if findings else {}
        for sup in found:
            if sup.problem:
                notes.append(Notification(INVALID, path, sup.line, f"cs-audit suppression {sup.problem}; it suppresses nothing"))
                continue
            used: set[str] = set()
            for f in findings:
                if f.rule in sup.rules and sup.line in (f.line, starts.get(f.line, f.line)):
                    suppressed.setdefault(f.fingerprint, sup.reason)
                    used.add(f.rule)
            unused = [r for r in sup.rules if r not in used]
            if unused:
                notes.append(Notification(
                    UNUSED, path, sup.line,
                    f"cs-audit suppression of {', '.join(unused)} matches no finding on this line or statement: remove it",
                ))
    kept = tuple(f for f in result.findings if f.fingerprint not in suppressed)
    notes.sort(key=lambda n: (n.path, n.line or 0, n.id, n.message))
    return Suppressed(kept, suppressed, tuple(notes))


def skipped_notes(result: AuditResult) -> list[Notification]:
    """One notification per file the scan could not analyse."""
    return [Notification(SKIPPED, e.path, None, f"{e.kind}: {e.message}", "error" if e.kind in INCOMPLETE else "note")
            for e in result.errors]


#: error kinds that mean the scan did not finish its job (exit 2 in ``check``)
INCOMPLETE = frozenset({"parser-crash", "timeout", "internal", "io"})
