"""The audit as one self-contained HTML page (``scan --format html``): no network, no
external file; its style, script and pictures are inline.

Sections: a header with the counts, a picture of the estimated default-on cost per step
(horizontal bars by file and by function, SVG drawn here), the default-on sites ranked, every
finding in a table that sorts by any column and filters by rule, switch, frequency and file
(each finding opens to its source lines and its hot path), the switch inventory, one anchor
per switch (``#switch-...``: reads, gated sites, setters, readers, added-in, disposition and
why), duplicated helpers, hot roots and skipped files.

The scanned tree is hostile: every text that comes from it (paths, code, names, messages)
is escaped with ``html.escape``, attributes quoted; nothing from it goes into the script,
which reads the page's own escaped attributes.  Pure: ``sources`` holds the source lines the
caller read.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from html import escape

from cs_audit.confirm.join import Observed, observed_words
from cs_audit.model import AuditResult, Finding, Switch, tree_notes
from cs_audit.render.markdown import (
    RANKED_PER_SIDE,
    Statement,
    _side,
    default_on_rows,
    hot_path_steps,
    side_total,
    side_totals,
    statement_words,
    statements,
    title,
    via_words,
)
from cs_audit.render.safe import visible
from cs_audit.ruleset import RuleSet

#: source lines shown per finding, at most
SNIPPET_LINES = 12
#: bars per chart
MAX_BARS = 15
_SEVERITY_COLOURS = {"high": "#c0392b", "medium": "#d68910", "low": "#2874a6"}
#: one colour per rule, in rule order (a palette that reads on white and prints in grey)
_PALETTE = ("#c0392b", "#e67e22", "#f1c40f", "#8e44ad", "#2980b9", "#16a085", "#27ae60", "#7f8c8d", "#d35400", "#2c3e50")


def h(text: object) -> str:
    """Text of the scanned tree as HTML text or a quoted attribute value."""
    return escape(visible(text), quote=True)


def anchor(prefix: str, name: str) -> str:
    """An id for ``name`` that is safe in any HTML attribute and URL fragment, and unique:
    the readable part plus a digest of the name itself."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:60].strip("-") or "x"
    return f"{prefix}-{readable}-{hashlib.sha1(name.encode('utf-8', 'surrogateescape')).hexdigest()[:6]}"


def _loc(f: Finding) -> str:
    return f"{f.path}:{f.line}" + (f":{f.col}" if f.col else "")


