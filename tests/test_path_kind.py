"""default-on-emitter on real shapes of engine code: warnings and errors are emitters, each
finding says what kind of path it is on (``path_kind``: normal, error, rare) and why, error
and rare sites are listed but not costed per step, and an emitter whose arguments sync says so."""

from __future__ import annotations

import re

import pytest

from cs_audit.render.markdown import default_on_rows, demoted_rows, render_markdown
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import scan_files
from tests.test_rules import hot

RULE = "default-on-emitter"


#: the guard's place a reason ends with (`(mod.py:14)`, `(mod.py:14, 2 calls up)`): the guard tests check it
_WHERE = re.compile(r" \([^()]+:\d+(, \d+ calls? up)?\)$")


def emitters(src: str, **files: str) -> list[tuple[int, str, str]]:
    """(line, path_kind, path_reason without the guard's place) of each default-on-emitter finding of ``mod.py``."""
    result = scan_files({"mod.py": src, **files})
    return [(f.line, f.path_kind, _WHERE.sub("", f.path_reason)) for f in result.findings if f.rule == RULE and f.path == "mod.py"]


def kinds(src: str) -> list[tuple[int, str]]:
    return [(line, kind) for line, kind, _ in emitters(src)]


# ---------------------------------------------------------------- warnings and errors are emitters
def test_unconditional_warning_and_error_records_on_the_step_path_are_default_on() -> None:
    src = hot('''
logger.warning("fallback %s", batch)
logger.error("failed %s", batch)
logger.critical("bad %s", batch)
logger.exception("boom %s", batch)
logger.warning_once("varies %s", batch)
''')
    assert kinds(src) == [(12, "normal"), (13, "normal"), (14, "normal"), (15, "normal"), (16, "normal")]


def test_warnings_off_the_hot_path_gated_or_below_the_level_are_not() -> None:
    src = hot('''
if os.environ.get("MY_TRACE") == "1":
    logger.warning("traced %s", batch)
logger.debug("lazy %s", batch)
logger.debug_once("lazy once %s", batch)
''', extra='''
def setup(config):
    logger.warning("no hot path reaches this %s", config)
''')
    assert kinds(src) == []


# ---------------------------------------------------------------- path_kind: error
def test_except_blocks_and_branches_that_raise_or_return_an_error_are_error_paths() -> None:
    src = hot('''
try:
    out = self.forward(batch)
except RuntimeError:
    logger.warning("forward failed %s", batch)
if batch.bad:
    logger.error("bad batch %s", batch)
    raise ValueError("bad batch")
if batch.empty:
    logger.warning("empty batch %s", batch)
    return self.create_error_response("empty")
if not batch.ready:
    pass
else:
    logger.error("not ready %s", batch)
    sys.exit(1)
''')
    assert emitters(src) == [
        (15, "error", "in an `except` block"),
        (17, "error", "on a branch that ends in `raise`"),
        (20, "error", "on a branch that returns an error (`self.create_error_response`)"),
        (25, "error", "on a branch that exits the process"),
    ]


def test_a_branch_that_returns_a_value_or_raises_later_is_a_normal_path() -> None:
    src = hot('''
if batch.empty:
    logger.info("empty batch %s", batch)
    self.pad(batch)
    return batch
if batch.bad:
    raise ValueError("bad")
logger.warning("after the raise %s", batch)
''')
    assert kinds(src) == [(13, "normal"), (18, "normal")]


# ---------------------------------------------------------------- path_kind: rare
def test_once_flags_lazy_init_cache_misses_counters_and_constant_once_records_are_rare() -> None:
    src = hot('''
global _WARNED
if not _WARNED:
    logger.warning("slow path %s", batch)
    _WARNED = True
if not self._told:
    logger.info("told %s", batch)
    self._told = True
if self._plan is None:
    logger.info("building the plan %s", batch)
    self._plan = batch
if not hasattr(self, "_table"):
    logger.info("table %s", batch)
    self._table = {}
if batch.key not in self._compiled:
    logger.info("compiling %s", batch.key)
    self._compiled[batch.key] = batch
if batch.key not in _SEEN:
    logger.info("first time %s", batch.key)
    _SEEN.add(batch.key)
self.steps += 1
if self.steps == 1:
    logger.info("first step %s", batch)
logger.warning_once("this engine is experimental")
''')
    src = src.replace("class Runner:", "_WARNED = False\n_SEEN = set()\n\nclass Runner:")
    found = emitters(src)
    assert [(line, kind) for line, kind, _ in found] == [
        (17, "rare"), (20, "rare"), (23, "rare"), (26, "rare"), (29, "rare"), (32, "rare"), (36, "rare"), (37, "rare"),
    ]
    reasons = [reason for _, _, reason in found]
    assert reasons[0] == "under a once-flag (`_WARNED` is set in the branch)"
    assert reasons[2] == "in lazy initialisation (`self._plan` is set in the branch)"
    assert reasons[4] == "on a cache miss (the branch stores into `self._compiled`)"
    assert reasons[6] == "under a counter compared with a constant (`self.steps`)"
    assert reasons[7] == "a `*_once` record with a constant message: logged once per process"


