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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cs_audit.frequency import ONCE, PERIODIC_AT_LEAST, UNKNOWN, FrequencyName, is_hot
from cs_audit.joins.callgraph import FuncKey, TreeModel, is_once_function
from cs_audit.joins.defaults import option_number
from cs_audit.joins.gates import site_switch
from cs_audit.joins.reach import block_at, memo_wrapper, memoised_by
from cs_audit.joins.roots import in_event_loop
from cs_audit.model import CallSite, EnvRead, FunctionDef, GateRef, Guard, PathKind, SwitchRef, by_text
from cs_audit.ruleset import RuleSet

if TYPE_CHECKING:
    from cs_audit.model import BuiltMessage, PlainCall

    #: what a run is asked of: a read, a call or a built message, at its line and loop depth
    Fact = EnvRead | CallSite | PlainCall | BuiltMessage


@dataclass(frozen=True, slots=True)
class Run:
    """The answer of ``run_of``: what gates a site, how often it runs, and on what path."""

    switch: SwitchRef | None
    frequency: FrequencyName
    path_kind: PathKind = "normal"
    #: one sentence naming the guard, with its `path:line` (empty on a normal path)
    reason: str = ""
    guard: Guard | None = None


def first(values: Iterable[SwitchRef | None] | None) -> SwitchRef | None:
    """The first switch by its spelling among ``values`` (None when there is none)."""
    named = sorted((v for v in values or () if v is not None), key=by_text)
    return named[0] if named else None


def outside_event_loop(model: TreeModel, key: FuncKey | None, fact: Fact | None) -> bool:
    """Whether ``fact`` is in a function that is a root for its event loop but outside the
    loop (set-up before it, clean-up after it): that part of the function runs once."""
    loops = (model.event_loops.get(key) or model.root_loops.get(key)) if key is not None else None
    return loops is not None and fact is not None and not in_event_loop(loops, fact.line)


def frequency(model: TreeModel, key: FuncKey | None, fact: Fact | None, rs: RuleSet,
              default_only: bool) -> FrequencyName:
    """How often a fact runs: its function's frequency (through default-on paths only, or
    any), raised by the loop it sits in."""
    if key is None or outside_event_loop(model, key, fact):
        return ONCE
    table = model.freq_default if default_only else model.freq_any
    freq = table.get(key)
    if freq is None:
        return ONCE if is_once_function(model.functions.get(key), rs) else UNKNOWN
    if fact is not None and fact.gates:
        opened = _opened(model, key, fact.gates, rs, default_only, freq)
        if opened is None:
            return UNKNOWN  # every call a hot root makes of it hands a literal that keeps it off
        freq = opened
    if fact is not None and fact.loop_depth > 0:
        freq = rs.in_loop(freq, fact.loop_iter)
    return freq


def _opened(model: TreeModel, key: FuncKey, gates: tuple[GateRef, ...], rs: RuleSet, default_only: bool,
            freq: FrequencyName) -> FrequencyName | None:
    """How often code of ``key`` (which runs at ``freq``) under ``gates`` runs: in the contexts
    hot roots enter ``key`` in that do not keep it off (``joins.arguments``); None when none does."""
    tests = model.argument_tests
    contexts = (model.argument_freq_default if default_only else model.argument_freq_any).get(key)
    if tests is None or not contexts:
        return freq
    opened = [freq for context, freq in contexts.items() if not tests.closes(key, context, gates)]
    return rs.frequencies.most_often(opened) if opened else None


def argument_switch(model: TreeModel, key: FuncKey, gates: tuple[GateRef, ...]) -> SwitchRef | None:
    """The switch of code of ``key`` under ``gates`` that every default chain enters ``key``
    with a literal keeping off (`release(req, checkpoint=False)` before `if checkpoint:`):
    the parameter no such call passes, spelled `release(checkpoint)`; None otherwise."""
    tests = model.argument_tests
    contexts = model.argument_freq_default.get(key)
    if tests is None or not contexts:
        return None
    params = [param for context in contexts if (param := tests.closing(key, context, gates)) is not None]
    if len(params) < len(contexts):
        return None
    function = model.functions.get(key)
    return SwitchRef("option", f"{function.name if function is not None else key[1]}({min(params)})")


def reached(model: TreeModel, key: FuncKey | None) -> bool:
    """Whether some hot root reaches function ``key``, by default or only with a switch set."""
    return key is not None and key in model.freq_any


def runs_by_default(model: TreeModel, key: FuncKey | None) -> bool:
    """Whether a hot root reaches function ``key`` through calls no switch gates."""
    return key is not None and key in model.freq_default


