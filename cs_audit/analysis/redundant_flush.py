"""``redundant-flush``: an explicit ``flush()`` on a handle opened line-buffered."""

from __future__ import annotations

from cs_audit.analysis.sites import Findings, per_step_cost
from cs_audit.frequency import Frequencies
from cs_audit.joins.callgraph import FuncKey, TreeModel
from cs_audit.joins.runs import run_of
from cs_audit.model import CallSite, Finding, FlushDetail
from cs_audit.ruleset import RuleSet

RULE = "redundant-flush"


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    getters = _getters(model)
    for path in sorted(model.facts):
        sites = model.fact_sites[path]
        buffered = {s.bound_to for s in sites if s.role == "open" and s.line_buffered and s.bound_to}
        for site in sites:
            if site.role != "flush":
                continue
            handle = site.receiver if site.receiver in buffered else _through_getter(model, getters, path, site)
            if handle is None:
                continue
            run = run_of(model, path, site.function, site.gates, site, rs)
            switch, freq = run.switch, run.frequency
            out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, False, site.code,
                    per_step_cost(rs, "dump_flush", freq) - per_step_cost(rs, "dump_block", freq),
                    detail=FlushDetail(handle=handle), cols=(site.col, site.end_col),
                    run=run)


def _getters(model: TreeModel) -> dict[FuncKey, str]:
    """Functions that return a line-buffered handle they keep (in a module global or an
    attribute: the lazily opened handle of `_get()`), with the handle's name."""
    found: dict[FuncKey, str] = {}
    for path in model.facts:
        for s in model.fact_sites[path]:
            if s.role == "open" and s.line_buffered and s.bound_to and s.returned and s.function:
                function = model.functions.get((path, s.function))
                if s.bound_to.startswith(("self.", "cls.")) or function is not None and s.bound_to in function.global_names:
                    found[(path, s.function)] = s.bound_to
    return found


def _through_getter(model: TreeModel, getters: dict[FuncKey, str], path: str, site: CallSite) -> str | None:
    """The handle `_get().flush()` flushes, when `_get` is such a getter."""
    if not getters or not site.receiver or not site.receiver.endswith("()"):
        return None
    for target in model.resolver.resolve(path, site.function, site.receiver[:-2]):
        if target in getters:
            return getters[target]
    return None


def message(f: Finding, _frequencies: Frequencies) -> str:
    handle = f.detail.handle if isinstance(f.detail, FlushDetail) else ""
    return f"`{handle}` is line-buffered, so this flush() is redundant; drop one of the two."
