"""The switch inventory: every env var the tree reads, what it gates, who sets it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from cs_audit.analysis.categories import by_name, categorize
from cs_audit.analysis.sites import enabled_cost
from cs_audit.frequency import ONCE, FrequencyName
from cs_audit.joins.callgraph import EMITTER_ROLES, TreeModel, is_once_function
from cs_audit.joins.env_helpers import helper_switches
from cs_audit.joins.gates import site_switch
from cs_audit.joins.levels import called_levels, entry_levels, site_levels
from cs_audit.joins.runs import entered_through, frequency, outside_event_loop, runs_by_default
from cs_audit.model import CallSite, EnvSetter, Finding, GatedSite, PlainCall, Switch, SwitchRead
from cs_audit.ruleset import RuleSet

_SITE_ROLES = EMITTER_ROLES | {"sync", "open", "flush"}


def switch_reads(model: TreeModel, rs: RuleSet) -> dict[str, list[SwitchRead]]:
    """env var -> its reads: direct reads, and helper call sites that name it (`_diag("X")`)."""
    reads: dict[str, list[SwitchRead]] = defaultdict(list)
    for path in sorted(model.facts):
        for read in model.facts[path].env_reads:
            if read.var:
                reads[read.var].append(SwitchRead(path, read.line, read.function, read.per_call))
    first_sites: dict[str, dict[tuple[int, int, str], CallSite | PlainCall]] = {}
    for (path, line, _end, _callee), targets in model.resolved_calls.items():
        for target in targets:
            if target not in model.env_helpers:
                continue
            by_key = first_sites.get(path)
            if by_key is None:
                by_key = first_sites[path] = {}
                for c in reversed(model.edge_sites[path]):
                    by_key[(c.line, c.end_line, c.callee)] = c
            site = by_key[(line, _end, _callee)]
            once = site.function is None or is_once_function(model.functions.get((path, site.function)), rs)
            for var in helper_switches(model, target, site.literal_args):
                if var != "<dynamic>":
                    reads[var].append(SwitchRead(path, line, site.function, not once))
    return reads


def _work(site: CallSite, buffered: set[str]) -> str:
    if site.role == "log":
        text = f"log line ({site.level})"
        return text + (f", {', '.join(site.eager)} built first" if site.eager else "")
    if site.role == "write":
        return "write() on a line-buffered handle" if site.receiver in buffered else "write()"
    if site.role == "flush":
        return "flush() after a line-buffered write (redundant)" if site.receiver in buffered else "flush()"
    if site.role == "open":
        return f"open({site.mode or 'r'})"
    if site.role == "sync":
        return f".{site.callee.rsplit('.', 1)[-1]}() (device sync)"
    return site.callee.rsplit(".", 1)[-1] if site.role == "dump" else site.role or ""


def gated_sites(model: TreeModel, rs: RuleSet) -> dict[str, list[GatedSite]]:
    """switch -> the emitters, dumps, opens and syncs that run only with it set (directly
    gated, or in a function reached only through calls gated by it)."""
    out: dict[str, list[GatedSite]] = defaultdict(list)
    entered = entry_levels(model, rs)
    assert rs.switch_kinds is not None
    max_level = rs.switch_kinds.max_level
    for path in sorted(model.facts):
        sites = model.fact_sites[path]
        buffered = {s.bound_to for s in sites if s.role == "open" and s.line_buffered and s.bound_to}
        for site in sites:
            if site.role not in _SITE_ROLES:
                continue
            key = (path, site.function) if site.function else None
            switch = site_switch(model, path, site.function, site.gates, rs)
            switches = [switch] if switch else []
            levels = site_levels(model, path, site.function, site.gates, rs) if site.gates else {}
            if not switches and key is not None and not runs_by_default(model, key):
                switches = entered_through(model, key)
                levels = entered.get(key, {})
            freq: FrequencyName = frequency(model, key, None, rs, default_only=False)
            if outside_event_loop(model, key, site):
                freq = ONCE
            gated = GatedSite(path, site.line, site.function, site.role or "", _work(site, buffered),
                              freq, site.role == "sync", site.code, enabled_cost(rs, site.role or "", freq))
            names = set()
            handed = any(g.level.startswith("param:") for g in site.gates)
            for sw in switches:
                if sw.kind not in ("env", "flag"):
                    continue
                names.add(sw.text)
                calls = called_levels(model, path, site.function, site.gates, sw.text, rs) if handed else []
                if any(1 < level <= max_level for _, level in calls):
                    # a level helper (`kvtrace(level, ...)`): each call runs it at the level it
                    # passes (a helper every call runs at one level stays one site)
                    for edge, level in calls:
                        at = frequency(model, edge.caller, edge.site, rs, default_only=False)
                        out[sw.text].append(replace(
                            gated, path=edge.path, line=edge.site.line, function=edge.caller[1] if edge.caller else None,
                            frequency=at, code=edge.site.code, cost_us=enabled_cost(rs, site.role or "", at),
                            level=level if level <= max_level else 0))
                    continue
                level, _ = levels.get(sw.text, (0, ""))
                out[sw.text].append(replace(gated, level=level) if 0 < level <= max_level else gated)
            # a helper's fallback to a level knob (`_diag("X", 2)` when X is unset): the knob's site too
            for var, (level, via) in sorted(levels.items()):
                if via and var not in names and level <= max_level:
                    out[var].append(replace(gated, level=level, via=via))
    return out


def build_switches(
    model: TreeModel,
    findings: Iterable[Finding],
    rs: RuleSet,
    setters: Iterable[EnvSetter] = (),
    readers: dict[str, list[tuple[str, int, str]]] | None = None,
    files: dict[str, list[str]] | None = None,
) -> list[Switch]:
    findings = list(findings)
    reads = switch_reads(model, rs)
    sites = gated_sites(model, rs)
    syncing = {f.switch.text for f in findings if f.gpu_sync and f.switch} | {sw for sw, rows in sites.items() if any(r.gpu_sync for r in rows)}
    by_var: dict[str, list[EnvSetter]] = defaultdict(list)
    for setter in setters:
        by_var[setter.var].append(setter)
    readers = readers or {}
    files = files or {}
    categories = categorize(model, rs, reads, sites)
    switches = []
    for var in sorted(reads):
        category, kind, why = categories[var]
        unique = sorted(set(reads[var]), key=lambda r: (r.path, r.line, r.function or ""))
        gated = tuple(sites.get(var, ()))
        switches.append(
            Switch(
                name=var, category=category, kind=kind, category_reasons=why, category_by_name=by_name(why),
                reads=tuple(unique),
                setters=tuple(sorted(by_var.get(var, ()), key=lambda s: (s.path, s.line, s.kind))),
                readers=tuple(readers.get(var, ())), added_in=None, added_in_note=None,
                gated_sites=len(gated), gpu_sync=var in syncing, disposition="KEEP", merge_into=None,
                reasons=(), sites=gated, files=tuple(sorted(set(files.get(var, ())))),
            )
        )
    return switches
