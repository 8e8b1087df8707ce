"""Whole-tree joins over per-file facts: call resolution, env-reading helpers,
gate resolution, and hotness propagated from the hot-path roots.

Everything here is a pure function of ``FileFacts`` and the ``RuleSet``.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import defaultdict
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from cs_audit.joins.attributes import receiver_attribute_switch
from cs_audit.joins.components import gate_event_loops, gate_instance_methods
from cs_audit.joins.defaults import (
    NOT_OPTION,
    OptionTable,
    feature_switch,
    module_switch,
    option_gate,
    predicate_gate,
    registry_env_gate,
)
from cs_audit.joins.env_helpers import accessors, helper_switches, void_env_helpers
from cs_audit.joins.env_helpers import is_once_function as is_once_function  # re-exported
from cs_audit.joins.host_data import mark_host_syncs
from cs_audit.joins.param_gates import callers_by_target, parameter_gate, unresolved_names
from cs_audit.joins.reach import Edge as Edge  # re-exported
from cs_audit.joins.reach import _shortest_chains, propagate
from cs_audit.joins.reach import rank as rank  # re-exported
from cs_audit.joins.roots import event_loop_roots
from cs_audit.joins.values import Types, shared_parameter
from cs_audit.model import (
    DEFAULT_ON,
    EMITTER_ROLES,
    HANDED,
    LEVEL_SWITCH,
    PARAM_FRESH,
    PROPERTY_DECORATORS,
    SMALL_BODY_LINES,
    CallGraph,
    CallSite,
    EventLoop,
    FileFacts,
    Frequency,
    FuncKey,
    FunctionDef,
    GateRef,
    GraphEdge,
    GraphFunction,
    SwitchRef,
    closure_of,
    env_switch,
)
from cs_audit.records import record
from cs_audit.ruleset import RuleSet

if TYPE_CHECKING:
    from cs_audit.joins.reach import Demotion
    from cs_audit.model import PlainCall


@dataclass
class TreeModel:
    """The joined view of the tree the analyses read."""

    facts: dict[str, FileFacts]
    functions: dict[FuncKey, FunctionDef]
    edges: list[Edge]
    callers: dict[FuncKey, list[Edge]]
    #: env-reading helper -> (vars read, param names whose call-site literal is the var)
    env_helpers: dict[FuncKey, tuple[tuple[str, ...], tuple[str, ...]]]
    #: (path, name) of a module constant or (path, "Class.self.attr") -> env var
    constants: dict[tuple[str, str], str]
    gated_emitter_helpers: set[FuncKey]
    freq_default: dict[FuncKey, Frequency]
    freq_any: dict[FuncKey, Frequency]
    entry_switches: dict[FuncKey, set[SwitchRef]]
    resolver: Resolver
    debug_functions: dict[FuncKey, set[SwitchRef | None]] = field(default_factory=dict)
    #: (path, line, end_line, callee) of a call site -> the tree functions it calls
    resolved_calls: dict[tuple[str, int, int, str], list[FuncKey]] = field(default_factory=dict)
    #: (path, function, gate) -> its switch (or None), ``_Shaped`` by a cycle, or ``_RESOLVING``
    gate_cache: dict[tuple[str, str | None, GateRef], object] = field(default_factory=dict)
    syncing: set[FuncKey] | None = None
    #: ``analysis.sites.syncing_helpers`` of this model, once worked out
    syncing_via: dict[FuncKey, tuple[tuple[str, ...], str]] | None = None
    #: (path, function, gates) -> (switches, innermost switch) of a site's gates
    switch_cache: dict[tuple[str, str | None, tuple[GateRef, ...]], tuple[tuple[SwitchRef, ...], SwitchRef | None]] = field(default_factory=dict)
    #: keyed as ``constants``: (function, gates of the value) of each assignment to a name a
    #: gate tests (``FileFacts.derived``)
    derived: dict[tuple[str, str], list[tuple[str | None, tuple[GateRef, ...]]]] = field(default_factory=dict)
    #: ``findings.duplicate_groups`` of this model, once worked out
    duplicates: list[tuple[str, list[tuple[str, FunctionDef]]]] | None = None
    #: the resolution of every file's call sites (see ``Resolutions``)
    resolutions: Resolutions | None = None
    #: per file, the call sites that hold a fact beyond being a call (``fact_sites``): what
    #: the rules' passes read, a twentieth of all sites
    fact_sites: dict[str, tuple[CallSite, ...]] = field(default_factory=dict)
    #: the files whose call sites this model resolved (the others took earlier resolutions)
    resolved_files: tuple[str, ...] = ()
    #: per file, the call sites that land in the tree (each once, in file order)
    edge_sites: dict[str, list[CallSite | PlainCall]] = field(default_factory=dict)
    #: the functions the hot roots of the rules match, with their frequency
    roots: dict[FuncKey, Frequency] = field(default_factory=dict)
    #: per function reached from a root: the edge into it on a shortest chain from a root,
    #: through default-on edges (``hot_via_default``) or any (``hot_via_any``)
    hot_via_default: dict[FuncKey, Edge] = field(default_factory=dict)
    hot_via_any: dict[FuncKey, Edge] = field(default_factory=dict)
    #: per function a root reaches only past a guard (a rare or error branch up its chain, a
    #: memoised function): that guard (``joins.runs``), through default-on edges or any
    demoted_default: dict[FuncKey, Demotion] = field(default_factory=dict)
    demoted_any: dict[FuncKey, Demotion] = field(default_factory=dict)
    #: the functions only a replayed root (a model's forward, ``HotRoot.replayed``) reaches by
    #: default, when the deployment replays captured graphs
    replayed: set[FuncKey] = field(default_factory=set)
    #: classes the tree constructs only under an option (``components.gate_instance_methods``): their
    #: methods that are hot roots run only with it (``reach.propagate``)
    gated_classes: dict[str, SwitchRef] = field(default_factory=dict)
    #: event loops every call of which needs an option (``components.gate_event_loops``)
    gated_roots: dict[FuncKey, SwitchRef] = field(default_factory=dict)
    #: per file, the platform switch of a module written for another platform (``_module_switch``)
    module_switches: dict[str, SwitchRef | None] = field(default_factory=dict)
    #: while the edges get their switches: each function's callers (``param_gates``), as
    #: ``callers`` holds them once built
    pending_callers: dict[FuncKey, list] | None = None
    #: (path, name keyed as ``derived``) -> what each assignment to it wraps (``FileFacts.wrapped``)
    wrapped: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    #: (path, line, end line, callee's last name) -> ``PassedValues`` (``param_gates``, when first asked)
    passed_by_call: dict | None = None
    #: the last names of the calls that resolved to nothing (``param_gates``, when first asked)
    unresolved_names: frozenset[str] | None = None
    #: the codes of those calls by that name (``param_gates``, when first asked)
    unresolved_calls: dict[str, list[str]] | None = None
    #: the attribute names some code assigns on another object (``joins.attributes``, when first asked)
    foreign_attributes: frozenset[str] | None = None
    #: the options the tree declares, with their defaults (``joins.defaults``)
    options: OptionTable = field(default_factory=OptionTable)
    #: names of the functions that return early behind a gate (``_switch_of_result``)
    entry_gated_names: set[str] | None = None
    #: a class's last name -> its int constants, those its namesakes agree on (``_level_number``)
    class_levels: dict[str, dict[str, int | None]] | None = None
    #: the roots that are roots because they hold an event loop (``joins.roots``), with their loops
    event_loops: dict[FuncKey, tuple[EventLoop, ...]] = field(default_factory=dict)
    #: the env helpers that return nothing (``joins.env_helpers``): reads, never gates
    void_helpers: frozenset[FuncKey] = frozenset()
    #: the env helpers whose reads are reported at their call sites only
    accessors: frozenset[FuncKey] = frozenset()
    #: ``gates_digest`` of this model: what a site's gates resolve against besides the site
    gates_digest: str = ""
    #: the part of each file in it (``_file_gates_digest``)
    file_gates_digests: dict[str, str] = field(default_factory=dict)
    #: the gates being resolved, innermost last
    gates_resolving: list[tuple[str, str | None, GateRef]] = field(default_factory=list)
    #: counts the gates met while another they lead to was being resolved (a cycle through
    #: several gates), and the answers read that such a cycle shaped (``_Shaped``): an answer
    #: worked out while it grew may depend on the order gates were asked in
    gate_cycles: int = 0
    #: the ``switch_cache`` keys whose answer a cycle shaped (not kept for a later build)
    shaped_sites: set[tuple[str, str | None, tuple[GateRef, ...]]] = field(default_factory=set)
    #: the earlier ``SiteGates`` taken for the files whose rows hold (``_take_site_gates``):
    #: each file's answers go into ``switch_cache`` when one of its sites is first asked
    taken_gates: SiteGates | None = None
    pending_gates: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: the taken ``SiteGates.calls`` of the files whose rows hold, as arrays
    call_answers: dict[str, array] = field(default_factory=dict)
    #: per such file, made when first asked: (function, id of gates) of its calls -> answer number
    call_numbers: dict[str, dict[tuple[str | None, int], int]] = field(default_factory=dict)
    #: per file, what an analysis derived from the file's facts and its sites' answers alone
    #: (``analysis.categories``): taken from ``taken_gates`` or worked out, and kept with them
    gate_rows: dict[str, tuple] = field(default_factory=dict)
    #: (path, variable) -> what an analysis derived from the file's facts alone
    #: (``analysis.categories``): taken from ``SiteGates.uses`` or worked out, and kept with them
    use_rows: dict[tuple[str, str], tuple] = field(default_factory=dict)


#: the call sites of one file that land in the tree, flat: (index in ``FileFacts.calls``,
#: target number in ``Resolutions.targets``, ``HOWS`` code) for each target of each site, in site order
FileResolutions = tuple[int, ...]


@record
@dataclass(frozen=True)
class Resolutions:
    """Where each file's call sites land, and the digest of the tables that decided it
    (``Resolver.tables_digest``): a file's entry holds for as long as its facts and the
    digest are the same (a later run passes it back to ``build_model``).  Plain ints and
    one table of targets: stored and loaded whole on every scan that joins."""

    digest: str
    targets: tuple[FuncKey, ...]
    files: dict[str, FileResolutions]
    #: what flows into each parameter (``Types.parameters``), worked out with the files
    parameters: tuple[tuple[tuple[str, str, str], tuple[tuple[str, str | None, str], ...]], ...] = ()
    #: resolved for ``build_model(whole=...)``
    whole: bool = True
    #: the calls that went through the types (None: all of them)
    typed: Demand | None = None
    #: per file: digest of the typed questions its calls asked, and whether an answer read a
    #: parameter (``_asked_of``)
    asked: dict[str, tuple[str, bool]] = field(default_factory=dict)
    #: each file's part of ``digest`` (``Resolver.tables_digests``), and the digest of the names
    #: those parts read
    file_digests: dict[str, str] = field(default_factory=dict)
    lands_digest: str = ""


@record
@dataclass(frozen=True)
class SiteGates:
    """The switches of the sites' gates of a model (``_site_gates``), kept for a later build:
    a file's row holds while its facts and the ``gates_digest`` are the same, since an answer
    depends on nothing else.  Each row numbers the answers of the file's ``site_gate_keys``
    (-1: not asked) in one table of answers."""

    digest: str
    answers: tuple[tuple[tuple[SwitchRef, ...], SwitchRef | None], ...]
    files: dict[str, tuple[int, ...]]
    #: each file's part of the digest (``_file_gates_digest``)
    file_digests: dict[str, str] = field(default_factory=dict)
    #: per file, the answer of each of its calls by index in ``FileFacts.calls`` (``array('i')``
    #: bytes, -1: no gates or not asked): an edge's switch without hashing its gates
    calls: dict[str, bytes] = field(default_factory=dict)
    #: per file, the rows an analysis derived from the file's facts and its sites' answers
    #: alone (``TreeModel.gate_rows``), kept only where no answer of the file was shaped
    rows: dict[str, tuple] = field(default_factory=dict)
    #: per file, what an analysis derived from the file's facts alone, by variable
    #: (``TreeModel.use_rows``): holds while the file's facts do, whatever the digest
    uses: dict[str, dict[str, tuple]] = field(default_factory=dict)


# ---------------------------------------------------------------- resolution
@dataclass(slots=True)
class _FlowState:
    """Where ``Resolver.flow_arguments`` stopped: the argument groups and what they pass."""

    groups: dict[tuple[str, str | None, str], list[tuple[str, str]]]
    order: list[tuple[str, str | None, str]]
    lasts: list[str]
    table: dict[tuple[str, str, str], tuple[tuple[str, str | None, str], ...]]
    passed: dict[tuple[str, str, str], dict[int, list[tuple[str, str | None, str]]]]
    keys_of: dict[int, list[tuple[str, str, str]]]
    taken: set[int]
    asked: set[str]
    #: last name -> the numbers of the groups so named; the groups looked at whatever was asked
    by_last: dict[str, list[int]] = field(default_factory=dict)
    always: list[int] = field(default_factory=list)
    #: the asked names whose groups are taken
    expanded: set[str] = field(default_factory=set)
    #: group key -> its number
    number_of: dict[tuple[str, str | None, str], int] = field(default_factory=dict)
    seen_demands: int = 0
    #: groups forgotten in the last round of the last call, not worked out again yet
    pending: set[int] = field(default_factory=set)


class _Memo(dict):
    """key -> ``compute(key)``, worked out on the first lookup (a hit costs a dict lookup)."""

    __slots__ = ("compute",)

    def __init__(self, compute) -> None:
        super().__init__()
        self.compute = compute

    def __missing__(self, key):
        value = self[key] = self.compute(key)
        return value


class Resolver:
    def __init__(self, facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef] | None = None,
                 package: str | None = None) -> None:
        self.by_module: dict[str, list[str]] = defaultdict(list)
        self.qualnames: dict[str, dict[str, FunctionDef]] = {}
        self.methods_by_name: dict[str, list[FuncKey]] = defaultdict(list)
        #: the getters of properties (a read of the attribute runs one), and their names
        self.properties: set[FuncKey] = set()
        self.property_names: set[str] = set()
        self.modules: dict[str, str] = {path: ff.module for path, ff in facts.items()}
        self.types_digests = {path: ff.types.digest for path, ff in facts.items()}
        self._memo: dict[tuple[str, str | None, str], list[FuncKey]] = {}
        self._module_calls: dict[str, bool] = {}
        self._defining: dict[tuple[str, str], list[str]] = {}  # (module, qualname) -> files defining it
        self._methods_by_path: dict[str, dict[str, str]] = {}
        #: every part of every qualname in the tree: a callee whose last part is none of them
        #: resolves to nothing (every answer below ends in the callee's last name, or in
        #: `.__init__` after it), except `cls()` / `self.__class__()`
        self.names: set[str] = set()
        names = self.names
        #: every parameter name: a bare call of one may run what its callers pass
        self.param_names: set[str] = set()
        #: every part of every function and class qualname
        self.defined_names: set[str] = set()
        #: the scanned folder's own name when it is a package (`sglang`): its modules are
        #: imported under it (`from sglang.srt.x import f`)
        self.package = package
        for path, ff in facts.items():
            parts = ff.module.split(".")
            for i in range(len(parts)):
                self.by_module[".".join(parts[i:])].append(path)
            if package:
                self.by_module[f"{package}.{ff.module}" if ff.module != "__init__" else package].append(path)
            table = {f.qualname: f for f in ff.functions}
            self.qualnames[path] = table
            for qualname in table:
                names.update(qualname.split("."))
                self.defined_names.update(qualname.split("."))
            for f in ff.functions:  # a parameter holds what the calls pass (`cb()`)
                self.param_names.update(f.params)
            for f in ff.functions:
                if f.class_name is not None and "<locals>" not in f.qualname:
                    self.methods_by_name[f.name].append((path, f.qualname))
                    if f.decorators and not PROPERTY_DECORATORS.isdisjoint(f.decorators):
                        self.properties.add((path, f.qualname))
                        self.property_names.add(f.name)
            # a call of a name that holds an object may run its `__call__`/`forward`; a class
            # without methods of its own may inherit its `__init__`
            names.update(ff.types.names)
            for c in ff.types.classes:
                names.update(c.qualname.split("."))
                self.defined_names.update(c.qualname.split("."))
        if functions is None:
            functions = {(p, f.qualname): f for p, ff in facts.items() for f in ff.functions}
        self.types = Types(facts, functions, self.by_module, self._closest)
        self._how_memo: dict[tuple[str, str | None, str], list[tuple[FuncKey, str]]] = {}
        #: the parameters each answer of ``resolve_how`` depended on (when any)
        self._how_deps: dict[tuple[str, str | None, str], frozenset] = {}
        self._targets_memo: dict[tuple[str, str | None, str], list[tuple[FuncKey, int]]] = {}
        #: callee -> whether it may land (``_may_land``)
        self._lands = _Memo(self._may_land)
        #: owner of a binding -> whether it is an argument of a call that may land
        self._landing_owners: dict[str, bool] = {}
        self._groups: dict[tuple[str, str | None, str], list[tuple[str, str]]] | None = None
        self._passed_memo: dict[tuple[str, str | None, str], list[tuple[FuncKey, str]]] = {}
        self._passed_deps: dict[tuple[str, str | None, str], frozenset] = {}
        self._file_arguments: dict[str, dict[tuple[str | None, str], list[tuple[str, str]]]] = {}
        self._landing_args: dict[str, list[tuple]] = {}
        self._shared_count = 0
        self._by_last_name: dict[str, list[tuple[str, CallSite | PlainCall]]] | None = None
        self._flow: _FlowState | None = None
        self._by_function: dict[str, dict[str | None, list[CallSite | PlainCall]]] = {}
        #: function -> the targets of its calls through the types, in call order (``_reach``)
        self.reached: dict[tuple[str, str | None], list[FuncKey]] = {}
        #: call sites whose ``call_targets`` were dropped since ``flow_arguments`` last looked
        self._dropped_targets: set[tuple[str, str | None, str]] = set()
        self._facts = facts

    def tables_digest(self) -> str:
        """``tables_digests``' digest."""
        return self.tables_digests()[0]

    def tables_digests(self, earlier: Resolutions | None = None,
                       unchanged: AbstractSet[str] = frozenset()) -> tuple[str, dict[str, str], str]:
        """Digest of everything an answer of ``resolve_how`` depends on besides the call site
        itself: each file's path, module, function qualnames (a function's name and whether
        it is a method follow from its qualname) and decorators, type facts, and a
        package's imports; with each file's part of it, and the digest of the names that
        decide which calls may land.  A file's part is taken from ``earlier`` for the files in
        ``unchanged`` while those names are the same as then (its part reads them)."""
        lands_digest = hashlib.blake2b(repr((sorted(self.names), sorted(self.param_names))).encode("utf-8", "surrogateescape"),
                                       digest_size=16).hexdigest()
        known = earlier.file_digests if earlier is not None and earlier.lands_digest == lands_digest else {}
        h = hashlib.blake2b(digest_size=16)
        h.update(repr(self.package).encode("utf-8", "surrogateescape"))
        files: dict[str, str] = {}
        for path in sorted(self.qualnames):
            digest = known.get(path) if path in unchanged else None
            if digest is None:
                digest = self._file_tables_digest(path)
            files[path] = digest
            h.update(f"{path}\0{digest}\0".encode("utf-8", "surrogateescape"))
        return h.hexdigest(), files, lands_digest

    def _file_tables_digest(self, path: str) -> str:
        """One file's part of ``tables_digests``."""
        h = hashlib.blake2b(digest_size=16)
        h.update(f"{path}\0{self.modules[path]}\0".encode("utf-8", "surrogateescape"))
        h.update("\0".join(self.qualnames[path]).encode("utf-8", "surrogateescape") + b"\n")
        # the typed resolution reads every file's classes, bindings and decorators, and a
        # package's imports (the names it re-exports, ``Types.module_name``)
        exports = sorted(self.types.aliases.get(path, {}).items()) if path.endswith("__init__.py") else None
        h.update(repr((self.types_digests[path], exports, self.types.star_imports.get(path))).encode("utf-8", "surrogateescape"))
        h.update(repr([(f.decorators, f.params) for f in self.qualnames[path].values()]).encode("utf-8", "surrogateescape"))
        # the arguments of calls that may land in the tree (the others flow nowhere)
        lands = self._lands
        h.update(repr([g for g in self._facts[path].types.arguments if lands[g[1]]]).encode("utf-8", "surrogateescape"))
        return h.hexdigest()

    # ------------------------------------------------------------ arguments into parameters
    def flow_arguments(self) -> None:
        """Work out what calls pass into the parameters the answers so far read (PyCG's
        argument edges, on demand as Jarvis does), to a fixed point: a parameter's values can
        decide where another call with arguments lands (`run(cb)` then `cb(x)`).  Answers
        that read a parameter whose values changed are forgotten (and asked again: that may
        read more parameters); a later call goes on from where this one stopped.

        The calls looked at are those whose callee's last name is that of a function with a
        parameter some answer read (a constructor: its class's name), and every call through
        a name no function or class has (`cb(x)`, `self.handler(x)`)."""
        state = self._flow
        if state is None:  # a later call goes on from where the last one stopped
            groups = self._argument_groups()
            order = list(groups)
            # a call through what a call or subscript gives (`retry(3)(f)`, `table[k](x)`)
            # may land anywhere: looked at whatever was asked
            lasts = ["" if "(" in callee or "[" in callee else _last_name(callee) for _, _, callee in order]
            #: parameter -> group number -> what that group passes into it; a round works out
            #: again only the groups whose resolution an earlier round's change made it forget
            passed: dict[tuple[str, str, str], dict[int, list[tuple[str, str | None, str]]]] = defaultdict(dict)
            state = self._flow = _FlowState(groups, order, lasts, {}, passed, {}, set(), set())
            for number, last in enumerate(lasts):
                if last in self.defined_names:
                    state.by_last.setdefault(last, []).append(number)
                else:
                    state.always.append(number)
            state.number_of = {key: number for number, key in enumerate(order)}
        groups, order, lasts, table, passed, keys_of, taken, asked = (
            state.groups, state.order, state.lasts, state.table, state.passed, state.keys_of, state.taken, state.asked)
        functions = self.types.functions
        demanded = self.types.demanded
        seen_demands = state.seen_demands
        # the groups the last call forgot and did not work out again (other calls may have
        # made their targets again since: the memo alone does not say so); a taken group is
        # out of the memo only when ``use_parameters`` dropped its targets since
        dirty = sorted(state.pending | self._forgotten_groups(state))
        for _ in range(MAX_FLOW_ROUNDS):
            if len(demanded) != seen_demands:
                seen_demands = len(demanded)
                for path, qualname, _param in list(demanded):
                    f = functions.get((path, qualname))
                    if f is not None:
                        asked.add(f.class_name if f.name == "__init__" and f.class_name else f.name)
            fresh = [n for n in state.always if n not in taken]
            for name in asked - state.expanded:
                fresh.extend(n for n in state.by_last.get(name, ()) if n not in taken)
            state.expanded |= asked
            taken.update(fresh)
            work = sorted(set(dirty) | set(fresh))
            if not work:
                break
            touched: set[tuple[str, str, str]] = set()
            for number in work:
                for key in keys_of.pop(number, ()):
                    passed[key].pop(number, None)
                    touched.add(key)
                path, function, callee = group = order[number]
                mine: list[tuple[str, str, str]] = []
                for target, offset in self.call_targets(path, function, callee):
                    params = functions[target].params
                    for slot, source in groups[group]:
                        if slot.isdigit():
                            at = offset + int(slot)
                            if at >= len(params):
                                continue
                            param = params[at]
                        elif slot in params:
                            param = slot
                        else:
                            continue
                        key = (target[0], target[1], param)
                        passed[key].setdefault(number, []).append((path, function, source))
                        mine.append(key)
                        touched.add(key)
                if mine:
                    keys_of[number] = mine
            changed: set[tuple[str, str, str]] = set()
            for key in touched:
                items: list[tuple[str, str | None, str]] = []
                for number in sorted(passed[key]):  # in group order: the cap keeps the same first ones
                    for item in passed[key][number]:
                        if item not in items and len(items) < MAX_ARGUMENT_SOURCES:
                            items.append(item)
                value = tuple(items)
                if table.get(key, ()) != value:
                    changed.add(key)
                    if value:
                        table[key] = value
                    else:
                        del table[key]
            if changed:
                again = self.use_parameters(table, changed)
                for question in sorted(again, key=repr):  # asked again now: that may read more parameters
                    self.resolve_how(*question)
            dirty = sorted(self._forgotten_groups(state))
            if not changed and len(demanded) == seen_demands:
                break
        state.seen_demands = seen_demands
        state.pending = set(dirty)
        self.types.parameters = table

    def _forgotten_groups(self, state: _FlowState) -> set[int]:
        """The taken groups whose targets are out of the memo (dropped since last asked)."""
        memo, number_of, taken = self._targets_memo, state.number_of, state.taken
        out = set()
        for key in self._dropped_targets:
            number = number_of.get(key)
            if number is not None and number in taken and key not in memo:
                out.add(number)
        self._dropped_targets = set()
        return out

    def passed_functions(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, str]]:
        """The functions a call hands to shared parameters (``values.shared_parameter``) of
        what it calls: they run at this call (how `callback`), not at every caller of the helper."""
        key = (path, caller, callee)
        out = self._passed_memo.get(key)
        if out is not None:
            return out
        out = []
        args = self._arguments_of(path).get((caller, callee))
        deps: set = set()  # the parameters this answer read: it is forgotten when one changes
        if args:
            types, functions = self.types, self.types.functions
            for target, offset in self.call_targets(path, caller, callee):
                params = functions[target].params
                for slot, source in args:
                    at = offset + int(slot) if slot.isdigit() else (params.index(slot) if slot in params else len(params))
                    if at >= len(params):
                        continue
                    param = (target[0], target[1], params[at])
                    deps.add(param)
                    if not shared_parameter(types.parameters.get(param, ())):
                        continue
                    read = types.begin()
                    for value in sorted(types.source(path, caller, source), key=repr):
                        if value[0] in ("f", "b"):
                            for function, _ in types.targets(value):
                                if (function, "callback") not in out:
                                    out.append((function, "callback"))
                    deps |= read
        self._passed_memo[key] = out
        if deps:
            self._passed_deps[key] = frozenset(deps)
        return out

    def sites_by_last_name(self) -> dict[str, list[tuple[str, CallSite | PlainCall]]]:
        """Last name of the callee (``_last_name``) -> (path, site) of the calls so named, in
        file order, for the calls that may land."""
        if self._by_last_name is None:
            out: dict[str, list[tuple[str, CallSite | PlainCall]]] = defaultdict(list)
            lands = self._lands
            for path in sorted(self._facts):
                for site in self._facts[path].calls:
                    if lands[site.callee]:
                        out[_last_name(site.callee)].append((path, site))
            self._by_last_name = dict(out)
        return self._by_last_name

    def sites_by_function(self, path: str) -> dict[str | None, list[CallSite | PlainCall]]:
        """Function qualname (None: module level) -> its call sites in ``path``, in file order."""
        table = self._by_function.get(path)
        if table is None:
            table = self._by_function[path] = defaultdict(list)
            for site in self._facts[path].calls:
                table[site.function].append(site)
            table.default_factory = None
        return table

    @property
    def has_shared_parameters(self) -> bool:
        return self._shared_count > 0

    def _arguments_of(self, path: str) -> dict[tuple[str | None, str], list[tuple[str, str]]]:
        """(function, callee) -> (slot, source) of one file's calls with arguments that may land."""
        table = self._file_arguments.get(path)
        if table is None:
            table = self._file_arguments[path] = {}
            for owner, slot, function, source in self._landing_arguments(path):
                table.setdefault((function, owner[4:]), []).append((slot, source))
        return table

    def _landing_arguments(self, path: str) -> list[tuple]:
        """The argument bindings (``arg:<callee>``) of one file's calls that may land, in order."""
        found = self._landing_args.get(path)
        if found is None:
            lands, owners = self._lands, self._landing_owners
            found = self._landing_args[path] = []
            for b in self._facts[path].types.bindings:
                landing = owners.get(b[0])
                if landing is None:
                    owner = b[0]
                    landing = owners[owner] = owner[:4] == "arg:" and lands[owner[4:]]
                if landing:
                    found.append(b)
        return found

    def _argument_groups(self) -> dict[tuple[str, str | None, str], list[tuple[str, str]]]:
        """(path, function, callee) -> (slot, source) of each call with arguments that may land."""
        if self._groups is None:
            self._groups = {(path, function, callee): args for path in sorted(self._facts)
                            for (function, callee), args in self._arguments_of(path).items()}
        return self._groups

    def use_parameters(self, table: dict, changed: set | None = None) -> set[tuple[str, str | None, str]]:
        """Take ``table`` as what flows into parameters; forget the answers that depended on
        the ``changed`` ones (all, when not given).  Returns the call sites (path, caller,
        callee) whose answers were forgotten."""
        self.types.parameters = table
        changed = set(table) if changed is None else changed
        self.types.forget(changed)
        shared = self._shared_count > 0
        self._shared_count = sum(1 for sources in table.values() if shared_parameter(sources))
        if shared != (self._shared_count > 0):
            self.reached.clear()  # every call's answer now does (or no longer does) include passed functions
        reached = self.reached
        keys = [k for k, deps in self._how_deps.items() if deps & changed]
        for key in keys:
            del self._how_deps[key]
            self._how_memo.pop(key, None)
            if self._targets_memo.pop(key, None) is not None:
                self._dropped_targets.add(key)
            self._passed_memo.pop(key, None)
            self._passed_deps.pop(key, None)
            reached.pop(key[:2], None)
        for key in [k for k, deps in self._passed_deps.items() if deps & changed]:
            del self._passed_deps[key]
            self._passed_memo.pop(key, None)
            reached.pop(key[:2], None)
        return set(keys)

    def call_targets(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, int]]:
        """The functions a call runs, each with the number of leading parameters the call
        does not fill (the receiver of a bound method or constructor)."""
        key = (path, caller, callee)
        out = self._targets_memo.get(key)
        if out is None:
            out = []
            for target, how in self.resolve_how(path, caller, callee):
                f = self.types.functions.get(target)
                if f is not None:
                    out.append((target, self._receiver_slots(path, caller, callee, f, how)))
            self._targets_memo[key] = out
        return out

    def _receiver_slots(self, path: str, caller: str | None, callee: str, f: FunctionDef, how: str) -> int:
        if f.class_name is None or "staticmethod" in f.decorators:
            return 0
        if "classmethod" in f.decorators or how in ("constructor", "__call__", "forward", "super", "self"):
            return 1
        receiver = callee.rpartition(".")[0]
        if receiver and "(" not in receiver and "[" not in receiver:
            self.types.begin()
            if any(v[0] == "k" for v in self.types.dotted(path, caller, receiver)):
                return 0  # `Base.method(obj, x)`: called through the class
        return 1

    def _may_land(self, callee: str) -> bool:
        if HANDED in callee:
            return self._may_land(callee.rpartition(HANDED)[2])
        last = _last_name(callee)
        if last in self.names or callee == "cls" or callee == "self.__class__" or callee.startswith("super()."):
            return True
        return last == callee and last in self.param_names  # `cb()`, not `x.view()`

    def resolve_how(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, str]]:
        """The tree functions a call runs, each with how it was found: through the types of
        the names on the way (``joins.values``), else by name as the plain resolver does."""
        key = (path, caller, callee)
        found = self._how_memo.get(key)
        if found is None:
            if callee.endswith(READ):  # a read's answer, asked again (``flow_arguments``)
                return self.resolve_read(path, caller, callee[:-len(READ)])
            found = self._typed(path, caller, callee)
            if self.types.last_deps:
                self._how_deps[key] = frozenset(self.types.last_deps)
            if not found and not self._holds_data(path, caller, callee):
                found = self._named(path, caller, callee)
            self._how_memo[key] = found
        return found

    def resolve_read(self, path: str, caller: str | None, chain: str) -> list[tuple[FuncKey, str]]:
        """The property getters reading the attribute chain ``chain`` runs: the attribute of
        each instance the receiver may hold, found through its MRO and the classes built on
        it (as a method call's overrides are).  Memoised with ``resolve_how``'s answers (under
        the chain with ``READ`` after it), so what flows into parameters forgets both alike."""
        key = (path, caller, chain + READ)
        found = self._how_memo.get(key)
        if found is None:
            types = self.types
            types.last_deps = types.begin()
            receiver, _, attr = chain.rpartition(".")
            found = []
            values = types.dotted(path, caller, receiver)
            for value in sorted(values, key=repr) if len(values) > 1 else values:
                if value[0] == "i":
                    for target, _ in types.targets(("b", value[1], attr)):
                        if target in self.properties and (target, "property") not in found:
                            found.append((target, "property"))
            if types.last_deps:
                self._how_deps[key] = frozenset(types.last_deps)
            self._how_memo[key] = found
        return found

    def _holds_data(self, path: str, caller: str | None, callee: str) -> bool:
        """Whether `self.x` is an attribute the class assigns (`self.x = shared_experts`):
        calling it runs what it holds, never a method found by name alone."""
        head, _, attr = callee.partition(".")
        if head != "self" or not attr or "." in attr or caller is None:
            return False
        cls = (path, caller.rpartition(".")[0])
        types = self.types
        return cls in types.classes and any((c[0], f"class:{c[1]}", attr) in types.bindings for c in types.mro(cls))

    def _typed(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, str]]:
        types = self.types
        types.last_deps = types.begin()
        head, dot, rest = callee.partition(".")
        values = types.dotted(path, caller, callee)
        if "[]" in callee:
            base = "dispatch"
        elif "()" in callee and head != "super()":
            base = "result"
        elif head == "super()":
            base = "super"
        elif not dot:
            base = "name"
        elif head in ("self", "cls"):
            base = "self" if "." not in rest else "attribute"
        elif caller is not None and (head in self._params(path, caller) or (path, f"def:{caller}", head) in types.bindings):
            base = "local"
        else:
            base = "module"
        out: list[tuple[FuncKey, str]] = []
        for value in sorted(values, key=repr) if len(values) > 1 else values:
            for target, how in types.targets(value):
                item = (target, how or base)
                if item not in out:
                    out.append(item)
        return out

    def _params(self, path: str, caller: str) -> tuple[str, ...]:
        f = self.qualnames.get(path, {}).get(caller)
        return f.params if f is not None else ()

    def _named(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, str]]:
        found = self.resolve(path, caller, callee)
        if not found:
            return _NOTHING_HOW
        how = "fallback" if callee.partition(".")[0] in ("self", "cls") else "name"
        return [(target, how) for target in found]

    def _closest(self, paths: list[str], near: str) -> list[str]:
        if len(paths) <= 1:
            return paths
        def shared(p: str) -> int:
            n = 0
            for a, b in zip(p.split("/"), near.split("/")):
                if a != b:
                    break
                n += 1
            return n
        best = max(shared(p) for p in paths)
        return sorted(p for p in paths if shared(p) == best)[:1]

    def _in_module(self, module: str, qualname: str, near: str) -> list[FuncKey]:
        paths = self._defining.get((module, qualname))
        if paths is None:
            init = f"{qualname}.__init__"
            paths = self._defining[(module, qualname)] = [
                p for p in self.by_module.get(module, ()) if qualname in self.qualnames[p] or init in self.qualnames[p]
            ]
        out: list[FuncKey] = []
        for p in self._closest(paths, near):
            table = self.qualnames[p]
            out.append((p, qualname if qualname in table else f"{qualname}.__init__"))
        return out

    def resolve(self, path: str, caller: str | None, callee: str) -> list[FuncKey]:
        # answers are kept per (path, what of the caller the callee depends on, callee): the
        # caller's class for `self.f`/`cls.f`/`cls()`, nothing for bare names (after the
        # caller's own nested functions) and for dotted names
        if callee.rpartition(".")[2] not in self.names and callee != "cls" and callee != "self.__class__":
            return _NOTHING
        head, dot, rest = callee.partition(".")
        context: str | None = None
        module_call = False
        if callee == "cls" or callee == "self.__class__" or (head in ("self", "cls") and dot and "." not in rest):
            context = _class_of(caller)
        elif not dot:
            if caller:
                local = f"{caller}.<locals>.{callee}"
                if local in self.qualnames.get(path, ()):
                    return [(path, local)]
            caller = None  # nothing else of the caller matters
        else:  # dotted: `module.f`, `module.Class.f`, or nothing of the tree (`torch.cat`)
            caller = None
            module_call = True
        key = (path, context, callee)
        found = self._memo.get(key)
        if found is None:
            if module_call and not self._may_be_module_call(callee):
                found = self._memo[key] = []
            else:
                found = self._memo[key] = self._resolve(path, caller, callee)
        return found  # shared with the memo: callers only read it

    def _methods_in(self, path: str) -> dict[str, str]:
        """Method name -> the first (sorted) qualname of a method so named in ``path``."""
        methods = self._methods_by_path.get(path)
        if methods is None:
            methods = {}
            for q in sorted(self.qualnames.get(path, {})):
                f = self.qualnames[path][q]
                if f.class_name is not None and "<locals>" not in q:
                    methods.setdefault(f.name, q)
            self._methods_by_path[path] = methods
        return methods

    def _may_be_module_call(self, callee: str) -> bool:
        """Whether some leading part of dotted ``callee`` names a module of the tree (else
        it resolves to nothing from any file: `torch.cat`, `np.zeros`)."""
        known = self._module_calls.get(callee)
        if known is None:
            parts = callee.split(".")
            known = self._module_calls[callee] = any(".".join(parts[:split]) in self.by_module for split in range(len(parts) - 1, 0, -1))
        return known

    def _resolve(self, path: str, caller: str | None, callee: str) -> list[FuncKey]:
        table = self.qualnames.get(path, {})
        if callee == "cls" or callee == "self.__class__":
            cls = _class_of(caller)
            return [(path, f"{cls}.__init__")] if cls and f"{cls}.__init__" in table else []
        parts = callee.split(".")
        if parts[0] in ("self", "cls") and len(parts) == 2:
            name = parts[1]
            cls = _class_of(caller)
            if cls and f"{cls}.{name}" in table:
                return [(path, f"{cls}.{name}")]
            local = self._methods_in(path).get(name)
            if local:
                return [(path, local)]
            candidates = self.methods_by_name.get(name, [])
            return list(candidates) if len(candidates) == 1 else []
        if len(parts) == 1:
            name = parts[0]
            if caller and f"{caller}.<locals>.{name}" in table:
                return [(path, f"{caller}.<locals>.{name}")]
            if name in table:
                return [(path, name)]
            if f"{name}.__init__" in table:
                return [(path, f"{name}.__init__")]
            return []
        # dotted: module.function, module.Class.method, module.Class
        for split in range(len(parts) - 1, 0, -1):
            module, qual = ".".join(parts[:split]), ".".join(parts[split:])
            if module in self.by_module:
                found = self._in_module(module, qual, path)
                if found:
                    return found
        return []


