"""Rules over the joined tree model: one function per rule id, each returning rows.

Findings carry data; ``messages.py`` words them.  Costs come from ``rules/costs.yaml``.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict

from cs_audit.analysis.messages import message_for
from cs_audit.joins.callgraph import (
    EMITTER_ROLES,
    LEVEL_GATE,
    FuncKey,
    TreeModel,
    function_at,
    helper_switches,
    is_once_function,
    rank,
    site_switch,
    site_switches,
)
from cs_audit.model import CallSite, EnvRead, Finding, Frequency, FunctionDef
from cs_audit.ruleset import RuleSet

_FILE_OUTPUT_ROLES = frozenset({"write", "dump"})


def fingerprint(rule: str, path: str, function: str | None, code: str, occurrence: int) -> str:
    normalized = " ".join(code.split())
    raw = f"{rule}\0{path}\0{function or ''}\0{normalized}\0{occurrence}"
    return hashlib.sha1(raw.encode()).hexdigest()[:16]


def _site_frequency(model: TreeModel, key: FuncKey | None, fact: EnvRead | CallSite | None, rs: RuleSet,
                    default_only: bool) -> Frequency:
    """How often a fact runs: its function's frequency, raised by the loop it sits in."""
    if key is None:
        return "once"
    table = model.freq_default if default_only else model.freq_any
    freq = table.get(key)
    if freq is None:
        return "once" if is_once_function(model.functions.get(key), rs) else "unknown"
    if fact is not None and fact.loop_depth > 0:
        freq = rs.in_loop(freq, fact.loop_iter)
    return freq


def _emits_by_default(site: CallSite, rs: RuleSet) -> bool:
    """Per-event output with no env set: info records (warnings/errors mark exceptional
    paths, `*_once` records are deduplicated), prints and file writes."""
    if site.role == "log":
        return rs.level_passes(site.level) and (site.level or "dynamic") in rs.default_on_levels
    return site.role in EMITTER_ROLES


class _Builder:
    """Collects findings and gives repeated (rule, path, function, code) an occurrence index."""

    def __init__(self, rs: RuleSet) -> None:
        self.rs = rs
        self.rows: list[Finding] = []

    def add(self, rule: str, path: str, line: int, end_line: int, function: str | None, switch: str | None,
            frequency: Frequency, gpu_sync: bool, code: str, cost_us: float = 0.0,
            eager_kinds: tuple[str, ...] = (), **extra: str) -> None:
        data = dict(extra)
        self.rows.append(
            Finding(
                rule=rule, path=path, line=line, end_line=end_line, function=function, switch=switch,
                frequency=frequency, gpu_sync=gpu_sync, message="", fingerprint="", code=code,
                cost_us=round(cost_us, 2), eager_kinds=eager_kinds, extra=tuple(sorted(data.items())),
            )
        )

    def finish(self) -> list[Finding]:
        from dataclasses import replace

        self.rows.sort(key=lambda f: (f.path, f.line, f.rule, f.end_line, f.code))
        seen: Counter[tuple[str, str, str | None, str]] = Counter()
        out: list[Finding] = []
        for row in self.rows:
            key = (row.rule, row.path, row.function, " ".join(row.code.split()))
            occurrence = seen[key]
            seen[key] += 1
            out.append(replace(row, message=message_for(row), fingerprint=fingerprint(row.rule, row.path, row.function, row.code, occurrence)))
        return out


def per_step_cost(rs: RuleSet, event: str, frequency: Frequency) -> float:
    return rs.costs_us.get(event, 0.0) * rs.multipliers.get(frequency, 0.0)


def _emit_event(site: CallSite) -> str:
    if site.role in ("write", "dump"):
        return "dump_line_buffered"
    return "log_emitted_eager" if site.eager else "log_emitted"


def analyse(model: TreeModel, rs: RuleSet) -> list[Finding]:
    out = _Builder(rs)
    _env_read_hot(model, rs, out)
    _emitter_rules(model, rs, out)
    _sync_in_debug(model, rs, out)
    _file_rules(model, rs, out)
    _duplicate_helper(model, out)
    return out.finish()


