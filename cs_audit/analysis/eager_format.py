"""``eager-format``: formatting work done before the level or env check that decides whether
anything is emitted: in a log call's message (paid before the level check), in the
arguments of a helper that checks its own gate inside (paid before that check), or in a
local that only such calls read (`msg = f"..."` ... `if DEBUG: logger.debug(msg)`)."""

from __future__ import annotations

from collections.abc import Sequence

from cs_audit.analysis.sites import Findings, per_step_cost, syncing_functions
from cs_audit.frequency import Frequencies
from cs_audit.joins.callgraph import EMITTER_ROLES, TreeModel
from cs_audit.joins.gates import site_switches
from cs_audit.joins.runs import call_run, run_of
from cs_audit.model import LEVEL_SWITCH, BuiltMessage, CallSite, EmitterDetail, Finding, PlainCall, SwitchRef, Words, spoken
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
        if model.facts[path].built_messages:
            _message_locals(model, rs, out, path)


def _log_call(model: TreeModel, rs: RuleSet, out: Findings, path: str, site: CallSite) -> None:
    switches = site_switches(model, path, site.function, site.gates, rs)
    # an env gate at or above the default level decided before the formatting ran
    decided_before = any(sw != LEVEL_SWITCH for sw in switches) and rs.level_passes(site.level)
    if LEVEL_SWITCH in switches or decided_before:
        return
    run = run_of(model, path, site.function, site.gates, site, rs)
    switch, freq = run.switch, run.frequency
    # the formatting's own share: what an eager record costs over a lazy one
    if rs.level_passes(site.level):
        extra = per_step_cost(rs, "log_emitted_eager", freq) - per_step_cost(rs, "log_emitted", freq)
    else:
        extra = per_step_cost(rs, "log_filtered_eager", freq) - per_step_cost(rs, "log_filtered", freq)
    out.add(RULE, path, site.line, site.end_line, site.function, None if switch == LEVEL_SWITCH else switch, freq,
            False, site.code, extra, site.eager, detail=EmitterDetail(emitter=site.callee, level=site.level or ""),
            cols=(site.col, site.end_col), run=run)


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
    run = call_run(model, path, site, (helper,), rs)
    switch, freq = run.switch, run.frequency
    syncs = any(
        c.rsplit(".", 1)[-1] in rs.sync_methods
        or any(t in syncing_functions(model) for t in model.resolver.resolve(path, site.function, c))
        for c in expensive
    )
    out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, syncs, site.code,
            per_step_cost(rs, "log_filtered_eager", freq) - per_step_cost(rs, "log_filtered", freq), kinds,
            detail=EmitterDetail(emitter=helper[1], level="helper"), cols=(site.col, site.end_col),
            run=run)


def _message_locals(model: TreeModel, rs: RuleSet, out: Findings, path: str) -> None:
    """A message built in a local whose every reader is an emitter that, by default, drops it
    where the building statement runs: a record below the default level, one behind a switch
    the building statement is not under, a gated emitter helper."""
    calls: dict[tuple[str | None, int, int], list[CallSite | PlainCall]] = {}
    for site in model.facts[path].calls:
        if site.resolution != "read":
            calls.setdefault((site.function, site.line, site.end_line), []).append(site)
    for built in model.facts[path].built_messages:
        own = set(site_switches(model, path, built.function, built.gates, rs))
        emitters = [_dropped_by(model, rs, path, built, own, calls.get((built.function, use.line, use.end_line), []), use.method)
                    for use in built.uses]
        dropping = [e for e in emitters if e is not None]
        if not dropping or len(dropping) < len(emitters):
            continue
        run = run_of(model, path, built.function, built.gates, built, rs)
        switch, freq = run.switch, run.frequency
        syncs = any(kind.startswith("call:") for kind in built.eager)
        out.add(RULE, path, built.line, built.end_line, built.function, switch, freq, syncs, built.code,
                per_step_cost(rs, "log_filtered_eager", freq) - per_step_cost(rs, "log_filtered", freq), built.eager,
                detail=EmitterDetail(emitter=dropping[0], level="local", local=built.name), cols=(built.col, built.end_col),
                run=run)


def _dropped_by(model: TreeModel, rs: RuleSet, path: str, built: BuiltMessage, own: set[SwitchRef],
                sites: list[CallSite | PlainCall], method: str) -> str | None:
    """The emitter a use of a message local is, when it drops the message by default where
    the local is built; None for any other call (or one not found)."""
    site = next((s for s in sites if s.callee.rsplit(".", 1)[-1] == method), None)
    if site is None:
        return None
    if site.role in EMITTER_ROLES:
        switches = set(site_switches(model, path, site.function, site.gates, rs))
        if switches - own:
            return site.callee  # behind a switch the building statement is not under
        formats = site.role != "log" or rs.level_passes(site.level) or site.level == "once" and not site.callee.endswith("debug_once")
        return None if formats or LEVEL_SWITCH in own else site.callee
    if site.role is None and not own:
        targets = model.resolved_calls.get((path, site.line, site.end_line, site.callee), ())
        helper = next((t for t in targets if t in model.gated_emitter_helpers), None)
        return helper[1] if helper is not None else None
    return None


def message(f: Finding, _frequencies: Frequencies) -> str:
    detail = f.detail if isinstance(f.detail, EmitterDetail) else EmitterDetail("?", "")
    kinds = ", ".join(f.eager_kinds)
    if detail.level == "local":
        return (f"`{detail.local}` is built ({kinds}) each time this runs, but only `{detail.emitter}` reads it and that "
                "does not emit by default here; build it under the same check as the emitter, or pass lazy arguments.")
    if detail.level == "helper":
        return (f"arguments to `{detail.emitter}()` are built ({kinds}) before it checks its own gate; "
                "test the gate at the call site.")
    return f"`{detail.emitter}` builds its message ({kinds}) before the level check decides; pass lazy %-style arguments."


def words(f: Finding, others: Sequence[Finding], phrase: str) -> Words:
    """§1's words for ``f``: the work done early (`f-string + %`; `eager json.dumps()` when a
    call comes first), or its phrase when none is named."""
    kinds = [(k[5:] + "()", True) if k.startswith("call:") else (k, False) for k in dict.fromkeys(f.eager_kinds)]
    if not kinds:
        return (phrase,)
    calls_first = kinds[0][1]
    items: list[tuple[str, bool]] = [("eager ", False)] if calls_first else []
    for i, kind in enumerate(kinds):
        if i:
            items.append((", " if calls_first else " + ", False))
        items.append(kind)
    return spoken(items)