@lru_cache(maxsize=1 << 18)  # asked of every call site several times per scan
def _last_name(callee: str) -> str:
    """The name a callee text ends in (`run` in `self.pool.run()[]`, the handed function's)."""
    last = callee.rpartition(HANDED)[2].rpartition(".")[2]
    while last.endswith("()") or last.endswith("[]"):
        last = last[:-2]
    return last


#: rounds of arguments flowed and functions reached again at most (``build_model``)
MAX_DEMAND_ROUNDS = 3
#: rounds of ``Resolver.flow_arguments`` at most (each follows arguments one call further)
MAX_FLOW_ROUNDS = 4
#: most places one parameter's values are taken from
MAX_ARGUMENT_SOURCES = 8
#: the answer for callees no function of the tree is named after (shared: callers only read it)
_NOTHING: list[FuncKey] = []
_NOTHING_HOW: list[tuple[FuncKey, str]] = []


def _class_of(qualname: str | None) -> str | None:
    if not qualname or "." not in qualname:
        return None
    head = qualname.rsplit(".", 1)[0]
    return None if head.endswith("<locals>") else head


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
    resolved: dict[tuple[str, int, int, str], list[FuncKey]] = {}
    raw_edges: list[tuple[str, CallSite | PlainCall, FuncKey, str]] = []
    digest, file_digests, lands_digest = resolver.tables_digests(earlier, unchanged or frozenset())
    reuse = earlier is not None and earlier.digest == digest and bool(unchanged) and earlier.whole == whole
    roots = root_functions(facts, functions, rs)
    typed: Demand | None = None
    if reuse:
        resolver.use_parameters(dict(earlier.parameters))  # type: ignore[union-attr]
        typed = earlier.typed  # type: ignore[union-attr]
    elif whole:
        for path in sorted(facts):  # every answer asked once: what they read flows below
            for _ in _typed_sites(resolver, path, facts[path].calls, None):
                pass
        resolver.flow_arguments()
    else:
        # the answers asked read parameters: what the calls pass into them may reach more
        # functions, whose answers read more parameters
        typed = _demand(resolver, facts, functions, roots)
        for _ in range(MAX_DEMAND_ROUNDS):
            demanded = len(resolver.types.demanded)
            resolver.flow_arguments()
            typed = _demand(resolver, facts, functions, roots)
            if len(resolver.types.demanded) == demanded:
                break
    targets: list[FuncKey] = list(earlier.targets) if reuse else []  # type: ignore[union-attr]
    numbers = {key: n for n, key in enumerate(targets)}
    by_file: dict[str, FileResolutions] = {}
    edge_sites: dict[str, list[CallSite | PlainCall]] = {}
    edge_counts: list[tuple[str, int]] = []  # (path, its edges in ``raw_edges``), in order
    edge_calls: list[int] = []  # the index in its file's calls of each edge's site
    resolved_here: list[str] = []
    asked = dict(earlier.asked) if reuse else {}  # type: ignore[union-attr]
    for path in sorted(facts):
        flat = earlier.files.get(path) if reuse and path in unchanged else None  # type: ignore[union-attr, operator]
        if flat is None:
            questions: set[tuple[str | None, str]] = set()
            flat = _resolve_file(resolver, path, facts[path].calls, targets, numbers, typed, questions)
            asked[path] = _asked_of(resolver, path, questions)
            resolved_here.append(path)
        by_file[path] = flat
    # worked out afresh when what flows into parameters may differ (it comes from every file's
    # typed answers: a changed file asks other questions, and read a parameter before or now)
    # or the changed files reach other functions than before
    if reuse and (any(asked[path] != earlier.asked.get(path) and (asked[path][1] or earlier.asked.get(path, ("", True))[1])  # type: ignore[union-attr]
                      for path in resolved_here)
                  or (typed is not None and _flat_demand(facts, functions, by_file, targets, roots) != typed)):
        return build_model(facts, rs, None, None, package, whole, gates, gates_unchanged)
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

    constants = _env_constants(facts)
    derived = _derived_names(facts)
    wrapped = _wrapped_names(facts)
    env_helpers = _env_helpers(facts, functions, raw_edges)
    model = TreeModel(
        facts=facts, functions=functions, edges=[], callers=defaultdict(list), env_helpers=env_helpers,
        constants=constants, derived=derived, wrapped=wrapped, gated_emitter_helpers=set(), freq_default={}, freq_any={},
        entry_switches=defaultdict(set), resolver=resolver, resolved_calls=resolved,
        resolutions=Resolutions(digest, tuple(targets), by_file, tuple(sorted(resolver.types.parameters.items())), whole, typed, asked,
                                file_digests, lands_digest),
        fact_sites={path: fact_sites(ff) for path, ff in facts.items()}, edge_sites=edge_sites,
        resolved_files=tuple(resolved_here), options=OptionTable.of((o for ff in facts.values() for o in ff.options),
                                                                    (n for ff in facts.values() for n in ff.foreign_stores),
                                                                    (n for ff in facts.values() for n in ff.own_attributes)),
    )
    void = void_env_helpers(model, rs)
    model.void_helpers = frozenset(void)
    model.env_helpers.update(void)
    model.accessors = accessors(model, model.void_helpers)
    model.gates_digest, model.file_gates_digests = gates_digest(model, gates, gates_unchanged)
    if gates is not None:
        if gates.digest == model.gates_digest:
            _take_site_gates(model, gates, gates_unchanged)
        for path in gates_unchanged:
            model.use_rows.update(((path, var), rows) for var, rows in gates.uses.get(path, {}).items())
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
    gate_instance_methods(model, rs, lambda path, function, gates: site_switch(model, path, function, gates, rs),
                          unresolved_names(model))
    model.event_loops = event_loop_roots(model, rs)
    gate_event_loops(model, rs, list(model.event_loops), unresolved_names(model))
    _gate_feature_classes(model, rs)
    mark_host_syncs(model)
    model.gated_emitter_helpers = _gated_emitter_helpers(model, rs)
    propagate(model, rs)
    model.debug_functions = _debug_functions(model, rs)
    return model


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


