"""The engine's defaults decide gates (``extract.options``, ``joins.defaults``): an option or a
platform whose default keeps code from running takes it out of §1, the report names the
default, and a stated deployment brings it back.  The shapes one by one are the annotated
``fixtures/annotated/toyserve/defaults.py``; each part is disabled here to show the fixture
then disagrees."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cs_audit.extract.gates as extract_gates_module
import cs_audit.extract.index as index_module
import cs_audit.extract.options as options_module
import cs_audit.extract.python as python_module
import cs_audit.joins.callgraph as callgraph_module
import cs_audit.joins.components as components_module
import cs_audit.joins.gates as gates_module
from cs_audit.cli import app
from cs_audit.extract.options import declared_options, foreign_stores, start_up_resolutions
from cs_audit.joins.arguments import ArgumentTests
from cs_audit.joins.defaults import NOT_OPTION
from cs_audit.ruleset import Defaults, load_ruleset
from cs_audit.testing import check_annotations, write_tree

runner = CliRunner()
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "annotated" / "toyserve" / "defaults.py"


def _fixture() -> dict[str, str]:
    return {"toyserve/defaults.py": FIXTURE.read_text(encoding="utf-8")}


def _line(text: str) -> int:
    return next(i for i, line in enumerate(FIXTURE.read_text().splitlines(), 1) if text in line)


def test_the_annotated_defaults_agree_with_the_report() -> None:
    assert check_annotations(_fixture()) == []


def test_without_the_option_gates_every_option_shape_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "option_gate", lambda *a, **k: NOT_OPTION)
    problems = check_annotations(_fixture())
    unexpected = {int(p.split(":")[1]) for p in problems if "unexpected default-on-emitter" in p}
    for text in ('"rebalanced', '"balancer copy', '"no prefix reuse', '"fp8 cache', '"watched', '"traced',
                 '"request %d', '"rocm path', '"npu path', '"predicate', '"peer ready', '"draft step', '"tensor parallel'):
        assert _line(text) in unexpected, text


def test_without_the_declared_options_only_the_platform_still_gates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_module, "declared_options", lambda *a: ())
    problems = check_annotations(_fixture())
    unexpected = {int(p.split(":")[1]) for p in problems if "unexpected" in p}
    assert _line('"rebalanced') in unexpected and _line('"request %d') in unexpected
    assert _line('"rocm path') not in unexpected and _line('"npu path') not in unexpected


def test_without_short_circuits_a_call_after_a_test_of_its_receiver_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module._Indexer, "_test_header", lambda self, test: self._header(test))
    problems = check_annotations(_fixture())
    line = _line('"peer ready')
    assert f"toyserve/defaults.py:{line}: unexpected default-on-emitter" in " ".join(problems)


def _unexpected_lines(problems: list[str]) -> set[int]:
    return {int(p.split(":")[1]) for p in problems if "unexpected default-on-emitter" in p}


def test_without_dereferences_what_follows_an_unguarded_read_of_a_component_is_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extract_gates_module, "_dereferenced", lambda stmt, names: [])
    unexpected = _unexpected_lines(check_annotations(_fixture()))
    assert _line('"backed up') in unexpected and _line('"host stage') not in unexpected


def test_without_declared_components_neither_their_test_nor_a_read_through_them_is_gated(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "held_attribute_switch", lambda *a: None)
    unexpected = _unexpected_lines(check_annotations(_fixture()))
    assert {_line('"backed up'), _line('"host stage')} <= unexpected


def test_a_dereference_gates_only_past_its_statement_and_only_on_every_run() -> None:
    tree = ast.parse("a = self.p.x if c else 0\nb = c and self.p.y\nf(lambda: self.p.z)\n"
                     "g(self.p.w, [v for v in xs if self.p.q])\nif self.p[0]:\n    h(self.p.n)\n")
    found = [extract_gates_module._dereferenced(stmt, frozenset({"p"})) for stmt in tree.body]
    assert found == [[], [], [], ["p"], ["p"]]


def test_without_predicates_a_call_of_one_is_no_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "TEST_VALUES", frozenset())
    problems = check_annotations(_fixture())
    line = _line('"predicate')
    assert f"toyserve/defaults.py:{line}: unexpected default-on-emitter" in " ".join(problems)


def test_a_start_up_resolution_under_an_off_switch_leaves_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # every resolution under an `if` taken as made: the option is no longer known to be off
    monkeypatch.setattr(callgraph_module, "resolutions_by_default", lambda model, rs, overridden=frozenset(): None)
    problems = " ".join(check_annotations(_fixture()))
    idle, merge = _line('"idle delay'), _line('"chunk merge')
    assert f"toyserve/defaults.py:{idle}: unexpected default-on-emitter" in problems
    assert f"toyserve/defaults.py:{merge}:" not in problems


def test_conditional_resolutions_are_the_calls_in_functions() -> None:
    tree = ast.parse(FIXTURE.read_text())
    defaults = load_ruleset().defaults
    assert defaults is not None
    found = dict((entry, line) for line, entry in start_up_resolutions(tree, defaults)[1])
    assert found == {"enable_idle_delay=True": _line('"idle", enable_idle_delay'),
                     "enable_chunk_merge=True": _line('"merge", enable_chunk_merge'),
                     "disable_overlap_schedule=True": _line('"cpu", disable_overlap_schedule'),
                     "cache_strategy='extra'": _line('"strategy", cache_strategy')}
    assert "enable_idle_delay=True" not in start_up_resolutions(tree, defaults)[0]


def test_without_negated_names_the_branch_a_true_by_default_name_skips_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "_negated_name_gate", lambda *a: None)
    # a name some method sets False is never known to hold: its `not` branch stays reported
    _only_newly_reported('"no overlap', '"unfused')


def _only_newly_reported(reported: str, unchanged: str) -> None:
    """The fixture's line holding ``reported`` is now an unexpected finding; ``unchanged``'s agrees as before."""
    problems = " ".join(check_annotations(_fixture()))
    assert f"toyserve/defaults.py:{_line(reported)}: unexpected default-on-emitter" in problems
    assert f"toyserve/defaults.py:{_line(unchanged)}:" not in problems


def _reported_in(source: str, text: str, shift: int = 0) -> None:
    """``source`` (the fixture, changed) reports the line that holds ``text`` in the fixture,
    ``shift`` lines on."""
    problems = " ".join(check_annotations({"toyserve/defaults.py": source}))
    assert f"toyserve/defaults.py:{_line(text) + shift}: unexpected default-on-emitter" in problems


def test_a_call_an_option_keeps_off_hands_its_argument_to_no_default_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.joins.param_gates as param_gates

    real = param_gates.parameter_gate
    monkeypatch.setattr(gates_module, "parameter_gate", lambda model, key, gate, rs, call_off: real(
        model, key, gate, rs, lambda *a: None))
    # the hot chains' own arguments settle it too: only both parts off bring it back
    monkeypatch.setattr(ArgumentTests, "closing", lambda *a: None)
    problems = " ".join(check_annotations(_fixture()))
    attributed = _line('"attributed')
    assert f"toyserve/defaults.py:{attributed}: unexpected default-on-emitter" in problems


def test_without_argument_contexts_what_hot_calls_keep_off_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ArgumentTests, "closing", lambda *a: None)
    problems = " ".join(check_annotations(_fixture()))
    for text in ('"draining', '"deep flush'):
        assert f"toyserve/defaults.py:{_line(text)}: unexpected default-on-emitter" in problems, text


def _kept_rows_chain(root: Path) -> list[str]:
    report = _scan(root)
    line = _line('"kept rows')
    return next(f["hot_path"] for f in report["findings"] if f["line"] == line and f["path"].endswith("defaults.py"))


def test_a_chain_passes_the_call_whose_literal_lets_the_site_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_tree(tmp_path / "on", _fixture())
    # the step hands `keep=False` itself; `retire`, in a loop, hands `keep=True`
    assert _kept_rows_chain(root)[-3:] == ["toyserve.defaults.retire", "toyserve.defaults.release", "toyserve.defaults.keep_rows"]
    monkeypatch.setattr(ArgumentTests, "closing", lambda *a: None)
    assert "toyserve.defaults.retire" not in _kept_rows_chain(write_tree(tmp_path / "off", _fixture()))


def test_a_false_literal_stays_false_only_through_a_conjunction(tmp_path: Path) -> None:
    source = FIXTURE.read_text()
    rebound = source.replace("keep = keep and len(batch) > 0", "keep = keep or len(batch) > 0")
    assert rebound != source
    root = write_tree(tmp_path, {"toyserve/defaults.py": rebound})
    # rebound by a disjunction, the test no longer sees the literal: the nearer chain is shown
    assert "toyserve.defaults.retire" not in _kept_rows_chain(root)


def test_without_device_options_a_device_test_is_no_platform_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Defaults, "device_test", lambda self, option, device: None)
    problems = " ".join(check_annotations(_fixture()))
    for text in ('"npu device', '"no overlap'):  # the second: a resolution made only on a CPU
        assert f"toyserve/defaults.py:{_line(text)}: unexpected default-on-emitter" in problems, text


def test_without_the_conditions_of_an_assignment_an_optional_component_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module._Indexer, "_condition_refs", lambda self, groups: ())
    problems = check_annotations(_fixture())
    line = _line('"traced')
    assert f"toyserve/defaults.py:{line}: unexpected default-on-emitter" in " ".join(problems)


def test_without_instance_gates_a_method_of_a_class_built_only_under_an_option_is_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(callgraph_module, "gate_instance_methods", lambda *args: None)
    problems = " ".join(check_annotations(_fixture()))
    # a method called from outside; a hot root of the class; an override of a base only builders
    # under the option build the subclasses of; a class built only under an env var
    for text in ('"saved', '"draft step', '"pooled release', '"scripted step'):
        assert f"toyserve/defaults.py:{_line(text)}: unexpected default-on-emitter" in problems, text


def test_without_the_callers_of_a_builder_its_classes_are_built_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # the pooled allocators are built in a builder whose own calls carry no gate: the option is
    # two calls up, on the branch that calls the method that calls it
    monkeypatch.setattr(components_module, "MAX_CALLERS_UP", 0)
    problems = " ".join(check_annotations(_fixture()))
    line = _line('"pooled release')
    assert f"toyserve/defaults.py:{line}: unexpected default-on-emitter" in problems


SAVED = '"saved'


def test_a_subclass_or_a_construction_without_the_option_keeps_the_methods_open(tmp_path: Path) -> None:
    source = FIXTURE.read_text()
    opened = source + "\n\n_SHARED = Recorder()\n"
    saved = f"toyserve/defaults.py:{_line(SAVED)}: unexpected default-on-emitter"
    assert saved in " ".join(check_annotations({"toyserve/defaults.py": opened}))
    subclassed = source + "\n\nclass LoudRecorder(Recorder):\n    pass\n"
    assert saved in " ".join(check_annotations({"toyserve/defaults.py": subclassed}))


def test_without_enum_members_a_role_compared_with_one_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    # `self.role = ServingRole(config.serving_role)` then `if self.role != ServingRole.NULL:`
    monkeypatch.setattr(gates_module, "_member_gate", lambda *a: NOT_OPTION)
    problems = " ".join(check_annotations(_fixture()))
    for text in ('"disaggregated step', '"prefill server step'):
        assert f"toyserve/defaults.py:{_line(text)}: unexpected default-on-emitter" in problems, text


def test_without_ambiguous_names_a_step_result_is_taken_for_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module._Indexer, "own_state", lambda self: ())
    problems = check_annotations(_fixture())
    line = _line('"result %d')
    assert f"toyserve/defaults.py:{line}: missing default-on-emitter" in " ".join(problems)


def test_a_default_the_class_works_out_itself_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options_module, "_assigned_by_methods", lambda node: set())
    problems = check_annotations(_fixture())
    line = _line('"fast path')
    assert f"toyserve/defaults.py:{line}: missing default-on-emitter" in " ".join(problems)


def _scan(root: Path, *extra: str) -> dict:
    result = runner.invoke(app, ["scan", str(root), "-f", "json", "--no-cache", "--no-history", "-j", "1", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


FACTORY_TREE = {
    "engine/config.py": "from dataclasses import dataclass\n\n\n@dataclass\nclass ServeConfig:\n    enable_spill: bool = False\n",
    "engine/runner.py": (
        "import os\n\nfrom engine.config import ServeConfig\n\n\n"
        "class Writer:\n    def spill(self, n):\n        print(os.getenv('SPILL_TRACE'), n)\n\n\n"
        "class Factory:\n    def build(self):\n        return Writer()\n\n\n"
        "def attach(config: ServeConfig):\n    if config.enable_spill:\n        return Factory().build()\n    return None\n\n\n"
        "class Runner:\n    def __init__(self, config: ServeConfig):\n        self.writer: Writer = attach(config)\n\n"
        "    def execute_model(self, batch):\n        self.writer.spill(len(batch))\n        return batch\n"),
    # a test calls a `build` the graph cannot resolve: not a caller in the deployment
    "tests/test_plan.py": "def test_plan(plan):\n    assert plan.build() is not None\n",
}


def _spill_switches(root: Path) -> list[object]:
    return [f["switch"] for f in _scan(root)["findings"] if f["rule"] == "env-read-hot"]


def test_a_call_a_test_makes_is_no_unseen_caller_of_a_builder(tmp_path: Path) -> None:
    assert _spill_switches(write_tree(tmp_path / "t", FACTORY_TREE)) == ["option:enable_spill"]
    # the same unresolved call in the engine's own code, in a module with the factory at hand, may
    # be the builder's caller: the writer is built by default
    plan = FACTORY_TREE["tests/test_plan.py"].replace("test_plan", "run_plan")
    files = {**FACTORY_TREE, "engine/plan.py": "from engine.runner import Factory\n\n\n" + plan}
    assert _spill_switches(write_tree(tmp_path / "u", files)) == [None]
    # in a module that imports neither the factory's module nor a base's, it calls some other `build`
    files = {**FACTORY_TREE, "engine/plan.py": plan}
    assert _spill_switches(write_tree(tmp_path / "v", files)) == ["option:enable_spill"]


OFFLOAD_TREE = {
    "engine/config.py": FACTORY_TREE["engine/config.py"],
    "engine/runner.py": (
        "import os\n\nfrom engine.config import ServeConfig\n\n\n"
        "class Writer:\n    def spill(self, n):\n        print(os.getenv('SPILL_TRACE'), n)\n\n\n"
        "class Offload:\n    def __init__(self):\n        self.writer = Writer()\n\n\n"
        # a call of `__init__` the graph cannot resolve (an exception's base is no class of the tree)
        "class SpillError(Exception):\n    def __init__(self, n):\n        super().__init__(n)\n\n\n"
        "class Runner:\n    def __init__(self, config: ServeConfig):\n        self.offload = None\n"
        "        if config.enable_spill:\n            self.offload = Offload()\n\n"
        "    def execute_model(self, batch, writer: Writer):\n        writer.spill(len(batch))\n        return batch\n"),
}


FRAMEWORK_TREE = {
    "engine/config.py": FACTORY_TREE["engine/config.py"],
    "engine/base.py": (
        "import os\n\n\nclass Block:\n    def spill(self, n):\n        print(os.getenv('SPILL_TRACE'), n)\n\n\n"
        "class Model:\n    def __init__(self):\n        self.block = Block()\n\n\n"
        # a framework builds the served class by a name it is handed: no call of `Model` by name
        "def load(model_class):\n    return model_class()\n"),
    "engine/variant.py": (
        "from engine.base import Model\nfrom engine.config import ServeConfig\n\n\n"
        "class VariantModel(Model):\n    def __init__(self):\n        super().__init__()\n\n\n"
        "def make_variant(config: ServeConfig):\n    if config.enable_spill:\n        return VariantModel()\n    return None\n"),
    "engine/runner.py": (
        "from engine.base import Block\n\n\n"
        "class Runner:\n    def execute_model(self, batch, block: Block):\n        block.spill(len(batch))\n        return batch\n"),
}


def test_a_class_only_its_subclasses_build_by_name_is_built_by_default(tmp_path: Path) -> None:
    # the variant is built only under the option, but the base it extends is built some other way
    assert _spill_switches(write_tree(tmp_path / "t", FRAMEWORK_TREE)) == [None]


def test_a_class_built_in_a_constructor_an_option_keeps_off_has_no_instance(tmp_path: Path) -> None:
    # the constructor's callers decide, not whether some `__init__` call lands nowhere
    assert _spill_switches(write_tree(tmp_path / "t", OFFLOAD_TREE)) == ["option:enable_spill"]


def _emitter_lines(report: dict) -> set[int]:
    return {f["line"] for f in report["findings"] if f["rule"] == "default-on-emitter" and f.get("switch") is None}


SPILL = "self.pool.spill_writer.spill"


def _spill_switch(report: dict) -> object:
    return next(f.get("switch") for f in report["findings"] if f["rule"] == "env-read-hot" and f["code"].startswith(SPILL))


def test_a_call_into_a_class_built_only_under_an_option_is_behind_it(tmp_path: Path) -> None:
    # the call's own gates leave it open; the class it lands in has no instance by default
    root = write_tree(tmp_path / "t", _fixture())
    assert _spill_switch(_scan(root)) == "option:enable_pooling"


def test_without_the_switches_of_its_edges_the_call_is_default_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.analysis.env_read_hot as env_read_hot
    from cs_audit.joins.runs import run_of

    monkeypatch.setattr(env_read_hot, "call_run", lambda model, path, site, targets, rs: run_of(
        model, path, site.function, site.gates, site, rs))
    root = write_tree(tmp_path / "t", _fixture())
    assert _spill_switch(_scan(root)) is None


def test_without_typing_the_calls_of_a_builder_its_class_is_built_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # `cache.init_controller()` is outside the hot code a scan types: asked who builds the
    # controller, the scan types it then, as `why` types every call
    import cs_audit.joins.named_calls as named_calls

    monkeypatch.setattr(named_calls, "typed_on_demand", lambda model, name: ())
    problems = " ".join(check_annotations(_fixture()))
    assert f"toyserve/defaults.py:{_line('controller write')}: unexpected default-on-emitter" in problems


def test_the_report_names_the_defaults_that_decided_gates(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", _fixture())
    report = _scan(root)
    used = {u["switch"]: u for u in report["deployment"]["defaults_used"]}
    assert report["deployment"]["platform"] == "cuda" and report["deployment"]["stated"] is False
    assert used["enable_balancer"] == {"switch": "enable_balancer", "value": "False", "path": "toyserve/defaults.py",
                                       "line": _line("enable_balancer: bool"), "sites": 10,
                                       # a site the option alone guards (`peer ready` is entered through it)
                                       "example": {"path": "toyserve/defaults.py", "line": _line('"dispatch balanced')}}
    assert used["platform=rocm"]["value"] == "cuda" and used["platform=rocm"]["path"] is None
    assert "cache_dtype=='fp8'" in used and "enable_prefix_reuse=False" in used and "log_every_request" in used
    out = tmp_path / "audit.md"
    runner.invoke(app, ["scan", str(root), "-o", str(out), "--no-cache", "--no-history", "-j", "1"])
    text = out.read_text()
    assert "### Defaults that decided gates" in text
    assert f"| `enable_balancer` | `False` | `toyserve/defaults.py:{_line('enable_balancer: bool')}` | 10 |" in text
    assert "CUDA-graph replay runs none of it" in text


EXAMPLE_TREE = {
    "engine/config.py": "from dataclasses import dataclass\n\n\n@dataclass\nclass ServeConfig:\n    enable_balancer: bool = False\n",
    "engine/runner.py": (
        "import os\n\nfrom engine.config import ServeConfig\n\n\n"
        "class Runner:\n    def __init__(self, config: ServeConfig):\n        self.config = config\n\n"
        "    def execute_model(self, batch):\n"
        "        if self.config.enable_balancer:\n            total = batch.sum().item()\n"
        "        if self.config.enable_balancer:\n            print(os.getenv('BALANCE_TRACE'))\n"
        "        return batch\n"),
}


def test_the_example_of_a_default_is_a_finding_it_keeps_off_where_there_is_one(tmp_path: Path) -> None:
    report = _scan(write_tree(tmp_path, EXAMPLE_TREE))
    used = {u["switch"]: u for u in report["deployment"]["defaults_used"]}
    # the sync the option guards is no finding (no debug switch): the env read it guards is
    assert [(f["line"], f["switch"]) for f in report["findings"]] == [(14, "option:enable_balancer")]
    assert used["enable_balancer"]["sites"] == 2
    assert used["enable_balancer"]["example"] == {"path": "engine/runner.py", "line": 14}


def _aux_tree(call_option: str, aux_option: str) -> tuple[dict[str, str], int]:
    """EXAMPLE_TREE with `aux_step` in `engine/aux.py` (which sorts first), called only under
    ``call_option`` and reading an env var under ``aux_option``; and the runner's own read's line."""
    config = EXAMPLE_TREE["engine/config.py"] + "    enable_aux: bool = False\n    enable_trace: bool = False\n"
    aux = f"import os\n\n\ndef aux_step(config):\n    if config.{aux_option}:\n        print(os.getenv('AUX_TRACE'))\n"
    runner = EXAMPLE_TREE["engine/runner.py"].replace(
        "import os\n", "import os\n\nfrom engine.aux import aux_step\n").replace(
        "        return batch\n", f"        if self.config.{call_option}:\n            aux_step(self.config)\n        return batch\n")
    line = next(i for i, row in enumerate(runner.splitlines(), 1) if "BALANCE_TRACE" in row)
    return {"engine/config.py": config, "engine/aux.py": aux, "engine/runner.py": runner}, line


def test_the_example_of_a_default_is_in_a_function_that_runs_by_default_where_there_is_one(tmp_path: Path) -> None:
    # `aux_step` runs only through the balancer's own branch: its read is the balancer's too, but
    # the runner's, in a function that runs by default, is the example
    files, line = _aux_tree("enable_balancer", "enable_balancer")
    used = {u["switch"]: u for u in _scan(write_tree(tmp_path, files))["deployment"]["defaults_used"]}
    assert used["enable_balancer"]["sites"] == 3
    assert used["enable_balancer"]["example"] == {"path": "engine/runner.py", "line": line}


def test_a_setting_counts_no_site_whose_function_another_setting_keeps_off(tmp_path: Path) -> None:
    # `aux_step` runs only under `enable_aux`: the trace option's test in it decides nothing by default
    files, _ = _aux_tree("enable_aux", "enable_trace")
    used = {u["switch"]: u["sites"] for u in _scan(write_tree(tmp_path, files))["deployment"]["defaults_used"]}
    assert used == {"enable_balancer": 2, "enable_aux": 1}


def test_the_example_of_a_default_is_in_code_any_deployment_loads_where_there_is_one(tmp_path: Path) -> None:
    # a model's own module is kept off by the model served as well: the runner's read is the example
    model = EXAMPLE_TREE["engine/runner.py"].replace("class Runner:", "class LlamaRunner:").replace("BALANCE_TRACE", "LLAMA_TRACE")
    report = _scan(write_tree(tmp_path, {**EXAMPLE_TREE, "engine/models/llama.py": model}))
    used = {u["switch"]: u for u in report["deployment"]["defaults_used"]}
    assert {(f["path"], f["line"]) for f in report["findings"]} == {("engine/runner.py", 14), ("engine/models/llama.py", 14)}
    assert used["enable_balancer"]["example"] == {"path": "engine/runner.py", "line": 14}


def test_a_stated_deployment_brings_the_code_it_turns_on_back(tmp_path: Path) -> None:
    files = _fixture()
    plain = _emitter_lines(_scan(write_tree(tmp_path / "plain", files)))
    files["pyproject.toml"] = (
        '[tool.cs-audit]\ndeployment = {platform = "rocm", options = {enable_balancer = true, cache_dtype = "fp8", '
        'enable_pooling = true}, env = ["TOY_TRACE"]}\n'
    )
    report = _scan(write_tree(tmp_path / "stated", files))
    stated = _emitter_lines(report)
    back = {_line('"rebalanced'), _line('"balancer copy'), _line('"fp8 cache'), _line('"rocm path'), _line('"pooled release')}
    assert back <= stated and not back & plain
    assert _line('"default cache') in plain and _line('"default cache') not in stated
    assert _line('"npu path') not in stated
    assert report["deployment"]["stated"] is True and report["deployment"]["platform"] == "rocm"
    assert report["deployment"]["options"] == {"cache_dtype": "'fp8'", "enable_balancer": "True", "enable_pooling": "True"}


def test_a_deployment_env_var_is_set(tmp_path: Path) -> None:
    files = {"runner.py": (
        "import logging, os\nlogger = logging.getLogger(__name__)\n\n\nclass ModelRunner:\n"
        "    def execute_model(self, batch):\n        if os.getenv('TOY_TRACE'):\n"
        "            logger.info('traced %d', len(batch))\n        return batch\n")}
    assert 8 not in _emitter_lines(_scan(write_tree(tmp_path / "a", files)))
    files["pyproject.toml"] = '[tool.cs-audit]\ndeployment = {env = ["TOY_TRACE"]}\n'
    assert 8 in _emitter_lines(_scan(write_tree(tmp_path / "b", files)))


@pytest.mark.parametrize("table", [
    'deployment = {platform = "risc-v"}', 'deployment = {options = {"not a name" = true}}',
    'deployment = {env = "X"}', 'deployment = {model = "llama"}', 'deployment = {platform = "quantum"}',
    'deployment = {features = ["telepathy"]}', 'deployment = {features = "lora"}',
])
def test_a_malformed_deployment_is_one_line(tmp_path: Path, table: str) -> None:
    root = write_tree(tmp_path / "t", {"a.py": "x = 1\n", "pyproject.toml": f"[tool.cs-audit]\n{table}\n"})
    result = runner.invoke(app, ["scan", str(root), "--no-cache", "--no-history", "-j", "1"])
    assert result.exit_code == 2
    assert "deployment" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def _declared(source: str, path: str = "pkg/mod.py") -> dict[str, str]:
    tree = ast.parse(source)
    return {o.name: o.value for o in declared_options(tree, source, path, load_ruleset().defaults) if not o.copied}


def test_declarations_read_from_each_kind_of_settings_class() -> None:
    source = '''
from pydantic import BaseModel, Field
import msgspec

class ServerArgs:
    log_requests: bool = False

class Limits(BaseModel):
    strict: bool = Field(False, description="x")
    required: int = Field(...)

class Moe(msgspec.Struct):
    enable_balancer: bool = False

@dataclass
class StepMetadata:
    num_tokens: int = 0
'''
    found = _declared(source)
    assert found == {"log_requests": "False"}  # outside a settings module a record is per-step data
    in_settings = _declared(source, "pkg/config/moe.py")
    assert in_settings == {"log_requests": "False", "strict": "False", "enable_balancer": "False", "num_tokens": "0"}
    assert _declared(source, "pkg/tests/config/moe.py") == {}  # a test's settings are no engine option


def test_a_tri_state_switch_is_auto_and_a_settings_module_works_out_what_it_resolves() -> None:
    assert _declared("class ServeConfig:\n    overlap: bool | None = None\n    dump: str | None = None\n") == {"dump": "None"}
    source = ('declare_resolution(server_args, "x", enable_x=enabled, copied=server_args.copied)\n'
              'overrides["chunk"] = 2048\noverrides["depth"] = depth\nbuild(tp, enable_y=True)\n'
              'declare_resolution(server_args, "y", enable_z=False)\n'
              'payload["enable_w"] = req.enable_w\n')  # a request's payload filled: no resolution
    assert start_up_resolutions(ast.parse(source), load_ruleset().defaults)[0] == ("chunk=2048", "depth", "enable_x", "enable_z=False")


def test_a_settings_module_works_out_options_into_any_table_it_fills() -> None:
    # a hook returns what it declares (`declared["disable_overlap"] = True`); a payload copies
    source = ('def _mamba_overrides(view):\n    declared = {}\n    declared["disable_overlap"] = True\n'
              '    info = {}\n    info["tp_size"] = view.tp_size\n    return declared\n')
    defaults = load_ruleset().defaults
    assert defaults is not None
    assert start_up_resolutions(ast.parse(source), defaults, settings_module=True)[0] == ("disable_overlap=True",)
    # elsewhere (a request's or a report's table: `state["mode"] = mode.value`) it decides nothing
    assert start_up_resolutions(ast.parse(source), defaults)[0] == ()


def test_an_option_start_up_sets_only_to_its_default_is_still_judged_by_it() -> None:
    # `declare_resolution(config, ..., enable_balancer=False)`: the default still runs; set to
    # True somewhere, the default is not what runs and decides nothing
    line = _line('"rebalanced')
    problem = f"toyserve/defaults.py:{line}: unexpected default-on-emitter"
    for value, reported in (("False", False), ("True", True)):
        source = FIXTURE.read_text() + f'\n\ndef _resolve(config):\n    declare_resolution(config, "x", enable_balancer={value})\n'
        assert (problem in " ".join(check_annotations({"toyserve/defaults.py": source}))) is reported, value


def _index(source: str):
    return index_module.index_module(ast.parse(source), source, "pkg/start.py", load_ruleset())


def test_literals_stored_into_a_table_for_an_override_are_the_values_start_up_may_set() -> None:
    found = {entry: gates for line, entry, gates in _index(FIXTURE.read_text()).table_resolutions}
    assert set(found) == {"retraction_backup='host_pool'", "retraction_backup='cpu_tensor'"}
    # each literal under the test of the conditional expression that picks it
    assert [g.args for g in found["retraction_backup='host_pool'"] if "serving_role" in g.ref] == [("operand", "cmp:==:'decode'")]
    assert [g.args for g in found["retraction_backup='cpu_tensor'"] if "serving_role" in g.ref] == [("operand", "cmp:!=:'decode'")]
    # a key stored anything but literals (or the option handed on) gives none; nor does a table no override takes
    source = ('def resolve(cfg):\n    fields = {"mode": "a"}\n    fields["size"] = compute()\n    fields["size"] = 2\n'
              '    fields["kept"] = cfg.kept\n    other = {}\n    other["role"] = "b"\n    apply_overrides(**fields)\n')
    assert sorted(entry for _, entry, _ in _index(source).table_resolutions) == ["mode='a'", "size"]
    # a chain of conditional expressions deeper than it follows is a value not known, not a crash
    chain = " else ".join(f"{i} if cfg.n == {i}" for i in range(1200)) + " else 0"
    deep = f"def resolve(cfg):\n    fields = {{}}\n    fields['size'] = {chain}\n    apply_overrides(**fields)\n"
    assert [entry for _, entry, _ in _index(deep).table_resolutions] == ["size"]


def test_without_table_resolutions_a_comparison_with_an_unset_option_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module._Indexer, "table_resolutions", lambda self: ())
    _only_newly_reported('"host pool backup', '"cpu tensor backup')


def test_a_start_up_literal_off_by_default_leaves_the_option_unset_or_its_other_values(tmp_path: Path) -> None:
    report = _scan(write_tree(tmp_path / "t", _fixture()))
    used = {u["switch"]: u for u in report["deployment"]["defaults_used"]}
    assert used["retraction_backup=='host_pool'"]["value"] == "None, or 'cpu_tensor' at start-up"
    # a declared default start-up may replace: judged on each value, and named with them; a
    # field computed by a function the settings name is judged by what that function returns
    assert used["cache_strategy=='lazy'"]["value"] == "'auto', or 'extra' at start-up"


ARCHITECTURE_OVERRIDES = (
    '"""An architecture\'s own start-up overrides."""\n\n\n'
    'def big_overrides(cfg):\n    overrides = {}\n    overrides["cache_strategy"] = "lazy"\n    return overrides\n'
)


