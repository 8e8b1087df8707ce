"""One small snippet per rule with the exact findings expected, and negatives that stay silent.

Every snippet puts the code under a hot root (`Runner.execute_model`, a per-step
root from rules/hot_paths.yaml) unless the test is about code off the hot path.
"""

from __future__ import annotations

from cs_audit.testing import findings_of, scan_files

HEADER = """
import json
import logging
import os
import time

import torch

logger = logging.getLogger(__name__)
"""


def _text(switch: object) -> str | None:
    """A finding's switch as the reports spell it."""
    return None if switch is None else switch.text  # type: ignore[attr-defined]


def hot(body: str, extra: str = "") -> str:
    """A module whose `Runner.execute_model` (per step) runs ``body``; line 12 is the body's first line."""
    indented = "\n".join("        " + line if line else "" for line in body.strip("\n").splitlines())
    return HEADER.lstrip("\n") + "\nclass Runner:\n    def execute_model(self, batch):\n" + indented + "\n" + extra


def test_hot_helper_puts_first_body_line_at_12() -> None:
    assert hot("x = 1").splitlines()[11] == "        x = 1"


# ---------------------------------------------------------------- env-read-hot
def test_env_read_hot_direct_reads() -> None:
    src = hot('''
a = os.environ.get("A_DBG")
b = os.getenv("B_DBG", "0")
c = os.environ["C_DBG"]
d = "D_DBG" in os.environ
''')
    assert findings_of(src, "env-read-hot") == [
        (12, "env-read-hot", None), (13, "env-read-hot", None),
        (14, "env-read-hot", None), (15, "env-read-hot", None),
    ]


def test_env_read_hot_through_aliases() -> None:
    src = '''
from os import environ, getenv as ge
import os as _os
env = _os.environ

class Runner:
    def execute_model(self, batch):
        a = ge("A")
        b = environ.get("B")
        c = env.get("C")
        return a, b, c
'''
    assert [(line, sw) for line, _, sw in findings_of(src, "env-read-hot")] == [(7, None), (8, None), (9, None)]


def test_env_read_once_is_silent() -> None:
    src = '''
import functools
import os

FLAG = os.environ.get("FLAG_DBG")

class Runner:
    def __init__(self):
        self.dbg = os.environ.get("RUNNER_DBG")

    @functools.lru_cache
    def cached(self):
        return os.environ.get("CACHED_DBG")

    def execute_model(self, batch):
        if FLAG:
            pass
        return self.cached()
'''
    assert findings_of(src, "env-read-hot") == []


def test_env_read_off_hot_path_is_silent() -> None:
    src = 'import os\n\ndef tool():\n    return os.environ.get("X")\n'
    assert findings_of(src, "env-read-hot") == []


def test_env_read_through_helper_reported_at_call_site_with_literal_switch() -> None:
    src = hot('''
if _diag("KEEPMAP_DIAG"):
    logger.info("keep %s", batch)
''', extra='''

def _diag(name, level=1):
    val = os.environ.get(name)
    if val is not None:
        return val not in ("", "0")
    return int(os.environ.get("DELTA_COMPACTION_LOG", "0")) >= level
''')
    result = scan_files({"mod.py": src})
    hits = [f for f in result.findings if f.rule == "env-read-hot"]
    assert [(f.line, _text(f.switch), f.detail.var) for f in hits] == [(12, None, "KEEPMAP_DIAG,DELTA_COMPACTION_LOG")]
    # and the log line it guards is gated by the switch named at the call site
    assert [f for f in result.findings if f.rule == "default-on-emitter"] == []


def test_registry_reads_sglang_and_vllm_styles() -> None:
    src = '''
from sglang.srt.environ import envs
from vllm import envs as venvs

class Runner:
    def execute_model(self, batch):
        a = envs.SGLANG_TRACE.get()
        b = venvs.VLLM_DEBUG_DUMP
        return a, b
'''
    result = scan_files({"mod.py": src})
    assert [(f.line, f.detail.var, f.detail.via) for f in result.findings] == [
        (6, "SGLANG_TRACE", "registry:sglang-envs"), (7, "VLLM_DEBUG_DUMP", "registry:vllm-envs"),
    ]