# ----------------------------------------------------------------- env-read-hot
def _env_read_hot(model: TreeModel, rs: RuleSet, out: _Builder) -> None:
    for path in sorted(model.facts):
        ff = model.facts[path]
        for read in ff.env_reads:
            if not read.per_call or read.function is None:
                continue
            key = (path, read.function)
            if key in model.env_helpers and model.callers.get(key):
                continue  # reported at the helper's call sites
            if key not in model.freq_any:
                continue
            switch = site_switch(model, path, read.function, read.gates, rs)
            if switch is None and key not in model.freq_default:
                switch = _first(model.entry_switches.get(key))
            freq = _site_frequency(model, key, read, rs, default_only=switch is None)
            event = "env_registry_get" if read.via.startswith("registry") else "env_read"
            out.add("env-read-hot", path, read.line, read.end_line, read.function, switch, freq, False, read.code,
                    per_step_cost(rs, event, freq), var=read.var or "<dynamic>", via=read.via)
        for site in model.edge_sites.get(path, ()):  # a site that lands nowhere reads no helper
            if site.role is not None or site.function is None:
                continue
            key = (path, site.function)
            if key not in model.freq_any or key in model.env_helpers:
                continue
            for target in model.resolved_calls.get((path, site.line, site.end_line, site.callee), ()):
                if target not in model.env_helpers:
                    continue
                switch = site_switch(model, path, site.function, site.gates, rs)
                if switch is None and key not in model.freq_default:
                    switch = _first(model.entry_switches.get(key))
                freq = _site_frequency(model, key, site, rs, default_only=switch is None)
                reads = helper_switches(model, target, site.literal_args)
                out.add("env-read-hot", path, site.line, site.end_line, site.function, switch, freq, False,
                        site.code or site.callee, per_step_cost(rs, "env_read_int", freq) * len(reads),
                        var=",".join(reads), via=f"helper:{target[1]}")
                break


def _first(values) -> str | None:
    return sorted(v for v in values if v is not None)[0] if values and any(v is not None for v in values) else None


# ----------------------------------------------------------------- emitters
def _emitter_rules(model: TreeModel, rs: RuleSet, out: _Builder) -> None:
    for path in sorted(model.facts):
        for site in model.fact_sites[path]:
            if site.role not in EMITTER_ROLES and (site.role is not None or (not site.eager and not site.arg_calls)):
                continue  # neither an emitter nor a call with eager arguments: no rule below applies
            key = (path, site.function) if site.function else None
            switches = site_switches(model, path, site.function, site.gates, rs)
            switch = site_switch(model, path, site.function, site.gates, rs)
            if switch is None and key is not None and key not in model.freq_default:
                switch = _first(model.entry_switches.get(key))
            if site.role in EMITTER_ROLES:
                _default_on(model, rs, out, path, site, key, switches)
                decided_before = any(sw != LEVEL_GATE for sw in switches) and rs.level_passes(site.level)
                if site.role == "log" and site.eager and LEVEL_GATE not in switches and not decided_before:
                    freq = _site_frequency(model, key, site, rs, default_only=switch is None)
                    # the formatting's own share: what an eager record costs over a lazy one
                    emitted = rs.level_passes(site.level)
                    extra = (per_step_cost(rs, "log_emitted_eager", freq) - per_step_cost(rs, "log_emitted", freq)) if emitted else (
                        per_step_cost(rs, "log_filtered_eager", freq) - per_step_cost(rs, "log_filtered", freq))
                    out.add("eager-format", path, site.line, site.end_line, site.function,
                            None if switch == LEVEL_GATE else switch, freq, False, site.code,
                            extra, site.eager, emitter=site.callee, level=site.level or "")
            elif site.role is None and not switches:
                _eager_helper_call(model, rs, out, path, site, key, switch)


def _default_on(model: TreeModel, rs: RuleSet, out: _Builder, path: str, site: CallSite,
                key: FuncKey | None, switches: list[str]) -> None:
    if switches or key is None or key not in model.freq_default or not _emits_by_default(site, rs):
        return
    freq = _site_frequency(model, key, site, rs, default_only=True)
    out.add("default-on-emitter", path, site.line, site.end_line, site.function, None, freq, False, site.code,
            per_step_cost(rs, _emit_event(site), freq), site.eager, emitter=site.callee, level=site.level or site.role or "")