BIG_MODEL = "class BigModelForCausalLM:\n    def forward(self, x):\n        return x\n"


def test_an_architectures_start_up_overrides_apply_only_where_it_is_served(tmp_path: Path) -> None:
    files = {**_fixture(), "toyserve/config/model_overrides/bigmodel.py": ARCHITECTURE_OVERRIDES,
             "toyserve/models/bigmodel.py": BIG_MODEL}
    assert check_annotations(files) == []
    # a module of no architecture's name (no model class is defined under it) is shared code
    shared = {**_fixture(), "toyserve/config/model_overrides/bigmodel.py": ARCHITECTURE_OVERRIDES}
    line = _line('"lazy extra')
    assert f"toyserve/defaults.py:{line}: unexpected default-on-emitter" in " ".join(check_annotations(shared))
    files["pyproject.toml"] = '[tool.cs-audit]\ndeployment = {models = ["bigmodel"]}\n'
    assert _line('"lazy extra') in _emitter_lines(_scan(write_tree(tmp_path / "served", files)))


def test_a_test_of_the_served_architecture_holds_only_where_one_it_names_is_served(tmp_path: Path) -> None:
    files = {**_fixture(), "toyserve/models/bigmodel.py": BIG_MODEL}
    assert check_annotations(files) == []
    files["pyproject.toml"] = '[tool.cs-audit]\ndeployment = {models = ["bigmodel"]}\n'
    lines = _emitter_lines(_scan(write_tree(tmp_path / "served", files)))
    assert _line('"hybrid architecture') in lines and _line('"plain architecture') in lines
    # a class the tree does not define may be what the stated deployment serves
    assert _line('"hybrid h1') in lines