def test_dynamic_env_name_is_reported_not_dropped() -> None:
    src = hot('x = os.environ.get(batch.name)')
    result = scan_files({"mod.py": src})
    assert [(f.line, f.detail.var) for f in result.findings] == [(12, "<dynamic>")]


def test_loop_over_requests_raises_frequency() -> None:
    src = hot('''
for req in batch:
    x = os.environ.get("PER_REQ")
''')
    result = scan_files({"mod.py": src})
    assert [(f.line, f.frequency) for f in result.findings] == [(13, "request")]


# ---------------------------------------------------------------- default-on-emitter
def test_default_on_emitter_positive() -> None:
    src = hot('''
logger.info("step %d", 1)
print("hello")
logging.info("module-level logger %s", batch)
''')
    assert findings_of(src, "default-on-emitter") == [
        (12, "default-on-emitter", None), (13, "default-on-emitter", None), (14, "default-on-emitter", None),
    ]


def test_default_on_emitter_negatives() -> None:
    src = hot('''
logger.debug("lazy %s", batch)
if os.environ.get("TRACE_ME") == "1":
    logger.info("traced %s", batch)
if logger.isEnabledFor(logging.DEBUG):
    logger.info("dbg %s", batch)
''')
    assert findings_of(src, "default-on-emitter") == []


def test_else_branch_of_negated_gate_is_gated() -> None:
    src = hot('''
if not os.environ.get("MY_TRACE"):
    pass
else:
    logger.info("traced")
''')
    result = scan_files({"mod.py": src})
    assert [(f.rule, f.line) for f in result.findings if f.rule == "default-on-emitter"] == []


def test_early_return_gates_the_rest_of_the_function() -> None:
    src = '''
import logging, os
logger = logging.getLogger(__name__)
_LEVEL = int(os.environ.get("MY_LEVEL", "0"))

class Runner:
    def execute_model(self, batch):
        if _LEVEL < 2:
            return
        logger.info("detail %s", batch)
'''
    assert findings_of(src, "default-on-emitter") == []


def test_emitter_reached_only_through_gated_call_is_not_default_on() -> None:
    src = hot('''
if os.environ.get("DUMP_ALL"):
    self._dump(batch)
''', extra='''
    def _dump(self, batch):
        logger.info("dump %s", batch)
''')
    assert findings_of(src, "default-on-emitter") == []


def test_default_valued_switch_runs_by_default() -> None:
    src = hot('''
if os.environ.get("SLOT_LOG", "1") == "1":
    logger.info("slot")
''')
    assert findings_of(src, "default-on-emitter") == [(13, "default-on-emitter", None)]


def test_file_write_is_an_emitter() -> None:
    src = hot('''
with open("/tmp/x.jsonl", "a") as f:
    f.write(json.dumps({"a": 1}))
''')
    rules = sorted((line, rule) for line, rule, _ in findings_of(src))
    # no eager-format: a write is never filtered, so the json.dumps it is handed is never wasted
    assert rules == [(12, "hardcoded-output-path"), (12, "per-call-open"), (13, "default-on-emitter")]


# ---------------------------------------------------------------- eager-format
def test_eager_format_kinds() -> None:
    src = hot('''
logger.debug(f"pool {batch}")
logger.debug("pool {}".format(batch))
logger.debug("pool %s" % batch)
logger.debug("pool " + str(batch))
logger.debug("pool %s", json.dumps(batch))
''')
    result = scan_files({"mod.py": src})
    assert [(f.line, f.eager_kinds) for f in result.findings if f.rule == "eager-format"] == [
        (12, ("f-string",)), (13, ("format",)), (14, ("percent",)), (15, ("concat",)), (16, ("json.dumps",)),
    ]


def test_eager_format_negatives() -> None:
    src = hot('''
logger.info("x %s", batch)
if logger.isEnabledFor(logging.DEBUG):
    logger.debug(f"pool {batch}")
if os.environ.get("VERBOSE_DBG"):
    logger.info(f"traced {batch}")
''')
    assert findings_of(src, "eager-format") == []


