"""Switch categories from what the code does (names only break ties), and the dispositions
and §4 proposals that follow from them."""

from __future__ import annotations

from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import scan_files

ENGINE = '''
import ctypes, os, sys, time, logging
import torch

logger = logging.getLogger(__name__)

# misleading names: "LOG" inside EPILOGUE, LOGPROB, a plain-named debug switch, a _PATH toggle
FUSE_EPILOGUE = os.environ.get("ENG_FP8_Q_EPILOGUE", "0") == "1"
CHUNK = int(os.environ.get("ENG_LOGPROB_CHUNK_SIZE", "64"))
CHECK_POOL = os.environ.get("ENG_CHECK_MEMORY_POOL", "0") == "1"
FAST = os.environ.get("ENG_ENABLE_FAST_PATH", "0") == "1"
RESULTS = os.environ.get("ENG_RESULTS", "")
TRACE_LEVEL = int(os.environ.get("ENG_TRACE_LEVEL", "0"))


def kernel(x):
    if FUSE_EPILOGUE:
        return torch.fused_epilogue(x)
    return torch.plain(x)


def pool_step(pool):
    if CHECK_POOL:
        free = pool.free.tolist()
        logger.info("free slots %s", free)
    return pool.alloc()


def route(x):
    if FAST:
        return torch.fast_route(x)
    return torch.slow_route(x)


def save_results(rows):
    with open(os.path.join(RESULTS, "rows.jsonl"), "w") as f:
        f.write(str(rows))


def trace(step):
    if os.environ.get("ENG_TRACE"):
        logger.info("step %d", step)
    if TRACE_LEVEL >= 2:
        logger.info("detail %d", step)


def load_toolkit():
    home = os.environ.get("ENG_TOOLKIT_HOME", "/opt/toolkit")
    sys.path.append(home)
    return ctypes.CDLL(os.path.join(os.environ["ENG_LIB_DIR"], "libeng.so"))


def maybe_crash(step):
    if os.environ.get("ENG_CRASH_AT_STEP"):
        time.sleep(5)
        os._exit(1)


def read_config():
    with open(os.environ["ENG_CONFIG_FILE"]) as f:
        return f.read()
'''


def _switches(files: dict[str, str] | None = None):
    result = scan_files(files or {"engine.py": ENGINE})
    return result, {s.name: s for s in result.switches}


def test_category_comes_from_what_the_switch_gates_or_feeds() -> None:
    _, s = _switches()
    got = {name: (sw.category, sw.kind) for name, sw in s.items()}
    assert got == {
        "ENG_FP8_Q_EPILOGUE": ("feature", ""),        # gates a kernel choice; LOG in EPILOGUE is no log
        "ENG_LOGPROB_CHUNK_SIZE": ("feature", ""),    # a size the code computes with
        "ENG_CHECK_MEMORY_POOL": ("instrumentation", "log"),  # plain name, gates a sync + a log line
        "ENG_ENABLE_FAST_PATH": ("feature", ""),      # a toggle named ..._PATH
        "ENG_RESULTS": ("output-path", ""),           # a plain name whose value is written to
        "ENG_TRACE": ("instrumentation", "trace"),
        "ENG_TRACE_LEVEL": ("instrumentation", "level"),
        "ENG_TOOLKIT_HOME": ("input-path", ""),       # sys.path
        "ENG_LIB_DIR": ("input-path", ""),            # ctypes.CDLL
        "ENG_CRASH_AT_STEP": ("test-hook", ""),       # sleep + _exit under it
        "ENG_CONFIG_FILE": ("input-path", ""),        # open() for read
    }


def test_each_category_cites_the_line_that_decided() -> None:
    _, s = _switches()
    assert any("engine.py:23 tolist()" in r for r in s["ENG_CHECK_MEMORY_POOL"].reasons)
    assert any("engine.py:35 open(w)" in r for r in s["ENG_RESULTS"].reasons)
    assert any("engine.py:49 CDLL()" in r for r in s["ENG_LIB_DIR"].reasons)
    assert any("engine.py:54 sleep()" in r for r in s["ENG_CRASH_AT_STEP"].reasons)