def _eager_helper_call(model: TreeModel, rs: RuleSet, out: _Builder, path: str, site: CallSite,
                       key: FuncKey | None, switch: str | None) -> None:
    if not site.eager and not site.arg_calls:
        return  # nothing eager in the arguments (the same outcome as below, without the lookups)
    targets = model.resolved_calls.get((path, site.line, site.end_line, site.callee), ())
    helper = next((t for t in targets if t in model.gated_emitter_helpers), None)
    if helper is None:
        return
    expensive = tuple(
        c for c in site.arg_calls
        if c in rs.eager_calls or c.rsplit(".", 1)[-1] in rs.sync_methods or _is_tree_function(model, path, site.function, c)
    )
    kinds = site.eager + tuple(f"call:{c.rsplit('.', 1)[-1]}" for c in expensive)
    if not kinds:
        return
    freq = _site_frequency(model, key, site, rs, default_only=switch is None)
    syncs = any(
        c.rsplit(".", 1)[-1] in rs.sync_methods
        or any(t in _syncing_functions(model) for t in model.resolver.resolve(path, site.function, c))
        for c in expensive
    )
    out.add("eager-format", path, site.line, site.end_line, site.function, switch, freq, syncs, site.code,
            per_step_cost(rs, "log_filtered_eager", freq) - per_step_cost(rs, "log_filtered", freq), kinds,
            emitter=helper[1], level="helper")


def _syncing_functions(model: TreeModel) -> set[FuncKey]:
    """Functions with a device sync in their own body (cached on the model)."""
    if model.syncing is None:
        model.syncing = {(p, c.function) for p, sites in model.fact_sites.items() for c in sites if c.role == "sync" and c.function}
    return model.syncing


def _is_tree_function(model: TreeModel, path: str, function: str | None, callee: str) -> bool:
    return bool(model.resolver.resolve(path, function, callee))


# ----------------------------------------------------------------- sync-in-debug
def _sync_in_debug(model: TreeModel, rs: RuleSet, out: _Builder) -> None:
    helper_arg_lines = _helper_arg_spans(model)
    for path in sorted(model.facts):
        for site in model.fact_sites[path]:
            if site.role != "sync":
                continue
            key = (path, site.function) if site.function else None
            local = site_switch(model, path, site.function, site.gates, rs)
            in_args = site.in_emitter_args or any(
                lo <= site.line <= hi and site.callee in calls for lo, hi, calls in helper_arg_lines.get((path, site.function), ())
            )
            switch: str | None
            if local is not None:
                switch = local
            elif in_args:
                switch = None if key is None or key in model.freq_default or key not in model.freq_any else _first(model.entry_switches.get(key))
            elif key is not None and key in model.debug_functions:
                paths = model.debug_functions[key]
                if None in paths:
                    switch = None
                elif paths:
                    switch = _first(paths)
                else:
                    switch = None if key in model.freq_default else _first(model.entry_switches.get(key))
            else:
                continue
            if switch == LEVEL_GATE:
                switch = None if not in_args else switch
            freq = _site_frequency(model, key, site, rs, default_only=switch is None)
            cost = rs.sync_added_us.get(freq, 0.0)
            out.add("sync-in-debug", path, site.line, site.end_line, site.function, switch, freq, True, site.code, cost,
                    call=site.callee.rsplit(".", 1)[-1])


def _helper_arg_spans(model: TreeModel) -> dict[tuple[str, str | None], list[tuple[int, int, tuple[str, ...]]]]:
    spans: dict[tuple[str, str | None], list[tuple[int, int, tuple[str, ...]]]] = defaultdict(list)
    for path, sites in model.fact_sites.items():
        for site in sites:
            if site.role is None and site.arg_calls:
                targets = model.resolved_calls.get((path, site.line, site.end_line, site.callee), ())
                if any(t in model.gated_emitter_helpers for t in targets):
                    spans[(path, site.function)].append((site.line, site.end_line, site.arg_calls))
    return spans