def render_html(result: AuditResult, rs: RuleSet, sources: Mapping[tuple[str, int], str] | None = None,
                name: str | None = None, observed: Mapping[str, Observed] | None = None) -> str:
    """The page; ``sources``: (path, line) -> the text of that line, for the findings'
    lines (missing lines fall back to the finding's code); ``name``: the tree's name;
    ``observed``: what a run showed of each finding (``scan --profile``), a column of §1."""
    sources = sources or {}
    colours = {rule: _PALETTE[i % len(_PALETTE)] for i, rule in enumerate(rs.rules)}
    shown = name or title(result)
    body = [
        _header(result, rs, shown, colours),
        _pictures(result, rs, colours),
        _ranked(result, rs, observed),
        _findings(result, rs, sources, colours),
        _inventory(result),
        _switch_pages(result),
        _duplicates(result),
        _roots(result),
        _errors(result),
        _assumptions(rs),
    ]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        # no request leaves the page: scripts, styles and images inline only
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>cs-audit: {h(shown)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + _nav()
        + "<main>\n" + "\n".join(part for part in body if part) + "\n</main>\n"
        + f"<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )


def _nav() -> str:
    links = [("pictures", "Cost picture"), ("default-on", "Default-ON"), ("findings", "Findings"),
             ("switches", "Switches"), ("duplicates", "Duplicates"), ("hot-roots", "Hot roots"), ("skipped", "Skipped")]
    return "<nav>" + "".join(f'<a href="#{i}">{t}</a>' for i, t in links) + "</nav>\n"


def _header(result: AuditResult, rs: RuleSet, shown: str, colours: Mapping[str, str]) -> str:
    counts = Counter(f.rule for f in result.findings)
    commit = result.commit[:12] if result.commit else (result.history_note or "not a git checkout")
    # per side and for one model architecture, as the markdown: never a sum across either
    sides = side_totals(result, rs)
    total = sides[0][1].total if sides else 0.0
    chips = "".join(
        f'<span class="chip" style="border-color:{colours[rule]}"><i style="background:{colours[rule]}"></i>'
        f"{h(rule)} <b>{counts[rule]}</b></span>"
        for rule in rs.rules if counts.get(rule)
    ) or "<span>no findings</span>"
    facts = [("commit", commit), ("files scanned", result.files_scanned), ("skipped", len(result.errors)),
             ("switches", len(result.switches)), ("findings", len(result.findings)),
             ("default-ON µs/step, costliest side (estimate)", f"{total:,.0f}")]
    cards = "".join(f'<div class="card"><div class="n">{h(v)}</div><div class="k">{h(k)}</div></div>' for k, v in facts)
    roots = f'<p class="note">{h(result.roots.summary)}</p>' if result.roots is not None else ""
    warning = f'<p class="warn">{h(result.roots.warning)}</p>' if result.roots is not None and result.roots.warning else ""
    warning += "".join(f'<p class="warn">{h(n.message)}</p>' for n in tree_notes(result))
    return (f"<header><h1>cs-audit: {h(shown)}</h1><div class=\"cards\">{cards}</div>"
            f"<div class=\"chips\">{chips}</div>{roots}{warning}"
            "<p class=\"note\">Default assumed throughout: no debug env set, loggers at their default level. "
            "Every cost is an <em>estimate</em> from the measured per-event table.</p></header>")


# -- the picture: default-on cost per step by file and by function


def _bars(title_text: str, rows: list[tuple[str, list[tuple[str, float]]]], colours: Mapping[str, str],
          keep_end: bool = True) -> str:
    """A horizontal bar chart, one bar per row split by rule: (label, [(rule, µs)]); a label
    too long is cut at its start (``keep_end``: a path's file name shows) or its end."""
    if not rows:
        return ""
    label_width, bar_width, row_height = 300, 250, 22
    fits = 40  # characters of a 12px monospace label in label_width
    largest = max(sum(v for _, v in parts) for _, parts in rows) or 1.0
    height = row_height * len(rows) + 30
    out = [f'<figure><figcaption>{h(title_text)}</figcaption>'
           f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{label_width + bar_width + 90}" height="{height}" '
           f'viewBox="0 0 {label_width + bar_width + 90} {height}" aria-label="{h(title_text)}">']
    for i, (label, parts) in enumerate(rows):
        y = 8 + i * row_height
        if len(label) <= fits:
            shown = label
        else:
            shown = "…" + label[-(fits - 1):] if keep_end else label[:fits - 1] + "…"
        out.append(f'<text x="{label_width - 8}" y="{y + 14}" text-anchor="end" class="lbl"><title>{h(label)}</title>{h(shown)}</text>')
        x = float(label_width)
        for rule, value in parts:
            w = bar_width * value / largest
            if w <= 0:
                continue
            out.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{max(w, 1):.1f}" height="{row_height - 6}" fill="{colours.get(rule, "#999")}">'
                       f"<title>{h(rule)}: ≈ {value:,.1f} µs/step (estimate)</title></rect>")
            x += w
        total = sum(v for _, v in parts)
        out.append(f'<text x="{x + 6:.1f}" y="{y + 14}" class="val">{total:,.0f}</text>')
    out.append(f'<text x="{label_width}" y="{height - 4}" class="axis">µs per engine step, estimated (bars split by rule)</text>')
    out.append("</svg></figure>")
    return "".join(out)


def _grouped(findings: Iterable[Finding], key: Callable[[Finding], str]) -> list[tuple[str, list[tuple[str, float]]]]:
    """The costliest groups of ``findings`` by ``key``, each split by rule."""
    by_group: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for f in findings:
        by_group[key(f)][f.rule] += f.cost_us
    ranked = sorted(by_group.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:MAX_BARS]
    return [(label, sorted(parts.items())) for label, parts in ranked if sum(parts.values()) > 0]