def test_a_flag_a_method_the_branch_calls_sets_is_lazy_initialisation() -> None:
    # `if not self.ready: self.set_up()`, where `set_up` (or the base's, through `super()`)
    # sets the flag: once, as a branch setting it itself is, down to what the branch calls;
    # a method that sets the flag to False, or sets another one, leaves the branch every step,
    src = hot('''
if not self._ready:
    logger.info("setting up %s", batch)
    self.set_up(batch)
if self._plan is None:
    self._make_plan()
    self.show(batch)
if not self._quiet:
    logger.info("not quiet %s", batch)
    self.reset()
if not self._other:
    logger.info("other %s", batch)
    self.set_up(batch)
if not self._broken:
    logger.info("writing %s", batch)
    self.write(batch)
''', extra='''
    def write(self, batch):
        try:
            batch.flush()
        except OSError:
            self._broken = True

    def set_up(self, batch):
        self._finish()

    def _finish(self):
        self._ready = True

    def _make_plan(self):
        super()._make_plan()

    def reset(self):
        self._quiet = False

    def show(self, batch):
        self._emit(batch)

    def _emit(self, batch):
        logger.info("plan %s", batch)
''')
    src = src.replace("class Runner:", "class Base:\n    def _make_plan(self):\n        self._plan = {'a': 1}\n\n\nclass Runner(Base):")
    # ... and a flag the method sets only when something fails is no once-flag
    assert emitters(src)[:4] == [
        (18, "rare", "under a once-flag (`self._ready` is set by a method the branch calls)"),
        (24, "normal", ""), (27, "normal", ""), (30, "normal", "")]
    shown = [f for f in scan_files({"mod.py": src}).findings if f.rule == RULE and f.function == "Runner._emit"]
    assert [(f.path_kind, _WHERE.search(f.path_reason).group(0)) for f in shown] == [("rare", " (mod.py:20, 2 calls up)")]
    assert shown[0].path_reason.startswith("in lazy initialisation (`self._plan` is set by a method the branch calls)")


LAZY_LOOKUPS = {
    # a subclass of the module overrides the set-up without setting the flag: every step on it
    "overridden": ("class Runner:\n    def set_up(self):\n        self.ready = True\n", "class Cpu(Engine):\n    def set_up(self):\n        pass\n",
                   "normal"),
    # several bases of the module: Python finds C's set-up before Base's (Runner, A, C, Base)
    "two_bases": ("class Base:\n    def set_up(self):\n        self.ready = True\n\n\nclass A(Base):\n    pass\n\n\n"
                  "class C(Base):\n    def set_up(self):\n        pass\n\n\nclass Runner(A, C):\n    pass\n", "", "normal"),
    # a dotted base is not the module's class of that name
    "dotted_base": ("import lib\n\n\nclass Base:\n    def set_up(self):\n        self.ready = True\n\n\nclass Runner(lib.Base):\n    pass\n", "", "normal"),
    # a class of that name in a function is not the base
    "nested_namesake": ("def double():\n    class Base:\n        def set_up(self):\n            self.ready = True\n    return Base\n\n\n"
                        "class Base:\n    def set_up(self):\n        pass\n\n\nclass Runner(Base):\n    pass\n", "", "normal"),
    # `self.buf, self.ready = [], False` leaves the flag unset
    "tuple_store": ("class Runner:\n    def set_up(self):\n        self.buf, self.ready = [1], False\n", "", "normal"),
    # three calls down, whichever way the walk meets them first
    "deep": ("class Runner:\n    def set_up(self):\n        self.alloc()\n        self.finish()\n\n    def alloc(self):\n        self.finish()\n\n"
             "    def finish(self):\n        self.mark()\n\n    def mark(self):\n        self.ready = True\n", "", "rare"),
    "awaited": ("class Runner:\n    async def set_up(self):\n        self.ready = True\n", "", "rare"),
}


