"""``sync-in-debug``: a host-device sync (``.item()``, ``.cpu()``, ``.tolist()``,
``.numpy()``, ``synchronize()``) inside logging, debug or dump code: under a debug gate, in
an emitter's arguments (or a gated helper's), or in a function only debug code calls."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from cs_audit.analysis.sites import Findings, gate_words, syncing_helpers, when_words
from cs_audit.frequency import Frequencies, is_hot
from cs_audit.joins.callgraph import EMITTER_ROLES, TreeModel, is_debug_switch
from cs_audit.joins.gates import site_switch, site_switches
from cs_audit.joins.runs import entered_through, first, how_often, run_of
from cs_audit.model import LEVEL_SWITCH, CallSite, Finding, GateRef, SwitchRef, SyncDetail, Words, spoken
from cs_audit.ruleset import RuleSet

RULE = "sync-in-debug"
#: between the names of ``SyncDetail.helper`` when the sync is further down (`summarize → stats`)
HELPER_CHAIN = " → "


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    helper_arg_lines = _helper_arg_spans(model)
    for path in sorted(model.facts):
        for site in model.fact_sites[path]:
            if site.arg_calls:
                _helper_syncs(model, rs, out, path, site)
            if site.role != "sync":
                continue
            key = (path, site.function) if site.function else None
            local = _debug_gate(model, path, site.function, site.gates, rs)
            in_args = site.in_emitter_args or any(
                lo <= site.line <= hi and site.callee in calls for lo, hi, calls in helper_arg_lines.get((path, site.function), ())
            )
            switch: SwitchRef | None
            if local is not None:
                switch = local
            elif in_args:
                switch = first(entered_through(model, key))
            elif key is not None and key in model.debug_functions:
                paths = model.debug_functions[key]
                if None in paths:
                    switch = None
                elif paths:
                    switch = first(paths)
                else:
                    switch = first(entered_through(model, key))
            else:
                continue
            if local is None:  # debug code by where it is, gated (if at all) by configuration
                switch = site_switch(model, path, site.function, site.gates, rs) or switch
            if switch == LEVEL_SWITCH:
                switch = None if not in_args else switch
            run = how_often(model, path, site.function, site, rs, switch)
            freq = run.frequency
            out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, True, site.code,
                    rs.sync_added_us.get(freq, 0.0), detail=SyncDetail(call=site.callee.rsplit(".", 1)[-1]),
                    cols=(site.col, site.end_col), run=run)


def _helper_syncs(model: TreeModel, rs: RuleSet, out: Findings, path: str, site: CallSite) -> None:
    """A function called in the arguments of an emitter, or of a gated emitter helper, that
    syncs in its own body (`cptrace(1, h=khash(t))`, `khash` calling `.item()`): reported at
    that call too when it is hot, since that is where the sync is paid."""
    if site.role not in EMITTER_ROLES and not any(
            t in model.gated_emitter_helpers for t in model.resolved_calls.get((path, site.line, site.end_line, site.callee), ())):
        return
    syncing = syncing_helpers(model)
    for callee in site.arg_calls:
        if callee.rsplit(".", 1)[-1] in rs.sync_methods:
            continue  # a sync written in the arguments is a site of its own
        helper = next((t for t in model.resolver.resolve(path, site.function, callee) if t in syncing), None)
        if helper is None:
            continue
        run = run_of(model, path, site.function, site.gates, site, rs)
        switch, freq = run.switch, run.frequency
        if not is_hot(freq):
            continue
        below, call = syncing[helper]
        out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, True, site.code,
                rs.sync_added_us.get(freq, 0.0), detail=SyncDetail(call=call, helper=HELPER_CHAIN.join((helper[1].rsplit(".", 1)[-1], *below))),
                cols=(site.col, site.end_col), run=run)


def _debug_gate(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], rs: RuleSet) -> SwitchRef | None:
    """The innermost debug switch (env first) of a site's gates; a configuration switch
    (`if BUFFER_MB > 0:`) does not make the code under it debug code."""
    debug = [s for s in site_switches(model, path, function, gates, rs) if is_debug_switch(s, rs)]
    env = [s for s in debug if s.kind in ("env", "dynamic")]
    return (env or debug)[-1] if debug else None


def _helper_arg_spans(model: TreeModel) -> dict[tuple[str, str | None], list[tuple[int, int, tuple[str, ...]]]]:
    """Per function, the lines of its calls to gated emitter helpers, with the calls in their arguments."""
    spans: dict[tuple[str, str | None], list[tuple[int, int, tuple[str, ...]]]] = defaultdict(list)
    for path, sites in model.fact_sites.items():
        for site in sites:
            if site.role is None and site.arg_calls:
                targets = model.resolved_calls.get((path, site.line, site.end_line, site.callee), ())
                if any(t in model.gated_emitter_helpers for t in targets):
                    spans[(path, site.function)].append((site.line, site.end_line, site.arg_calls))
    return spans


def message(f: Finding, frequencies: Frequencies) -> str:
    detail = f.detail if isinstance(f.detail, SyncDetail) else SyncDetail("item")
    helpers = " → ".join(f"`{name}()`" for name in detail.helper.split(HELPER_CHAIN)) if detail.helper else ""
    what = f"{helpers} (its `.{detail.call}()`)" if detail.helper else f"`.{detail.call}()`"
    return (f"{what} forces a host-device sync in debug/log code {gate_words(f.switch)}, {when_words(f, frequencies)}; "
            "move it out of the log path or behind the highest trace level.")


def words(f: Finding, others: Sequence[Finding], phrase: str) -> Words:
    """§1's words for ``f``: its phrase and the syncing call."""
    call = f.detail.call if isinstance(f.detail, SyncDetail) else ""
    return spoken([(f"{phrase} (", False), (f".{call}()", True), (")", False)]) if call else (f"{phrase} (sync)",)
