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

import builtins
import collections
import dataclasses
import json
import operator
import sys
import textwrap
import typing
from collections.abc import Callable, Sequence
from types import NoneType, UnionType
from typing import Any, TypeVar

T = TypeVar("T", bound=type)

#: record name -> the function making one from the field values ``loads`` read (JSON arrays
#: for its tuples: each field is made what its annotation says, ``_converter``)
_MAKERS: dict[str, Callable[[Sequence[Any]], Any]] = {}
#: record name -> the function making one from its field values as they are (``restore``)
_RESTORERS: dict[str, Callable[[Sequence[Any]], Any]] = {}
#: record class -> (its name, the function giving its field values)
_FIELDS_OF: dict[type, tuple[str, Callable[[Any], tuple[Any, ...]]]] = {}
#: record name -> its class (annotations name records by their names, ``_field_check``)
_CLASSES: dict[str, type] = {}


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
    _CLASSES[name] = cls
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
    _CLASSES[name] = cls
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
    if type(items) is not list:
        raise ValueError("a tuple that is no array")
    return tuple(map(sys.intern, items))


def _tuples(items: list[list[Any]]) -> tuple[tuple[Any, ...], ...]:
    if type(items) is not list or not {*map(type, items)} <= _LIST:
        raise ValueError("a tuple of tuples that is no array of arrays")
    return tuple(map(tuple, items))


_LIST = frozenset({list})


#: annotations of values ``loads`` reads as they are (the record names are the others)
_ATOMS = frozenset({"str", "int", "float", "bool", "None", "bytes"})


def _maker(cls: type, names: tuple[str, ...], types: tuple[str, ...] | None) -> Callable[[Sequence[Any]], Any]:
    """A function making an object of ``cls`` from its field values, each made by the converter
    of its annotation and checked to be of that type (``types``; None: as they are, unchecked).
    A slotted record is made without its ``__init__``: a plain object of a class with its
    slots, those stored by one assignment, then switched to ``cls`` (through the frozen class's
    descriptors where the switch is refused)."""
    module = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
    namespace: dict[str, Any] = {"_new": _new, "_set_class": _set_class, "cls": cls, "tuple": tuple, "list": list, "type": type, "_value": _value, "_tuples": _tuples, "_intern": sys.intern, "_strings": _strings,
                                 "_object_setattr": _object_setattr, "_as_is": _as_is}
    typed = ""  # the check of the field values' types, once made
    if types is None:
        check, fields = "", [f"v[{i}]" for i in range(len(names))]
    else:
        converters = [_converter(t, module) for t in types]
        fields = [f"f{i}" for i in range(len(names))]
        check = (f"    if type(v) is not list or len(v) != {len(names)}:\n        raise ValueError('a {cls.__name__} of other fields')\n"
                 f"    {', '.join(fields)}, = {', '.join(f'{c}(v[{i}])' if c else f'v[{i}]' for i, c in enumerate(converters))},\n")
        # a string or an array where the annotation says otherwise is refused here, before the
        # joins meet it (the interning converters check their strings themselves)
        checks = []
        for i, (annotation, converter) in enumerate(zip(types, converters)):
            if converter in ("_intern", "_strings"):
                continue
            field_check = _field_check(annotation, module, fields[i], namespace)
            if converter == "tuple":  # it made a tuple of whatever it was given: an array only
                checks.append(f"type(v[{i}]) is list and (not {fields[i]} or {field_check})")
            elif field_check != "True":
                checks.append(field_check)
        if checks:
            typed = f"if not ({' and '.join(checks)}):\n    raise ValueError('a {cls.__name__} with a field of another type')\n"
    values = ", ".join(fields)
    shared = cls.__name__ in _SHARED_RECORDS and types is not None
    if not shared:
        check += textwrap.indent(typed, "    ")
    filler = _slot_filler(cls) if getattr(cls, "__slots__", None) and not issubclass(cls, tuple) else None
    if issubclass(cls, tuple):
        source = f"def make(v):\n{check}    return cls(({values},))\n"
    elif not getattr(cls, "__slots__", None):
        source = f"def make(v):\n{check}    return cls({values},)\n"
    elif filler is not None:
        namespace["filler"] = filler
        targets = ", ".join(f"obj.{name}" for name in names)
        if shared:  # one object per field values (a tuple's C hash), their types checked when first made
            namespace["shared"] = _SHARED.setdefault(cls.__name__, {})
            source = (f"def make(v):\n{check}    values = {values},\n    obj = shared.get(values)\n    if obj is None:\n{textwrap.indent(typed, '        ')}"
                      f"        obj = shared[values] = _new(filler)\n        {targets}, = values\n        _set_class(obj, cls)\n"
                      "    return obj\n")
        else:
            source = f"def make(v):\n{check}    obj = _new(filler)\n    {targets}, = {values},\n    _set_class(obj, cls)\n    return obj\n"
    else:
        calls = "\n".join(f"    _object_setattr(obj, {name!r}, {field})" for name, field in zip(names, fields))
        source = f"def make(v):\n{check}    obj = _new(cls)\n{calls}\n    return obj\n"
    # what it names as defaults of its own: read as fast as its locals, once per field and record
    source = source.replace("def make(v):", f"def make(v, {', '.join(f'{name}={name}' for name in namespace)}):", 1)
    exec(compile(source, f"<make {cls.__name__}>", "exec"), namespace)  # noqa: S102 - field names and annotations of our own dataclasses
    return namespace["make"]


#: annotations ``_field_check`` could not resolve or does not know: their fields are not
#: checked (a test asserts every record's annotations are known)
UNCHECKED: set[str] = set()