@pytest.mark.parametrize("shape", sorted(LAZY_LOOKUPS))
def test_the_method_a_lazy_branch_calls_is_the_one_python_finds(shape: str) -> None:
    classes, after, kind = LAZY_LOOKUPS[shape]
    call = "await self.set_up()" if shape == "awaited" else "self.set_up()"
    src = ("import logging\nlogger = logging.getLogger(__name__)\n\n\n" + classes + "\n\nclass Engine(Runner):\n"
           f"    {'async ' if shape == 'awaited' else ''}def execute_model(self, batch):\n        if not self.ready:\n"
           f"            logger.info('setting up %s', batch)\n            {call}\n        return batch\n\n\n" + after)
    assert [k for _, k, _ in emitters(src) if k in ("rare", "normal")][:1] == [kind]


def test_a_sentinel_constant_is_lazy_initialisation_and_a_compared_setting_is_not() -> None:
    # `X is _UNRESOLVED` then `X = ...`: worked out once, as `X is None` is; a test of a
    # setting against a constant that the branch does not assign runs every time
    src = hot('''
global _BACKEND
if _BACKEND is _UNRESOLVED:
    logger.info("resolving %s", batch)
    _BACKEND = batch
if self.mode is AUTO_MODE:
    logger.info("auto %s", batch)
''')
    src = src.replace("class Runner:", "_UNRESOLVED = object()\nAUTO_MODE = object()\n_BACKEND = _UNRESOLVED\n\nclass Runner:")
    found = emitters(src)
    assert [(kind, reason) for _, kind, reason in found] == [
        ("rare", "in lazy initialisation (`_BACKEND` is set in the branch)"), ("normal", "")]


def test_past_a_graph_replay_is_the_eager_path_where_the_deployment_replays_graphs() -> None:
    # `if can_run_graph: return replay(...)`: decoding steps replay, what follows runs on
    # prefill and eager steps; a deployment that runs the model eagerly runs it every step
    src = hot('''
can_run_graph = self.graph_runner.can_run(batch)
if can_run_graph:
    return self.graph_runner.replay(batch)
logger.info("eager forward %s", batch)
''')
    found = emitters(src)
    assert [(kind, reason) for _, kind, reason in found] == [("rare", "off the steady state (`can_run_graph` false)")]
    eager = scan_files({"mod.py": src}, deployment=("cuda", (), (), (), ("eager",)))
    assert [f.path_kind for f in eager.findings if f.rule == RULE] == ["normal"]


def test_look_alikes_of_rare_branches_run_every_step() -> None:
    # a local flag is unset on every call, a local set is new on every call, `rank == 0`
    # is no counter (nothing increments it), a flag the branch does not set stays unset,
    # a modulo by a small number fires every other step, a `*_once` record with arguments may vary
    src = hot('''
done = False
if not done:
    logger.info("local flag %s", batch)
    done = True
seen = set()
if batch.key not in seen:
    logger.info("local set %s", batch.key)
    seen.add(batch.key)
if self.rank == 0:
    logger.info("rank zero %s", batch)
if not self._quiet:
    logger.info("not quiet %s", batch)
if self._cache is None:
    logger.info("no cache %s", batch)
self.steps += 1
if self.steps % 2 == 0:
    logger.info("every other %s", batch)
''')
    assert kinds(src) == [(14, "normal"), (18, "normal"), (21, "normal"), (23, "normal"), (25, "normal"), (28, "normal")]