def test_only_instrumentation_and_test_hooks_are_removed() -> None:
    _, s = _switches()
    removed = sorted(name for name, sw in s.items() if sw.disposition == "REMOVE")
    assert removed == ["ENG_CHECK_MEMORY_POOL", "ENG_CRASH_AT_STEP", "ENG_TRACE", "ENG_TRACE_LEVEL"]
    assert all(s[n].disposition == "KEEP" for n in ("ENG_FP8_Q_EPILOGUE", "ENG_LOGPROB_CHUNK_SIZE", "ENG_LIB_DIR"))


def test_a_level_knob_merges_into_its_on_off_sibling_and_names_follow_the_tree_prefix() -> None:
    runner = "export ENG_TRACE_LEVEL=2\nexport ENG_TRACE_LEVEL=3\npython engine.py\n"
    result, s = _switches({"engine.py": ENGINE, "run.sh": runner, "run2.sh": runner})
    assert (s["ENG_TRACE_LEVEL"].disposition, s["ENG_TRACE_LEVEL"].merge_into) in {("KEEP", None), ("MERGE", "ENG_TRACE")}
    one = {"engine.py": ENGINE, "run.sh": "export ENG_TRACE_LEVEL=2\npython engine.py\n"}
    result, s = _switches(one)
    assert (s["ENG_TRACE_LEVEL"].disposition, s["ENG_TRACE_LEVEL"].merge_into) == ("MERGE", "ENG_TRACE")
    assert s["ENG_RESULTS"].merge_into == "ENG_OUT"  # the tree's own prefix, not CS_
    text = render_markdown(result, load_ruleset())
    section = text[text.index("### 4.1"):text.index("### 4.2")]
    assert "`ENG_RESULTS`" in section
    assert "Left alone, read only" in section
    left_alone = section[section.index("Left alone"):]
    assert all(f"`{n}`" in left_alone for n in ("ENG_TOOLKIT_HOME", "ENG_LIB_DIR", "ENG_CONFIG_FILE"))
    assert "ENG_LIB_DIR" not in section[:section.index("Left alone")]
    minimal = text[text.index("### 4.2"):]
    minimal = minimal[:minimal.index("\n## ")]
    assert "ENG_FP8_Q_EPILOGUE" not in minimal and "ENG_LOGPROB_CHUNK_SIZE" not in minimal
    assert "`ENG_TRACE`" in minimal


# Locations: a cache, configuration or library location stays an input even where the code
# creates or fills it; a location only logged or checked is read; output is what a writer,
# dump or recorder under it writes.
LOCATIONS = '''
import json, logging, os
from pathlib import Path
import numpy as np

logger = logging.getLogger(__name__)

KERNEL_CACHE = os.environ.get("ENG_KERNEL_CACHE_DIR", "/tmp/k")
DUMP_DIR = os.environ.get("ENG_DUMP_DIR", "/tmp/d")
QUANT = os.environ.get("ENG_QUANT_CONFIG")


def compile_kernel(src):
    os.makedirs(KERNEL_CACHE, exist_ok=True)
    os.makedirs(DUMP_DIR, exist_ok=True)


def load_nccl():
    so = os.environ.get("ENG_NCCL_SO_PATH")
    if so:
        logger.info("using nccl from %s", so)


def redirect():
    path = os.environ.get("ENG_REDIRECT_PATH")
    if path and os.path.exists(path):
        logger.info("redirecting")


def record_accepts():
    out = os.environ.get("ENG_ACCEPT_PATH")
    if out:
        rec = AcceptRecorder(out)
        rec.record(1)


def table(shape):
    d = os.environ.get("ENG_TABLE_DIR", "/tmp/t")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "t.bin"), "wb") as f:
        f.write(b"0")
    return np.memmap(os.path.join(d, "t.bin"))


def rows(r):
    with open(os.path.join(os.environ["ENG_ROWS_DIR"], "rows.jsonl"), "a") as f:
        f.write(json.dumps(r))


def quant():
    q = QUANT.copy()
    q["x"] = 1
    return q


def early(req):
    if os.environ.get("ENG_EARLY_SEND_CACHED_PREFIX"):
        logger.info("early send")
        req.early = True
    if os.environ.get("ENG_FILE_PREFETCH"):
        logger.info("prefetch")
        req.prefetch = True


class Loader:
    def __init__(self):
        directory = os.environ.get("ENG_DUMP_LOADER_DIR")
        if directory is not None:
            self._meta = read_meta(directory)


class Info:
    def __init__(self):
        self._dumper = InfoDumper(every=int(os.environ.get("ENG_SPS_REPORT_INTERVAL", "0")))

    def flush(self):
        return self._dumper.dump()
'''


