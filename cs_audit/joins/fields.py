"""A record's field left falsy unless code a switch keeps off sets it.

A stats record declares `details: Details | None = None`, and only code past `if details is
None: return`, whose `details` is None by default, sets it: a test of the field (`if
stats.details is not None:`, or of a local holding it) needs the switch that code needs. A
field is known by its name across the tree: every class that declares it declares it falsy
(None, False, 0, ""), every call passing it as a keyword (a constructor, or a `replace` setting
it) passes a falsy literal or a name of the same name that is falsy there by default
(`Info(has_x=has_x)`, `has_x = cfg.enable_x and ...`), and every store of it stores a falsy
literal, is made only while it holds already, or is kept off by a switch, by its own gates or
by those of every call of its function, a few calls up. A field nothing sets is left to the
other rules (it may be set some way the code does not spell out)."""

from __future__ import annotations

from collections import Counter, defaultdict

from cs_audit.joins.components import MAX_CALLERS_UP, classes_switch
from cs_audit.joins.joined import JoinedModel as TreeModel
from cs_audit.joins.named_calls import is_unresolved
from cs_audit.joins.param_gates import CallOff, callers_of
from cs_audit.model import PARAM_TESTED, GateRef, SwitchRef
from cs_audit.ruleset import RuleSet


def field_switch(model: TreeModel, name: str, rs: RuleSet, call_off: CallOff) -> SwitchRef | None:
    """The switch code needs to set the field ``name`` when it is left None by default; None
    when it may be set by default, or is not known to be such a field."""
    table = _table(model, rs)
    switch = _held_switch(table, model, name)
    if switch is not None:
        return switch
    answers = table[-1]
    if name not in answers:
        answers[name] = None  # (a field whose stores lead back to a test of it: not known)
        answers[name] = _worked_out(model, name, table, call_off)
    return answers[name]


def _table(model: TreeModel, rs: RuleSet) -> tuple:
    table = model.record_field_table
    if table is None:
        table = model.record_field_table = _field_table(model, rs)
    return table


def _held_switch(table: tuple, model: TreeModel, name: str) -> SwitchRef | None:
    """`metrics: Metrics | None = None` where no Metrics is built by default: None whatever is
    stored; the switch that builds one."""
    held = table[-2].get(name)
    return classes_switch(model, sorted(held)) if held else None


def held_fields(model: TreeModel, rs: RuleSet) -> frozenset[str]:
    """The fields that hold only classes built under a switch, so None by default."""
    table = _table(model, rs)
    return frozenset(name for name in table[-2] if _held_switch(table, model, name) is not None)


def _worked_out(model: TreeModel, name: str, table: tuple, call_off: CallOff) -> SwitchRef | None:
    declared, stores, passed, named, sites, _, _, _ = table
    if not declared.get(name) or name in passed or not (stores.get(name) or named.get(name)):
        return None
    found: list[SwitchRef] = []
    for path, _, function, gates, stores_falsy, _ in stores.get(name, ()):
        f = model.functions.get((path, function))
        if stores_falsy or _set_once_set(gates, name, f.params if f is not None else ()):
            continue
        switch = call_off(path, function, gates) if gates else None
        if switch is None:
            switch = callers_off(model, (path, function), call_off)
        if switch is None:
            return None
        found.append(switch)
    for path, line, function in named.get(name, ()):
        # `Info(has_x=has_x)`: set when the call runs and the name it hands on holds there
        f = model.functions.get((path, function))
        held = GateRef("name", name, (PARAM_TESTED,) if f is not None and name in f.params else (), True)
        switch = call_off(path, function, (*sites.get((path, line, function), ()), held))
        if switch is None:
            return None
        found.append(switch)
    return found[0] if found else None


def wrapped_by_default(model: TreeModel, name: str, rs: RuleSet, call_off: CallOff) -> tuple[str, str, str, frozenset[str]] | None:
    """(the file of a store, the callee it calls, the read it wraps, the constants other stores
    give) when every store of the declared field ``name`` that can run by default calls one
    callee on one read (`moe.backend = Backend(cfg.backend)`) or gives a class's constant (a
    getter's lazy `Backend.NONE`); a context manager's store is set for its `with` block alone, and
    left out. None otherwise."""
    table = _table(model, rs)
    answers = table[-1]
    key = ("wrapped", name)
    if key not in answers:
        answers[key] = None  # (a store kept off only by a test of this field: not known)
        answers[key] = _wrapped_stores(model, name, table, call_off)
    return answers[key]


def _wrapped_stores(model: TreeModel, name: str, table: tuple, call_off: CallOff) -> tuple[str, str, str, frozenset[str]] | None:
    declared, stores, passed, kept_elsewhere = table[0], table[1], table[2], table[5]
    wraps: set[tuple[str, str]] = set()
    members: set[str] = set()
    where = ""
    if not declared.get(name) or name in passed or name in kept_elsewhere:
        return None  # (declared holding something, or set by a constructor or as a class's own state)
    field_stores = stores.get(name, ())
    per_function = Counter((path, function) for path, _, function, _, _, _ in field_stores)

    def kept_off(path: str, function: str, gates: tuple[GateRef, ...]) -> bool:
        return (call_off(path, function, gates) if gates else None) is not None or (
            callers_off(model, (path, function), call_off) is not None)

    for path, _, function, gates, _, value in field_stores:
        kind, _, rest = value.partition(":")
        if kind == "scoped" and per_function[(path, function)] > 1:
            continue  # (set for a `with` block and restored: the value outside it is the question)
        if kind == "wrap" and not kept_off(path, function, gates):
            callee, _, read = rest.partition(":")
            wraps.add((callee, read))
            where = where or path
        elif kind == "member":
            members.add(rest)
        elif kind != "wrap" and not kept_off(path, function, gates):
            return None  # (set some other way by default)
    if len(wraps) != 1:
        return None
    (callee, read), = wraps
    return where, callee, read, frozenset(members)