def root_functions(facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef], rs: RuleSet) -> list[FuncKey]:
    """The functions the hot roots of the rules match and those holding an event loop, sorted."""
    names = {r.name for r in rs.hot_roots}
    found = {key for key, f in functions.items() if f.name in names and rs.hot_root_for(f.name, f.class_name, key[0]) is not None}
    for path, ff in facts.items():
        found.update((path, loop.function) for loop in ff.event_loops if (path, loop.function) in functions)
    return sorted(found)


@record
@dataclass(frozen=True)
class Demand:
    """The calls ``build_model(whole=False)`` resolves through the types: those of the
    functions a hot root reaches (how often code runs, what a switch turns on there), and
    every call named like an env-reading helper (which switches are read where) or like a
    function holding an event loop (which option picks the loop); the others by name, as before the types (Jarvis asks on demand from its entry functions)."""

    functions: frozenset[FuncKey]
    #: the names of env-reading helpers
    names: frozenset[str]


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


def _helper_names(helpers: set[FuncKey], returned_calls) -> frozenset[str]:
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


def _typed_sites(resolver: Resolver, path: str, calls, typed: Demand | None, asked: set | None = None):
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


#: how an edge was found (``Edge.how``), in the order of their codes in ``FileResolutions``
HOWS = ("name", "fallback", "self", "attribute", "local", "module", "super", "dispatch", "constructor",
        "__call__", "forward", "inherited", "override", "subclass", "result", "callback", "property")
