"""Whole-tree joins over per-file facts: call resolution, env-reading helpers,
gate resolution, and hotness propagated from the hot-path roots.

Everything here is a pure function of ``FileFacts`` and the ``RuleSet``.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cs_audit.frequency import STEP
from cs_audit.joins.arguments import argument_tests
from cs_audit.joins.attributes import optional_attribute_names
from cs_audit.joins.components import gate_event_loops, gate_instance_methods, regate_class_tests
from cs_audit.joins.defaults import (
    OptionTable,
    feature_switch,
    option_name,
)
from cs_audit.joins.env_helpers import accessors, void_env_helpers
from cs_audit.joins.env_helpers import is_once_function as is_once_function  # re-exported
from cs_audit.joins.fields import held_fields
from cs_audit.joins.gates import (
    _module_switch,
    _take_site_gates,
    gate_switches,
    gates_digest,
    resolutions_by_default,
    site_switch,
)
from cs_audit.joins.host_data import mark_host_syncs, module_files
from cs_audit.joins.kept import Demand, FileResolutions, Resolutions, SiteGates
from cs_audit.joins.named_calls import NamedCall, callers_on_demand, hidden_callers
from cs_audit.joins.param_gates import callers_by_target
from cs_audit.joins.reach import Edge as Edge  # re-exported
from cs_audit.joins.reach import _shortest_chains, propagate
from cs_audit.joins.resolver import HOW_CODES, HOWS, READ, Resolver, _class_of, _last_name
from cs_audit.joins.roots import configured_roots, event_loop_roots, root_loops
from cs_audit.joins.served import unserved_modules, unserved_overrides
from cs_audit.joins.tree import TreeModel as TreeModel  # re-exported
from cs_audit.model import (
    EMITTER_ROLES,
    HANDED,
    SMALL_BODY_LINES,
    CallGraph,
    CallSite,
    FileFacts,
    FuncKey,
    FunctionDef,
    GateRef,
    GraphEdge,
    GraphFunction,
    SwitchRef,
)
from cs_audit.ruleset import HotRoot, RuleSet

if TYPE_CHECKING:
    from cs_audit.model import PlainCall


#: rounds of arguments flowed and functions reached again at most (``build_model``)
MAX_DEMAND_ROUNDS = 3

def function_at(ff: FileFacts, line: int) -> FunctionDef | None:
    """The innermost function whose span holds ``line``."""
    best: FunctionDef | None = None
    for f in ff.functions:
        # a lambda's calls are its own in the call graph; every other fact on its line is
        # its function's
        if f.line <= line <= f.end_line and (best is None or f.line >= best.line) and not f.name.startswith("<lambda"):
            best = f
    return best


# ---------------------------------------------------------------- building the model
def build_model(facts: dict[str, FileFacts], rs: RuleSet, earlier: Resolutions | None = None,
                unchanged: AbstractSet[str] | None = None, package: str | None = None,
                whole: bool = True, gates: SiteGates | None = None,
                gates_unchanged: AbstractSet[str] = frozenset()) -> TreeModel:
    """The joined model of ``facts``.  ``earlier``: the ``resolutions`` of an earlier model,
    taken for the files in ``unchanged`` (the caller vouches their facts are those of then)
    when the resolution tables are the same as then.  ``whole``: every call through the
    types (``callgraph``, ``why``); else only the calls of functions a hot root reaches,
    the others by name, as Jarvis resolves on demand from its entry functions.
    ``gates``: the site gates of an earlier model, taken for the files in ``gates_unchanged``
    (same facts) when the ``gates_digest`` is the same as then."""
    functions = {(p, f.qualname): f for p, ff in facts.items() for f in ff.functions}
    resolver = Resolver(facts, functions, package)
    digest, file_digests, lands_digest = resolver.tables_digests(earlier, unchanged or frozenset())
    reuse = earlier is not None and earlier.digest == digest and bool(unchanged) and earlier.whole == whole
    root_rules = configured_roots(functions, rs, resolver.types)
    roots = root_functions(facts, functions, root_rules)
    typed = _typed_demand(resolver, facts, functions, roots, earlier if reuse else None, whole)
    targets: list[FuncKey] = list(earlier.targets) if reuse else []  # type: ignore[union-attr]
    by_file, asked, resolved_here = _resolved_files(resolver, facts, targets, typed, earlier if reuse else None,
                                                    unchanged or frozenset())
    # worked out afresh when what flows into parameters may differ (it comes from every file's
    # typed answers: a changed file asks other questions, and read a parameter before or now)
    # or the changed files reach other functions than before
    if reuse and (any(asked[path] != earlier.asked.get(path) and (asked[path][1] or earlier.asked.get(path, ("", True))[1])  # type: ignore[union-attr]
                      for path in resolved_here)
                  or (typed is not None and _flat_demand(facts, functions, by_file, targets, roots) != typed)):
        return build_model(facts, rs, None, None, package, whole, gates, gates_unchanged)
    resolved, raw_edges, edge_sites, edge_counts, edge_calls = _raw_edges(facts, by_file, targets)
    model = TreeModel(
        facts=facts, functions=functions, edges=[], callers=defaultdict(list), env_helpers=_env_helpers(facts, functions, raw_edges),
        constants=_env_constants(facts), derived=_derived_names(facts),
        falsy=_falsy_names(facts), wrapped=_wrapped_names(facts), gated_emitter_helpers=set(),
        freq_default={}, freq_any={}, entry_switches=defaultdict(set), resolver=resolver, resolved_calls=resolved,
        resolutions=Resolutions(digest, tuple(targets), by_file, tuple(sorted(resolver.types.parameters.items())), whole, typed, asked,
                                file_digests, lands_digest),
        fact_sites={path: fact_sites(ff) for path, ff in facts.items()}, edge_sites=edge_sites, root_rules=root_rules,
        resolved_files=tuple(resolved_here), options=_option_table(facts, overridden := unserved_overrides(facts, rs.defaults)),
    )
    happening = resolutions_by_default(model, rs, overridden)
    if happening is not None:
        model.options = _option_table(facts, overridden, happening)
        model.gate_cache.clear()
        model.switch_cache.clear()
        model.setter_switches.clear()
    void = void_env_helpers(model, rs)
    model.void_helpers = frozenset(void)
    model.env_helpers.update(void)
    model.accessors = accessors(model, model.void_helpers)
    model.unserved, model.unserved_roots = unserved_modules(model, rs.defaults)
    model.gates_digest, model.file_gates_digests = gates_digest(model, gates, gates_unchanged)
    if gates is not None:
        if gates.digest == model.gates_digest:
            _take_site_gates(model, gates, gates_unchanged)
        for path in gates_unchanged:
            model.use_rows.update(((path, var), rows) for var, rows in gates.uses.get(path, {}).items())
    _add_edges(model, rs, raw_edges, edge_counts, edge_calls)
    def switch_of(path: str, function: str | None, gates: tuple[GateRef, ...]) -> SwitchRef | None:
        return site_switch(model, path, function, gates, rs)

    ignored = rs.defaults.ignore_paths.search if rs.defaults is not None else None
    imported: dict[str, frozenset[str]] = {}

    def imports(path: str) -> frozenset[str]:
        found = imported.get(path)
        if found is None:
            ff = model.facts.get(path)
            found = imported[path] = frozenset(
                p for _, origin in (ff.aliases if ff is not None else ()) for p in module_files(model.resolver, origin))
        return found

    def at_hand(path: str, key: FuncKey) -> bool:
        # a module that imports neither the class's module nor a base's has no way to its methods
        homes = {base[0] for base in model.resolver.types.mro((key[0], key[1].rpartition(".")[0]))} | {key[0]}
        return path in homes or not homes.isdisjoint(imports(path))

    def unresolved(key: FuncKey) -> bool:
        # a call a test makes is no caller in the deployment, as a construction in one is none
        return hidden_callers(model, key, ignored, at_hand)

    def later(key: FuncKey) -> list[NamedCall]:
        return callers_on_demand(model, key)

    gate_instance_methods(model, rs, switch_of, unresolved, later)
    regate_class_tests(model, switch_of, held_fields(model, rs) | optional_attribute_names(model))
    model.event_loops = event_loop_roots(model, rs)
    model.root_loops = root_loops(model)
    gate_event_loops(model, rs, list(model.event_loops), switch_of, unresolved, later)
    _gate_feature_classes(model, rs)
    mark_host_syncs(model)
    model.gated_emitter_helpers = _gated_emitter_helpers(model, rs)
    model.argument_tests = argument_tests(model)
    propagate(model, rs)
    model.debug_functions = _debug_functions(model, rs)
    return model


def _typed_demand(resolver: Resolver, facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef],
                  roots: list[FuncKey], earlier: Resolutions | None, whole: bool) -> Demand | None:
    """Ask the types what the calls need (every call when ``whole``, else those ``_demand``
    picks, to a fixed point of what flows into parameters) and flow the arguments; what an
    earlier build (``earlier``, its tables the same) worked out is taken instead."""
    if earlier is not None:
        resolver.use_parameters(dict(earlier.parameters))
        return earlier.typed
    if whole:
        for path in sorted(facts):  # every answer asked once: what they read flows below
            for _ in _typed_sites(resolver, path, facts[path].calls, None):
                pass
        resolver.flow_arguments()
        return None
    # the answers asked read parameters: what the calls pass into them may reach more
    # functions, whose answers read more parameters
    typed = _demand(resolver, facts, functions, roots)
    for _ in range(MAX_DEMAND_ROUNDS):
        demanded = len(resolver.types.demanded)
        resolver.flow_arguments()
        typed = _demand(resolver, facts, functions, roots)
        if len(resolver.types.demanded) == demanded:
            break
    return typed


def _resolved_files(resolver: Resolver, facts: dict[str, FileFacts], targets: list[FuncKey], typed: Demand | None,
                    earlier: Resolutions | None, unchanged: AbstractSet[str],
                    ) -> tuple[dict[str, FileResolutions], dict, list[str]]:
    """Where each file's calls land (``FileResolutions``, numbering new targets into
    ``targets``), the questions each put to the types, and the files resolved here (the
    others taken from ``earlier`` for the files in ``unchanged``)."""
    numbers = {key: n for n, key in enumerate(targets)}
    by_file: dict[str, FileResolutions] = {}
    resolved_here: list[str] = []
    asked = dict(earlier.asked) if earlier is not None else {}
    for path in sorted(facts):
        flat = earlier.files.get(path) if earlier is not None and path in unchanged else None
        if flat is None:
            questions: set[tuple[str | None, str]] = set()
            flat = _resolve_file(resolver, path, facts[path].calls, targets, numbers, typed, questions)
            asked[path] = _asked_of(resolver, path, questions)
            resolved_here.append(path)
        by_file[path] = flat
    return by_file, asked, resolved_here


def _option_table(facts: dict[str, FileFacts], overridden: AbstractSet[str], conditional: Iterable[str] | None = None) -> OptionTable:
    """The options of the tree with what start-up works out of them, outside the architectures'
    own overrides the deployment does not apply (``overridden``): every resolution by a call in a
    function (``FileFacts.conditional_resolutions``), or those of ``conditional``."""
    loaded = [ff for path, ff in facts.items() if path not in overridden]
    if conditional is None:
        conditional = (*(entry for ff in loaded for _, entry in ff.conditional_resolutions),
                       *(entry for ff in loaded for _, entry, _ in ff.table_resolutions))
    return OptionTable.of((o for ff in facts.values() for o in ff.options),
                          (*(n for ff in loaded for n in ff.foreign_stores), *conditional),
                          (n.rpartition(".")[2] for ff in facts.values() for n in ff.own_state))


def _raw_edges(facts: dict[str, FileFacts], by_file: dict[str, FileResolutions], targets: list[FuncKey],
               ) -> tuple[dict[tuple[str, int, int, str], list[FuncKey]], list[tuple[str, CallSite | PlainCall, FuncKey, str]],
                          dict[str, list[CallSite | PlainCall]], list[tuple[str, int]], list[int]]:
    """The edges the resolutions give, before their switches: (the targets of each site, each
    edge as (path, site, target, how), each file's sites that land, (path, its edges) in
    order, the index in its file's calls of each edge's site)."""
    resolved: dict[tuple[str, int, int, str], list[FuncKey]] = {}
    raw_edges: list[tuple[str, CallSite | PlainCall, FuncKey, str]] = []
    edge_sites: dict[str, list[CallSite | PlainCall]] = {}
    edge_counts: list[tuple[str, int]] = []
    edge_calls: list[int] = []
    for path in sorted(facts):
        calls = facts[path].calls
        flat = by_file[path]
        last = -1
        site_targets: list[FuncKey] = []
        sites_here: list[CallSite | PlainCall] = []
        for i in range(0, len(flat), 3):
            index, target = flat[i], targets[flat[i + 1]]
            if index != last:
                site = calls[index]
                sites_here.append(site)
                site_targets = resolved[(path, site.line, site.end_line, site.callee)] = []
                last = index
            site_targets.append(target)
            raw_edges.append((path, site, target, HOWS[flat[i + 2]]))
            edge_calls.append(index)
        if sites_here:
            edge_sites[path] = sites_here
            edge_counts.append((path, len(flat) // 3))
    return resolved, raw_edges, edge_sites, edge_counts, edge_calls


def _add_edges(model: TreeModel, rs: RuleSet, raw_edges: list[tuple[str, CallSite | PlainCall, FuncKey, str]],
               edge_counts: list[tuple[str, int]], edge_calls: list[int]) -> None:
    """The model's edges and callers: each raw edge with the switch of its site's gates (the
    callers of each function are what a parameter's gate reads meanwhile)."""
    edges, callers = model.edges, model.callers
    model.pending_callers = callers_by_target(raw_edges)
    start = 0
    for path, count in edge_counts:
        these = raw_edges[start:start + count]
        switches = _edge_switches(model, path, these, rs, edge_calls[start:start + count])
        start += count
        # a module of another platform calls nothing in this deployment
        elsewhere = _module_switch(model, path, rs)
        for (_, site, target, how), switch in zip(these, switches):
            if switch is None and elsewhere is not None:
                switch = elsewhere
            edge = Edge((path, site.function) if site.function else None, target, site, path, switch, how)
            edges.append(edge)
            callers[target].append(edge)
    model.pending_callers = None


#: an enum in a feature's package is a value default code tests (`spec_algorithm.is_none()`)
_ENUM_BASES = frozenset({"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"})


def _gate_feature_classes(model: TreeModel, rs: RuleSet) -> None:
    """A class written for an optional feature (``feature_paths``: LoRA layers, speculative
    workers, disaggregation queues; ``feature_classes``: a vision encoder) has an instance only
    with that feature on: a call of one of its methods from anything but such a class's
    methods is gated by it. Enums in a feature's package are left open."""
    defaults = rs.defaults
    if defaults is None or not (defaults.feature_paths or defaults.feature_classes):
        return
    enums = {(path, c.qualname) for path, ff in model.facts.items() for c in ff.types.classes
             if any(base.rsplit(".", 1)[-1] in _ENUM_BASES for base in c.bases)}
    known: dict[tuple[str, str], SwitchRef | None] = {}

    def component(key: FuncKey | None) -> SwitchRef | None:
        f = model.functions.get(key) if key is not None else None
        if f is None or f.class_name is None:
            return None
        owner = (key[0], f.qualname.rpartition(".")[0])  # type: ignore[index]
        if owner not in known:
            known[owner] = None if owner in enums else feature_switch(defaults, owner[0], f.class_name)
        return known[owner]

    gated: dict[int, Edge] = {}
    for i, edge in enumerate(model.edges):
        if edge.switch is not None:
            continue
        switch = component(edge.callee)
        # inside the component; a module function of the package is a helper default code may call
        if switch is None or component(edge.caller) == switch:
            continue
        gated[id(edge)] = model.edges[i] = replace(edge, switch=switch)
    for callee in {edge.callee for edge in gated.values()}:
        model.callers[callee] = [gated.get(id(edge), edge) for edge in model.callers[callee]]


def _edge_switches(model: TreeModel, path: str, edges: list[tuple[str, CallSite | PlainCall, FuncKey, str]],
                   rs: RuleSet, indexes: list[int]) -> tuple[SwitchRef | None, ...]:
    """The switch of each of one file's edges (``site_switch``; a site's edges are consecutive),
    from the taken answer of its call (``indexes``: each edge's call in the file) where there is one."""
    out: list[SwitchRef | None] = []
    last: CallSite | PlainCall | None = None
    switch: SwitchRef | None = None
    taken = model.call_answers.get(path)
    answers = model.taken_gates.answers if taken is not None else ()  # type: ignore[union-attr]
    for (_, site, _, _), index in zip(edges, indexes):
        if site is not last:
            n = taken[index] if taken is not None else -1
            switch = answers[n][1] if n >= 0 else site_switch(model, path, site.function, site.gates, rs)
            last = site
        out.append(switch)
    return tuple(out)


def fact_sites(ff: FileFacts) -> tuple[CallSite, ...]:
    """The call sites of a file that hold a fact (``model.holds_fact``: a role, eager arguments,
    calls in their arguments or a written path), in file order: all but the plain call edges,
    which only the call graph reads."""
    return tuple(site for site in ff.calls if site.__class__ is CallSite)


def root_functions(facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef], root_rules: dict[FuncKey, HotRoot]) -> list[FuncKey]:
    """The functions the hot roots of the rules match and those holding an event loop, sorted."""
    found = set(root_rules)
    for path, ff in facts.items():
        found.update((path, loop.function) for loop in ff.event_loops if (path, loop.function) in functions)
    return sorted(found)


