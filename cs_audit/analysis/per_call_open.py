"""``per-call-open``: a file opened for writing, written and closed per event instead of
through a handle kept open."""

from __future__ import annotations

from cs_audit.analysis.sites import Findings, gate_words, per_step_cost, when_words
from cs_audit.frequency import Frequencies
from cs_audit.joins.callgraph import TreeModel, is_once_function
from cs_audit.joins.runs import run_of
from cs_audit.model import CallSite, Finding, OpenDetail
from cs_audit.ruleset import RuleSet

RULE = "per-call-open"


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    for path in sorted(model.facts):
        for site in model.fact_sites[path]:
            if site.role != "open" or not _opened_per_call(model, rs, path, site):
                continue
            run = run_of(model, path, site.function, site.gates, site, rs)
            switch, freq = run.switch, run.frequency
            out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, False, site.code,
                    per_step_cost(rs, "open_per_event", freq), detail=OpenDetail(mode=site.mode or ""), cols=(site.col, site.end_col),
                    run=run)


def _opened_per_call(model: TreeModel, rs: RuleSet, path: str, site: CallSite) -> bool:
    if site.function is None or not site.mode or site.mode[0] not in "wax":
        return False
    if site.bound_to and (site.bound_to.startswith("self.") or site.bound_to.startswith("cls.")):
        return False  # a cached handle
    function = model.functions.get((path, site.function))
    if function is not None and site.bound_to in function.global_names:
        return False  # a handle kept in a module global (`global _F; if _F is None: _F = open(...)`)
    return not is_once_function(function, rs)


def message(f: Finding, frequencies: Frequencies) -> str:
    mode = f.detail.mode if isinstance(f.detail, OpenDetail) else ""
    return f"a file is opened (mode `{mode}`), written and closed per call, {when_words(f, frequencies)} {gate_words(f.switch)}; keep one handle open."