#: after an attribute chain, the key of its read's answer among the calls' (``resolve_read``)
READ = "\0read"
HOW_CODES = {how: code for code, how in enumerate(HOWS)}


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


#: not in ``TreeModel.gate_cache`` yet (None is a cached answer: no switch)
_UNRESOLVED = object()
#: in ``TreeModel.gate_cache`` while the gate is being resolved
_RESOLVING = object()


@dataclass(frozen=True, slots=True)
class _Shaped:
    """A ``TreeModel.gate_cache`` answer a gate cycle shaped (``TreeModel.gate_cycles``)."""

    switch: SwitchRef | None


def resolve_gate(model: TreeModel, path: str, function: str | None, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    """The switch a gate operand stands for, when the guarded code runs only with it set."""
    key = (path, function, gate)
    switch = model.gate_cache.get(key, _UNRESOLVED)
    if switch is _UNRESOLVED:
        model.gate_cache[key] = _RESOLVING
        model.gates_resolving.append(key)
        cycles = model.gate_cycles
        switch = _resolve_gate(model, path, function, gate, rs)
        model.gates_resolving.pop()
        model.gate_cache[key] = switch if model.gate_cycles == cycles else _Shaped(switch)
    elif switch is _RESOLVING:
        # a gate that leads back to itself (through a helper's) has no switch; when through
        # other gates, what those resolve to depends on which of them was asked first
        if model.gates_resolving[-1] != key:
            model.gate_cycles += 1
        return None
    elif switch.__class__ is _Shaped:
        model.gate_cycles += 1
        return switch.switch
    return switch  # type: ignore[return-value]


#: most imports a module name is followed through to the module that assigns it
MAX_REEXPORTS = 4


def _exported(model: TreeModel, ref: str) -> list[tuple[str, str]]:
    """(file, name) of a module's name ``ref`` (`pkg.mod.X`) in each file of that module, and
    through the imports that bring it there from another module (`from pkg.base import X`)."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    work = [ref]
    while work and len(seen) < MAX_REEXPORTS:
        dotted = work.pop()
        if dotted in seen or "." not in dotted:
            continue
        seen.add(dotted)
        module, name = dotted.rsplit(".", 1)
        for other in model.resolver.by_module.get(module, ()):
            out.append((other, name))
            origin = next((o for n, o in model.facts[other].aliases if n == name), None) if other in model.facts else None
            if origin is not None and origin != dotted:
                work.append(origin)
    return out


def _resolve_gate(model: TreeModel, path: str, function: str | None, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    option = option_gate(model.options, rs.defaults, gate)
    if option is not NOT_OPTION:
        return option
    if gate.kind == "env" and not (rs.defaults is not None and gate.ref in rs.defaults.env):
        registry = registry_env_gate(model.options, gate)
        if registry is not NOT_OPTION:
            return registry
    if gate.kind == "call" and model.wrapped:
        # a predicate of a wrapped option (`self.algo.is_none()`), negated or not
        option = _wrapped_predicate(model, path, function, gate, rs)
        if option is not NOT_OPTION:
            return option
    if not gate.active_when_set:
        return None
    if gate.kind == "env":
        if gate.ref.startswith("param:") or gate.ref == "?" or rs.defaults is not None and gate.ref in rs.defaults.env:
            return None  # (an env var the deployment sets: its code runs)
        return env_switch(gate.ref)
    if gate.kind == "level":
        return LEVEL_SWITCH
    if gate.kind == "call":
        if gate.level:
            # `resolve_level() >= Level.WARN`: the value it returns when no exit is taken
            switch = _fallback_gate(model, path, function, gate.ref, gate.level, rs)
            if switch is not NOT_OPTION:
                return switch
        for target, _ in model.resolver.resolve_how(path, function, gate.ref):
            predicate = model.functions.get(target)
            if predicate is not None and predicate.returned_test:
                # a predicate over options (`self.runner._elastic_enabled()`), or over registry
                # reads whose defaults keep it false: the setting its test needs
                option = next((s for s in gate_switches(model, target[0], target[1], predicate.returned_test, rs)
                               if s.kind == "option" or s.kind == "env" and s.name in model.options.env), None)
                if option is not None:
                    return option
            if predicate is not None and predicate.false_entry_gates:
                # false unless its first entry gates hold (`if not envs.X.get(): return False`): what they need
                needed = gate_switches(model, target[0], target[1], predicate.false_entry_gates, rs)
                if needed:
                    return needed[0]
        for target in model.resolver.resolve(path, function, gate.ref):
            if target in model.env_helpers and target not in model.void_helpers:
                switches = helper_switches(model, target, gate.args)
                debug_like = rs.debug_name_re.search(target[1].rsplit(".", 1)[-1]) or any(
                    rs.category_of(v) != "config" for v in switches if v != "<dynamic>"
                )
                # a helper over config switches (`_should_compact()`) decides work, not debug output
                return env_switch(switches[0]) if debug_like else None
        return None
    if gate.kind == "name":
        ref = gate.ref
        # a nested function's free name is the enclosing function's local
        function = closure_of(gate) or function
        if function is not None and "." not in ref and (
                (path, f"{function}::{ref}") not in model.derived or PARAM_FRESH in gate.args):
            # a parameter the function does not rebind: what its callers hand it
            option = parameter_gate(model, (path, function), gate, rs)
            if option is not NOT_OPTION:
                return option
        for key in _name_keys(path, function, ref):
            # a name a gate tests for truth holds when its assignments' gates do (compared
            # with something, an operand, it stands for the env value it holds)
            if key in model.derived and "operand" not in gate.args:
                switch, known = _derived_switch(model, path, key, rs)
                if switch is not None or known:
                    return switch
            if key in model.constants:
                return env_switch(model.constants[key])
            if key in model.derived and gate.level and not gate.level.startswith("param:"):
                # `level = resolve_level()` ... `if level >= Level.WARN:`
                switch = _fallback_name_gate(model, path, key, gate.level, rs)
                if switch is not NOT_OPTION:
                    return switch
            if key in model.derived and gate.level.isdigit() and int(gate.level) > 1:
                # compared with a level above on/off (`< 0`, `== 0` are sanity checks of sizes
                # as often): the value a helper of the tree returned
                var = _helper_value(model, path, key)
                if var is not None:
                    return env_switch(var)
        if "." in ref and not ref.startswith("self."):
            for other, name in _exported(model, ref):
                # a module name set from a switch there (`from .flags import TRACE_ON`)
                if (other, name) in model.derived and "operand" not in gate.args:
                    switch, known = _derived_switch(model, other, (other, name), rs)
                    if switch is not None or known:
                        return switch
                if (other, name) in model.constants:
                    return env_switch(model.constants[(other, name)])
        if "." in ref and "operand" not in gate.args:
            # `self.pool.window is not None`: judged by the assignments of the pool's class
            ignored = rs.defaults.ignore_paths.search if rs.defaults is not None else None
            switch, known = receiver_attribute_switch(
                model, model.resolver.types, path, function, ref,
                lambda where, key: _derived_switch(model, where, key, rs), ignored)
            if switch is not None or known:
                return switch
        switch = _switch_of_result(model, path, function, ref, rs)
        if switch is not None:
            return switch
        leaf = ref.rsplit(".", 1)[-1]
        if "operand" not in gate.args and rs.flag_name_re.fullmatch(leaf):
            return SwitchRef("flag", ref)
    return None


def _name_keys(path: str, function: str | None, name: str) -> tuple[tuple[str, str], ...]:
    """Where a name a gate reads of ``function`` may be kept, as ``_name_key`` keys them: a
    local of the function, a module name, an attribute of its class."""
    return (path, f"{function}::{name}"), (path, name), (path, f"{_class_of(function)}.{name}")


def _wrapped_predicate(model: TreeModel, path: str, function: str | None, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    receiver, _, method = gate.ref.rpartition(".")
    if not method.startswith("is_") or not receiver:
        return NOT_OPTION
    for key in _name_keys(path, function, receiver):
        if key in model.wrapped:
            return predicate_gate(model.options, rs.defaults, model.wrapped[key], method, gate.active_when_set)
    return NOT_OPTION


def _helper_value(model: TreeModel, path: str, key: tuple[str, str]) -> str | None:
    """The env var a name compared with a level holds when every assignment to it is the
    value of an env helper of the tree (`_LEVEL = _get_env("X_LEVEL", int, 0)` then `if
    _LEVEL >= 3:`), as a module constant holds the value of a read. Only for levels: a value
    a helper builds around the read (`(ptr, envs.X)`) tested against None stands for no switch."""
    found: str | None = None
    for function, refs in model.derived[key]:
        if len(refs) != 1 or refs[0].kind != "call" or not refs[0].active_when_set:
            return None
        targets = [t for t in model.resolver.resolve(path, function, refs[0].ref)
                   if t in model.env_helpers and t not in model.void_helpers]
        if not targets:
            return None
        var = helper_switches(model, targets[0], refs[0].args)[0]
        if var == "<dynamic>" or found not in (None, var):
            return None
        found = var
    return found


def _level_number(model: TreeModel, text: str) -> int | None:
    """The int a level names: a literal, a class's constant (`name:pkg.Level.WARN`, looked up by
    the class's last name), and `+1` past one; None when unknown or namesakes disagree."""
    bump = text.endswith("+1")
    text = text[:-2] if bump else text
    text = text.removeprefix("name:")
    if text.lstrip("-").isdigit():
        return int(text) + bump
    if model.class_levels is None:
        table: dict[str, dict[str, int | None]] = {}
        for ff in model.facts.values():
            for c in ff.types.classes:
                members = table.setdefault(c.qualname.rsplit(".", 1)[-1], {})
                for name, value in c.levels:
                    members[name] = value if members.get(name, value) == value else None
        model.class_levels = table
    owner, _, member = text.rpartition(".")
    found = model.class_levels.get(owner.rsplit(".", 1)[-1], {}).get(member) if owner else None
    return None if found is None else found + bump


def _fallback_gate(model: TreeModel, path: str, function: str | None, callee: str, level: str,
                   rs: RuleSet) -> SwitchRef | None:
    """A call compared with a level (`resolve_level() >= Level.WARN`), decided by the value the
    function returns when none of its exits is taken (``FunctionDef.fallback_return``), when
    each exit's condition stands for a switch that keeps it off: that switch when the value is
    below the level, None when it reaches it; ``NOT_OPTION`` when that cannot be told."""
    needed = _level_number(model, level)
    if needed is None:
        return NOT_OPTION
    for target in model.resolver.resolve(path, function, callee):
        f = model.functions.get(target)
        if f is None or not f.fallback_return:
            continue
        value = _level_number(model, f.fallback_return)
        exits = [gate_switches(model, target[0], target[1], (ref,), rs) for ref in f.fallback_gates]
        if value is None or not all(exits):
            return NOT_OPTION
        return None if value >= needed else exits[0][0]
    return NOT_OPTION


def _fallback_name_gate(model: TreeModel, path: str, key: tuple[str, str], level: str, rs: RuleSet) -> SwitchRef | None:
    """A name compared with a level, every assignment of which is such a call's value below it
    or stands under a switch off by default (`level = resolve_level()`; `if flag: level =
    Level.STRICT`): the first switch; None when one reaches it; ``NOT_OPTION`` otherwise."""
    found: list[SwitchRef] = []
    decided = False
    for function, refs in model.derived[key]:
        if len(refs) == 1 and refs[0].kind == "call" and refs[0].active_when_set:
            switch = _fallback_gate(model, path, function, refs[0].ref, level, rs)
            if switch is None:
                return None
            if switch is not NOT_OPTION:
                found.append(switch)
                decided = True
                continue
        switches = gate_switches(model, path, function, refs, rs)
        if not switches:
            return NOT_OPTION
        found.append(switches[0])
    return found[0] if decided else NOT_OPTION


def _derived_switch(model: TreeModel, path: str, key: tuple[str, str], rs: RuleSet) -> tuple[SwitchRef | None, bool]:
    """(the switch a name is truthy only under, whether that is known): the switch of the
    first of its assignments when each assignment's value is gated by one (`self.tracer =
    Tracer() if env_flag("T") else None`); known to be none when an assignment is truthy with
    no env set (`MODE_ON = getenv("M", "block") == "block"`)."""
    found: list[SwitchRef] = []
    for function, refs in model.derived[key]:
        if refs and all(r == DEFAULT_ON for r in refs):
            return None, True
        switches = gate_switches(model, path, function, refs, rs)
        if not switches:
            return None, False
        found.append(switches[0])
    return (found[0] if found else None), bool(found)


def _switch_of_result(model: TreeModel, path: str, function: str | None, name: str, rs: RuleSet) -> SwitchRef | None:
    """The switch of a local that holds what a call returns, when the function called
    returns early unless a switch is set (`bd = BreakdownLogger.get()` ... `if bd is not
    None:`, where `get` starts with `if not _ENABLED: return None`)."""
    if function is None or "." in name:
        return None
    if model.entry_gated_names is None:
        model.entry_gated_names = {f.name for f in model.functions.values() if f.entry_gates}
    bindings = model.resolver.types.bindings
    if not bindings.binds(path, name):
        return None
    for _, source in bindings.get((path, f"def:{function}", name), ()):
        if not source.startswith("c:") or source.rpartition(".")[2].rpartition(":")[2] not in model.entry_gated_names:
            continue
        for target, _ in model.resolver.resolve_how(path, function, source[2:]):
            f = model.functions.get(target)
            switches = gate_switches(model, target[0], target[1], f.entry_gates, rs) if f is not None else ()
            if switches:
                return switches[0]
    return None


def gate_switches(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], rs: RuleSet) -> list[SwitchRef]:
    """The switches gates stand for, each once, in order: an operand of a disjunction
    (``GateRef.any_of``) only when every operand of it stands for a switch."""
    resolved = [(gate, resolve_gate(model, path, function, gate, rs)) for gate in gates]
    failed = {gate.any_of for gate, switch in resolved if gate.any_of and switch is None}
    out: list[SwitchRef] = []
    seen: set[int] = set()
    for gate, switch in resolved:
        if switch is None or gate.any_of in failed or gate.any_of in seen:
            continue
        if gate.any_of:
            seen.add(gate.any_of)  # a disjunction stands for its first operand's switch
        if switch not in out:
            out.append(switch)
    return out