def _demand(resolver: Resolver, facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef],
            roots: list[FuncKey]) -> Demand:
    """Which calls go through the types (``Demand``), asking each of them once."""
    by_name = resolver.sites_by_last_name()

    def returned_calls(name: str) -> list[tuple[FuncKey, list[FuncKey]]]:
        wanted_in: dict[str, list[CallSite | PlainCall]] = defaultdict(list)
        for path, site in by_name.get(name, ()):
            wanted_in[path].append(site)
        out = []
        for path in sorted(wanted_in):
            wanted = wanted_in[path]
            for index, found in _typed_sites(resolver, path, wanted, None):
                site = wanted[index]
                if site.returned and site.function is not None and functions[(path, site.function)].returns_value:
                    out.append(((path, site.function), [target for target, _ in found]))
        return out

    names = _helper_names(_direct_env_helpers(facts, functions), returned_calls) | _loop_names(facts)
    return Demand(frozenset(_reach(resolver, roots)), names)


def _loop_names(facts: dict[str, FileFacts]) -> frozenset[str]:
    """The names of the functions holding an event loop: their calls, wherever they are, say
    which option picks the loop (``components.gate_event_loops``)."""
    return frozenset(loop.function.rsplit(".", 1)[-1] for ff in facts.values() for loop in ff.event_loops if loop.function)


