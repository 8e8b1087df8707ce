"""The call-graph model's fixpoints give what the plain rounds they replace give."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from cs_audit.api import analyse_file, prepare_ruleset
from cs_audit.config import AuditConfig
from cs_audit.extract.discover import discover
from cs_audit.joins import callgraph, resolver
from cs_audit.model import FileFacts

PROJECT = Path(__file__).resolve().parent.parent


def _facts_of(root: Path) -> tuple[dict[str, FileFacts], object]:
    rs = prepare_ruleset(AuditConfig(root=root))
    sources, _ = discover(root)
    facts = {}
    for source in sources:
        result = analyse_file(source, rs, 1 << 20)
        if isinstance(result, FileFacts):
            facts[result.path] = result
    return facts, rs


def _write_tree(root: Path, files: dict[str, str]) -> Path:
    """``files`` (relative path -> indented source) written under ``root``."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def _model(root: Path) -> tuple[callgraph.TreeModel, object]:
    facts, rs = _facts_of(root)
    return callgraph.build_model(facts, rs), rs


def _debug_functions_every_round(model, rs):
    """The fixpoint as first written: every function worked out again in every round."""
    debug = callgraph._named_debug(model, rs)
    arg_of_emitter = callgraph._emitter_arg_callees(model)
    changed, rounds = True, 0
    while changed and rounds < callgraph.DEBUG_ROUNDS:
        changed, rounds = False, rounds + 1
        for key, edges in model.callers.items():
            if callgraph._debug_step(model, rs, debug, arg_of_emitter, key, edges):
                changed = True
    return debug


_CHAIN = '''
    import os

    # defined callee-first: each round of the fixpoint reaches one more helper
    def h4(x):
        return x + 4

    def h3(x):
        return h4(x) + 3

    def h2(x):
        return h3(x) + 2

    def h1(x):
        return h2(x) + 1

    def mixed(x):
        return x

    def dump_state(x):
        h1(x)
        mixed(x)

    def step(x):
        if os.getenv("DUMP_STATE"):
            dump_state(x)
        mixed(x)  # also called outside debug code
'''


@pytest.mark.parametrize("tree", ["fixtures/compressspec", "fixtures/sglang_trace", "chain"])
def test_debug_functions_are_those_of_the_every_round_fixpoint(tree: str, tmp_path: Path) -> None:
    if tree == "chain":
        root = tmp_path / "chain"
        root.mkdir()
        (root / "engine.py").write_text(textwrap.dedent(_CHAIN), encoding="utf-8")
    else:
        root = PROJECT / tree
    model, rs = _model(root)
    expected = _debug_functions_every_round(model, rs)
    assert callgraph._debug_functions(model, rs) == expected
    if tree == "chain":
        names = {key[1] for key in expected}
        assert {"dump_state", "h1", "h2", "h3", "h4"} <= names
        assert "mixed" not in names


_RESOLVE = {
    "pkg/__init__.py": "",
    "pkg/util.py": '''
        def helper():
            return 1


        class Tool:
            def __init__(self):
                self.n = 0

            def run(self):
                return helper()

            @classmethod
            def make(cls):
                return cls()

            def again(self):
                return self.__class__()
    ''',
    "pkg/engine.py": '''
        import torch
        from pkg import util

        class Engine:
            def step(self):
                return self.emit()

            def emit(self):
                return util.helper() + torch.cat([])

        def outer():
            def inner():
                return 0
            return inner()

        Engine().step()
    ''',
}


def test_resolution_of_each_kind_of_callee(tmp_path: Path) -> None:
    root = _write_tree(tmp_path / "t", _RESOLVE)
    model, _ = _model(root)
    resolve = model.resolver.resolve
    engine, util = "pkg/engine.py", "pkg/util.py"
    assert resolve(engine, "Engine.step", "self.emit") == [(engine, "Engine.emit")]
    assert resolve(engine, None, "self.emit") == [(engine, "Engine.emit")]  # module level: the file's method so named
    assert resolve(engine, "Engine.emit", "pkg.util.helper") == [(util, "helper")]
    assert resolve(engine, "Engine.emit", "torch.cat") == []  # no module of the tree
    assert resolve(engine, "outer", "inner") == [(engine, "outer.<locals>.inner")]
    assert resolve(engine, None, "inner") == []
    assert resolve(engine, None, "Engine") == []  # a class without __init__
    assert resolve(util, "Tool.run", "helper") == [(util, "helper")]
    assert resolve(engine, "Engine.emit", "pkg.util.Tool.run") == [(util, "Tool.run")]
    assert resolve(engine, "Engine.emit", "pkg.util.Tool") == [(util, "Tool.__init__")]
    # `cls()` / `self.__class__()`: named after no function, still the class's __init__
    assert resolve(util, "Tool.make", "cls") == [(util, "Tool.__init__")]
    assert resolve(util, "Tool.again", "self.__class__") == [(util, "Tool.__init__")]
    # a last name no function or class of the tree has: nothing, from any caller
    assert resolve(engine, "Engine.step", "self.register_buffer") == []
    assert resolve(engine, None, "pkg.util.absent") == []
    assert "register_buffer" not in model.resolver.names and {"Tool", "run", "helper"} <= model.resolver.names


