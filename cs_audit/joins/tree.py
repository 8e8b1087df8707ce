"""The joined model of a tree (``TreeModel``): what ``callgraph.build_model`` fills in and
the analyses read, in a module of its own so that the joins it is built from can name it."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cs_audit.frequency import FrequencyName
from cs_audit.joins.arguments import ArgumentTests, Context
from cs_audit.joins.defaults import (
    OptionTable,
)
from cs_audit.joins.kept import Resolutions, SiteGates
from cs_audit.joins.reach import Edge
from cs_audit.joins.resolver import Resolver
from cs_audit.model import (
    CallSite,
    EventLoop,
    FileFacts,
    FuncKey,
    FunctionDef,
    GateRef,
    SwitchRef,
)
from cs_audit.ruleset import HotRoot

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
    freq_default: dict[FuncKey, FrequencyName]
    freq_any: dict[FuncKey, FrequencyName]
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
    #: the names (keyed as ``derived``) some assignment gives a falsy constant (``FileFacts.falsy_names``)
    falsy: frozenset[tuple[str, str]] = frozenset()
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
    roots: dict[FuncKey, FrequencyName] = field(default_factory=dict)
    #: the functions the root rules match, with the rule that decides each (``joins.roots``)
    root_rules: dict[FuncKey, HotRoot] = field(default_factory=dict)
    #: per function reached from a root: the edge into it on a shortest chain from a root,
    #: through default-on edges (``hot_via_default``) or any (``hot_via_any``)
    hot_via_default: dict[FuncKey, Edge] = field(default_factory=dict)
    hot_via_any: dict[FuncKey, Edge] = field(default_factory=dict)
    #: per function a root reaches only past a guard (a rare or error branch up its chain, a
    #: memoised function): that guard (``joins.runs``), through default-on edges or any
    demoted_default: dict[FuncKey, Demotion] = field(default_factory=dict)
    demoted_any: dict[FuncKey, Demotion] = field(default_factory=dict)
    #: the parameter tests of the tree's functions and what calls hand them (``joins.arguments``)
    argument_tests: ArgumentTests | None = None
    #: per function with such tests, how often a hot root enters it in each context (the
    #: literals its tested parameters hold), through default-on edges or any
    argument_freq_default: dict[FuncKey, dict[Context, FrequencyName]] = field(default_factory=dict)
    argument_freq_any: dict[FuncKey, dict[Context, FrequencyName]] = field(default_factory=dict)
    #: the functions only a replayed root (a model's forward, ``HotRoot.replayed``) reaches by
    #: default, when the deployment replays captured graphs
    replayed: set[FuncKey] = field(default_factory=set)
    #: classes the tree constructs only under an option (``components.gate_instance_methods``): their
    #: methods that are hot roots run only with it (``reach.propagate``)
    gated_classes: dict[str, SwitchRef] = field(default_factory=dict)
    #: (path, method) -> the switch every call of it needs, a few calls up (``gates._setter_switch``)
    setter_switches: dict[FuncKey, SwitchRef | None] = field(default_factory=dict)
    #: the classes the tree defines, less protocols (``components.held_classes``, when first asked)
    class_names: frozenset[str] | None = None
    #: event loops every call of which needs an option (``components.gate_event_loops``)
    gated_roots: dict[FuncKey, SwitchRef] = field(default_factory=dict)
    #: per file, the platform switch of a module written for another platform (``_module_switch``)
    module_switches: dict[str, SwitchRef | None] = field(default_factory=dict)
    #: per file of an architecture the stated deployment does not load, its switch (``joins.served``)
    unserved: dict[str, SwitchRef] = field(default_factory=dict)
    #: modules of architectures only shared code loads: their roots need the architecture served
    unserved_roots: dict[str, SwitchRef] = field(default_factory=dict)
    #: while the edges get their switches: each function's callers (``param_gates``), as
    #: ``callers`` holds them once built
    pending_callers: dict[FuncKey, list] | None = None
    #: (path, name keyed as ``derived``) -> what each assignment to it wraps (``FileFacts.wrapped``)
    wrapped: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    #: (path, line, end line, callee's last name) -> ``PassedValues`` (``param_gates``, when first asked)
    passed_by_call: dict | None = None
    #: the calls that resolved to nothing, by their last name (``named_calls``, when first asked)
    unresolved_sites: dict[str, list[tuple[str, CallSite | PlainCall]]] | None = None
    #: per last name, its calls the build did not type, typed when first asked (``named_calls``)
    named_calls: dict[str, tuple] = field(default_factory=dict)
    #: the attribute names some code assigns on another object (``joins.attributes``, when first asked)
    foreign_attributes: frozenset[str] | None = None
    #: (path, class) -> {attribute: the class it holds when not None} of the attributes methods
    #: declare `Optional[C] = None` (``joins.attributes.held_attribute_switch``, when first asked)
    optional_attributes: dict[tuple[str, str], dict[str, str]] | None = None
    #: the options the tree declares, with their defaults (``joins.defaults``)
    options: OptionTable = field(default_factory=OptionTable)
    #: names of the functions that return early behind a gate (``_switch_of_result``)
    entry_gated_names: set[str] | None = None
    #: the fields records declare None, their stores, the keywords calls pass (``joins.fields``, when first asked)
    record_field_table: tuple | None = None
    #: a class's last name -> its int constants, those its namesakes agree on (``_level_number``)
    class_levels: dict[str, dict[str, int | None]] | None = None
    #: a class's last name -> its str constants, those its namesakes agree on (``_member_gate``)
    class_strings: dict[str, dict[str, str | None]] | None = None
    #: the roots that are roots because they hold an event loop (``joins.roots``), with their loops
    event_loops: dict[FuncKey, tuple[EventLoop, ...]] = field(default_factory=dict)
    #: configured roots whose steps are the times round a loop of theirs (``joins.roots.root_loops``)
    root_loops: dict[FuncKey, tuple[EventLoop, ...]] = field(default_factory=dict)
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
