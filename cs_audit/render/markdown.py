"""The audit markdown, in the order of the hand-written seed audit: one function per table.

Every string that comes from the scanned tree goes through ``cell``/``code`` so a
pipe, backtick, newline, ``@mention`` or bidi control cannot break a table.
No timestamps or absolute paths: the same tree gives the same bytes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePath

from cs_audit.analysis.categories import OBSERVING
from cs_audit.analysis.disposition import UPSTREAM_RULE, is_level_knob, minimal_names, prefix_names
from cs_audit.analysis.rules import WORDS
from cs_audit.confirm.join import Observed, observed_words
from cs_audit.frequency import STEP, is_hot
from cs_audit.model import AuditResult, Deployment, EnvReadDetail, Finding, HotRoots, RootMatch, SwitchRef, is_aside, tree_notes
from cs_audit.render.json import detail_fields
from cs_audit.ruleset import EAGER, RuleSet

#: a rule's findings outside §1 listed one per row up to this many; more are listed by folder
FINDINGS_LISTED = 30
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


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


def _switch_text(switch: SwitchRef | None) -> str:
    if switch is None:
        return "default"
    if switch.kind == "level":
        return "log level"
    return code(switch.name if switch.kind == "flag" else switch.text)


def title(result: AuditResult) -> str:
    name = PurePath(result.root).name or result.root
    return name


#: the last line of a report ``scan`` writes under ``reports/``: which tree it is of (a
#: digest of the tree's resolved path), so that a scan of another tree with the same name
#: does not overwrite it
TREE_MARK = "<!-- cs-audit tree: {} -->"


def render_markdown(result: AuditResult, rs: RuleSet, name: str | None = None, tree: str | None = None,
                    observed: Mapping[str, Observed] | None = None) -> str:
    """The audit markdown; ``name``: the tree's name in the title (default: the last part
    of ``result.root`` as given); ``tree``: the digest recorded as ``TREE_MARK``;
    ``observed``: what a run showed of each finding (``scan --profile``), a column of §1."""
    parts = [
        _header(result, name),
        _default_on_table(result, rs, observed),
        enabled_cost(result, rs),
        same_information(result, rs),
        disposition_tables(result),
        output_root(result, rs),
        minimal_switch_set(result, rs),
        _switch_inventory(result),
        _findings_by_rule(result, rs),
        _duplicates(result),
        hot_roots_section(result.roots),
        _errors(result),
        _assumptions(rs, result),
    ]
    mark = f"\n\n{TREE_MARK.format(tree)}" if tree else ""
    return "\n".join(p for p in parts if p).rstrip() + mark + "\n"


def _header(result: AuditResult, name: str | None = None) -> str:
    counts = Counter(f.rule for f in result.findings)
    lines = [
        f"# cs-audit: {cell(name or title(result))}",
        "",
        f"- Commit: {code(result.commit[:12]) if result.commit else 'not a git checkout' if not result.history_note else cell(result.history_note)}",
        *(f"- **Note: {cell(n.message)}.**" for n in tree_notes(result)),
        f"- Files scanned: {result.files_scanned}; skipped: {len(result.errors)}",
        f"- Switches (env vars read): {len(result.switches)}",
        "- Findings: " + (", ".join(f"{code(rule)} {n}" for rule, n in sorted(counts.items())) or "none"),
        *_roots_lines(result.roots),
        "",
        "Default assumed throughout: no debug env set, loggers at their default level. Every cost is an *estimate* "
        "from the measured per-event table (see Assumptions).",
        "",
    ]
    return "\n".join(lines)


def _roots_lines(roots: HotRoots | None) -> list[str]:
    """The header's hot-roots line, and the warning when no configured root matches."""
    if roots is None:
        return []
    found = len(roots.event_loops)
    loops = f"; event loops found in the code: {found}, {len(roots.detected)} of them roots that no rule matches" if found else ""
    lines = [f"- {cell(roots.summary)}{loops} (see Hot roots)"]
    if roots.warning:
        lines += ["", f"**Warning: {cell(roots.warning)}.**"]
    return lines


def rule_words(rule: RootMatch) -> str:
    """A hot-root rule as configured: its name, the class and path globs it needs, its frequency."""
    parts = [code(rule.name)]
    if rule.class_glob is not None:
        parts.append(f"class {code(rule.class_glob)}")
    if rule.path_glob is not None:
        parts.append(f"path {code(rule.path_glob)}")
    return " ".join(parts) + f" ({rule.frequency})"


def hot_roots_section(roots: HotRoots | None) -> str:
    if roots is None:
        return ""
    lines = ["## Hot roots", "", f"{cell(roots.summary)} (rules/hot_paths.yaml and the project's hot_roots; the first "
             "matching rule decides a function's frequency).", ""]
    if roots.warning:
        lines += [f"**Warning: {cell(roots.warning)}.**", ""]
    matched = [r for r in roots.rules if r.functions]
    if matched:
        lines += ["| Root rule | Functions | First matches |", "|---|---|---|"]
        for r in matched:
            lines.append(f"| {rule_words(r)} | {r.functions} | {', '.join(code(x) for x in r.examples)} |")
        lines.append("")
    unmatched = [r for r in roots.rules if not r.functions]
    if unmatched:
        names = ", ".join(code(name) for name in dict.fromkeys(r.name for r in unmatched))
        lines += [f"Not matched: {len(unmatched)} rule{'s' if len(unmatched) != 1 else ''}, of the names {names}.", ""]
    if roots.event_loops:
        lines += ["Event loops found in the code (a `while` that never ends on its own and calls a step; "
                  "the calls inside it run per step):", "",
                  "| Loop | Function | Steps it calls | Root |", "|---|---|---|---|"]
        for e in roots.event_loops:
            root = f"configured ({code(e.configured)})" if e.configured is not None else "event loop (step)"
            lines.append(f"| {code(f'{e.path}:{e.line}')} | {code(e.id)} | {', '.join(code(s) for s in e.steps)} | {root} |")
        lines.append("")
    return "\n".join(lines)


def _reached_by_default(result: AuditResult, rs: RuleSet) -> list[Finding]:
    return [f for f in result.findings if rs.rules[f.rule].default_on_cost and f.switch is None and is_hot(f.frequency)]


def default_on_rows(result: AuditResult, rs: RuleSet) -> list[Finding]:
    """§1's findings: what runs by default every time its hot chain does, the costliest first
    (a site behind a guard, in its function or up its chain, is in ``demoted_rows``)."""
    rows = [f for f in _reached_by_default(result, rs) if f.path_kind == "normal"]
    rows.sort(key=lambda f: (f.origin in ("upstream", "modified"), -f.cost_us, f.path, f.line, f.rule))
    return rows


