"""Gates that tell the truth (#19, "Gates"): which conditions make the code under them run
only with a switch set, and which make it debug code for ``sync-in-debug``.

Each snippet is an engine file whose hot root (``execute_model``, per step) holds the cases;
every finding is annotated on the line above it (``# expect:``) and each near miss
``# ok:``, so a site reported or dropped by mistake fails ``check_annotations``.
"""

from __future__ import annotations

from cs_audit.model import Gates
from cs_audit.render.markdown import default_on_rows, demoted_rows
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import check_annotations, scan_files

HEAD = '''
import logging
import os

import torch

logger = logging.getLogger(__name__)
DEBUG = os.getenv("TOY_DEBUG", "0") == "1"
VERBOSE = os.getenv("TOY_VERBOSE", "0") == "1"
'''


def _agree(body: str, path: str = "engine/runner.py") -> list[str]:
    return check_annotations({path: HEAD + body})


def _switches(body: str, rule: str) -> dict[int, str | None]:
    """line -> switch of each finding of ``rule`` (lines counted in ``HEAD + body``)."""
    result = scan_files({"engine/runner.py": HEAD + body})
    return {f.line: f.switch.text if f.switch else None for f in result.findings if f.rule == rule}


# ------------------------------------------------------------------ only `and` conjuncts gate
OR_OPERANDS = '''
class Runner:
    def execute_model(self, batch, force):
        if DEBUG or force:
            # expect: default-on-emitter
            print("either", batch)
        if DEBUG and force:
            # ok: default-on-emitter
            print("both", batch)
        if DEBUG or VERBOSE:
            # ok: default-on-emitter
            print("a switch either way", batch)
        if not (DEBUG or VERBOSE):
            # expect: default-on-emitter
            print("neither set", batch)
        if force and (DEBUG or batch.size > 4):
            # expect: default-on-emitter
            print("no switch needed", batch)
        # expect: default-on-emitter
        (DEBUG or force) and print("inline either", batch)
        # ok: default-on-emitter
        (DEBUG or VERBOSE) and print("inline switches", batch)
'''


def test_an_or_operand_does_not_gate_the_block() -> None:
    assert _agree(OR_OPERANDS) == []


def test_a_disjunction_of_switches_is_gated_by_its_first() -> None:
    body = '''
class Runner:
    def execute_model(self, t, force):
        if DEBUG or VERBOSE:
            logger.info("v=%s", t.item())
        if DEBUG or force:
            logger.info("w=%s", t.item())
'''
    switches = _switches(body, "sync-in-debug")
    assert list(switches.values()) == ["TOY_DEBUG", None], switches


# ------------------------------------------------------------------ early return `if A and B: return`
EARLY_RETURN = '''
class Runner:
    def execute_model(self, batch, ready):
        if not DEBUG and ready:
            return
        # expect: default-on-emitter
        print("after a conjunction", batch)

    def _prepare_inputs(self, batch, ready):
        if not DEBUG:
            return
        # ok: default-on-emitter
        print("after the switch alone", batch)

    def sample_tokens(self, batch, ready):
        if not DEBUG or not ready:
            return
        # ok: default-on-emitter
        print("after a disjunction", batch)
'''


def test_an_early_return_on_a_conjunction_gates_nothing_by_one_operand() -> None:
    assert _agree(EARLY_RETURN) == []


def test_an_early_return_on_a_conjunction_gates_no_helper_entry() -> None:
    files = {
        "engine/trace.py": HEAD + '''
def dump_state(t, ready):
    if not DEBUG and ready:
        return
    print("dump", t.sum().item())
''',
        "engine/runner.py": HEAD + '''
from engine.trace import dump_state


class Runner:
    def execute_model(self, t):
        dump_state(t, True)
''',
    }
    result = scan_files(files)
    syncs = [(f.path, f.switch) for f in result.findings if f.rule == "sync-in-debug"]
    prints = [(f.path, f.switch) for f in result.findings if f.rule == "default-on-emitter"]
    assert syncs == [("engine/trace.py", None)]  # `dump_state` is debug-named: its sync is debug code
    assert prints == [("engine/trace.py", None)]


