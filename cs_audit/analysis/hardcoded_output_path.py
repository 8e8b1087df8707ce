"""``hardcoded-output-path``: an output location written as a literal path instead of under
the configured output root."""

from __future__ import annotations

from cs_audit.analysis.sites import Findings, frequency
from cs_audit.joins.callgraph import TreeModel, function_at
from cs_audit.model import Finding, OutputPathDetail
from cs_audit.ruleset import RuleSet

RULE = "hardcoded-output-path"


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    for path in sorted(model.facts):
        ff = model.facts[path]
        for line, literal, col, end_col in ff.literal_paths:
            f = function_at(ff, line)
            freq = frequency(model, (path, f.qualname) if f else None, None, rs, default_only=False)
            out.add(RULE, path, line, line, f.qualname if f else None, None, freq, False, literal,
                    detail=OutputPathDetail(output_path=literal), cols=(col, end_col))


def message(f: Finding) -> str:
    literal = f.detail.output_path if isinstance(f.detail, OutputPathDetail) else ""
    return f"output goes to the literal path `{literal}`; build it under the configured output root."
