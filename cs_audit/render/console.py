"""The terminal outputs (rich): the summary (counts per rule, the top default-ON sites, errors),
one line per finding, and one switch (`switch`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from cs_audit.model import AuditResult, Finding, Switch, tree_notes
from cs_audit.render.check import plain, plural
from cs_audit.render.markdown import cached_reads_line, default_on_rows, hot_path_steps, verdict, via_words
from cs_audit.ruleset import RuleSet

TOP_SITES = 10
#: at most this many source lines of one finding with ``--output-format full``
FULL_LINES = 5


#: a line of the terminal output and its style on a terminal (rich style names, "" none)
Line = tuple[str, str]


def _columns(rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> list[str]:
    """Rows as text columns as wide as their widest cell: nothing is cut, a long path only
    makes its line longer (a terminal or CI log folds it, never truncates it)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
            for row in rows]


def summary_lines(result: AuditResult, rs: RuleSet, base: str) -> list[Line]:
    """The terminal summary: counts, hot roots, findings per rule, the top default-ON sites
    (their paths under ``base``, as :func:`finding_lines` prints them), skipped files (the
    command adds the phases and where the report went)."""
    counts = Counter(f.rule for f in result.findings)
    out: list[Line] = [(f"cs-audit: {plural(result.files_scanned, 'file')}, {plural(len(result.switches), 'switch')}, "
                        f"{plural(len(result.findings), 'finding')}, {len(result.errors)} skipped", "bold")]
    roots = result.roots
    if roots is not None:
        detected = roots.detected
        loops = f"; {plural(len(detected), 'event loop')} found in the code used as roots" if detected else ""
        out.append((plain(f"{roots.summary}{loops}"), ""))
        for e in detected[:TOP_SITES]:
            out.append((plain(f"  event loop {e.path}:{e.line} {e.function} (calls {', '.join(e.steps)})"), ""))
        if roots.warning:
            out.append((plain(f"warning: {roots.warning}"), "bold yellow"))
    out += [(plain(f"note: {n.message}"), "yellow") for n in tree_notes(result)]
    if result.cheap_reads:
        out.append((plain(f"checked, cheap: {cached_reads_line(result)}").replace("`", ""), ""))
    if counts:
        rows: list[tuple[str, ...]] = [("rule", "severity", "count", "default-ON")]
        for rule_id in rs.rules:
            if counts.get(rule_id):
                default_on = sum(1 for f in result.findings if f.rule == rule_id and f.switch is None)
                rows.append((rule_id, rs.rules[rule_id].severity, str(counts[rule_id]), str(default_on)))
        out += [("", ""), ("Findings per rule", "bold")]
        out += [("  " + line, "") for line in _columns(rows, frozenset({2, 3}))]
    if counts:
        out += [("", ""), (plain(verdict(result, rs).replace("**", "").replace("*", "").replace("`", "")), "")]
    top = default_on_rows(result, rs)[:TOP_SITES]
    if top:
        rows = [("#", "µs/step", "site", "rule", "freq", "via")]
        rows += [(str(i), f"{f.cost_us:g}", plain(f"{location(base, f.path)}:{f.line}"), f.rule, f.frequency,
                  plain(via_words(f, short=True)))
                 for i, f in enumerate(top, 1)]
        out += [("", ""), ("Top default-ON sites (estimated µs per step)", "bold")]
        out += [("  " + line, "") for line in _columns(rows, frozenset({0, 1}))]
    if result.errors:
        out += [("", ""), (f"{plural(len(result.errors), 'file')} skipped (see the report's errors / Skipped files)", "yellow")]
        out += [(plain(f"  {e.path}: {e.kind}: {e.message}"), "") for e in result.errors[:5]]
    return out


def location(base: str, path: str) -> str:
    """A finding's path as the user can open it from where they ran the scan: under the
    scanned folder ``base`` as they gave it (``.``: the path itself)."""
    return path if base in ("", ".") else f"{base.rstrip('/')}/{path}"


