"""Property: for generated f-string, `.format` and `%` messages and values, the lazy call the
eager-format fix makes formats (``LogRecord.getMessage()``) to exactly the original message,
or the transform declines."""

from __future__ import annotations

import logging
import math

import libcst as cst
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cs_audit.fix.lazy_logging import Decline, lazy_call

TEXT = st.text(alphabet="ab %{}'\"\\é\t", max_size=6)
VALUES = st.one_of(
    st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.text(alphabet="xy %{}'", max_size=4), st.none(), st.booleans(), st.lists(st.integers(0, 9), max_size=2),
)
SPECS = st.builds(
    lambda fill, align, sign, alt, zero, width, grouping, prec, kind: (
        f"{fill}{align}" if align else "") + sign + alt + zero + width + grouping + prec + kind,
    st.sampled_from(["", " ", "*", "0"]), st.sampled_from(["", "<", ">", "^", "="]), st.sampled_from(["", "+", "-", " "]),
    st.sampled_from(["", "#"]), st.sampled_from(["", "0"]), st.sampled_from(["", "1", "7", "12"]),
    st.sampled_from(["", ",", "_"]), st.sampled_from(["", ".0", ".2", ".5"]),
    st.sampled_from(["", "s", "d", "f", "F", "e", "E", "g", "G", "x", "X", "o", "%", "n", "b", "c"]),
)
FIELDS = st.tuples(st.integers(0, 2), st.sampled_from(["", "!r", "!s", "!a", "=", " = ", "=!s", "=!r"]),
                   st.one_of(st.just(""), SPECS))


def _source_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")


def _message(call: cst.Call, env: dict[str, object]) -> str:
    code = cst.Module([]).code_for_node
    values = [eval(code(a.value), env) for a in call.args]  # noqa: S307 - the test's own generated code
    record = logging.LogRecord("t", logging.INFO, __file__, 1, values[0], tuple(values[1:]), None)
    return record.getMessage()


def _check(expr: str, env: dict[str, object]) -> bool:
    try:
        expected = eval(expr, env)  # noqa: S307
    except (ValueError, TypeError, OverflowError, KeyError, IndexError):
        assume(False)
        raise
    call = cst.parse_expression(f"logger.info({expr})")
    assert isinstance(call, cst.Call)
    new = lazy_call(call, 0)
    if isinstance(new, Decline):
        return False
    got = _message(new, env)
    assert got == expected or (_nan_text(got) and _nan_text(expected)), (expr, cst.Module([]).code_for_node(new))
    return True


def _nan_text(s: str) -> bool:
    return "nan" in s.lower()


def _env(values: list[object]) -> dict[str, object]:
    return {"v0": values[0], "v1": values[1], "v2": values[2], "math": math}


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(TEXT, FIELDS), min_size=1, max_size=3), TEXT, st.lists(VALUES, min_size=3, max_size=3))
def test_fstring_messages_format_alike_or_decline(parts, tail, values) -> None:
    body = ""
    for text, (index, conversion, spec) in parts:
        body += _source_text(text).replace("{", "{{").replace("}", "}}")
        body += "{v" + str(index) + conversion + (f":{spec}" if spec else "") + "}"
    body += _source_text(tail).replace("{", "{{").replace("}", "}}")
    _check(f'f"{body}"', _env(values))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(TEXT, FIELDS), min_size=1, max_size=3), st.lists(VALUES, min_size=3, max_size=3))
def test_format_messages_format_alike_or_decline(parts, values) -> None:
    assume(all("=" not in conversion for _, (_, conversion, _) in parts))
    body = ""
    for text, (index, conversion, spec) in parts:
        body += _source_text(text).replace("{", "{{").replace("}", "}}")
        body += "{" + str(index) + conversion + (f":{spec}" if spec else "") + "}"
    _check(f'"{body}".format(v0, v1, v2)', _env(values))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(TEXT, st.sampled_from(["%s", "%r", "%d", "%5.1f", "%-4s", "%x"])), min_size=1, max_size=3),
       st.lists(VALUES, min_size=3, max_size=3))
def test_percent_messages_format_alike_or_decline(parts, values) -> None:
    template = "".join(_source_text(t).replace("%", "%%") + d for t, d in parts)
    names = ", ".join(f"v{i}" for i in range(len(parts)))
    _check(f'"{template}" % ({names},)', _env(values))


def test_common_messages_are_converted() -> None:
    """The property would hold for a transform that declines everything: these must convert."""
    env = _env([3, 2.5, "s"])
    for expr in ('f"a {v0} b {v1!r} c {v1:.3f} 100%"', 'f"{v0:>5d}|{v2:<4}|{v1:+.2e}|{v0:#x}"',
                 '"{} and {:.1f}".format(v0, v1)', 'f"{v0=} {v1 = :.2f} {v2=!s}"', '"%s of %d" % (v2, v0)', '"x " + str(v0) + f" {v1}"'):
        assert _check(expr, env), expr