def _helper_names(helpers: set[FuncKey],
                  returned_calls: Callable[[str], list[Any]]) -> frozenset[str]:
    """The names of the env-reading helpers: the functions reading the env themselves and,
    to a fixed point, those returning what a call named like a helper gives when it lands in
    one (``returned_calls(name)``: (function, targets) of the returned calls so named)."""
    names: set[str] = set()
    calls: list[tuple[FuncKey, list[FuncKey]]] = []
    while True:
        fresh = {key[1].rpartition(".")[2] for key in helpers} - names
        if not fresh:
            return frozenset(names)
        names |= fresh
        for name in sorted(fresh):
            calls.extend(returned_calls(name))
        grown = True
        while grown:
            grown = False
            for key, targets in calls:
                if key not in helpers and any(target in helpers for target in targets):
                    helpers.add(key)
                    grown = True


def _direct_env_helpers(facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef]) -> set[FuncKey]:
    """The functions whose result depends on an env read of their own (``_env_helpers``' start)."""
    out: set[FuncKey] = set()
    for path, ff in facts.items():
        for read in ff.env_reads:
            if read.function and read.per_call and read.returned:
                f = functions.get((path, read.function))
                if f is not None and f.returns_value:
                    out.add((path, read.function))
    return out


def _reach(resolver: Resolver, seeds: list[FuncKey]) -> set[FuncKey]:
    """The functions the seeds reach through the types (every call of each asked once).  A
    function's targets are kept between rounds until an answer of one of its calls is
    forgotten (``Resolver.use_parameters``): walking it again would only read memoised answers."""
    seen = set(seeds)
    work = list(reversed(seeds))
    kept = resolver.reached
    while work:
        key = work.pop()
        targets = kept.get(key)
        if targets is None:
            path, qualname = key
            targets = kept[key] = [target for _, found in _typed_sites(resolver, path, resolver.sites_by_function(path).get(qualname, ()), None)
                                   for target, _ in found]
        for target in targets:
            if target not in seen:
                seen.add(target)
                work.append(target)
    return seen


