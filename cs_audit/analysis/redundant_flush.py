"""``redundant-flush``: an explicit ``flush()`` on a handle opened line-buffered."""

from __future__ import annotations

from cs_audit.analysis.sites import Findings, gated_run, per_step_cost
from cs_audit.joins.callgraph import TreeModel
from cs_audit.model import Finding, FlushDetail
from cs_audit.ruleset import RuleSet

RULE = "redundant-flush"


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    for path in sorted(model.facts):
        sites = model.fact_sites[path]
        buffered = {s.bound_to for s in sites if s.role == "open" and s.line_buffered and s.bound_to}
        for site in sites:
            if site.role != "flush" or site.receiver not in buffered:
                continue
            switch, freq = gated_run(model, path, site.function, site.gates, site, rs)
            out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, False, site.code,
                    per_step_cost(rs, "dump_flush", freq) - per_step_cost(rs, "dump_block", freq),
                    detail=FlushDetail(handle=site.receiver or ""), cols=(site.col, site.end_col),
                    path=(site.path_kind, site.path_reason))


def message(f: Finding) -> str:
    handle = f.detail.handle if isinstance(f.detail, FlushDetail) else ""
    return f"`{handle}` is line-buffered, so this flush() is redundant; drop one of the two."
