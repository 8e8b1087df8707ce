"""Hot roots in the report: which configured roots match the tree (and a warning when none
does), and event loops found in the code as roots of their own.  Everything is asserted
through the JSON report, the terminal summary, ``check`` and ``callgraph`` output."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cs_audit.api as api
from cs_audit.api import run_audit
from cs_audit.cli import app
from cs_audit.config import load_config
from cs_audit.render.json import render_json
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import expected_findings, write_tree

runner = CliRunner()
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "roots"
EVENT_LOOP = FIXTURES / "event_loop"
NO_ROOT = FIXTURES / "no_root"
SUBCLASS = FIXTURES / "subclass"
CONFIGURED = len(load_ruleset().hot_roots)
WARNING = f"0 of {CONFIGURED} hot roots match this tree: add hot_roots to pyproject.toml"


def _json(root: Path, *extra: str) -> dict:
    result = runner.invoke(app, ["scan", str(root), "-f", "json", "-j", "1", "--no-cache", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if text in line)


def _hot(report: dict) -> dict[str, str]:
    """Function -> frequency of the default-on emitters the scan reports (what runs hot)."""
    return {f["function"]: f["frequency"] for f in report["findings"] if f["rule"] == "default-on-emitter"}


def _graph_frequencies(root: Path) -> dict[str, str | None]:
    result = runner.invoke(app, ["callgraph", str(root), "-f", "json", "-j", "1"])
    assert result.exit_code == 0, result.output
    return {f["id"]: f["frequency"] for f in json.loads(result.stdout)["functions"]}


# ---------------------------------------------------------------- configured roots
def test_a_tree_no_root_matches_is_warned_about_and_the_exit_code_stays(tmp_path: Path) -> None:
    report = _json(NO_ROOT)
    roots = report["hot_roots"]
    assert (roots["configured"], roots["matched"], roots["rules"], roots["event_loops"]) == (CONFIGURED, 0, [], [])
    assert [(n["id"], n["level"]) for n in report["notes"]] == [("no-hot-root", "warning")]
    assert report["notes"][0]["message"].startswith(WARNING)

    text = runner.invoke(app, ["scan", str(NO_ROOT), "-j", "1", "--no-cache", "-o", str(tmp_path / "audit.md")])
    assert text.exit_code == 0, text.output
    assert f"warning: {WARNING}" in text.stdout  # one line, whatever the terminal width
    assert WARNING.replace("_", "\\_") in (tmp_path / "audit.md").read_text(encoding="utf-8")

    check = runner.invoke(app, ["check", str(NO_ROOT), "-f", "json", "-j", "1"])
    assert check.exit_code == 0, check.output
    assert [n["id"] for n in json.loads(check.stdout)["check"]["notes"]] == ["no-hot-root"]


def test_the_report_names_the_configured_roots_that_match(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(NO_ROOT, root)
    (root / "pyproject.toml").write_text('[tool.cs-audit]\nhot_roots = [{name = "handle", class = "Work*"}]\n')
    report = _json(root)
    roots = report["hot_roots"]
    assert roots["matched"] == 1 and roots["configured"] == CONFIGURED + 1
    assert roots["summary"] == f"1 of {CONFIGURED + 1} hot roots match this tree"
    assert roots["rules"] == [{"name": "handle", "class": "Work*", "path": None, "frequency": "step",
                               "functions": 1, "examples": ["worker.loop.Worker.handle"]}]
    assert report["notes"] == []
    assert _hot(report) == {"Worker.handle": "step"}


def test_a_class_pattern_matches_the_classes_built_on_its_class() -> None:
    """The fixture's project root `{name: tick, class: MyEngine}` makes the ticks of the classes
    built on `MyEngine` roots, through another module and two classes down, as the shipped
    `{name: schedule, class: "*Scheduler*"}` does for a planner built on a scheduler; a `tick`
    of a class built on nothing the pattern names (or on a class outside the tree) is no root.
    The emitters the scan reports are the lines the fixture annotates `# expect:`, and no `# ok:` line."""
    report = _json(SUBCLASS)
    assert _hot(report) == {"MyEngine.tick": "step", "FastEngine.tick": "step", "TurboEngine.tick": "step",
                            "BatchScheduler.schedule": "step", "LotteryPlanner.schedule": "step"}
    expected = {(p.relative_to(SUBCLASS).as_posix(), line) for p in SUBCLASS.rglob("*.py")
                for line, _ in expected_findings(p.read_text(encoding="utf-8"))}
    assert {(f["path"], f["line"]) for f in report["findings"]} == expected
    assert {f["function"]: (f["hot_path"], f["process"]) for f in report["findings"]}["TurboEngine.tick"] == (
        ["engine.fast.TurboEngine.tick"], "engine")  # a root of its own, on its rule's side
    rules = {(r["name"], r["class"]): (r["functions"], r["examples"]) for r in report["hot_roots"]["rules"]}
    assert rules == {("tick", "MyEngine*"): (3, ["engine.base.MyEngine.tick", "engine.fast.FastEngine.tick", "engine.fast.TurboEngine.tick"]),
                     ("schedule", "*Scheduler*"): (2, ["engine.fast.BatchScheduler.schedule", "engine.fast.LotteryPlanner.schedule"])}


# ---------------------------------------------------------------- event loops
def test_an_event_loop_is_a_root_and_the_calls_in_it_run_per_step() -> None:
    report = _json(EVENT_LOOP)
    server = EVENT_LOOP / "engine" / "server.py"
    assert [(e["path"], e["line"], e["function"], e["steps"], e["root"]) for e in report["hot_roots"]["event_loops"]] == [
        ("engine/server.py", _line_of(server, "while not self._shutdown"), "Server.serve_forever", ["self.scheduler.step"], "event loop"),
        ("engine/server.py", _line_of(server, "while True:"), "Server.serve_until_stopped", ["self.stopper.step"], "event loop"),
        ("engine/server.py", _line_of(server, "while self._handle_shutdown()"), "Server.run_busy_loop", ["self.stopper.step"], "event loop"),
    ]
    # what the loop calls runs per step (not raised by the `while`), its own loop per request
    assert _hot(report) == {"BatchScheduler.step": "step", "BatchScheduler.advance": "request", "StopScheduler.step": "step"}
    assert report["notes"][0]["message"].endswith("only the 3 event loops found in the code are roots")


def test_loops_that_end_on_their_own_are_not_roots() -> None:
    frequencies = _graph_frequencies(EVENT_LOOP)
    assert frequencies["engine.batching.DrainScheduler.step"] is None  # `while i < n`
    assert frequencies["engine.batching.IdleScheduler.step"] is None  # a `break` on the normal path
    assert frequencies["engine.server.OfflineRunner.run_steps"] is None
    assert frequencies["engine.batching.BatchScheduler.step"] == "step"


def test_an_event_loop_function_runs_once_outside_its_loop() -> None:
    frequencies = _graph_frequencies(EVENT_LOOP)
    assert frequencies["engine.server.Server.serve_forever"] == "step"
    assert frequencies["engine.server.Server.warm_up"] is None  # called before the loop
    assert frequencies["engine.server.Server.close"] is None  # after it
    assert frequencies["engine.server.Server._handle_shutdown"] is None  # the stop check in the test
    # the function's own code after the loop runs once: no per-step emitter there
    assert "Server.serve_forever" not in _hot(_json(EVENT_LOOP))


def test_a_configured_root_covers_its_event_loop(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(EVENT_LOOP, root)
    (root / "cs-audit.yaml").write_text("hot_roots:\n  - {name: serve_forever, class: Server}\n")
    loops = {e["function"]: (e["root"], e["configured_root"]) for e in _json(root)["hot_roots"]["event_loops"]}
    assert loops == {"Server.serve_forever": ("configured", "serve_forever"), "Server.serve_until_stopped": ("event loop", None),
                     "Server.run_busy_loop": ("event loop", None)}


def test_a_configured_root_runs_once_outside_its_event_loop(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(EVENT_LOOP, root)
    (root / "cs-audit.yaml").write_text("hot_roots:\n  - {name: serve_forever, class: Server}\n")
    frequencies = _graph_frequencies(root)
    assert frequencies["engine.server.Server.serve_forever"] == "step"
    assert frequencies["engine.batching.BatchScheduler.step"] == "step"  # in the loop
    assert frequencies["engine.server.Server.warm_up"] is None  # before it
    assert frequencies["engine.server.Server.close"] is None  # after it


GENERATION_LOOP = {"gen/loop.py": """
    import logging
    logger = logging.getLogger(__name__)

    class Generator:
        def prefill(self):
            logger.info("prefill")

        def decode_one(self):
            logger.info("token")

        def finish(self):
            logger.info("done")

        def finished(self):
            return False

        def more(self):
            return True

        def generate_tokens(self):
            self.prefill()
            while not self.finished() and self.more():
                self.decode_one()
                while self.finished():
                    self.decode_one()
            self.finish()
