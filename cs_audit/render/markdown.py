"""The audit markdown, in the order of the hand-written seed audit: one function per table.

Every string that comes from the scanned tree goes through ``cell``/``code`` so a
pipe, backtick, newline, ``@mention`` or bidi control cannot break a table.
No timestamps or absolute paths: the same tree gives the same bytes.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import PurePath

from cs_audit.analysis.callgraph import LEVEL_GATE
from cs_audit.model import AuditResult, Finding
from cs_audit.ruleset import RuleSet

DEFAULT_ON_RULES = ("default-on-emitter", "sync-in-debug", "eager-format", "env-read-hot", "per-call-open", "redundant-flush")
HOT = ("step", "request", "round", "layer")
MAX_RANKED_ROWS = 60
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _visible(text: str) -> str:
    text = _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def cell(text: object) -> str:
    """Plain table-cell text with markdown and tables' specials escaped."""
    s = _visible(str(text))
    s = re.sub(r"([\\`*_\[\]<>|#])", r"\\\1", s)
    return s.replace("@", "@\u200b")


def code(text: object) -> str:
    """Inline code in a table cell: backtick fence longer than any run inside, pipes escaped."""
    s = _visible(str(text)).replace("|", "\\|")
    if not s:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _loc(f: Finding) -> str:
    span = f"{f.line}" if f.end_line == f.line else f"{f.line}-{f.end_line}"
    return code(f"{f.path}:{span}")


def _switch_text(switch: str | None) -> str:
    if switch is None:
        return "default"
    if switch == LEVEL_GATE:
        return "log level"
    return code(switch[5:] if switch.startswith("flag:") else switch)


def _cost_note(f: Finding, rs: RuleSet) -> str:
    if f.gpu_sync and f.rule == "sync-in-debug":
        return f"≈ +{f.cost_us:g} µs/step *estimate* (host-device sync, H200 table, per {f.frequency})"
    if f.cost_us:
        return f"≈ {f.cost_us:g} µs/step *estimate*"
    return "*estimate*: n/a"


def title(result: AuditResult) -> str:
    name = PurePath(result.root).name or result.root
    return name


def render_markdown(result: AuditResult, rs: RuleSet) -> str:
    parts = [
        _header(result),
        _default_on_table(result, rs),
        _switch_inventory(result),
        _findings_by_rule(result, rs),
        _duplicates(result),
        _errors(result),
        _assumptions(rs),
    ]
    return "\n".join(p for p in parts if p).rstrip() + "\n"


def _header(result: AuditResult) -> str:
    counts = Counter(f.rule for f in result.findings)
    lines = [
        f"# cs-audit: {cell(title(result))}",
        "",
        f"- Commit: {code(result.commit[:12]) if result.commit else 'not a git checkout' if not result.history_note else cell(result.history_note)}",
        f"- Files scanned: {result.files_scanned}; skipped: {len(result.errors)}",
        f"- Switches (env vars read): {len(result.switches)}",
        "- Findings: " + (", ".join(f"{code(rule)} {n}" for rule, n in sorted(counts.items())) or "none"),
        "",
        "Default assumed throughout: no debug env set, loggers at their default level. Every cost is an *estimate* "
        "from the measured per-event table (see Assumptions).",
        "",
    ]
    return "\n".join(lines)


def default_on_rows(result: AuditResult) -> list[Finding]:
    rows = [f for f in result.findings if f.rule in DEFAULT_ON_RULES and f.switch is None and f.frequency in HOT]
    rows.sort(key=lambda f: (-f.cost_us, f.path, f.line, f.rule))
    return rows


def _default_on_table(result: AuditResult, rs: RuleSet) -> str:
    rows = default_on_rows(result)
    lines = ["## 1. Default-ON cost, ranked by estimated per-step impact", ""]
    if not rows:
        lines += ["Nothing on a hot path runs with no debug env set.", ""]
        return "\n".join(lines)
    lines += [
        "Freq: **step** = one engine step; **request** = once per request per step; **round** = one verify round "
        "of one request; **layer** = once per layer per step.",
        "",
        "| # | What runs with no debug env | file:line | Freq | GPU sync | Est. cost / note |",
        "|---|---|---|---|---|---|",
    ]
    for i, f in enumerate(rows[:MAX_RANKED_ROWS], 1):
        what = f"{code(f.rule)} {code(f.code)}"
        lines.append(
            f"| {i} | {what} | {_loc(f)} | {f.frequency} | {'**yes**' if f.gpu_sync else 'no'} | {_cost_note(f, rs)} |"
        )
    if len(rows) > MAX_RANKED_ROWS:
        lines.append("")
        lines.append(f"… and {len(rows) - MAX_RANKED_ROWS} more default-ON sites, listed under Findings by rule.")
    total = sum(f.cost_us for f in rows)
    syncs = sum(1 for f in rows if f.gpu_sync)
    lines += [
        "",
        f"**Bottom line:** {len(rows)} default-ON sites on hot paths, ≈ {total:,.0f} µs per step in all (*estimate*, "
        f"B and L as in Assumptions); {syncs} of them force a GPU sync.",
        "",
    ]
    return "\n".join(lines)