def test_eager_arguments_to_a_helper_that_gates_inside() -> None:
    src = hot('''
cptrace(1, "alloc", h=khash(batch))
cptrace(1, "alloc", note=f"n={batch}")
cptrace(1, "alloc", n=len(batch))
if trace_enabled(1):
    cptrace(1, "alloc", h=khash(batch))
''', extra='''

def trace_level():
    return int(os.environ.get("CP_TRACE", "0"))


def trace_enabled(level=1):
    return trace_level() >= level


def khash(t):
    return int(t.sum().item())


def cptrace(level, tag, **fields):
    if trace_level() < level:
        return
    logger.info("[T %s] %s", tag, fields)
''')
    result = scan_files({"mod.py": src})
    eager = [(f.line, _text(f.switch), f.eager_kinds, f.gpu_sync) for f in result.findings if f.rule == "eager-format"]
    assert eager == [(12, None, ("call:khash",), True), (13, None, ("f-string",), False)]
    syncs = [(f.line, _text(f.switch)) for f in result.findings if f.rule == "sync-in-debug"]
    # khash's .item() runs by default through the ungated call's arguments, and is reported
    # at each hot call that pays it too (#19): the ungated one, and the one under the level check
    assert syncs == [(12, None), (16, "CP_TRACE"), (28, None)]


# ---------------------------------------------------------------- sync-in-debug
def test_sync_in_log_arguments_and_gated_branches() -> None:
    src = hot('''
logger.info("max %d", int(batch.max().item()))
if os.environ.get("KV_DUMP") == "1":
    torch.save(batch.cpu(), "x.pt")
if os.environ.get("SYNC_DBG"):
    torch.cuda.synchronize()
''')
    result = scan_files({"mod.py": src})
    assert [(f.line, _text(f.switch), f.detail.call) for f in result.findings if f.rule == "sync-in-debug"] == [
        (12, None, "item"), (14, "KV_DUMP", "cpu"), (16, "SYNC_DBG", "synchronize"),
    ]


def test_compute_item_is_not_flagged() -> None:
    src = hot('''
n = int(batch.sum().item())
ids = batch.tolist()
return n, ids
''')
    assert findings_of(src, "sync-in-debug") == []


def test_sync_in_debug_only_helper() -> None:
    src = hot('''
if os.environ.get("FP_LOG"):
    self._fingerprint(batch)
''', extra='''
    def _fingerprint(self, t):
        value = t.float().norm().item()
        logger.info("fp %f", value)
''')
    result = scan_files({"mod.py": src})
    assert [(f.line, _text(f.switch)) for f in result.findings if f.rule == "sync-in-debug"] == [(16, "FP_LOG")]


def test_work_an_option_turns_on_is_no_debug_code_and_an_option_named_for_logging_is() -> None:
    # the drafter's `.tolist()` is its work; a sync that only logging stats turns on is debug code
    src = hot('''
if self.config.speculative_config is not None:
    self._draft(batch)
if self.config.log_stats:
    self._stats(batch)
''', extra='''
    def _draft(self, t):
        return t.argmax(-1).tolist()

    def _stats(self, t):
        return t.float().mean().item()


@dataclass
class EngineConfig:
    speculative_config: object = None
    log_stats: bool = False
''').replace("import os", "import os\nfrom dataclasses import dataclass")
    result = scan_files({"mod.py": src})
    assert [(f.function, _text(f.switch)) for f in result.findings if f.rule == "sync-in-debug"] == [
        ("Runner._stats", "option:log_stats")]


# ---------------------------------------------------------------- duplicate-helper
DIAG_A = '''
import os

def _diag(name, level=1):
    val = os.environ.get(name)
    if val is not None:
        return val not in ("", "0")
    return int(os.environ.get("DELTA_LOG", "0")) >= level
'''
DIAG_B = '''
import os


def _diag(key, lvl=1):
    raw = os.environ.get(key)
    if raw is not None:
        return raw not in ("", "0")
    return int(os.environ.get("DELTA_LOG", "0")) >= lvl
'''
DIAG_OTHER = '''
import os

_ON = set(os.environ.get("DIAG_SET", "").split(","))

def _diag(name, level=1):
    if name in _ON:
        return True
    return level <= 0
'''


def test_duplicate_helper_up_to_local_renames() -> None:
    result = scan_files({"a.py": DIAG_A, "b.py": DIAG_B, "c.py": DIAG_OTHER})
    assert [(f.path, f.line, f.function) for f in result.findings if f.rule == "duplicate-helper"] == [
        ("a.py", 3, "_diag"), ("b.py", 4, "_diag"),
    ]
    assert [(g.name, [(s.path, s.line) for s in g.sites]) for g in result.duplicates] == [
        ("_diag", [("a.py", 3), ("b.py", 4)])
    ]