"""}


@pytest.mark.parametrize("marked", [True, False])
def test_a_root_marked_loop_steps_once_each_time_round_its_while_loop(marked: bool, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", GENERATION_LOOP)
    loop = ", loop: true" if marked else ""
    (root / "cs-audit.yaml").write_text(f"hot_roots:\n  - {{name: generate_tokens, frequency: step{loop}}}\n")
    frequencies = _graph_frequencies(root)
    assert frequencies["gen.loop.Generator.decode_one"] == "step"
    assert frequencies["gen.loop.Generator.more"] == "step"  # the loop's test runs every time round
    # the prologue and the epilogue run once a call of a generation loop; else the root is a step
    assert frequencies["gen.loop.Generator.prefill"] == (None if marked else "step")
    assert frequencies["gen.loop.Generator.finish"] == (None if marked else "step")
    assert _hot(_json(root)) == ({"Generator.decode_one": "step"} if marked else
                                 {"Generator.decode_one": "step", "Generator.prefill": "step", "Generator.finish": "step"})


SAMPLERS = {"gen/sampler.py": """
    import logging
    logger = logging.getLogger(__name__)

    class Runner:
        def penalties(self, x):
            logger.info("penalties %s", x)

        def accept(self, x):
            logger.info("accept %s", x)
            return True

        def record(self, x):
            logger.info("record %s", x)

        def greedy(self, x):
            logger.info("greedy %s", x)

        def pad(self, x):
            logger.info("pad %s", x)

        def draft(self, x):
            logger.info("draft %s", x)
            return False

        def exhausted(self, x):
            logger.info("exhausted %s", x)

        def step_sample(self, x):
            self.penalties(x)
            tries = 0
            while tries < 3:
                tries += 1
                if self.accept(x):
                    break
            self.record(x)

        def execute_model(self, x):
            self.step_sample(x)

        def branch_sample(self, x, spec):
            if spec:
                while self.draft(x):
                    pass
                return x
            self.greedy(x)

        def gen_sample(self, x):
            while len(x) < 4:
                self.pad(x)
            while self.accept(x):
                self.record(x)
            else:
                self.exhausted(x)
