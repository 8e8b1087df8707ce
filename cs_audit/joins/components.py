"""Which classes have an instance in the deployment audited.

A class the tree constructs only under an option or an env var (`if cfg.enable_x: self.c =
X()`, `if envs.TEST_HOOK.get(): ...`, or in a builder only such code calls) has no instance
without it, and neither do the classes built on
it: a call of its methods from outside the class and its subclasses (`self.allocator.free()`,
typed from the base every allocator shares) is gated by that option. The question is asked of
the whole family a call may land in: a base whose every subclass, and itself, is built only
under options. Constructions are found by name, so a namesake built by default keeps the class
open, and a class with a subclass that is built nowhere by name (a factory table, `cls()`) is
left alone; a class with subclasses may itself be built nowhere (an abstract base)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Protocol

from cs_audit.joins.named_calls import NamedCall
from cs_audit.joins.reach import Edge
from cs_audit.model import CLASS_TESTED, DEREFERENCED, FileFacts, FuncKey, FunctionDef, GateRef, SwitchRef, by_text
from cs_audit.ruleset import RuleSet


class Built(Protocol):
    """What this reads and writes of the tree model (``callgraph.TreeModel``)."""

    facts: dict[str, FileFacts]
    functions: dict[FuncKey, FunctionDef]
    edges: list[Edge]
    callers: dict[FuncKey, list[Edge]]
    gated_classes: dict[str, SwitchRef]
    gated_roots: dict[FuncKey, SwitchRef]
    gate_cache: dict
    switch_cache: dict
    #: ``held_classes``, when first asked
    class_names: frozenset[str] | None
    derived: dict[tuple[str, str], list[tuple[str | None, tuple[GateRef, ...]]]]

#: calls followed up from a construction to the option its callers need
MAX_CALLERS_UP = 6

SiteSwitch = Callable[[str, "str | None", "tuple[GateRef, ...]"], "SwitchRef | None"]
#: whether a call the graph could not resolve may land in a function (``named_calls.hidden_callers``)
HiddenCallers = Callable[[FuncKey], bool]
#: the calls of a function a scan did not type, typed now (``named_calls.callers_on_demand``)
LaterCallers = Callable[[FuncKey], "list[NamedCall]"]


#: bases that make a class an enum
_ENUM_BASES = frozenset({"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"})


def gate_instance_methods(model: Built, rs: RuleSet, site_switch: SiteSwitch,
                          unresolved: HiddenCallers, later: LaterCallers) -> None:
    """Gate the calls of the methods of classes built only under options (see the module's
    text); ``site_switch`` resolves a site's gates, ``unresolved`` tells the functions a call
    the tree did not resolve may land in (such a function may have callers the graph lacks),
    ``later`` the callers of a function the graph lacks because a scan did not type them."""
    children: dict[str, set[str]] = defaultdict(set)
    enums: set[str] = set()
    for ff in model.facts.values():
        for c in ff.types.classes:
            for base in c.bases:
                children[base.rsplit(".", 1)[-1]].add(c.qualname.rsplit(".", 1)[-1])
                if base.rsplit(".", 1)[-1] in _ENUM_BASES:
                    enums.add(c.qualname.rsplit(".", 1)[-1])
    families: dict[str, frozenset[str]] = {}

    def family(cls: str) -> frozenset[str]:
        if cls not in families:
            seen, work = {cls}, [cls]
            while work:
                for child in children.get(work.pop(), ()):
                    if child not in seen:
                        seen.add(child)
                        work.append(child)
            families[cls] = frozenset(seen)
        return families[cls]

    def owner(key: FuncKey | None) -> str | None:
        if key is None or key[1] is None or "." not in key[1]:
            return None
        return key[1].split(".", 1)[0]

    outside: dict[str, list[int]] = defaultdict(list)
    for i, edge in enumerate(model.edges):
        cls, _, method = edge.callee[1].rpartition(".")
        if edge.switch is None and cls and "." not in cls and method != "__init__":
            callee = model.functions.get(edge.callee)
            if callee is not None and ("classmethod" in callee.decorators or "staticmethod" in callee.decorators):
                continue  # runs with no instance (`BreakdownLogger.get()`)
            caller_cls = owner(edge.caller)
            if caller_cls is None or caller_cls not in family(cls):
                outside[cls].append(i)
    # classes with a method a hot root may name: a root of a class with no instance does not run
    root_names = {r.name for r in rs.hot_roots}
    for f in model.functions.values():
        if f.class_name is not None and f.name in root_names and "." not in f.qualname[:-len(f.name) - 1]:
            outside.setdefault(f.class_name, [])
    # classes a record's field holds when not None, or an `isinstance` tests: with no instance,
    # the field stays None and the test fails
    for cls in _tested_classes(model):
        outside.setdefault(cls, [])
    if not outside:
        return
    wanted = set().union(*(family(cls) for cls in outside))
    ignored = rs.defaults.ignore_paths if rs.defaults is not None else None
    built: dict[str, list[SwitchRef | None]] = defaultdict(list)
    calling = _CallerSwitches(model, site_switch, unresolved, later, ignored.search if ignored is not None else None)
    for path, ff in model.facts.items():
        if ignored is not None and ignored.search(path):
            continue  # tests build what they test
        for site in ff.calls:
            name = site.callee.rpartition(".")[2]
            if name == "cls" and site.function is not None and "." in site.function:
                # `return cls(...)` in a classmethod builds the class (or a subclass it is called on)
                name = site.function.split(".<locals>.")[0].rpartition(".")[0].rpartition(".")[2]
            if name in wanted:
                switch = site_switch(path, site.function, site.gates)
                if switch is None and site.function is not None:
                    switch = calling.switch((path, site.function), 0)
                built[name].append(switch)
    # a class held as a value (`TABLE = {"a": Stage}`, `kind = Stage`, `partial(Stage)`) may be
    # built wherever the value is called: as if by default
    for name in _classes_as_values(model, wanted, ignored.search if ignored is not None else None):
        built[name].append(None)
    for cls, indexes in outside.items():
        members = family(cls)
        if not enums.isdisjoint(members):
            continue  # an enum's instances are its members, which no call builds (`Mode(x)` looks one up)
        # a class with subclasses may be abstract; a leaf built nowhere by name is built some other way
        if any(member not in built for member in members if not children.get(member)):
            continue
        found = [sw for member in members for sw in built.get(member, ())]
        switches = [sw for sw in found if sw is not None]
        if not switches or len(switches) != len(found):
            continue
        # the option most of its constructions need names it (any one of them builds it)
        counts = Counter(switches)
        switch = min(counts, key=lambda sw: (-counts[sw], by_text(sw)))
        model.gated_classes[cls] = switch
        for i in indexes:
            edge = model.edges[i]
            gated = model.edges[i] = replace(edge, switch=switch)
            callers = model.callers[edge.callee]
            callers[callers.index(edge)] = gated


def _tested_classes(model: Built) -> set[str]:
    """The classes of the tree a record's field or a declared attribute holds when not None
    (`Optional[C]`) or an `isinstance` tests (``held_classes``)."""
    found: set[str] = set()
    seen: set[int] = set()
    for ff in model.facts.values():
        found.update(holds for *_, holds in ff.record_fields if holds)
        found.update(holds for *_, holds in ff.own_optional)
        for site in ff.calls:
            gates = site.gates
            if gates and id(gates) not in seen:
                seen.add(id(gates))
                found.update(cls for gate in gates if gate.kind == "call" and gate.ref == "isinstance"
                             for cls in tested_classes(gate))
    return found & held_classes(model)


class Defined(Protocol):
    """What ``held_classes`` reads of the tree model."""

    facts: dict[str, FileFacts]
    class_names: frozenset[str] | None


def held_classes(model: Defined) -> frozenset[str]:
    """The classes whose instances the tree's constructions account for: those it defines (a
    library's class, `torch.Tensor`, is built by the library's calls), less protocols (which
    `isinstance` matches by shape, not by base) and classes a subclass names subscripted
    (`class Keep(Action[int])`: a subclass the family does not show)."""
    known = model.class_names
    if known is None:
        defined: set[str] = set()
        left_out: set[str] = set()
        for ff in model.facts.values():
            for c in ff.types.classes:
                name = c.qualname.rpartition(".")[2]
                defined.add(name)
                if any(base.rpartition(".")[2] == "Protocol" for base in (*c.bases, *c.subscripted)):
                    left_out.add(name)
                left_out.update(base.rpartition(".")[2] for base in c.subscripted)
        known = model.class_names = frozenset(defined - left_out)
    return known


def tested_classes(gate: GateRef) -> list[str]:
    """The classes an `isinstance` gate tests (``CLASS_TESTED``)."""
    text = gate.args[1] if len(gate.args) > 1 else ""
    return text[len(CLASS_TESTED):].split("|") if text.startswith(CLASS_TESTED) else []


def instance_switch(model: Built, gate: GateRef) -> SwitchRef | None:
    """The switch that builds an instance of a class `isinstance(x, C)` tests, when no class it
    tests is built by default."""
    return classes_switch(model, tested_classes(gate))


class Held(Defined, Protocol):
    gated_classes: dict[str, SwitchRef]


def classes_switch(model: Held, classes: Iterable[str]) -> SwitchRef | None:
    """The switch that builds the first of ``classes`` when none of them, all of
    ``held_classes``, is built by default (``gated_classes``); None otherwise."""
    known = held_classes(model)
    switches = [model.gated_classes.get(cls) if cls in known else None for cls in classes]
    return switches[0] if switches and all(switches) else None


def regate_class_tests(model: Built, site_switch: SiteSwitch, fields: frozenset[str]) -> None:
    """Once classes are gated (``gate_instance_methods``, which resolves gates first): forget the
    answers of gates that test for an instance of a class built only under a switch (an
    `isinstance`, a field of ``fields``, which holds only such classes), and give the calls under
    such a test their switch."""
    classes = set(model.gated_classes)

    def direct(gate: GateRef) -> bool:
        return (gate.kind == "name" and "." in gate.ref and (gate.ref.rpartition(".")[2] in fields or DEREFERENCED in gate.args)
                or gate.kind == "call" and gate.ref == "isinstance" and not classes.isdisjoint(tested_classes(gate)))

    def tests_one(path: str, function: str | None, gates: tuple[GateRef, ...]) -> bool:
        # or a local assigned from such a test (`rec = stats.recording` ... `if rec is not None:`)
        return any(direct(g) or g.kind == "name" and "." not in g.ref and function is not None and any(
            direct(r) for _, refs in model.derived.get((path, f"{function}::{g.ref}"), ()) for r in refs) for g in gates)

    for key in [k for k in model.gate_cache if tests_one(k[0], k[1], (k[2],))]:
        del model.gate_cache[key]
    for key in [k for k in model.switch_cache if tests_one(*k)]:
        del model.switch_cache[key]
    for i, edge in enumerate(model.edges):
        if edge.switch is None and tests_one(edge.path, edge.site.function, edge.site.gates):
            switch = site_switch(edge.path, edge.site.function, edge.site.gates)
            if switch is not None:
                gated = model.edges[i] = replace(edge, switch=switch)
                callers = model.callers[edge.callee]
                callers[callers.index(edge)] = gated


def gate_event_loops(model: Built, rs: RuleSet, loops: list[FuncKey], site_switch: SiteSwitch,
                     unresolved: HiddenCallers, later: LaterCallers) -> None:
    """An event loop every call of which needs a switch (`if cfg.enable_pdmux:
    self.event_loop_pdmux()`, a few calls up) is no root of the default paths: the switch is its
    gate, as a root of a class built only under one (``gated_classes``). A configured root is
    left alone: a framework calls it by name where the graph sees none (transformers'
    `generate()` picks `_sample` with `getattr`; the graph sees only subclasses' own calls)."""
    ignored = rs.defaults.ignore_paths if rs.defaults is not None else None
    calling = _CallerSwitches(model, site_switch, unresolved, later, ignored.search if ignored is not None else None)
    for key in loops:
        switch = calling.switch(key, 0)
        if switch is not None:
            model.gated_roots[key] = switch


#: the calls whose class arguments build nothing (``_classes_as_values``)
_CLASS_TESTS = frozenset({"arg:isinstance", "arg:issubclass"})


def _classes_as_values(model: Built, wanted: set[str], ignored: Callable[[str], object] | None) -> set[str]:
    """The classes of ``wanted`` some name, table, return or argument holds as a value (a
    binding whose source reads the class, `r:Stage`, or is the class, `k:Stage`), outside tests."""
    found: set[str] = set()
    for path, ff in model.facts.items():
        if ignored is not None and ignored(path):
            continue
        for owner, _, _, source in ff.types.bindings:
            if owner in _CLASS_TESTS:
                continue
            while source[:2] in ("l:", "e:"):  # (held in a container, or one of its items)
                source = source[2:]
            if source[:2] in ("r:", "k:") and (last := source[2:].rpartition(".")[2]) in wanted:
                found.add(last)
    return found


class _CallerSwitches:
    """The switch (an option, an env var) a function runs under because every call of it does (its calls' own gates,
    or their functions' in turn, a few calls up); None when one call needs none, when it has
    no call the graph sees, or when its name is called where the graph could not resolve."""

    def __init__(self, model: Built, site_switch: SiteSwitch, unresolved: HiddenCallers, later: LaterCallers,
                 ignored: Callable[[str], object] | None) -> None:
        self.model = model
        self.site_switch = site_switch
        self.unresolved = unresolved
        self.later = later
        self.ignored = ignored
        self.known: dict[tuple[FuncKey, int], SwitchRef | None] = {}

    def switch(self, key: FuncKey, depth: int) -> SwitchRef | None:
        # keyed with the depth too: an answer a depth cut shaped is not the one asked higher up
        if (key, depth) in self.known:
            return self.known[(key, depth)]
        self.known[(key, depth)] = None  # a cycle back here needs no option
        answer = self.known[(key, depth)] = self._worked_out(key, depth)
        return answer

    def _worked_out(self, key: FuncKey, depth: int) -> SwitchRef | None:
        name = key[1].rsplit(".", 1)[-1] if key[1] else ""
        if depth >= MAX_CALLERS_UP or not name or name.startswith("__") and name != "__init__" or self.unresolved(key):
            return None  # (for `__init__`: a class built where the graph could not resolve the call)
        edges = [e for e in self.model.callers.get(key, ()) if self.ignored is None or not self.ignored(e.path)]
        later = [(path, site, {how for target, how in found if target == key}) for path, site, found in self.later(key)
                 if self.ignored is None or not self.ignored(path)]
        if name == "__init__" and all(e.how == "super" for e in edges) and all(hows == {"super"} for _, _, hows in later):
            return None  # built by name nowhere but through its subclasses: a framework builds it (`cls(config)`)
        # (path, calling function, the call's switch) of each call
        calls: list[tuple[str, str | None, SwitchRef | None]] = [
            (e.path, e.caller[1] if e.caller is not None else None, e.switch) for e in edges]
        calls += [(path, site.function, self.site_switch(path, site.function, site.gates)) for path, site, _ in later]
        if not calls:
            return None
        found: list[SwitchRef] = []
        for path, caller, switch in calls:
            if switch is None and caller is not None:
                switch = self.switch((path, caller), depth + 1)
            if switch is None:
                return None
            found.append(switch)
        return min(found, key=by_text)