def test_without_architecture_tests_the_code_of_named_architectures_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extract_gates_module.GateReader, "_architecture_test", lambda self, expr: None)
    unexpected = _unexpected_lines(check_annotations(_fixture()))
    assert {_line('"hybrid architecture'), _line('"hybrid h1')} <= unexpected


def test_without_the_modules_a_deployment_serves_an_architectures_overrides_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Defaults, "serves_module", lambda self, path: True)
    problems = " ".join(check_annotations({**_fixture(), "toyserve/config/model_overrides/bigmodel.py": ARCHITECTURE_OVERRIDES,
                                           "toyserve/models/bigmodel.py": BIG_MODEL}))
    line = _line('"lazy extra')
    assert f"toyserve/defaults.py:{line}: unexpected default-on-emitter" in problems


def test_without_computed_options_a_field_a_named_function_computes_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "_computed_option", lambda *a: NOT_OPTION)
    _only_newly_reported('"lazy extra', '"extra buffer')


def test_own_state_is_an_attribute_not_copied_from_another_objects_same_name() -> None:
    source = ('class A:\n    def __init__(self, cfg, output):\n        self.enable_x = cfg.enable_x\n'
              '        self.output = output\n        self.mode = get_cfg().mode\n        self.size = cfg.other\n'
              '        self.rank, self.world = split(cfg)\n')
    assert _index(source).own_state == ("A.output", "A.rank", "A.size", "A.world")


def test_a_named_modulus_is_an_option_read_on_an_object_and_requests_served_are_no_control_requests() -> None:
    from cs_audit.extract.options import declared_options
    from cs_audit.joins.defaults import OptionTable, option_number

    defaults = load_ruleset().defaults
    assert defaults is not None
    source = "from dataclasses import dataclass\n\n\n@dataclass\nclass ServeConfig:\n    log_interval: int = 40\n"
    table = OptionTable.of(declared_options(ast.parse(source), source, "engine/config.py", defaults))
    assert option_number(table, defaults, "self.log_interval") == 40
    assert option_number(table, defaults, "log_interval") is None  # a local or a parameter of that name
    pattern = defaults.request_classes
    assert pattern is not None
    assert [name for name in ("ConfigureLoggingReq", "SlowDownReqInput", "GenerateReqInput", "ChatCompletionRequest",
                              "EmbeddingReqInput", "Req") if pattern.fullmatch(name)] == ["ConfigureLoggingReq", "SlowDownReqInput"]


def test_without_typed_receivers_a_context_handed_an_ambiguous_option_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "held_by_no_own_state", lambda *a: False)
    # the step's own state of that name is reported either way
    _only_newly_reported('"context output', '"result %d')


def test_without_request_fields_what_a_control_request_sets_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.gates as extract_gates

    monkeypatch.setattr(extract_gates.GateReader, "_request_field", lambda self, scope, value: None)
    # the served request's own handler sets state by default either way
    _only_newly_reported('"dumping to', '"priority %d')
    _only_newly_reported('"sleeping', '"priority %d')
    _only_newly_reported('"flushing', '"priority %d')