def default_functions(model: TreeModel) -> list[tuple[FuncKey, FrequencyName]]:
    """Every function a hot root reaches through calls no switch gates, with how often it runs."""
    return list(model.freq_default.items())


def per_step_by_default(model: TreeModel) -> dict[FuncKey, FrequencyName]:
    """The functions that run every step (or request, layer, round) by default, with how often:
    hot through calls no switch gates, and not only past a guard up the chain (a memoised
    function, a rare or error branch: ``demoted_default``). A root whose steps are the times
    round its loop is called once, not every step."""
    return {key: freq for key, freq in model.freq_default.items()
            if is_hot(freq) and key not in model.demoted_default and key not in model.event_loops and key not in model.root_loops}


def graph_frequency(model: TreeModel, key: FuncKey) -> str:
    """How often the graph says ``key`` runs by default, in words (`step`, `step, rare: ...`),
    "" when no default path reaches it."""
    freq = model.freq_default.get(key)
    if freq is None:
        return ""
    kind, why, _ = _demoted_path(model, key, default_only=True)
    return freq if kind == "normal" else f"{freq}, {kind}: {why}"


def entered_through(model: TreeModel, key: FuncKey | None) -> list[SwitchRef]:
    """The switches a function no default path reaches is entered through, by their spelling
    (none when a default path reaches it, or no root does)."""
    if key is None or runs_by_default(model, key) or not reached(model, key):
        return []
    return sorted(model.entry_switches.get(key, ()), key=by_text)


def _guard_words(why: str, guard: Guard) -> str:
    up = f", {guard.depth} call{'s' if guard.depth != 1 else ''} up" if guard.depth else ""
    return f"{why} ({guard.path}:{guard.line}{up})"


def how_often(model: TreeModel, path: str, function: str | None, fact: Fact | None, rs: RuleSet,
              switch: SwitchRef | None) -> Run:
    """The ``Run`` of a site whose switch is known: default-on paths when it has none."""
    key = (path, function) if function else None
    freq = frequency(model, key, fact, rs, default_only=switch is None)
    if fact is not None and fact.path_kind != "normal":
        block = block_at(model.functions.get(key), fact.line) if key is not None else None
        guard = Guard(path, block[4] if block is not None and block[3] == fact.path_reason else fact.line, 0)
        return Run(switch, freq, fact.path_kind, _guard_words(fact.path_reason, guard), guard)
    block = block_at(model.functions.get(key), fact.line) if key is not None and fact is not None else None
    if block is not None:
        # a call site that holds no fact carries no path of its own: the block around it decides
        guard = Guard(path, block[4], 0)
        return Run(switch, freq, block[2], _guard_words(block[3], guard), guard)  # type: ignore[arg-type]
    periodic = _periodic_block(model, key, fact.line, rs) if key is not None and fact is not None else None
    if periodic is not None:
        guard = Guard(path, periodic[4], 0)
        return Run(switch, freq, "rare", _guard_words(periodic[3], guard), guard)
    if key is not None:
        return Run(switch, freq, *_demoted_path(model, key, default_only=switch is None))
    return Run(switch, freq)


def _periodic_block(model: TreeModel, key: FuncKey, line: int, rs: RuleSet) -> tuple[int, int, str, str, int] | None:
    """The block of ``key`` holding ``line`` that runs on every n-th call by a named modulus
    holding at least ``PERIODIC_AT_LEAST`` by default (`decode_log_interval`, declared 40)."""
    f = model.functions.get(key)
    for block in f.periodic_blocks if f is not None else ():
        if block[0] <= line <= block[1]:
            number = option_number(model.options, rs.defaults, block[2])
            if number is not None and number >= PERIODIC_AT_LEAST:
                return block
    return None


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


def through_memo(model: TreeModel, path: str, site: CallSite | PlainCall, run: Run, rs: RuleSet) -> Run:
    """``run`` of a call of an env-reading helper, for the reads the call makes: on a rare path
    when every way from the helper to a read passes a memoised function (`@lru_cache`, or a
    decorator whose wrapper calls it only on a miss: `k3.enabled()` returning what a
    `@cache_once` getter built), whose body runs once per distinct arguments; ``run`` itself
    otherwise, or when it is already off a normal path."""
    if run.path_kind != "normal":
        return run
    found = _memo_call(model, path, site, rs, 0)
    if found is None:
        return run
    why, guard = found
    return replace(run, path_kind="rare", reason=_guard_words(why, guard), guard=guard)