def demoted_rows(result: AuditResult, rs: RuleSet) -> list[Finding]:
    """The default-on sites a hot root reaches that run only past a guard (once per key or
    process, on an event or an error), by what they would cost if they ran every time."""
    rows = [f for f in _reached_by_default(result, rs) if f.path_kind != "normal"]
    rows.sort(key=lambda f: (-f.cost_if_every_time_us, f.path, f.line, f.rule))
    return rows


@dataclass(frozen=True)
class Statement:
    """One statement of §1: the findings of every rule on it (by file and line span), the
    findings of one rule that repeat on it (two syncs of one call) folded into one."""

    findings: tuple[Finding, ...]
    #: the most often any of its findings runs
    frequency: str

    @property
    def first(self) -> Finding:
        return max(self.findings, key=lambda f: (f.end_line - f.line, f.cost_us))

    @property
    def cost_us(self) -> float:
        return sum(f.cost_us for f in self.findings)

    @property
    def gpu_sync(self) -> bool:
        return any(f.gpu_sync for f in self.findings)

    @property
    def path_kind(self) -> str:
        return "normal" if any(f.path_kind == "normal" for f in self.findings) else self.findings[0].path_kind

    @property
    def upstream(self) -> bool:
        """No finding of it is on a line of the fork's own (``Finding.origin``)."""
        return all(f.origin in ("upstream", "modified") for f in self.findings)

    @property
    def span(self) -> tuple[int, int]:
        return min(f.line for f in self.findings), max(f.end_line for f in self.findings)


def statements(rows: list[Finding], rs: RuleSet) -> list[Statement]:
    """``rows`` merged per statement: findings of one file whose line spans overlap make one
    row, ranked as ``default_on_rows`` ranks findings (by their summed cost)."""
    groups: list[list[Finding]] = []
    for f in sorted(rows, key=lambda f: (f.path, f.line, -f.end_line, f.rule)):
        last = groups[-1] if groups else None
        if last is not None and last[0].path == f.path and f.line <= max(x.end_line for x in last):
            last.append(f)
        else:
            groups.append([f])
    out = [Statement(tuple(g), rs.frequencies.most_often(f.frequency for f in g)) for g in groups]
    # the fork's own statements first (all are, when the tree names no upstream)
    out.sort(key=lambda s: (s.upstream, -s.cost_us, s.first.path, s.span, s.first.rule))
    return out


def finding_words(f: Finding, others: tuple[Finding, ...], rs: RuleSet) -> str:
    """How §1 names ``f``: its rule's ``words.phrase`` (rules.yaml), with what the rule's module
    adds from the finding (``analysis.rules.WORDS``); ``others``: the findings on its statement."""
    spec = rs.rules.get(f.rule)
    if spec is None:
        return f.rule
    make = WORDS.get(f.rule)
    parts = make(f, others, spec.words.phrase) if make is not None else (spec.words.phrase,)
    return "".join(code(p) if i % 2 else p for i, p in enumerate(parts))


def statement_words(s: Statement, rs: RuleSet) -> str:
    """The rules of a statement in words, by their ``words.rank``: "f-string + per-request info line +
    env read of `X` in the message"; a finding that repeats on the statement is counted (×2)."""
    unranked = float("inf")
    words: Counter[str] = Counter()
    for f in sorted(s.findings, key=lambda f: (rs.rules[f.rule].words.rank if f.rule in rs.rules else unranked, f.line, f.col)):
        words[finding_words(f, s.findings, rs)] += 1
    return " + ".join(w + (f" ×{n}" if n > 1 else "") for w, n in words.items())


def hot_path_steps(f: Finding) -> list[str]:
    """``f``'s hot path as shown to a reader: root first, with one step saying how many
    functions a long chain leaves out after its root (``cs-audit why`` prints them all)."""
    if not f.hot_path_elided:
        return list(f.hot_path)
    gap = f"… {f.hot_path_elided:,} function{'s' if f.hot_path_elided != 1 else ''} left out (cs-audit why {f.path}:{f.line}) …"
    return [f.hot_path[0], gap, *f.hot_path[1:]]


def via_words(f: Finding, short: bool = False) -> str:
    """Where a site's frequency comes from: the hot root and how many calls below it the
    site's function is (the chain is the JSON's ``hot_path``, cut when long; the whole of it ``cs-audit why``);
    ``short``: the root's own name and the count in words (`execute_model and 2 more calls`),
    for a terminal."""
    if not f.hot_path:
        return "—"
    below = len(f.hot_path) - 1 + f.hot_path_elided
    if short:
        name = f.hot_path[0].rsplit(".", 1)[-1]
        return f"{name} and {below} more call{'s' if below != 1 else ''}" if below else name
    root = ".".join(f.hot_path[0].split(".")[-2:])
    return f"{root} (+{below} call{'s' if below != 1 else ''})" if below else f"{root} (root)"


def _statement_cost(s: Statement) -> str:
    f = s.first
    if s.path_kind != "normal":
        return f"not costed per step: {f.path_kind} path ({cell(f.path_reason)})"
    sync = next((x for x in s.findings if x.gpu_sync and x.rule == "sync-in-debug"), None)
    if sync is not None:
        return f"≈ +{s.cost_us:g} µs/step *estimate* (host-device sync, H200 table, per {sync.frequency})"
    return f"≈ {round(s.cost_us, 2):g} µs/step *estimate*" if s.cost_us else "*estimate*: n/a"


#: statements ranked one per row on each process side; the rest are listed by folder
RANKED_PER_SIDE = 25


def _side(s: Statement) -> str:
    return next((f.process for f in s.findings if f.process), "")


def side_totals(result: AuditResult, rs: RuleSet) -> list[tuple[str, SideTotal, int]]:
    """(side, its ``SideTotal``, statements) of each process side of §1, the costliest first:
    totals a reader may quote one at a time, never added up."""
    sides: dict[str, list[Statement]] = {}
    for s in statements(default_on_rows(result, rs), rs):
        sides.setdefault(_side(s), []).append(s)
    out = [(side, side_total(rows, rs), len(rows)) for side, rows in sides.items()]
    return sorted(out, key=lambda t: (-t[1].total, t[0]))


def _line_list(lines: list[int]) -> str:
    """`12, 40-42, 55` from sorted line numbers."""
    out: list[str] = []
    for n in sorted(set(lines)):
        if out and "-" not in out[-1] and int(out[-1]) == n - 1:
            out[-1] = f"{out[-1]}-{n}"
        elif out and "-" in out[-1] and int(out[-1].split("-")[1]) == n - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out)


