"""Which functions a hot root reaches, how often, and past which guard.

``propagate`` gives every function a hot root reaches its frequency through the calls that
run every time their caller does, and the functions reached only past a guard (a call on an
error or rare block of its caller: ``extract.paths``; a memoised callee: ``lru_cache``, or a
decorator whose wrapper calls it only on a miss) that guard, which their callees inherit one
call further down. Such a function keeps the frequency it would have; ``joins.runs`` says
that its sites are not on a normal path."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import Protocol

from cs_audit.frequency import STEP, FrequencyName
from cs_audit.joins.arguments import EMPTY, ArgumentTests, Context
from cs_audit.joins.defaults import feature_switch, module_switch
from cs_audit.joins.env_helpers import is_once_function
from cs_audit.joins.roots import in_event_loop
from cs_audit.model import (
    CallSite,
    EventLoop,
    FileFacts,
    FuncKey,
    FunctionDef,
    Guard,
    PathKind,
    PlainCall,
    SwitchRef,
)
from cs_audit.ruleset import HotRoot, RuleSet

#: how often each function runs in each context a call enters it in (``joins.arguments``)
States = dict[tuple[FuncKey, Context], FrequencyName]


@dataclass(slots=True)
class Edge:
    caller: FuncKey | None
    callee: FuncKey
    site: CallSite | PlainCall
    path: str
    switch: SwitchRef | None  # resolved gate of the call site (None = ungated)
    how: str = "name"  # how the callee was found (``HOWS``)


@dataclass(frozen=True, slots=True)
class Demotion:
    """Why a function reached from a hot root does not run every time its caller does."""

    kind: PathKind
    why: str
    guard: Guard


class Joined(Protocol):
    """What ``propagate`` reads of the joined model (``callgraph.TreeModel``) and fills in."""

    functions: dict[FuncKey, FunctionDef]
    facts: dict[str, FileFacts]
    edges: list[Edge]
    event_loops: dict[FuncKey, tuple[EventLoop, ...]]
    root_loops: dict[FuncKey, tuple[EventLoop, ...]]
    roots: dict[FuncKey, FrequencyName]
    root_rules: dict[FuncKey, HotRoot]
    freq_default: dict[FuncKey, FrequencyName]
    freq_any: dict[FuncKey, FrequencyName]
    hot_via_default: dict[FuncKey, Edge]
    hot_via_any: dict[FuncKey, Edge]
    demoted_default: dict[FuncKey, Demotion]
    demoted_any: dict[FuncKey, Demotion]
    replayed: set[FuncKey]
    entry_switches: dict[FuncKey, set[SwitchRef]]
    gated_classes: dict[str, SwitchRef]
    gated_roots: dict[FuncKey, SwitchRef]
    unserved: dict[str, SwitchRef]
    unserved_roots: dict[str, SwitchRef]
    argument_tests: ArgumentTests | None
    argument_freq_default: dict[FuncKey, dict[Context, FrequencyName]]
    argument_freq_any: dict[FuncKey, dict[Context, FrequencyName]]


def block_at(f: FunctionDef | None, line: int) -> tuple[int, int, str, str, int] | None:
    """The innermost error or rare block of ``f`` holding ``line`` (blocks nest)."""
    if f is None or not f.path_blocks:
        return None
    found = None
    for block in f.path_blocks:
        if block[0] <= line <= block[1] and (found is None or block[1] - block[0] <= found[1] - found[0]):
            found = block
    return found


def memoised_by(f: FunctionDef | None, rs: RuleSet) -> str | None:
    """The memoising decorator of ``f`` (`functools.lru_cache`): its body runs once per key."""
    if f is None:
        return None
    return next((d for d in f.decorators if d in rs.once_decorators), None)


def memo_wrapper(model: Joined, wrapper: FuncKey) -> tuple[int, str] | None:
    """(guard line, why) when ``wrapper``, a function nested in a decorator, calls what it
    wraps (a parameter of the decorator) only on a rare block: a memoising wrapper
    (`if args not in cache: cache[args] = func(*args)`). None when it calls it every time."""
    path, qualname = wrapper
    decorator_name, sep, _ = qualname.rpartition(".<locals>.")
    f = model.functions.get(wrapper)
    decorator = model.functions.get((path, decorator_name)) if sep else None
    if f is None or decorator is None or not f.path_blocks or not decorator.params:
        return None
    wrapped = set(decorator.params)
    calls = [c for c in model.facts[path].calls if c.function == qualname and c.callee in wrapped]
    blocks = [block_at(f, c.line) for c in calls]
    if not calls or any(b is None or b[2] != "rare" for b in blocks):
        return None
    first_block = blocks[0]
    assert first_block is not None
    return first_block[4], f"memoised by `@{decorator.name}`: its wrapper calls it only {first_block[3]}"


def _through_wrappers(model: Joined, edges: list[Edge]) -> dict[int, Demotion]:
    """The demotions of the edges into a decorated function that the same call reaches
    through a memoising wrapper of its decorator (``memo_wrapper``)."""
    by_site: dict[tuple, list[Edge]] = defaultdict(list)
    for edge in edges:
        by_site[(edge.caller, edge.path, edge.site.line, edge.site.callee)].append(edge)
    out: dict[int, Demotion] = {}
    memo: dict[FuncKey, tuple[int, str] | None] = {}
    for group in by_site.values():
        if len(group) < 2:
            continue
        for edge in group:
            f = model.functions.get(edge.callee)
            if f is None or not f.decorators:
                continue
            for other in group:
                if other is edge or ".<locals>." not in other.callee[1]:
                    continue
                if other.callee not in memo:
                    memo[other.callee] = memo_wrapper(model, other.callee)
                found = memo[other.callee]
                if found is not None:
                    out[id(edge)] = Demotion("rare", found[1], Guard(other.callee[0], found[0], 0))
                    break
    return out


def edge_demotion(model: Joined, edge: Edge, rs: RuleSet) -> Demotion | None:
    """Why an edge's callee does not run each time the edge's caller does: the call sits on
    an error or rare block of the caller, or the callee is memoised."""
    caller = model.functions.get(edge.caller) if edge.caller is not None else None
    block = block_at(caller, edge.site.line)
    if block is not None:
        return Demotion(block[2], block[3], Guard(edge.path, block[4], 1))  # type: ignore[arg-type]
    if edge.site.path_kind != "normal":
        return Demotion(edge.site.path_kind, edge.site.path_reason, Guard(edge.path, edge.site.line, 1))
    callee = model.functions.get(edge.callee)
    decorator = memoised_by(callee, rs)
    if decorator is not None and callee is not None:
        return Demotion("rare", f"memoised by `@{decorator.rsplit('.', 1)[-1]}`: runs once per distinct arguments",
                        Guard(edge.callee[0], callee.line, 0))
    return None


def propagate(model: Joined, rs: RuleSet) -> None:
    """The frequency of every function a hot root reaches (``freq_default``: through
    ungated calls; ``freq_any``: any), the shortest chains, and which of them are reached
    only through a guard (``demoted_default``/``demoted_any``): such a function keeps the
    frequency it would have, and its sites are on that guard's path."""
    roots: dict[FuncKey, FrequencyName] = {}
    replayed_roots: set[FuncKey] = set()
    for key, root in model.root_rules.items():  # in the functions' order
        roots[key] = root.frequency
        if root.replayed:
            replayed_roots.add(key)
    replays = rs.defaults is not None and rs.defaults.replays_graphs
    # found once, before the joins gate them (``callgraph.build_model``)
    for key in model.event_loops:
        roots[key] = STEP
    loops = {**model.event_loops, **model.root_loops}
    out_edges: dict[FuncKey, list[Edge]] = defaultdict(list)
    plain_edges: dict[FuncKey, list[Edge]] = defaultdict(list)
    demotions = _through_wrappers(model, model.edges)
    for edge in model.edges:
        caller = edge.caller
        if caller is None:
            continue
        # an event loop's function (or a root driving its steps from a loop) runs once: only
        # the calls in its loops' bodies run per step
        if caller in loops and not in_event_loop(loops[caller], edge.site.line, with_test=False):
            continue
        # a cached property's getter runs on the first read of each instance, not per read
        if edge.how == "property" and is_once_function(model.functions.get(edge.callee), rs):
            continue
        out_edges[caller].append(edge)
        demotion = demotions.get(id(edge)) or edge_demotion(model, edge, rs)
        if demotion is None:
            plain_edges[caller].append(edge)
        else:
            demotions[id(edge)] = demotion

    # a root of a class built only under an option, in another platform's module or in an
    # optional feature's package runs only with it: not a root of the default paths, and
    # what it calls is entered through it
    gated: dict[FuncKey, SwitchRef] = {}
    for key in roots:
        f = model.functions.get(key)
        switch = model.gated_classes.get(f.class_name) if f is not None and f.class_name else None
        switch = (switch or model.gated_roots.get(key) or module_switch(rs.defaults, key[0]) or model.unserved.get(key[0])
                  or model.unserved_roots.get(key[0])
                  or feature_switch(rs.defaults, key[0], f.class_name if f is not None else None))
        if switch is not None:
            gated[key] = switch
    default_roots = {k: v for k, v in roots.items() if k not in gated}
    # a root of an architecture only shared code loads is no root, but shared code may call it
    helper_roots = {k for k, switch in gated.items() if model.unserved_roots.get(k[0]) == switch}

    tests = model.argument_tests

    def run(edges: dict[FuncKey, list[Edge]], only_ungated: bool, skip: Set[FuncKey] = frozenset()) -> States:
        """How often each function runs, and each function with tested parameters in each
        context a call enters it in (``joins.arguments``): a call its caller's context keeps
        off is not followed."""
        seeds = {k: v for k, v in (default_roots if only_ungated else roots).items() if k not in skip}
        states: dict[tuple[FuncKey, Context], FrequencyName] = {(k, EMPTY): v for k, v in seeds.items()}
        work = [(k, EMPTY) for k in sorted(seeds)]
        rank = rs.frequencies.rank
        while work:
            key, context = work.pop()
            at = states[(key, context)]
            for edge in edges.get(key, ()):
                if only_ungated and edge.switch is not None:
                    continue
                if edge.callee in roots and not (only_ungated and edge.callee in helper_roots):
                    continue  # a root's frequency is declared (an event loop calls `step` per step)
                entered = _through(tests, key, context, edge)
                if entered is None:
                    continue
                new = at
                if edge.site.loop_depth > 0:
                    new = rs.in_loop(new, edge.site.loop_iter)
                state = (edge.callee, entered)
                if rank(new) > rank(states.get(state)):
                    states[state] = new
                    work.append(state)
        return states

    tables = []
    rank = rs.frequencies.rank
    closed_any: set[int] = set()
    for only_ungated in (True, False):
        seeds = default_roots if only_ungated else roots
        every_time_states = run(plain_edges, only_ungated)
        every_time, every_time_contexts = _by_function(every_time_states, tests, rank)
        would_be, would_be_contexts = _by_function(run(out_edges, only_ungated), tests, rank)
        if not only_ungated:
            # calls no context of their caller lets run enter nothing through a switch either
            closed_any = _closed_edges(out_edges, would_be_contexts, tests)
        if replays:
            # a chain from a root the replay leaves in Python first: the one a decoding step runs
            via = _shortest_chains({k: v for k, v in seeds.items() if k not in replayed_roots}, plain_edges, only_ungated,
                                   tests, blocked=replayed_roots)
            for key, edge in _shortest_chains({k: v for k, v in seeds.items() if k in replayed_roots}, plain_edges, only_ungated,
                                              tests).items():
                via.setdefault(key, edge)
        else:
            via = _shortest_chains(seeds, plain_edges, only_ungated, tests)
        demoted = _demote(every_time_states, out_edges, demotions, roots, via, only_ungated, tests)
        if replays:
            # a replayed forward's functions that no other root runs every time it runs (a
            # helper the scheduler also calls each step runs every step; a layer's own code, and
            # what the scheduler calls only past a guard, not on a replayed decoding step)
            outside_every_time = _by_function(run(plain_edges, only_ungated, skip=replayed_roots), tests, rank)
            inside = {key for key, _ in run(out_edges, only_ungated, skip=roots.keys() - replayed_roots)}
            replayed = inside - outside_every_time[0].keys()
            demoted_by_replay = _demote_replayed(model, replayed, replayed_roots, demoted, via)
            if only_ungated:
                model.replayed = demoted_by_replay
            # what the replay does not run in Python runs as often as the other roots call it
            for (table, contexts), (outside, outside_contexts) in (
                    ((every_time, every_time_contexts), outside_every_time),
                    ((would_be, would_be_contexts), _by_function(run(out_edges, only_ungated, skip=replayed_roots), tests, rank))):
                for key in table.keys() & outside.keys():
                    if key not in replayed:
                        table[key] = outside[key]
                        if key in outside_contexts:
                            contexts[key] = outside_contexts[key]
        tables.append(({**{k: would_be[k] for k in demoted}, **every_time}, via, demoted,
                       {**{k: would_be_contexts[k] for k in demoted if k in would_be_contexts}, **every_time_contexts}))
    ((model.freq_default, model.hot_via_default, model.demoted_default, model.argument_freq_default),
     (model.freq_any, model.hot_via_any, model.demoted_any, model.argument_freq_any)) = tables
    model.roots = roots
    # switches through which a function is reached when it is not reached by default
    for key, switch in gated.items():
        model.entry_switches[key].add(switch)
    work = sorted(model.freq_any)
    seen_pairs: set[tuple[FuncKey, SwitchRef]] = set()
    while work:
        key = work.pop()
        for edge in out_edges.get(key, ()):
            if edge.callee in model.freq_default or id(edge) in closed_any:
                continue
            incoming: set[SwitchRef] = set()
            if edge.switch is not None:
                incoming.add(edge.switch)
            elif key not in model.freq_default:
                incoming |= model.entry_switches.get(key, set())
            for sw in incoming:
                if (edge.callee, sw) not in seen_pairs:
                    seen_pairs.add((edge.callee, sw))
                    model.entry_switches[edge.callee].add(sw)
                    work.append(edge.callee)