def test_what_a_file_holds_for_gates_is_in_its_gates_digest() -> None:
    from cs_audit.extract.python import extract_python

    def digest(source: str) -> str:
        ff = extract_python("engine/policy.py", source.encode(), load_ruleset())
        assert not hasattr(ff, "kind"), ff
        return gates_module._file_gates_digest(ff)  # type: ignore[arg-type]

    # the `return`s a call of a function is judged by, and the state a class keeps under a name
    base = "def needs(cfg, n):\n    if cfg.enable_x:\n        return True\n    return False\n"
    assert digest(base) != digest(base.replace("return False", "return n > 1"))
    state = "class Policy:\n    def __init__(self, cfg, output):\n        self.output = {}\n"
    assert digest(state.format("cfg.output")) != digest(state.format("output"))
    # a record's field declared None, stored on another object, passed as a keyword
    record = "class Stats:\n    details: dict | None = None\n"
    assert digest(record) != digest(record.replace("None = None", "dict = {}"))
    store = "def attach(stats, details):\n    stats.details = details\n"
    assert digest(store) != digest(store.replace("stats.details", "stats.summary"))
    assert digest("def build(d):\n    return Stats(d)\n") != digest("def build(d):\n    return Stats(details=d)\n")


def test_without_the_returns_of_a_function_a_call_of_one_false_by_default_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "_false_by_default", lambda *a: None)
    _only_newly_reported('"gathering', '"syncing')


def test_without_membership_tests_a_predicate_true_for_other_values_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.gates as extract_gates

    monkeypatch.setattr(extract_gates, "_constants", lambda *a: None)
    _only_newly_reported('"report line', '"no report line')


def test_without_the_yields_of_a_context_manager_what_its_with_binds_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "_CONTEXT_MANAGERS", frozenset())
    problems = " ".join(check_annotations(_fixture()))
    for text in ('"captured', '"attached'):
        assert f"toyserve/defaults.py:{_line(text)}: unexpected default-on-emitter" in problems, text
    timed = _line('"timed')
    assert f"toyserve/defaults.py:{timed}:" not in problems


def test_without_bound_names_handed_on_a_parameter_given_one_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.calls as calls_module

    real = calls_module.passed_value
    monkeypatch.setattr(calls_module, "passed_value", lambda node, params, bound=frozenset(), assigned=None, stored=frozenset(): real(node, params))
    _only_newly_reported('"attached', '"captured')


def test_without_record_fields_a_field_only_code_kept_off_sets_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "field_switch", lambda *a: None)
    _only_newly_reported('"details of the step', '"timings of the step')


def test_without_optional_classes_a_field_holding_a_class_built_under_an_option_is_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "_optional_class", lambda annotation: "")
    _only_newly_reported('"recording %s', '"fallback %s')
    _only_newly_reported('"recording report', '"fallback %s')


def test_without_callers_up_a_field_set_two_calls_below_an_off_option_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.joins.fields as fields_module

    monkeypatch.setattr(fields_module, "MAX_CALLERS_UP", 1)
    _only_newly_reported('"profile %s', '"details of the step')


def test_without_setters_a_flag_only_gated_code_sets_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "_setter_switch", lambda *a: None)
    _only_newly_reported('"merging %d', '"counting %d')


def test_a_held_field_another_class_keeps_as_its_own_state_may_hold_by_default() -> None:
    # a namesake some class builds for itself every time: the name no longer says what it holds
    source = FIXTURE.read_text() + "\n\nclass Tape:\n    pass\n\n\nclass Deck:\n    def __init__(self):\n        self.recording = Tape()\n"
    _reported_in(source, '"recording %s')


def test_an_isinstance_of_a_class_the_tree_does_not_define_is_no_test_of_its_constructions() -> None:
    # a library's class is built by the library's calls, which the tree's constructions do not show
    source = FIXTURE.read_text().replace("class SpillAction:\n    pass\n", "from toylib import SpillAction\n")
    _reported_in(source, '"spill %s', -1)  # one line less above it


@pytest.mark.parametrize("change", [
    # a subclass named through a subscripted base: the family the constructions are counted in misses it
    ("class KeepAction:\n    pass\n", "class KeepAction(SpillAction[int]):\n    pass\n"),
    # a protocol matches by shape, not by base
    ("class SpillAction:\n    pass\n", "class SpillAction(Protocol):\n    pass\n"),
    # `cls()` in a classmethod builds the class, here on every step
    ("class SpillAction:\n    pass\n",
     "class SpillAction:\n    @classmethod\n    def make(cls):\n        return cls()\n\n\ndef plan_one():\n"
     "    return SpillAction.make()\n"),
])
def test_an_isinstance_of_a_class_built_some_way_the_constructions_do_not_show_is_no_test(change) -> None:
    old, new = change
    source = FIXTURE.read_text().replace(old, new).replace("from typing import Optional\n", "from typing import Optional, Protocol\n")
    if "plan_one" in new:
        source = source.replace("        self.log_stats(stats)\n", "        self.log_stats(stats)\n        self._apply_action(plan_one())\n", 1)
    _reported_in(source, '"spill %s', new.count("\n") - old.count("\n"))


def test_without_regating_a_call_under_a_held_field_test_keeps_its_early_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    # the edge's switch is worked out before classes are gated
    monkeypatch.setattr(callgraph_module, "regate_class_tests", lambda *a: None)
    _only_newly_reported('"recording report', '"fallback %s')
    _only_newly_reported('"spill report', '"keep %s')


def test_without_instance_tests_an_isinstance_of_a_class_built_under_an_option_is_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "instance_switch", lambda *a: None)
    _only_newly_reported('"spill %s', '"keep %s')
    _only_newly_reported('"spill report', '"keep %s')


def test_a_field_a_call_passes_as_a_keyword_may_be_set_by_default() -> None:
    source = FIXTURE.read_text() + "\n\ndef rebuild(d):\n    return StepStats(details=d)\n"
    _reported_in(source, '"details of the step')


def test_without_keywords_named_a_field_a_constructor_sets_from_a_name_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.joins.fields as fields_module

    real = fields_module._field_table

    def unnamed(model, rs):
        declared, stores, passed, named, sites, kept_elsewhere, optional, answers = real(model, rs)
        return declared, stores, passed | frozenset(named), {}, sites, kept_elsewhere, optional, answers

    monkeypatch.setattr(fields_module, "_field_table", unnamed)
    _only_newly_reported('"hooks', '"timings of the step')


def test_without_sets_made_while_it_holds_a_merge_is_a_way_for_a_field_to_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.joins.fields as fields_module

    monkeypatch.setattr(fields_module, "_set_once_set", lambda *a: False)
    _only_newly_reported('"hooks', '"timings of the step')


def test_without_locals_of_two_values_a_parameter_given_one_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.calls as calls_module

    real = calls_module.passed_value
    monkeypatch.setattr(calls_module, "passed_value", lambda node, params, bound=frozenset(), assigned=None, stored=frozenset(): real(node, params, bound))
    _only_newly_reported('"gemm', '"scan')


def test_without_feature_members_a_comparison_with_a_verify_mode_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "feature_member_gate", lambda *a: NOT_OPTION)
    _only_newly_reported('"verify replay', '"plain replay')


def test_without_copies_an_option_handed_on_from_arguments_is_worked_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_module, "worked_out_stores", options_module.foreign_stores)
    _only_newly_reported('"gemm', '"scan')


def test_without_table_lookups_a_table_no_caller_passes_a_key_of_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "_table_get_gate", lambda *a: NOT_OPTION)
    _only_newly_reported('"gemm', '"scan')


def test_without_named_moduli_a_report_every_nth_step_is_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.joins.runs as runs_module

    monkeypatch.setattr(runs_module, "_periodic_block", lambda *a: None)
    problems = " ".join(check_annotations(_fixture()))
    report, flush = _line('"report at step'), _line('"draining rows')
    assert f"toyserve/defaults.py:{report}:" in problems
    assert f"toyserve/defaults.py:{flush}:" not in problems


def test_command_line_arguments() -> None:
    source = '''
p.add_argument("--log-every-request", action="store_true")
p.add_argument("--max-batch", type=int, default=8)
p.add_argument("--backend")
p.add_argument("--copied", **kwargs)
p.add_argument("--from-field", default=ServerArgs.from_field)
p.add_argument("-v", dest="verbose_level", action="count")
'''
    assert _declared(source) == {"log_every_request": "False", "max_batch": "8", "backend": "None", "verbose_level": "None"}
    # a test module's arguments, in a test folder or not, are no options of the engine
    defaults = load_ruleset().defaults
    for path in ("pkg/tests/run.py", "third_party/kernels/test_attention.py", "pkg/kernel_test.py"):
        assert declared_options(ast.parse(source), source, path, defaults) == (), path
    assert declared_options(ast.parse(source), source, "pkg/latest.py", defaults)


def test_stores_on_another_object_are_found() -> None:
    assert foreign_stores("cfg.async_mode = False\nself.own = 1\nx.a.b += 2\nif y.c == 3: pass\n") == ("async_mode", "b")


PLATFORM_TREE = {
    "engine/models/amd/attention.py": (
        "import logging\nfrom engine.kernels import prefill\nlogger = logging.getLogger(__name__)\n\n\n"
        "class RocmAttention:\n    def forward(self, x):\n        logger.info('rocm layer %d', x)\n        return prefill(x)\n"),
    "engine/models/attention.py": (
        "import logging\nlogger = logging.getLogger(__name__)\n\n\n"
        "class Attention:\n    def forward(self, x):\n        logger.info('layer %d', x)\n        return x\n"),
    "engine/kernels.py": (
        "import logging\nlogger = logging.getLogger(__name__)\n\n\n"
        "def prefill(x):\n    logger.info('prefill %d', x)\n    return x\n"),
}


def test_a_module_written_for_another_platform_runs_nothing(tmp_path: Path) -> None:
    report = _scan(write_tree(tmp_path / "cuda", PLATFORM_TREE))
    on = {(f["path"], f["line"]) for f in report["findings"] if f["rule"] == "default-on-emitter" and f.get("switch") is None}
    assert on == {("engine/models/attention.py", 7)}  # neither the AMD layer nor what only it calls
    used = {u["switch"]: u["sites"] for u in report["deployment"]["defaults_used"]}
    # the CUDA layer's own line runs in Python only at capture and on prefill (a graph replays it)
    assert used == {"platform=rocm": 2, "feature=eager": 1}
    rocm = dict(PLATFORM_TREE, **{"pyproject.toml": '[tool.cs-audit]\ndeployment = {platform = "rocm"}\n'})
    report = _scan(write_tree(tmp_path / "rocm", rocm))
    on = {(f["path"], f["line"]) for f in report["findings"] if f["rule"] == "default-on-emitter" and f.get("switch") is None}
    assert on == {("engine/models/attention.py", 7), ("engine/models/amd/attention.py", 8), ("engine/kernels.py", 6)}


FEATURE_TREE = {
    "engine/runner.py": (
        "import logging\nfrom engine.lora.utils import active_adapters\nfrom engine.spec_decode.proposer import Proposer, SpecAlgo\n"
        "logger = logging.getLogger(__name__)\n\n\nclass ModelRunner:\n"
        "    def __init__(self):\n        self.proposer = Proposer()\n        self.algo = SpecAlgo(0)\n\n"
        "    def execute_model(self, x):\n        logger.info('step %d', x)\n        active_adapters(x)\n"
        "        self.algo.is_none()\n        return self.proposer.run_draft(x)\n"),
    "engine/lora/utils.py": (
        "import logging\nlogger = logging.getLogger(__name__)\n\n\n"
        "def active_adapters(x):\n    logger.info('adapters %d', x)\n    return x\n"),
    "engine/lora/layers.py": (
        "import logging\nlogger = logging.getLogger(__name__)\n\n\n"
        "class LinearLoRALayer:\n    def forward(self, x):\n        logger.info('lora layer %d', x)\n        return x\n"),
    "engine/spec_decode/proposer.py": (
        "import enum\nimport logging\nlogger = logging.getLogger(__name__)\n\n\n"
        "class SpecAlgo(enum.Enum):\n    NONE = 0\n\n    def is_none(self):\n        logger.info('algo %s', self)\n"
        "        return self is SpecAlgo.NONE\n\n\n"
        "class Proposer:\n    def run_draft(self, x):\n        logger.info('draft %d', x)\n        return self.score(x)\n\n"
        "    def score(self, x):\n        logger.info('score %d', x)\n        return x\n"),
}
#: (path, line) of each emitter in FEATURE_TREE
_STEP, _ADAPTERS, _ALGO = ("engine/runner.py", 13), ("engine/lora/utils.py", 6), ("engine/spec_decode/proposer.py", 10)
_LORA_LAYER, _DRAFT, _SCORE = ("engine/lora/layers.py", 7), ("engine/spec_decode/proposer.py", 16), ("engine/spec_decode/proposer.py", 20)