def test_a_duplicate_copy_says_the_switch_its_code_runs_under() -> None:
    # the copy in a module written for another platform runs only there, as every rule says
    result = scan_files({"a.py": DIAG_A, "b_npu.py": DIAG_B})
    copies = [(f.path, f.switch.text if f.switch else None) for f in result.findings if f.rule == "duplicate-helper"]
    assert copies == [("a.py", None), ("b_npu.py", "option:platform=npu")]


def test_same_name_different_body_is_not_a_duplicate() -> None:
    result = scan_files({"a.py": DIAG_A, "c.py": DIAG_OTHER})
    assert result.duplicates == ()


# ---------------------------------------------------------------- file output rules
def test_per_call_open_and_cached_handle() -> None:
    src = '''
import json, os

class Tracer:
    def __init__(self, path):
        self._fh = open(path, "a")

    def emit(self, row):
        self._fh.write(json.dumps(row))

def fsm_log(path, rec):
    with open(path, "a") as f:
        f.write(json.dumps(rec))

def read_back(path):
    with open(path) as f:
        return f.read()
'''
    assert findings_of(src, "per-call-open") == [(11, "per-call-open", None)]


def test_redundant_flush_only_on_line_buffered_handle() -> None:
    src = '''
class A:
    def __init__(self, p):
        self._fh = open(p, "a", buffering=1)
    def log(self, row):
        self._fh.write(row)
        self._fh.flush()

class B:
    def __init__(self, p):
        self._out = open(p, "a")
    def log(self, row):
        self._out.write(row)
        self._out.flush()
'''
    assert findings_of(src, "redundant-flush") == [(6, "redundant-flush", None)]


def test_hardcoded_output_path() -> None:
    src = '''
import os, torch

DUMP_DIR = os.environ.get("KV_DUMP_DIR", "/tmp/kvdump")

def dump(t, root):
    os.makedirs("/tmp/cs_dump", exist_ok=True)
    torch.save(t, f"/tmp/cs_dump/x_{1}.pt")
    os.makedirs(os.path.join(root, "kv"), exist_ok=True)
    with open(os.path.join(root, "a.jsonl"), "a") as f:
        f.write("x")
'''
    assert [(line, rule) for line, rule, _ in findings_of(src, "hardcoded-output-path")] == [
        (3, "hardcoded-output-path"), (6, "hardcoded-output-path"), (7, "hardcoded-output-path"),
    ]


def test_own_timestamp_but_not_in_a_launcher() -> None:
    src = '''
import os, time, datetime

def run_dir(root):
    return os.path.join(root, time.strftime("%Y%m%d_%H%M%S"))

def stamp():
    return datetime.datetime.now().isoformat()

def launch(root):
    run = os.path.join(root, time.strftime("%Y%m%d"))
    os.environ["CS_OUT_RUN"] = run
'''
    assert findings_of(src, "own-timestamp") == [(4, "own-timestamp", None)]


def test_fstring_among_three_adjacent_literals_and_logger_made_on_the_spot() -> None:
    src = hot('''
logger.info("plain " f"n={batch}" f" more={batch}")
logging.getLogger(__name__).info(f"x {batch}")
''')
    result = scan_files({"mod.py": src})
    assert [(f.line, f.eager_kinds) for f in result.findings if f.rule == "eager-format"] == [
        (12, ("f-string",)), (13, ("f-string",)),
    ]


def test_debug_flags_gate_but_lists_parameters_and_comparisons_do_not() -> None:
    src = hot('''
if self.verbose:
    logger.info("verbose %s", batch)
if self.trace_files:
    logger.info("has trace files %s", batch)
if batch.key not in self.debug_seen:
    logger.info("first time %s", batch)
''')
    assert findings_of(src, "default-on-emitter") == [(15, "default-on-emitter", None), (17, "default-on-emitter", None)]


def test_non_ascii_text_before_and_after_a_statement_keeps_its_code() -> None:
    src = hot('''
x = "é"; logger.info(f"naïve {batch}")  # café
''')
    result = scan_files({"mod.py": src})
    assert [(f.rule, f.code) for f in result.findings if f.rule == "eager-format"] == [
        ("eager-format", 'logger.info(f"naïve {batch}")'),
    ]