REPLAYED_WHY = ("in a model's forward, which decoding steps replay as a captured graph: its Python runs at "
                "capture and on eager (prefill) steps")


def _demote_replayed(model: Joined, replayed: set[FuncKey], replayed_roots: set[FuncKey], demoted: dict[FuncKey, Demotion],
                     via: dict[FuncKey, Edge]) -> set[FuncKey]:
    """Each replayed function not already past a guard is on the replay's rare path, its guard
    the replayed root nearest it up its shortest chain; the functions so demoted."""
    out = set()
    for key in sorted(replayed):
        if key in demoted:
            continue
        out.add(key)
        root, depth = key, 0
        while root not in replayed_roots and root in via and depth <= len(via):
            caller = via[root].caller
            if caller is None:
                break
            root, depth = caller, depth + 1
        f = model.functions.get(root)
        demoted[key] = Demotion("rare", REPLAYED_WHY, Guard(root[0], f.line if f is not None else 0, depth))
    return out


def _by_function(states: States, tests: ArgumentTests | None, rank: Callable[[FrequencyName | None], float],
                 ) -> tuple[dict[FuncKey, FrequencyName], dict[FuncKey, dict[Context, FrequencyName]]]:
    """How often each function runs (in its most frequent context), and each function with
    tested parameters in each context."""
    freq: dict[FuncKey, FrequencyName] = {}
    by_context: dict[FuncKey, dict[Context, FrequencyName]] = {}
    for (key, context), at in states.items():
        if rank(at) > rank(freq.get(key)):
            freq[key] = at
        if tests is not None and key in tests.tested:
            by_context.setdefault(key, {})[context] = at
    return freq, by_context


