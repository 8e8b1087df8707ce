"""``duplicate-helper``: a helper body (one that reads the env, emits or syncs: the audit's
subject) that stands in two or more places, identical up to local renames."""

from __future__ import annotations

from collections import Counter, defaultdict

from cs_audit.analysis.sites import Findings
from cs_audit.frequency import Frequencies, FrequencyName
from cs_audit.joins.callgraph import FuncKey, TreeModel
from cs_audit.joins.runs import frequency, run_of
from cs_audit.model import DuplicateDetail, Finding, FunctionDef
from cs_audit.ruleset import RuleSet

RULE = "duplicate-helper"


def duplicate_groups(model: TreeModel) -> list[tuple[str, list[tuple[str, FunctionDef]]]]:
    """Copies of helper bodies, by the most common name among them; worked out once per
    model (the rule and the report's duplicate groups both read it)."""
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


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    for name, members in duplicate_groups(model):
        for path, f in members:
            # the copy's switch: what its function is entered through, or its module's platform
            switch = run_of(model, path, f.qualname, (), None, rs).switch
            freq: FrequencyName = frequency(model, (path, f.qualname), None, rs, default_only=False)
            out.add(RULE, path, f.line, f.end_line, f.qualname, switch, freq, False, f"def {f.name}",
                    detail=DuplicateDetail(group=name, copies=str(len(members))),
                    cols=(f.col, -1))  # the span is the whole body: where it ends on its last line is not known


def message(f: Finding, _frequencies: Frequencies) -> str:
    detail = f.detail if isinstance(f.detail, DuplicateDetail) else DuplicateDetail("?", "2")
    return f"`{detail.group}` has {detail.copies} identical copies (up to local names); keep one in a shared module."
