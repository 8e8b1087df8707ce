"""Env reads where they are paid, void env helpers, registries by shape, cached registries
(issue 19, "Env reads"), and eager formatting and output paths ("Syncs, formatting and
output paths", bullets 2 and 3): flagged and silent snippets per behaviour."""

from __future__ import annotations

import json
from pathlib import Path

from cs_audit.testing import scan_files, write_tree
from tests.test_rules import hot


def _reads(src: str, files: dict[str, str] | None = None) -> list[tuple[int, str, str, str]]:
    result = scan_files({"mod.py": src, **(files or {})})
    return sorted((f.line, f.function or "", f.detail.var, f.detail.via) for f in result.findings if f.rule == "env-read-hot")


# ------------------------------------------------ reads where they are, helpers where they are called
LARGER = '''
    def scales(self, batch):
        total = 0
        for x in batch:
            total += x
        if os.environ.get("SCALE_LOG") == "1":
            logger.info("total %s", total)
        scale = int(os.environ.get("SCALE", "1"))
        return total * scale
'''


def test_reads_of_a_larger_value_method_stay_where_they_are() -> None:
    # and only there: its call site reads nothing itself, and a report there would count the
    # read once more for each call up the chain
    src = hot("out = self.scales(batch)", extra=LARGER)
    assert _reads(src) == [
        (18, "Runner.scales", "SCALE_LOG", "os.environ.get"),
        (20, "Runner.scales", "SCALE", "os.environ.get"),
    ]


def test_an_accessor_read_a_larger_method_returns_is_reported_in_that_method() -> None:
    # the larger method's call sites carry nothing: the accessor's read is counted at its call
    src = hot("out = self.mode(batch)", extra='''
    def mode(self, batch):
        total = 0
        for x in batch:
            total += x
        if total > 3:
            total = 3
        for x in batch:
            total -= x
        if total < 0:
            total = 0
        self.total = total
        self.count = len(batch)
        self.first = batch[0] if batch else None
        self.last = batch[-1] if batch else None
        self.mean = total / max(self.count, 1)
        return self.flag()

    def flag(self):
        return os.environ.get("FLAG_X") == "1"
''')
    assert _reads(src) == [(29, "Runner.mode", "FLAG_X", "helper:Runner.flag")]


def test_small_accessor_is_reported_at_its_call_site_only() -> None:
    src = hot("out = self.flag()", extra='''
    def flag(self):
        return os.environ.get("FLAG_X") == "1"
''')
    assert _reads(src) == [(12, "Runner.execute_model", "FLAG_X", "helper:Runner.flag")]


def test_larger_method_off_the_hot_path_is_silent() -> None:
    src = hot("out = 1", extra=LARGER)
    assert _reads(src) == []


VOID = '''

def _diag(name, what):
    if os.environ.get(name):
        logger.info("diag %s", what)


def trace_level():
    return int(os.environ.get("CP_TRACE", "0"))


def cptrace(level, tag, **fields):
    if trace_level() < level:
        return
    logger.info("[T %s] %s", tag, fields)


def probe(x):
    on = os.getenv("PROBE_ON")
    if on:
        record(x)


def record(x):
    pass
'''


def test_void_env_helpers_make_each_hot_call_site_a_read() -> None:
    src = hot('''
_diag("KEEP_DIAG", batch)
cptrace(1, "alloc", n=1)
probe(batch)
record(batch)
''', extra=VOID)
    assert _reads(src) == [
        (12, "Runner.execute_model", "KEEP_DIAG", "helper:_diag"),
        (13, "Runner.execute_model", "CP_TRACE", "helper:cptrace"),
        (14, "Runner.execute_model", "PROBE_ON", "helper:probe"),
    ]


def test_void_helper_call_sites_are_reads_in_the_switch_inventory() -> None:
    result = scan_files({"mod.py": hot('_diag("KEEP_DIAG", batch)', extra=VOID)})
    switch = next(s for s in result.switches if s.name == "KEEP_DIAG")
    assert [(r.line, r.function, r.per_call) for r in switch.reads] == [(12, "Runner.execute_model", True)]


def test_void_helpers_called_off_the_hot_path_or_once_are_silent() -> None:
    src = hot("x = 1", extra=VOID + '''

class Setup:
    def __init__(self):
        _diag("KEEP_DIAG", self)
''')
    assert _reads(src) == []