def _set_once_set(gates: tuple[GateRef, ...], name: str, params: tuple[str, ...]) -> bool:
    """Whether a store is made only while the field already holds (`if self.has_x or
    other.has_x: self.has_x = True`, on `self` or the function's parameters): no new way for
    it to hold."""
    receivers = {"self", *params}
    groups: dict[int, list[GateRef]] = defaultdict(list)
    for gate in gates:
        groups[gate.any_of].append(gate)
    for number, refs in groups.items():
        tests = [r.kind == "name" and r.active_when_set and r.ref.rpartition(".")[0] in receivers
                 and r.ref.rpartition(".")[2] == name for r in refs]
        if tests and (all(tests) if number else any(tests)):
            return True
    return False


def callers_off(model: TreeModel, key: tuple[str, str], call_off: CallOff, depth: int = 0,
                 seen: set | None = None) -> SwitchRef | None:
    """The switch every resolved call of a function needs: its own gates, or, when they need
    none, every call of the calling function in turn, up to ``MAX_CALLERS_UP`` calls up; None
    when a call needs none, a cycle leads back, or one the graph could not resolve may be of it."""
    seen = set() if seen is None else seen
    if depth >= MAX_CALLERS_UP or key in seen:
        return None
    seen.add(key)
    callers = callers_of(model, key)
    if not callers or is_unresolved(model, key[1].rpartition(".")[2]):
        return None
    found = None
    for path, caller, site, _ in callers:
        switch = call_off(path, caller, site.gates) if site.gates else None
        if switch is None and caller is not None:
            switch = callers_off(model, (path, caller), call_off, depth + 1, seen)
        if switch is None:
            return None
        found = found or switch
    return found


def _field_table(model: TreeModel, rs: RuleSet) -> tuple:
    """(field -> every declaration defaults to a falsy literal, field -> its stores as (path,
    line, function, gates, stores a falsy literal, what is stored), the names set some way not judged,
    keyword -> the calls passing a name under it as (path, line, function), those calls'
    gates by (path, line, function), the declared fields another class keeps as its own state,
    field -> the classes it holds when not None where every declaration of it says one
    (`Optional[C]`), the answers so far by field), from the facts
    outside tests, benchmarks and examples."""
    ignored = rs.defaults.ignore_paths.search if rs.defaults is not None else None
    declared: dict[str, bool] = {}
    held: dict[str, set[str] | None] = {}
    kept_by: dict[str, set[str]] = defaultdict(set)
    declared_by: dict[str, set[str]] = defaultdict(set)
    #: class name -> its fields in declaration order, per module declaring a class so named
    fields_of: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    stores: dict[str, list] = defaultdict(list)
    passed: set[str] = set()
    named: dict[str, list] = defaultdict(list)
    sites: dict[tuple[str, int, str | None], tuple[GateRef, ...]] = {}
    for path, ff in model.facts.items():
        if ignored is not None and ignored(path):
            continue
        falsy_here = set()
        for name, falsy, cls, holds in ff.record_fields:
            declared[name] = declared.get(name, True) and falsy
            declared_by[name].add(cls.rpartition(".")[2])
            classes = held.setdefault(name, set())
            if classes is not None and holds:
                classes.add(holds)
            elif not holds:
                held[name] = None
            fields_of[cls][path].append(name)
            if falsy:
                falsy_here.add(name)
        for line, attr, function, gates, stores_falsy, value in ff.field_stores:
            stores[attr].append((path, line, function, gates, stores_falsy, value))
        passed.update(ff.keywords_passed)
        # a class that keeps the name as its own state without declaring it falsy may set it
        passed.update(attr for attr in ff.own_attributes if attr not in falsy_here)
        for entry in ff.own_state:
            owner, _, attr = entry.rpartition(".")
            kept_by[attr].add(owner.rpartition(".")[2])
        wanted = set()
        for line, keyword, function in ff.keywords_named:
            named[keyword].append((path, line, function))
            wanted.add((line, function))
        for site in ff.calls if wanted else ():
            if (site.line, site.function) in wanted:
                sites.setdefault((path, site.line, site.function), site.gates)
    # a class built positionally sets its first fields, from a mapping or `*args` any of them
    built_freely: set[str] = set()
    for entry in passed:
        cls, paren, count = entry.partition("(")
        if not paren or cls not in fields_of:
            continue
        for fields in fields_of[cls].values():
            if count.startswith("*"):
                named_after = [fields.index(k) for k in count[1:].split(",") if k in fields]
                built_freely.update(fields[:min(named_after)] if named_after else fields)
            else:
                built_freely.update(fields[:int(count)])
    # (a namesake another class keeps as its own state holds what that class stores)
    optional = {name: frozenset(classes) for name, classes in held.items()
                if classes and not kept_by.get(name, set()) - declared_by[name]}
    # the declared fields whose name another class keeps as its own state (`self.kind = ...`)
    kept_elsewhere = frozenset(name for name in declared if kept_by.get(name, set()) - declared_by[name])
    return declared, dict(stores), frozenset(passed | built_freely), dict(named), sites, kept_elsewhere, optional, {}