def _site_gates(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...],
                rs: RuleSet) -> tuple[tuple[SwitchRef, ...], SwitchRef | None]:
    """(switches, innermost switch) of a site's gates, computed once per gates."""
    if path in model.call_answers:
        # a call's own gates object, in a file whose answers were taken: found by identity
        # (no hash of its gates; the facts hold every such object, so no other has its id)
        calls = model.call_numbers.get(path)
        if calls is None:
            calls = model.call_numbers[path] = _call_numbers(model, path)
        n = calls.get((function, id(gates)), -1)
        if n >= 0:
            return model.taken_gates.answers[n]  # type: ignore[union-attr]
    key = (path, function, gates)
    hit = model.switch_cache.get(key)
    if hit is not None:
        return hit
    if path in model.pending_gates:
        _fill_site_gates(model, path)
        hit = model.switch_cache.get(key)
        if hit is not None:
            return hit
    cycles = model.gate_cycles
    out = gate_switches(model, path, function, gates, rs)
    if model.gate_cycles != cycles:
        model.shaped_sites.add(key)
    inner: SwitchRef | None = None
    if out:
        env = [s for s in out if s.kind in ("env", "dynamic")]
        inner = (env or out)[-1]
    model.switch_cache[key] = (tuple(out), inner)
    return tuple(out), inner