# ------------------------------------------------------------------ comparisons with the default value
DEFAULTS = '''
class Runner:
    def execute_model(self, batch):
        # expect: env-read-hot
        if int(os.getenv("TOY_TRACE_LEVEL", "1")) >= 2:
            # ok: default-on-emitter
            print("level 2", batch)
        # expect: env-read-hot
        if int(os.getenv("TOY_TRACE_LEVEL", "1")) >= 1:
            # expect: default-on-emitter
            print("level 1 by default", batch)
        # expect: env-read-hot
        if os.getenv("TOY_MODE", "block") == "block":
            # expect: default-on-emitter
            print("the default mode", batch)
        else:
            # ok: default-on-emitter
            print("another mode", batch)
        # expect: env-read-hot
        if os.getenv("TOY_MODE", "block") != "block":
            # ok: default-on-emitter
            print("another mode again", batch)
        # expect: env-read-hot
        level = int(os.getenv("TOY_DUMP_LEVEL", "0"))
        if level > 0:
            # ok: default-on-emitter
            print("dump level set", batch)
        if 1 > level:
            # expect: default-on-emitter
            print("dump level below one", batch)
        # expect: env-read-hot
        if os.getenv("TOY_PATH") is None:
            # expect: default-on-emitter
            print("no path given", batch)
'''


def test_a_comparison_is_judged_with_the_default_value() -> None:
    assert _agree(DEFAULTS) == []


def test_an_off_by_default_comparison_names_its_switch() -> None:
    body = '''
class Runner:
    def execute_model(self, t):
        if int(os.getenv("TOY_TRACE_LEVEL", "1")) >= 2:
            logger.info("x=%s", t.item())
        if os.getenv("TOY_MODE", "block") == "block":
            logger.info("y=%s", t.item())
        else:
            logger.info("z=%s", t.item())
'''
    assert list(_switches(body, "sync-in-debug").values()) == ["TOY_TRACE_LEVEL", None, "TOY_MODE"]


# ------------------------------------------------------------------ configuration is not debug code
CONFIG_GATES = '''
BUFFER_MB = int(os.getenv("TOY_BUFFER_MB", "0"))


class Runner:
    def __init__(self):
        self.max_prefill_tokens = 0

    def execute_model(self, t):
        if BUFFER_MB > 0:
            # ok: sync-in-debug
            n = t.sum().item()
        if self.max_prefill_tokens:
            # ok: sync-in-debug
            m = t.max().item()
        # expect: env-read-hot
        if os.getenv("TOY_BLOCK_SIZE", "0") != "0":
            # ok: sync-in-debug
            k = t.numel() + t.sum().item()
        if DEBUG:
            # expect: sync-in-debug
            d = t.sum().item()
        if BUFFER_MB > 0:
            # an emitter's arguments are debug code whatever gates them
            # expect: sync-in-debug
            logger.info("n=%s", t.sum().item())
        if BUFFER_MB > 0:
            self._buffer(t)
            self._dump_buffer(t)
        return n, m, k, d

    def _buffer(self, t):
        # ok: sync-in-debug
        return t.sum().item()

    def _dump_buffer(self, t):
        # expect: sync-in-debug
        return t.sum().item()
'''


def test_a_configuration_value_does_not_make_debug_code() -> None:
    assert _agree(CONFIG_GATES) == []


def test_debug_code_under_a_configuration_gate_names_it() -> None:
    switches = _switches(CONFIG_GATES, "sync-in-debug")
    # the DEBUG block, the emitter's arguments and the debug-named helper, each under its gate
    assert list(switches.values()) == ["TOY_DEBUG", "TOY_BUFFER_MB", "TOY_BUFFER_MB"], switches