def test_locations_kept_or_read_are_inputs_and_only_written_ones_are_outputs() -> None:
    _, s = _switches({"engine.py": LOCATIONS})
    got = {name: sw.category for name, sw in s.items()}
    assert got["ENG_KERNEL_CACHE_DIR"] == "input-path"   # makedirs, but a cache
    assert got["ENG_DUMP_DIR"] == "output-path"          # makedirs of a dump location
    assert got["ENG_NCCL_SO_PATH"] == "input-path"       # only logged
    assert got["ENG_REDIRECT_PATH"] == "input-path"      # only checked and logged
    assert got["ENG_ACCEPT_PATH"] == "output-path"       # a recorder writes there
    assert got["ENG_TABLE_DIR"] == "input-path"          # written and read back: a store
    assert got["ENG_ROWS_DIR"] == "output-path"          # only written
    assert got["ENG_DUMP_LOADER_DIR"] == "input-path"    # DUMP in the name, but a `read_*` helper reads it
    assert got["ENG_QUANT_CONFIG"] != "output-path"      # `.copy()` of the value names no place
    assert got["ENG_SPS_REPORT_INTERVAL"] != "output-path"  # the Dumper holds it; `dump()` is no write of it
    # `…_CACHED_PREFIX`, `…_FILE_PREFETCH` are toggles: a location word not at the end
    assert got["ENG_EARLY_SEND_CACHED_PREFIX"] not in ("output-path", "input-path")
    assert got["ENG_FILE_PREFETCH"] not in ("output-path", "input-path")
    assert any("cache" in r for r in s["ENG_KERNEL_CACHE_DIR"].reasons)


def test_section_4_1_maps_no_input_location() -> None:
    result, _ = _switches({"engine.py": LOCATIONS})
    text = render_markdown(result, load_ruleset())
    section = text[text.index("### 4.1"):text.index("### 4.2")]
    mapped, left = section.split("Left alone", 1)
    for name in ("ENG_DUMP_DIR", "ENG_ACCEPT_PATH", "ENG_ROWS_DIR"):
        assert f"`{name}`" in mapped
    for name in ("ENG_KERNEL_CACHE_DIR", "ENG_NCCL_SO_PATH", "ENG_REDIRECT_PATH", "ENG_TABLE_DIR"):
        assert f"`{name}`" not in mapped and f"`{name}`" in left


# Names that say LOG/PROBE/CI and values that are numbers or levels: what the gated calls do
# decides, and a generic verb (`pop`, `start`, `isfinite`) observes only on an observing receiver.
REMOVALS = '''
import logging, math, os, threading, time
import torch

logger = logging.getLogger(__name__)


def sample(logits):
    if os.environ.get("ENG_RETURN_ORIGINAL_LOGPROB"):
        return torch.log_softmax(logits, -1)
    return logits


def evict(cache, key):
    if os.environ.get("ENG_BOOTSTRAP_EVICTED_TTL"):
        cache.pop(key)


def effort(req):
    if os.environ.get("ENG_DEFAULT_REASONING_EFFORT"):
        return math.isfinite(req.budget)


def probe(self):
    if os.environ.get("ENG_ENABLE_FAILED_SESSION_PROBE"):
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._probe_loop)
        self._t.start()


def timed(self, step):
    if os.environ.get("ENG_STEP_CLOCK"):
        self.step_timer.start()


def overlap(x):
    if os.environ.get("ENG_IS_IN_CI"):
        assert_nonneg(x)


def stuck():
    if os.environ.get("ENG_TEST_STUCK_SCHEDULER"):
        time.sleep(60)


LEVEL = os.environ.get("ENG_LOGGING_LEVEL", "INFO").upper()
logging.basicConfig(level=LEVEL)
'''


