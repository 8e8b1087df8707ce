"""``@record``: the classes cs-audit stores, and the plain format it stores them in.

The cache holds what a scan of a hostile tree computed, in a folder that outlives the scan,
so loading an entry must not be able to call anything: an entry is JSON (``dumps``/``loads``)
and the loader builds only the classes marked ``@record`` in cs-audit's own modules, by
name, each from exactly its field values (in the order of its dataclass fields), and those
values only from other records and plain values.  In JSON:

* ``None``, booleans, numbers and strings as themselves; a tuple is an array;
* a record ``{"Name": [field values...]}``;
* the other containers a record may hold ``{"#d": [[key, value], ...]}`` (a dict, whatever
  its keys), ``{"#s": [...]}`` (a set), ``{"#f": [...]}`` (a frozenset), ``{"#b": "hex"}``
  (bytes).

Anything else (a list, an object of another class) is not stored: ``dumps`` raises
``TypeError``.  A name ``loads`` does not know, a field count that is not the class's, or
any other shape is ``ValueError``: the caller's miss.

A slotted record is built without running its ``__init__``: a plain object of a class with
the same slots gets its slots by one unpacking assignment and is then given the record's
class (allowed between classes of one layout).  The same objects pickle as their field
values (``__reduce__``), for the worker pipe (``pool``), which is not a store.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import sys
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T", bound=type)

#: record name -> the function making one from the field values ``loads`` read (JSON arrays
#: for its tuples: each field is made what its annotation says, ``_converter``)
_MAKERS: dict[str, Callable[[Sequence[Any]], Any]] = {}
#: record name -> the function making one from its field values as they are (``restore``)
_RESTORERS: dict[str, Callable[[Sequence[Any]], Any]] = {}
#: record class -> (its name, the function giving its field values)
_FIELDS_OF: dict[type, tuple[str, Callable[[Any], tuple[Any, ...]]]] = {}


#: record names whose equal objects ``loads`` makes one object (per call)
_SHARED_RECORDS: set[str] = set()


@typing.overload
def record(cls: T) -> T: ...
@typing.overload
def record(*, shared: bool) -> Callable[[T], T]: ...
def record(cls: T | None = None, *, shared: bool = False) -> T | Callable[[T], T]:
    """Mark ``cls`` as a class the cache may store: a frozen dataclass whose fields are all
    set by ``__init__``, with no ``__post_init__``.  ``shared``: equal objects of it that one
    ``loads`` reads are made one object, as extraction makes them (for a small record repeated
    all over the facts)."""
    if cls is None:
        return lambda c: _record(c, shared)
    return _record(cls, shared)


def _record(cls: T, shared: bool) -> T:
    name = _named(cls)
    if shared:
        _SHARED_RECORDS.add(name)
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"@record needs a frozen dataclass, not {cls!r}")
    fields = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or not all(f.init for f in fields):
        raise TypeError(f"@record: {name} has a __post_init__ or a field outside __init__")
    names = tuple(f.name for f in fields)
    first = names[0]
    getter: Callable[[Any], tuple[Any, ...]] = (
        operator.attrgetter(*names) if len(names) > 1 else (lambda obj: (getattr(obj, first),))
    )
    _FIELDS_OF[cls] = (name, getter)
    types = tuple(str(f.type) for f in fields)
    _MAKERS[name] = _Lazy(_MAKERS, name, lambda: _maker(cls, names, types))
    if getattr(cls, "__slots__", None):
        _RESTORERS[name] = _Lazy(_RESTORERS, name, lambda: _maker(cls, names, None))

        def reduce(obj: object) -> tuple[object, tuple[object, ...]]:
            return restore, (name, getter(obj))

        cls.__reduce__ = reduce  # type: ignore[method-assign, assignment]
    return cls


def tuple_record(cls: type[tuple], annotations: tuple[str, ...]) -> None:
    """Mark the tuple subclass ``cls``, whose items have these annotations, as a class the cache
    may store (made from its items)."""
    name = _named(cls)
    _FIELDS_OF[cls] = (name, tuple)
    _MAKERS[name] = _Lazy(_MAKERS, name, lambda: _maker(cls, tuple(f"_{i}" for i in range(len(annotations))), annotations))


def _named(cls: type) -> str:
    """The name entries give ``cls``: its own, unique across cs-audit (an entry names the class alone)."""
    if cls.__name__ in _MAKERS:
        raise TypeError(f"@record: a record named {cls.__name__} exists already")
    return cls.__name__


class _Lazy:
    """Stands in ``table`` for the function making a record until the first record is made:
    then the function is compiled and takes its place (a process that makes none compiles none)."""

    __slots__ = ("table", "name", "compile")

    def __init__(self, table: dict[str, Callable[[Sequence[Any]], Any]], name: str,
                 compile_: Callable[[], Callable[[Sequence[Any]], Any]]) -> None:
        self.table, self.name, self.compile = table, name, compile_

    def __call__(self, values: Sequence[Any]) -> Any:
        make = self.table[self.name] = self.compile()
        return make(values)


_new = object.__new__
_set_class = object.__dict__["__class__"].__set__
_object_setattr = object.__setattr__


def restore(name: str, values: tuple[Any, ...]) -> Any:
    """The record ``name`` with these field values (how a record unpickles)."""
    return _RESTORERS[name](values)


def _as_is(value: Any) -> Any:
    return value


def _converter(annotation: str, names: dict[str, Any]) -> str:
    """What makes a field of this annotation from what ``loads`` read: ``_intern`` for a string
    and ``_strings`` for a tuple of strings (one object per text, as the facts share them when
    extracted), "" (as it is) for another scalar or a record, ``tuple`` for a tuple of those,
    ``_tuples`` for a tuple of fixed-size tuples of those, else ``_value`` (every array in it
    a tuple).  Anything unforeseen gets ``_value``, which is always right: the others only
    save its walk.  ``names``: the globals of the record's module (a ``Literal`` alias of
    strings is a scalar)."""
    annotation = annotation.replace(" ", "")
    element = annotation[len("tuple["):-len(",...]")] if annotation.startswith("tuple[") and annotation.endswith(",...]") else None
    if element is None:
        return "_intern" if annotation == "str" else "" if _atoms(annotation, names) else "_value"
    if element == "str":
        return "_strings"
    if _atoms(element, names):
        return "tuple"
    if element.startswith("tuple[") and element.endswith("]") and all(_atoms(part, names) for part in element[6:-1].split(",")):
        return "_tuples"
    return "_value"


def _atoms(annotation: str, names: dict[str, Any]) -> bool:
    """Whether every alternative of ``annotation`` is read as it is: a scalar, a record, or a
    ``Literal`` alias of scalars."""
    for atom in annotation.split("|"):
        if atom in _ATOMS or atom in _MAKERS:
            continue
        alias = names.get(atom)
        if not (typing.get_origin(alias) is typing.Literal and all(type(a) in _SCALARS for a in typing.get_args(alias))):
            return False
    return True


#: record name -> the shared records of that name (``record(shared=True)``) the current
#: ``loads`` made, by their field values
_SHARED: dict[str, dict[tuple[Any, ...], Any]] = {}


def _strings(items: list[Any]) -> tuple[str, ...]:
    return tuple(map(sys.intern, items))


def _tuples(items: list[list[Any]]) -> tuple[tuple[Any, ...], ...]:
    return tuple(map(tuple, items))


#: annotations of values ``loads`` reads as they are (the record names are the others)
_ATOMS = frozenset({"str", "int", "float", "bool", "None", "bytes"})


def _maker(cls: type, names: tuple[str, ...], types: tuple[str, ...] | None) -> Callable[[Sequence[Any]], Any]:
    """A function making an object of ``cls`` from its field values, each made by the converter
    of its annotation (``types``; None: as they are).  A slotted record is made without its
    ``__init__``: a plain object of a class with its slots, those stored by one assignment,
    then switched to ``cls`` (through the frozen class's descriptors where the switch is refused)."""
    module = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
    converters = [_converter(t, module) for t in types] if types is not None else [""] * len(names)
    values = ", ".join(f"{c}(v[{i}])" if c else f"v[{i}]" for i, c in enumerate(converters))
    check = f"    if type(v) is not list or len(v) != {len(names)}:\n        raise ValueError('a {cls.__name__} of other fields')\n" if types is not None else ""
    namespace: dict[str, Any] = {"_new": _new, "_set_class": _set_class, "cls": cls, "tuple": tuple, "_value": _value, "_tuples": _tuples, "_intern": sys.intern, "_strings": _strings,
                                 "_object_setattr": _object_setattr, "_as_is": _as_is}
    filler = _slot_filler(cls) if getattr(cls, "__slots__", None) and not issubclass(cls, tuple) else None
    if issubclass(cls, tuple):
        source = f"def make(v):\n{check}    return cls(({values},))\n"
    elif not getattr(cls, "__slots__", None):
        source = f"def make(v):\n{check}    return cls({values},)\n"
    elif filler is not None:
        namespace["filler"] = filler
        targets = ", ".join(f"obj.{name}" for name in names)
        if cls.__name__ in _SHARED_RECORDS and types is not None:  # one object per field values (a tuple's C hash)
            namespace["shared"] = _SHARED.setdefault(cls.__name__, {})
            source = (f"def make(v):\n{check}    values = {values},\n    obj = shared.get(values)\n    if obj is None:\n"
                      f"        obj = shared[values] = _new(filler)\n        {targets}, = values\n        _set_class(obj, cls)\n"
                      "    return obj\n")
        else:
            source = f"def make(v):\n{check}    obj = _new(filler)\n    {targets}, = {values},\n    _set_class(obj, cls)\n    return obj\n"
    else:
        calls = "\n".join(f"    _object_setattr(obj, {name!r}, {c or '_as_is'}(v[{i}]))" for i, (name, c) in enumerate(zip(names, converters)))
        source = f"def make(v):\n{check}    obj = _new(cls)\n{calls}\n    return obj\n"
    exec(source, namespace)  # noqa: S102 - field names and annotations of our own dataclasses
    return namespace["make"]


def _slot_filler(cls: type) -> type | None:
    """A plain class with ``cls``'s slots in the same order (so the same layout), or None when
    this interpreter refuses to switch an object between the two."""
    filler = type(f"_{cls.__name__}Slots", (), {"__slots__": cls.__slots__, "__module__": __name__})  # type: ignore[attr-defined]
    try:
        probe: Any = object.__new__(filler)
        probe.__class__ = cls
    except TypeError:
        return None
    return filler if type(probe) is cls else None


# --------------------------------------------------------------------------- the plain format
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """``value`` as JSON-able values (see the module docstring); TypeError for what is not stored."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is tuple:
        return [v if type(v) in _SCALARS else _plain(v) for v in value]
    known = _FIELDS_OF.get(kind)
    if known is not None:
        return {known[0]: [v if type(v) in _SCALARS else _plain(v) for v in known[1](value)]}
    if kind is dict:
        return {"#d": [[_plain(k), _plain(v)] for k, v in value.items()]}
    if kind is frozenset or kind is set:
        return {"#f" if kind is frozenset else "#s": [_plain(v) for v in value]}
    if kind is bytes:
        return {"#b": value.hex()}
    raise TypeError(f"not stored in the cache: {kind.__name__}")


def dumps(value: Any) -> bytes:
    """``value`` in the plain format, as UTF-8 (lone surrogates of undecodable paths kept)."""
    return json.dumps(_plain(value), ensure_ascii=False, separators=(",", ":"), check_circular=False).encode(
        "utf-8", "surrogatepass")


def _tupled(items: list[Any]) -> tuple[Any, ...]:
    """A JSON array as the tuple it stands for (its arrays too: what ``_built`` made is kept)."""
    if type(items) is not list:
        raise ValueError("a tuple that is no array")
    if list in map(type, items):
        return tuple([_tupled(v) if type(v) is list else v for v in items])
    return tuple(items)


def _value(item: Any) -> Any:
    return _tupled(item) if type(item) is list else item


def _pairs(body: Any) -> dict[Any, Any]:
    if type(body) is not list:
        raise ValueError("a dict that is no list of pairs")
    out = {}
    for pair in body:
        if type(pair) is not list or len(pair) != 2:
            raise ValueError("a dict item that is no pair")
        out[_value(pair[0])] = _value(pair[1])
    return out


def _items(body: Any) -> list[Any]:
    if type(body) is not list:
        raise ValueError("a set that is no list")
    return [_value(v) for v in body]


def _hex(body: Any) -> bytes:
    if type(body) is not str:
        raise ValueError("bytes that are no string")
    return bytes.fromhex(body)


_CONTAINERS: dict[str, Callable[[Any], Any]] = {
    "#d": _pairs, "#s": lambda body: set(_items(body)), "#f": lambda body: frozenset(_items(body)), "#b": _hex,
}


def _built(pairs: list[tuple[str, Any]]) -> Any:
    """A JSON object as the record or container it stands for (called innermost first); the
    record's maker checks its fields are an array of its field count."""
    if len(pairs) != 1:
        raise ValueError("an object that is no record")
    tag, body = pairs[0]
    make = _MAKERS.get(tag) or _CONTAINERS.get(tag)
    if make is None:
        raise ValueError(f"names {tag!r}, no record of cs-audit")
    return make(body)


def loads(data: bytes | memoryview) -> Any:
    """What ``dumps`` gave ``data``; ValueError (a ``json`` error is one) for anything else."""
    try:
        text = str(data, "utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise ValueError(str(exc)) from None
    try:
        return _value(json.loads(text, object_pairs_hook=_built))
    except (TypeError, RecursionError) as exc:  # an unhashable key, a record's own check, nesting
        raise ValueError(str(exc)) from None
    finally:
        for made in _SHARED.values():
            made.clear()