def _field_check(annotation: str, names: dict[str, Any], value: str, namespace: dict[str, Any]) -> str:
    """Python source that is true when the field value named ``value`` is of the type
    ``annotation`` says (``names``: the globals of the record's module); the classes and type
    sets it names are put in ``namespace``."""
    return _type_check(annotation, value, namespace, names, 0)


def _resolved(annotation: str, names: dict[str, Any]) -> Any:
    """The type an annotation's text names (records by their names), or ``_UNKNOWN`` when
    this process does not know a name in it."""
    try:
        return eval(annotation, {"__builtins__": builtins}, collections.ChainMap[str, Any](names, _CLASSES))  # noqa: S307 - our own annotations
    except Exception:  # noqa: BLE001 - not checked (``UNCHECKED``)
        return _UNKNOWN


_UNKNOWN = object()


def _exact_types(annotated: Any, names: dict[str, Any]) -> frozenset[type] | None:
    """The classes a value of a plain annotation (scalars, records, ``Literal``s, a union of
    those) can have as ``loads`` makes it; None for a container or anything else."""
    if isinstance(annotated, str):
        annotated = _resolved(annotated, names)
        if annotated is _UNKNOWN:
            return None
    if annotated is None or annotated is NoneType:
        return frozenset({NoneType})
    if annotated is float:  # JSON writes a whole float as an integer
        return frozenset({float, int})
    if annotated in _PLAIN_TYPES:
        return frozenset({annotated})
    if isinstance(annotated, type) and annotated in _FIELDS_OF:
        return frozenset(c for c in _FIELDS_OF if issubclass(c, annotated))
    origin, args = typing.get_origin(annotated), typing.get_args(annotated)
    if origin is typing.Literal:
        return frozenset(map(type, args))
    if origin is typing.Union or origin is UnionType:
        parts = [_exact_types(a, names) for a in args]
        return None if None in parts else frozenset().union(*parts)  # type: ignore[arg-type]
    return None


def _columns(row: Any, names: dict[str, Any]) -> tuple[frozenset[type], ...] | None:
    """The classes of each item of a fixed-size tuple type of plain values, or None."""
    if isinstance(row, str):
        row = _resolved(row, names)
    args = typing.get_args(row)
    if typing.get_origin(row) is not tuple or not args or Ellipsis in args:
        return None
    columns = tuple(_exact_types(a, names) for a in args)
    return None if None in columns else columns  # type: ignore[return-value]


def _rows_check(columns: tuple[frozenset[type], ...]) -> Callable[[tuple[Any, ...]], bool]:
    """Whether a tuple holds only tuples of ``len(columns)`` items, each of its column's classes."""
    sizes = frozenset({len(columns)})

    def check(rows: tuple[Any, ...]) -> bool:
        if not ({*map(type, rows)} <= _TUPLE and {*map(len, rows)} == sizes):
            return False
        return all({*map(type, column)} <= allowed for column, allowed in zip(zip(*rows), columns))

    return check


_TUPLE = frozenset({tuple})
_PLAIN_TYPES = frozenset({str, int, bool, bytes})


def _named_in(namespace: dict[str, Any], value: Any) -> str:
    name = f"_k{len(namespace)}"
    namespace[name] = value
    return name


def _type_check(annotated: Any, value: str, namespace: dict[str, Any], names: dict[str, Any], depth: int) -> str:
    """``_field_check`` of a type (or its text) for the value named ``value``; ``depth`` names
    the items of nested containers apart."""
    if isinstance(annotated, str):
        text, annotated = annotated, _resolved(annotated, names)
        if annotated is _UNKNOWN:
            UNCHECKED.add(text)
            return "True"
    exact = _exact_types(annotated, names)
    if exact is not None:
        if len(exact) == 1:
            return f"type({value}) is {_named_in(namespace, next(iter(exact)))}"
        return f"type({value}) in {_named_in(namespace, exact)}"
    origin, args = typing.get_origin(annotated), typing.get_args(annotated)
    item = f"i{depth}"
    if origin is typing.Union or origin is UnionType:
        return "(" + " or ".join(_type_check(a, value, namespace, names, depth) for a in args) + ")"
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        items = _exact_types(args[0], names)
        if items is not None:
            return f"(type({value}) is tuple and {{*map(type, {value})}} <= {_named_in(namespace, items)})"
        columns = _columns(args[0], names)
        if columns is not None:  # fixed-size tuples of plain values: column by column
            return f"(type({value}) is tuple and (not {value} or {_named_in(namespace, _rows_check(columns))}({value})))"
        return f"(type({value}) is tuple and all({_type_check(args[0], item, namespace, names, depth + 1)} for {item} in {value}))"
    if origin is tuple:
        parts = [_type_check(a, f"{value}[{i}]", namespace, names, depth) for i, a in enumerate(args)]
        return f"(type({value}) is tuple and len({value}) == {len(args)} and {' and '.join(parts) or 'True'})"
    if origin is dict and len(args) == 2:
        key, kept = f"k{depth}", f"v{depth}"
        return (f"(type({value}) is dict and all({_type_check(args[0], key, namespace, names, depth + 1)} and "
                f"{_type_check(args[1], kept, namespace, names, depth + 1)} for {key}, {kept} in {value}.items()))")
    if origin in (frozenset, set) and len(args) == 1:
        return (f"(type({value}) is {_named_in(namespace, origin)} and "
                f"all({_type_check(args[0], item, namespace, names, depth + 1)} for {item} in {value}))")
    if annotated in (tuple, dict, frozenset, set):
        return f"type({value}) is {_named_in(namespace, annotated)}"
    UNCHECKED.add(repr(annotated))
    return "True"


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
