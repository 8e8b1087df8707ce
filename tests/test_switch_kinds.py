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