def test_math_named_like_logs_and_generic_verbs_make_no_instrumentation() -> None:
    _, s = _switches({"engine.py": REMOVALS})
    got = {name: (sw.category, sw.disposition) for name, sw in s.items()}
    assert got["ENG_RETURN_ORIGINAL_LOGPROB"] == ("feature", "KEEP")         # log_softmax computes
    assert got["ENG_BOOTSTRAP_EVICTED_TTL"][1] == "KEEP"                     # a TTL; `cache.pop`
    assert got["ENG_DEFAULT_REASONING_EFFORT"][0] != "instrumentation"       # `math.isfinite`
    assert got["ENG_ENABLE_FAILED_SESSION_PROBE"] == ("feature", "KEEP")     # starts a worker thread
    assert got["ENG_STEP_CLOCK"][0] == "instrumentation"                     # `step_timer.start()`
    assert got["ENG_IS_IN_CI"] == ("test-hook", "KEEP")                      # CI sets it, outside the tree
    assert s["ENG_IS_IN_CI"].reasons[0].startswith("keep-set-by-ci")
    assert got["ENG_TEST_STUCK_SCHEDULER"] == ("test-hook", "REMOVE")
    assert got["ENG_LOGGING_LEVEL"] == ("config", "KEEP")                    # the user's log level
    assert any("log level" in r for r in s["ENG_LOGGING_LEVEL"].reasons)


DEFAULTS = '''
import os


def toolkit():
    return os.path.join(os.environ.get("ENG_TOOLKIT_PATH", "/opt/toolkit"), "bin", "cc")


def model():
    return os.environ.get("ENG_TEST_MODEL_PATH", "org/some-model")


def traces():
    d = os.environ.get("ENG_TRACE_DIR", "/tmp/traces")
    os.makedirs(d, exist_ok=True)
    return d
'''


def test_an_env_default_is_a_hardcoded_output_path_only_where_the_value_is_written() -> None:
    result = scan_files({"engine.py": DEFAULTS})
    flagged = sorted((f.line, f.detail.output_path) for f in result.findings if f.rule == "hardcoded-output-path")
    assert flagged == [(13, "/tmp/traces")]


def test_merge_into_is_spelled_as_a_switch_name_everywhere() -> None:
    # a level knob with no on/off sibling, set by one runner (not removed): it merges into the
    # proposed trace level, spelled `<PREFIX>TRACE=N`; with a sibling, into that switch's name
    src = ENGINE + '''
def verbose(step):
    if int(os.environ.get("ENG_PLANNER_VERBOSE", "0")) >= 2:
        logger.info("plan %d", step)
'''
    runner = "export ENG_PLANNER_VERBOSE=2\nexport ENG_TRACE_LEVEL=1\npython engine.py\n"
    result, s = _switches({"engine.py": src, "run.sh": runner})
    assert s["ENG_PLANNER_VERBOSE"].disposition == "MERGE"
    assert s["ENG_PLANNER_VERBOSE"].merge_into in {"ENG_TRACE=1", "ENG_TRACE=2", "ENG_TRACE=3"}
    assert s["ENG_TRACE_LEVEL"].merge_into == "ENG_TRACE"
    proposed = {"ENG_OUT", "ENG_TRACE", "ENG_DUMP", "ENG_BREAKDOWN"}
    for sw in result.switches:
        if sw.disposition == "MERGE":
            assert sw.merge_into.split("=", 1)[0] in proposed | set(s), (sw.name, sw.merge_into)