"""}


def test_a_root_marked_loop_is_read_so_only_where_it_drives_the_steps(tmp_path: Path) -> None:
    # called every step by another root, it drives nothing: all of it runs each step; a
    # `while` under a branch is no step loop; the longest top-level `while` is, the set-up
    # loop before it and its `else:` (run once, when it ends) are not
    root = write_tree(tmp_path / "tree", SAMPLERS)
    (root / "cs-audit.yaml").write_text("hot_roots:\n" + "".join(
        f"  - {{name: {name}, frequency: step, loop: true}}\n" for name in ("step_sample", "branch_sample", "gen_sample"))
        + "  - {name: execute_model, frequency: step}\n")
    frequencies = {k.rpartition(".")[2]: v for k, v in _graph_frequencies(root).items()}
    assert (frequencies["penalties"], frequencies["record"], frequencies["accept"]) == ("step", "step", "step")
    assert frequencies["greedy"] == "step"
    assert (frequencies["pad"], frequencies["exhausted"]) == (None, None)


def test_a_projects_loop_root_is_read_alike_with_the_cache(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", GENERATION_LOOP)
    cache_root = tmp_path / "cache"
    (root / "cs-audit.yaml").write_text("hot_roots:\n  - {name: generate_tokens, frequency: step}\n")
    assert '"Generator.prefill"' in _report(root, cache_root)[0]
    (root / "cs-audit.yaml").write_text("hot_roots:\n  - {name: generate_tokens, frequency: step, loop: true}\n")
    warm = _report(root, cache_root)[0]
    assert '"function": "Generator.prefill"' not in warm and warm == _report(root, None)[0]


def test_step_names_are_rule_data_a_project_extends(tmp_path: Path) -> None:
    files = {"clock/loop.py": """
        import logging
        logger = logging.getLogger(__name__)

        class Clock:
            def tick(self):
                logger.info("tick")

        class Runner:
            def __init__(self):
                self.clock = Clock()

            def forever(self):
                while True:
                    self.clock.tick()
    """}
    root = write_tree(tmp_path / "tree", files)
    assert _json(root)["hot_roots"]["event_loops"] == []
    (root / "cs-audit.yaml").write_text("hot_paths:\n  event_loops:\n    step_calls: [tick]\n")
    report = _json(root)
    assert [e["function"] for e in report["hot_roots"]["event_loops"]] == ["Runner.forever"]
    assert _hot(report) == {"Clock.tick": "step"}


LOOP_SHAPES = {
    "while_true": ("while True:\n        self.engine.step()", True),
    "stop_flag_call": ("while not self._stop_event.is_set():\n        self.engine.step()", True),
    "running_flag": ("while self._running:\n        self.engine.step()", True),
    "break_in_except": ("while True:\n        try:\n            self.engine.step()\n        except OSError:\n            break", True),
    "break_of_an_inner_loop": ("while True:\n        for r in self.reqs:\n            break\n        self.engine.step()", True),
    "return_on_shutdown": ("while True:\n        self.engine.step()\n        if self._shutdown_requested:\n            return", True),
    "counter": ("n = 0\n    while n < 3:\n        self.engine.step()\n        n += 1", False),
    "work_left": ("while self.engine.has_unfinished_requests():\n        self.engine.step()", False),
    "normal_break": ("while True:\n        out = self.engine.step()\n        if not out:\n            break", False),
    "normal_return": ("while True:\n        if self.engine.step():\n            return", False),
    "break_in_inner_loop_else": ("while True:\n        for r in self.reqs:\n            pass\n        else:\n            break\n        self.engine.step()", False),
    "no_step_call": ("while True:\n        self.engine.poll()", False),
    "step_only_in_nested_def": ("while True:\n        def later():\n            self.engine.step()\n        self.engine.poll()", False),
}


@pytest.mark.parametrize("shape", sorted(LOOP_SHAPES))
def test_which_while_loops_are_event_loops(shape: str, tmp_path: Path) -> None:
    body, is_event_loop = LOOP_SHAPES[shape]
    root = write_tree(tmp_path / "tree", {"svc.py": f"class Service:\n  def run(self):\n    {body}\n"})
    found = [e["function"] for e in _json(root)["hot_roots"]["event_loops"]]
    assert found == (["Service.run"] if is_event_loop else [])


# ---------------------------------------------------------------- determinism
def _report(root: Path, cache_root: Path | None, jobs: int = 1) -> tuple[str, str]:
    config = load_config(str(root), history=False, jobs=jobs, cache=cache_root is not None,
                         cache_dir=str(cache_root) if cache_root else None)
    result = run_audit(config)
    return render_json(replace(result, root="<root>", commit=None)), result.stats.result  # type: ignore[union-attr]


def test_roots_are_the_same_for_any_jobs_with_the_cache_and_after_lines_move(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "tree"
    shutil.copytree(EVENT_LOOP, root)
    cache_root = tmp_path / "cache"
    cold, _ = _report(root, None)
    assert '"event_loops": [\n' in cold
    monkeypatch.setattr(api, "POOL_MIN_FILES", 0)  # the process pool, even for a small tree
    assert _report(root, None, jobs=2)[0] == cold
    assert _report(root, cache_root)[0] == cold
    assert _report(root, cache_root) == (cold, "stored")
    server = root / "engine" / "server.py"
    server.write_text("# every line one down\n" + server.read_text(encoding="utf-8"), encoding="utf-8")
    moved, how = _report(root, cache_root)
    assert how == "moved" and moved == _report(root, None)[0] and moved != cold


LOOPS_BY_OPTION = {"engine/loops.py": """
    import logging
    from dataclasses import dataclass
    logger = logging.getLogger(__name__)

    @dataclass
    class ServeConfig:
        enable_mux: bool = False

    class Engine:
        def step(self):
            return 1

    class Server:
        def __init__(self, config: ServeConfig):
            self.config = config
            self.engine = Engine()

        def loop_plain(self):
            while True:
                logger.info("plain step %d", self.engine.step())

        def loop_mux(self):
            while True:
                logger.info("mux step %d", self.engine.step())

    def serve(server: Server):
        if server.config.enable_mux:
            server.loop_mux()
        else:
            server.loop_plain()
"""}


def test_an_event_loop_every_call_of_which_needs_an_option_is_no_default_root(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_tree(tmp_path / "tree", LOOPS_BY_OPTION)
    report = _json(root, "--no-history")
    emitted = {f["function"]: f.get("switch") for f in report["findings"] if f["rule"] == "default-on-emitter"}
    assert emitted["Server.loop_plain"] is None
    assert "Server.loop_mux" not in emitted or emitted["Server.loop_mux"] is not None  # gated by the option
    import cs_audit.joins.callgraph as callgraph
    monkeypatch.setattr(callgraph, "gate_event_loops", lambda *args: None)
    report = _json(write_tree(tmp_path / "u", LOOPS_BY_OPTION), "--no-history")
    emitted = {f["function"]: f.get("switch") for f in report["findings"] if f["rule"] == "default-on-emitter"}
    assert emitted["Server.loop_mux"] is None