# ----------------------------------------------------------------- file output rules
#: the call roles the file output rules look at
_FILE_ROLES = frozenset({"open", "flush", "timestamp"})


def _file_rules(model: TreeModel, rs: RuleSet, out: _Builder) -> None:
    for path in sorted(model.facts):
        ff = model.facts[path]
        sites = model.fact_sites[path]
        buffered_handles = {s.bound_to for s in sites if s.role == "open" and s.line_buffered and s.bound_to}
        exporters = set(ff.env_exporters)  # a launcher minting the run dir it exports is the design
        for site in sites:
            if site.role not in _FILE_ROLES:
                continue
            key = (path, site.function) if site.function else None
            switch = site_switch(model, path, site.function, site.gates, rs)
            if switch is None and key is not None and key not in model.freq_default:
                switch = _first(model.entry_switches.get(key))
            freq = _site_frequency(model, key, site, rs, default_only=switch is None)
            if site.role == "open" and _is_per_call_open(model, rs, key, site):
                out.add("per-call-open", path, site.line, site.end_line, site.function, switch, freq, False, site.code,
                        per_step_cost(rs, "open_per_event", freq), mode=site.mode or "")
            elif site.role == "flush" and site.receiver in buffered_handles:
                out.add("redundant-flush", path, site.line, site.end_line, site.function, switch, freq, False, site.code,
                        per_step_cost(rs, "dump_flush", freq) - per_step_cost(rs, "dump_block", freq), handle=site.receiver or "")
            elif site.role == "timestamp" and site.builds_path and site.function not in exporters:
                out.add("own-timestamp", path, site.line, site.end_line, site.function, switch, freq, False, site.code)
        for line, literal in ff.literal_paths:
            f = function_at(ff, line)
            out.add("hardcoded-output-path", path, line, line, f.qualname if f else None, None,
                    _site_frequency(model, (path, f.qualname) if f else None, None, rs, default_only=False), False,
                    literal, output_path=literal)


def _is_per_call_open(model: TreeModel, rs: RuleSet, key: FuncKey | None, site: CallSite) -> bool:
    if key is None or not site.mode or site.mode[0] not in "wax":
        return False
    if site.bound_to and (site.bound_to.startswith("self.") or site.bound_to.startswith("cls.")):
        return False  # a cached handle
    f: FunctionDef | None = model.functions.get(key)
    return not is_once_function(f, rs)


# ----------------------------------------------------------------- duplicate-helper
def duplicate_groups(model: TreeModel) -> list[tuple[str, list[tuple[str, FunctionDef]]]]:
    """Copies of *helper* bodies: functions that read the env, emit, or sync (the
    audit's subject), identical up to renamed locals.  Worked out once per model (the
    rule and the report's duplicate groups both read it)."""
    if model.duplicates is not None:
        return model.duplicates
    with_facts: set[FuncKey] = set()
    for path, ff in model.facts.items():
        with_facts.update((path, r.function) for r in ff.env_reads if r.function)
        with_facts.update((path, c.function) for c in model.fact_sites[path] if c.function and c.role is not None)
    by_hash: dict[str, list[tuple[str, FunctionDef]]] = defaultdict(list)
    for key in sorted(with_facts):
        f = model.functions.get(key)
        if f is not None and f.body_hash:
            by_hash[f.body_hash].append((key[0], f))
    groups = []
    for members in by_hash.values():
        if len(members) >= 2:
            names = Counter(f.name for _, f in members)
            name = sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
            groups.append((name, sorted(members, key=lambda m: (m[0], m[1].line))))
    groups.sort(key=lambda g: (g[0], g[1][0][0], g[1][0][1].line))
    model.duplicates = groups
    return groups


def _duplicate_helper(model: TreeModel, out: _Builder) -> None:
    for name, members in duplicate_groups(model):
        for path, f in members:
            key = (path, f.qualname)
            freq: Frequency = model.freq_any.get(key, "unknown")
            out.add("duplicate-helper", path, f.line, f.end_line, f.qualname, None, freq, False, f"def {f.name}",
                    group=name, copies=str(len(members)))


__all__ = ["analyse", "duplicate_groups", "per_step_cost", "rank"]