def _default_on(report: dict) -> set[tuple[str, int]]:
    return {(f["path"], f["line"]) for f in report["findings"] if f["rule"] == "default-on-emitter" and f.get("switch") is None}


def test_a_class_of_an_optional_features_package_runs_only_with_the_feature(tmp_path: Path) -> None:
    report = _scan(write_tree(tmp_path / "plain", FEATURE_TREE))
    # the package's helper and enum stay open: default code calls and tests them
    assert _default_on(report) == {_STEP, _ADAPTERS, _ALGO}
    used = {u["switch"]: (u["value"], u["sites"]) for u in report["deployment"]["defaults_used"]}
    assert used["feature=speculative_decoding"] == ("off", 2) and used["feature=lora"] == ("off", 1)
    out = tmp_path / "audit.md"
    runner.invoke(app, ["scan", str(tmp_path / "plain"), "-o", str(out), "--no-cache", "--no-history", "-j", "1"])
    # the assumptions say where a feature's off-ness comes from: the rules, not a declaration
    assert "| `feature=speculative_decoding` | `off` | the rules' `feature_*` tables | 2 |" in out.read_text()
    on = dict(FEATURE_TREE, **{"pyproject.toml": '[tool.cs-audit]\ndeployment = {features = ["lora", "speculative_decoding"]}\n'})
    report = _scan(write_tree(tmp_path / "on", on))
    assert _default_on(report) == {_STEP, _ADAPTERS, _ALGO, _LORA_LAYER, _DRAFT, _SCORE}
    assert report["deployment"]["features"] == ["lora", "speculative_decoding"]


def test_without_feature_classes_a_component_of_an_off_feature_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(callgraph_module, "_gate_feature_classes", lambda model, rs: None)
    assert {_DRAFT, _SCORE} <= _default_on(_scan(write_tree(tmp_path / "t", FEATURE_TREE)))


def test_without_feature_roots_a_hot_root_of_an_off_feature_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.joins.reach as reach_module

    monkeypatch.setattr(reach_module, "feature_switch", lambda defaults, path, class_name=None: None)
    assert _LORA_LAYER in _default_on(_scan(write_tree(tmp_path / "t", FEATURE_TREE)))


MULTIMODAL_TREE = {
    "engine/runner.py": (
        "import logging\nfrom engine.vision import VisionEncoder\nlogger = logging.getLogger(__name__)\n\n\n"
        "class ModelRunner:\n    def __init__(self):\n        self.encoder = VisionEncoder()\n\n"
        "    def execute_model(self, batch):\n        if batch.contains_mm_inputs():\n"
        "            logger.info('mm batch %d', len(batch))\n            self.encoder.encode(batch)\n"
        "        if not batch.pixel_values:\n            logger.info('text batch %d', len(batch))\n        return batch\n"),
    "engine/vision.py": (
        "import logging\nlogger = logging.getLogger(__name__)\n\n\n"
        "class VisionEncoder:\n    def encode(self, batch):\n        logger.info('encode %d', len(batch))\n        return batch\n\n\n"
        "class VisionAttention:\n    def forward(self, x):\n        logger.info('vit layer %d', x)\n        return x\n"),
}
_MM_BATCH, _TEXT_BATCH = ("engine/runner.py", 12), ("engine/runner.py", 15)
_ENCODE, _VIT_LAYER = ("engine/vision.py", 7), ("engine/vision.py", 13)


def test_multimodal_inputs_and_encoders_run_only_when_the_deployment_serves_them(tmp_path: Path) -> None:
    report = _scan(write_tree(tmp_path / "text", MULTIMODAL_TREE))
    assert _default_on(report) == {_TEXT_BATCH}  # the text path runs: only the inputs' test is the feature's
    used = {u["switch"]: u["sites"] for u in report["deployment"]["defaults_used"]}
    assert used == {"feature=multimodal": 3}
    on = dict(MULTIMODAL_TREE, **{"pyproject.toml": '[tool.cs-audit]\ndeployment = {features = ["multimodal"]}\n'})
    assert _default_on(_scan(write_tree(tmp_path / "mm", on))) == {_MM_BATCH, _TEXT_BATCH, _ENCODE, _VIT_LAYER}


@pytest.mark.parametrize(("feature", "texts"), [
    # a plain full-attention model builds no sliding-window pool and fails `is_hybrid_swa`
    ("sliding_window", ('"evicting window', '"freeing window slots')),
    # default requests sample at temperature 1: `is_all_greedy` is false
    ("sampling_options", ('"greedy step',)),
    # no control request reconfigures the engine: what only its handler sets keeps its initial value
    ("control_requests", ('"dumping to', '"sleeping', '"flushing')),
])
def test_what_a_default_deployment_does_not_serve_runs_when_it_is_stated(tmp_path: Path, feature: str, texts: tuple[str, ...]) -> None:
    lines = {_line(text) for text in texts}
    assert not lines & _emitter_lines(_scan(write_tree(tmp_path / "plain", _fixture())))
    files = dict(_fixture(), **{"pyproject.toml": f'[tool.cs-audit]\ndeployment = {{features = ["{feature}"]}}\n'})
    assert lines <= _emitter_lines(_scan(write_tree(tmp_path / "on", files)))


def test_without_feature_tests_a_multimodal_branch_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.joins.defaults as defaults_module

    monkeypatch.setattr(defaults_module, "_feature_gate", lambda feature, active, defaults: None)
    assert _MM_BATCH in _default_on(_scan(write_tree(tmp_path / "t", MULTIMODAL_TREE)))


FEATURE_TESTS_TREE = {
    "engine/config.py": "from dataclasses import dataclass\n\n\n@dataclass\nclass ServerArgs:\n    enable_dp_attention: bool = False\n",
    "engine/runner.py": (
        "import logging\nlogger = logging.getLogger(__name__)\n\n\nclass ModelRunner:\n"
        "    def execute_model(self, batch, args):\n"
        "        if not batch.spec_algorithm.is_none():\n            logger.info('draft round %d', len(batch))\n"
        "        if batch.spec_algorithm.is_none():\n            logger.info('plain step %d', len(batch))\n"
        "        if batch.forward_mode.is_target_verify():\n            logger.info('verify %d', len(batch))\n"
        "        if not self.is_generation:\n            logger.info('pooled %d', len(batch))\n"
        "        if args.enable_dp_attention:\n            logger.info('dp gather %d', len(batch))\n"
        "        return batch\n"),
}
_DRAFT_ROUND, _PLAIN_STEP, _VERIFY, _POOLED, _DP_GATHER = (("engine/runner.py", n) for n in (8, 10, 12, 14, 16))


def test_a_test_named_for_a_feature_holds_with_it_or_without_it(tmp_path: Path) -> None:
    report = _scan(write_tree(tmp_path / "plain", FEATURE_TESTS_TREE))
    assert _default_on(report) == {_PLAIN_STEP}
    used = {u["switch"]: u["sites"] for u in report["deployment"]["defaults_used"]}
    # a declared option is decided by its value, not by the feature its name has
    assert used == {"feature=speculative_decoding": 2, "feature=embedding": 1, "enable_dp_attention": 1}
    stated = dict(FEATURE_TESTS_TREE, **{"pyproject.toml": (
        '[tool.cs-audit]\ndeployment = {features = ["speculative_decoding"], options = {enable_dp_attention = true}}\n')})
    assert _default_on(_scan(write_tree(tmp_path / "spec", stated))) == {_DRAFT_ROUND, _PLAIN_STEP, _VERIFY, _DP_GATHER}


def test_a_name_of_a_hybrid_models_own_state_holds_only_with_its_layers() -> None:
    defaults = load_ruleset().defaults
    assert defaults is not None
    assert defaults.feature_test("result.mamba_backup_id") == ("hybrid_ssm", True)
    assert defaults.feature_test("self.swa_host_pool") == ("sliding_window", True)
    # a word that only contains one (`swap`, `mambas`) is no such name
    assert defaults.feature_test("result.swap_slots") is None and defaults.feature_test("mambas") is None


def test_without_off_tests_a_test_true_without_a_feature_gates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from cs_audit import ruleset as ruleset_module

    shipped = ruleset_module.load_ruleset()
    no_off = replace(shipped, defaults=replace(shipped.defaults, feature_off_tests=()))
    monkeypatch.setattr(ruleset_module, "load_ruleset", lambda *a, **k: no_off)
    monkeypatch.setattr("cs_audit.api.load_ruleset", lambda *a, **k: no_off)
    assert {_DRAFT_ROUND, _POOLED} <= _default_on(_scan(write_tree(tmp_path / "t", FEATURE_TESTS_TREE)))


PREDICATE_TREE = {"engine/runner.py": (
    "import logging\nimport os\nlogger = logging.getLogger(__name__)\n_STATE = {}\n\n\n"
    "def borrow_enabled():\n    state = _STATE\n    if state.get('off') or not os.environ.get('X_BORROW'):\n        return False\n"
    "    if state.get('runs') is not None:\n        return len(state['runs']) > 0\n    return True\n\n\n"
    "def checked():\n    if os.environ.get('X_STRICT'):\n        return True\n    return False\n\n\n"
    "class ModelRunner:\n    def execute_model(self, x):\n"
    "        if borrow_enabled():\n            logger.info('borrowed %d', x)\n"
    "        if checked():\n            logger.info('checked %d', x)\n        return x\n")}


def test_a_predicate_that_returns_false_first_unless_a_switch_is_set_gates_by_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _scan(write_tree(tmp_path / "a", PREDICATE_TREE))
    # `checked()` is true only with X_STRICT too, by a `return True` its returns say is not taken by default
    assert _default_on(report) == set()
    monkeypatch.setattr(gates_module, "_false_by_default", lambda *a: None)
    assert _default_on(_scan(write_tree(tmp_path / "b", PREDICATE_TREE))) == {("engine/runner.py", 27)}
    monkeypatch.setattr(index_module, "_leading_false_exits", lambda body, entries: [])
    assert ("engine/runner.py", 25) in _default_on(_scan(write_tree(tmp_path / "c", PREDICATE_TREE)))


def _model(name: str, lines: int) -> str:
    body = "".join(f"        logger.info('{name} {i} %d', x)\n" for i in range(lines))
    return (f"import logging\nlogger = logging.getLogger(__name__)\n\n\nclass {name.title()}ForCausalLM:\n"
            f"    def forward(self, x):\n{body}        return x\n")


def test_an_architecture_whose_own_code_costs_nothing_is_not_split_out() -> None:
    from types import SimpleNamespace

    from cs_audit.render.markdown import side_total

    def statement(path: str, cost: float) -> SimpleNamespace:  # what side_total reads of a Statement
        return SimpleNamespace(first=SimpleNamespace(path=path), cost_us=cost)

    rows = [statement("engine/runner.py", 16.0), statement("engine/models/llama.py", 32.0),
            statement("engine/models/gemma.py", 0.0), statement("engine/models/gemma.py", 0.0)]
    split = side_total(rows, load_ruleset())  # type: ignore[arg-type]
    # a cached env read in gemma's own module costs nothing: no architecture of its own
    assert split.models == (("llama", 32.0, 1),) and split.counted == ("llama",) and split.total == 48.0


MODELS_TREE = {
    "engine/models/llama.py": _model("llama", 1),
    "engine/models/mixtral/model.py": _model("mixtral", 3),
    "engine/runner.py": ("import logging\nlogger = logging.getLogger(__name__)\n\n\nclass ModelRunner:\n"
                         "    def execute_model(self, x):\n        logger.info('step %d', x)\n        return x\n"),
}


def _section_1(root: Path, tmp_path: Path, fmt: str = "markdown") -> str:
    out = tmp_path / f"audit.{'md' if fmt == 'markdown' else 'html'}"
    result = runner.invoke(app, ["scan", str(root), "-f", fmt, "-o", str(out), "--no-cache", "--no-history", "-j", "1"])
    assert result.exit_code == 0, result.output
    return out.read_text()


