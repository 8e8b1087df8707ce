"""What ``cs-audit check`` prints: plain text, markdown and JSON views of a :class:`CheckOutcome`.

The SARIF and GitHub views are ``render/sarif.py`` and ``render/github.py`` with the
check's states.  Text from the scanned tree is shown with control and bidi characters
made visible, so a file name cannot rewrite the terminal or forge a line.
"""

from __future__ import annotations

from typing import Any

from cs_audit.model import AuditResult, CheckOutcome, Finding, ReportContext
from cs_audit.render.json import dumps, finding_dict, note_dict, report_dict
from cs_audit.render.markdown import cell, code
from cs_audit.render.safe import plain as plain  # re-exported
from cs_audit.render.safe import visible as visible  # re-exported
from cs_audit.ruleset import RuleSet


def plural(n: int, word: str) -> str:
    """``1 file``, ``2 files``, ``2 switches``."""
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}{'es' if word.endswith(('s', 'sh', 'ch', 'x')) else 's'}"


def status(outcome: CheckOutcome) -> str:
    if outcome.incomplete:
        return "incomplete"
    return "fail" if outcome.new else "pass"


def _span(f: Finding) -> str:
    return f"{f.line}" if f.end_line == f.line else f"{f.line}-{f.end_line}"


def line_col(f: Finding) -> str:
    """``line:col`` of where the site starts, as ``scan`` and ruff print it (an editor or a
    terminal opens ``path:line:col``); column 1 when the scan did not record one."""
    return f"{f.line}:{f.col or 1}"


def _scope(outcome: CheckOutcome) -> str:
    parts = [f"gating: {outcome.gates.describe() or 'no rules'}"]
    if outcome.baseline:
        parts.append(f"against baseline {outcome.baseline}")
    if outcome.since:
        parts.append(f"on lines changed since {outcome.since[:12]}")
    return "; ".join(parts)


def render_check_text(result: AuditResult, rs: RuleSet, outcome: CheckOutcome, ctx: ReportContext) -> str:
    n = len(outcome.new)
    head = {"pass": "passed", "fail": f"FAILED: {n} new finding{'s' if n != 1 else ''}",
            "incomplete": "could not complete"}[status(outcome)]
    lines = [f"cs-audit check {head} ({plain(_scope(outcome))})", ""]
    for f in outcome.new:
        spec = rs.rules.get(f.rule)
        lines.append(f"NEW {plain(f.path)}:{line_col(f)} {f.rule}: {plain(f.message)}")
        lines.append(f"    code: {plain(' '.join(f.code.split()))}")
        if spec and spec.fix:
            lines.append(f"    fix: {plain(spec.fix)} (or `# cs-audit: ignore[{f.rule}] <reason>` on the line)")
    if outcome.new:
        lines.append("")
    if outcome.fixed:
        lines.append(f"fixed since the baseline: {len(outcome.fixed)} (--update-baseline drops them from the file)")
        for e in outcome.fixed:
            lines.append(f"  {plain(e.path)}:{e.line} {e.rule} {plain(e.function or '<module>')}")
        lines.append("")
    if ctx.notes:
        lines.append("notes:")
        for note in ctx.notes:
            where = f"{plain(note.path)}:{note.line}" if note.line else plain(note.path)
            lines.append(f"  {where} {note.id}: {plain(note.message)}")
        lines.append("")
    for why in outcome.incomplete:
        lines.append(f"incomplete: {plain(why)}")
    counts = (f"{plural(len(result.findings), 'finding')}, {outcome.gating} gating, {len(ctx.suppressed.suppressed)} suppressed, "
              f"{len(outcome.new)} new, {len(outcome.fixed)} fixed, {outcome.moved} moved; {plural(result.files_scanned, 'file')}")
    lines.append(counts)
    return "\n".join(lines) + "\n"


def render_check_markdown(result: AuditResult, rs: RuleSet, outcome: CheckOutcome, ctx: ReportContext) -> str:
    verdict = {"pass": "passed", "fail": f"**failed**: {len(outcome.new)} new", "incomplete": "**could not complete**"}
    lines = [
        f"# cs-audit check: {verdict[status(outcome)]}",
        "",
        f"- Scope: {cell(_scope(outcome))}",
        f"- Findings: {len(result.findings)}; gating {outcome.gating}; suppressed {len(ctx.suppressed.suppressed)}; "
        f"new {len(outcome.new)}; fixed {len(outcome.fixed)}; moved {outcome.moved}",
        "",
        "## New findings",
        "",
    ]
    if outcome.new:
        lines += ["| rule | file:line | function | code | fix |", "|---|---|---|---|---|"]
        for f in outcome.new:
            spec = rs.rules.get(f.rule)
            lines.append(f"| {code(f.rule)} | {code(f'{f.path}:{_span(f)}')} | {code(f.function or '<module>')} | "
                         f"{code(f.code)} | {cell(spec.fix if spec else '')} |")
    else:
        lines.append("None.")
    if outcome.baseline:  # with no baseline nothing can be fixed since one
        lines += ["", "## Fixed since the baseline", ""]
        if outcome.fixed:
            lines += ["| rule | file:line | function | code |", "|---|---|---|---|"]
            for e in outcome.fixed:
                lines.append(f"| {code(e.rule)} | {code(f'{e.path}:{e.line}')} | {code(e.function or '<module>')} | {code(e.code)} |")
        else:
            lines.append("None.")
    if ctx.notes:
        lines += ["", "## Notes", "", "| what | where | message |", "|---|---|---|"]
        for note in ctx.notes:
            where = f"{note.path}:{note.line}" if note.line else note.path
            lines.append(f"| {code(note.id)} | {code(where)} | {cell(note.message)} |")
    if outcome.incomplete:
        lines += ["", "## Could not complete", ""] + [f"- {cell(why)}" for why in outcome.incomplete]
    return "\n".join(lines) + "\n"


def check_dict(result: AuditResult, outcome: CheckOutcome, ctx: ReportContext) -> dict[str, Any]:
    """The JSON contract of the audit plus a ``check`` object (new/fixed/suppressed/notes)."""
    doc = report_dict(result)
    doc["check"] = {
        "status": status(outcome),
        "gates": [{"rule": r, "scope": scope, "only_default_on": scope != "any"} for r, scope in outcome.gates.rules.items()],
        "baseline": outcome.baseline,
        "since": outcome.since,
        "new": [finding_dict(f) for f in outcome.new],
        "fixed": [
            {"fingerprint": e.fingerprint, "rule": e.rule, "path": e.path, "line": e.line, "function": e.function, "code": e.code}
            for e in outcome.fixed
        ],
        "moved": outcome.moved,
        "suppressed": [{"fingerprint": fp, "reason": reason} for fp, reason in sorted(ctx.suppressed.suppressed.items())],
        "notes": [note_dict(n) for n in ctx.notes],
        "incomplete": list(outcome.incomplete),
    }
    return doc


def render_check_json(result: AuditResult, outcome: CheckOutcome, ctx: ReportContext) -> str:
    return dumps(check_dict(result, outcome, ctx)) + "\n"
