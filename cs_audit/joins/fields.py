"""A record's field left falsy unless code a switch keeps off sets it.

A stats record declares `details: Details | None = None`, and only code past `if details is
None: return`, whose `details` is None by default, sets it: a test of the field (`if
stats.details is not None:`, or of a local holding it) needs the switch that code needs. A
field is known by its name across the tree: every class that declares it declares it falsy
(None, False, 0, ""), every call passing it as a keyword (a constructor, or a `replace` setting
it) passes a falsy literal or a name of the same name that is falsy there by default
(`Info(has_x=has_x)`, `has_x = cfg.enable_x and ...`), and every store of it stores a falsy
literal, is made only while it holds already, or is kept off by a switch, by its own gates or
by those of every call of its function. A field nothing sets is left to the other rules (it
may be set some way the code does not spell out)."""

from __future__ import annotations

from collections import defaultdict

from cs_audit.joins.joined import JoinedModel as TreeModel
from cs_audit.joins.named_calls import is_unresolved
from cs_audit.joins.param_gates import CallOff, callers_of
from cs_audit.model import PARAM_TESTED, GateRef, SwitchRef
from cs_audit.ruleset import RuleSet


def field_switch(model: TreeModel, name: str, rs: RuleSet, call_off: CallOff) -> SwitchRef | None:
    """The switch code needs to set the field ``name`` when it is left None by default; None
    when it may be set by default, or is not known to be such a field."""
    table = model.record_field_table
    if table is None:
        table = model.record_field_table = _field_table(model, rs)
    declared, stores, passed, named = table
    if not declared.get(name) or name in passed or not (stores.get(name) or named.get(name)):
        return None
    found: list[SwitchRef] = []
    for path, _, function, gates, stores_falsy in stores.get(name, ()):
        if stores_falsy or _set_once_set(gates, name):
            continue
        switch = call_off(path, function, gates) if gates else None
        if switch is None:
            switch = _callers_off(model, (path, function), call_off)
        if switch is None:
            return None
        found.append(switch)
    for path, line, function in named.get(name, ()):
        # `Info(has_x=has_x)`: set when the call runs and the name it hands on holds there
        f = model.functions.get((path, function))
        site = next((c for c in model.facts[path].calls if c.line == line and c.function == function), None)
        held = GateRef("name", name, (PARAM_TESTED,) if f is not None and name in f.params else (), True)
        switch = call_off(path, function, (*(site.gates if site is not None else ()), held))
        if switch is None:
            return None
        found.append(switch)
    return found[0] if found else None


def _set_once_set(gates: tuple[GateRef, ...], name: str) -> bool:
    """Whether a store is made only while the field already holds (`if self.has_x or
    other.has_x: self.has_x = True`): no new way for it to hold."""
    groups: dict[int, list[GateRef]] = defaultdict(list)
    for gate in gates:
        groups[gate.any_of].append(gate)
    for number, refs in groups.items():
        tests = [r.kind == "name" and r.active_when_set and "." in r.ref and r.ref.rpartition(".")[2] == name for r in refs]
        if tests and (all(tests) if number else any(tests)):
            return True
    return False


def _callers_off(model: TreeModel, key: tuple[str, str], call_off: CallOff) -> SwitchRef | None:
    """The switch every resolved call of a function needs, when one does for each; None when
    a call runs by default, or one the graph could not resolve may be of it."""
    callers = callers_of(model, key)
    if not callers or is_unresolved(model, key[1].rpartition(".")[2]):
        return None
    found = None
    for path, caller, site, _ in callers:
        switch = call_off(path, caller, site.gates) if site.gates else None
        if switch is None:
            return None
        found = found or switch
    return found


def _field_table(model: TreeModel, rs: RuleSet) -> tuple[dict[str, bool], dict[str, list], frozenset[str], dict[str, list]]:
    """(field -> every declaration defaults to a falsy literal, field -> its stores as (path,
    line, function, gates, stores a falsy literal), the keywords some call passes a value,
    keyword -> the calls passing a name under it as (path, line, function)), from the facts
    outside tests, benchmarks and examples."""
    ignored = rs.defaults.ignore_paths.search if rs.defaults is not None else None
    declared: dict[str, bool] = {}
    stores: dict[str, list] = defaultdict(list)
    passed: set[str] = set()
    named: dict[str, list] = defaultdict(list)
    for path, ff in model.facts.items():
        if ignored is not None and ignored(path):
            continue
        for name, none in ff.record_fields:
            declared[name] = declared.get(name, True) and none
        for line, attr, function, gates, stores_falsy in ff.field_stores:
            stores[attr].append((path, line, function, gates, stores_falsy))
        passed.update(ff.keywords_passed)
        for line, keyword, function in ff.keywords_named:
            named[keyword].append((path, line, function))
    return declared, dict(stores), frozenset(passed), dict(named)