def test_void_function_gated_by_a_flag_or_a_config_attribute_is_no_env_helper() -> None:
    src = hot("self.note(batch)\nself.maybe(batch)", extra='''
    def note(self, batch):
        if self.verbose:
            logger.info("batch %s", batch)

    def maybe(self, batch):
        if self.max_tokens > 0:
            logger.info("batch %s", batch)
''')
    assert _reads(src) == []


# ------------------------------------------------ a registry cached after start-up
VLLM_ENVS = '''
import functools
import os

environment_variables = {"VLLM_STEP_LOG": lambda: os.getenv("VLLM_STEP_LOG", "0")}


def __getattr__(name):
    return environment_variables[name]()


def enable_envs_cache():
    global __getattr__
    __getattr__ = functools.cache(__getattr__)
'''
ENGINE = '''
from vllm import envs
from vllm.envs import enable_envs_cache


class EngineCore:
    def __init__(self):
        enable_envs_cache()

    def step(self):
        return envs.VLLM_STEP_LOG
'''


def _engine(engine: str) -> list:
    """The env-read-hot findings of the engine, and its reads known cheap (checked, not findings)."""
    result = scan_files({"vllm/__init__.py": "", "vllm/envs.py": VLLM_ENVS, "vllm/v1/core.py": engine})
    return [f for f in (*result.findings, *result.cheap_reads) if f.rule == "env-read-hot"]


def test_registry_read_after_the_cache_call_is_cached_low_and_not_costed() -> None:
    from cs_audit.model import Gates
    from cs_audit.render.json import finding_dict

    [f] = _engine(ENGINE)
    assert (f.line, f.detail.var, f.detail.cached, f.cost_us) == (10, "VLLM_STEP_LOG", "vllm.envs.enable_envs_cache", 0.0)
    assert finding_dict(f)["severity"] == "low" and "cached once `vllm.envs.enable_envs_cache()`" in f.message
    assert not Gates({"env-read-hot": False}).gates(f)


def test_a_read_known_cheap_is_checked_not_a_finding_a_sarif_result_nor_a_fix_target(tmp_path: Path) -> None:
    """#43: a read through a registry cached at start-up costs 0 µs: listed under "checked,
    cheap", never a default-on finding, a SARIF result or something `fix` rewrites."""
    from tests.test_cli_like_ruff import cs_audit

    root = write_tree(tmp_path / "t", {"vllm/__init__.py": "", "vllm/envs.py": VLLM_ENVS, "vllm/v1/core.py": ENGINE})
    doc = json.loads(cs_audit("scan", str(root), "-f", "json", "--no-history", "-j", "1").stdout)
    assert [f["rule"] for f in doc["findings"]] == []
    assert [(f["path"], f["line"]) for f in doc["checked_cheap"]] == [("vllm/v1/core.py", 10)]
    sarif = json.loads(cs_audit("scan", str(root), "-f", "sarif", "--no-history", "-j", "1").stdout)
    assert sarif["runs"][0]["results"] == []
    text = cs_audit("scan", str(root), "--no-history", "-j", "1", "-o", str(tmp_path / "r.md"))
    assert "checked, cheap: 1 hot env read of 1 switch through a registry" in text.stdout
    assert "### Checked, cheap" in (tmp_path / "r.md").read_text()
    before = (root / "vllm/v1/core.py").read_text()
    fixed = cs_audit("fix", str(root), "-j", "1")
    assert fixed.returncode == 0, fixed.stderr
    assert (root / "vllm/v1/core.py").read_text() == before


def test_registry_read_is_per_call_when_the_cache_is_never_turned_on_at_start_up() -> None:
    from cs_audit.render.json import finding_dict

    never = ENGINE.replace("        enable_envs_cache()\n", "        pass\n")
    in_step = ENGINE.replace("        return envs.VLLM_STEP_LOG", "        enable_envs_cache()\n        return envs.VLLM_STEP_LOG")
    in_step = in_step.replace("        enable_envs_cache()\n\n", "        pass\n\n", 1)
    for engine in (never, in_step):
        [f] = _engine(engine)
        assert (f.detail.cached, f.cost_us > 0, "cached" in finding_dict(f)) == ("", True, False)