def _pictures(result: AuditResult, rs: RuleSet, colours: Mapping[str, str]) -> str:
    rows = [f for f in default_on_rows(result, rs) if f.cost_us > 0]
    head = '<section id="pictures"><h2>Default-ON cost per step, by file and by function</h2>'
    if not rows:
        return head + "<p>Nothing on a hot path runs with no debug env set.</p></section>"
    legend = "".join(f'<span class="chip"><i style="background:{colours[r]}"></i>{h(r)}</span>'
                     for r in rs.rules if any(f.rule == r for f in rows))
    return (head + f'<div class="chips">{legend}</div><div class="figs">'
            + _bars(f"by file (the {MAX_BARS} costliest)", _grouped(rows, lambda f: f.path), colours)
            + _bars(f"by function (the {MAX_BARS} costliest)", _grouped(rows, lambda f: f"{f.function or '<module>'} · {f.path.rsplit('/', 1)[-1]}"), colours,
                    keep_end=False)
            + "</div></section>")


# -- tables


def _words(markdown_words: str) -> str:
    """``statement_words``' markdown (code spans between backtick fences, pipes escaped) as
    HTML, so both reports word a statement alike; everything escaped."""
    out, at = [], 0
    for m in re.finditer(r"(`+)(.*?)(?<!`)\1(?!`)", markdown_words):
        inner = m.group(2).replace("\\|", "|")
        if len(inner) > 1 and inner[0] == inner[-1] == " ":
            inner = inner[1:-1]
        out += [h(markdown_words[at:m.start()]), f"<code>{h(inner)}</code>"]
        at = m.end()
    return "".join(out) + h(markdown_words[at:])


def _path_cell(text: str) -> str:
    """A path that may break after each ``/`` (and nowhere else unless it must)."""
    return h(text).replace("/", "/<wbr>")


def _ranked_table(rows: list[Statement], start: int, rs: RuleSet, observed: Mapping[str, Observed] | None = None) -> str:
    # fixed column widths: in an automatic layout the code column shrank to a few letters
    widths = ("2.6em", None, "22%", "5.5em", *(("8em",) if observed is not None else ()), "19%", "5.8em", "6.5em")
    cols = "".join(f'<col style="width:{w}">' if w else "<col>" for w in widths)
    out = [f'<table class="sortable stacks ranked"><colgroup>{cols}</colgroup><thead><tr><th data-type="num">#</th>'
           "<th>what runs with no debug env</th><th>file:line</th><th>freq</th>"
           + ("<th>observed</th>" if observed is not None else "")
           + '<th>via</th><th>GPU sync</th><th data-type="num">µs/step</th></tr></thead><tbody>']
    for i, s in enumerate(rows[:RANKED_PER_SIDE], start):
        f = s.first
        first, last = s.span
        loc = f"{f.path}:{first}" if first == last else f"{f.path}:{first}-{last}"
        # the statement's cost, the number the markdown's row prints (its findings summed)
        out.append(f'<tr><td data-label="#">{i}</td><td class="what">{_words(statement_words(s, rs))}<br><code class="src">{h(f.code)}</code></td>'
                   f'<td class="at"><a href="#{anchor("f", f.fingerprint)}"><code>{_path_cell(loc)}</code></a></td>'
                   f'<td data-label="freq">{h(s.frequency)}</td>'
                   + (f'<td data-label="observed">{h(observed_words(observed.get(f.fingerprint)))}</td>' if observed is not None else "")
                   + f"<td data-label=\"via\">{h(via_words(f)).replace('.', '.<wbr>') if f.hot_path else '—'}</td>"
                   f'<td data-label="GPU sync">{"<b>yes</b>" if s.gpu_sync else "no"}</td>'
                   f'<td data-label="µs/step" data-v="{s.cost_us}">{round(s.cost_us, 2):g}</td></tr>')
    out.append("</tbody></table>")
    if len(rows) > RANKED_PER_SIDE:
        out.append(f"<p>… and {len(rows) - RANKED_PER_SIDE} more default-ON statements here, in the findings below.</p>")
    return "".join(out)