def site_switches(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], rs: RuleSet) -> list[SwitchRef]:
    """The switches gating a site: its gates', else its module's platform when that is not
    the deployment's."""
    found = list(_site_gates(model, path, function, gates, rs)[0]) if gates else []
    if not found:
        elsewhere = _module_switch(model, path, rs)
        if elsewhere is not None:
            found.append(elsewhere)
    return found


def site_switch(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], rs: RuleSet) -> SwitchRef | None:
    """The innermost env switch gating a site (a level gate or flag when no env var does; the
    module's platform when nothing does)."""
    inner = _site_gates(model, path, function, gates, rs)[1] if gates else None
    return inner if inner is not None else _module_switch(model, path, rs)


def _module_switch(model: TreeModel, path: str, rs: RuleSet) -> SwitchRef | None:
    known = model.module_switches
    if path not in known:
        known[path] = module_switch(rs.defaults, path)
    return known[path]


_SITE_GATES = attrgetter("function", "gates")
#: a gate's fields as a plain tuple, whose repr is the interpreter's own code
_GATE_FIELDS = attrgetter(*(f.name for f in fields(GateRef)))


def _plain(gates: tuple[GateRef, ...]) -> tuple[tuple, ...]:
    return tuple(map(_GATE_FIELDS, gates))