def test_the_bottom_line_counts_one_model_architecture_never_every_model(tmp_path: Path) -> None:
    # an eager deployment: with graphs replayed, no model's forward runs its Python per step
    eager = dict(MODELS_TREE, **{"pyproject.toml": '[tool.cs-audit]\ndeployment = {features = ["eager"]}\n'})
    text = _section_1(write_tree(tmp_path / "t", eager), tmp_path)
    line = next(x for x in text.splitlines() if x.startswith("**Bottom line"))
    step = 16.47  # one log line per step (rules/costs.yaml), as the other tests here read it off the report
    per_line = float(line.split("≈ ")[2].split(" µs")[0])  # the code any model may run: the runner's line
    assert "5 default-ON statements" in line and "the costliest architecture (`mixtral`)" in line
    assert "`mixtral` ≈" in line and "`llama` ≈" in line and "never added up" in line
    total = float(line.split("≈ ")[1].split(" µs")[0].replace(",", ""))
    assert total == pytest.approx(per_line * 4, abs=1.0) and per_line == pytest.approx(step, abs=1.0)
    html = _section_1(write_tree(tmp_path / "h", eager), tmp_path, "html")
    assert "costliest side" in html and "plus mixtral" in html
    stated = dict(MODELS_TREE, **{"pyproject.toml": '[tool.cs-audit]\ndeployment = {models = ["llama"], features = ["eager"]}\n'})
    text = _section_1(write_tree(tmp_path / "s", stated), tmp_path)
    line = next(x for x in text.splitlines() if x.startswith("**Bottom line"))
    assert "the architectures the deployment serves (`llama`)" in line
    assert float(line.split("≈ ")[1].split(" µs")[0]) == pytest.approx(per_line * 2, abs=1.0)


SERVED_TREE = {
    "engine/models/utils.py": ("import logging\nlogger = logging.getLogger(__name__)\n\n\n"
                               "def shared_norm(x):\n    logger.info('norm %d', x)\n    return x\n"),
    "engine/models/llama.py": _model("llama", 1).replace("import logging\n", "import logging\nfrom engine.models.utils import shared_norm\n")
                                                .replace("        return x\n", "        return shared_norm(x)\n"),
    # mistral builds on llama: serving it loads llama's module
    "engine/models/mistral.py": _model("mistral", 1).replace("import logging\n", "import logging\nfrom engine.models.llama import LlamaForCausalLM\n"),
    "engine/models/gemma.py": _model("gemma", 2),
    "engine/runner.py": MODELS_TREE["engine/runner.py"],
}


def _switches(tree: dict[str, str], tmp_path: Path) -> dict[str, set]:
    out: dict[str, set] = {}
    for f in _scan(write_tree(tmp_path, tree))["findings"]:
        if f["rule"] == "default-on-emitter":
            out.setdefault(f["path"].rsplit("/", 1)[-1], set()).add(f.get("switch"))
    return out


def test_a_stated_deployment_runs_no_architecture_it_does_not_load(tmp_path: Path) -> None:
    stated = dict(SERVED_TREE, **{"pyproject.toml": '[tool.cs-audit]\ndeployment = {models = ["mistral"], features = ["eager"]}\n'})
    switches = _switches(stated, tmp_path / "s")
    # gemma's forward is no hot root of this deployment: its lines are not default-on
    assert "gemma.py" not in switches
    # the served architecture, the one it builds on, and the helpers among the models they import
    assert switches["mistral.py"] == switches["llama.py"] == switches["utils.py"] == switches["runner.py"] == {None}
    unstated = dict(SERVED_TREE, **{"pyproject.toml": '[tool.cs-audit]\ndeployment = {features = ["eager"]}\n'})
    assert _switches(unstated, tmp_path / "u")["gemma.py"] == {None}


def test_an_architecture_only_shared_code_imports_runs_its_helpers_not_its_forward(tmp_path: Path) -> None:
    # a shared module (a pipeline, a data helper) imports gemma and calls a helper of it from
    # the runner's step: the helper runs, gemma's forward is no root of a mistral deployment
    tree = dict(SERVED_TREE, **{
        "engine/models/gemma.py": SERVED_TREE["engine/models/gemma.py"] + "\n\ndef gemma_scale(x):\n    logger.info('scale %d', x)\n    return x\n",
        "engine/pipelines/tagging.py": "from engine.models.gemma import gemma_scale\n\n\ndef tag(x):\n    return gemma_scale(x)\n",
        "engine/runner.py": MODELS_TREE["engine/runner.py"].replace("import logging\n", "import logging\nfrom engine.pipelines.tagging import tag\n")
                                                           .replace("        return x\n", "        return tag(x)\n"),
        "pyproject.toml": '[tool.cs-audit]\ndeployment = {models = ["mistral"], features = ["eager"]}\n'})
    findings = [f for f in _scan(write_tree(tmp_path / "s", tree))["findings"]
                if f["rule"] == "default-on-emitter" and f["path"].endswith("gemma.py")]
    assert {(f["function"], f.get("switch")) for f in findings} == {("gemma_scale", None)}
    # a layer class of it, whose forward is a root of a served model, runs as a helper does
    tree["engine/models/gemma.py"] += "\n\nclass GemmaMLP:\n    def forward(self, x):\n        logger.info('mlp %d', x)\n        return x\n"
    tree["engine/pipelines/tagging.py"] = ("from engine.models.gemma import GemmaMLP, gemma_scale\n\n\n"
                                           "def tag(x):\n    return GemmaMLP().forward(gemma_scale(x))\n")
    findings = [f for f in _scan(write_tree(tmp_path / "m", tree))["findings"]
                if f["rule"] == "default-on-emitter" and f["path"].endswith("gemma.py")]
    assert {(f["function"], f.get("switch")) for f in findings} == {("gemma_scale", None), ("GemmaMLP.forward", None)}


def test_without_the_imports_every_unserved_architecture_is_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.joins.served as served

    monkeypatch.setattr(served, "module_files", lambda resolver, origin: [])
    stated = dict(SERVED_TREE, **{"pyproject.toml": '[tool.cs-audit]\ndeployment = {models = ["mistral"], features = ["eager"]}\n'})
    switches = _switches(stated, tmp_path / "s")
    assert "llama.py" not in switches and switches["mistral.py"] == {None}


REGISTRY_TREE = {
    "engine/envs.py": (
        "import os\n\nenvironment_variables = {\n"
        "    'TOY_STEP_LOG': lambda: bool(int(os.getenv('TOY_STEP_LOG', '1'))),\n"
        "    'TOY_TRACE': lambda: os.getenv('TOY_TRACE', '0') == '1',\n"
        "}\n\n\ndef __getattr__(name):\n    return environment_variables[name]()\n"),
    "engine/runner.py": (
        "import logging\nfrom engine import envs\nlogger = logging.getLogger(__name__)\n\n\nclass ModelRunner:\n"
        "    def execute_model(self, x):\n"
        "        if envs.TOY_STEP_LOG:\n            logger.info('on by default %d', x)\n"
        "        if envs.TOY_TRACE:\n            logger.info('traced %d', x)\n"
        "        if not envs.TOY_STEP_LOG:\n            logger.info('quiet %d', x)\n"
        "        return x\n"),
}


def test_an_env_registry_default_decides_its_gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _scan(write_tree(tmp_path / "t", REGISTRY_TREE))
    assert _emitter_lines(report) == {9}  # the registry's getter gives True unset
    switched = {f["line"]: f["switch"] for f in report["findings"] if f["path"] == "engine/runner.py"}
    assert 11 not in switched and 13 not in switched
    monkeypatch.setattr(python_module, "registry_defaults", lambda tree, path: ())
    # without the defaults: a read is a switch when set, so `not X` looked like the default
    assert _emitter_lines(_scan(write_tree(tmp_path / "u", REGISTRY_TREE))) == {13}


REGISTRY_PREDICATE_TREE = {
    "engine/envs.py": (
        "import os\n\nenvironment_variables = {\n"
        "    'TOY_USE_MERGE': lambda: bool(int(os.getenv('TOY_USE_MERGE', '0'))),\n"
        "    'TOY_USE_SPLIT': lambda: bool(int(os.getenv('TOY_USE_SPLIT', '1'))),\n"
        "}\n\n\ndef __getattr__(name):\n    return environment_variables[name]()\n"),
    "engine/runner.py": (
        "import logging\nfrom engine import envs\nlogger = logging.getLogger(__name__)\n\n\nclass ModelRunner:\n"
        "    def merging(self):\n        return envs.TOY_USE_MERGE and self.ready\n\n"
        "    def splitting(self):\n        return envs.TOY_USE_SPLIT and self.ready\n\n"
        "    def execute_model(self, x):\n"
        "        if self.merging():\n            logger.info('merged %d', x)\n"
        "        if self.splitting():\n            logger.info('split %d', x)\n"
        "        return x\n"),
}


def test_a_predicate_over_registry_reads_is_decided_by_their_defaults(tmp_path: Path) -> None:
    # a helper over settings that are not debug output decides work; what its registry
    # defaults keep false does not run by default all the same
    report = _scan(write_tree(tmp_path / "t", REGISTRY_PREDICATE_TREE))
    assert _emitter_lines(report) == {17}


LEVEL_TREE = {
    "engine/envs.py": (
        "import os\n\nenvironment_variables = {\n"
        "    'TOY_USE_CHECKS': lambda: int(os.getenv('TOY_USE_CHECKS', '0')),\n"
        "    'TOY_USE_STRICT': lambda: bool(int(os.getenv('TOY_USE_STRICT', '0'))),\n"
        "}\n\n\ndef __getattr__(name):\n    return environment_variables[name]()\n"),
    "engine/levels.py": (
        "import enum\nfrom engine import envs\n\n\nclass CheckLevel(enum.IntEnum):\n"
        "    OFF = 0\n    WARN = 1\n    STRICT = 2\n\n\n"
        "def resolve_level():\n"
        "    if envs.TOY_USE_CHECKS:\n        return CheckLevel(envs.TOY_USE_CHECKS)\n"
        "    if envs.TOY_USE_STRICT:\n        return CheckLevel.STRICT\n"
        "    return CheckLevel.OFF\n"),
    "engine/runner.py": (
        "import logging\nfrom engine import envs\nfrom engine.levels import CheckLevel, resolve_level\n"
        "logger = logging.getLogger(__name__)\n\n\n"
        "def check(x):\n"
        "    level = resolve_level()\n"
        "    if x and envs.TOY_USE_STRICT:\n        level = CheckLevel.STRICT\n"
        "    if level >= CheckLevel.WARN:\n        logger.info('checked %d', x)\n"
        "    return x\n\n\n"
        "class ModelRunner:\n"
        "    def execute_model(self, x):\n"
        "        if resolve_level() >= CheckLevel.WARN:\n            logger.info('warned %d', x)\n"
        "        if resolve_level() >= CheckLevel.OFF:\n            logger.info('always %d', x)\n"
        "        check(x)\n"
        "        return x\n"),
}


def test_a_level_helper_is_compared_by_the_value_it_returns_by_default(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # `resolve_level()` returns `CheckLevel.OFF` unless a variable is set: `>= WARN` is off by
    # default, directly or through a local; `>= OFF` runs
    assert _emitter_lines(_scan(write_tree(tmp_path / "t", LEVEL_TREE))) == {21}
    monkeypatch.setattr(gates_module, "_fallback_gate", lambda *args: NOT_OPTION)
    assert _emitter_lines(_scan(write_tree(tmp_path / "u", LEVEL_TREE))) == {12, 19, 21}


def test_registry_defaults_are_evaluated_without_running_anything(tmp_path: Path) -> None:
    from cs_audit.extract.options import registry_defaults
    marker = tmp_path / "pwned"
    source = (
        "import os\nvars = {\n"
        "  'A': lambda: bool(int(os.getenv('A', '1'))),\n"
        "  'B': lambda: os.getenv('B', 'Auto').lower() in ('1', 'true'),\n"
        "  'C': lambda: os.getenv('C'),\n"
        f"  'D': lambda: __import__('os').system('touch {marker}'),\n"
        "  'E': lambda: int(os.getenv('E', 'x')),\n"
        "}\n"
        "class Envs:\n    F = EnvBool(True)\n    G = EnvInt(0)\n    H = EnvStr(compute())\n"
    )
    found = {o.name: o.value for o in registry_defaults(ast.parse(source), "envs.py")}
    assert found == {"A": "True", "B": "False", "C": "None", "F": "True", "G": "0"}
    assert not marker.exists()


def test_without_parameter_gates_a_branch_every_caller_keeps_off_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "parameter_gate", lambda *a: NOT_OPTION)
    problems = " ".join(check_annotations(_fixture()))
    # an option handed in (or the default), and the same handed on by a caller's parameter
    for text in ('"recorded output', '"published'):
        assert f"toyserve/defaults.py:{_line(text)}: unexpected default-on-emitter" in problems, text