def _flat_demand(facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef], by_file: dict[str, FileResolutions],
                 targets: list[FuncKey], roots: list[FuncKey]) -> Demand:
    """``_demand`` over resolutions already made."""
    out_edges: dict[FuncKey, set[FuncKey]] = defaultdict(set)
    returned: dict[str, dict[FuncKey, list[FuncKey]]] = defaultdict(dict)
    for path, flat in by_file.items():
        calls = facts[path].calls
        for i in range(0, len(flat), 3):
            site, target = calls[flat[i]], targets[flat[i + 1]]
            if site.function is not None:
                key = (path, site.function)
                out_edges[key].add(target)
                if site.returned and functions[key].returns_value:
                    returned[_last_name(site.callee)].setdefault((key, flat[i]), []).append(target)  # type: ignore[arg-type]
    names = _helper_names(_direct_env_helpers(facts, functions),
                          lambda name: [(key, found) for (key, _), found in returned.get(name, {}).items()]) | _loop_names(facts)
    seen = set(roots)
    work = list(roots)
    while work:
        for target in out_edges.get(work.pop(), ()):
            if target not in seen:
                seen.add(target)
                work.append(target)
    return Demand(frozenset(seen), names)


def _typed_sites(resolver: Resolver, path: str, calls: Sequence[CallSite | PlainCall], typed: Demand | None,
                 asked: set | None = None) -> Iterator[tuple[int, list[tuple[FuncKey, str]]]]:
    """(index, [(target, how)]) of the sites in ``calls`` that land in the tree: through the
    types when ``typed`` is None or wants the site, else by name.  ``asked``: gets the
    (caller, callee) of each question put to the types (``_asked_of``)."""
    lands, resolve, named = resolver._lands, resolver.resolve_how, resolver._named
    wanted, wanted_names = (typed.functions, typed.names) if typed is not None else ((), ())
    property_names = resolver.property_names
    for index, site in enumerate(calls):
        role, callee, function = site.role, site.callee, site.function
        if role is not None and role != "open":
            continue
        if not lands[callee]:
            continue  # no function nor name of the tree is so named: nothing to resolve
        # wanted: in a function a root reaches, or named like an env-reading helper
        through_types = typed is None or (path, function) in wanted or _last_name(callee) in wanted_names
        if site.resolution == "read":
            # an attribute read runs a property's getter: through the types alone (reads of
            # plain attributes so named are many), and to a property alone
            if through_types and _last_name(callee) in property_names:
                if asked is not None:
                    asked.add((function, callee + READ))
                found = resolver.resolve_read(path, function, callee)
                if found:
                    yield index, found
            continue
        if through_types and asked is not None:
            outer, handed, inner = callee.partition(HANDED)
            asked.add((function, outer))
            if handed:
                asked.add((function, inner))
        lookup = resolve if through_types else named
        if HANDED in callee:
            # a function handed to a call runs at the call when the call leaves the tree;
            # into the tree, the argument flows into the parameter instead
            outer, _, handed = callee.partition(HANDED)
            found = [] if lands[outer] and lookup(path, function, outer) else [(t, "callback") for t, _ in lookup(path, function, handed)]
        else:
            found = lookup(path, function, callee)
            if found and through_types and resolver.has_shared_parameters:
                found = found + resolver.passed_functions(path, function, callee)
        if found:
            yield index, found