# ------------------------------------------------------------------ names derived from switches
DERIVED = '''
def env_flag(name):
    return os.getenv(name, "0") == "1"


_TRACE_ON = env_flag("TOY_TRACE_ON")
_MODE_ON = os.getenv("TOY_MODE", "block") == "block"


class Tracer:
    def record(self, value):
        return value


class Runner:
    def __init__(self, tracer=None):
        self.tracer = Tracer() if env_flag("TOY_TRACER") else None
        self.sink = tracer

    def execute_model(self, t, track):
        # expect: env-read-hot
        need_sync = track and (n := int(os.getenv("TOY_TRACE_SYNC", "-1"))) >= 0
        if need_sync:
            # expect: sync-in-debug
            torch.cuda.synchronize()
        if self.tracer:
            # ok: default-on-emitter
            print("traced", n)
            # expect: sync-in-debug
            self.tracer.record(t.sum().item())
        if _TRACE_ON:
            # ok: default-on-emitter
            print("trace on", n)
        if _MODE_ON:
            # on by default: not gated
            # expect: default-on-emitter
            print("the default mode", n)
        # a parameter can hold anything: not gated
        if self.sink:
            # expect: default-on-emitter
            print("sink", n)
        # the OR of a switch and an operand: not gated
        either = track or _TRACE_ON
        if either:
            # expect: default-on-emitter
            print("either", n)
'''


def test_locals_and_attributes_derived_from_switches_carry_them() -> None:
    assert _agree(DERIVED) == []


def test_a_derived_name_names_the_switch_it_carries() -> None:
    switches = _switches(DERIVED, "sync-in-debug")
    assert list(switches.values()) == ["TOY_TRACE_SYNC", "TOY_TRACER"], switches


# ------------------------------------------------------------------ syncs: aliases, helpers, host tensors
SYNCS = '''
class Platform:
    def synchronize(self):
        return None


platform = Platform()


def khash(t):
    # expect: sync-in-debug
    return int(t.sum().item())


def ctrace(level, tag, **fields):
    if not DEBUG:
        return
    logger.info("[%s] %s", tag, fields)


class Runner:
    def execute_model(self, t, times):
        if DEBUG:
            synchronize = platform.synchronize
            # expect: sync-in-debug
            synchronize()
            sync = torch.cuda.synchronize
            # expect: sync-in-debug
            sync()
            # expect: sync-in-debug
            d = t.item()
            host = torch.tensor(times)
            # ok: sync-in-debug
            a = host.max().item()
            # expect: sync-in-debug
            cpu_t = t.cpu()
            # ok: sync-in-debug
            b = cpu_t.sum().item()
            pinned = torch.zeros(4, device="cpu")
            # ok: sync-in-debug
            c = pinned[0].item()
            # ok: sync-in-debug
            e = torch.tensor([len(times)]).item()
            logger.info("%s %s %s %s %s", a, b, c, d, e)
        # the helper's sync is paid here, every step (and its arguments are built ungated)
        # expect: sync-in-debug, eager-format
        ctrace(1, "step", h=khash(t))
'''


def test_syncs_through_aliases_helpers_and_not_host_tensors() -> None:
    assert _agree(SYNCS) == []


def test_a_helper_sync_names_the_helper_at_the_call_site() -> None:
    result = scan_files({"engine/runner.py": HEAD + SYNCS})
    at_call = [f for f in result.findings if f.rule == "sync-in-debug" and "ctrace" in f.code]
    assert [(f.frequency, f.switch, f.gpu_sync) for f in at_call] == [("step", None, True)]
    assert at_call[0].message.startswith("`khash()` (its `.item()`) forces a host-device sync")


def test_moving_data_to_the_host_syncs_once() -> None:
    body = '''
class Runner:
    def execute_model(self, t):
        if DEBUG:
            logger.info("%s", t.cpu().numpy())
'''
    result = scan_files({"engine/runner.py": HEAD + body})
    assert [f.detail.call for f in result.findings if f.rule == "sync-in-debug"] == ["cpu"]