def _ranked(result: AuditResult, rs: RuleSet, observed: Mapping[str, Observed] | None = None) -> str:
    """§1 as the markdown has it: one row per statement (its rules' findings merged, their
    costs summed), grouped by process side, numbered and ranked alike."""
    rows = statements(default_on_rows(result, rs), rs)
    out = ['<section id="default-on"><h2>1. Default-ON cost, ranked by estimated per-step impact</h2>']
    if not rows:
        return out[0] + "<p>Nothing on a hot path runs with no debug env set.</p></section>"
    sides: dict[str, list[Statement]] = {}
    for s in rows:
        sides.setdefault(_side(s), []).append(s)
    order = sorted(sides, key=lambda k: (k == "", -sum(s.cost_us for s in sides[k]), k))
    n = 1
    for i, side in enumerate(order, 1):
        members = sides[side]
        if len(order) > 1:
            out.append(f"<h3>1.{i} {h(side) or 'no process named'} ({len(members)} statements)</h3>")
        out.append(_ranked_table(members, n, rs, observed))
        t = side_total(members, rs)
        models = f" (code any model may run ≈ {t.shared:,.0f}, plus {h(', '.join(t.counted))})" if t.models else ""
        syncs = sum(1 for s in members if s.gpu_sync)
        out.append(f"<p><b>Bottom line</b>{f' ({h(side)})' if side else ''} (<em>estimate</em>, for one model architecture; "
                   f"sides are never added up): {len(members)} statements, ≈ {t.total:,.0f} µs per step{models}; "
                   f"{syncs} force a GPU sync.</p>")
        n += min(len(members), RANKED_PER_SIDE)
    out.append("</section>")
    return "".join(out)


def _options(values: Iterable[str]) -> str:
    return "".join(f'<option value="{h(v)}">{h(v)}</option>' for v in sorted(set(values)))


def _snippet(f: Finding, sources: Mapping[tuple[str, int], str]) -> str:
    last = min(max(f.end_line, f.line), f.line + SNIPPET_LINES - 1)
    lines = [(n, sources.get((f.path, n))) for n in range(f.line, last + 1)]
    if all(text is None for _, text in lines):
        return f"<pre><code>{h(f.code)}</code></pre>"
    width = len(str(last))
    shown = "\n".join(f'<span class="ln">{n:>{width}}</span> {h((text or "").rstrip())}' for n, text in lines)
    more = "\n…" if f.end_line > last else ""
    return f"<pre><code>{shown}{more}</code></pre>"


def _by_cost(f: Finding) -> tuple[int, float, str, int, str]:
    """The findings table's order: what a reader pays with no debug env set, the costliest
    first, before the gated sites (by their cost when on) and the error and rare paths."""
    tier = 0 if f.switch is None and f.path_kind == "normal" else 1 if f.path_kind == "normal" else 2
    return tier, -f.cost_us, f.path, f.line, f.rule


def _cost_cell(f: Finding) -> str:
    if f.path_kind != "normal":
        return f"not per step ({h(f.path_kind)} path)"
    return f"{round(f.cost_us, 2):g}" + (" when on" if f.switch is not None else "")