def _demote(every_time: States, out_edges: dict[FuncKey, list[Edge]], demotions: dict[int, Demotion],
            roots: dict[FuncKey, FrequencyName], via: dict[FuncKey, Edge], only_ungated: bool, tests: ArgumentTests | None,
            ) -> dict[FuncKey, Demotion]:
    """Breadth first from every function reached every time (in key order), in each context
    it is entered in: the functions reached only past a guard, each with the guard nearest a
    root on a shortest such chain; ``via`` gets the edge each was first reached by. A
    function run every time in one context may be entered past a guard in another, and what
    only that context lets it call is reached past that guard."""
    functions = {key for key, _ in every_time}
    demoted_states: dict[tuple[FuncKey, Context], Demotion] = {}
    demoted: dict[FuncKey, Demotion] = {}
    frontier = sorted(every_time, key=_state_order)
    while frontier:
        following: list[tuple[FuncKey, Context]] = []
        for state in frontier:
            key, context = state
            above = demoted_states.get(state)
            for edge in out_edges.get(key, ()):
                callee = edge.callee
                if (only_ungated and edge.switch is not None) or callee in roots:
                    continue
                entered = _through(tests, key, context, edge)
                if entered is None:
                    continue
                target = (callee, entered)
                if target in every_time or target in demoted_states:
                    continue
                if above is not None:
                    guard = above.guard
                    demotion = Demotion(above.kind, above.why, Guard(guard.path, guard.line, guard.depth + 1))
                else:
                    found = demotions.get(id(edge))
                    if found is None:
                        continue
                    demotion = found
                demoted_states[target] = demotion
                if callee not in functions and callee not in demoted:
                    demoted[callee] = demotion
                    via[callee] = edge
                following.append(target)
        frontier = following
    return demoted