def _switch_inventory(result: AuditResult) -> str:
    if not result.switches:
        return ""
    lines = [
        "## Switch inventory",
        "",
        "| Switch | Category | Reads | Per call | Gated sites | GPU sync | Setters | First read |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in result.switches:
        per_call = sum(1 for r in s.reads if r.per_call)
        first = s.reads[0] if s.reads else None
        setters = sum(1 for x in s.setters if x.kind in ("set", "off"))
        lines.append(
            f"| {code(s.name)} | {s.category} | {len(s.reads)} | {per_call} | {s.gated_sites} | "
            f"{'**yes**' if s.gpu_sync else 'no'} | {setters} | {code(f'{first.path}:{first.line}') if first else ''} |"
        )
    lines.append("")
    return "\n".join(lines)


def _findings_by_rule(result: AuditResult, rs: RuleSet) -> str:
    by_rule: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_rule.setdefault(f.rule, []).append(f)
    lines = ["## Findings by rule", ""]
    if not by_rule:
        lines += ["No findings.", ""]
    for rule_id in rs.rules:
        rows = by_rule.get(rule_id)
        if not rows:
            continue
        spec = rs.rules[rule_id]
        lines += [
            f"### {code(rule_id)} ({len(rows)}): {cell(spec.summary)}",
            "",
            "| file:line | function | switch | freq | sync | message |",
            "|---|---|---|---|---|---|",
        ]
        for f in rows:
            lines.append(
                f"| {_loc(f)} | {code(f.function) if f.function else ''} | {_switch_text(f.switch)} | {f.frequency} | "
                f"{'yes' if f.gpu_sync else 'no'} | {cell(f.message)} |"
            )
        lines.append("")
    return "\n".join(lines)


def _duplicates(result: AuditResult) -> str:
    if not result.duplicates:
        return ""
    lines = ["## Duplicated helper bodies", "", "Grouped by a hash of the body with parameters and locals renamed.", "",
             "| Helper | Copies | Where |", "|---|---|---|"]
    for g in result.duplicates:
        where = ", ".join(code(f"{s.path}:{s.line}") for s in g.sites)
        lines.append(f"| {code(g.name)} | {len(g.sites)} | {where} |")
    lines.append("")
    return "\n".join(lines)


def _errors(result: AuditResult) -> str:
    if not result.errors:
        return ""
    lines = ["## Skipped files", "", "| File | Kind | Why |", "|---|---|---|"]
    for e in result.errors:
        lines.append(f"| {code(e.path)} | {e.kind} | {cell(e.message)} |")
    lines.append("")
    return "\n".join(lines)


def _assumptions(rs: RuleSet) -> str:
    m = rs.multipliers
    return "\n".join([
        "## Assumptions",
        "",
        f"- Per-event costs: {cell(rs.cost_source)}; log line emitted ≈ {rs.costs_us['log_emitted']:g} µs, "
        f"env read ≈ {rs.costs_us['env_read']:g} µs, open+write+close ≈ {rs.costs_us['open_per_event']:g} µs.",
        f"- Per-step multipliers: request ×{m['request']:g} (B), round ×{m['round']:g}, layer ×{m['layer']:g} (L).",
        "- Syncs are costed by frequency from the H200 decode-step table (lost overlap, not the idle sync time).",
        "- Hot paths come from the roots in `rules/hot_paths.yaml` (plus project config) propagated through calls "
        "the tree resolves statically; calls through dynamic dispatch are not followed.",
        "",
        "### Not verified",
        "",
        "- Whether the ranked sites measurably slow a real step: the figures are per-event estimates times an assumed frequency.",
        "- Which log level the deployment configures: records at or above the default level are assumed emitted.",
        "",
    ])
