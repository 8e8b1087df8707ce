"""``hardcoded-output-path``: an output location written as a literal path instead of under
the configured output root."""

from __future__ import annotations

from cs_audit.analysis.categories import written_location
from cs_audit.analysis.sites import Findings
from cs_audit.frequency import Frequencies
from cs_audit.joins.callgraph import TreeModel, function_at
from cs_audit.joins.runs import frequency
from cs_audit.model import Finding, OutputPathDetail
from cs_audit.ruleset import RuleSet

RULE = "hardcoded-output-path"


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    read_in: dict[str, list[str]] = {}
    for path in sorted(model.facts):
        for r in model.facts[path].env_reads:
            if r.var:
                read_in.setdefault(r.var, []).append(path)
    for path in sorted(model.facts):
        ff = model.facts[path]
        for line, literal, col, end_col in ff.literal_paths:
            # an env var's default: an output path only where its value is written to
            # (`ROCM_PATH`'s `/opt/rocm`, a test's default model id are read from)
            var = next((r.var for r in ff.env_reads if r.line == line and r.default == literal and r.var), None)
            if var is not None and not written_location(model, rs, var, read_in[var]):
                continue
            f = function_at(ff, line)
            freq = frequency(model, (path, f.qualname) if f else None, None, rs, default_only=False)
            out.add(RULE, path, line, line, f.qualname if f else None, None, freq, False, literal,
                    detail=OutputPathDetail(output_path=literal), cols=(col, end_col))


def message(f: Finding, _frequencies: Frequencies) -> str:
    literal = f.detail.output_path if isinstance(f.detail, OutputPathDetail) else ""
    return f"output goes to the literal path `{literal}`; build it under the configured output root."
