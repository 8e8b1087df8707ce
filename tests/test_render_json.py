"""``render.json.dumps``: the text of ``json.dumps(value, indent=2, ensure_ascii=False)``."""

from __future__ import annotations

import json
from collections import OrderedDict
from enum import IntEnum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cs_audit.render.json import dumps


class Level(IntEnum):
    LOW = 1


def _reference(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()  # control characters, quotes, backslashes, non-ASCII, surrogates
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_same_text_as_json_dumps(value: object) -> None:
    assert dumps(value) == _reference(value)


@pytest.mark.parametrize("value", [
    {},
    [],
    {"a": {}, "b": [], "c": [{}]},
    {"nested": [[1, [2.5, "é\n\"\\"]], {"k": None}]},
    {1: "int key", None: "none key"},          # keys json.dumps converts: left to it
    OrderedDict(b=1, a=[True, False]),          # a dict subclass: json.dumps indents it too
    {"level": Level.LOW, "n": float("nan"), "inf": -float("inf")},
    "\ud800 lone surrogate",
])
def test_edge_cases(value: object) -> None:
    assert dumps(value) == _reference(value)


def test_unserialisable_values_raise_as_json_does() -> None:
    with pytest.raises(TypeError):
        dumps({"x": object()})
