"""``default-on-emitter``: a log line, print or file write on a hot path that runs with no
debug env set (a record at or above the default level, of a level the rules count)."""

from __future__ import annotations

from cs_audit.analysis.sites import Findings, frequency, gate_words, outside_event_loop, per_step_cost, when_words
from cs_audit.joins.callgraph import EMITTER_ROLES, TreeModel, site_switches
from cs_audit.model import CallSite, EmitterDetail, Finding
from cs_audit.ruleset import RuleSet

RULE = "default-on-emitter"


def emits_by_default(site: CallSite, rs: RuleSet) -> bool:
    """Per-event output with no env set: records of the levels the rules count (warnings and
    errors mark exceptional paths, `*_once` records are deduplicated), prints and file writes."""
    if site.role == "log":
        return rs.level_passes(site.level) and (site.level or "dynamic") in rs.default_on_levels
    return site.role in EMITTER_ROLES


def emit_event(site: CallSite) -> str:
    """The cost event (rules/costs.yaml) of one emitted record."""
    if site.role in ("write", "dump"):
        return "dump_line_buffered"
    return "log_emitted_eager" if site.eager else "log_emitted"


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    for path in sorted(model.facts):
        for site in model.fact_sites[path]:
            if site.role not in EMITTER_ROLES or site.function is None:
                continue
            key = (path, site.function)
            if key not in model.freq_default or not emits_by_default(site, rs) or outside_event_loop(model, key, site):
                continue
            if site_switches(model, path, site.function, site.gates, rs):
                continue
            freq = frequency(model, key, site, rs, default_only=True)
            out.add(RULE, path, site.line, site.end_line, site.function, None, freq, False, site.code,
                    per_step_cost(rs, emit_event(site), freq), site.eager,
                    detail=EmitterDetail(emitter=site.callee, level=site.level or site.role or ""),
                    cols=(site.col, site.end_col))


def message(f: Finding) -> str:
    detail = f.detail if isinstance(f.detail, EmitterDetail) else EmitterDetail("?", "")
    return (f"`{detail.emitter}` ({detail.level}) runs {when_words(f)} {gate_words(f.switch)}; "
            "gate it behind a trace level or log it once.")