def test_a_helper_whose_only_sync_is_on_the_host_is_still_a_duplicate() -> None:
    helper = '''
import torch


def agree(value, group):
    flag = torch.tensor([value], dtype=torch.int32, device="cpu")
    group.all_reduce(flag)
    return int(flag.item())
'''
    result = scan_files({"a/peer.py": helper, "b/peer.py": helper})
    assert not [f for f in result.findings if f.rule == "sync-in-debug"]
    assert sorted(f.path for f in result.findings if f.rule == "duplicate-helper") == ["a/peer.py", "b/peer.py"]


# ------------------------------------------------------------------ closures: a nested function's free names
CLOSURES = '''
def env_flag(name):
    return os.getenv(name, "0") == "1"


class Runner:
    def execute_model(self, t, ready):
        # expect: env-read-hot
        trace_e2e = env_flag("TOY_TRACE_E2E")
        # expect: env-read-hot
        level = int(os.getenv("TOY_SYNC_LEVEL", "0"))
        warm = ready and t is not None

        def trace_sync(stage):
            if not trace_e2e:
                return
            # ok: default-on-emitter
            print("sync enter", stage)
            # expect: sync-in-debug
            torch.cuda.synchronize()

        def deep_sync(stage):
            if level > 1:
                # ok: default-on-emitter
                print("deep", stage)

        def announce(stage):
            # a name the nested function binds itself is its own
            trace_e2e = stage == "first"
            if trace_e2e:
                # expect: default-on-emitter
                print("first", stage)

        def show(stage, trace_e2e):
            # a parameter comes from the caller
            if trace_e2e:
                # expect: default-on-emitter
                print("shown", stage)

        def when_warm(stage):
            # a closure name that holds no switch gates nothing
            if warm:
                # expect: default-on-emitter
                print("warm", stage)

        def inline(stage):
            # ok: default-on-emitter
            trace_e2e and print("inline", stage)

        # ok: default-on-emitter
        emit = lambda stage: trace_e2e and print("lambda", stage)

        def outer(stage):
            def inner():
                if trace_e2e:
                    # ok: default-on-emitter
                    print("two levels down", stage)
            inner()

        trace_sync("pre")
        deep_sync("pre")
        announce("pre")
        show("pre", ready)
        when_warm("pre")
        outer("pre")
        inline("pre")
        emit("pre")
'''


def test_a_nested_function_reads_its_free_names_in_the_enclosing_function() -> None:
    assert _agree(CLOSURES) == []


def test_a_closure_gate_names_the_enclosing_switch() -> None:
    switches = _switches(CLOSURES, "sync-in-debug")
    assert list(switches.values()) == ["TOY_TRACE_E2E"], switches


def test_a_nonlocal_set_in_a_nested_function_is_the_enclosing_name() -> None:
    body = '''
def env_flag(name):
    return os.getenv(name, "0") == "1"


class Runner:
    def execute_model(self, t):
        verbose_e2e = False

        def arm():
            nonlocal verbose_e2e
            # expect: env-read-hot
            verbose_e2e = env_flag("TOY_TRACE_ARM")

        def show():
            if verbose_e2e:
                # ok: default-on-emitter
                print("armed", t)

        arm()
        show()
'''
    assert _agree(body) == []


