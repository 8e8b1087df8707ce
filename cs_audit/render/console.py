"""The terminal summary (rich): counts per rule, the top default-ON sites, errors."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cs_audit.model import AuditResult, Finding, Switch
from cs_audit.render.check import plain
from cs_audit.render.markdown import default_on_rows, via_words
from cs_audit.ruleset import RuleSet

TOP_SITES = 10


def _text(value: str, style: str = "") -> Text:
    """Terminal text of a name or message from the scanned tree: control, C1, bidi and line
    separator characters escaped (a file name cannot clear the screen or forge a line)."""
    return Text(plain(value), style=style)


def print_summary(console: Console, result: AuditResult, rs: RuleSet, written_to: str | None, verbose: bool = False) -> None:
    counts = Counter(f.rule for f in result.findings)
    header = Text(f"cs-audit: {result.files_scanned} files, {len(result.switches)} switches, "
                  f"{len(result.findings)} findings, {len(result.errors)} skipped")
    console.print(header, style="bold")
    roots = result.roots
    if roots is not None:
        detected = roots.detected
        loops = f"; {len(detected)} event loop{'s' if len(detected) != 1 else ''} found in the code used as roots" if detected else ""
        console.print(_text(f"{roots.summary}{loops}"))
        for e in detected[:TOP_SITES]:
            console.print(_text(f"  event loop {e.path}:{e.line} {e.function} (calls {', '.join(e.steps)})"), soft_wrap=True)
        if roots.warning:
            console.print(_text(f"warning: {roots.warning}", style="bold yellow"), soft_wrap=True)  # one line, for CI logs
    if counts:
        table = Table(title="Findings per rule", show_lines=False)
        table.add_column("rule")
        table.add_column("severity")
        table.add_column("count", justify="right")
        table.add_column("default-ON", justify="right")
        for rule_id in rs.rules:
            if counts.get(rule_id):
                default_on = sum(1 for f in result.findings if f.rule == rule_id and f.switch is None)
                table.add_row(rule_id, rs.rules[rule_id].severity, str(counts[rule_id]), str(default_on))
        console.print(table)
    rows = default_on_rows(result, rs)[:TOP_SITES]
    if rows:
        table = Table(title="Top default-ON sites (estimated µs per step)")
        table.add_column("#", justify="right")
        table.add_column("site")
        table.add_column("rule")
        table.add_column("freq")
        table.add_column("via", no_wrap=True, overflow="ellipsis", max_width=24)
        table.add_column("µs/step", justify="right")
        for i, f in enumerate(rows, 1):
            table.add_row(str(i), _text(f"{f.path}:{f.line}"), f.rule, f.frequency, _text(via_words(f, short=True)), f"{f.cost_us:g}")
        console.print(table)
    if result.errors:
        console.print(Text(f"{len(result.errors)} files skipped (see the report's errors / Skipped files)", style="yellow"))
        for e in result.errors[:5]:
            console.print(_text(f"  {e.path}: {e.kind}: {e.message}"))
    if verbose and result.timings:
        console.print(Text("phases: " + ", ".join(f"{name} {secs:.2f}s" for name, secs in result.timings)))
    if written_to:
        console.print(_text(f"report written to {written_to}", style="green"))


def print_switch(console: Console, s: Switch, findings: list[Finding]) -> None:
    """One screen about one switch (``cs-audit switch NAME``)."""
    head = Text()
    head.append(plain(s.name), style="bold")
    head.append(f"  {s.category}  ")
    head.append(s.disposition, style={"KEEP": "green", "MERGE": "yellow", "REMOVE": "red"}.get(s.disposition, ""))
    if s.merge_into:
        head.append(plain(f" into {s.merge_into}"))
    console.print(head)
    for reason in s.reasons:
        console.print(_text(f"  - {reason}"))
    if s.added_in:
        console.print(_text(f"added in {s.added_in.commit} {s.added_in.date} {s.added_in.subject}"))
    elif s.added_in_note:
        console.print(_text(f"added in: unknown ({s.added_in_note})"))
    sections = [
        ("reads", [(f"{r.path}:{r.line}", r.function or "<module>", "per call" if r.per_call else "once") for r in s.reads]),
        ("gated sites", [(f"{g.path}:{g.line}", g.work, g.frequency + (", sync" if g.gpu_sync else "")) for g in s.sites]),
        ("setters", [(f"{x.path}:{x.line}", x.kind, x.value or "") for x in s.setters]),
        ("readers", [(f"{p}:{line}", pattern, "") for p, line, pattern in s.readers]),
        ("findings", [(f"{f.path}:{f.line}", f.rule, f.frequency) for f in findings]),
    ]
    for title, rows in sections:
        table = Table(title=f"{title} ({len(rows)})", title_justify="left", show_header=False, box=None)
        for _ in range(3):
            table.add_column(overflow="fold")
        for row in rows:
            table.add_row(*(_text(c) for c in row))
        console.print(table)
    if s.files:
        console.print(_text("writes: " + ", ".join(s.files)))
