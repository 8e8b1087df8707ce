"""Fixit 2 side of ``benchmarks/bench.py``: one LibCST lint rule, "the message of a logging
call is formatted before the call" (the meaning of ruff G004, widened to G001/G002).

Loaded as a local rule by ``benchmarks/fixit_rules/fixit.toml``; the same meaning as
``benchmarks/semgrep_fstring_logging.yaml``.  Its own cases run with
``fixit test .cs_bench_rules`` from ``benchmarks/fixit_rules``.
"""

from __future__ import annotations

import re
from typing import ClassVar

import libcst as cst
from fixit import Invalid, LintRule, Valid

#: ruff's logging methods whose first argument is the message; ``log`` takes it second
LOG_METHODS = frozenset({"debug", "info", "warn", "warning", "error", "exception", "critical"})
#: the last dotted part of a receiver that is taken for a logger (as ruff does for a
#: logger defined in the module): log, logger, logging, _LOGGER, request_logger, audit_log
LOGGER_NAME = re.compile(r"_*logg?(?:er|ing)?|\w*_log|\w*logger", re.IGNORECASE)

STRINGS = (cst.SimpleString, cst.ConcatenatedString)


def _dotted_tail(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` -> ``"c"`` when the expression is a plain dotted name, else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute) and _dotted_tail(expr.value) is not None:
        return expr.attr.value
    return None


def _message(call: cst.Call, position: int) -> cst.BaseExpression | None:
    """The argument at positional index ``position``, or the ``msg=`` keyword."""
    index = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == "msg":
                return arg.value
            continue
        if arg.star:  # *args: positions after it are unknown
            return None
        if index == position:
            return arg.value
        index += 1
    return None


def _has_fstring(expr: cst.BaseExpression) -> bool:
    """An f-string, or a concatenation holding one: ``"a" f"b{x}"``, ``f"a{x}" + s``."""
    if isinstance(expr, cst.FormattedString):
        return True
    if isinstance(expr, cst.ConcatenatedString):
        return _has_fstring(expr.left) or _has_fstring(expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _has_fstring(expr.left) or _has_fstring(expr.right)
    return False


def eager_kind(expr: cst.BaseExpression) -> str | None:
    """How the message is formatted before the call, or None when it is not."""
    if _has_fstring(expr):
        return "f-string"
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) and isinstance(expr.left, STRINGS):
        return "%-format"
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "format"
        and isinstance(expr.func.value, STRINGS)
    ):
        return "str.format"
    return None


class CsBenchLoggingEagerFormat(LintRule):
    """A logging call whose message is an f-string, a ``%``-formatted or a ``.format``-ed
    string: the formatting runs even when the record is dropped by its level."""

    VALID: ClassVar[list[Valid]] = [
        Valid('logger.info("loaded %d weights", n)'),
        Valid('logger.info("loaded", extra={"n": f"{n}"})'),
        Valid('logger.log(logging.INFO, "x %s", n)'),
        Valid('logger.warning_once(f"x {n}")'),
        Valid('catalog.info(f"x {n}")'),
        Valid('get_logger().info(f"x {n}")'),
        Valid('print(f"x {n}")'),
        Valid('logger.info("x: " + name)'),
    ]
    INVALID: ClassVar[list[Invalid]] = [
        Invalid('logger.info(f"loaded {n} weights")'),
        Invalid('logger.info("loaded %d weights" % n)'),
        Invalid('logger.info("loaded {} weights".format(n))'),
        Invalid('logger.log(logging.INFO, f"loaded {n}")'),
        Invalid('logging.warning(f"x {n}")'),
        Invalid('_LOGGER.error(f"x {n}")'),
        Invalid('self.logger.debug(f"x {n}")'),
        Invalid('self.log.exception(f"x")'),
        Invalid('request_logger.critical(f"{n}")'),
        Invalid('logger.info(msg=f"x {n}")'),
        Invalid('logger.info("a" f"b{n}")'),
        Invalid('logger.info(rf"x {n}")'),
        Invalid('logger.info(("x %s" % n))'),
        Invalid('logger.info(f"x {n}: " + ", ".join(names))'),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if method == "log":
            position = 1
        elif method in LOG_METHODS:
            position = 0
        else:
            return
        tail = _dotted_tail(func.value)
        if tail is None or not LOGGER_NAME.fullmatch(tail):
            return
        message = _message(node, position)
        kind = eager_kind(message) if message is not None else None
        if kind is not None:
            self.report(node, f"{kind} message to .{method}(): formatted even when the record is dropped")
