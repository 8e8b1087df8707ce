"""``default-on-emitter``: a log line, print or file write on a hot path that runs with no
debug env set (a record at or above the default level, of a level the rules count)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from cs_audit.analysis.sites import Findings, gate_words, per_step_cost, syncing_helpers, when_words
from cs_audit.frequency import Frequencies
from cs_audit.joins.callgraph import EMITTER_ROLES, TreeModel
from cs_audit.joins.runs import outside_event_loop, run_of, runs_by_default
from cs_audit.model import CallSite, EmitterDetail, Finding, Words
from cs_audit.ruleset import RuleSet

RULE = "default-on-emitter"


def emits_by_default(site: CallSite, rs: RuleSet) -> bool:
    """Output with no env set: records of the levels the rules count (warnings and errors
    too: whether their path is exceptional is ``path_kind``'s to say), prints and file writes."""
    if site.role == "log":
        level = site.level or "dynamic"
        if level == "once":  # `warning_once`/`info_once` pass a default logger, `debug_once` does not
            return level in rs.default_on_levels and not site.callee.endswith("debug_once")
        return rs.level_passes(site.level) and level in rs.default_on_levels
    return site.role in EMITTER_ROLES


def emit_event(site: CallSite) -> str:
    """The cost event (rules/costs.yaml) of one emitted record; a `*_once` record emits once
    per distinct message and arguments, and costs their formatting and a lookup after that."""
    if site.role in ("write", "dump"):
        return "dump_line_buffered"
    if site.level == "once":
        return "log_once_lookup_eager" if site.eager else "log_once_lookup"
    return "log_emitted_eager" if site.eager else "log_emitted"


def _syncing_args(sites: Iterable[CallSite]) -> dict[str | None, list[int]]:
    """Per function, the lines of the syncs inside an emitter's arguments."""
    lines: dict[str | None, list[int]] = defaultdict(list)
    for site in sites:
        if site.role == "sync" and site.in_emitter_args:
            lines[site.function].append(site.line)
    return lines


def _helper_syncs(model: TreeModel, path: str, site: CallSite) -> bool:
    """Whether a function called in the emitter's arguments syncs (`summarize(t)` whose
    `stats(t)` calls `.item()`): the record pays it each time it is built."""
    if not site.arg_calls:
        return False
    syncing = syncing_helpers(model)
    return any(t in syncing for c in site.arg_calls for t in model.resolver.resolve(path, site.function, c))


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    for path in sorted(model.facts):
        syncs = _syncing_args(model.fact_sites[path])
        for site in model.fact_sites[path]:
            if site.role not in EMITTER_ROLES or site.function is None:
                continue
            key = (path, site.function)
            if not runs_by_default(model, key) or not emits_by_default(site, rs) or outside_event_loop(model, key, site):
                continue
            run = run_of(model, path, site.function, site.gates, site, rs)
            if run.switch is not None:
                continue
            freq = run.frequency
            gpu_sync = any(site.line <= line <= site.end_line for line in syncs.get(site.function, ())) or _helper_syncs(model, path, site)
            out.add(RULE, path, site.line, site.end_line, site.function, None, freq, gpu_sync, site.code,
                    per_step_cost(rs, emit_event(site), freq), site.eager,
                    detail=EmitterDetail(emitter=site.callee, level=site.level or site.role or ""),
                    cols=(site.col, site.end_col), run=run)


def message(f: Finding, frequencies: Frequencies) -> str:
    detail = f.detail if isinstance(f.detail, EmitterDetail) else EmitterDetail("?", "")
    head = f"`{detail.emitter}` ({detail.level})"
    if f.path_kind != "normal":
        an = "an" if f.path_kind[0] in "aeiou" else "a"
        head += f" is on {an} {f.path_kind} path ({f.path_reason}) of code that"
    return (f"{head} runs {when_words(f, frequencies)} {gate_words(f.switch)}; "
            "gate it behind a trace level or log it once.")


def words(f: Finding, others: Sequence[Finding], phrase: str) -> Words:
    """§1's words for ``f``: how often, the record's level (none for a gated helper's output) and its phrase."""
    level = f.detail.level if isinstance(f.detail, EmitterDetail) else ""
    return (f"per-{f.frequency} {level + ' ' if level and level != 'helper' else ''}{phrase}",)
