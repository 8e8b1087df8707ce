"""Read the arrays of a large JSON file item by item: a speedscope or Chrome trace of a long
run can be gigabytes, and only its frames, samples and events are wanted, one at a time."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import IO, Any

CHUNK = 1 << 20
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
#: inside a skipped container, the next character that matters
_STRUCT = re.compile(r'["\[\]{}]')
_STRING_END = re.compile(r'["\\]')


class Truncated(ValueError):
    """The file ends inside a value, or is not JSON where a value should start."""


class _Reader:
    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.buf = ""
        self.pos = 0
        self.eof = False

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self.handle.read(CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def peek(self) -> str:
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                raise Truncated("the file ends early")

    def take(self, expected: str) -> None:
        if self.peek() != expected:
            raise Truncated(f"expected {expected!r} at character {self.pos}")
        self.pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if not self._more():
                    raise Truncated("the file ends inside a value") from None
                continue
            # a number at the buffer's end may go on in the next chunk
            if end == len(self.buf) and not self.eof and isinstance(value, (int, float)) and self._more():
                continue
            self.pos = end
            return value

    def skip(self) -> None:
        """Step over a value without building it."""
        if self.peek() not in "[{":
            self.value()
            return
        depth = 0
        while True:
            m = _STRUCT.search(self.buf, self.pos)
            if m is None:
                self.pos = len(self.buf)
                if not self._more():
                    raise Truncated("the file ends inside a value")
                continue
            ch = m.group()
            self.pos = m.end()
            if ch == '"':
                self._skip_string()
            elif ch in "[{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return

    def _skip_string(self) -> None:
        while True:
            m = _STRING_END.search(self.buf, self.pos)
            if m is None or (m.group() == "\\" and m.end() >= len(self.buf)):
                self.pos = len(self.buf) if m is None else m.start()
                if not self._more():
                    raise Truncated("the file ends inside a string")
                continue
            if m.group() == "\\":
                self.pos = m.end() + 1
                continue
            self.pos = m.end()
            return


def items(handle: IO[str], wanted: set[tuple[str, ...]]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, value) for the values at the ``wanted`` paths of the JSON in ``handle``: an array
    there gives one pair per item.  A path is object keys and ``*`` for any array item (the
    path given back has the item's index); ``()`` is the top-level value."""
    reader = _Reader(handle)
    yield from _walk(reader, (), (), wanted)
    try:
        reader.peek()
    except Truncated:
        return
    raise Truncated(f"text after the JSON value at character {reader.pos}")


def _under(pattern: tuple[str, ...], wanted: set[tuple[str, ...]]) -> tuple[bool, bool]:
    """(``pattern`` is wanted, a wanted path goes below it)."""
    exact = pattern in wanted
    deeper = any(len(w) > len(pattern) and w[:len(pattern)] == pattern for w in wanted)
    return exact, deeper


def _walk(reader: _Reader, path: tuple[str, ...], pattern: tuple[str, ...], wanted: set[tuple[str, ...]]
          ) -> Iterator[tuple[tuple[str, ...], Any]]:
    exact, deeper = _under(pattern, wanted)
    head = reader.peek()
    if exact and head == "[":
        for index in _array(reader):
            yield (*path, str(index)), reader.value()
        return
    if exact:
        yield path, reader.value()
        return
    if not deeper or head not in "[{":
        reader.skip()
        return
    if head == "{":
        reader.take("{")
        if reader.peek() == "}":
            reader.take("}")
            return
        while True:
            key = reader.value()
            if not isinstance(key, str):
                raise Truncated(f"an object key is not a string at character {reader.pos}")
            reader.take(":")
            yield from _walk(reader, (*path, key), (*pattern, key), wanted)
            if reader.peek() == ",":
                reader.take(",")
                continue
            reader.take("}")
            return
    for index in _array(reader):
        yield from _walk(reader, (*path, str(index)), (*pattern, "*"), wanted)


def _array(reader: _Reader) -> Iterator[int]:
    """Step through an array: each item's index, the reader at the item's start (the caller
    reads or walks the item before asking for the next)."""
    reader.take("[")
    if reader.peek() == "]":
        reader.take("]")
        return
    index = 0
    while True:
        yield index
        index += 1
        if reader.peek() == ",":
            reader.take(",")
            continue
        reader.take("]")
        return
