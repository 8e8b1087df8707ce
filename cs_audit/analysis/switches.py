"""The switch inventory: every env var the tree reads, with what it gates."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from cs_audit.analysis.callgraph import EMITTER_ROLES, TreeModel, site_switch
from cs_audit.model import EnvSetter, Finding, Switch, SwitchRead
from cs_audit.ruleset import RuleSet

_SITE_ROLES = EMITTER_ROLES | {"sync", "open"}


def switch_reads(model: TreeModel) -> dict[str, list[SwitchRead]]:
    """env var -> its reads (direct reads, and helper call sites that name it)."""
    reads: dict[str, list[SwitchRead]] = defaultdict(list)
    for path in sorted(model.facts):
        for read in model.facts[path].env_reads:
            if read.var:
                reads[read.var].append(SwitchRead(path, read.line, read.function, read.per_call))
    return reads


def gated_site_counts(model: TreeModel, rs: RuleSet) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for path in sorted(model.facts):
        for site in model.facts[path].calls:
            if site.role not in _SITE_ROLES:
                continue
            switch = site_switch(model, path, site.function, site.gates, rs)
            if switch is None and site.function:
                key = (path, site.function)
                if key not in model.freq_default:
                    for entry in model.entry_switches.get(key, ()):
                        counts[entry] += 1
                continue
            if switch is not None:
                counts[switch] += 1
    return counts


def build_switches(
    model: TreeModel,
    findings: Iterable[Finding],
    rs: RuleSet,
    setters: Iterable[EnvSetter] = (),
) -> list[Switch]:
    reads = switch_reads(model)
    findings = list(findings)
    # helper call sites with a literal switch name (`_diag("KEEPMAP_DIAG")`) are reads too
    for f in findings:
        if f.rule == "env-read-hot":
            via = dict(f.extra).get("via", "")
            if via.startswith("helper:"):
                for var in dict(f.extra).get("var", "").split(","):
                    if var and not var.startswith("<"):
                        reads[var].append(SwitchRead(f.path, f.line, f.function, True))
    counts = gated_site_counts(model, rs)
    syncing = {f.switch for f in findings if f.gpu_sync and f.switch}
    by_var: dict[str, list[EnvSetter]] = defaultdict(list)
    for setter in setters:
        by_var[setter.var].append(setter)
    switches = []
    for var in sorted(reads):
        unique = sorted(set(reads[var]), key=lambda r: (r.path, r.line, r.function or ""))
        switches.append(
            Switch(
                name=var, category=rs.category_of(var), reads=tuple(unique),
                setters=tuple(sorted(by_var.get(var, ()), key=lambda s: (s.path, s.line))),
                readers=(), added_in=None, added_in_note=None, gated_sites=counts.get(var, 0),
                gpu_sync=var in syncing, disposition="KEEP", merge_into=None, reasons=(),
            )
        )
    return switches