# ------------------------------------------------ registries found by their shape
FIELDS = '''
import os


class Knob:
    def __init__(self, default):
        self.default = default

    def __set_name__(self, owner, name):
        self.name = name

    def get(self):
        value = os.getenv(self.name)
        return self.default if value is None else value

    def is_set(self):
        return self.name in os.environ

    def set(self, value):
        os.environ[self.name] = str(value)


class IntKnob(Knob):
    pass


class Knobs:
    MYENG_TRACE = IntKnob(0)
    MYENG_CHUNK = Knob("64")


knobs = Knobs()
'''
TABLE = '''
import os

_getters = {"MYENG_DUMP": lambda: os.getenv("MYENG_DUMP", "0") == "1"}


def __getattr__(name):
    if name in _getters:
        return _getters[name]()
    raise AttributeError(name)
'''


def test_registries_found_by_shape_under_any_module_name() -> None:
    src = '''
from myeng.config.settings import knobs
from myeng import switches


class Runner:
    def execute_model(self, batch):
        a = knobs.MYENG_TRACE.get()
        b = knobs.MYENG_CHUNK.is_set()
        c = switches.MYENG_DUMP
        knobs.MYENG_CHUNK.set("1")
        return a, b, c
'''
    files = {"myeng/__init__.py": "", "myeng/config/__init__.py": "", "myeng/config/settings.py": FIELDS,
             "myeng/switches.py": TABLE, "myeng/runner.py": src}
    result = scan_files(files)
    hits = [(f.line, f.detail.var, f.detail.via) for f in result.findings if f.rule == "env-read-hot"]
    assert hits == [
        (7, "MYENG_TRACE", "registry:found:myeng.config.settings.knobs"),
        (8, "MYENG_CHUNK", "registry:found:myeng.config.settings.knobs"),
        (9, "MYENG_DUMP", "registry:found:myeng.switches"),
    ]


def test_lookalikes_of_registries_are_not_registries() -> None:
    fixed = FIELDS.replace("os.getenv(self.name)", 'os.getenv("MYENG_FIXED")').replace(
        "return self.name in os.environ", "return False")
    no_table = TABLE.replace("return _getters[name]()", "return name.lower()")
    src = '''
from myeng.settings import knobs
from myeng import switches


class Runner:
    def execute_model(self, batch):
        return knobs.MYENG_TRACE.get(), switches.MYENG_DUMP, switches.OTHER
'''
    files = {"myeng/__init__.py": "", "myeng/settings.py": fixed, "myeng/switches.py": no_table, "myeng/runner.py": src}
    hits = [(f.path, f.detail.var) for f in scan_files(files).findings if f.rule == "env-read-hot"]
    # what remains is the fixed read inside Knob.get, reached through the call graph
    assert not [h for h in hits if h[0] == "myeng/runner.py" and h[1] in ("MYENG_TRACE", "MYENG_DUMP", "OTHER")]


def test_a_table_registry_only_matches_its_own_names() -> None:
    src = '''
from myeng import switches


class Runner:
    def execute_model(self, batch):
        return switches.MYENG_DUMP, switches.UNLISTED
'''
    files = {"myeng/__init__.py": "", "myeng/switches.py": TABLE, "myeng/runner.py": src}
    hits = [f.detail.var for f in scan_files(files).findings if f.rule == "env-read-hot" and f.path == "myeng/runner.py"]
    assert hits == ["MYENG_DUMP"]


def test_a_registry_removed_between_scans_stops_being_one(tmp_path) -> None:
    import time

    from cs_audit.api import run_audit
    from cs_audit.config import AuditConfig
    from cs_audit.testing import write_tree

    src = '''
from myeng import switches


class Runner:
    def execute_model(self, batch):
        return switches.MYENG_DUMP
'''
    root = write_tree(tmp_path, {"myeng/__init__.py": "", "myeng/switches.py": TABLE, "myeng/runner.py": src})

    def reads() -> list[str]:
        result = run_audit(AuditConfig(root=str(root), jobs=1, history=False))
        return [f.detail.var for f in result.findings if f.rule == "env-read-hot" and f.path == "myeng/runner.py"]

    assert reads() == ["MYENG_DUMP"]
    assert reads() == ["MYENG_DUMP"]  # the second scan takes what each file defines from the memo
    time.sleep(0.01)
    (root / "myeng" / "switches.py").write_text(TABLE.replace("return _getters[name]()", "return name"))
    assert reads() == []