def gates_digest(model: TreeModel, earlier: SiteGates | None = None,
                 unchanged: AbstractSet[str] = frozenset()) -> tuple[str, dict[str, str]]:
    """Digest of everything a gate's switch depends on besides the gate and where it is
    (``_resolve_gate`` and what it calls): the resolution tables and what flows into
    parameters, the env helpers with their parameters and defaults, the names that hold an
    env value, and each file's part (``_file_gates_digest``), taken from ``earlier`` for the
    files in ``unchanged``; with the digest of each file's part.  The rules are the cache's
    own key."""
    h = hashlib.blake2b(digest_size=16)
    resolutions = model.resolutions
    assert resolutions is not None
    functions = model.functions
    helpers = sorted(model.env_helpers.items())
    for part in (
        resolutions.digest, resolutions.parameters, helpers, sorted(model.void_helpers),
        [(functions[key].params, functions[key].param_defaults) for key, _ in helpers],
        sorted(model.constants.items()),
        sorted((name, [o.value for o in found]) for name, found in model.options.declared.items()), sorted(model.options.ambiguous),
        sorted((k, repr(v)) for k, v in model.options.env.items()),
    ):
        h.update(repr(part).encode("utf-8", "surrogateescape") + b"\0")
    known = earlier.file_digests if earlier is not None else {}
    files: dict[str, str] = {}
    for path in sorted(model.facts):
        digest = known.get(path) if path in unchanged else None
        if digest is None:
            digest = _file_gates_digest(model.facts[path])
        files[path] = digest
        h.update(f"{path}\0{digest}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest(), files


def _file_gates_digest(ff: FileFacts) -> str:
    """Digest of what of one file any gate's switch may read: the gates of the values of the
    names it assigns (``FileFacts.derived``), the entry gates and returned tests of its
    functions, the options it declares and stores, and the names it imports (a gate on a name
    another module imports from it is followed through them: ``_exported``)."""
    part = ([(function, name, _plain(gates)) for function, name, gates in ff.derived], ff.aliases,
            [(f.qualname, _plain(f.entry_gates)) for f in ff.functions if f.entry_gates],
            [(f.qualname, _plain(f.returned_test)) for f in ff.functions if f.returned_test],
            sorted((o.name, o.value, o.copied) for o in ff.options), ff.foreign_stores,
            # what a gate on a parameter reads of the callers (``param_gates``)
            ff.passed_values, [(f.qualname, f.const_defaults) for f in ff.functions if f.const_defaults], ff.wrapped)
    return hashlib.blake2b(repr(part).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def site_gate_keys(path: str, ff: FileFacts,
                   positions: dict[tuple[str | None, int], int] | None = None,
                   ) -> dict[tuple[str, str | None, tuple[GateRef, ...]], int]:
    """The ``TreeModel.switch_cache`` keys of a file's sites, each once and numbered, in an
    order that depends on its facts alone: calls, env reads, messages built into locals, gated
    effects.  ``positions``: filled with the number of each (function, id of gates) of them."""
    # sites share gate tuples: those seen are skipped by identity before the keys hash them
    by_identity = {(function, id(gates)): gates for rows in (ff.calls, ff.env_reads, ff.built_messages)
                   for function, gates in map(_SITE_GATES, rows) if gates}
    keys: dict[tuple[str, str | None, tuple[GateRef, ...]], int] = {}
    for (function, ident), gates in by_identity.items():
        n = keys.setdefault((path, function, gates), len(keys))
        if positions is not None:
            positions[(function, ident)] = n
    for _, function, gates, _ in ff.gated_effects:
        if gates:
            keys.setdefault((path, function, gates), len(keys))
    return keys


def _take_site_gates(model: TreeModel, gates: SiteGates, unchanged: AbstractSet[str]) -> None:
    """Take the answers of ``gates`` for the files in ``unchanged``: each file's go into
    ``switch_cache`` when one of its sites is first asked (``_fill_site_gates``); the answers
    of its calls and its ``gate_rows`` are taken as they are."""
    model.taken_gates = gates
    pending = model.pending_gates
    for path in unchanged:
        row = gates.files.get(path)
        if row is None or path not in model.facts:
            continue
        pending[path] = row
        calls = gates.calls.get(path)
        if calls is not None:
            answers = array("i")
            answers.frombytes(calls)
            if len(answers) == len(model.facts[path].calls):
                model.call_answers[path] = answers
        rows = gates.rows.get(path)
        if rows is not None:
            model.gate_rows[path] = rows


def _call_numbers(model: TreeModel, path: str) -> dict[tuple[str | None, int], int]:
    """(function, id of gates) -> the taken answer's number, of each call of ``path`` with gates."""
    return {(function, id(gates)): n for (function, gates), n in zip(map(_SITE_GATES, model.facts[path].calls),
                                                                      model.call_answers[path]) if gates}


def _fill_site_gates(model: TreeModel, path: str) -> None:
    """Put the taken answers of ``path``'s sites into ``switch_cache``."""
    row = model.pending_gates.pop(path)
    keys = site_gate_keys(path, model.facts[path])
    if len(keys) != len(row):
        return
    cache = model.switch_cache
    answers = model.taken_gates.answers  # type: ignore[union-attr]
    for key, n in zip(keys, row):
        if n >= 0:
            cache[key] = answers[n]


def site_gates(model: TreeModel, earlier: SiteGates | None = None,
               unchanged: AbstractSet[str] = frozenset()) -> SiteGates:
    """The ``SiteGates`` of ``model`` as asked so far (the rows of ``earlier`` for the files
    in ``unchanged`` when its digest is this model's), but for the answers a gate cycle
    shaped (``TreeModel.shaped_sites``: they may depend on the order gates were asked in);
    a file's ``gate_rows`` only when none of its answers was shaped."""
    carried = earlier is not None and earlier.digest == model.gates_digest
    table: list[tuple[tuple[SwitchRef, ...], SwitchRef | None]] = list(earlier.answers) if carried else []  # type: ignore[union-attr]
    number = {answer: n for n, answer in enumerate(table)}
    cache = model.switch_cache
    shaped = model.shaped_sites
    files: dict[str, tuple[int, ...]] = {}
    calls: dict[str, bytes] = {}
    rows: dict[str, tuple] = {}
    for path, ff in model.facts.items():
        if carried and path in unchanged and path in earlier.files:  # type: ignore[union-attr]
            files[path] = earlier.files[path]  # type: ignore[union-attr]
            tables: tuple[tuple[dict[str, Any], dict[str, Any]], ...] = ((calls, earlier.calls), (rows, earlier.rows))  # type: ignore[union-attr]
            for kept, theirs in tables:
                if path in theirs:
                    kept[path] = theirs[path]
            continue
        numbers = []
        positions: dict[tuple[str | None, int], int] = {}
        none_shaped = True
        for key in site_gate_keys(path, ff, positions):
            answer = cache.get(key)
            if answer is None or key in shaped:
                none_shaped = none_shaped and key not in shaped
                numbers.append(-1)
                continue
            n = number.get(answer)
            if n is None:
                n = number[answer] = len(table)
                table.append(answer)
            numbers.append(n)
        files[path] = tuple(numbers)
        calls[path] = array("i", [numbers[positions[(function, id(gates))]] if gates else -1
                                  for function, gates in map(_SITE_GATES, ff.calls)]).tobytes()
        if none_shaped and path in model.gate_rows:
            rows[path] = model.gate_rows[path]
    uses: dict[str, dict[str, tuple]] = {}
    for (path, var), found in model.use_rows.items():
        uses.setdefault(path, {})[var] = found
    return SiteGates(model.gates_digest, tuple(table), files, model.file_gates_digests, calls, rows, uses)


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
    env var of a debug category or with a debug-like name; not a configuration value (a size,
    a limit, a mode), which decides work, not output.

    By name on purpose: the behaviour categories (``analysis.categories``) are worked out from
    the gated sites this decides, so using them here would make a switch's category depend on
    itself."""
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
        root_rule = rs.hot_root_for(f.name, f.class_name, key[0]) if key in model.roots else None
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
    return _edges_back(_shortest_chains({start: "step"}, out_edges, only_ungated=default_only), key)


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
