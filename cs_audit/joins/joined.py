"""The joined model as the helpers of ``callgraph`` read it.

``callgraph.TreeModel`` imports ``env_helpers``, ``param_gates`` and ``host_data``, so they
cannot import it (no import cycles, type-checking imports included: tests/test_layers.py).
They take a ``JoinedModel`` instead: the fields they read or fill in, which ``TreeModel`` has
with these types (the type checker compares the two where callgraph hands its model over)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from cs_audit.joins.defaults import OptionTable
from cs_audit.joins.kept import Resolutions
from cs_audit.model import CallSite, FileFacts, FuncKey, FunctionDef, GateRef, PassedValues, PlainCall, SwitchRef
from cs_audit.ruleset import HotRoot


class CallEdge(Protocol):
    """A resolved call (``reach.Edge``)."""

    @property
    def caller(self) -> FuncKey | None: ...

    @property
    def site(self) -> CallSite | PlainCall: ...

    @property
    def path(self) -> str: ...

    @property
    def how(self) -> str: ...


class CallResolver(Protocol):
    """What resolves a call to the tree's functions (``resolver.Resolver``)."""

    #: dotted module name -> the files that hold it
    by_module: dict[str, list[str]]

    def resolve(self, path: str, caller: str | None, callee: str) -> list[FuncKey]: ...

    def resolve_how(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, str]]: ...

    def sites_by_last_name(self) -> dict[str, list[tuple[str, CallSite | PlainCall]]]: ...

    def _closest(self, paths: list[str], near: str) -> list[str]: ...


class JoinedModel(Protocol):
    """The fields of ``callgraph.TreeModel`` its helper modules read, and the caches they fill in."""

    facts: dict[str, FileFacts]
    functions: dict[FuncKey, FunctionDef]
    env_helpers: dict[FuncKey, tuple[tuple[str, ...], tuple[str, ...]]]
    constants: dict[tuple[str, str], str]
    #: (path, name key) -> (function, gates of the value) of each assignment (``FileFacts.derived``)
    derived: dict[tuple[str, str], list[tuple[str | None, tuple[GateRef, ...]]]]
    resolved_calls: dict[tuple[str, int, int, str], list[FuncKey]]
    fact_sites: dict[str, tuple[CallSite, ...]]
    edge_sites: dict[str, list[CallSite | PlainCall]]
    options: OptionTable
    pending_callers: dict[FuncKey, list] | None
    passed_by_call: dict[tuple[str, int, int, str], PassedValues] | None
    #: (``joins.fields``) the fields records declare None, their stores, the keywords calls pass
    record_field_table: tuple | None
    #: (``joins.components``) classes built only under a switch, by last name
    gated_classes: dict[str, SwitchRef]
    #: (``gates._setter_switch``) the switch every call of a method needs, as asked
    setter_switches: dict[FuncKey, SwitchRef | None]
    #: (``joins.components``) the classes the tree defines, less protocols, when first asked
    class_names: frozenset[str] | None
    unresolved_sites: dict[str, list[tuple[str, CallSite | PlainCall]]] | None
    named_calls: dict[str, tuple]
    resolutions: Resolutions | None
    #: the functions the root rules match, with the rule that decides each (``joins.roots``)
    root_rules: dict[FuncKey, HotRoot]

    @property
    def callers(self) -> Mapping[FuncKey, Sequence[CallEdge]]: ...

    @property
    def resolver(self) -> CallResolver: ...
