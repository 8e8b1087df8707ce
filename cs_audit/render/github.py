"""GitHub Actions workflow-command annotations (``::warning file=...,line=...::message``).

Every string from the scanned tree is escaped as the runner expects: in the message
``%`` -> ``%25``, CR -> ``%0D``, LF -> ``%0A``; in properties also ``:`` -> ``%3A`` and
``,`` -> ``%2C``.  So a file name or log text cannot end the command early or start a
new one (``\\n::set-env ...``).  Paths are relative to the repository root.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cs_audit.model import AuditResult, Finding, Notification
from cs_audit.render.safe import visible
from cs_audit.ruleset import RuleSet

LEVELS = {"high": "warning", "medium": "warning", "low": "notice"}


def escape_data(text: str) -> str:
    # controls and bidi characters shown escaped first: a log shows a workflow command raw
    return visible(text, keep_cr=True).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, message: str, *, file: str | None = None, line: int | None = None,
               end_line: int | None = None, title: str | None = None, col: int = 0) -> str:
    """One workflow command line (``level`` is ``error``, ``warning`` or ``notice``)."""
    props: list[str] = []
    if file is not None:
        props.append(f"file={escape_property(file)}")
        if line:
            props.append(f"line={line}")
            if col:
                props.append(f"col={col}")
            if end_line and end_line > line:
                props.append(f"endLine={end_line}")
    if title:
        props.append(f"title={escape_property(title)}")
    head = f"::{level} {','.join(props)}" if props else f"::{level}"
    return f"{head}::{escape_data(message)}"


def finding_annotation(f: Finding, rs: RuleSet, level: str, prefix: str = "") -> str:
    spec = rs.rules.get(f.rule)
    message = f.message
    if spec and spec.fix:
        message += f"\nFix: {spec.fix}."
    message += f"\nSuppress with: # cs-audit: ignore[{f.rule}] <reason>"
    return annotation(level, message, file=prefix + f.path, line=f.line, end_line=f.end_line, title=f"cs-audit {f.rule}",
                      col=f.col)


def note_annotation(n: Notification, prefix: str = "") -> str:
    level = {"error": "error", "warning": "warning"}.get(n.level, "notice")
    file = prefix + n.path if n.path else None  # a note about the whole tree names no file
    return annotation(level, n.message, file=file, line=n.line, title=f"cs-audit {n.id}")


#: the annotations of findings a run shows by default: GitHub shows about ten per step
MAX_ANNOTATIONS = 10
_SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2}


def ranked(findings: Iterable[Finding], rs: RuleSet) -> list[Finding]:
    """Findings most severe first, then the ones that run with no debug env set, then
    hottest (estimated cost per step), then by place."""
    def key(f: Finding) -> tuple[int, bool, float, str, int, str]:
        spec = rs.rules.get(f.rule)
        return (_SEVERITY_RANK.get(spec.severity if spec else "", 3), f.switch is not None, -f.cost_us, f.path, f.line, f.rule)

    return sorted(findings, key=key)


def counts_words(findings: Iterable[Finding], rs: RuleSet) -> str:
    """``12 findings (2 high, 10 medium)``."""
    from collections import Counter

    from cs_audit.render.check import plural

    listed = list(findings)
    by = Counter(rs.rules[f.rule].severity if f.rule in rs.rules else "other" for f in listed)
    parts = [f"{by[s]} {s}" for s in (*_SEVERITY_RANK, "other") if by.get(s)]
    return plural(len(listed), "finding") + (f" ({', '.join(parts)})" if parts else "")


def render_github(
    result: AuditResult,
    rs: RuleSet,
    *,
    prefix: str = "",
    suppressed: Mapping[str, str] | None = None,
    notes: Iterable[Notification] = (),
    levels: Mapping[str, str] | None = None,
    limit: int | None = None,
    summary: str | None = None,
) -> str:
    """Annotations for the findings (``levels``: fingerprint -> level; only those listed are
    shown when given, else every unsuppressed finding at its rule's severity).  ``limit``:
    at most that many finding annotations, the most severe and hottest; then, with
    ``summary`` (where the whole list is), one notice with the counts."""
    suppressed = suppressed or {}
    shown = [f for f in result.findings if f.fingerprint not in suppressed and (levels is None or f.fingerprint in levels)]
    if limit is not None:
        shown = ranked(shown, rs)[:limit]
    lines: list[str] = []
    for f in shown:
        if levels is not None:
            level = levels[f.fingerprint]
        else:
            spec = rs.rules.get(f.rule)
            level = LEVELS.get(spec.severity if spec else "", "warning")
        lines.append(finding_annotation(f, rs, level, prefix))
    lines.extend(note_annotation(n, prefix) for n in notes)
    if summary is not None:
        every = [f for f in result.findings if f.fingerprint not in suppressed]
        lines.append(annotation("notice", f"cs-audit: {counts_words(every, rs)}, {len(shown)} shown as annotations "
                                          f"(the most severe and hottest); {summary}"))
    return "".join(line + "\n" for line in lines)