def _findings(result: AuditResult, rs: RuleSet, sources: Mapping[tuple[str, int], str], colours: Mapping[str, str]) -> str:
    found = result.findings
    out = [f'<section id="findings"><h2>Findings ({len(found)})</h2>']
    if not found:
        return out[0] + "<p>No findings.</p></section>"
    out.append(
        '<div class="filters" data-table="findings-table">'
        f'<label>rule <select data-key="rule"><option value="">all</option>{_options(f.rule for f in found)}</select></label>'
        f'<label>switch <select data-key="switch"><option value="">all</option><option value="-">none (default-on)</option>'
        f'{_options(f.switch.text for f in found if f.switch)}</select></label>'
        f'<label>frequency <select data-key="freq"><option value="">all</option>{_options(f.frequency for f in found)}</select></label>'
        '<label>file <input type="search" data-key="path" placeholder="part of a path"></label>'
        '<span class="count"></span></div>'
    )
    out.append('<p class="note">Costliest first: what runs with no debug env set, then the sites a switch gates (by '
               "their cost when it is on), then the error and rare paths, which are not costed per step. "
               "Click a heading to sort by it.</p>")
    widths = (160, 80, 210, 150, 130, 66, 86, None)  # px; the message takes the rest
    cols = "".join(f'<col style="width:{w}px">' if w else "<col>" for w in widths)
    out.append(f'<div class="wide"><table class="sortable stacks" id="findings-table"><colgroup>{cols}</colgroup><thead><tr><th>rule</th><th>severity</th><th>file:line:col</th>'
               '<th>function</th><th>switch</th><th>freq</th><th data-type="num">µs/step</th><th>message (open for the code and the hot path)</th>'
               "</tr></thead><tbody>")
    for f in sorted(found, key=_by_cost):
        spec = rs.rules.get(f.rule)
        severity = spec.severity if spec else ""
        switch = f.switch.text if f.switch else ""
        chain = ""
        if f.hot_path:
            chain = '<div class="chain"><b>hot path</b> ' + " → ".join(f"<code>{h(step).replace('.', '.<wbr>')}</code>" for step in hot_path_steps(f)) + "</div>"
        fix = f'<div class="fix"><b>fix</b> {h(spec.fix)}</div>' if spec and spec.fix else ""
        out.append(
            f'<tr id="{anchor("f", f.fingerprint)}" data-rule="{h(f.rule)}" data-switch="{h(switch or "-")}" '
            f'data-freq="{h(f.frequency)}" data-path="{h(f.path)}">'
            f'<td class="rule"><i class="dot" style="background:{colours.get(f.rule, "#999")}"></i>{h(f.rule)}</td>'
            f'<td><span class="sev" style="color:{_SEVERITY_COLOURS.get(severity, "#555")}">{h(severity)}</span></td>'
            f'<td class="at"><code>{_path_cell(_loc(f))}</code></td><td data-label="in"><code>{h(f.function or "")}</code></td>'
            + (f'<td data-label="switch"><a href="#{anchor("switch", switch)}">{h(switch)}</a></td>' if switch and f.switch and f.switch.kind == "env"
               else f'<td data-label="switch">{h(switch) or "—"}</td>')
            + f'<td data-label="freq">{h(f.frequency)}</td><td data-label="µs/step" data-v="{f.cost_us}">{_cost_cell(f)}</td>'
            f'<td class="msg"><details><summary>{h(f.message)}</summary>{_snippet(f, sources)}{chain}{fix}</details></td></tr>'
        )
    out.append("</tbody></table></div></section>")
    return "".join(out)


def _inventory(result: AuditResult) -> str:
    out = [f'<section id="switches"><h2>Switch inventory ({len(result.switches)})</h2>']
    if not result.switches:
        return out[0] + "<p>No env var is read.</p></section>"
    out.append('<div class="filters" data-table="switch-table"><label>switch <input type="search" data-key="name" placeholder="name">'
               f'</label><label>disposition <select data-key="disposition"><option value="">all</option>'
               f'{_options(s.disposition for s in result.switches)}</select></label>'
               f'<label>category <select data-key="category"><option value="">all</option>{_options(s.category for s in result.switches)}'
               '</select></label><span class="count"></span></div>')
    out.append('<table class="sortable" id="switch-table"><thead><tr><th>switch</th><th>category</th><th data-type="num">reads</th>'
               '<th data-type="num">per call</th><th data-type="num">gated sites</th><th>GPU sync</th><th data-type="num">setters</th>'
               "<th>disposition</th><th>first read</th></tr></thead><tbody>")
    for s in result.switches:
        first = f"{s.reads[0].path}:{s.reads[0].line}" if s.reads else ""
        out.append(
            f'<tr data-name="{h(s.name)}" data-disposition="{h(s.disposition)}" data-category="{h(s.category)}">'
            f'<td><a href="#{anchor("switch", s.name)}"><code>{h(s.name)}</code></a></td><td>{h(s.category)}</td>'
            f"<td>{len(s.reads)}</td><td>{sum(1 for r in s.reads if r.per_call)}</td><td>{s.gated_sites}</td>"
            f"<td>{'yes' if s.gpu_sync else 'no'}</td><td>{s.real_setters}</td>"
            f'<td><span class="disp {h(s.disposition.lower())}">{h(s.disposition)}</span></td><td><code>{h(first)}</code></td></tr>'
        )
    out.append("</tbody></table></section>")
    return "".join(out)