def _by_folder(rows: list[Statement], rs: RuleSet) -> list[str]:
    """The statements past the ranked ones, one row per folder: each file with its lines."""
    folders: dict[str, dict[str, list[Statement]]] = {}
    for s in rows:
        folder, _, name = s.first.path.rpartition("/")
        folders.setdefault(folder, {}).setdefault(name, []).append(s)
    out = ["| Folder | Statements (file: lines) | What | Est. µs/step |", "|---|---|---|---|"]
    ranked = sorted(folders.items(), key=lambda kv: (-sum(s.cost_us for ss in kv[1].values() for s in ss), kv[0]))
    for folder, files in ranked:
        stmts = [s for ss in files.values() for s in ss]
        where = "; ".join(code(f"{name}: {_line_list([s.span[0] for s in ss])}") for name, ss in sorted(files.items()))
        kinds = Counter(_rule_noun(f, rs) for s in stmts for f in s.findings)
        what = ", ".join(f"{w} ×{n}" if n > 1 else w for w, n in kinds.most_common())
        total = sum(s.cost_us for s in stmts)
        out.append(f"| {code(folder + '/') if folder else '.'} | {where} | {what} | ≈ {total:,.0f} |")
    return out


def _rule_noun(f: Finding, rs: RuleSet) -> str:
    spec = rs.rules.get(f.rule)
    return spec.words.noun if spec is not None else f.rule


def _side_table(rows: list[Statement], start: int, rs: RuleSet, observed: Mapping[str, Observed] | None = None) -> list[str]:
    seen = "" if observed is None else " Observed |"
    lines = [f"| # | What runs with no debug env | file:line | Freq |{seen} Via | GPU sync | Est. cost / note |",
             "|---|---|---|---|---|---|---|" + ("---|" if seen else "")]
    for i, s in enumerate(rows[:RANKED_PER_SIDE], start):
        f = s.first
        first, last = s.span
        loc = code(f"{f.path}:{first}" if first == last else f"{f.path}:{first}-{last}")
        ran = "" if observed is None else f" {observed_words(observed.get(f.fingerprint))} |"
        lines.append(
            f"| {i} | {statement_words(s, rs)}: {code(f.code)} | {loc} | {s.frequency} |{ran} {code(via_words(f)) if f.hot_path else '—'} |"
            f" {'**yes**' if s.gpu_sync else 'no'} | {_statement_cost(s)} |"
        )
    rest = rows[RANKED_PER_SIDE:]
    if rest:
        lines += ["", f"The other {len(rest)} statements, by folder (costliest folder first):", "", *_by_folder(rest, rs)]
    return lines


@dataclass(frozen=True)
class SideTotal:
    """What one process side pays per step: the code any model may run, plus the own modules
    of the model architectures served (the stated ones, else the costliest one alone)."""

    shared: float
    #: (architecture, µs, statements) of each architecture with own statements, costliest first
    models: tuple[tuple[str, float, int], ...]
    #: the architectures the total counts
    counted: tuple[str, ...]

    @property
    def total(self) -> float:
        return self.shared + sum(cost for name, cost, _ in self.models if name in self.counted)


def side_total(rows: list[Statement], rs: RuleSet) -> SideTotal:
    """The per-step total of one side's statements: never the sum of every model's forward."""
    defaults = rs.defaults
    shared = 0.0
    per_model: dict[str, list[float]] = {}
    for s in rows:
        # an architecture's own statement that costs nothing per step changes no total
        model = defaults.model_of(s.first.path) if defaults is not None and s.cost_us > 0 else None
        if model is None:
            shared += s.cost_us
        else:
            per_model.setdefault(model, []).append(s.cost_us)
    models = tuple(sorted(((m, sum(c), len(c)) for m, c in per_model.items()), key=lambda t: (-t[1], t[0])))
    stated = defaults.models if defaults is not None else ()
    counted = tuple(m for m, _, _ in models if m in stated) if stated else tuple(m for m, _, _ in models[:1])
    return SideTotal(shared, models, counted)


def _bottom_line(rows: list[Statement], side: str, rs: RuleSet) -> str:
    split = side_total(rows, rs)
    syncs = sum(1 for s in rows if s.gpu_sync)
    whose = f" of the {side} side" if side else ""
    head = (f"**Bottom line{f' ({cell(side)})' if side else ''}:** {len(rows)} default-ON statements on hot paths{whose}, "
            f"≈ {split.total:,.0f} µs per step")
    if not split.models:
        return f"{head} in all (*estimate*, B and L as in Assumptions); {syncs} of them force a GPU sync."
    own = ", ".join(f"{code(m)} ≈ {c:,.0f} µs ({n})" for m, c, n in split.models[:5])
    more = f" and {len(split.models) - 5} more" if len(split.models) > 5 else ""
    served = (f"the architectures the deployment serves ({', '.join(code(m) for m in split.counted) or 'none in this tree'})"
              if rs.defaults is not None and rs.defaults.models else f"the costliest architecture ({code(split.counted[0])})")
    return (f"{head} (*estimate*, B and L as in Assumptions) for one deployment: ≈ {split.shared:,.0f} µs in code any model "
            f"may run, plus the own modules of {served}. Model architectures' own code, per architecture: {own}{more}; "
            f"never added up, as a deployment serves one (`[tool.cs-audit] deployment` names it). {syncs} statements force a GPU sync.")


#: "checked, cheap" functions listed, the most called first
MAX_CHEAP = 20


def _checked_cheap(result: AuditResult, rows: list[Statement]) -> list[str]:
    """The default-ON hot functions that do nothing unless a switch is set, whose check is no
    per-call cost of its own (one that is, an env read per call, is a row above)."""
    cheap = result.roots.cheap if result.roots is not None else ()
    costly = {(f.path, f.function) for s in rows for f in s.findings}
    observing = {s.name for s in result.switches if s.category in (*OBSERVING, "output-path")}
    # instrumentation only: a feature toggle's fast path is the feature off, not a cheap probe
    shown = [c for c in cheap if (c.path, c.function) not in costly and not (result.aside and is_aside(c.path, result.aside))
             and (c.switch in observing or c.switch.startswith("flag:"))]
    reads = cached_reads_line(result)
    if not shown and not reads:
        return []
    lines = ["### Checked, cheap", ""]
    if reads:
        lines += [f"{reads} (`cs-audit scan --format json`: `checked_cheap`).", ""]
    if not shown:
        return lines
    lines += ["Instrumentation called on default-ON hot paths that does nothing there but check a switch resolved "
              "before the call (an entry `return` unless it is set, a disabled logger's shared no-op, a "
              "`nullcontext()` fast path): checked, and it costs only the call and the check.", "",
              "| Function | Fast path | Switch | Freq | Default-ON calls | Side |", "|---|---|---|---|---|---|"]
    for c in shown[:MAX_CHEAP]:
        lines.append(f"| {code(c.function)} {code(f'{c.path}:{c.line}')} | {c.how} | {code(c.switch)} | {c.frequency} | "
                     f"{c.calls} | {cell(c.process) or '—'} |")
    if len(shown) > MAX_CHEAP:
        lines += ["", f"… and {len(shown) - MAX_CHEAP} more such functions (`cs-audit scan --format json`: `hot_roots.cheap`)."]
    return [*lines, ""]


