"""``env-read-hot``: an env var read evaluated per call inside a hot function, where it is
read, or at the hot call site of a helper that reads it (``via`` names the helper)."""

from __future__ import annotations

from cs_audit.analysis.sites import Findings, gated_run, outside_event_loop, per_step_cost, when_words
from cs_audit.joins.callgraph import TreeModel, helper_switches
from cs_audit.model import EnvReadDetail, Finding
from cs_audit.ruleset import RuleSet

RULE = "env-read-hot"


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    for path in sorted(model.facts):
        for read in model.facts[path].env_reads:
            if not read.per_call or read.function is None:
                continue
            key = (path, read.function)
            if _at_callers(model, key):
                continue  # an accessor's reads are reported at its call sites
            if key not in model.freq_any or outside_event_loop(model, key, read):
                continue
            switch, freq = gated_run(model, path, read.function, read.gates, read, rs)
            event = "env_registry_get" if read.via.startswith("registry") else "env_read"
            out.add(RULE, path, read.line, read.end_line, read.function, switch, freq, False, read.code,
                    per_step_cost(rs, event, freq), detail=EnvReadDetail(var=read.var or "<dynamic>", via=read.via),
                    cols=(read.col, read.end_col), path=(read.path_kind, read.path_reason))
        for site in model.edge_sites.get(path, ()):  # a site that lands nowhere reads no helper
            if site.role is not None or site.function is None:
                continue
            key = (path, site.function)
            if key not in model.freq_any or _at_callers(model, key) or outside_event_loop(model, key, site):
                continue
            for target in model.resolved_calls.get((path, site.line, site.end_line, site.callee), ()):
                if target not in model.env_helpers:
                    continue
                switch, freq = gated_run(model, path, site.function, site.gates, site, rs)
                reads = helper_switches(model, target, site.literal_args)
                out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, False,
                        site.code or site.callee, per_step_cost(rs, "env_read_int", freq) * len(reads),
                        detail=EnvReadDetail(var=",".join(reads), via=f"helper:{target[1]}"),
                        cols=(site.col, site.end_col))
                break


def _at_callers(model: TreeModel, key: tuple[str, str]) -> bool:
    """Whether the reads of function ``key`` are reported at its call sites instead (an accessor
    that is called; a root has no call sites to carry them)."""
    return key in model.accessors and key not in model.roots and bool(model.callers.get(key))


def message(f: Finding) -> str:
    detail = f.detail if isinstance(f.detail, EnvReadDetail) else EnvReadDetail("?", "")
    how = f"through `{detail.via.split(':', 1)[1]}()`" if detail.via.startswith("helper:") else f"via `{detail.via}`"
    return (f"`{detail.var}` is read from the environment {how} {when_words(f)}; "
            "resolve it once at import and test the constant.")
