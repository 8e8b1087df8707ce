"""Reusing a stored whole-tree result after an edit that moved lines and nothing else.

The joins read line numbers only to order and contain things within one file (a site in
a function's span, in a call's argument lines, sorted by line) and to report them; they
never add or subtract them, except ``FunctionDef.body_lines``, which they only compare
with ``SMALL_BODY_LINES`` and ``ACCESSOR_BODY_LINES``.  So when a file's new facts equal its old facts once every line
number is blanked out, and the old lines map to the new ones one-to-one and in order, the
whole-tree result of the new tree is the old one with that file's lines mapped.  Both
functions here are pure; ``api`` decides when to use them.

That is an invariant of the joins: one that computes with line numbers (a distance, a
line + 1) breaks it.  ``tests/test_reuse.py`` moves lines all over the fixture trees and
checks that the reused reports equal uncached ones; a result naming a line no fact of a
moved file had makes ``moved_results`` give up, and the tree is analysed.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar

from cs_audit.model import (
    ACCESSOR_BODY_LINES,
    PLAIN_FIELDS,
    SMALL_BODY_LINES,
    Deployment,
    DuplicateGroup,
    FileFacts,
    Finding,
    HotRoots,
    PlainCall,
    Suppression,
    Switch,
)

#: fields that hold a line number; (line, text, ...) tuples in the fields of ``_LINE_PAIRS``
_LINE_FIELDS = frozenset({"line", "end_line", "body_line"})
_LINE_PAIRS = frozenset({"literal_paths", "file_refs", "gated_effects", "field_stores", "keywords_named"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


_ATOMS = frozenset({str, int, bool, float, type(None)})


def _shape(value: Any, lines: list[int]) -> Any:
    """``value`` as plain tuples with line numbers blanked (appended to ``lines`` in order)."""
    cls = type(value)
    if cls in _ATOMS:
        return value
    if cls is tuple:
        return tuple(v if type(v) in _ATOMS else _shape(v, lines) for v in value)
    if cls is PlainCall:
        lines.extend((value.line, value.end_line))
        return ("PlainCall", *(0 if name in _LINE_FIELDS else _shape(item, lines) for name, item in zip(PLAIN_FIELDS, value)))
    if not hasattr(cls, "__dataclass_fields__"):
        return value
    out: list[Any] = [cls.__name__]
    for name in _field_names(cls):
        item = getattr(value, name)
        if type(item) in _ATOMS:
            if name in _LINE_FIELDS:
                lines.append(item)
                item = 0
            elif name == "body_lines":
                item = (item <= SMALL_BODY_LINES, item <= ACCESSOR_BODY_LINES)
        elif name in _LINE_PAIRS:
            lines.extend(entry[0] for entry in item)
            item = tuple(entry[1:] for entry in item)
        elif name in ("path_blocks", "periodic_blocks"):  # (first line, last line, kind or modulus, why, the guard's line)
            for first, last, _kind, _why, guard in item:
                lines.extend((first, last, guard))
            item = tuple(block[2:4] for block in item)
        else:
            item = _shape(item, lines)
        out.append(item)
    return tuple(out)


def line_map(old: FileFacts, new: FileFacts) -> dict[int, int] | None:
    """Old line -> new line when ``new`` is ``old`` with its lines moved (one-to-one, order
    kept); None when anything else differs."""
    for name in _field_names(FileFacts):  # a fact more or less (a call added): no need to shape them
        before, after = getattr(old, name), getattr(new, name)
        if type(before) is tuple and type(after) is tuple and len(before) != len(after):
            return None
    old_lines: list[int] = []
    new_lines: list[int] = []
    if _shape(old, old_lines) != _shape(new, new_lines):
        return None
    mapping: dict[int, int] = {}
    for before, after in zip(old_lines, new_lines):
        if mapping.setdefault(before, after) != after:
            return None
    pairs = sorted(mapping.items())
    if any(a[1] >= b[1] for a, b in zip(pairs, pairs[1:])):
        return None  # two old lines on one new line, or order changed
    return mapping


class _Unmapped(Exception):
    """A result names a line of a moved file that no fact of that file had."""


_T = TypeVar("_T")


def _moved(value: _T, maps: dict[str, dict[int, int]]) -> _T:
    """``value`` with every (path, line[, end_line]) of a file in ``maps`` mapped."""
    cls = type(value)
    if cls is tuple:
        items: Any = value
        out: Any = tuple(v if type(v) in _ATOMS else _moved(v, maps) for v in items)
        return value if all(a is b for a, b in zip(out, items)) else out
    if not hasattr(cls, "__dataclass_fields__"):
        return value
    names = _field_names(cls)
    changes: dict[str, Any] = {}
    mapping = maps.get(getattr(value, "path", None)) if "path" in names else None  # type: ignore[arg-type]
    for name in names:
        item = getattr(value, name)
        if type(item) in _ATOMS:
            if name in _LINE_FIELDS and mapping is not None:
                if item not in mapping:
                    raise _Unmapped(name)
                changes[name] = mapping[item]
            elif name in ("path_reason", "message") and ".py:" in item:  # names a guard's `path:line`
                moved_reason = _moved_cites(item, maps)
                if moved_reason != item:
                    changes[name] = moved_reason
        elif name == "readers":  # (path, line, pattern)
            changes[name] = tuple(_moved_reader(r, maps) for r in item)
        elif name in _CITING:
            moved = tuple(_moved_cites(text, maps) for text in item)
            if moved != item:
                changes[name] = moved
        else:
            moved = _moved(item, maps)
            if moved is not item:
                changes[name] = moved
    return dataclasses.replace(value, **changes) if changes else value  # type: ignore[type-var]


#: fields of text that cite `path:line` (a switch's evidence)
_CITING = frozenset({"reasons", "category_reasons"})
_CITE = re.compile(r"([\w./-]+\.py):(\d+)")


def _moved_cites(text: str, maps: dict[str, dict[int, int]]) -> str:
    def one(match: re.Match[str]) -> str:
        mapping = maps.get(match[1])
        if mapping is None:
            return match[0]
        line = int(match[2])
        if line not in mapping:
            raise _Unmapped("reasons")
        return f"{match[1]}:{mapping[line]}"

    return _CITE.sub(one, text) if ".py:" in text else text


def _moved_reader(reader: tuple[str, int, str], maps: dict[str, dict[int, int]]) -> tuple[str, int, str]:
    path, line, pattern = reader
    mapping = maps.get(path)
    if mapping is None:
        return reader
    if line not in mapping:
        raise _Unmapped("readers")
    return (path, mapping[line], pattern)


def moved_results(findings: tuple[Finding, ...], switches: tuple[Switch, ...], duplicates: tuple[DuplicateGroup, ...],
                  maps: dict[str, dict[int, int]], suppressions: tuple[Suppression, ...] = (),
                  ) -> tuple[tuple[Finding, ...], tuple[Switch, ...], tuple[DuplicateGroup, ...], tuple[Suppression, ...]] | None:
    """The findings, switches and duplicate groups with the lines of the files in ``maps``
    moved; None when one names a line the map does not know (then the caller analyses)."""
    try:
        return _moved(findings, maps), _moved(switches, maps), _moved(duplicates, maps), _moved_suppressions(suppressions, maps)
    except _Unmapped:
        return None


def moved_roots(roots: HotRoots | None, maps: dict[str, dict[int, int]]) -> HotRoots | None:
    """The hot roots with the lines of their event loops moved; None when a loop's line is not
    in its file's map (or there are no roots to move)."""
    if roots is None:
        return None
    try:
        return _moved(roots, maps)
    except _Unmapped:
        return None


def moved_deployment(deployment: Deployment | None, maps: dict[str, dict[int, int]]) -> Deployment | None:
    """The deployment with the lines of the declarations it cites moved; None when one is not
    in its file's map (or there is none to move)."""
    if deployment is None:
        return None
    try:
        return _moved(deployment, maps)
    except _Unmapped:
        return None


def _moved_suppressions(suppressions: tuple[Suppression, ...], maps: dict[str, dict[int, int]]) -> tuple[Suppression, ...]:
    """The suppressions with their line and covered lines mapped (a line no fact of the
    moved file had cannot be mapped: ``_Unmapped``)."""
    out = []
    for sup in suppressions:
        mapping = maps.get(sup.path)
        if mapping is None:
            out.append(sup)
            continue
        lines = (sup.line, *sup.covers)
        if any(line not in mapping for line in lines):
            raise _Unmapped("suppression")
        out.append(dataclasses.replace(sup, line=mapping[sup.line], covers=tuple(mapping[line] for line in sup.covers)))
    return tuple(out)