def cached_reads_line(result: AuditResult) -> str:
    """One sentence on the hot env reads through a registry cached at start-up ("" for none):
    checked, 0 µs per call, so neither findings nor ``fix`` targets."""
    reads = result.cheap_reads
    if not reads:
        return ""
    names = sorted({r.detail.var for r in reads if isinstance(r.detail, EnvReadDetail)})
    after = sorted({r.detail.cached for r in reads if isinstance(r.detail, EnvReadDetail)})
    return (f"{len(reads)} hot env read{'s' if len(reads) != 1 else ''} of {len(names)} switch{'es' if len(names) != 1 else ''} "
            f"through a registry the engine caches once {', '.join(code(a + '()') for a in after)} has run at start-up: "
            "checked, ≈ 0 µs per call, not findings")


#: the demoted sites listed one per row, the costliest first
MAX_DEMOTED = 15


def _per_above_step(rs: RuleSet) -> str:
    """"per request, round or layer": the frequencies above one per step."""
    names = [q.name for q in rs.frequencies.hot if rs.frequencies.above_step(q.name)]
    return "per " + (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names))


def verdict(result: AuditResult, rs: RuleSet) -> str:
    """One paragraph, as a hand audit opens: what emits per request or round by default, what
    syncs, what is µs noise, and how many reachable sites run only past a guard."""
    rows = statements(default_on_rows(result, rs), rs)
    demoted = statements(demoted_rows(result, rs), rs)
    emitting = [any(f.rule == "default-on-emitter" for f in s.findings) for s in rows]
    emits = [s for s, emits_ in zip(rows, emitting) if emits_]
    heavy = [s for s in emits if rs.frequencies.above_step(s.frequency)]
    syncs = [s for s in rows if s.gpu_sync]
    # by the flag, not `s not in emits`: comparing statements field by field made this quadratic
    noise = [s for s, emits_ in zip(rows, emitting) if not emits_ and not s.gpu_sync]
    parts = []
    if heavy:
        where = ", ".join(code(f"{s.first.path}:{s.span[0]}") for s in heavy[:3])
        parts.append(f"{len(heavy)} default-ON emitter{'s' if len(heavy) != 1 else ''} run {_per_above_step(rs)} "
                     f"(the costliest: {where})")
    if emits and len(emits) > len(heavy):
        parts.append(f"{len(emits) - len(heavy)} more emit once per step")
    if not emits:
        parts.append("no default-ON emitter runs every step")
    parts.append(f"{len(syncs)} force a host-device sync by default" if syncs else "no default-ON site forces a host-device sync")
    if noise:
        # per-site figures only: the sides' per-step costs are paid by different processes
        top = max(s.cost_us for s in noise)
        parts.append(f"the other {len(noise)} are env reads and formatting, at most ≈ {top:,.0f} µs/step each (*estimate*)")
    text = "**Verdict:** " + "; ".join(parts) + "."
    if demoted:
        text += (f" {len(demoted)} more default-ON statement{'s are' if len(demoted) != 1 else ' is'} reachable from a hot root but run{'' if len(demoted) != 1 else 's'} only past a guard "
                 "(once per key or process, on an event or an error): not costed per step, and listed under "
                 "*Reachable, not every step* with the guard that decides it.")
    return text


def _demoted_table(result: AuditResult, rs: RuleSet) -> list[str]:
    rows = statements(demoted_rows(result, rs), rs)
    if not rows:
        return []
    rows.sort(key=lambda s: (-sum(f.cost_if_every_time_us for f in s.findings), s.first.path, s.span))
    lines = ["### Reachable, not every step", "",
             f"{len(rows)} default-ON statement{'s' if len(rows) != 1 else ''} a hot root reaches that run only past a guard, in their function or up "
             "their chain (depth: calls between the guard and the site). Not costed per step; the costliest if they ran "
             "every time first, so the guard can be checked.", "",
             "| What | file:line | Would be | Guard | If every time |", "|---|---|---|---|---|"]
    for s in rows[:MAX_DEMOTED]:
        f = next((x for x in s.findings if x.path_kind != "normal"), s.first)
        first_line, last = s.span
        loc = code(f"{f.path}:{first_line}" if first_line == last else f"{f.path}:{first_line}-{last}")
        would = sum(x.cost_if_every_time_us for x in s.findings)
        lines.append(f"| {statement_words(s, rs)}: {code(f.code)} | {loc} | {s.frequency} | {f.path_kind}: {cell(f.path_reason)} |"
                     f" ≈ {would:g} µs/step |")
    if len(rows) > MAX_DEMOTED:
        lines += ["", f"… and {len(rows) - MAX_DEMOTED} more (`cs-audit scan --format json`: findings whose `path_kind` "
                  "is not `normal`)."]
    return [*lines, ""]


def _default_on_table(result: AuditResult, rs: RuleSet, observed: Mapping[str, Observed] | None = None) -> str:
    rows = statements(default_on_rows(result, rs), rs)
    lines = ["## 1. Default-ON cost, ranked by estimated per-step impact", "", verdict(result, rs), ""]
    if not rows:
        lines += ["Nothing on a hot path runs every step with no debug env set.", ""]
        return "\n".join(lines + _demoted_table(result, rs) + _checked_cheap(result, rows))
    lines += [
        "Freq: " + "; ".join(f"**{q.name}** = {q.legend}" for q in rs.frequencies.hot) + ".",
        "",
        "One row per statement: the rules that flag it are merged into its words. Via: the hot root the site is "
        "reached from, and how many calls below it (`cs-audit why FILE:LINE` prints the chain).",
        "",
    ]
    if observed is not None:
        lines += ["Observed: what the profile given to `scan --profile` shows of the statement's function: its calls "
                  "per step, or that it never ran, or that its module was not loaded (not covered); "
                  "`cs-audit confirm PROFILE` lists the disagreements with their chains.", ""]
    sides: dict[str, list[Statement]] = {}
    for s in rows:
        sides.setdefault(_side(s), []).append(s)
    if len(sides) == 1:
        side = next(iter(sides))
        lines += [*_side_table(rows, 1, rs, observed), "", _bottom_line(rows, side, rs), ""]
        return "\n".join(lines + _demoted_table(result, rs) + _checked_cheap(result, rows))
    order = sorted(sides, key=lambda k: (k == "", -sum(s.cost_us for s in sides[k]), k))
    lines += ["Grouped by process side (the `process` of the hot root each statement is reached from, "
              "`rules/hot_paths.yaml`): each side's per-step figure is paid by its own process, so they are not added up.", ""]
    n = 1
    for i, side in enumerate(order, 1):
        members = sides[side]
        lines += [f"### 1.{i} {cell(side) if side else 'no process named'} ({len(members)} statements)", "",
                  *_side_table(members, n, rs, observed), "", _bottom_line(members, side, rs), ""]
        n += min(len(members), RANKED_PER_SIDE)
    return "\n".join(lines + _demoted_table(result, rs) + _checked_cheap(result, rows))