# ------------------------------------------------ eager formatting through string locals
def test_concatenated_names_in_a_log_message_are_eager() -> None:
    src = hot('''
prefix = "step "
detail = str(batch)
logger.debug(prefix + detail)
logger.debug(self.tag + batch.name + str(batch.n))
''')
    result = scan_files({"mod.py": src})
    assert [(f.line, f.eager_kinds) for f in result.findings if f.rule == "eager-format"] == [
        (14, ("concat",)), (15, ("concat",)),
    ]


def test_sums_outside_a_log_message_are_not_formatting() -> None:
    src = hot('''
logger.debug("n=%d", batch.a + batch.b)
total = sum_up(batch.a + batch.b)
if logger.isEnabledFor(logging.DEBUG):
    logger.debug(self.tag + batch.name)
''', extra='''

def sum_up(x):
    return x
''')
    result = scan_files({"mod.py": src})
    assert [f.line for f in result.findings if f.rule == "eager-format"] == []


def test_chained_open_write_is_a_per_call_open() -> None:
    src = hot('open(batch.path, "a").write("row\\\\n")\nopen(batch.path).read()')
    result = scan_files({"mod.py": src})
    assert [(f.line, f.rule) for f in result.findings if f.rule == "per-call-open"] == [(12, "per-call-open")]


# ------------------------------------------------ output paths: each dump's own path argument
def test_dump_path_argument_comes_from_the_rule_data() -> None:
    src = '''
import numpy, torch

def dump(arr, t, root):
    numpy.save("/tmp/np_dump/a.npy", arr)
    torch.save(t, "/tmp/pt_dump/t.pt")
    numpy.save(root + "/a.npy", arr)
    torch.save("/tmp/not_a_path", root)
'''
    result = scan_files({"mod.py": src})
    assert [f.line for f in result.findings if f.rule == "hardcoded-output-path"] == [4, 5]


def test_a_project_names_the_path_argument_of_its_own_dump() -> None:
    src = '''
import mylib

def dump(obj, run):
    mylib.store(obj, run, "/tmp/mylib_out/x.bin")
    mylib.store(obj, "/tmp/not_the_path", run)
'''
    tables = (("emitters", {"dumps": {"mylib.store": "dump"}, "dump_path_args": {"mylib.store": 2}}),)
    result = scan_files({"mod.py": src}, rule_tables=tables)
    assert [f.line for f in result.findings if f.rule == "hardcoded-output-path"] == [4]


def test_an_accessor_handing_on_another_accessor_s_read_carries_it_to_its_call_site() -> None:
    src = hot("out = self.block(batch)", extra='''
    def block(self, batch):
        return self.flag()

    def flag(self):
        return os.environ.get("FLAG_X") == "1"
''')
    assert _reads(src) == [(12, "Runner.execute_model", "FLAG_X", "helper:Runner.block")]


def test_a_larger_helper_returned_up_a_chain_is_reported_once_where_it_reads() -> None:
    # `block` only hands on what `layer`, no accessor, returns: it carries no read of its own
    src = hot("out = self.block(batch)", extra='''
    def block(self, batch):
        return self.layer(batch)

    def layer(self, batch):
        if os.environ.get("LAYER_LOG") == "1":
            logger.info("layer %s", batch)
        return int(os.environ.get("LAYER_SCALE", "1"))
''')
    assert _reads(src) == [
        (18, "Runner.layer", "LAYER_LOG", "os.environ.get"),
        (20, "Runner.layer", "LAYER_SCALE", "os.environ.get"),
    ]


def test_a_helper_over_a_cached_registry_read_is_cached_at_its_call_sites() -> None:
    engine = ENGINE.replace("        return envs.VLLM_STEP_LOG", "        return self.scale()\n\n    def scale(self):\n        return envs.VLLM_STEP_LOG")
    hits = sorted((f.line, f.detail.via, f.detail.cached) for f in _engine(engine))
    assert hits == [(10, "helper:EngineCore.scale", "vllm.envs.enable_envs_cache")]


# ------------------------------------------------ output paths: defaults, constants, roots, templates
def _output_paths(src: str) -> list[tuple[int, str]]:
    result = scan_files({"mod.py": src})
    return [(f.line, f.detail.output_path) for f in result.findings if f.rule == "hardcoded-output-path"]