# ------------------------------------------------------------------ path_kind on every per-site rule
PATH_KINDS = '''
class Runner:
    def __init__(self, path):
        self.path = path
        self._plan = None

    def execute_model(self, t, batch):
        try:
            out = self.forward(batch)
        except RuntimeError:
            # expect: eager-format(error), default-on-emitter(error)
            logger.warning(f"forward failed {batch}")
            # expect: sync-in-debug(error), default-on-emitter(error)
            logger.warning("loss %s", t.sum().item())
            # expect: per-call-open(error)
            with open(self.path, "a") as f:
                # expect: default-on-emitter(error)
                f.write("failed\\n")
        if self._plan is None:
            # expect: eager-format(rare), default-on-emitter(rare), sync-in-debug(rare)
            logger.info(f"planning {t.max().item()}")
            self._plan = batch
        # expect: eager-format(normal), default-on-emitter(normal), sync-in-debug(normal)
        logger.info(f"step {t.min().item()}")
        return out
'''


def test_every_per_site_rule_says_its_path_kind() -> None:
    assert _agree(PATH_KINDS) == []


def test_error_and_rare_sites_of_every_rule_are_not_costed_and_do_not_gate() -> None:
    result = scan_files({"engine/runner.py": HEAD + PATH_KINDS})
    gates = Gates({rule: "hot" for rule in ("eager-format", "sync-in-debug", "per-call-open", "default-on-emitter")})
    rows = {(f.rule, f.path_kind): (f.cost_us > 0, gates.gates(f)) for f in result.findings}
    for rule in ("eager-format", "sync-in-debug", "default-on-emitter"):
        assert rows[(rule, "normal")] == (True, True), rule
        assert rows[(rule, "error")] == (False, False), rule
        assert rows[(rule, "rare")] == (False, False), rule
    assert rows[("per-call-open", "error")] == (False, False)
    rs = load_ruleset()
    ranked = [f for f in default_on_rows(result, rs) if f.rule == "sync-in-debug"]
    assert [f.path_kind for f in ranked] == ["normal"]  # §1 ranks what runs every time
    apart = [f for f in demoted_rows(result, rs) if f.rule == "sync-in-debug"]
    assert sorted(f.path_kind for f in apart) == ["error", "rare"] and all(f.guard is not None for f in apart)


# ------------------------------------------------------------------ `*_once` records
ONCE = '''
MODEL_NAME = "toy"


class Runner:
    def __init__(self, model_config):
        self.model_config = model_config
        self.mode = "eager"

    def execute_model(self, t, batch):
        # the same message and arguments on every call: deduplicated after the first
        # expect: default-on-emitter(rare)
        logger.warning_once("this engine is experimental")
        # expect: default-on-emitter(rare)
        logger.warning_once("model %s is experimental", MODEL_NAME)
        # expect: default-on-emitter(rare)
        logger.info_once("dtype %s, tp %d", self.model_config.dtype, self.model_config.tp_size)
        # expect: default-on-emitter(rare)
        logger.warning_once("%s falls back", type(self).__name__, scope="local")
        # expect: default-on-emitter(rare), eager-format
        logger.warning_once(f"this method is deprecated")
        # expect: default-on-emitter(rare), eager-format
        logger.warning_once(f"model {MODEL_NAME} " "is experimental")
        # arguments that may change per call make a new record each time they do
        # expect: default-on-emitter(normal)
        logger.warning_once("batch of %d", batch.size)
        # expect: default-on-emitter(normal)
        logger.warning_once("mode %s", self.mode)
        size = len(batch)
        # expect: default-on-emitter(normal)
        logger.warning_once("size %d", size)
        # expect: default-on-emitter(normal), eager-format
        logger.warning_once(f"model {batch.name}")
        return t
'''


def test_a_once_record_is_rare_when_its_message_and_arguments_are_constant_at_the_site() -> None:
    assert _agree(ONCE) == []