def test_a_caller_passing_something_else_keeps_a_parameter_gate_open(tmp_path: Path) -> None:
    source = FIXTURE.read_text()
    line = _line('"recorded output')
    recorded = f"toyserve/defaults.py:{line}: unexpected default-on-emitter"
    for extra in ("\n\ndef _other(batch, flags):\n    save_output(batch, **flags)\n",
                  "\n\ndef _other(batch):\n    save_output(batch, record=len(batch) > 1)\n",
                  "\n\ndef _other(batch):\n    save_output(batch, record=True)\n"):
        assert recorded in " ".join(check_annotations({"toyserve/defaults.py": source + extra})), extra


def test_without_predicates_of_a_wrapped_option_drafting_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "predicate_gate", lambda *a: NOT_OPTION)
    problems = " ".join(check_annotations(_fixture()))
    for text in ('"drafting', '"tree drafts'):
        assert f"toyserve/defaults.py:{_line(text)}: unexpected default-on-emitter" in problems, text


def test_a_wrapped_option_assigned_anything_else_decides_no_predicate() -> None:
    source = FIXTURE.read_text()
    widened = source.replace("self.draft = DraftAlgorithm.parse(config.draft_algorithm)",
                             "self.draft = DraftAlgorithm.parse(config.draft_algorithm)\n"
                             "        if args:\n            self.draft = DraftAlgorithm('tree')")
    assert widened != source
    problems = " ".join(check_annotations({"toyserve/defaults.py": widened}))
    line = next(i for i, text in enumerate(widened.splitlines(), 1) if '"drafting' in text)
    assert f"toyserve/defaults.py:{line}: unexpected default-on-emitter" in problems


def test_without_typed_receivers_an_attribute_of_another_object_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "receiver_attribute_switch", lambda *a: (None, False))
    problems = " ".join(check_annotations(_fixture()))
    # through an attribute of self, a typed parameter, and an attribute of a typed parameter
    for text in ('"windowed', '"dispatch balanced', '"dispatch windowed'):
        assert f"toyserve/defaults.py:{_line(text)}: unexpected default-on-emitter" in problems, text


def test_without_the_receivers_of_gates_a_typed_parameter_is_not_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    # the parameter is no receiver of a call in its function: its type is kept for the gate
    monkeypatch.setattr(python_module, "_need", lambda needed, function, head: needed[function].add(head)
                        if not head.startswith("runner") else None)
    problems = " ".join(check_annotations(_fixture()))
    assert f"toyserve/defaults.py:{_line('dispatch balanced')}: unexpected default-on-emitter" in problems
    windowed = _line('"windowed')
    assert f"toyserve/defaults.py:{windowed}: unexpected" not in problems


def test_an_attribute_another_object_sets_is_not_judged_by_its_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_module, "foreign_stores", lambda text: ())
    problems = " ".join(check_annotations(_fixture()))
    assert f"toyserve/defaults.py:{_line('resized %d')}: missing default-on-emitter" in problems


def test_an_unresolved_call_that_cannot_reach_a_parameter_leaves_it_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.joins.param_gates as param_gates_module
    monkeypatch.setattr(param_gates_module, "_reaches_parsed", lambda *a: True)
    problems = " ".join(check_annotations(_fixture()))
    assert f"toyserve/defaults.py:{_line('hits %d')}: unexpected default-on-emitter" in problems


def test_without_fresh_parameters_a_parameter_rebound_after_its_test_is_not_judged_by_its_callers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.gates as gates_module
    monkeypatch.setattr(gates_module, "rebound_after", lambda scope, name, line: False)
    # the hot chains' own arguments settle it too (every rebinding is made while it holds)
    monkeypatch.setattr(ArgumentTests, "closing", lambda *a: None)
    problems = " ".join(check_annotations(_fixture()))
    assert f"toyserve/defaults.py:{_line('merged %d')}: unexpected default-on-emitter" in problems
    assert f"toyserve/defaults.py:{_line('recounted %d')}:" not in problems


ORDERINGS = '''"""Orderings of an option with a number, at its default (1) and on either side of it."""
import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass
class ServeConfig:
    tp_size: int = 1


class OptionRunner:
    def __init__(self, config: ServeConfig):
        self.config = config

    def execute_model(self, batch):
        if self.config.tp_size >= 1:
            # expect: default-on-emitter
            logger.info("one or more ranks %d", len(batch))
        if self.config.tp_size >= 2:
            # ok: default-on-emitter
            logger.info("two or more ranks %d", len(batch))
        if self.config.tp_size <= 0:
            # ok: default-on-emitter
            logger.info("no rank %d", len(batch))
        if self.config.tp_size < 2:
            # expect: default-on-emitter
            logger.info("under two ranks %d", len(batch))
'''


def test_an_ordering_with_a_number_is_judged_at_the_default_itself() -> None:
    assert check_annotations({"toyserve/orderings.py": ORDERINGS}) == []


POOLING = '''"""A pool built by a method only an option's branch calls."""
import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass
class ServeConfig:
    enable_pooling: bool = False


class Pool:
    def alloc(self, n):
        # ok: default-on-emitter
        logger.info("alloc %d", n)


class OptionRunner:
    def __init__(self, config: ServeConfig, other):
        self.config = config
        self.pool = None
        if config.enable_pooling:
            self.pool = self._build_pool()

    def _build_pool(self):
        return Pool()

    def execute_model(self, batch):
        self.pool.alloc(len(batch))
'''


def test_a_builder_method_some_unresolved_call_is_named_like_keeps_its_class_open() -> None:
    assert check_annotations({"toyserve/pooling.py": POOLING}) == []
    # `other._build_pool()` resolves to nothing: the pool may be built there, by default
    unresolved = POOLING.replace("            self.pool = self._build_pool()\n",
                                 "            self.pool = self._build_pool()\n        other._build_pool()\n")
    assert check_annotations({"toyserve/pooling.py": unresolved.replace("# ok: default-on", "# expect: default-on")}) == []


STILL_ON = '''"""Shapes whose code runs by default although they look like ones the defaults turn off."""
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass
class ServeConfig:
    enable_x: bool = False
    enable_y: bool = False


@dataclass
class Stats:
    details: dict | None = None
    notes: dict | None = None
    extra: dict | None = None


_TABLE = {"auto": 1}
_GROWN = {"fast": 1}
_GROWN["auto"] = 2


def pick(backend="AUTO"):
    backend = backend.lower()
    spec = _TABLE.get(backend)
    if spec is None:
        return None
    # rebound before the lookup
    # expect: default-on-emitter
    logger.info("picked %s", spec)


def grown(backend="auto"):
    spec = _GROWN.get(backend)
    if spec is None:
        return None
    # a table the module adds to
    # expect: default-on-emitter
    logger.info("grown %s", spec)


def fill(stats, d):
    stats.details, stats.notes = d, d


def build(cfg, d):
    if cfg.enable_y:
        Stats().extra = d
        Stats().notes = d
    return Stats(d, d, d)


def build_two(d):
    return Stats(d, d)


def work(flag):
    if flag:
        # expect: default-on-emitter
        logger.info("flag %s", flag)


def resolve(cfg: ServeConfig):
    enable_x = os.cpu_count() > 1
    cfg.enable_x = enable_x


@contextmanager
def capture(cfg):
    if cfg.enable_y:
        yield {"a": 1}
        return
    sent = yield {"b": 2}
    logger.debug("sent %s", sent)


class ModelRunner:
    def __init__(self, cfg: ServeConfig):
        self.cfg = cfg

    def execute_model(self, batch):
        stats = Stats()
        fill(stats, {"n": len(batch)})
        if stats.details is not None:
            # expect: default-on-emitter
            logger.info("details %d", len(batch))
        if build(self.cfg, {"n": 1}).extra is not None:
            # a record built positionally holds its first fields
            # expect: default-on-emitter
            logger.info("extra %d", len(batch))
        flag = self.cfg.enable_y if self.cfg is not None else False
        flag |= len(batch) > 1
        work(flag)
        pick()
        grown()
        if self.cfg.enable_x:
            # worked out at start-up from a computed local of the same name
            # expect: default-on-emitter
            logger.info("x %d", len(batch))
        with capture(self.cfg) as got:
            pass
        if got is not None:
            # a context manager whose yield is also a value: what it binds is not judged
            # expect: default-on-emitter
            logger.info("got %s", got)
        return batch
'''


def test_shapes_that_only_look_off_by_default_are_reported() -> None:
    assert check_annotations({"toyserve/still_on.py": STILL_ON}) == []


def test_without_field_predicates_an_enum_start_up_builds_from_an_option_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "_field_predicate", lambda *a, **k: NOT_OPTION)
    _only_newly_reported('"all-to-all step', '"local step')
    _only_newly_reported('"exchanging step', '"local step')
    _only_newly_reported('"all-to-all by name', '"local step')


def test_a_field_set_outside_a_with_block_or_to_another_member_may_hold_any_member() -> None:
    source = FIXTURE.read_text(encoding="utf-8")
    # a plain function's store lasts: what it stores is not known
    _reported_in(source.replace("@contextmanager\ndef exchange_as", "def exchange_as"), '"all-to-all step', -1)
    # a lazy default other than the option's default member
    _reported_in(source.replace("flags.exchange = Exchange.NONE", "flags.exchange = Exchange.ALL_TO_ALL"), '"all-to-all step')


def test_without_either_side_a_conditional_expression_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.gates as extract_gates

    monkeypatch.setattr(extract_gates.GateReader, "_ifexp_refs", lambda self, expr, active, out, group=0: None)
    _only_newly_reported('"detailed or recorded', '"detailed or nonempty')


def test_with_one_pass_a_name_tested_only_through_a_later_copy_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.gates as extract_gates

    monkeypatch.setattr(extract_gates, "DERIVED_PASSES", 1)
    _only_newly_reported('"pooled step', '"local step')


def test_without_record_fields_from_constructors_a_callable_field_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from cs_audit.joins.resolver import Resolver

    monkeypatch.setattr(Resolver, "_records_built", lambda self, path, caller, callee: [])
    _only_newly_reported('"synced step', '"hooked step')


def test_without_the_test_a_lambda_returns_a_callable_field_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.calls as calls_module

    monkeypatch.setattr(calls_module, "TEST_VALUES", frozenset())
    _only_newly_reported('"synced step', '"hooked step')


def test_without_what_constructions_hand_a_record_a_field_it_tests_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "constructed_field", lambda *a: None)
    _only_newly_reported('"peer intake', '"role intake')


def test_a_record_field_with_a_default_may_hold_it_whatever_constructions_hand() -> None:
    source = FIXTURE.read_text(encoding="utf-8")
    _reported_in(source.replace("    peer_hook: object\n", "    peer_hook: object = True\n"), '"peer intake')


def test_without_locals_handed_on_a_parameter_given_one_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.calls as calls_module

    real = calls_module.passed_value
    monkeypatch.setattr(calls_module, "passed_value", lambda node, params, bound=frozenset(), assigned=None, stored=frozenset(): real(
        node, params, bound, assigned))
    _only_newly_reported('"settled step', '"settled rows')


def test_without_the_default_it_reads_with_a_helper_over_a_setting_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gates_module, "_read_default_off", lambda *a: False)
    _only_newly_reported('"split step', '"fused step')


def test_without_the_keywords_of_a_call_a_helper_is_taken_to_read_with_its_own_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.extract.gates as extract_gates

    monkeypatch.setattr(extract_gates, "_keywords_passed", lambda call: ())
    problems = " ".join(check_annotations(_fixture()))
    assert f"toyserve/defaults.py:{_line('fused step')}: missing default-on-emitter" in problems
    assert f"toyserve/defaults.py:{_line('merged step')}:" not in problems


