"""What an attribute of another object holds, judged by the class it is an instance of.

`if self.pool.request_window is not None:` and `if scheduler.enable_pdmux:` test an attribute
the object's own class assigns (`self.request_window = Window() if replay else None` in the
pool's `__init__`). Typed through the call graph's types (`self.pool` is a `KVPool`, the
parameter `scheduler: Scheduler`), the test is judged as `self.<attr>` is in that class: by
the gates of every assignment of the attribute in the classes the value may be an instance of
(its bases and its subclasses). Left to the other rules: a receiver the types do not name, an
attribute some code assigns on another object (`pool.request_window = w`, outside tests), and
a class whose module assigns the attribute without testing it (its assignments are not kept)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from cs_audit.joins.components import Held, classes_switch
from cs_audit.joins.host_data import module_files
from cs_audit.joins.joined import CallResolver
from cs_audit.joins.values import Types
from cs_audit.model import FileFacts, GateRef, SwitchRef, by_text

ClassKey = tuple[str, str]
#: ``gates._derived_switch``: (switch, whether known) of a keyed name's assignments
DerivedSwitch = Callable[[str, tuple[str, str]], "tuple[SwitchRef | None, bool]"]


class Typed(Protocol):
    """What this reads of the tree model (``callgraph.TreeModel``)."""

    facts: dict[str, FileFacts]
    derived: dict[tuple[str, str], list[tuple[str | None, tuple[GateRef, ...]]]]
    foreign_attributes: frozenset[str] | None


class Declared(Held, Protocol):
    """What ``held_attribute_switch`` reads of the tree model."""

    facts: dict[str, FileFacts]
    optional_attributes: dict[tuple[str, str], dict[str, str]] | None

    @property
    def resolver(self) -> CallResolver: ...


def held_attribute_switch(model: Declared, types: Types, path: str, function: str | None, ref: str) -> SwitchRef | None:
    """`self.pool` where a method of the class, or of a base, declares `self.pool:
    Optional[HostPool] = None`: the attribute holds a `HostPool` or None, so it holds None unless
    one is built; the switch that builds one when none is built by default
    (``components.classes_switch``). The receiver may be another typed object (`cache.pool`).
    None when no class the value may be an instance of declares it so (a subclass's declaration
    does not say what its base holds), or when a store of the attribute in such a class or one
    built on it gives a value the types place outside the declared class (`self.pool =
    LightPool()`, a class-level value): the annotation does not hold there."""
    receiver, _, attr = ref.rpartition(".")
    if not receiver or function is None or "(" in receiver or "[" in receiver:
        return None
    declared = _optional_attributes(model)
    if receiver == "self":
        owner = function.rpartition(".")[0]
        if not owner or "<locals>" in owner:
            return None  # (`self` of a function nested in a method, or of a class defined in one)
        classes = [(path, owner)]
    else:
        types.begin()
        values = types.dotted(path, function, receiver)
        if not values or any(value[0] != "i" for value in values):
            return None
        classes = sorted(value[1] for value in values)
    held: list[str] = []
    for cls in classes:
        holds = next((declared[c][attr] for c in types.mro(cls) if attr in declared.get(c, {})), None)
        if holds is None or _stored_otherwise(types, [*types.mro(cls), *types.subclasses(cls)], attr, holds):
            return None
        held.append(holds)
    return classes_switch(model, held) if held else None


def _stored_otherwise(types: Types, classes: list[tuple[str, str]], attr: str, holds: str) -> bool:
    """Whether a store of ``attr`` in one of ``classes`` (`self.pool = ...` in a method, or the
    class body) gives something the types place outside the family of the class ``holds``
    names; a value they cannot place is left to the annotation."""
    family = _family_names(types, holds)
    for cls in classes:
        for function, source in types.bindings.get((cls[0], f"class:{cls[1]}", attr)) or ():
            if function is None and source.startswith("t:"):
                continue  # a class body's annotation declares (`pool: Optional[P] = None` in a base)
            types.begin()
            for value in types.source(cls[0], function, source):
                if value[0] != "i" or value[1][1].rpartition(".")[2] not in family:
                    return True
    return False


def _family_names(types: Types, name: str) -> frozenset[str]:
    """The last names of the classes of the tree named ``name`` and of those built on them."""
    found = {name}
    for key in types.classes:
        if key[1].rpartition(".")[2] == name:
            found.update(sub[1].rpartition(".")[2] for sub in types.subclasses(key))
    return frozenset(found)


def optional_attribute_names(model: Declared) -> frozenset[str]:
    """The attributes some class declares `Optional[C] = None` (``held_attribute_switch``)."""
    return frozenset(attr for attrs in _optional_attributes(model).values() for attr in attrs)


def _optional_attributes(model: Declared) -> dict[tuple[str, str], dict[str, str]]:
    """(path, class) -> {attribute: the class it holds}, less a class imported from outside the
    tree under a bare name (`from torch.cuda import Stream`)."""
    table = model.optional_attributes
    if table is None:
        table = model.optional_attributes = {}
        for path, ff in model.facts.items():
            if not ff.own_optional:
                continue
            imported = dict(ff.aliases)
            for owner, attr, holds in ff.own_optional:
                origin = imported.get(holds)
                if origin is None or module_files(model.resolver, origin):
                    table.setdefault((path, owner), {})[attr] = holds
    return table


def receiver_attribute_switch(model: Typed, types: Types, path: str, function: str | None, ref: str,
                              derived_switch: DerivedSwitch,
                              ignored: Callable[[str], object] | None) -> tuple[SwitchRef | None, bool]:
    """(the switch ``ref``, `<receiver>.<attr>`, is truthy only under, whether that is known)."""
    receiver, _, attr = ref.rpartition(".")
    if not receiver or receiver == "self" or "(" in receiver or "[" in receiver:
        return None, False
    if attr in _foreign(model, ignored):
        return None, False  # set from outside the class: its own assignments do not decide
    types.begin()
    values = types.dotted(path, function, receiver)
    if not values or any(value[0] != "i" for value in values):
        return None, False
    found: list[SwitchRef] = []
    for value in sorted(values, key=repr):
        cls: ClassKey = value[1]
        family = {*types.mro(cls), *types.subclasses(cls)}
        keyed = [(c[0], f"{c[1]}.self.{attr}") for c in sorted(family)]
        held = {key[0] for key in keyed if key in model.derived}
        for c in family:
            ff = model.facts.get(c[0])
            if ff is not None and c[0] not in held and attr in ff.own_attributes:
                return None, False  # assigned where no test keeps its assignments
        if not held:
            return None, False
        for key in keyed:
            if key not in model.derived:
                continue
            switch, known = derived_switch(key[0], key)
            if switch is None:
                return None, known
            found.append(switch)
    return (min(found, key=by_text), True) if found else (None, False)


def constructed_field(model: Typed, types: Types, path: str, function: str | None, ref: str,
                      ) -> list[tuple[str, str | None, str]] | None:
    """The names the constructions of a record hand its field ``ref`` (`self.hook` in a method of
    the record, `<receiver>.hook` of one): (path, calling function, the name) of each, when the
    record is a class with no `__init__` of the tree and no subclass, declares the field with no
    default (every construction passes it), and every construction the call graph followed
    passes a name by keyword (`Receiver(hook=self.hook)`); None otherwise. (A test for None is
    judged as one for truth, as everywhere: `prefix=""` handed on reads as absent.)"""
    receiver, _, attr = ref.rpartition(".")
    if not receiver or "(" in receiver or "[" in receiver:
        return None
    types.begin()
    if receiver == "self":
        owner = function.split(".<locals>.")[0].rpartition(".")[0] if function else ""
        classes: list[ClassKey] = [(path, owner)] if owner and (path, owner) in types.classes else []
    else:
        values = types.dotted(path, function, receiver)
        classes = [value[1] for value in values] if values and all(value[0] == "i" for value in values) else []
    if len(classes) != 1:
        return None
    cls = classes[0]
    if not any(f"{c[1]}.{attr}" in getattr(model.facts.get(c[0]), "required_fields", ()) for c in types.mro(cls)):
        return None
    passed = types.record_field_sources(cls, attr)
    if not passed or any(not source.startswith("r:") for _, _, source in passed):
        return None
    return [(where, caller, source[2:]) for where, caller, source in passed]


def held_by_no_own_state(model: Typed, types: Types, path: str, function: str | None, ref: str) -> bool:
    """Whether ``ref``, `<receiver>.<attr>`, is typed as instances of classes none of whose
    family sets ``attr`` as its own state (``FileFacts.own_state``): a context object
    handed the option (`ctx: BuildContext` with a field `enable_x`), not one of the classes
    that make the option's name ambiguous."""
    receiver, _, attr = ref.rpartition(".")
    if not receiver or receiver == "self" or "(" in receiver or "[" in receiver:
        return False
    types.begin()
    values = types.dotted(path, function, receiver)
    if not values or any(value[0] != "i" for value in values):
        return False
    for value in values:
        cls: ClassKey = value[1]
        for c in {*types.mro(cls), *types.subclasses(cls)}:
            ff = model.facts.get(c[0])
            if ff is None or f"{c[1]}.{attr}" in ff.own_state:
                return False
    return True


def _foreign(model: Typed, ignored: Callable[[str], object] | None) -> frozenset[str]:
    names = model.foreign_attributes
    if names is None:
        names = model.foreign_attributes = frozenset(
            n for path, ff in model.facts.items() if ignored is None or not ignored(path) for n in ff.foreign_attributes)
    return names