# ------------------------------------------------------------------ syncs a few helpers down
DEEP_SYNCS = '''
def stats(t):
    # expect: sync-in-debug
    return t.float().mean().item()


def summarize(t):
    return {"mean": stats(t)}


def describe(t):
    # three helpers down: past the bound, not followed
    return {"summary": summarize(t)}


def careful(t):
    if DEBUG:
        return stats(t)
    return None


def shape_of(t):
    return tuple(t.shape)


class Runner:
    def execute_model(self, t):
        # `summarize` calls `stats`, which syncs: paid here, every step
        # expect: default-on-emitter, sync-in-debug
        logger.info("%s", summarize(t))
        # expect: default-on-emitter
        logger.info("%s", describe(t))
        # the sync below `careful` runs only with the switch set
        # expect: default-on-emitter
        logger.info("%s", careful(t))
        # expect: default-on-emitter
        logger.info("%s", shape_of(t))
'''


def test_a_sync_two_helpers_down_an_emitters_arguments_is_paid_at_the_emitter() -> None:
    assert _agree(DEEP_SYNCS) == []


def test_the_helper_chain_to_the_sync_is_named() -> None:
    result = scan_files({"engine/runner.py": HEAD + DEEP_SYNCS})
    syncs = [f for f in result.findings if f.rule == "sync-in-debug" and f.function == "Runner.execute_model"]
    assert [(f.frequency, f.switch) for f in syncs] == [("step", None)]
    assert syncs[0].message.startswith("`summarize()` → `stats()` (its `.item()`) forces a host-device sync")
    emitters = {f.code: f.gpu_sync for f in result.findings if f.rule == "default-on-emitter"}
    assert emitters == {'logger.info("%s", summarize(t))': True, 'logger.info("%s", describe(t))': False,
                        'logger.info("%s", careful(t))': False, 'logger.info("%s", shape_of(t))': False}


# ------------------------------------------------------------------ names derived in another module
FLAGS = HEAD + '''
def env_flag(name):
    return os.getenv(name, "0") == "1"


E2E_CHECKS = env_flag("TOY_TRACE_E2E")
E2E_MODE = os.getenv("TOY_TRACE_MODE", "block") == "block"
E2E_WIDTH = int(os.getenv("TOY_TRACE_WIDTH", "8"))
'''

IMPORTER = HEAD + '''
from engine import flags
from engine.flags import E2E_CHECKS, E2E_MODE, E2E_WIDTH


class Runner:
    def execute_model(self, t):
        if E2E_CHECKS:
            # ok: default-on-emitter
            print("checked", t)
            # expect: sync-in-debug
            torch.cuda.synchronize()
        if flags.E2E_CHECKS:
            # ok: default-on-emitter
            print("checked through the module", t)
        if E2E_MODE:
            # on by default there: not gated here
            # expect: default-on-emitter
            print("the default mode", t)
        if E2E_WIDTH:
            # a width of 8 by default: truthy with no env set
            # expect: default-on-emitter
            print("wide", t)
'''


def test_a_name_derived_from_a_switch_in_another_module_gates_where_it_is_imported() -> None:
    assert check_annotations({"engine/__init__.py": "", "engine/flags.py": FLAGS, "engine/runner.py": IMPORTER}) == []


def test_an_imported_derived_name_names_its_switch() -> None:
    result = scan_files({"engine/__init__.py": "", "engine/flags.py": FLAGS, "engine/runner.py": IMPORTER})
    assert [f.switch.text for f in result.findings if f.rule == "sync-in-debug"] == ["TOY_TRACE_E2E"]


def test_an_imported_name_compared_with_a_number_stands_for_the_variable_it_holds() -> None:
    # `E2E_WIDTH >= 16` is off with the width of 8 by default: gated by TOY_TRACE_WIDTH, not
    # decided by the (ungated) assignment of the name in flags.py
    importer = HEAD + '''
from engine.flags import E2E_WIDTH


class Runner:
    def execute_model(self, t):
        if E2E_WIDTH >= 16:
            print("wide", t)
            torch.cuda.synchronize()
'''
    result = scan_files({"engine/__init__.py": "", "engine/flags.py": FLAGS, "engine/runner.py": importer})
    assert [(f.rule, f.switch.text if f.switch else None) for f in result.findings] == [("sync-in-debug", "TOY_TRACE_WIDTH")]