def _switch_inventory(result: AuditResult) -> str:
    if not result.switches:
        return ""
    shown = [s for s in result.switches if s.category in (*OBSERVING, "output-path")]
    lines = [
        "## Switch inventory",
        "",
        "| Switch | Category | Reads | Per call | Gated sites | GPU sync | Setters | First read |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in shown:
        per_call = sum(1 for r in s.reads if r.per_call)
        first = s.reads[0] if s.reads else None
        setters = s.real_setters
        lines.append(
            f"| {code(s.name)} | {s.category + (f' ({s.kind})' if s.kind else '')} | {len(s.reads)} | {per_call} | {s.gated_sites} | "
            f"{'**yes**' if s.gpu_sync else 'no'} | {setters} | {code(f'{first.path}:{first.line}') if first else ''} |"
        )
    lines += _others([s for s in result.switches if s.category not in (*OBSERVING, "output-path")],
                     "switches that configure the engine or name inputs")
    lines.append("")
    return "\n".join(lines)


def _aside_folder(path: str, globs: tuple[str, ...]) -> str:
    """The path up to the first folder an ``aside`` glob matches (`multimodal_gen/test/`)."""
    parts = path.split("/")
    for i, folder in enumerate(parts[:-1]):
        if any(g.endswith("/") and fnmatchcase(folder, g[:-1]) for g in globs):
            return "/".join(parts[: i + 1]) + "/"
    return path


def _findings_by_rule(result: AuditResult, rs: RuleSet) -> str:
    in_section_1 = {id(f) for f in default_on_rows(result, rs)}
    by_rule: dict[str, list[Finding]] = {}
    aside: Counter[tuple[str, str]] = Counter()
    listed_in_1: Counter[str] = Counter()
    for f in result.findings:
        if result.aside and is_aside(f.path, result.aside):
            aside[(_aside_folder(f.path, result.aside), f.rule)] += 1
        elif id(f) in in_section_1:
            listed_in_1[f.rule] += 1
        else:
            by_rule.setdefault(f.rule, []).append(f)
    lines = ["## Findings by rule", ""]
    if listed_in_1:
        lines += ["Listed in §1 (default-ON, on hot paths) and not repeated here: "
                  + ", ".join(f"{code(rule)} {n}" for rule, n in sorted(listed_in_1.items())) + ".", ""]
    if aside:
        total = sum(aside.values())
        lines += [f"Tests, benchmarks and examples ({', '.join(code(g) for g in result.aside)}): {total} findings, "
                  "counted here and not listed:", "", "| Folder | Rule | Findings |", "|---|---|---|"]
        lines += [f"| {code(folder)} | {code(rule)} | {n} |" for (folder, rule), n in sorted(aside.items())]
        lines.append("")
    if not by_rule:
        lines += ["No other findings.", ""]
    for rule_id in rs.rules:
        rows = by_rule.get(rule_id)
        if not rows:
            continue
        spec = rs.rules[rule_id]
        lines += [f"### {code(rule_id)} ({len(rows)}): {cell(spec.summary)}", ""]
        if len(rows) <= FINDINGS_LISTED:
            lines += ["| file:line | function | switch | freq | sync | message |", "|---|---|---|---|---|---|"]
            for f in rows:
                lines.append(
                    f"| {_loc(f)} | {code(f.function) if f.function else ''} | {_switch_text(f.switch)} | {f.frequency} | "
                    f"{'yes' if f.gpu_sync else 'no'} | {cell(f.message)} |"
                )
        else:
            lines += ["One row per folder; `cs-audit scan --format grouped` lists each finding with its message.", "",
                      "| Folder | Sites (file: lines) | Switches | Freq |", "|---|---|---|---|"]
            folders: dict[str, list[Finding]] = {}
            for f in rows:
                folders.setdefault(f.path.rpartition("/")[0], []).append(f)
            for folder, fs in sorted(folders.items()):
                files: dict[str, list[int]] = {}
                for f in fs:
                    files.setdefault(f.path.rpartition("/")[2], []).append(f.line)
                where = "; ".join(code(f"{name}: {_line_list(ls)}") for name, ls in sorted(files.items()))
                switches = Counter(_switch_text(f.switch) for f in fs)
                freqs = Counter(f.frequency for f in fs)
                lines.append(f"| {code(folder + '/') if folder else '.'} | {where} | "
                             f"{', '.join(w + (f' ×{n}' if n > 1 else '') for w, n in switches.most_common(4))}"
                             f"{' …' if len(switches) > 4 else ''} | {', '.join(f'{q} {n}' for q, n in freqs.most_common())} |")
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


def _replay_line(d: Deployment | None) -> str:
    replayed = next((u for u in d.used if u.switch == f"feature={EAGER}"), None) if d is not None else None
    if replayed is None:
        return "- Per-layer Python in a `forward` runs on eager forwards; a CUDA-graph replay runs none of it."
    return (f"- Decoding steps replay a captured graph of the model's `forward` (the platform's default): the Python of "
            f"{replayed.sites} hot sites only a model's `forward` reaches runs at capture and on eager (prefill) steps, "
            f"so §1 leaves it out (`deployment.features = [\"{EAGER}\"]` audits an eager deployment).")


def _assumptions(rs: RuleSet, result: AuditResult) -> str:
    multipliers = ", ".join(f"{q.name} ×{q.multiplier:g}" + (f" ({q.symbol})" if q.symbol else "")
                            for q in rs.frequencies.hot if q.name != STEP)
    return "\n".join([
        "## Assumptions",
        "",
        f"- Per-event costs: {cell(rs.cost_source)}; log line emitted ≈ {rs.costs_us['log_emitted']:g} µs, "
        f"env read ≈ {rs.costs_us['env_read']:g} µs, open+write+close ≈ {rs.costs_us['open_per_event']:g} µs.",
        f"- Per-step multipliers: {multipliers}.",
        "- Syncs are costed by frequency from the H200 decode-step table (lost overlap, not the idle sync time).",
        "- Hot paths come from the roots in `rules/hot_paths.yaml` (plus project config) propagated through calls "
        "the tree resolves statically; calls through dynamic dispatch are not followed.",
        _replay_line(result.deployment),
        *_deployment_lines(result.deployment),
        "",
        "### Not verified",
        "",
        "- Whether the ranked sites measurably slow a real step: the figures are per-event estimates times an assumed frequency.",
        "- Which log level the deployment configures: records at or above the default level are assumed emitted.",
        "- Whether a `.cpu()`/`.item()` in debug code touches a GPU tensor: every such call is counted as a sync.",
        "- What a `torch.save`/`json.dump` costs: it depends on the size of what is dumped.",
        *([f"- Switch ages: {cell(result.history_note)}."] if result.history_note else []),
        *(["- Switch names read through a variable: " + ", ".join(sorted({code(detail_fields(f).get('var', '')) for f in result.findings if detail_fields(f).get('var', '').startswith('<dynamic')})) + "."]
          if any(detail_fields(f).get("var", "").startswith("<dynamic") for f in result.findings) else []),
        "",
    ])


#: the defaults listed in the assumptions, the most sites first
MAX_DEFAULTS_LISTED = 25


def _deployment_lines(d: Deployment | None) -> list[str]:
    """What the report assumed of the deployment: its platform and settings, and the defaults
    that kept hot code out of §1, each with where its value comes from."""
    if d is None:
        return []
    if d.stated:
        settings = ([f"{code(k)} = {code(v)}" for k, v in d.options] + [f"{code(e)} set" for e in d.env]
                    + [f"feature {code(f)} on" for f in d.features])
        head = (f"- Deployment audited (as the project states it): platform {code(d.platform)}"
                + (f"; {', '.join(settings)}" if settings else "") + "; every other option at its default.")
    else:
        head = (f"- Deployment audited: platform {code(d.platform)}, every option at its default, no optional feature on "
                "(LoRA, speculative decoding, disaggregation, ...) and no env var set "
                "(state another in `[tool.cs-audit] deployment`).")
    lines = [head]
    if d.used:
        lines += ["", "### Defaults that decided gates", "",
                  "Code behind these settings is left out of §1: it runs only with the setting changed.", "",
                  "| turns the code on | value audited | from | hot sites kept off |", "|---|---|---|---|"]
        for u in d.used[:MAX_DEFAULTS_LISTED]:
            source = code(f"{u.path}:{u.line}") if u.path else (
                "the platform" if u.switch.startswith("platform")
                else "the platform's graph replay (`graph_platforms`): a model's forward runs in Python only at capture and on prefill"
                if u.switch == f"feature={EAGER}"
                else "the rules' `feature_*` tables" if u.switch.startswith("feature") else "the deployment")
            lines.append(f"| {code(u.switch)} | {code(u.value)} | {source} | {u.sites} |")
        if len(d.used) > MAX_DEFAULTS_LISTED:
            lines.append(f"| … {len(d.used) - MAX_DEFAULTS_LISTED} more in the JSON report | | | |")
    return lines


# ------------------------------------------------------------------ §2–§4 (the full audit)
_GENERIC_WORDS = frozenset({
    "trace", "time", "debug", "dump", "diag", "info", "step", "stat", "stats", "done", "error", "warn",
    "jsonl", "json", "self", "logger", "print", "level", "none", "true", "false", "with", "from", "this",
    "output", "input", "token", "tokens", "request", "layer", "layers", "count", "batch", "value", "start", "total",
    "warning", "format", "failed", "errors", "exception", "note", "todo", "deprecated", "rank", "size",
    # an engine's own vocabulary: every part of it says these, so they name no one record
    "runner", "model", "models", "server", "worker", "engine", "cache", "backend", "config", "kernel", "device",
})
#: §3.1 groups listed, the largest first
MAX_INFO_GROUPS = 40


def _others(switches: list, what: str) -> list[str]:
    """One line counting the switches a section leaves out, by category."""
    if not switches:
        return []
    counts = Counter(s.category for s in switches)
    listed = ", ".join(f"{n} {c}" for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return ["", f"Not listed: {len(switches)} {what} ({listed}); `cs-audit switch NAME` shows any of them.", ""]


def enabled_cost(result: AuditResult, rs: RuleSet) -> str:
    gating = [s for s in result.switches if s.sites]
    rows = [s for s in gating if s.category in OBSERVING]
    if not gating:
        return ""
    lines = [
        "## 2. Enabled cost",
        "",
        "What each instrumentation switch and test hook turns on: its emitters, dumps and syncs, the work per "
        "event, and the files written; the most costly first.",
        "",
        "| Switch | Emitters | Per-event work | GPU sync | Files | Est. µs/step when on |",
        "|---|---|---|---|---|---|",
    ]
    for s in sorted(rows, key=lambda s: (-sum(site.cost_us for site in s.sites), s.name)):
        if not s.levels:
            lines.append(_enabled_row(code(s.name), list(s.sites), s.files, sum(site.cost_us for site in s.sites), ""))
            continue
        # a level switch: one row per value the code tells apart, with what it adds to the ones below
        below = 0.0
        for n, value in enumerate(s.levels):
            sites = [site for site in s.sites if max(site.level, 1) == value]
            added = sum(site.cost_us for site in sites)
            below += added
            total = f" (≈ {below:,.0f} with the levels below)" if n and added and below > added else ""
            lines.append(_enabled_row(code(f"{s.name}={value}"), sites, s.files if n == 0 else (), added, total))
    lines += _others([s for s in gating if s.category not in OBSERVING], "switches that gate sites but configure the engine")
    if any(s.levels for s in rows):
        if lines[-1]:
            lines.append("")
        lines += ["A level switch has a row per value its code compares it with: what "
                  "that value turns on in addition to the values below it (a site reached through a helper's "
                  "fallback to the level, `_diag(\"X\", 2)` with `X` unset, is listed `as X`).", ""]
    else:
        lines.append("")
    return "\n".join(lines)


def _enabled_row(name: str, sites: list, files: tuple[str, ...], total: float, total_note: str) -> str:
    """One §2 row: a switch (or one value of a level switch) and the sites it turns on."""
    work = Counter(site.work for site in sites)
    places: dict[str, list[str]] = {}
    for site in sites:
        places.setdefault(site.via, [])
        where = f"{site.path}:{site.line}"
        if where not in places[site.via]:
            places[site.via].append(where)
    parts, shown = [], 0
    for via, wheres in sorted(places.items()):
        listed = wheres[:max(0, 6 - shown)]
        shown += len(listed)
        text = ", ".join(code(p) for p in listed) + (f" (+{len(wheres) - len(listed)})" if len(wheres) > len(listed) else "")
        parts.append(f"as {code(via)}: {text}" if via else text)
    sync = next((site for site in sites if site.gpu_sync), None)
    cost = f"≈ {total:,.0f} *estimate*{total_note}" if total else "n/a"
    return (
        f"| {name} | {'; '.join(parts)} | {cell('; '.join(f'{n}× {w}' for w, n in sorted(work.items())))} | "
        f"{'**yes** ' + code(f'{sync.path}:{sync.line}') if sync else 'no'} | {', '.join(code(f) for f in files) or '—'} | {cost} |"
    )


_TAG = re.compile(r"\[([A-Za-z][A-Za-z0-9_ :./-]{2,40})\]")
_CAPS = re.compile(r"\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b")
_RECORD = re.compile(r"^[\w.]*?(?:emit|trace|record|log_event|dump|write_event)\w*\(\s*[\"']([A-Za-z][\w.-]{3,})[\"']")
_LITERAL = re.compile(r"[\"']([^\"']{12,})[\"']")
_STRINGS = re.compile(r"[\"']([^\"']*)[\"']")


def _tags(text: str, is_file: bool = False) -> set[str]:
    """The names a site's record carries, from its string literals only (never from the code's
    identifiers, such as `warning_once`): bracketed tags (`[X RECOMPACT]`), UPPER_SNAKE tags
    (`RECOMPACT_TIME`), the record name handed to an emit/trace helper (`emit("recompact_trace"`);
    for an output file, its name."""
    literals = [text] if is_file else _STRINGS.findall(text)
    out: set[str] = set()
    for lit in literals:
        out |= {t.strip() for t in _TAG.findall(lit)}
        out |= set(_CAPS.findall(lit))
    m = _RECORD.match(text.strip())
    if m:
        out.add(m.group(1))
    if is_file:
        out.add(re.sub(r"\{[^}]*\}|\*", " ", text))
    return out


def _tag_words(tag: str, stop: frozenset[str]) -> set[str]:
    """The words of a tag that name information: five letters or more, no stop word."""
    parts = {p.lower() for p in re.split(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])", tag) if p}
    return {p for p in parts if len(p) >= 5 and not p.isdigit() and p not in stop}


def _template(text: str) -> str | None:
    """The message a site emits with its fields blanked (`{...}`, `%d`): the same record in
    another file has the same template."""
    m = _LITERAL.search(text)
    if not m:
        return None
    t = re.sub(r"\{[^}]*\}|%[-#0-9.]*[sdifrx]", "…", m.group(1)).strip()
    return t if len(re.sub(r"[^A-Za-z]", "", t)) >= 10 else None


def _stop_words(result: AuditResult, rs: RuleSet) -> frozenset[str]:
    """Words that never make a group alone: the generic ones and the tree's own names (its
    folder name, its env prefix)."""
    own = {title(result).lower()}
    own.add(minimal_names(prefix_names(result.switches), rs)["output_root"].split("_")[0].lower())
    return _GENERIC_WORDS | frozenset(own)


def info_groups(result: AuditResult, rs: RuleSet) -> list[tuple[str, list[tuple[str, str]]]]:
    """§3.1's groups: the places that emit the same tag or the same record (one message
    template), in two files or more; a tag made of stop words only groups nothing."""
    sites: list[tuple[str, str, str]] = []  # (where, switch, text)
    for s in result.switches:
        for site in s.sites:
            if site.role in ("log", "write", "dump", "open"):
                sites.append((f"{site.path}:{site.line}", s.name, site.code))
        for name in s.files:
            sites.append((f"file {name}", s.name, name))
    for f in result.findings:
        if f.rule == "default-on-emitter" and not (result.aside and is_aside(f.path, result.aside)):
            sites.append((f"{f.path}:{f.line}", "default", f.code))
    stop = _stop_words(result, rs)
    switch_names = {s.name.lower() for s in result.switches}
    by_key: dict[str, set[tuple[str, str]]] = {}
    for where, switch, text in sites:
        for tag in _tags(text, where.startswith("file ")):
            if tag.lower() in switch_names:
                continue  # an env var's name in its own message says which switch, not what
            for word in _tag_words(tag, stop):
                by_key.setdefault(f"tag *{word}*", set()).add((where, switch))
        template = _template(text)
        if template is not None and _tag_words(template, stop):  # a message of stop words only is no record
            by_key.setdefault(f"record “{template}”", set()).add((where, switch))
    groups: dict[frozenset[tuple[str, str]], str] = {}
    for key, members in sorted(by_key.items()):
        # where it is written from: the source file, or for an output file the switch naming it
        files = {f"file {sw}" if x.startswith("file ") else x.split(":")[0] for x, sw in members}
        if len(files) >= 2:
            groups.setdefault(frozenset(members), key)  # a record and its tag that cover the same places: one row
    return sorted(((key, sorted(m)) for m, key in groups.items()), key=lambda g: (-len(g[1]), g[0]))


def same_information(result: AuditResult, rs: RuleSet) -> str:
    """§3.1: the same tag or record emitted in several files, level knobs, output roots, helper copies."""
    groups = info_groups(result, rs)
    knobs = [s.name for s in result.switches if is_level_knob(s, rs)]
    roots = [s.name for s in result.switches if s.category == "output-path"]
    literal = sorted({detail_fields(f).get("output_path", "") for f in result.findings if f.rule == "hardcoded-output-path"})
    lines = [
        "## 3. Duplicated information and disposition",
        "",
        "### 3.1 Same information in several places",
        "",
        "Grouping rule: log lines, dumps and output files are grouped when the tags in their strings share a name "
        "(`[X RECOMPACT]`, `RECOMPACT_TIME` and the record `recompact_trace` share *recompact*) or they emit the same "
        "message with its fields blanked, in at least two files; generic words (trace, debug, warning, …) and the "
        "tree's own name never group, nor do the code's identifiers.",
        "",
        "| What | Where |",
        "|---|---|",
    ]
    for key, members in groups[:MAX_INFO_GROUPS]:
        where = " · ".join(f"{code(x)} ({code(sw) if sw != 'default' else 'default'})" for x, sw in members[:10])
        lines.append(f"| {cell(key)} ({len(members)}) | {where}{' …' if len(members) > 10 else ''} |")
    if len(groups) > MAX_INFO_GROUPS:
        lines.append(f"| … {len(groups) - MAX_INFO_GROUPS} smaller groups | `cs-audit scan --format json` has every site |")
    if len(knobs) > 1:
        lines.append(f"| level knobs ({len(knobs)} mechanisms) | {' · '.join(code(k) for k in knobs)} |")
    if len(roots) + len(literal) > 1:
        lines.append(f"| output roots ({len(roots) + len(literal)}) | {' · '.join([*(code(r) for r in roots), *(code(p) for p in literal)])} |")
    for g in result.duplicates:
        lines.append(f"| {code(g.name)} ({len(g.sites)} copies) | {' · '.join(code(f'{x.path}:{x.line}') for x in g.sites)} |")
    lines.append("")
    return "\n".join(lines)


def _why(reasons: tuple[str, ...]) -> str:
    return cell("; ".join(reasons))


#: upstream switches named in §3.2's line on them
MAX_UPSTREAM_NAMES = 12


def disposition_tables(result: AuditResult) -> str:
    lines = ["### 3.2 Disposition", ""]
    if result.overridden:
        lines += [f"Decided by the project's `cs-audit.decisions.yaml` (overriding the rules): "
                  f"{', '.join(code(n) for n in result.overridden)}.", ""]
    judged = [s for s in result.switches if s.decided_by != UPSTREAM_RULE]
    keep = [s for s in judged if s.disposition == "KEEP" and s.category in OBSERVING]
    kept_others = [s for s in judged if s.disposition == "KEEP" and s.category not in OBSERVING]
    merge = [s for s in judged if s.disposition == "MERGE"]
    remove = [s for s in judged if s.disposition == "REMOVE"]
    upstream = [s for s in result.switches if s.decided_by == UPSTREAM_RULE]
    if upstream:
        lines += [f"The fork's own switches are judged below; {len(upstream)} upstream switch{'es' if len(upstream) != 1 else ''} "
                  "that no line of the fork's reads or sets are left alone (upstream, KEEP): "
                  + ", ".join(code(s.name) for s in upstream[:MAX_UPSTREAM_NAMES])
                  + (f" and {len(upstream) - MAX_UPSTREAM_NAMES} more" if len(upstream) > MAX_UPSTREAM_NAMES else "") + ".", ""]

    def first_read(s) -> str:
        return code(f"{s.reads[0].path}:{s.reads[0].line}") if s.reads else ""

    def added(s) -> str:
        if s.added_in:
            return f"{code(s.added_in.commit)} {s.added_in.date} {cell(s.added_in.subject[:60])}"
        return cell(s.added_in_note or "unknown")

    def setters(s) -> str:
        kinds = [x.kind for x in s.setters]
        extra = [f"{kinds.count(k)} {k}" for k in ("passthrough", "commented", "off") if k in kinds]
        return str(s.real_setters) + (f" ({', '.join(extra)})" if extra else "")

    lines += ["**KEEP**", "", "| Switch | Where | Setters | Readers | Why |", "|---|---|---|---|---|"]
    lines += [f"| {code(s.name)} | {first_read(s)} | {setters(s)} | {s.reading_scripts} | {_why(s.reasons)} |" for s in keep]
    lines += _others(kept_others, "kept switches that are no instrumentation")
    lines += ["", "**MERGE**", "", "| Switch | Into | Where | Setters | Evidence |", "|---|---|---|---|---|"]
    lines += [f"| {code(s.name)} | {code(s.merge_into or '')} | {first_read(s)} | {setters(s)} | {_why(s.reasons)} |" for s in merge]
    lines += ["", "**REMOVE**", "", "| Switch | file:line | Added in | Setters | Why |", "|---|---|---|---|---|"]
    lines += [f"| {code(s.name)} | {first_read(s)} | {added(s)} | {setters(s)} | {_why(s.reasons)} |" for s in remove]
    lines.append("")
    return "\n".join(lines)


def _subpath(name: str) -> str:
    upper = name.upper()
    stem = re.sub(r"_?(DIR|PATH|ROOT|FILE|RUN)$", "", upper).lower() or "out"
    if "TRACE" in upper or "FSM" in upper:
        return f"trace/{stem}/"
    if "DUMP" in upper:
        return f"dump/{stem.replace('_dump', '').replace('dump_', '') or 'debug'}/"
    if "BREAKDOWN" in upper or "PROFIL" in upper:
        return "breakdown/"
    if "LOG" in upper:
        return "logs/"
    return f"{stem}/"


def output_root(result: AuditResult, rs: RuleSet) -> str:
    root = minimal_names(prefix_names(result.switches), rs)["output_root"]
    dirs = [s for s in result.switches if s.category == "output-path" and s.decided_by != UPSTREAM_RULE]
    inputs = [s for s in result.switches if s.category == "input-path"]
    literal = [f for f in result.findings if f.rule == "hardcoded-output-path"]
    stamps = [f for f in result.findings if f.rule == "own-timestamp"]
    if not (dirs or literal or stamps):
        return ""
    lines = [
        "## 4. One output root and a minimal switch set",
        "",
        f"### 4.1 One root: `{root}`",
        "",
        f"Resolve it once per process; the launcher creates `{root}_RUN=${root}/<YYYYmmdd_HHMMSS>` and exports it, and "
        "no child mints its own timestamp.",
        "",
        f"| new subpath under `${root}_RUN/` | replaces | writers that must change |",
        "|---|---|---|",
    ]
    for s in dirs:
        writers = ", ".join(code(f"{r.path}:{r.line}") for r in s.reads[:6]) + (" …" if len(s.reads) > 6 else "")
        lines.append(f"| {code(_subpath(s.name))} | {code(s.name)} | {writers} |")
    for f in literal:
        path = detail_fields(f).get("output_path", "")
        base = path.rstrip("/").rsplit("/", 1)[-1] or "out"
        lines.append(f"| {code('dump/' + base if '.' not in base else 'trace/' + base)} | hard-coded {code(path)} | {_loc(f)} |")
    for f in stamps:
        lines.append(f"| (read `${root}_RUN`) | own run timestamp {code(f.code)} | {_loc(f)} |")
    lines.append("")
    if inputs:
        lines += [f"Left alone, read only ({len(inputs)} input locations: toolkits, libraries, caches, configs): "
                  + ", ".join(code(s.name) for s in inputs) + ".", ""]
    return "\n".join(lines)


def minimal_switch_set(result: AuditResult, rs: RuleSet) -> str:
    ms = minimal_names(prefix_names(result.switches), rs)
    debug = [s for s in result.switches if (s.category in OBSERVING or s.category == "output-path") and s.decided_by != UPSTREAM_RULE]
    if not debug:
        return ""
    groups: dict[str, list[str]] = {}
    for s in debug:
        groups.setdefault(s.proposed_level, []).append(s.name)
    rows = [
        (ms["output_root"], "path", "output root (§4.1)", groups.get(ms["output_root"], [])),
        (ms["trace_level"], "`0` (default)", "nothing: today's default-ON lines move to level 1 or log once", []),
        ("", "`1` counters", "cheap per-event lines, no sync", groups.get(f"{ms['trace_level']}=1", [])),
        ("", "`2` cycle", "per-request / per-round / per-layer detail", groups.get(f"{ms['trace_level']}=2", [])),
        ("", "`3` parity", "anything that forces a host-device sync", groups.get(f"{ms['trace_level']}=3", [])),
        (ms["dump_list"], "comma list", "file dumps, one name each", groups.get(ms["dump_list"], [])),
        (ms["breakdown"], "`0` / `rows` / `light`", "breakdown and profiling", groups.get(ms["breakdown"], [])),
    ]
    lines = [
        "### 4.2 Minimal switch set",
        "",
        "Each existing debug switch is mapped by what it costs when on: no-cost counters → 1, per-cycle detail → 2, "
        "anything that syncs → 3, file dumps → the dump list (names from `rules/dispositions.yaml`).",
        "",
        "| Switch | Values | Turns on | Replaces |",
        "|---|---|---|---|",
    ]
    for name, values, meaning, members in rows:
        lines.append(f"| {code(name) if name else ''} | {values} | {meaning} | {', '.join(code(m) for m in sorted(members)) or '—'} |")
    lines.append("")
    return "\n".join(lines)
