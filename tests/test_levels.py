"""Level switches: the value of a switch each gated site starts to run at (`if LEVEL >= 2:`,
`if trace_level() < 3: return`, `_diag(name, level)` falling back to a level knob), in the
JSON (`levels` of a switch) and as one §2 row per value; a comparison with a value that is
no level gives no level rows."""

from __future__ import annotations

import json

from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import scan_files

LEVELS = '''
import logging, os

logger = logging.getLogger(__name__)

DUMP_LEVEL = int(os.environ.get("ENG_DUMP_LEVEL", "0"))


def trace_level():
    return int(os.environ.get("ENG_TRACE_LEVEL", "0"))


def _diag(name, level=1):
    value = os.environ.get(name)
    if value is not None:
        return value not in ("", "0")
    return int(os.environ.get("ENG_DIAG_LOG", "0")) >= level


def _dump_rows(rows):
    logger.info("rows %s", rows.tolist())


def step(rows, n):
    if DUMP_LEVEL >= 1:
        logger.info("dump summary %d", n)
    if DUMP_LEVEL > 1:
        _dump_rows(rows)
    if _diag("ENG_POOL_DIAG"):
        logger.info("pool %d", n)
    if _diag("ENG_SLOT_DIAG", 3):
        logger.info("slots %d", rows.sum().item())
    if int(os.getenv("ENG_STEP_LOG", "0")) > 1:
        logger.info("step detail %d", n)
    if os.getenv("ENG_STEP_LOG", "0") == "1":
        logger.info("step %d", n)
    if trace_level() < 2:
        return
    logger.info("trace %d", n)
'''

ROOTS = ({"name": "step", "frequency": "step"},)


def _switches(files: dict[str, str]) -> dict[str, dict]:
    result = scan_files(files, hot_roots=ROOTS)
    return {s["name"]: s for s in json.loads(render_json(result))["switches"]}


def _levels(switch: dict) -> dict[int, list[tuple[int, str | None]]]:
    return {row["level"]: [(site["line"], site["via"]) for site in row["sites"]] for row in switch["levels"]}


def test_levels_from_constants_helpers_and_fallbacks() -> None:
    switches = _switches({"eng.py": LEVELS})
    # a module constant compared with 1 and with `> 1`; level 2 reaches `_dump_rows` through a gated call
    assert _levels(switches["ENG_DUMP_LEVEL"]) == {1: [(25, None)], 2: [(20, None), (20, None)]}
    assert switches["ENG_DUMP_LEVEL"]["levels"][1]["gpu_sync"] is True
    # `_diag(name, level)`: the level knob it falls back to runs each site at the call's level
    assert _levels(switches["ENG_DIAG_LOG"]) == {1: [(29, "ENG_POOL_DIAG")], 3: [(31, "ENG_SLOT_DIAG"), (31, "ENG_SLOT_DIAG")]}
    # `int(getenv(...)) > 1` and `getenv(...) == "1"` on one switch
    assert _levels(switches["ENG_STEP_LOG"]) == {1: [(35, None)], 2: [(33, None)]}
    # the rest of a block after `if trace_level() < 2: return`
    assert _levels(switches["ENG_TRACE_LEVEL"]) == {2: [(38, None)]}
    # the named switch of a `_diag` call is an on/off switch
    assert switches["ENG_SLOT_DIAG"]["levels"] == []
    assert switches["ENG_DIAG_LOG"]["kind"] == "level"


NOT_LEVELS = '''
import logging, os

logger = logging.getLogger(__name__)

CHUNK = int(os.environ.get("ENG_DEBUG_CHUNK", "0"))
VERBOSE = int(os.environ.get("ENG_VERBOSE", "0"))


class Runner:
    def __init__(self, cfg):
        self.cfg = cfg

    def step(self, rows):
        if CHUNK > 4096:
            logger.info("big chunk %s", rows.tolist())
        if VERBOSE >= self.cfg.min_verbose:
            logger.info("verbose %s", rows.tolist())
        if VERBOSE:
            logger.info("on %d", VERBOSE)
        if os.environ.get("ENG_TRACE", "0") == "1":
            logger.info("trace")
'''


