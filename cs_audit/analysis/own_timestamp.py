"""``own-timestamp``: a process that mints its own run timestamp for an output path instead
of reading the run directory its launcher exports (a launcher that exports it is the design)."""

from __future__ import annotations

from cs_audit.analysis.sites import Findings
from cs_audit.frequency import Frequencies
from cs_audit.joins.callgraph import TreeModel
from cs_audit.joins.runs import run_of
from cs_audit.model import Finding
from cs_audit.ruleset import RuleSet

RULE = "own-timestamp"


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    for path in sorted(model.facts):
        exporters = set(model.facts[path].env_exporters)
        for site in model.fact_sites[path]:
            if site.role != "timestamp" or not site.builds_path or site.function in exporters:
                continue
            run = run_of(model, path, site.function, site.gates, site, rs)
            switch, freq = run.switch, run.frequency
            out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, False, site.code,
                    cols=(site.col, site.end_col))


def message(f: Finding, _frequencies: Frequencies) -> str:
    return "this process mints its own run timestamp for an output path; read the run directory the launcher exports."
