"""``eager-format``: formatting work done before the level or env check that decides whether
anything is emitted: in a log call's message (paid before the level check), or in the
arguments of a helper that checks its own gate inside (paid before that check)."""

from __future__ import annotations

from cs_audit.analysis.sites import Findings, gated_run, per_step_cost, syncing_functions
from cs_audit.joins.callgraph import EMITTER_ROLES, TreeModel, site_switches
from cs_audit.model import LEVEL_SWITCH, CallSite, EmitterDetail, Finding
from cs_audit.ruleset import RuleSet

RULE = "eager-format"


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    for path in sorted(model.facts):
        for site in model.fact_sites[path]:
            if site.role in EMITTER_ROLES:
                if site.role == "log" and site.eager:
                    _log_call(model, rs, out, path, site)
            elif site.role is None and (site.eager or site.arg_calls):
                if not site_switches(model, path, site.function, site.gates, rs):
                    _helper_call(model, rs, out, path, site)


def _log_call(model: TreeModel, rs: RuleSet, out: Findings, path: str, site: CallSite) -> None:
    switches = site_switches(model, path, site.function, site.gates, rs)
    # an env gate at or above the default level decided before the formatting ran
    decided_before = any(sw != LEVEL_SWITCH for sw in switches) and rs.level_passes(site.level)
    if LEVEL_SWITCH in switches or decided_before:
        return
    switch, freq = gated_run(model, path, site.function, site.gates, site, rs)
    # the formatting's own share: what an eager record costs over a lazy one
    if rs.level_passes(site.level):
        extra = per_step_cost(rs, "log_emitted_eager", freq) - per_step_cost(rs, "log_emitted", freq)
    else:
        extra = per_step_cost(rs, "log_filtered_eager", freq) - per_step_cost(rs, "log_filtered", freq)
    out.add(RULE, path, site.line, site.end_line, site.function, None if switch == LEVEL_SWITCH else switch, freq,
            False, site.code, extra, site.eager, detail=EmitterDetail(emitter=site.callee, level=site.level or ""),
            cols=(site.col, site.end_col), path=(site.path_kind, site.path_reason))


def _helper_call(model: TreeModel, rs: RuleSet, out: Findings, path: str, site: CallSite) -> None:
    targets = model.resolved_calls.get((path, site.line, site.end_line, site.callee), ())
    helper = next((t for t in targets if t in model.gated_emitter_helpers), None)
    if helper is None:
        return
    expensive = tuple(
        c for c in site.arg_calls
        if c in rs.eager_calls or c.rsplit(".", 1)[-1] in rs.sync_methods or model.resolver.resolve(path, site.function, c)
    )
    kinds = site.eager + tuple(f"call:{c.rsplit('.', 1)[-1]}" for c in expensive)
    if not kinds:
        return
    switch, freq = gated_run(model, path, site.function, site.gates, site, rs)
    syncs = any(
        c.rsplit(".", 1)[-1] in rs.sync_methods
        or any(t in syncing_functions(model) for t in model.resolver.resolve(path, site.function, c))
        for c in expensive
    )
    out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, syncs, site.code,
            per_step_cost(rs, "log_filtered_eager", freq) - per_step_cost(rs, "log_filtered", freq), kinds,
            detail=EmitterDetail(emitter=helper[1], level="helper"), cols=(site.col, site.end_col),
            path=(site.path_kind, site.path_reason))


def message(f: Finding) -> str:
    detail = f.detail if isinstance(f.detail, EmitterDetail) else EmitterDetail("?", "")
    kinds = ", ".join(f.eager_kinds)
    if detail.level == "helper":
        return (f"arguments to `{detail.emitter}()` are built ({kinds}) before it checks its own gate; "
                "test the gate at the call site.")
    return f"`{detail.emitter}` builds its message ({kinds}) before the level check decides; pass lazy %-style arguments."
