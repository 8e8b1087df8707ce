"""Applying the in-source suppressions (``# cs-audit: ignore[rule-id] reason``) to an audit.

A suppression sits in a comment on the finding's line or on the first line of the
statement that holds it (``ignore-file[...]``: anywhere, for the whole file), names one
or more rule ids (``ignore[a, b]``) and gives a reason after the bracket.  It is read with ``tokenize`` (so text inside strings never
counts) and only in files that contain the marker at all.

What is reported (as :class:`Notification`, never as a finding of a new rule id):

* ``invalid-suppression``: no reason, no rule named, an unknown rule id, or a
  ``cs-audit:`` comment that is not ``ignore[...]``.  An invalid suppression
  suppresses nothing: the finding it was meant for still counts.
* ``unused-suppression``: a valid suppression (or one of its rule ids) that matched
  no finding.  Reported only; it does not change the exit code.
"""

from __future__ import annotations

from cs_audit.model import INCOMPLETE, INVALID, SKIPPED, UNUSED, AuditResult, Finding, Notification, Suppressed


def apply_suppressions(result: AuditResult) -> Suppressed:
    """Split ``result.findings`` into kept and suppressed by the result's suppression
    comments; report bad and unused suppressions."""
    by_path: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_path.setdefault(f.path, []).append(f)
    suppressed: dict[str, str] = {}
    notes: list[Notification] = []
    for sup in result.suppressions:
        path = sup.path
        if sup.problem:
            notes.append(Notification(INVALID, path, sup.line, f"cs-audit suppression {sup.problem}; it suppresses nothing"))
            continue
        used: set[str] = set()
        covers = set(sup.covers)
        for f in by_path.get(path, ()):
            if f.rule in sup.rules and (sup.whole_file or f.line == sup.line or f.line in covers):
                suppressed.setdefault(f.fingerprint, sup.reason)
                used.add(f.rule)
        unused = [r for r in sup.rules if r not in used]
        if unused:
            notes.append(Notification(
                UNUSED, path, sup.line,
                f"cs-audit suppression of {', '.join(unused)} matches no finding "
                f"{'in this file' if sup.whole_file else 'on this line or statement'}: remove it",
            ))
    kept = tuple(f for f in result.findings if f.fingerprint not in suppressed)
    notes.sort(key=lambda n: (n.path, n.line or 0, n.id, n.message))
    return Suppressed(kept, suppressed, tuple(notes))


def skipped_notes(result: AuditResult) -> list[Notification]:
    """One notification per file the scan could not analyse."""
    return [Notification(SKIPPED, e.path, None, f"{e.kind}: {e.message}", "error" if e.kind in INCOMPLETE else "note")
            for e in result.errors]
