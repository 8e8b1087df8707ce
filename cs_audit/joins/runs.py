"""How often a site runs: the one place that decides it.

Every rule asks ``run_of`` (or ``how_often`` when it has settled the switch itself): which
switch gates the site, how often it runs (its function's frequency, raised by the loop it
sits in), and whether it runs every time its function does (``path_kind``). A site is
``rare`` or ``error`` when a guard says so: in its own function (a cache miss, a once-flag,
a branch ending in ``raise``: ``extract.paths``), or up its chain, when every way down from
a hot root passes such a branch or a memoised function (``lru_cache``: once per key), whose
callees inherit it: ``joins.reach`` works the chains out once per model."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cs_audit.joins.callgraph import FuncKey, TreeModel, is_once_function, site_switch
from cs_audit.joins.reach import block_at
from cs_audit.joins.roots import in_event_loop
from cs_audit.model import CallSite, EnvRead, Frequency, GateRef, Guard, PathKind, SwitchRef, by_text
from cs_audit.ruleset import RuleSet


@dataclass(frozen=True, slots=True)
class Run:
    """The answer of ``run_of``: what gates a site, how often it runs, and on what path."""

    switch: SwitchRef | None
    frequency: Frequency
    path_kind: PathKind = "normal"
    #: one sentence naming the guard, with its `path:line` (empty on a normal path)
    reason: str = ""
    guard: Guard | None = None


def first(values: Iterable[SwitchRef | None] | None) -> SwitchRef | None:
    """The first switch by its spelling among ``values`` (None when there is none)."""
    named = sorted((v for v in values or () if v is not None), key=by_text)
    return named[0] if named else None


def outside_event_loop(model: TreeModel, key: FuncKey | None, fact: EnvRead | CallSite | None) -> bool:
    """Whether ``fact`` is in a function that is a root for its event loop but outside the
    loop (set-up before it, clean-up after it): that part of the function runs once."""
    loops = model.event_loops.get(key) if key is not None else None
    return loops is not None and fact is not None and not in_event_loop(loops, fact.line)


def frequency(model: TreeModel, key: FuncKey | None, fact: EnvRead | CallSite | None, rs: RuleSet,
              default_only: bool) -> Frequency:
    """How often a fact runs: its function's frequency (through default-on paths only, or
    any), raised by the loop it sits in."""
    if key is None or outside_event_loop(model, key, fact):
        return "once"
    table = model.freq_default if default_only else model.freq_any
    freq = table.get(key)
    if freq is None:
        return "once" if is_once_function(model.functions.get(key), rs) else "unknown"
    if fact is not None and fact.loop_depth > 0:
        freq = rs.in_loop(freq, fact.loop_iter)
    return freq


def _guard_words(why: str, guard: Guard) -> str:
    up = f", {guard.depth} call{'s' if guard.depth != 1 else ''} up" if guard.depth else ""
    return f"{why} ({guard.path}:{guard.line}{up})"


def how_often(model: TreeModel, path: str, function: str | None, fact: EnvRead | CallSite | None, rs: RuleSet,
              switch: SwitchRef | None) -> Run:
    """The ``Run`` of a site whose switch is known: default-on paths when it has none."""
    key = (path, function) if function else None
    freq = frequency(model, key, fact, rs, default_only=switch is None)
    if fact is not None and fact.path_kind != "normal":
        block = block_at(model.functions.get(key), fact.line) if key is not None else None
        guard = Guard(path, block[4] if block is not None and block[3] == fact.path_reason else fact.line, 0)
        return Run(switch, freq, fact.path_kind, _guard_words(fact.path_reason, guard), guard)
    if key is not None:
        return Run(switch, freq, *_demoted_path(model, key, default_only=switch is None))
    return Run(switch, freq)


def path_at(model: TreeModel, path: str, function: str, line: int) -> tuple[PathKind, str, Guard | None]:
    """The path of a line of ``function`` on default-on paths, for a line that holds no fact
    (``why``): the error or rare block around it, else its function's guard up the chain."""
    block = block_at(model.functions.get((path, function)), line)
    if block is not None:
        guard = Guard(path, block[4], 0)
        return block[2], _guard_words(block[3], guard), guard  # type: ignore[return-value]
    return _demoted_path(model, (path, function), default_only=True)


def _demoted_path(model: TreeModel, key: FuncKey, default_only: bool) -> tuple[PathKind, str, Guard | None]:
    demoted = (model.demoted_default if default_only else model.demoted_any).get(key)
    if demoted is None:
        return "normal", "", None
    return demoted.kind, _guard_words(demoted.why, demoted.guard), demoted.guard


def run_of(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...],
           fact: EnvRead | CallSite | None, rs: RuleSet) -> Run:
    """Which switch gates a site and how often it runs: its own gates' switch, else (for a
    function no default-on path reaches) a switch its function is entered through; the
    frequency and path of the paths that switch leaves open."""
    key = (path, function) if function else None
    switch = site_switch(model, path, function, gates, rs)
    if switch is None and key is not None and key not in model.freq_default:
        switch = first(model.entry_switches.get(key))
    return how_often(model, path, function, fact, rs, switch)