STILL_ON_RECORDS = '''"""Record fields, enums, conditional expressions and helpers whose code runs by default."""
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

logger = logging.getLogger(__name__)


@dataclass
class ServeConfig:
    enable_x: bool = False
    enable_hooks: bool = False
    mode: str = "a"
    backend: str = "none"


class Backend(Enum):
    NONE = "none"
    FAST = "fast"

    def is_fast(self):
        return self == Backend.FAST


@dataclass
class Flags:
    # declared holding a member: what start-up may store is not all it holds
    chosen: object = Backend.FAST
    # stored from the option only where a switch keeps the store off
    picked: object = None
    # stored by a context manager that does not restore it
    held: object = None


FLAGS = Flags()


def init_flags(config: ServeConfig):
    FLAGS.chosen = Backend(config.backend)
    FLAGS.picked = Backend(config.backend)
    FLAGS.held = Backend(config.backend)


@contextmanager
def hold(backend):
    FLAGS.held = backend
    yield


class State:
    def __init__(self):
        # the same name, another class's own state
        self.kind = Backend.FAST


@dataclass
class Named:
    kind: object = None


def get_picked():
    # a lazy default of its own: the member the predicate tests
    if FLAGS.picked is None:
        FLAGS.picked = Backend.FAST
    return FLAGS.picked


def init_named(config: ServeConfig):
    Named().kind = Backend(config.backend)


def env_on(name, default="false"):
    return os.getenv(name, default) != "0"


def env_bool(name, default="false"):
    return os.getenv(name, default).lower() in ("1", "true")


ARGS = ("TOY_ENABLE_D", "true")


@dataclass
class Intake:
    hook: object

    def take(self, batch):
        if self.hook is not None:
            self.hook.ready(batch)
            # built positionally too: the field may hold what that construction passes
            # expect: default-on-emitter
            logger.info("intake %d", len(batch))


class Peer:
    def ready(self, batch):
        return batch


@dataclass
class Hook:
    wanted: object

    def run(self, batch):
        if self.wanted():
            # one construction hands a function from outside the tree
            # expect: default-on-emitter
            logger.info("hooked %d", len(batch))


class Phase(Enum):
    RUN = "run"

    def note(self, batch):
        # an enum's members exist without a call building one (`Phase(x)` only looks one up)
        # expect: default-on-emitter
        logger.info("phase %d", len(batch))


def step_phase(phase: Phase, batch):
    phase.note(batch)


def settle(batch, need=None):
    if need:
        # the local handed on is rebound by an `except ... as`
        # expect: default-on-emitter
        logger.info("settled %d", len(batch))


class ModelRunner:
    def __init__(self, cfg: ServeConfig):
        self.cfg = cfg
        init_flags(cfg) if cfg.enable_x else None
        if cfg.enable_x:
            init_flags(cfg)
        with hold(Backend.FAST):
            pass
        self.state = State()
        self.peer = Peer() if cfg.enable_x else None
        self.intakes = [Intake(hook=self.peer), Intake(Peer())]
        self.hooks = [Hook(wanted=lambda: self.cfg.enable_x), Hook(wanted=os.cpu_count)]
        if cfg.enable_x:
            self.parsed = Phase(cfg.mode)

    def execute_model(self, batch):
        if FLAGS.chosen.is_fast():
            # expect: default-on-emitter
            logger.info("chosen %d", len(batch))
        if get_picked().is_fast():
            # expect: default-on-emitter
            logger.info("picked %d", len(batch))
        if FLAGS.held.is_fast():
            # expect: default-on-emitter
            logger.info("held %d", len(batch))
        if self.state.kind.is_fast():
            # expect: default-on-emitter
            logger.info("kind %d", len(batch))
        if (self.cfg.enable_x if self.cfg.enable_hooks else self.cfg.enable_x) or len(batch) > 0:
            # expect: default-on-emitter
            logger.info("either or more %d", len(batch))
        if self.cfg.enable_x or (self.cfg.enable_hooks if self.cfg.enable_x else self.cfg.mode):
            # expect: default-on-emitter
            logger.info("or either %d", len(batch))
        # expect: env-read-hot
        if env_on("TOY_ENABLE_ON"):
            # a helper not named for a bool: what its default gives is not known
            # expect: default-on-emitter
            logger.info("on %d", len(batch))
        # expect: env-read-hot
        if env_bool(*ARGS):
            # expect: default-on-emitter
            logger.info("starred %d", len(batch))
        step_phase(Phase.RUN, batch)
        for intake in self.intakes:
            intake.take(batch)
        for hook in self.hooks:
            hook.run(batch)
        got = self.cfg.enable_x
        try:
            len(batch)
        except ValueError as got:
            logger.debug("bad %s", got)
        settle(batch, need=got)
        return batch
'''


def test_record_fields_enums_and_helpers_that_only_look_off_by_default_are_reported() -> None:
    assert check_annotations({"toyserve/records_on.py": STILL_ON_RECORDS}) == []


STILL_ON_COMPONENTS = '''"""Attributes declared Optional whose code still runs by default."""
import functools
import logging
from dataclasses import dataclass
from typing import Optional

import torch
from torch.cuda import Event

from toyserve.syncs import Base, Plain, attach, make_sync

logger = logging.getLogger(__name__)


@dataclass
class ServeConfig:
    enable_stage: bool = False
    stage_size: int = 0


class Stage:
    def __init__(self):
        self.free = 0


class LightStage:
    def __init__(self):
        self.free = 1


STAGES = {"stage": Stage}


def spare(config):
    if config.enable_stage:
        return Stage()
    return None


def make_stage(config):
    if config.enable_stage:
        return Stage()
    return LightStage()


class WithStage(Base):
    def __init__(self, config: ServeConfig):
        self.stage: Optional[Stage] = None
        if config.enable_stage:
            self.stage = Stage()


class Runner:
    def __init__(self, config: ServeConfig):
        self.config = config
        self.spare = spare(config)
        self.side = WithStage(config)
        self.plain = Plain()
        attach(self.plain, LightStage())
        # the class's own store gives another class by default
        self.made: Optional[Stage] = None
        self.made = make_stage(config)
        # a class looked up in a table is built wherever the table is called
        self.looked_up: Optional[Stage] = None
        self.looked_up = STAGES["stage"]()
        self.partial: Optional[Stage] = None
        self.partial = functools.partial(Stage)()
        # a library's class, whatever the tree names the same
        self.event: Optional[Event] = None
        self.event = new_event()
        self.stream: Optional[torch.cuda.Stream] = None
        self.stream = torch.cuda.current_stream()
        self.spare_sync = make_sync(config)

    def execute_model(self, batch):
        self.plain.report(len(batch))
        if self.made is not None:
            # expect: default-on-emitter
            logger.info("made %d", len(batch))
        free = self.made.free
        # expect: default-on-emitter
        logger.info("made free %d", free)
        if self.looked_up is not None:
            # expect: default-on-emitter
            logger.info("looked up %d", len(batch))
        if self.partial is not None:
            # expect: default-on-emitter
            logger.info("partial %d", len(batch))
        if self.event is not None:
            # expect: default-on-emitter
            logger.info("event %d", len(batch))
        if self.stream is not None:
            # expect: default-on-emitter
            logger.info("stream %d", len(batch))
        # what None itself has reads nothing from a Stage
        kind = self.side.stage.__class__.__name__ if batch else ""
        name = self.made.__class__.__name__
        # expect: default-on-emitter
        logger.info("kind %s %s", kind, name)
        # `0 < 0` is false: the chained comparison never reads `self.event`
        if 0 < self.config.stage_size <= self.event.free:
            batch = batch[:1]
        # expect: default-on-emitter
        logger.info("after the size check %d", len(batch))

        class View:
            def __init__(self):
                self.made = LightStage()

            def show(self, n):
                free = self.made.free
                # a class defined in the method: its `self` is no Runner
                # expect: default-on-emitter
                logger.info("view %d %d", free, n)

        View().show(len(batch))
'''


#: the tree's own classes named as a library's are, each built only under an option; a base
#: class only a subclass elsewhere declares the attribute of
SYNCS = '''
import logging

logger = logging.getLogger(__name__)


class Base:
    def report(self, n):
        # only a subclass declares the attribute: what this class holds is not said
        if self.stage is not None:
            # expect: default-on-emitter
            logger.info("base stage %d", n)


class Plain(Base):
    pass


def attach(obj, value):
    obj.stage = value


class Event:
    pass


class Stream:
    pass


def make_sync(config):
    if config.enable_stage:
        return Event(), Stream()
    return None
'''


def test_declared_components_that_still_run_by_default_are_reported() -> None:
    assert check_annotations({"toyserve/components_on.py": STILL_ON_COMPONENTS, "toyserve/syncs.py": SYNCS}) == []


STILL_ON_ARCHITECTURES = '''"""Tests that look like tests of the served architecture but are not decided by it."""
import logging

logger = logging.getLogger(__name__)

# a list: code anywhere may add to it
LISTED = ["HybridForCausalLM"]
# rebound after it is first bound
GROWN = ("HybridForCausalLM",)
GROWN += ("LlamaForCausalLM",)
TABLED = ("HybridForCausalLM",)


def refresh():
    global TABLED
    TABLED = ("LlamaForCausalLM",)


class Registry:
    architectures = ("HybridForCausalLM",)


def check(batch, hf_config, names):
    arch = hf_config.architectures[0]
    if arch in LISTED:
        # expect: default-on-emitter
        logger.info("listed %d", len(batch))
    if arch in GROWN:
        # expect: default-on-emitter
        logger.info("grown %d", len(batch))
    if arch in TABLED:
        # expect: default-on-emitter
        logger.info("tabled %d", len(batch))
    if "HybridForCausalLM" in Registry.architectures:
        # the registry's list, not a config's
        # expect: default-on-emitter
        logger.info("registry %d", len(batch))


def shadowed(batch, hf_config, GROWN):
    if hf_config.architectures[0] in GROWN:
        # expect: default-on-emitter
        logger.info("shadowed %d", len(batch))


def rebound(batch, hf_config, names):
    arch = hf_config.architectures[0]
    for arch in names:
        if arch == "HybridForCausalLM":
            # expect: default-on-emitter
            logger.info("rebound %d", len(batch))


class Runner:
    def execute_model(self, batch):
        check(batch, self.hf_config, batch)
        shadowed(batch, self.hf_config, batch)
        rebound(batch, self.hf_config, batch)
'''


def test_tests_that_only_look_like_ones_of_the_served_architecture_are_reported() -> None:
    assert check_annotations({"toyserve/arch_on.py": STILL_ON_ARCHITECTURES}) == []


def test_a_served_architecture_defined_in_a_shared_module_and_the_assumption_named(tmp_path: Path) -> None:
    files = {
        "toyserve/models/common.py": "class SharedForCausalLM:\n    pass\n",
        "toyserve/models/bigmodel.py": "from toyserve.models.common import SharedForCausalLM\n\n\n" + BIG_MODEL,
        "toyserve/models/other.py": "class OtherForCausalLM:\n    pass\n",
        "toyserve/runner.py": (
            "import logging\n\nlogger = logging.getLogger(__name__)\n\n\n"
            "class Runner:\n    def execute_model(self, batch):\n"
            "        if self.hf_config.architectures[0] == 'SharedForCausalLM':\n"
            "            logger.info('shared %d', len(batch))\n"
            "        if self.hf_config.architectures[0] == 'OtherForCausalLM':\n"
            "            logger.info('other %d', len(batch))\n"),
    }
    unstated = _scan(write_tree(tmp_path / "unstated", files))
    assert not {9, 11} & {f["line"] for f in unstated["findings"] if f["path"] == "toyserve/runner.py" and f["switch"] is None}
    assumed = {u["switch"]: u["value"] for u in unstated["deployment"]["defaults_used"]}
    assert assumed.get("model=other") == "not served"
    files["pyproject.toml"] = '[tool.cs-audit]\ndeployment = {models = ["bigmodel"]}\n'
    served = _scan(write_tree(tmp_path / "served", files))
    on = {f["line"] for f in served["findings"] if f["path"] == "toyserve/runner.py" and f["switch"] is None}
    assert 9 in on and 11 not in on