def _switch_page(s: Switch) -> str:
    added = (f"<code>{h(s.added_in.commit)}</code> {h(s.added_in.date)} {h(s.added_in.subject)}" if s.added_in
             else h(s.added_in_note or "unknown"))
    into = f" into <code>{h(s.merge_into)}</code>" if s.merge_into else ""
    decided = f" (rule <code>{h(s.decided_by)}</code>)" if s.decided_by else ""
    parts = [
        f'<article class="switch" id="{anchor("switch", s.name)}"><h3><code>{h(s.name)}</code> '
        f'<span class="disp {h(s.disposition.lower())}">{h(s.disposition)}</span>{into}</h3>',
        f"<p>{h(s.category)}; {len(s.reads)} read(s), {s.gated_sites} gated site(s), {s.real_setters} setter(s), "
        f"{s.reading_scripts} reader(s){'; forces a GPU sync when on' if s.gpu_sync else ''}"
        f"{'; proposed: ' + h(s.proposed_level) if s.proposed_level else ''}.</p>",
        f"<p><b>why</b>{decided}: {h('; '.join(s.reasons)) or '—'}</p>",
        f"<p><b>added in</b>: {added}</p>",
    ]
    if s.reads:
        parts.append("<details><summary>reads</summary><ul>" + "".join(
            f"<li><code>{h(r.path)}:{r.line}</code> {h(r.function or '<module>')}{' (per call)' if r.per_call else ''}</li>"
            for r in s.reads) + "</ul></details>")
    if s.sites:
        parts.append("<details><summary>gated sites</summary><table><thead><tr><th>file:line</th><th>function</th><th>work</th>"
                     "<th>freq</th><th>sync</th><th>µs/step when on</th></tr></thead><tbody>" + "".join(
                         f"<tr><td><code>{h(g.path)}:{g.line}</code></td><td><code>{h(g.function or '')}</code></td>"
                         f"<td>{h(g.work)}</td><td>{h(g.frequency)}</td><td>{'yes' if g.gpu_sync else 'no'}</td>"
                         f"<td>{g.cost_us:,.1f}</td></tr>" for g in s.sites) + "</tbody></table></details>")
    if s.setters:
        parts.append("<details><summary>setters</summary><ul>" + "".join(
            f"<li><code>{h(x.path)}:{x.line}</code> {h(x.source)} {h(x.kind)}"
            f"{' = <code>' + h(x.value) + '</code>' if x.value is not None else ''}</li>" for x in s.setters) + "</ul></details>")
    if s.readers or s.files:
        parts.append("<details><summary>readers and files</summary><ul>"
                     + "".join(f"<li>writes <code>{h(name)}</code></li>" for name in s.files)
                     + "".join(f"<li><code>{h(p)}:{line}</code> reads <code>{h(pattern)}</code></li>" for p, line, pattern in s.readers)
                     + "</ul></details>")
    parts.append("</article>")
    return "".join(parts)


def _switch_pages(result: AuditResult) -> str:
    if not result.switches:
        return ""
    return ('<section id="switch-pages"><h2>Every switch</h2>'
            + "".join(_switch_page(s) for s in result.switches) + "</section>")


def _duplicates(result: AuditResult) -> str:
    out = ['<section id="duplicates"><h2>Duplicated helper bodies</h2>']
    if not result.duplicates:
        return out[0] + "<p>None.</p></section>"
    out.append("<ul>")
    for g in result.duplicates:
        out.append(f"<li><code>{h(g.name)}</code> ({len(g.sites)} copies): "
                   + ", ".join(f"<code>{h(x.path)}:{x.line}</code>" for x in g.sites) + "</li>")
    out.append("</ul></section>")
    return "".join(out)


