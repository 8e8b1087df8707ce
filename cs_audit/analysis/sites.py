"""What every rule shares once ``joins.runs`` has said how often a site runs: what an
event costs per step, and the words for both.  The rules' findings are collected by
:class:`Findings`, which numbers repeated sites and words each finding through its rule."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from cs_audit.frequency import Frequencies, FrequencyName
from cs_audit.joins.callgraph import FuncKey, TreeModel
from cs_audit.joins.runs import Run
from cs_audit.model import Finding, FindingDetail, SwitchRef
from cs_audit.ruleset import RuleSet


def gate_words(switch: SwitchRef | None) -> str:
    if switch is None:
        return "with no debug env set"
    if switch.kind == "flag":
        return f"only when the flag `{switch.name}` is on"
    if switch.kind == "env":
        return f"only when `{switch.name}` is set"
    if switch.kind == "option":
        return f"only with the option `{switch.name}` (off in the audited deployment)"
    return "behind a log-level check"


def when_words(f: Finding, frequencies: Frequencies) -> str:
    return frequencies.words(f.frequency)


def per_step_cost(rs: RuleSet, event: str, freq: FrequencyName) -> float:
    """Estimated µs per engine step of ``event`` (rules/costs.yaml) at ``freq``."""
    return rs.costs_us.get(event, 0.0) * rs.frequencies.multiplier(freq)


#: the cost event (rules/costs.yaml) of one event of a site switched on, by its role
ENABLED_EVENTS = {"log": "log_emitted", "print": "log_emitted", "stdwrite": "log_emitted", "write": "dump_line_buffered",
                  "open": "open_per_event", "flush": "dump_flush"}


def enabled_cost(rs: RuleSet, role: str, freq: FrequencyName) -> float:
    """Estimated µs per step a gated site adds when its switch is on: a sync by the
    decode-step table, the others by the event of their role."""
    if role == "sync":
        return rs.sync_added_us.get(freq, 0.0)
    event = ENABLED_EVENTS.get(role)
    return per_step_cost(rs, event, freq) if event else 0.0


def fingerprint(rule: str, path: str, function: str | None, code: str, occurrence: int) -> str:
    normalized = " ".join(code.split())
    raw = f"{rule}\0{path}\0{function or ''}\0{normalized}\0{occurrence}"
    return hashlib.sha1(raw.encode()).hexdigest()[:16]


class Findings:
    """The findings of a model, as the rules add them; ``finish`` sorts them, numbers
    repeated (rule, path, function, code) and words each one with its rule's ``message``
    (which says a frequency in the words of ``frequencies``)."""

    def __init__(self, messages: dict[str, Callable[[Finding, Frequencies], str]], frequencies: Frequencies) -> None:
        self.messages = messages
        self.frequencies = frequencies
        self.rows: list[Finding] = []

    def add(self, rule: str, path_of: str, line: int, end_line: int, function: str | None, switch: SwitchRef | None,
            freq: FrequencyName, gpu_sync: bool, code: str, cost_us: float = 0.0,
            eager_kinds: tuple[str, ...] = (), detail: FindingDetail = None, cols: tuple[int, int] | None = None,
            run: Run | None = None) -> None:
        """``cols``: the site's 0-based start and end columns (on ``line`` and ``end_line``; -1: not known).
        ``run``: the site's ``joins.runs.run_of`` answer, for its path; an error or rare path
        is not costed per step."""
        col, end_col = (cols[0] + 1, max(cols[1] + 1, 0)) if cols is not None else (0, 0)
        normal = run is None or run.path_kind == "normal"
        self.rows.append(Finding(
            rule=rule, path=path_of, line=line, end_line=end_line, function=function, switch=switch,
            frequency=freq, gpu_sync=gpu_sync, message="", fingerprint="", code=code,
            cost_us=round(cost_us, 2) if normal else 0.0, eager_kinds=eager_kinds, detail=detail,
            col=col, end_col=end_col, path_kind=run.path_kind if run is not None else "normal",
            path_reason=run.reason if run is not None else "", guard=run.guard if run is not None else None,
            cost_if_every_time_us=0.0 if normal else round(cost_us, 2),
        ))

    def finish(self) -> list[Finding]:
        self.rows.sort(key=lambda f: (f.path, f.line, f.rule, f.end_line, f.code, f.col))
        seen: Counter[tuple[str, str, str | None, str]] = Counter()
        out: list[Finding] = []
        for row in self.rows:
            key = (row.rule, row.path, row.function, " ".join(row.code.split()))
            occurrence = seen[key]
            seen[key] += 1
            out.append(replace(row, message=self.messages[row.rule](row, self.frequencies),
                               fingerprint=fingerprint(row.rule, row.path, row.function, row.code, occurrence)))
        return out


#: how many functions deep a sync below an emitter's arguments is followed: `summarize(t)`
#: calling `stats(t)` calling `.item()` is two
HELPER_SYNC_DEPTH = 2


def syncing_helpers(model: TreeModel) -> dict[FuncKey, tuple[tuple[str, ...], str]]:
    """Functions that sync in their own body, or through an ungated call of one, at most
    ``HELPER_SYNC_DEPTH`` functions deep: function -> (the functions it calls on the way down,
    the syncing call's last name).  Worked out once per model."""
    if model.syncing_via is not None:
        return model.syncing_via
    found: dict[FuncKey, tuple[tuple[str, ...], str]] = {}
    for p, sites in model.fact_sites.items():
        for c in sites:
            if c.role == "sync" and c.function and (p, c.function) not in found:
                found[(p, c.function)] = ((), c.callee.rsplit(".", 1)[-1])
    frontier = list(found)
    for _ in range(HELPER_SYNC_DEPTH - 1):
        below: list[FuncKey] = []
        for key in frontier:
            chain, call = found[key]
            for edge in model.callers.get(key, ()):
                caller = edge.caller
                # a call behind a switch pays its sync only with the switch set
                if caller is None or caller in found or edge.switch is not None:
                    continue
                found[caller] = ((key[1].rsplit(".", 1)[-1], *chain), call)
                below.append(caller)
        frontier = below
    model.syncing_via = found
    return found


def syncing_functions(model: TreeModel) -> set[FuncKey]:
    """Functions with a device sync in their own body (worked out once per model)."""
    if model.syncing is None:
        model.syncing = {(p, c.function) for p, sites in model.fact_sites.items() for c in sites if c.role == "sync" and c.function}
    return model.syncing
