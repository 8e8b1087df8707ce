"""``@restorable``: a frozen, slotted dataclass that pickles as its field values and is
restored by filling its slots directly.

Facts cross process boundaries (worker to parent) and land in the cache by the hundred
thousand.  The default pickling of a slotted dataclass calls ``dataclasses.fields()`` and
``object.__setattr__`` per field of every object on load.  A restorable class pickles as
``restore(cls, values)``: the object is made as a plain class with the same slots (the same
layout, no frozen ``__setattr__``), its slots filled by one unpacking assignment in a function
made for the class, then given its class (``obj.__class__ = cls``, allowed between classes of
one layout).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", bound=type)

#: restorable class -> (the plain class with its slots, or None to fill through its descriptors; field names)
_FILLERS: dict[type, tuple[type | None, tuple[str, ...]]] = {}


class _Makers(dict):  # type: ignore[type-arg]
    """Restorable class -> the function making one from its field values (``_maker``), made
    when the class is first restored: a process that restores none (a warm scan) compiles none."""

    def __missing__(self, cls: type) -> Callable[[tuple[Any, ...]], Any]:
        make = self[cls] = _maker(cls)
        return make


_MAKERS = _Makers()


def restorable(cls: T) -> T:
    """Give the slotted dataclass ``cls`` the fast ``__reduce__`` (see the module docstring)."""
    if not (dataclasses.is_dataclass(cls) and getattr(cls, "__slots__", None)):
        raise TypeError(f"@restorable needs a slotted dataclass, not {cls!r}")
    fields = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or not all(f.init for f in fields):
        raise TypeError(f"@restorable: {cls.__name__} has a __post_init__ or a field outside __init__")
    names = tuple(f.name for f in fields)
    _FILLERS[cls] = (_slot_filler(cls), names)
    getter: Callable[[Any], tuple[Any, ...]] = (
        operator.attrgetter(*names) if len(names) > 1 else (lambda obj, name=names[0]: (getattr(obj, name),))
    )

    def reduce(obj: object) -> tuple[object, tuple[object, ...]]:
        return restore, (cls, getter(obj))

    cls.__reduce__ = reduce  # type: ignore[method-assign, assignment]
    return cls


def _slot_filler(cls: type) -> type | None:
    """A plain class with ``cls``'s slots in the same order (so the same layout), or None when
    this interpreter refuses to switch an object between the two."""
    filler = type(f"_{cls.__name__}Slots", (), {"__slots__": cls.__slots__, "__module__": __name__})  # type: ignore[attr-defined]
    try:
        probe = object.__new__(filler)
        probe.__class__ = cls
    except TypeError:
        return None
    return filler if type(probe) is cls else None


_new = object.__new__
_set_class = object.__dict__["__class__"].__set__
_object_setattr = object.__setattr__


def restore(cls: type, values: tuple[Any, ...]) -> Any:
    return _MAKERS[cls](values)


def _maker(cls: type) -> Callable[[tuple[Any, ...]], Any]:
    """A function making an object of ``cls`` from its field values: a plain object of its
    slot filler class, its slots stored by one unpacking assignment, then switched to ``cls``
    (through the frozen class's descriptors where the switch is refused)."""
    filler, names = _FILLERS[cls]
    if filler is None:
        def make_slow(values: tuple[Any, ...]) -> Any:
            obj = _new(cls)
            for name, value in zip(names, values):
                _object_setattr(obj, name, value)
            return obj
        return make_slow
    targets = ", ".join(f"obj.{name}" for name in names)
    source = f"def make(values):\n    obj = _new(filler)\n    {targets}, = values\n    _set_class(obj, cls)\n    return obj\n"
    namespace: dict[str, Any] = {"_new": _new, "filler": filler, "_set_class": _set_class, "cls": cls}
    exec(source, namespace)  # noqa: S102 - field names of our own dataclasses
    return namespace["make"]
