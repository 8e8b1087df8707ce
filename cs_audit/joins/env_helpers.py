"""Env helpers that return nothing, and which helpers are small accessors.

A value helper (``callgraph._env_helpers``) is a per-call read at each call site because its
result carries the read. A function that returns nothing pays the read on every call too when
the read decides whether its body runs (``_diag(name)`` logging when the switch is set,
``cptrace(level, ...)`` returning early below a level, a probe under ``if os.getenv(X):``):
each of its call sites is then a per-call read, like a value helper's.

A helper is an *accessor* when it is small and does nothing with the env but hand it on: its
reads are then reported only at its call sites. Any other hot function keeps its reads where
they are, which is where they get fixed.
"""

from __future__ import annotations

from collections.abc import Collection

from cs_audit.joins.joined import JoinedModel as TreeModel  # callgraph's, which imports this module
from cs_audit.model import ACCESSOR_BODY_LINES, FuncKey, FunctionDef, GateRef
from cs_audit.ruleset import RuleSet


def _gate_switches(model: TreeModel, key: FuncKey, gate: GateRef, value_helpers: dict) -> tuple[set[str], set[str]] | None:
    """(vars, parameter names) an env-deciding gate of function ``key`` reads, or None when the
    gate is not an env read made in the call (a flag, a level, a configuration attribute)."""
    path, function = key
    if gate.kind == "env":
        if gate.ref.startswith("param:"):
            return set(), {gate.ref[len("param:"):]}
        return ({gate.ref} if gate.ref != "?" else {"<dynamic>"}), set()
    if gate.kind == "call":
        for target in model.resolver.resolve(path, function, gate.ref):
            if target in value_helpers:
                return set(helper_switches(model, target, gate.args)), set()
        return None
    if gate.kind == "name":
        var = model.constants.get((path, f"{function}::{gate.ref}"))
        return ({var}, set()) if var else None
    return None


def void_env_helpers(model: TreeModel, rs: RuleSet) -> dict[FuncKey, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Small functions returning nothing whose body runs, on each call, behind an env read made
    in that call (an early return or an ``if`` over it): (vars, params) like ``env_helpers``."""
    value_helpers = model.env_helpers
    gates_of: dict[FuncKey, list[tuple[GateRef, ...]]] = {}
    for path in model.facts:
        for item in (*model.fact_sites.get(path, ()), *model.edge_sites.get(path, ())):
            if item.function is not None and not any(t in value_helpers for t in model.resolved_calls.get(
                    (path, item.line, item.end_line, item.callee), ())):
                gates_of.setdefault((path, item.function), []).append(item.gates)
    out: dict[FuncKey, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for key, f in model.functions.items():
        if f.returns_value or key in value_helpers or f.body_lines > ACCESSOR_BODY_LINES or is_once_function(f, rs):
            continue
        if key in model.root_rules:
            continue  # the engine calls a root: it is the hot code, not a helper of it
        # the env decides the whole body: an early return, or a gate every other site is under
        gates = list(f.entry_gates)
        site_gates = gates_of.get(key, [])
        if not gates and site_gates:
            common = set(site_gates[0]).intersection(*site_gates[1:])
            gates = [g for g in site_gates[0] if g in common]
        variables: set[str] = set()
        params: set[str] = set()
        for gate in gates:
            found = _gate_switches(model, key, gate, value_helpers)
            if found is not None:
                variables |= found[0]
                params |= found[1]
        if variables or params:
            out[key] = (tuple(sorted(variables)), tuple(sorted(params)))
    return out


def accessors(model: TreeModel, void: Collection[FuncKey]) -> frozenset[FuncKey]:
    """The env helpers whose own reads are reported at their call sites only: small ones whose
    every per-call read makes their result (a value helper) or decides their body (a void one)."""
    deciding: dict[FuncKey, bool] = {}
    for path, ff in model.facts.items():
        for read in ff.env_reads:
            if read.function is None or not read.per_call:
                continue
            key = (path, read.function)
            ok = read.returned or read.var_param is not None or key in void
            deciding[key] = deciding.get(key, True) and ok
    small = set()
    for key in model.env_helpers:
        f = model.functions.get(key)
        if f is not None and f.body_lines <= ACCESSOR_BODY_LINES and deciding.get(key, True):
            small.add(key)
    # an accessor carries a read it makes, or one another accessor hands it: a small helper
    # that only hands on a larger one's result carries nothing (that read is reported where
    # it is made, `require_gathered_buffer()` returning `require_mlp_tp_gather() or ...`)
    calls: dict[FuncKey, set[FuncKey]] = {key: set() for key in small}
    for path, sites in model.edge_sites.items():
        for site in sites:
            if site.function is not None and (path, site.function) in calls:
                calls[(path, site.function)].update(model.resolved_calls.get((path, site.line, site.end_line, site.callee), ()))
    carrying = {key for key in small if key in deciding}
    grown = True
    while grown:
        grown = False
        for key in small - carrying:
            if calls[key] & carrying:
                carrying.add(key)
                grown = True
    return frozenset(carrying)


def helper_switches(model: TreeModel, key: FuncKey, literal_args: tuple[str, ...] | tuple[str | None, ...]) -> list[str]:
    """The env vars a call of helper ``key`` with these literal arguments reads."""
    var_list, param_names = model.env_helpers[key]
    switches: list[str] = []
    f = model.functions[key]
    params = [p for p in f.params if p not in ("self", "cls")]
    defaults = dict(f.param_defaults)
    for name in param_names:
        if name in params:
            index = params.index(name)
            if index < len(literal_args) and literal_args[index] and not literal_args[index].startswith("kw:"):  # type: ignore[union-attr]
                switches.append(literal_args[index])  # type: ignore[arg-type]
            elif name in defaults:
                switches.append(defaults[name])
    switches.extend(v for v in var_list if v != "<dynamic>")
    return switches or ["<dynamic>"]


def is_once_function(f: FunctionDef | None, rs: RuleSet) -> bool:
    if f is None:
        return True
    return f.name in rs.once_functions or bool(set(f.decorators) & rs.once_decorators)