def test_comparisons_with_values_that_are_no_levels() -> None:
    switches = _switches({"eng.py": NOT_LEVELS})
    # a size bigger than any level, a configuration value, a plain truth test, an on/off string
    assert switches["ENG_DEBUG_CHUNK"]["gated_sites"] == 2 and switches["ENG_DEBUG_CHUNK"]["levels"] == []
    assert switches["ENG_VERBOSE"]["levels"] == []
    assert switches["ENG_TRACE"]["levels"] == []


def test_enabled_cost_has_a_row_per_level() -> None:
    result = scan_files({"eng.py": LEVELS}, hot_roots=ROOTS)
    text = render_markdown(result, load_ruleset())
    section = text.split("## 2. Enabled cost", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `ENG_DIAG_LOG")]
    assert [row.split(" | ")[0] for row in rows] == ["| `ENG_DIAG_LOG=1`", "| `ENG_DIAG_LOG=3`"]
    assert "as `ENG_SLOT_DIAG`: `eng.py:31`" in rows[1] and "**yes**" in rows[1]
    assert "with the levels below" in rows[1]
    # an on/off switch keeps its one row
    assert sum(line.startswith("| `ENG_POOL_DIAG`") for line in section.splitlines()) == 1


HELPER = '''
import logging, os

logger = logging.getLogger(__name__)


def trace_level():
    return int(os.environ.get("ENG_KV_TRACE", "0"))


def kvtrace(level, tag, **fields):
    if trace_level() < level:
        return
    logger.info("[KV %s] %s", tag, fields)


def layer_hash(layer, t, level=3):
    if trace_level() < level:
        return
    kvtrace(level, "hash", layer=layer)


def step(reqs, layers, size):
    kvtrace(1, "alloc", n=len(reqs))
    kvtrace(2, "compose", n=len(reqs))
    for layer in layers:
        layer_hash(layer, None)
    kvtrace(size, "sized")
'''


def test_a_level_helper_runs_each_call_at_the_level_it_passes() -> None:
    switches = _switches({"kv.py": HELPER})
    # an int argument, a level handed on from a helper's own default, a value no literal gives
    assert _levels(switches["ENG_KV_TRACE"]) == {1: [(23, None), (27, None)], 2: [(24, None)], 3: [(19, None)]}


def test_a_constant_holding_a_helper_value_is_compared_as_the_switch() -> None:
    source = '''
import logging, os

logger = logging.getLogger(__name__)


def _get_env(key, type, default):
    value = os.environ.get(key)
    if value is None:
        return default
    return type(value)


_API_LEVEL = _get_env("ENG_API_LOGLEVEL", int, 0)


def call(f, args):
    if _API_LEVEL == 0:
        return f(*args)
    logger.debug("call %s", f)
    if _API_LEVEL >= 3:
        logger.debug("args %s", args)
    if _API_LEVEL >= 10:
        logger.debug("dump %s", [a.cpu() for a in args])
    return f(*args)


def _make_comm(ptr):
    return (ptr, os.environ.get("ENG_COMM_CAST", "0"))


def reduce(x):
    comm = _make_comm(x)
    if comm is not None:
        logger.info("reduce %s", x)
'''
    switches = _switches({"api.py": source})
    assert _levels(switches["ENG_API_LOGLEVEL"]) == {3: [(21, None)], 10: [(23, None), (23, None)]}
    # `== 0` before a return is as often a size's sanity check: only levels above 1 resolve;
    # a value that only holds the switch among other things, tested against None: no gate
    assert switches["ENG_COMM_CAST"]["gated_sites"] == 0


def test_a_constant_holding_a_helper_value_of_a_name_built_at_run_time_is_no_switch() -> None:
    # `_get_env(PREFIX + "LOGLEVEL", ...)`: no variable to name, so the comparison gates nothing
    source = '''
import logging, os

logger = logging.getLogger(__name__)
PREFIX = "ENG_"


def _get_env(key, type, default):
    value = os.environ.get(key)
    if value is None:
        return default
    return type(value)


_DYN_LEVEL = _get_env(PREFIX + "LOGLEVEL", int, 0)


def step(args):
    if _DYN_LEVEL >= 3:
        logger.info("args %s", args)
'''
    result = scan_files({"api.py": source}, hot_roots=ROOTS)
    assert [(f.rule, f.line, f.switch) for f in result.findings] == [("default-on-emitter", 19, None)]