def test_parameter_defaults_and_module_constants_flowing_into_writes_are_output_paths() -> None:
    src = '''
import os, torch

_DUMP_PATH = "/tmp/x_dump.jsonl"
_RUN = ".runs/kv"

def dump(x, path="/tmp/trace.jsonl"):
    with open(path, "w") as f:
        f.write(x)

def append(rec):
    with open(_DUMP_PATH, "a") as f:
        f.write(rec)
    os.makedirs(_RUN, exist_ok=True)

def caller(x):
    dump(x, path="/elsewhere/trace.jsonl")
'''
    assert _output_paths(src) == [(7, "/tmp/trace.jsonl"), (11, "/tmp/x_dump.jsonl"), (13, ".runs/kv")]


def test_defaults_none_reads_and_shadowed_constants_are_silent() -> None:
    src = '''
import os

_DUMP_PATH = "/tmp/x_dump.jsonl"

def dump(x, path=None):
    with open(path, "w") as f:
        f.write(x)

def read_back():
    with open(_DUMP_PATH) as f:
        return f.read()

def shadowed(_DUMP_PATH):
    os.makedirs(_DUMP_PATH, exist_ok=True)

def relocated(root):
    _DUMP_PATH = os.path.join(root, "x.jsonl")
    with open(_DUMP_PATH, "a") as f:
        f.write("x")
'''
    assert _output_paths(src) == []


def test_relative_roots_joined_or_divided_are_output_paths() -> None:
    src = '''
import os
from pathlib import Path

RUN_ROOT = Path(".run")

def dump(name, t):
    os.makedirs(os.path.join(".realmode-run", name), exist_ok=True)
    (Path(".run") / name).mkdir(parents=True, exist_ok=True)
    out = RUN_ROOT / "kv" / name
    out.mkdir(parents=True)
    d = os.path.join("/tmp/cs", "kv")
    os.makedirs(d)
'''
    assert _output_paths(src) == [(7, ".realmode-run/"), (8, ".run/"), (10, ".run/kv/"), (12, "/tmp/cs/kv")]


def test_roots_from_the_caller_or_the_working_directory_are_silent() -> None:
    src = '''
import os
from pathlib import Path

def dump(root, name):
    os.makedirs(os.path.join(root, ".run", name), exist_ok=True)
    (Path(root) / ".run").mkdir()
    os.makedirs(os.path.join(".", name))
    with open(os.path.join(".cache", name)) as f:
        return f.read()
'''
    assert _output_paths(src) == []


def test_percent_and_format_templates_are_output_paths_up_to_their_placeholder() -> None:
    src = '''
import torch, json

def dump(t, rank, name, root):
    torch.save(t, "/tmp/dump_%d.pt" % rank)
    with open("/tmp/{}.json".format(name), "w") as f:
        json.dump({}, f)
    torch.save(t, "%s/dump.pt" % root)
    torch.save(t, "{}/dump.pt".format(root))
'''
    assert _output_paths(src) == [(4, "/tmp/dump_"), (5, "/tmp/")]


# ------------------------------------------------ a module-global handle opened lazily by a getter
GETTER = '''
_F = None


def _get():
    global _F
    if _F is None:
        _F = open("trace.jsonl", "a", buffering=1)
    return _F
'''


def test_a_lazily_opened_global_handle_is_cached_and_its_flush_redundant() -> None:
    src = hot("_get().write(str(batch))\n_get().flush()", extra=GETTER)
    result = scan_files({"mod.py": src})
    assert [(f.rule, f.line) for f in result.findings if f.rule in ("per-call-open", "redundant-flush")] == [
        ("redundant-flush", 13),
    ]
    assert next(f for f in result.findings if f.rule == "redundant-flush").detail.handle == "_F"


def test_a_getter_of_a_fresh_or_unbuffered_handle_is_not_a_cached_line_buffered_one() -> None:
    fresh = GETTER.replace("    global _F\n", "").replace("_F = None\n", "")
    plain = GETTER.replace(', buffering=1', '')
    for extra, opened in ((fresh, [("per-call-open", 19)]), (plain, [])):
        src = hot("_get().write(str(batch))\n_get().flush()", extra=extra)
        result = scan_files({"mod.py": src})
        got = [(f.rule, f.line) for f in result.findings if f.rule in ("per-call-open", "redundant-flush")]
        assert got == opened, extra