def test_error_and_rare_sites_are_listed_apart_from_section_1_and_not_costed() -> None:
    src = hot('''
try:
    out = self.forward(batch)
except RuntimeError:
    logger.warning("forward failed %s", batch)
if self._plan is None:
    logger.info("building the plan %s", batch)
    self._plan = batch
print("step", batch)
''')
    rs = load_ruleset()
    result = scan_files({"mod.py": src})
    rows = [f for f in default_on_rows(result, rs) if f.rule == RULE]
    assert [(f.line, f.path_kind, f.cost_us > 0) for f in rows] == [(19, "normal", True)]
    apart = [f for f in demoted_rows(result, rs) if f.rule == RULE]
    assert sorted((f.line, f.path_kind, f.cost_us, f.cost_if_every_time_us > 0) for f in apart) == [
        (15, "error", 0.0, True), (17, "rare", 0.0, True)]
    assert (apart[0].guard.line, apart[0].guard.depth) in ((14, 0), (16, 0))
    section = render_markdown(result, rs).split("## 1.", 1)[1].split("\n## ", 1)[0]
    ranked, _, reachable = section.partition("### Reachable, not every step")
    assert "print(" in ranked and "forward failed" not in ranked
    assert "error: in an \\`except\\` block (mod.py:14)" in reachable
    assert "rare: in lazy initialisation (\\`self.\\_plan\\` is set in the branch) (mod.py:16)" in reachable


def test_a_nested_function_does_not_inherit_the_path_of_its_definition() -> None:
    src = hot('''
if self._hook is None:
    def hook(x):
        logger.info("hooked %s", x)
    self._hook = hook
self._hook(batch)
''')
    assert kinds(src) == [(14, "normal")]


def test_env_reads_say_their_path_kind() -> None:
    src = hot('''
try:
    out = self.forward(batch)
except RuntimeError:
    level = os.environ.get("RETRY_LEVEL")
flag = os.environ.get("EVERY_STEP")
''')
    result = scan_files({"mod.py": src})
    reads = [(f.line, f.path_kind, f.cost_us > 0) for f in result.findings if f.rule == "env-read-hot"]
    assert reads == [(15, "error", False), (16, "normal", True)]


def test_a_call_of_an_env_helper_on_a_rare_branch_is_on_that_branch() -> None:
    # a call that holds no fact of its own (only the graph reads it) has the path of the
    # block around it, as the edge it makes does
    src = hot('''
if self.profile_by_stage:
    stage_flag()
if batch.timed_out:
    stage_flag()
stage_flag()
''', extra="\n\ndef stage_flag():\n    return os.environ.get(\"STAGE_TRACE\") == \"1\"\n")
    result = scan_files({"mod.py": src})
    calls = [(f.line, f.path_kind) for f in result.findings if f.rule == "env-read-hot" and f.function == "Runner.execute_model"]
    assert calls == [(13, "rare"), (15, "rare"), (16, "normal")]


# ---------------------------------------------------------------- gpu_sync on emitters
def test_an_emitter_whose_arguments_sync_says_gpu_sync() -> None:
    src = hot('''
logger.info("ids %s", batch.ids.tolist())
logger.info("n %s", batch.n)
''')
    result = scan_files({"mod.py": src})
    assert [(f.line, f.gpu_sync) for f in result.findings if f.rule == RULE] == [(12, True), (13, False)]


def test_a_failure_handler_is_an_error_path_and_a_look_alike_is_not() -> None:
    src = hot('''
self._log_failure(batch)
self.get_error_rate(batch)
''', extra='''
    def _log_failure(self, batch):
        logger.error("transfer failed for %s", batch)

    def get_error_rate(self, batch):
        logger.info("error rate %s", batch)
''')
    assert emitters(src) == [(16, "error", "in `_log_failure`, a failure handler"), (19, "normal", "")]


def test_a_branch_that_only_reports_a_problem_is_an_error_path() -> None:
    src = hot('''
if batch.size > self.limit:
    logger.warning("skipping %s: too large", batch)
    return None
if batch.engine not in self.engines:
    logger.error("unexpected engine %s", batch.engine)
if batch.stale:
    logger.warning("stale batch %s", batch)
    self.stale += 1
    return None
if batch.slow:
    logger.warning("slow batch %s", batch)
    self.recompute(batch)
if batch.big:
    logger.info("big batch %s", batch)
    return None
''')
    assert emitters(src) == [
        (13, "error", "on a branch that only reports a problem (`logger.warning`)"),
        (16, "error", "on a branch that only reports a problem (`logger.error`)"),
        (18, "error", "on a branch that only reports a problem (`logger.warning`)"),
        # a branch that warns and does work is no error path, but its warning reports an event
        (22, "rare", "a warning record under a condition: logged when something goes wrong"),
        (25, "normal", ""),
    ]