def finding_lines(findings: list[Finding], base: str, sources: dict[tuple[str, int], str], full: bool = False) -> list[str]:
    """One ``path:line:col: rule message`` line per finding (``col``: where the site starts
    on its line, else where the code on the line starts).  ``full`` adds the source lines
    (``sources``: (path, line) -> text) and the hot path.  ``findings`` in report order."""
    out: list[str] = []
    for f in findings:
        first = sources.get((f.path, f.line))
        col = f.col or (len(first) - len(first.lstrip()) + 1 if first and first.strip() else 1)
        out.append(f"{plain(location(base, f.path))}:{f.line}:{col}: {f.rule} {plain(f.message)}")
        if not full:
            continue
        last = min(f.end_line, f.line + FULL_LINES - 1)
        width = len(str(last))
        for number in range(f.line, last + 1):
            text = sources.get((f.path, number))
            if text is not None:
                out.append(f"  {number:>{width}} | {plain(text.rstrip())}")
        if f.end_line > last:
            out.append(f"  {'':>{width}} | ...")
        if f.hot_path:
            out.append(f"  hot path: {plain(' -> '.join(hot_path_steps(f)))}")
        out.append("")
    return out


def statistics_lines(findings: list[Finding], rs: RuleSet) -> list[str]:
    """``--statistics``: how many findings per rule, the most first."""
    counts = Counter(f.rule for f in findings)
    rows = [(str(n), rule, f"[{rs.rules[rule].severity}]" if rule in rs.rules else "", rs.rules[rule].summary if rule in rs.rules else "")
            for rule, n in sorted(counts.items(), key=lambda rn: (-rn[1], rn[0]))]
    return _columns(rows, frozenset({0})) if rows else []


def print_lines(console: Console, lines: list[Line]) -> None:
    """Lines on a rich console, styled on a terminal, never wrapped nor cut."""
    for text, style in lines:
        console.print(Text(text, style=style), soft_wrap=True)


def print_switch(console: Console, s: Switch, findings: list[Finding]) -> None:
    """One screen about one switch (``cs-audit switch NAME``), each line whole as the other
    terminal outputs: a terminal folds a long line, a pipe or a log keeps it as it is."""
    head = Text()
    head.append(plain(s.name), style="bold")
    head.append(f"  {s.category}  ")
    head.append(s.disposition, style={"KEEP": "green", "MERGE": "yellow", "REMOVE": "red"}.get(s.disposition, ""))
    if s.merge_into:
        head.append(plain(f" into {s.merge_into}"))
    console.print(head, soft_wrap=True)
    lines: list[Line] = [(plain(f"  - {reason}"), "") for reason in s.reasons]
    if s.added_in:
        lines.append((plain(f"added in {s.added_in.commit} {s.added_in.date} {s.added_in.subject}"), ""))
    elif s.added_in_note:
        lines.append((plain(f"added in: unknown ({s.added_in_note})"), ""))
    sections: list[tuple[str, list[tuple[str, str, str]]]] = [
        ("reads", [(f"{r.path}:{r.line}", r.function or "<module>", "per call" if r.per_call else "once") for r in s.reads]),
        ("gated sites", [(f"{g.path}:{g.line}", g.work + (f" (as {g.via})" if g.via else ""),
                          g.frequency + (", sync" if g.gpu_sync else "") + (f", from ={max(g.level, 1)}" if s.levels else ""))
                         for g in s.sites]),
        ("setters", [(f"{x.path}:{x.line}", x.kind, x.value or "") for x in s.setters]),
        ("readers", [(f"{p}:{line}", pattern, "") for p, line, pattern in s.readers]),
        ("findings", [(f"{f.path}:{f.line}", f.rule, f.frequency) for f in findings]),
    ]
    for title, rows in sections:
        lines.append((f"{title} ({len(rows)})", "bold"))
        if rows:
            lines += [("  " + line, "") for line in _columns([tuple(plain(cell) for cell in row) for row in rows])]
    if s.files:
        lines.append((plain("writes: " + ", ".join(s.files)), ""))
    print_lines(console, lines)