def _memo_call(model: TreeModel, path: str, site: CallSite | PlainCall, rs: RuleSet, depth: int) -> tuple[str, Guard] | None:
    """(why, guard) when a call of an env-reading helper reaches its reads only through a
    memoised function: its own decorator, a memoising wrapper the call also lands on, or each
    helper it calls on the way."""
    targets = model.resolved_calls.get((path, site.line, site.end_line, site.callee), ())
    for target in targets:
        if ".<locals>." in target[1]:  # the call goes through a decorator's wrapper
            found = memo_wrapper(model, target)
            if found is not None:
                return found[1], Guard(target[0], found[0], depth + 1)
    helpers = [target for target in targets if target in model.env_helpers]
    found_all = [_memo_on_the_way(model, target, rs, depth) for target in helpers]
    return found_all[0] if found_all and all(found_all) else None


#: how many helpers down ``through_memo`` looks for the memoised one
_MAX_HELPER_DEPTH = 4


def _memo_on_the_way(model: TreeModel, key: FuncKey, rs: RuleSet, depth: int) -> tuple[str, Guard] | None:
    f = model.functions.get(key)
    decorator = memoised_by(f, rs)
    if decorator is not None and f is not None:
        return f"memoised by `@{decorator.rsplit('.', 1)[-1]}`: runs once per distinct arguments", Guard(key[0], f.line, depth + 1)
    for wrapper in _wrappers_of(model, key, f):
        found = memo_wrapper(model, wrapper)
        if found is not None:
            return found[1], Guard(wrapper[0], found[0], depth + 1)
    if depth >= _MAX_HELPER_DEPTH or key[0] not in model.facts:
        return None
    facts = model.facts[key[0]]
    if any(r.function == key[1] and r.per_call for r in facts.env_reads):
        return None  # it reads the environment itself, at each call
    inner = [site for site in facts.calls if site.function == key[1] and site.returned]
    found_all = [found for site in inner
                 if any(t in model.env_helpers for t in model.resolved_calls.get((key[0], site.line, site.end_line, site.callee), ()))
                 for found in (_memo_call(model, key[0], site, rs, depth + 1),)]
    return found_all[0] if found_all and all(found_all) else None


def _wrappers_of(model: TreeModel, key: FuncKey, f: FunctionDef | None) -> list[FuncKey]:
    """The functions nested in the tree's decorators of ``f`` (`def cache_once(fn): def
    wrapper(*a): ...`), when a call lands on ``f`` itself (a decorator typed `(F) -> F`)."""
    if f is None or not f.decorators:
        return []
    out: list[FuncKey] = []
    for decorator in f.decorators:
        for path, qualname in model.resolver.resolve(key[0], None, decorator):
            prefix = f"{qualname}.<locals>."
            out.extend((path, q) for p, q in _functions_of(model, path) if q.startswith(prefix) and q.count(".<locals>.") == 1)
    return out


def _functions_of(model: TreeModel, path: str) -> list[FuncKey]:
    return [(path, f.qualname) for f in model.facts[path].functions] if path in model.facts else []


def run_of(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...],
           fact: Fact | None, rs: RuleSet) -> Run:
    """Which switch gates a site and how often it runs: its own gates' switch, else (for a
    function no default-on path reaches) a switch its function is entered through; the
    frequency and path of the paths that switch leaves open."""
    key = (path, function) if function else None
    switch = site_switch(model, path, function, gates, rs)
    if switch is None and key is not None and key not in model.freq_default:
        switch = first(model.entry_switches.get(key))
    elif switch is None and key is not None and gates:
        switch = argument_switch(model, key, gates)
    return how_often(model, path, function, fact, rs, switch)


def call_run(model: TreeModel, path: str, site: CallSite | PlainCall, targets: Iterable[FuncKey], rs: RuleSet) -> Run:
    """``run_of`` of a call site, for what it does by calling ``targets``: when its own gates
    leave it open but every edge from it into them is gated (each lands in a class built only
    under an option: `self.controller.write(n)`, the controller built only with HiCache on),
    the call has nothing to call by default and runs only with that edge's switch."""
    run = run_of(model, path, site.function, site.gates, site, rs)
    if run.switch is not None:
        return run
    switches = [e.switch for target in targets for e in model.callers.get(target, ())
                if e.path == path and e.site.line == site.line and e.site.callee == site.callee]
    if not switches or None in switches:
        return run
    return how_often(model, path, site.function, site, rs, first(switches))