def _roots(result: AuditResult) -> str:
    roots = result.roots
    out = ['<section id="hot-roots"><h2>Hot roots</h2>']
    if roots is None:
        return out[0] + "<p>Not worked out.</p></section>"
    out.append(f"<p>{h(roots.summary)}</p>")
    matched = [r for r in roots.rules if r.functions]
    if matched:
        out.append('<table class="sortable"><thead><tr><th>root rule</th><th data-type="num">functions</th><th>first matches</th>'
                   "</tr></thead><tbody>")
        out += [f"<tr><td><code>{h(r.name)}</code> ({h(r.frequency)})</td><td>{r.functions}</td>"
                f"<td>{', '.join(f'<code>{h(x)}</code>' for x in r.examples)}</td></tr>" for r in matched]
        out.append("</tbody></table>")
    if roots.event_loops:
        out.append("<p>Event loops found in the code:</p><ul>" + "".join(
            f"<li><code>{h(e.path)}:{e.line}</code> <code>{h(e.id)}</code> calls "
            + ", ".join(f"<code>{h(x)}</code>" for x in e.steps) + "</li>" for e in roots.event_loops) + "</ul>")
    out.append("</section>")
    return "".join(out)


def _errors(result: AuditResult) -> str:
    out = ['<section id="skipped"><h2>Skipped files</h2>']
    if not result.errors:
        return out[0] + "<p>None: every file was analysed.</p></section>"
    out.append("<table class=\"sortable\"><thead><tr><th>file</th><th>kind</th><th>why</th></tr></thead><tbody>")
    out += [f"<tr><td><code>{h(e.path)}</code></td><td>{h(e.kind)}</td><td>{h(e.message)}</td></tr>" for e in result.errors]
    out.append("</tbody></table></section>")
    return "".join(out)


def _assumptions(rs: RuleSet) -> str:
    return ('<section id="assumptions"><h2>Assumptions</h2><p>Costs are per-event figures from the measured table '
            "(rules/costs.yaml) times assumed per-step multipliers; frequencies come from the call graph from the hot roots. "
            "Whether a tensor lives on the GPU is not known statically. See the markdown report's Assumptions for the "
            f"figures. Frequencies counted as hot: {', '.join(q.name for q in rs.frequencies.hot)}.</p></section>")