def _asked_of(resolver: Resolver, path: str, keys: set[tuple[str | None, str]]) -> tuple[str, bool]:
    """(digest of the (caller, callee) a file's calls asked of the types, whether an answer to
    one read a parameter): equal questions get equal answers from equal tables."""
    how_deps, passed_deps = resolver._how_deps, resolver._passed_deps
    reads = any(how_deps.get((path, *key)) or passed_deps.get((path, *key)) for key in keys)
    digest = hashlib.blake2b(repr(sorted(keys, key=repr)).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return digest, reads


def _resolve_file(resolver: Resolver, path: str, calls: tuple[CallSite | PlainCall, ...], targets: list[FuncKey],
                  numbers: dict[FuncKey, int], typed: Demand | None = None, asked: set | None = None) -> FileResolutions:
    """The call sites of one file that land in the tree (calls and opens: an emitter's own
    call is no edge), flat (see ``FileResolutions``); new targets are added to ``targets``."""
    out: list[int] = []
    for index, found in _typed_sites(resolver, path, calls, typed, asked):
        for target, how in found:
            number = numbers.get(target)
            if number is None:
                number = numbers[target] = len(targets)
                targets.append(target)
            out += (index, number, HOW_CODES[how])
    return tuple(out)



def _env_constants(facts: dict[str, FileFacts]) -> dict[tuple[str, str], str]:
    """Names that hold an env value: module constants, `self.x` set once, and locals
    (`(path, "func::name")`) assigned from a per-call read."""
    constants: dict[tuple[str, str], str] = {}
    for path, ff in facts.items():
        for read in ff.env_reads:
            if not (read.var and read.assigned_to):
                continue
            if read.assigned_to.startswith("self."):
                constants[(path, f"{_class_of(read.function)}.{read.assigned_to}")] = read.var
            elif read.function is not None and read.per_call:
                constants[(path, f"{read.function}::{read.assigned_to}")] = read.var
            elif read.function is None:
                constants[(path, read.assigned_to)] = read.var
    return constants


def _derived_names(facts: dict[str, FileFacts]) -> dict[tuple[str, str], list[tuple[str | None, tuple[GateRef, ...]]]]:
    """``FileFacts.derived`` keyed as ``_env_constants`` keys names."""
    out: dict[tuple[str, str], list[tuple[str | None, tuple[GateRef, ...]]]] = defaultdict(list)
    for path, ff in facts.items():
        for function, name, refs in ff.derived:
            out[(path, _name_key(function, name))].append((function, refs))
    return dict(out)


def _falsy_names(facts: dict[str, FileFacts]) -> frozenset[tuple[str, str]]:
    """``FileFacts.falsy_names`` keyed as ``_derived_names`` keys names."""
    return frozenset((path, _name_key(function, name)) for path, ff in facts.items() for function, name in ff.falsy_names)


def _name_key(function: str | None, name: str) -> str:
    if name.startswith("global:"):
        return name[len("global:"):]
    if function is None:
        return name
    if name.startswith("self."):
        return f"{_class_of(function)}.{name}"
    return f"{function}::{name}"


def _wrapped_names(facts: dict[str, FileFacts]) -> dict[tuple[str, str], list[str]]:
    """``FileFacts.wrapped`` keyed as ``_derived_names`` keys names."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path, ff in facts.items():
        for function, name, read in ff.wrapped:
            out[(path, _name_key(function, name))].append(read)
    return dict(out)


def _env_helpers(
    facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef], edges: list[tuple[str, CallSite | PlainCall, FuncKey, str]]
) -> dict[FuncKey, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Functions whose result depends on a per-call env read (directly or via another helper)."""
    reads: dict[FuncKey, set[str]] = defaultdict(set)
    params: dict[FuncKey, set[str]] = defaultdict(set)
    for path, ff in facts.items():
        for read in ff.env_reads:
            if read.function and read.per_call and read.returned:
                key = (path, read.function)
                if read.var:
                    reads[key].add(read.var)
                elif read.var_param:
                    params[key].add(read.var_param)
                else:
                    reads[key].add("<dynamic>")
    helpers: dict[FuncKey, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for key in set(reads) | set(params):
        f = functions.get(key)
        if f is not None and f.returns_value:
            helpers[key] = (tuple(sorted(reads[key])), tuple(sorted(params[key])))
    changed = True
    while changed:
        changed = False
        for path, site, target, _ in edges:
            if target in helpers and site.function and site.returned:
                key = (path, site.function)
                f = functions.get(key)
                if f is None or not f.returns_value or key in helpers:
                    continue
                helpers[key] = (helpers[target][0], ())
                changed = True
    return helpers


def _gated_emitter_helpers(model: TreeModel, rs: RuleSet) -> set[FuncKey]:
    """Functions that emit only behind a gate they check themselves (`cptrace`, `emit`)."""
    emits: dict[FuncKey, list[tuple[CallSite, bool]]] = defaultdict(list)
    for path, sites in model.fact_sites.items():
        for site in sites:
            if site.function and site.role in EMITTER_ROLES:
                gated = site_switch(model, path, site.function, site.gates, rs) is not None
                emits[(path, site.function)].append((site, gated))
    helpers = {key for key, sites in emits.items() if sites and all(g for _, g in sites)}
    # buffering trace helpers (`trace()` appends to a buffer) gated at entry
    for key, f in model.functions.items():
        if f.entry_gates and f.debug_named and key not in emits:
            if gate_switches(model, key[0], key[1], f.entry_gates, rs):
                helpers.add(key)
    # a short function whose own emits are all gated and that calls a helper ungated is one too:
    # the callers of each new helper are looked at once (the least fixpoint, as repeated passes
    # over every edge would find it: the rule only ever adds)
    work = list(helpers)
    while work:
        for edge in model.callers.get(work.pop(), ()):
            caller = edge.caller
            if caller is None or caller in helpers or edge.switch is not None:
                continue
            function = model.functions.get(caller)
            if function is not None and function.body_lines <= SMALL_BODY_LINES and all(g for _, g in emits.get(caller, ())):
                helpers.add(caller)
                work.append(caller)
    return helpers


def _edges_back(via: dict[FuncKey, Edge], key: FuncKey) -> list[Edge]:
    """The edges ``_shortest_chains`` found from a start to ``key``, the start's call first."""
    chain: list[Edge] = []
    while key in via and len(chain) <= len(via):
        chain.append(via[key])
        key = via[key].caller  # type: ignore[assignment]
    return chain[::-1]


def hot_chain_edges(model: TreeModel, key: FuncKey, default_only: bool = True) -> list[Edge]:
    """The call edges of a shortest chain from a hot root to ``key`` (root's call first)."""
    return _edges_back(model.hot_via_default if default_only else model.hot_via_any, key)


def hot_chain(model: TreeModel, key: FuncKey, default_only: bool = True) -> list[FuncKey]:
    """The functions on a shortest chain from a hot root to ``key``, root first ([] when no
    root reaches it)."""
    edges = hot_chain_edges(model, key, default_only)
    if not edges:
        return [key] if key in model.roots else []
    return [edges[0].caller, *(e.callee for e in edges)]  # type: ignore[list-item]


def function_id(model: TreeModel, key: FuncKey) -> str:
    """`module.qualname` of a function of the tree (what reports and exports call it)."""
    ff = model.facts.get(key[0])
    module = ff.module if ff is not None else key[0]
    return f"{module}.{key[1]}" if module and module != "__init__" else key[1]


def _debug_functions(model: TreeModel, rs: RuleSet) -> dict[FuncKey, set[SwitchRef | None]]:
    """Functions that only run as part of debug/log/dump code, with the switches
    that lead there (None in the set: some path reaches it with no switch set,
    e.g. through the eager arguments of an ungated log call)."""
    debug = _named_debug(model, rs)
    arg_of_emitter = _emitter_arg_callees(model)
    # a function is worked out again only when one of its callers' entries changed since it
    # last was (its other inputs are fixed): the same rounds, in the same order, with the same
    # result as working out every function in every round
    dependents: dict[FuncKey, list[FuncKey]] = defaultdict(list)
    for key, edges in model.callers.items():
        for caller in {edge.caller for edge in edges if edge.caller is not None}:
            dependents[caller].append(key)
    stale: set[FuncKey] = set(model.callers)
    changed = True
    rounds = 0
    while changed and rounds < DEBUG_ROUNDS:
        changed = False
        rounds += 1
        for key, edges in model.callers.items():
            if key not in stale:
                continue
            stale.discard(key)
            if _debug_step(model, rs, debug, arg_of_emitter, key, edges):
                changed = True
                stale.update(dependents.get(key, ()))
    return debug


#: most rounds of the debug-function fixpoint
DEBUG_ROUNDS = 20


def _named_debug(model: TreeModel, rs: RuleSet) -> dict[FuncKey, set[SwitchRef | None]]:
    """Where the debug-function fixpoint starts: functions named like debug code."""
    return {key: set() for key, f in model.functions.items() if f.debug_named}


def _debug_step(model: TreeModel, rs: RuleSet, debug: dict[FuncKey, set[SwitchRef | None]],
                arg_of_emitter: set[tuple[str, int, str]], key: FuncKey, edges: list[Edge]) -> bool:
    """Work ``key`` out once from its callers' entries (every call gated, in an emitter's
    arguments, or made by debug code): update ``debug``; whether its entry changed."""
    switches: set[SwitchRef | None] = set()
    for edge in edges:
        if edge.switch is not None and is_debug_switch(edge.switch, rs):
            switches.add(edge.switch)
        elif (edge.path, edge.site.line, edge.callee[1].rsplit(".", 1)[-1]) in arg_of_emitter or edge.site.in_emitter_args:
            switches.add(None)
        elif edge.caller in debug:
            switches |= debug[edge.caller] or {None}
        else:
            return False
    if not edges or debug.get(key) == switches:
        return False
    if key in debug and not debug[key] and model.functions[key].debug_named:
        return False  # named debug and reached with no switch: stays so
    debug[key] = switches
    return True


def is_debug_switch(switch: SwitchRef, rs: RuleSet) -> bool:
    """Whether code under ``switch`` is debug code: a log-level check, a debug-named flag, an
    env var of a debug category or with a debug-like name, an option named like one
    (`log_stats`, `enable_trace`); not a configuration value (a size, a limit, a mode), nor an
    option, a platform, a feature or a model (speculative decoding's `.tolist()` is its work).

    By name on purpose: the behaviour categories (``analysis.categories``) are worked out from
    the gated sites this decides, so using them here would make a switch's category depend on
    itself."""
    if switch.kind == "option":
        return rs.debug_name_re.search(option_name(switch.name)) is not None
    if switch.kind != "env":
        return True
    return rs.category_of(switch.name) != "config" or rs.debug_name_re.search(switch.name) is not None


def _emitter_arg_callees(model: TreeModel) -> set[tuple[str, int, str]]:
    """(path, line, function name) of calls made inside the arguments of an emitter or
    of a gated emitter helper (`logger.info("%s", rng(t))`, `cptrace(1, h=khash(t))`)."""
    out: set[tuple[str, int, str]] = set()
    for path, sites in model.fact_sites.items():
        for site in sites:
            if not site.arg_calls:
                continue  # no call in its arguments: nothing to add
            is_emitter = site.role in EMITTER_ROLES
            if not is_emitter:
                targets = model.resolved_calls.get((path, site.line, site.end_line, site.callee), [])
                is_emitter = any(t in model.gated_emitter_helpers for t in targets)
            if is_emitter:
                for callee in site.arg_calls:
                    for line in range(site.line, site.end_line + 1):
                        out.add((path, line, callee.rsplit(".", 1)[-1]))
    return out


def gating_switches(model: TreeModel, key: FuncKey, depth: int = 3) -> list[str]:
    """Switches that guard every call of ``key`` (through up to ``depth`` callers); [] when
    some call runs ungated or the function has no caller in the tree."""
    edges = model.callers.get(key, ())
    if not edges or depth == 0:
        return []
    found: list[str] = []
    for edge in edges:
        if edge.switch is not None and edge.switch.kind in ("env", "flag"):
            found.append(edge.switch.text)
            continue
        above = gating_switches(model, edge.caller, depth - 1) if edge.caller else []
        if not above:
            return []
        found.extend(above)
    return sorted(set(found))


#: how the exported graph names a root found as an event loop (configured roots: their name)
EVENT_LOOP_ROOT = "<event loop>"


def export_graph(model: TreeModel, rs: RuleSet, root: str, errors: tuple = ()) -> CallGraph:
    """The model's call graph as plain data (``render.callgraph`` writes it out)."""
    functions = []
    for key in sorted(model.functions):
        f = model.functions[key]
        root_rule = model.root_rules.get(key) if key in model.roots else None
        root_name = root_rule.name if root_rule is not None else EVENT_LOOP_ROOT if key in model.event_loops else None
        functions.append(GraphFunction(function_id(model, key), key[0], f.line, model.freq_default.get(key), root_name))
    modules = sorted({ff.module for ff in model.facts.values()})
    edges = sorted({
        GraphEdge(function_id(model, e.caller) if e.caller else model.facts[e.path].module, function_id(model, e.callee),
                  e.path, e.site.line, e.how, e.switch.text if e.switch else None)
        for e in model.edges
    }, key=lambda e: (e.caller, e.callee, e.path, e.line, e.how))
    return CallGraph(root, tuple(modules), tuple(functions), tuple(edges), len(rs.hot_roots), tuple(errors))


def chain_from(model: TreeModel, start: FuncKey, key: FuncKey, default_only: bool = True) -> list[Edge]:
    """The edges of a shortest chain from ``start`` to ``key`` ([] when there is none)."""
    out_edges: dict[FuncKey, list[Edge]] = defaultdict(list)
    for edge in model.edges:
        if edge.caller is not None:
            out_edges[edge.caller].append(edge)
    return _edges_back(_shortest_chains({start: STEP}, out_edges, default_only, model.argument_tests), key)


def unresolved_calls_of(model: TreeModel, key: FuncKey, limit: int = 5) -> list[tuple[str, CallSite | PlainCall]]:
    """Call sites named like ``key``'s function (`….step()`) that the graph resolved to no
    function of the tree: where a caller may be missing."""
    name = key[1].rpartition(".")[2]
    reads = key in model.resolver.properties  # an attribute read so named may hide a property's caller
    out: list[tuple[str, CallSite | PlainCall]] = []
    for path in sorted(model.facts):
        for site in model.facts[path].calls:
            callee = site.callee
            if callee.rpartition(".")[2] == name and (path, site.line, site.end_line, callee) not in model.resolved_calls \
                    and (site.role is None or site.role == "open") and (reads or site.resolution != "read"):
                out.append((path, site))
                if len(out) >= limit:
                    return out
    return out
