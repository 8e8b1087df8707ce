"""What changed in the audit between two commits, as markdown."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cs_audit.git.repo import CommitInfo
from cs_audit.model import AuditResult, Finding
from cs_audit.render.markdown import cell, code


def render_diff(before: AuditResult, after: AuditResult, info_before: CommitInfo, info_after: CommitInfo,
                new: Sequence[Finding], fixed: Sequence[Finding], moved: int) -> str:
    """Markdown: switches added/removed, findings new/fixed (matched by the caller, by
    fingerprint), dispositions changed."""
    s_before = {s.name: s for s in before.switches}
    s_after = {s.name: s for s in after.switches}
    added = [s_after[n] for n in sorted(set(s_after) - set(s_before))]
    removed = [s_before[n] for n in sorted(set(s_before) - set(s_after))]
    changed = [
        (s_before[n], s_after[n]) for n in sorted(set(s_before) & set(s_after))
        if (s_before[n].disposition, s_before[n].merge_into) != (s_after[n].disposition, s_after[n].merge_into)
    ]

    def disposition(s: Any) -> str:
        return f"{s.disposition} → {code(s.merge_into)}" if s.merge_into else s.disposition

    def step_cost(f: Finding) -> str:
        # a site off the normal path (an error or a startup path) is not costed per step
        if f.path_kind != "normal":
            return f"{f.path_kind} path"
        if not f.cost_us:
            return "—"
        # a gated site costs nothing until its switch is turned on
        return f"{round(f.cost_us, 2):g}" + (" when on" if f.switch else "")

    def loc(f: Finding) -> str:
        span = f"{f.line}" if f.end_line == f.line else f"{f.line}-{f.end_line}"
        return code(f"{f.path}:{span}")

    name = cell(Path(after.root).name or after.root)
    lines = [
        f"# cs-audit diff: {name} {code(info_before.sha[:12])} → {code(info_after.sha[:12])}",
        "",
        f"- Before: {code(info_before.sha[:12])} {info_before.date} {cell(info_before.subject)}",
        f"- After: {code(info_after.sha[:12])} {info_after.date} {cell(info_after.subject)}",
        f"- Switches: {len(added)} added, {len(removed)} removed, {len(changed)} with a changed disposition",
        f"- Findings: {len(new)} new, {len(fixed)} fixed, {moved} moved (same rule, function and code elsewhere)",
        "",
        "## Switches added",
        "",
    ]
    if added:
        lines += ["| switch | category | disposition | first read |", "|---|---|---|---|"]
        for s in added:
            first = code(f"{s.reads[0].path}:{s.reads[0].line}") if s.reads else ""
            lines.append(f"| {code(s.name)} | {cell(s.category)} | {disposition(s)} | {first} |")
    else:
        lines.append("None.")
    lines += ["", "## Switches removed", ""]
    if removed:
        lines += ["| switch | category | disposition before |", "|---|---|---|"]
        lines += [f"| {code(s.name)} | {cell(s.category)} | {disposition(s)} |" for s in removed]
    else:
        lines.append("None.")
    lines += ["", "## Dispositions changed", ""]
    if changed:
        lines += ["| switch | before | after | why (after) |", "|---|---|---|---|"]
        for b, a in changed:
            lines.append(f"| {code(a.name)} | {disposition(b)} | {disposition(a)} | {cell('; '.join(a.reasons))} |")
    else:
        lines.append("None.")
    for title, rows in (("New findings", new), ("Fixed findings", fixed)):
        lines += ["", f"## {title}", ""]
        if not rows:
            lines.append("None.")
            continue
        lines += ["| rule | file:line | function | switch | freq | µs/step | code |", "|---|---|---|---|---|---|---|"]
        for f in sorted(rows, key=lambda f: (f.path, f.line, f.rule)):
            switch = code(f.switch.text) if f.switch else "ungated"
            lines.append(f"| {code(f.rule)} | {loc(f)} | {code(f.function or '<module>')} | {switch} | {f.frequency} | "
                         f"{step_cost(f)} | {code(f.code)} |")
    return "\n".join(lines) + "\n"
