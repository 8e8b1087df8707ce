"""What ``confirm`` says of a tree and a run: each finding's observed status, the agreement
of the static graph with the run, and the worst disagreements with their chains."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cs_audit.confirm.join import RARE_MAX, Agreement, Observed, Run, agreement, claimed_per_step, observe_findings
from cs_audit.confirm.profiles import Profile, ProfileError, read_profile
from cs_audit.frequency import is_hot
from cs_audit.model import AuditResult, Finding, FuncKey

if TYPE_CHECKING:
    from cs_audit.joins.callgraph import TreeModel


@dataclass(frozen=True, slots=True)
class Disagreement:
    finding: Finding
    observed: Observed
    #: the chain that makes it hot, as ``why`` prints it
    chain: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Miss:
    """A function that ran per step and holds findings the graph does not call per step."""

    key: FuncKey
    calls_per_step: float
    #: the graph's frequency of it by default ("" when no hot root reaches it)
    frequency: str
    findings: tuple[Finding, ...]


@dataclass
class Confirmation:
    profile: Profile
    run: Run
    tree: str
    observed: dict[str, Observed]
    findings: tuple[Finding, ...]
    agreement: Agreement | None
    worst: list[Disagreement] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)


def steps_of(profile: Profile, roots: list[str]) -> int:
    """The calls of the step root in a call-count profile (a frame named as a root, or as its
    last part when the profile has function names only)."""
    total = 0
    for frame, (_, calls) in profile.counts.items():
        for root in roots:
            last = root.rpartition(".")[2]
            if frame.name == root or frame.name.endswith("." + root) or (not frame.qualified and frame.name == last):
                total += calls
                break
    return total


def profile_with_steps(path: Path, format: str | None, roots: list[str], steps: int) -> Profile:
    """The profile in ``path``, its steps ``steps`` when given, else the calls of ``roots`` in
    a call-count profile; ``ProfileError`` when unreadable or when no frame is a root."""
    profile = read_profile(path, format)
    if steps:
        profile.steps = steps
    elif roots and not profile.sampled:
        profile.steps, profile.step_roots = steps_of(profile, roots), tuple(roots)
        if not profile.steps:
            raise ProfileError(f"{path}: no frame of the profile is {', '.join(roots)} (the step root)")
    return profile


def confirm(profile: Profile, run: Run, result: AuditResult, model: TreeModel, limit: int) -> Confirmation:
    """``model``: the tree's joined call graph."""
    from cs_audit.joins.callgraph import hot_chain_edges
    from cs_audit.joins.chains import chain_lines
    from cs_audit.joins.runs import graph_frequency, per_step_by_default

    findings = result.findings
    observed = observe_findings(run, findings)
    out = Confirmation(profile, run, result.root, observed, findings, agreement(run, per_step_by_default(model),
                                                                                     lambda key: graph_frequency(model, key)))
    if not run.has_rates:
        return out
    worst = [f for f in findings if claimed_per_step(f) and observed[f.fingerprint].status != "not-covered"
             and (observed[f.fingerprint].calls_per_step or 0) < RARE_MAX]
    worst.sort(key=lambda f: (-f.cost_us, f.path, f.line, f.rule))
    seen: set[FuncKey] = set()
    for f in worst:
        key = (f.path, f.function or "")
        if key in seen:
            continue
        seen.add(key)
        edges = hot_chain_edges(model, key) if key in model.functions else []
        chain = tuple(chain_lines(model, root, edges)) if edges and (root := edges[0].caller) is not None else ()
        out.worst.append(Disagreement(f, observed[f.fingerprint], chain))
        if len(out.worst) >= limit:
            break
    by_function: dict[FuncKey, list[Finding]] = {}
    for f in findings:
        if f.function is not None and f.switch is None:
            by_function.setdefault((f.path, f.function), []).append(f)
    for key, fs in by_function.items():
        rate = run.rate(key) or 0.0
        frequency = model.freq_default.get(key, "")
        if observed[fs[0].fingerprint].status == "per-step" and not is_hot(frequency):
            out.misses.append(Miss(key, rate, frequency, tuple(fs)))
    out.misses.sort(key=lambda m: (-m.calls_per_step, m.key))
    del out.misses[limit:]
    return out