def _through(tests: ArgumentTests | None, key: FuncKey, context: Context, edge: Edge) -> Context | None:
    """The context ``edge`` enters its callee in from ``key`` entered in ``context``; None when
    that context keeps the call off."""
    if tests is None:
        return EMPTY
    if context and tests.closes(key, context, edge.site.gates):
        return None
    return tests.entered(edge, edge.callee, context) if edge.callee in tests.tested else EMPTY


def _state_order(state: tuple[FuncKey, Context]) -> tuple[FuncKey, list[tuple[str, str]]]:
    return state[0], sorted(state[1])


def _shortest_chains(roots: dict[FuncKey, FrequencyName], out_edges: dict[FuncKey, list[Edge]], only_ungated: bool,
                     tests: ArgumentTests | None, blocked: Set[FuncKey] = frozenset()) -> dict[FuncKey, Edge]:
    """Breadth first from every root (in key order): the edge each reached function was
    first reached by, so following them back gives a shortest chain from a root. A function
    with tested parameters is reached in each context its calls enter it in (a call its
    context keeps off is not followed): its edge is that of the context keeping fewest of its
    sites off, the first reached among those (`release(req, checkpoint=True)` over a nearer
    `checkpoint=False`), so a chain passes the calls that let what it leads to run."""
    via: dict[FuncKey, Edge] = {}
    chosen: dict[FuncKey, int] = {}  # how many sites the chosen edge's context keeps off
    frontier = [(key, EMPTY) for key in sorted(roots)]
    seen: set[tuple[FuncKey, Context]] = set(frontier)
    stop = set(roots) | set(blocked)  # chains do not pass through a blocked function
    while frontier:
        following: list[tuple[FuncKey, Context]] = []
        for key, context in frontier:
            for edge in out_edges.get(key, ()):
                if only_ungated and edge.switch is not None:
                    continue
                callee = edge.callee
                entered = None if callee in stop else _through(tests, key, context, edge)
                if entered is None or (callee, entered) in seen:
                    continue
                seen.add((callee, entered))
                closed = tests.closed_count(callee, entered) if tests is not None else 0
                if callee not in via or closed < chosen[callee]:
                    via[callee] = edge
                    chosen[callee] = closed
                following.append((callee, entered))
        frontier = following
    return via


def _closed_edges(out_edges: dict[FuncKey, list[Edge]], contexts: dict[FuncKey, dict[Context, FrequencyName]],
                  tests: ArgumentTests | None) -> set[int]:
    """The ids of the edges every context their caller is entered in keeps off."""
    if tests is None:
        return set()
    return {id(edge) for key, by_context in contexts.items() for edge in out_edges.get(key, ())
            if all(tests.closes(key, context, edge.site.gates) for context in by_context)}