def test_resolution_through_what_a_package_re_exports(tmp_path: Path) -> None:
    root = _write_tree(tmp_path / "t", {
        "pkg/__init__.py": "",
        "pkg/utils/__init__.py": "from pkg.utils.common import *\nfrom pkg.utils.net import port_free\n",
        "pkg/utils/common.py": "import os\n\n\ndef env_on():\n    return os.getenv('X') == '1'\n\n\nclass Tool:\n    def run(self):\n        pass\n",
        "pkg/utils/net.py": "def port_free(p):\n    return True\n",
        "pkg/engine.py": "from pkg.utils import env_on, port_free\n\n\ndef step():\n    return env_on() and port_free(1)\n",
    })
    model, _ = _model(root)
    resolve, engine = model.resolver.resolve, "pkg/engine.py"
    # a star import and a named one of the package's `__init__`
    assert resolve(engine, "step", "pkg.utils.env_on") == [("pkg/utils/common.py", "env_on")]
    assert resolve(engine, "step", "pkg.utils.port_free") == [("pkg/utils/net.py", "port_free")]
    assert resolve(engine, "step", "pkg.utils.Tool.run") == [("pkg/utils/common.py", "Tool.run")]
    assert resolve(engine, "step", "pkg.utils.absent") == []


# ------------------------------------------------------------------ resolutions reused
def _edges(model: callgraph.TreeModel) -> list[tuple[object, ...]]:
    return [(e.caller, e.callee, e.path, e.site.line, e.site.callee, e.switch and e.switch.text) for e in model.edges]


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("tree", ["compressspec", "sglang_trace"])
def test_earlier_resolutions_of_unchanged_files_give_the_same_model(tree: str, whole: bool) -> None:
    facts, rs = _facts_of(PROJECT / "fixtures" / tree)
    fresh = callgraph.build_model(facts, rs, whole=whole)
    assert fresh.resolutions is not None and fresh.resolutions.files and fresh.resolved_calls
    changed = sorted(facts)[len(facts) // 2]
    again = callgraph.build_model(facts, rs, fresh.resolutions, set(facts) - {changed}, whole=whole)
    assert again.resolved_files == (changed,)  # the others taken as they were
    assert _edges(again) == _edges(fresh) and again.resolved_calls == fresh.resolved_calls
    assert again.resolutions == fresh.resolutions
    assert again.debug_functions == fresh.debug_functions and again.freq_default == fresh.freq_default


#: property reads through a parameter that the calls type (`helper(self.stats)`): their
#: answers are forgotten and asked again as arguments flow
_PROPERTY_TREE = {
    "stats.py": '''
        class Stats:
            @property
            def load(self):
                print("load")
                return 1

            def plain(self):
                return 2
    ''',
    "runner.py": '''
        from stats import Stats

        def helper(stats):
            a = stats.plain()
            return stats.load + a

        class ModelRunner:
            def __init__(self):
                self.stats = Stats()

            def execute_model(self, batch):
                for req in batch.requests:
                    helper(self.stats)
                return self.stats.load
    ''',
}


@pytest.mark.parametrize("whole", [True, False])
def test_property_reads_through_a_typed_parameter_and_reused_resolutions(tmp_path: Path, whole: bool) -> None:
    facts, rs = _facts_of(_write_tree(tmp_path / "t", _PROPERTY_TREE))
    fresh = callgraph.build_model(facts, rs, whole=whole)
    edges = {(e.caller, e.callee, e.how) for e in fresh.edges}
    assert (("runner.py", "helper"), ("stats.py", "Stats.load"), "property") in edges
    assert fresh.freq_default[("stats.py", "Stats.load")] == "request"  # read in the helper, per request
    again = callgraph.build_model(facts, rs, fresh.resolutions, {"stats.py"}, whole=whole)
    assert again.resolved_files == ("runner.py",)
    assert _edges(again) == _edges(fresh) and again.freq_default == fresh.freq_default
    assert again.resolutions == fresh.resolutions


_BEFORE = {
    "pkg/__init__.py": "",
    "pkg/util.py": '''
        def helper():
            return 1
    ''',
    "pkg/engine.py": '''
        from pkg import util

        def step():
            return util.helper2()
    ''',
}


def test_earlier_resolutions_are_not_taken_when_a_function_was_added_elsewhere(tmp_path: Path) -> None:
    root = _write_tree(tmp_path / "t", _BEFORE)
    facts, rs = _facts_of(root)
    before = callgraph.build_model(facts, rs)
    assert not before.edges  # util.helper2 does not exist yet
    # engine.py is unchanged, but util.py now defines what it calls
    (root / "pkg/util.py").write_text("def helper():\n    return 1\n\n\ndef helper2():\n    return 2\n", encoding="utf-8")
    facts, rs = _facts_of(root)
    after = callgraph.build_model(facts, rs, before.resolutions, {"pkg/engine.py", "pkg/__init__.py"})
    assert after.resolutions.digest != before.resolutions.digest
    assert [(e.caller, e.callee) for e in after.edges] == [(("pkg/engine.py", "step"), ("pkg/util.py", "helper2"))]


_GATED = {
    "pkg/__init__.py": "",
    "pkg/flags.py": '''
        import os

        DUMP = os.getenv("A_DUMP")


        def tracing(name="A_TRACE"):
            return os.getenv(name) == "1"
    ''',
    "pkg/util.py": '''
        def dump(x):
            return x
    ''',
    "pkg/engine.py": '''
        from pkg import flags, util


        def step(batch):
            if flags.DUMP:
                util.dump(batch)
            if flags.tracing():
                util.dump(batch)
            return batch
    ''',
}


@pytest.mark.parametrize(("before", "after", "switches_after"), [
    # the constant a gate names reads another variable
    ('DUMP = os.getenv("A_DUMP")', 'DUMP = os.getenv("B_DUMP")', ["B_DUMP", "A_TRACE"]),
    # the env helper a gate calls reads another variable (by its parameter's default)
    ('def tracing(name="A_TRACE"):', 'def tracing(name="B_TRACE"):', ["A_DUMP", "B_TRACE"]),
    # ... or no longer reads the env at all: a test of its parameter's string default, false
    ('return os.getenv(name) == "1"', 'return name == "1"', ["A_DUMP", "option:tracing(name=='1')"]),
    # an edit that changes no switch input
    ("import os", "import os  # env", ["A_DUMP", "A_TRACE"]),
])
def test_edge_switches_follow_an_edit_of_what_a_gate_names(tmp_path: Path, before: str, after: str,
                                                           switches_after: list[str | None]) -> None:
    root = _write_tree(tmp_path / "t", _GATED)
    facts, rs = _facts_of(root)
    first = callgraph.build_model(facts, rs)
    assert [e.switch and e.switch.text for e in first.edges if e.callee[1] == "dump"] == ["A_DUMP", "A_TRACE"]
    flags = root / "pkg/flags.py"
    flags.write_text(flags.read_text(encoding="utf-8").replace(before, after), encoding="utf-8")
    facts, rs = _facts_of(root)
    # engine.py is unchanged: its resolutions are taken, its edges' switches worked out again
    again = callgraph.build_model(facts, rs, first.resolutions, set(facts) - {"pkg/flags.py"})
    assert [e.switch and e.switch.text for e in again.edges if e.callee[1] == "dump"] == switches_after
    assert _edges(again) == _edges(callgraph.build_model(facts, rs))


def test_tables_digest_follows_qualnames_modules_and_types_only(tmp_path: Path) -> None:
    root = _write_tree(tmp_path / "t", _BEFORE)
    facts, _ = _facts_of(root)
    digest = callgraph.Resolver(facts).tables_digest()
    (root / "pkg/engine.py").write_text("from pkg import util\n\n\ndef step():\n    x = 1\n    return util.helper2()\n",
                                        encoding="utf-8")
    assert callgraph.Resolver(_facts_of(root)[0]).tables_digest() == digest  # a body edit no call depends on
    (root / "pkg/engine.py").write_text("from pkg import util\n\n\ndef step() -> util.Helper:\n    return util.helper2()\n",
                                        encoding="utf-8")
    assert callgraph.Resolver(_facts_of(root)[0]).tables_digest() != digest  # what step() returns
    (root / "pkg/engine.py").write_text("def step():\n    return 0\n\n\ndef other():\n    return 1\n", encoding="utf-8")
    assert callgraph.Resolver(_facts_of(root)[0]).tables_digest() != digest  # a function more



_PASSING = {
    "pkg/__init__.py": "",
    "pkg/engine.py": """
        def run(cb):
            return cb()

        def fast():
            return 1

        def slow():
            return 2

        def step():
            record(fast)
            return run(fast)
    """,
}


def test_tables_digest_follows_the_arguments_of_calls_that_land_only(tmp_path: Path) -> None:
    # what a call passes flows into the parameters of the function it lands in: the digest
    # (taken from each file's argument digests) changes with those arguments only, and the
    # resolutions it lets a scan take are those a fresh scan makes
    root = _write_tree(tmp_path / "t", _PASSING)
    engine = root / "pkg/engine.py"
    facts, rs = _facts_of(root)
    first = callgraph.build_model(facts, rs)
    engine.write_text(engine.read_text(encoding="utf-8").replace("record(fast)", "record(slow)"), encoding="utf-8")
    facts, rs = _facts_of(root)
    assert callgraph.Resolver(facts).tables_digest() == first.resolutions.digest  # `record` is no function of the tree
    engine.write_text(engine.read_text(encoding="utf-8").replace("run(fast)", "run(slow)"), encoding="utf-8")
    facts, rs = _facts_of(root)
    again = callgraph.build_model(facts, rs, first.resolutions, set(facts) - {"pkg/engine.py"})
    fresh = callgraph.build_model(facts, rs)
    assert again.resolutions.digest == fresh.resolutions.digest != first.resolutions.digest
    assert _edges(again) == _edges(fresh)
    assert ("run", "slow") in {(e.caller[1], e.callee[1]) for e in fresh.edges if e.caller is not None}

_HELPERS = '''
    import os
    import logging

    logger = logging.getLogger(__name__)

    def trace(msg):
        if os.getenv("KV_TRACE"):
            logger.info(msg)

    def trace_step(n):
        trace(f"step {n}")

    def trace_batch(batch):
        trace_step(len(batch))

    def loud(n):
        logger.info("always %s", n)
        trace_step(n)

    def guarded_caller(n):
        if os.getenv("OTHER"):
            trace_step(n)

    def long_caller(n):
        trace_step(n)
''' + "        n += 1\n" * 45


def test_gated_emitter_helpers_reach_short_ungated_callers_through_chains(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "engine.py").write_text(textwrap.dedent(_HELPERS), encoding="utf-8")
    model, _ = _model(root)
    names = {key[1] for key in model.gated_emitter_helpers}
    # trace gates its own emit; trace_step and trace_batch call it (through one another) ungated
    assert names == {"trace", "trace_step", "trace_batch"}
    # not: an ungated emit of its own (loud), the call under a gate (guarded_caller), too long (long_caller)


@pytest.mark.parametrize("tree", ["compressspec", "sglang_trace"])
def test_fact_sites_are_every_call_site_a_rule_pass_reads(tree: str) -> None:
    """The rules' passes read ``model.fact_sites``: every site with a role, eager arguments,
    calls in its arguments or a written path is there, in file order; what is left out are
    plain call edges (no role and nothing in or about their arguments)."""
    model, _ = _model(PROJECT / "fixtures" / tree)
    assert set(model.fact_sites) == set(model.facts)
    for path, ff in model.facts.items():
        # a sync the whole tree shows is on host data comes back as a `host-sync` (joins.host_data)
        kept = tuple(replace(s, role="sync") if s.role == "host-sync" and s not in ff.calls else s for s in model.fact_sites[path])
        assert list(kept) == [s for s in ff.calls if s in kept]  # file order
        for site in ff.calls:
            plain = site.role is None and not site.eager and not site.arg_calls and site.path_pattern is None
            assert (site not in kept) == plain
    assert any(len(model.fact_sites[p]) < len(ff.calls) for p, ff in model.facts.items())
    assert any(s.role is None and s.arg_calls for sites in model.fact_sites.values() for s in sites)


# ------------------------------------------------------------------ resolution on demand
_DEMAND = {
    "pkg/__init__.py": "",
    "pkg/runner.py": '''
        class Helper:
            def go(self):
                return 3


        class Runner:
            def __init__(self):
                self.helper = Helper()

            def run(self):
                return 1

            def warm(self):
                return self.helper.go()
    ''',
    "pkg/engine.py": '''
        from pkg.runner import Runner


        class EngineCore:
            def __init__(self):
                self.runner = Runner()

            def step(self):
                return self.runner.run()

            def setup(self):
                return self.runner.warm()
    ''',
}


def _calls(model: callgraph.TreeModel) -> set[tuple[str, str]]:
    return {(e.caller[1], e.callee[1]) for e in model.edges if e.caller is not None}


def test_a_scan_resolves_through_the_types_only_the_calls_it_needs(tmp_path: Path) -> None:
    facts, rs = _facts_of(_write_tree(tmp_path / "t", _DEMAND))
    whole = callgraph.build_model(facts, rs)
    scan = callgraph.build_model(facts, rs, whole=False)
    # `why` and `callgraph` see every call through the types; a scan only those a hot root
    # reaches: `setup` is no hot code, and `self.runner.warm()` names no function by itself
    assert {("EngineCore.step", "Runner.run"), ("EngineCore.setup", "Runner.warm"), ("Runner.warm", "Helper.go")} <= _calls(whole)
    assert ("EngineCore.step", "Runner.run") in _calls(scan)
    assert not {("EngineCore.setup", "Runner.warm"), ("Runner.warm", "Helper.go")} & _calls(scan)
    assert scan.freq_default == whole.freq_default


@pytest.mark.parametrize("edit", [
    # reaches nothing new (calls only, no binding: the tables are the same)
    ("return self.runner.warm()", "self.runner.run()\n        return self.runner.warm()"),
    # the hot root reaches another function, whose calls took no types before (another file)
    ("return self.runner.run()", "self.runner.warm()\n        return self.runner.run()"),
])
def test_earlier_resolutions_on_demand_give_what_a_fresh_scan_gives(tmp_path: Path, edit: tuple[str, str]) -> None:
    root = _write_tree(tmp_path / "t", _DEMAND)
    facts, rs = _facts_of(root)
    first = callgraph.build_model(facts, rs, whole=False)
    engine = root / "pkg/engine.py"
    engine.write_text(engine.read_text(encoding="utf-8").replace(*edit), encoding="utf-8")
    facts, rs = _facts_of(root)
    again = callgraph.build_model(facts, rs, first.resolutions, set(facts) - {"pkg/engine.py"}, whole=False)
    fresh = callgraph.build_model(facts, rs, whole=False)
    assert again.resolutions.digest == first.resolutions.digest
    assert _edges(again) == _edges(fresh) and again.freq_default == fresh.freq_default
    reaches_more = "warm()\n" in edit[1]
    assert (("Runner.warm", "Helper.go") in _calls(fresh)) == reaches_more
    # the earlier resolutions of unchanged files are taken unless the hot code grew
    assert again.resolved_files == (tuple(sorted(facts)) if reaches_more else ("pkg/engine.py",))


def test_earlier_resolutions_on_demand_are_taken_when_a_helper_is_reached_by_another_name(tmp_path: Path) -> None:
    # hot `level()` returns what an instance's `__call__` (an env read) gives: the call is
    # named `FLAG`, not like the helper, so the names of the helpers are the same worked out
    # afresh or from the resolutions made (a difference would join every scan afresh)
    root = _write_tree(tmp_path / "t", {**_DEMAND, "pkg/flags.py": '''
        import os


        class Flag:
            def __call__(self):
                return os.getenv("A_FLAG")


        FLAG = Flag()


        def level():
            return FLAG()
    ''', "pkg/engine.py": '''
        from pkg import flags


        class EngineCore:
            def step(self):
                return flags.level()
    '''})
    facts, rs = _facts_of(root)
    first = callgraph.build_model(facts, rs, whole=False)
    assert (("pkg/flags.py", "level"), ("pkg/flags.py", "Flag.__call__")) in {(e.caller, e.callee) for e in first.edges}
    again = callgraph.build_model(facts, rs, first.resolutions, set(facts) - {"pkg/engine.py"}, whole=False)
    assert again.resolved_files == ("pkg/engine.py",)
    assert again.resolutions == first.resolutions


# ------------------------------------------------------------------ what flows into parameters, reused
_HELPER_TREE = {
    "pkg/__init__.py": "",
    "pkg/util.py": '''
        def helper(fn):
            return 1
    ''',
    "pkg/work.py": '''
        def inner():
            return 2


        def job():
            inner()
            return 1
    ''',
    "pkg/engine.py": '''
        from pkg.util import helper
        from pkg.work import job


        class EngineCore:
            def step(self):
                return helper(job)
    ''',
}


@pytest.mark.parametrize("whole", [False, True])
def test_a_parameter_first_read_in_the_changed_file(tmp_path: Path, whole: bool) -> None:
    # the changed file now calls its parameter: that parameter was never demanded before,
    # so the stored table has no sources for it
    root = _write_tree(tmp_path / "t", _HELPER_TREE)
    facts, rs = _facts_of(root)
    first = callgraph.build_model(facts, rs, whole=whole)
    util = root / "pkg/util.py"
    util.write_text(util.read_text(encoding="utf-8").replace("    return 1", "    fn()\n    return 1"), encoding="utf-8")
    facts, rs = _facts_of(root)
    again = callgraph.build_model(facts, rs, first.resolutions, set(facts) - {"pkg/util.py"}, whole=whole)
    fresh = callgraph.build_model(facts, rs, whole=whole)
    assert again.resolutions.digest == first.resolutions.digest
    assert ("helper", "job") in _calls(fresh)
    assert _edges(again) == _edges(fresh)


#: three functions each of three callers hands to one helper (a shared parameter)
_JOBS = '''
        def job1():
            return 1


        def job2():
            return 2


        def job3():
            return 3
'''

_SHARED = {
    "pkg/__init__.py": "",
    "pkg/util.py": '''
        def helper(fn):
            fn()
            return 1
    ''',
    "pkg/work.py": _JOBS,
    "pkg/engine.py": '''
        from pkg.util import helper
        from pkg.work import job1, job2, job3


        def a():
            return helper(job1)


        def b():
            return helper(job2)


        def c():
            return helper(job3)


        class EngineCore:
            def step(self):
                a()
                b()
                return c()
    ''',
}


@pytest.mark.parametrize("whole", [False, True])
def test_a_parameter_no_longer_read_in_the_changed_file(tmp_path: Path, whole: bool) -> None:
    # `fn` shared by three callers: each call of helper runs its own job (callback edges)
    # while helper calls fn; once it does not, a fresh build never asks helper's parameters
    root = _write_tree(tmp_path / "t", _SHARED)
    facts, rs = _facts_of(root)
    first = callgraph.build_model(facts, rs, whole=whole)
    assert ("a", "job1") in _calls(first)
    util = root / "pkg/util.py"
    util.write_text(util.read_text(encoding="utf-8").replace("    fn()\n", ""), encoding="utf-8")
    facts, rs = _facts_of(root)
    again = callgraph.build_model(facts, rs, first.resolutions, set(facts) - {"pkg/util.py"}, whole=whole)
    fresh = callgraph.build_model(facts, rs, whole=whole)
    assert again.resolutions.digest == first.resolutions.digest
    assert _edges(again) == _edges(fresh)


_DEEP = {
    "pkg/__init__.py": "",
    "pkg/util.py": '''
        def apply(fn):
            fn()
            return 1
    ''',
    "pkg/work.py": _JOBS + '''

        def target():
            return 4


        class Impl:
            def go(self, t):
                t()
                return 5
    ''',
    "pkg/engine.py": '''
        from pkg.util import apply
        from pkg.work import Impl, job1, job2, job3, target


        def a():
            return apply(job1)


        def b():
            return apply(job2)


        def c():
            return apply(job3)


        def use(kind):
            return kind().go(target)


        class EngineCore:
            def step(self):
                a()
                b()
                c()
                return use(Impl)
    ''',
}


def test_a_group_whose_targets_were_forgotten_flows_again_next_call(tmp_path: Path, monkeypatch) -> None:
    # one flow round per call: `kind().go(target)` is taken in the first round (no targets
    # yet), its answer is forgotten when `kind` gets `Impl`; `_demand` then asks its passed
    # functions (a shared parameter exists: apply.fn), which refills the targets memo, so
    # the next flow_arguments call no longer sees it as dirty and `t` never gets `target`
    monkeypatch.setattr(resolver, "MAX_FLOW_ROUNDS", 1)
    facts, rs = _facts_of(_write_tree(tmp_path / "t", _DEEP))
    model = callgraph.build_model(facts, rs, whole=False)
    assert ("Impl.go", "target") in _calls(model)