_STYLE = """
:root{--fg:#1d2330;--muted:#5f6b7a;--line:#e3e7ed;--bg:#f7f8fa;--accent:#2f5fd0}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg)}
nav{position:sticky;top:0;z-index:2;background:#1d2330;padding:6px 18px;display:flex;gap:16px;flex-wrap:wrap}
nav a{color:#dfe6f3;text-decoration:none;font-weight:500}nav a:hover{color:#fff}
main{max-width:1400px;margin:0 auto;padding:10px 22px 60px}
header h1{font-size:24px;margin:14px 0 10px}h2{font-size:18px;margin:28px 0 10px;border-bottom:1px solid var(--line);padding-bottom:4px}
section,header{background:#fff;border:1px solid var(--line);border-radius:8px;padding:4px 18px 14px;margin:14px 0}
.cards{display:flex;gap:10px;flex-wrap:wrap}.card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:120px;background:var(--bg)}
.card .n{font-size:20px;font-weight:600}.card .k{color:var(--muted);font-size:12px}
.chips{display:flex;gap:6px;flex-wrap:wrap;margin:10px 0}.chip{border:1px solid var(--line);border-radius:12px;padding:1px 9px;font-size:12px;background:#fff}
.chip i,.dot{display:inline-block;width:9px;height:9px;border-radius:2px;margin-right:5px;vertical-align:middle}
.note{color:var(--muted)}.warn{color:#9a3412;font-weight:600}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid var(--line);padding:5px 7px;text-align:left;vertical-align:top}
th{background:var(--bg);position:sticky;top:33px;cursor:pointer;user-select:none;white-space:nowrap}th.asc::after{content:" ▲"}th.desc::after{content:" ▼"}
tbody tr:hover{background:#f3f6fc}tr:target{outline:2px solid var(--accent)}
code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;overflow-wrap:anywhere}
pre{background:#0f1521;color:#e6edf3;padding:8px 10px;border-radius:6px;overflow:auto;max-width:900px}pre code{word-break:normal;white-space:pre}
.ln{color:#7d8799;user-select:none}details summary{cursor:pointer}.chain,.fix{margin:4px 0;color:var(--muted)}
.filters{display:flex;gap:14px;flex-wrap:wrap;align-items:center;margin:6px 0 10px}.filters select,.filters input{font:inherit;padding:2px 6px;max-width:260px}
.wide{overflow-x:auto}.wide th{position:static}#findings-table{table-layout:fixed;min-width:1100px}
#findings-table td{overflow-wrap:anywhere}td pre{max-width:100%}
table.ranked{table-layout:fixed}table.ranked td{overflow-wrap:anywhere}.what code.src{display:block;margin-top:3px;color:#3b4452}
section h3{font-size:15px;margin:18px 0 6px}
@media (max-width:900px){
main{padding:6px 10px 40px}section,header{padding:4px 12px 12px}
table.stacks,table.stacks tbody{display:block}table.stacks colgroup{display:none}#findings-table{min-width:0}
table.stacks thead tr{display:flex;flex-wrap:wrap;gap:4px;padding:4px 0}
table.stacks th{position:static;border:1px solid var(--line);border-radius:4px;padding:1px 7px}
table.stacks tbody tr{display:flex;flex-wrap:wrap;column-gap:14px;row-gap:2px;padding:8px 0;border-bottom:1px solid var(--line)}
table.stacks td{display:block;border:0;padding:0}
table.stacks td[data-label]::before{content:attr(data-label) " ";color:var(--muted);font-size:12px}
table.stacks td.what,table.stacks td.at,table.stacks td.msg{flex-basis:100%;order:1}
}
.count{color:var(--muted)}.sev{font-weight:600}.nw{white-space:nowrap}
.disp{font-size:11px;font-weight:700;padding:1px 6px;border-radius:4px;color:#fff}.disp.keep{background:#1e8449}.disp.merge{background:#b9770e}.disp.remove{background:#a93226}
.figs{display:flex;gap:24px;flex-wrap:wrap}figure{margin:6px 0}figcaption{font-weight:600;margin-bottom:4px}
svg .lbl{font:12px ui-monospace,Menlo,Consolas,monospace;fill:#1d2330}svg .val{font:12px system-ui,sans-serif;fill:#5f6b7a}svg .axis{font:11px system-ui,sans-serif;fill:#5f6b7a}
article.switch{border-top:1px solid var(--line);padding:4px 0 8px}article.switch h3{margin:10px 0 4px;font-size:15px}article.switch h3 code{font-size:15px}article.switch:target{background:#fffbe6}
"""

#: sorting and filtering; reads only the page's own (escaped) attributes and cells
_SCRIPT = """
(function(){
function val(td,num){var v=td.getAttribute('data-v');if(num){return parseFloat(v!==null?v:td.textContent.replace(/[^0-9.\\-]/g,''))||0;}return td.textContent.toLowerCase();}
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var num=th.getAttribute('data-type')==='num',asc=!th.classList.contains('asc');
  t.querySelectorAll('th').forEach(function(x){x.classList.remove('asc','desc');});th.classList.add(asc?'asc':'desc');
  var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
  rows.sort(function(a,b){var x=val(a.cells[i],num),y=val(b.cells[i],num);return (x<y?-1:x>y?1:0)*(asc?1:-1);});
  rows.forEach(function(r){body.appendChild(r);});});});});
document.querySelectorAll('.filters').forEach(function(f){
 var t=document.getElementById(f.getAttribute('data-table'));if(!t){return;}
 var controls=f.querySelectorAll('[data-key]'),count=f.querySelector('.count');
 function apply(){var shown=0,rows=t.tBodies[0].rows;
  for(var r=0;r<rows.length;r++){var ok=true;
   controls.forEach(function(c){var want=c.value,have=rows[r].getAttribute('data-'+c.getAttribute('data-key'))||'';
    if(!want){return;}if(c.tagName==='INPUT'){if(have.toLowerCase().indexOf(want.toLowerCase())<0){ok=false;}}else if(have!==want){ok=false;}});
   rows[r].style.display=ok?'':'none';if(ok){shown++;}}
  if(count){count.textContent=shown+' of '+rows.length+' shown';}}
 controls.forEach(function(c){c.addEventListener('input',apply);c.addEventListener('change',apply);});apply();});
})();
"""
