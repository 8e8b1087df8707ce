"""The "checked, cheap" list of §1: functions on a default-ON hot path that do nothing there
but check a switch resolved before the call."""

from __future__ import annotations

from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import scan_files

RUNNER = '''
import contextlib
import os

from pkg.helpers import timer, probe, span, get_logger


class ModelRunner:
    def execute_model(self, batch):
        with timer("fwd"):
            out = batch
        probe(out)
        with span("x"):
            pass
        get_logger()
        print(len(batch), os.environ.get("X_STEP_LOG"))
        return out
'''

HELPERS = '''
import contextlib
import os

_TIMER_ON = os.environ.get("X_KTIME", "0") == "1"
_SPAN_ON = os.environ.get("X_SPANS", "0") == "1"
_LOG_ON = os.environ.get("X_BREAKDOWN_DIR")


def timer(tag):
    if not _TIMER_ON:
        return None
    return open("/tmp/t", "a")


def probe(value):
    spec = os.environ.get("X_PROBE", "")
    if not spec:
        return
    print(value.item())


def span(tag):
    if not _SPAN_ON:
        return contextlib.nullcontext()
    return open("/tmp/s", "a")


def get_logger():
    if not _LOG_ON:
        return None
    return open(_LOG_ON, "a")


def cold(tag):
    if not _TIMER_ON:
        return None
    return open("/tmp/c", "a")
'''


def _scan():
    return scan_files({"pkg/__init__.py": "", "pkg/runner.py": RUNNER, "pkg/helpers.py": HELPERS})


def test_entry_returns_and_nullcontext_fast_paths_on_constants_are_checked_cheap() -> None:
    result = _scan()
    cheap = {(c.function, c.how, c.switch, c.frequency) for c in result.roots.cheap}
    assert ("timer", "returns at entry", "X_KTIME", "step") in cheap
    assert ("get_logger", "returns at entry", "X_BREAKDOWN_DIR", "step") in cheap
    assert ("span", "returns nullcontext()", "X_SPANS", "step") in cheap


def test_a_check_that_reads_the_env_per_call_or_code_off_the_hot_path_is_not() -> None:
    names = {c.function for c in _scan().roots.cheap}
    assert "probe" not in names  # its check is an env read per call: a §1 row at its caller
    assert "cold" not in names  # never called on a hot path


def test_the_markdown_lists_them_under_checked_cheap() -> None:
    text = render_markdown(_scan(), load_ruleset())
    section = text.split("### Checked, cheap", 1)[1].split("\n## ", 1)[0]
    assert "`timer`" in section and "`get_logger`" in section and "`probe`" not in section