# A switch whose value computes (picks a number, takes part in arithmetic) is a feature even
# when its name says PROFILER and all it gates directly is a log line; one whose value only
# picks an observer to build stays instrumentation.
VALUE_USES = '''
import logging, os

logger = logging.getLogger(__name__)


class Worker:
    def memory(self, estimate, free):
        applied = estimate if os.environ.get("ENG_PROFILER_ESTIMATE_GRAPHS", "1") == "1" else 0
        if os.environ.get("ENG_PROFILER_ESTIMATE_GRAPHS", "1") == "1":
            logger.info("graph memory is estimated: %d", applied)
        return free - applied

    def budget(self, free):
        if os.environ.get("ENG_LOG_HEADROOM"):
            logger.info("headroom on")
        return free - int(os.environ.get("ENG_LOG_HEADROOM", "0")) * 1024

    def start(self):
        self.tracer = Tracer() if os.environ.get("ENG_PROFILER_TRACE") else None
        if os.environ.get("ENG_PROFILER_TRACE"):
            logger.info("tracing on")

    def describe(self):
        return "profiler: {}".format("on" if os.environ.get("ENG_PROFILER_NOTE") else "off")

    def rebuild(self, name):
        log = logger.info if os.environ.get("ENG_JIT_CACHE_DEBUG") else logger.debug
        log("rebuilding %s", name)
'''


def test_a_value_that_computes_is_a_feature_whatever_the_name() -> None:
    _, s = _switches({"worker.py": VALUE_USES})
    estimate = s["ENG_PROFILER_ESTIMATE_GRAPHS"]
    assert (estimate.category, estimate.disposition) == ("feature", "KEEP")
    assert any("worker.py:8 its value picks a value" in r for r in estimate.category_reasons)
    headroom = s["ENG_LOG_HEADROOM"]
    assert headroom.category == "feature"
    assert any("worker.py:16 its value is a number in arithmetic" in r for r in headroom.category_reasons)
    # `Tracer() if X else None`: the value picks an observer, which observes; a word picked
    # for a message computes nothing
    assert s["ENG_PROFILER_TRACE"].category == "instrumentation"
    assert s["ENG_PROFILER_NOTE"].category == "instrumentation"
    assert s["ENG_JIT_CACHE_DEBUG"].category == "instrumentation"  # it picks the level of a line



def test_a_read_handed_straight_to_a_writer_is_an_output_location() -> None:
    # the value is never named: only the calls on the read's own lines say what it is for
    source = (
        "import os\n"
        "def dump(rows):\n"
        '    with open(os.environ["ENG_DUMP_FILE"], "w") as f:\n'
        "        f.write(str(rows))\n"
        "def spill(rows):\n"
        "    with open(\n"
        '        os.environ["ENG_SPILL_FILE"],\n'
        '        "a",\n'
        "    ) as f:\n"
        "        f.write(str(rows))\n"
    )
    _, s = _switches({"engine.py": source})
    assert s["ENG_DUMP_FILE"].category == "output-path"
    assert any("engine.py:3 open(w)" in r for r in s["ENG_DUMP_FILE"].reasons)
    assert s["ENG_SPILL_FILE"].category == "output-path"


def test_a_switch_named_for_tests_that_gates_nothing_is_a_test_hook_by_its_name() -> None:
    engine = 'import os\n\n\ndef step(x):\n    if os.environ.get("ENG_TEST_MODE"):\n        pass\n    return x\n'
    _, s = _switches({"engine.py": engine})
    assert (s["ENG_TEST_MODE"].category, s["ENG_TEST_MODE"].kind) == ("test-hook", "")
    assert s["ENG_TEST_MODE"].reasons[1:3] == ("nothing gated or fed seen", "tie-breaker: its name says test")
