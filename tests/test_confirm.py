"""``trace`` and ``confirm``: a small engine run under the recorder, then joined to its audit."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cs_audit.cli import app

runner = CliRunner()
ENGINE = Path(__file__).resolve().parent.parent / "fixtures" / "confirm_engine"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the engine's tree, its trace: 6 steps of `EngineCore.step`, the first left out)."""
    tree = tmp_path_factory.mktemp("confirm") / "engine_tree"
    shutil.copytree(ENGINE, tree)
    out = tree.parent / "run.json"
    result = runner.invoke(app, ["trace", "--root", "EngineCore.step", "--warmup", "1", "--tree", str(tree), "-o", str(out),
                                 "--", sys.executable, str(tree / "run.py"), "6"])
    assert result.exit_code == 0, result.output
    return tree, out


def _confirm(*args: str) -> dict:
    result = runner.invoke(app, ["confirm", *args, "--format", "json", "-j", "1"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_trace_counts_calls_per_function_after_the_warm_up(traced: tuple[Path, Path]) -> None:
    tree, out = traced
    data = json.loads(out.read_text())
    assert (data["steps"], data["step_calls"], data["warmup"]) == (5, 6, 1)
    core = data["functions"][str(tree / "engine" / "core.py")]
    assert core["EngineCore._record"] == [5, 6] and core["EngineCore._load_layout"] == [0, 1]
    assert data["functions"][str(tree / "engine" / "runner.py")]["ModelRunner._forward.<locals>.scale"] == [5, 6]
    assert str(tree / "engine" / "verifier.py") not in data["modules"]


def test_confirm_gives_each_finding_what_the_run_observed(traced: tuple[Path, Path]) -> None:
    tree, out = traced
    report = _confirm(str(out), str(tree))
    status = {(f["path"], f["line"]): f["observed"] for f in report["findings"]}
    assert status[("engine/core.py", 33)] == {"calls_per_step": 1.0, "status": "per-step"}  # the per-step log line
    assert status[("engine/runner.py", 10)]["status"] == "per-step"
    assert status[("engine/core.py", 30)] == {"calls_per_step": 0.0, "status": "not-per-step"}  # once, on the first step
    assert status[("engine/verifier.py", 11)]["status"] == "not-covered"  # never imported
    assert status[("engine/verifier.py", 13)]["status"] == "not-covered"
    agreement = report["agreement"]
    assert {k: v for k, v in agreement.items() if not k.startswith("functions_")} == {
        "claimed_per_step": 7, "claimed_ran": 7, "claimed_ran_per_step": 6, "ran_per_step": 6, "ran_per_step_claimed": 6}
    # the graph's disagreement, by function: once on the first step, called per step
    assert agreement["functions_claimed_ran_not_per_step"] == [
        {"path": "engine/core.py", "function": "EngineCore._load_layout", "calls_per_step": 0.0, "frequency": "step"}]
    assert agreement["functions_ran_per_step_not_claimed"] == []
    [worst] = report["worst"]
    assert (worst["path"], worst["line"]) == ("engine/core.py", 30)
    assert worst["chain"][-1].startswith("-> engine.core.EngineCore._load_layout  (called at engine/core.py:23")


def test_confirm_text_lists_the_worst_disagreement_with_its_chain(traced: tuple[Path, Path]) -> None:
    tree, out = traced
    result = runner.invoke(app, ["confirm", str(out), str(tree), "-j", "1"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "profile: trace, 5 steps counted after 1 warm-up" in text
    assert "the graph calls per step 7: ran per step 6/7 (86%); of the 7 that ran at all, ran per step 6/7 (86%)" in text
    assert "engine/core.py:30 env-read-hot in EngineCore._load_layout: 0.00 calls/step, 1 in all" in text
    assert "      -> engine.core.EngineCore._load_layout  (called at engine/core.py:23 `self._load_layout()`" in text


def test_trace_steps_stops_counting_after_that_many(traced: tuple[Path, Path], tmp_path: Path) -> None:
    tree, _ = traced
    out = tmp_path / "two.json"
    result = runner.invoke(app, ["trace", "--root", "step", "--steps", "2", "--tree", str(tree), "-o", str(out),
                                 "--", sys.executable, str(tree / "run.py"), "6"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["steps"] == 2
    assert data["functions"][str(tree / "engine" / "core.py")]["EngineCore._record"] == [2, 2]


def _fails(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(("text", "said"), [
    ("", "the file is empty"),
    ('{"format": "cs-audit-trace", "version": 1, "steps": 3, "functions": {"/x/engine/co', "truncated"),
    ("not a profile at all\n", "not a profile cs-audit reads"),
    ('{"traceEvents": [{"ph": "X", "name": "main (/x/run.py:1)"', "truncated"),
    ("main (run.py:3);step (engine/core.py:21) twelve\n", "not a profile cs-audit reads"),
])
def test_a_bad_profile_is_one_line(traced: tuple[Path, Path], tmp_path: Path, text: str, said: str) -> None:
    tree, _ = traced
    bad = tmp_path / "bad.prof"
    bad.write_text(text)
    assert said in _fails(["confirm", str(bad), str(tree), "-j", "1"])


def test_a_profile_of_another_tree_is_one_line(traced: tuple[Path, Path], tmp_path: Path) -> None:
    tree, _ = traced
    other = tmp_path / "other"
    (other / "pkg").mkdir(parents=True)
    (other / "pkg" / "main.py").write_text("def go():\n    return 1\n\nfor _ in range(3):\n    go()\n")
    out = tmp_path / "other.json"
    result = runner.invoke(app, ["trace", "--root", "go", "--tree", str(other), "-o", str(out), "--",
                                 sys.executable, str(other / "pkg" / "main.py")])
    assert result.exit_code == 0, result.output
    assert "none of the profile's 1 files is in" in _fails(["confirm", str(out), str(tree), "-j", "1"])


def test_frames_that_match_no_function_are_counted(traced: tuple[Path, Path], tmp_path: Path) -> None:
    tree, out = traced
    data = json.loads(out.read_text())
    data["functions"][str(tree / "engine" / "core.py")]["EngineCore.gone"] = [5, 5]
    data["functions"]["/elsewhere/lib/helpers.py"] = {"helper": [1, 1]}
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    report = _confirm(str(edited), str(tree))
    assert report["frames_not_functions"] == 7  # six module and class bodies, and the function the tree lacks
    assert report["files_outside"] == 1


def test_trace_of_something_not_python_is_one_line(tmp_path: Path) -> None:
    said = _fails(["trace", "-o", str(tmp_path / "x.json"), "--", "/bin/sh", "-c", "true"])
    assert "not a Python program" in said


def test_scan_profile_adds_what_the_run_observed_to_the_reports(traced: tuple[Path, Path], tmp_path: Path) -> None:
    tree, out = traced
    result = runner.invoke(app, ["scan", str(tree), "--profile", str(out), "--format", "json", "-j", "1"])
    assert result.exit_code == 0, result.output
    observed = {(f["path"], f["line"]): f["observed"] for f in json.loads(result.stdout)["findings"]}
    assert observed[("engine/core.py", 33)] == {"calls_per_step": 1.0, "status": "per-step"}
    assert observed[("engine/core.py", 30)] == {"calls_per_step": 0.0, "status": "not-per-step"}
    assert observed[("engine/verifier.py", 13)] == {"calls_per_step": None, "status": "not-covered"}
    markdown = runner.invoke(app, ["scan", str(tree), "--profile", str(out), "--format", "markdown", "-j", "1"]).stdout
    assert "| # | What runs with no debug env | file:line | Freq | Observed | Via | GPU sync | Est. cost / note |" in markdown
    assert "| `engine/core.py:33` | step | 1.00/step | `EngineCore.step (+1 call)` |" in markdown
    assert "| `engine/core.py:30` | step | 0.00/step, not per step (1 call in all) |" in markdown
    assert "| `engine/verifier.py:13` | step | not covered |" in markdown
    page = runner.invoke(app, ["scan", str(tree), "--profile", str(out), "--format", "html", "-j", "1"]).stdout
    assert "<th>freq</th><th>observed</th><th>via</th>" in page and '<td data-label="observed">1.00/step</td>' in page


def test_scan_without_profile_has_no_observed(traced: tuple[Path, Path]) -> None:
    tree, _ = traced
    report = json.loads(runner.invoke(app, ["scan", str(tree), "--format", "json", "-j", "1"]).stdout)
    assert all("observed" not in f for f in report["findings"])
    markdown = runner.invoke(app, ["scan", str(tree), "--format", "markdown", "-j", "1"]).stdout
    assert "| # | What runs with no debug env | file:line | Freq | Via | GPU sync | Est. cost / note |" in markdown


def test_scan_with_a_bad_profile_stops_before_the_scan(traced: tuple[Path, Path], tmp_path: Path) -> None:
    tree, _ = traced
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert "the file is empty" in _fails(["scan", str(tree), "--profile", str(empty), "--format", "json", "-j", "1"])


def test_trace_counts_a_generator_or_coroutine_once_a_call_not_once_a_resume(tmp_path: Path) -> None:
    tree = tmp_path / "gen"
    tree.mkdir()
    (tree / "prog.py").write_text(
        "import asyncio\n\n\ndef tokens():\n    yield 1\n    yield 2\n    yield 3\n\n\n"
        "async def fetch():\n    await asyncio.sleep(0)\n    await asyncio.sleep(0)\n    return 1\n\n\n"
        "def step():\n    list(tokens())\n    asyncio.run(fetch())\n\n\nfor _ in range(4):\n    step()\n")
    out = tmp_path / "gen.json"
    result = runner.invoke(app, ["trace", "--root", "step", "--tree", str(tree), "-o", str(out), "--",
                                 sys.executable, str(tree / "prog.py")])
    assert result.exit_code == 0, result.output
    calls = json.loads(out.read_text())["functions"][str(tree / "prog.py")]
    assert (calls["tokens"], calls["fetch"], calls["step"]) == ([4, 4], [4, 4], [4, 4])


GENERATION_LOOP = """\
class Generator:
    def prefill(self):
        return 1

    def decode_one(self, n):
        return n + 1

    def generate_tokens(self, steps):
        n = self.prefill()
        while n < steps:
            n = self.decode_one(n)
        return n


for _ in range(2):
    Generator().generate_tokens(5)
"""


def test_a_loop_root_and_its_prologue_are_not_claimed_per_step(tmp_path: Path) -> None:
    # a root marked `loop` runs its steps as the times round its `while`: the root itself and
    # what it calls before the loop run once a call, and the run agrees
    tree = tmp_path / "gen"
    tree.mkdir()
    (tree / "prog.py").write_text(GENERATION_LOOP)
    (tree / "cs-audit.yaml").write_text("hot_roots:\n  - {name: generate_tokens, frequency: step, loop: true}\n")
    out = tmp_path / "gen.json"
    result = runner.invoke(app, ["trace", "--root", "decode_one", "--tree", str(tree), "-o", str(out), "--",
                                 sys.executable, str(tree / "prog.py")])
    assert result.exit_code == 0, result.output
    agreement = _confirm(str(out), str(tree))["agreement"]
    assert (agreement["claimed_per_step"], agreement["claimed_ran_per_step"], agreement["functions_claimed_ran_not_per_step"]) == (
        1, 1, [])


def _newer_python() -> list[str]:
    """A Python 3.12+ interpreter that runs here (a pyenv shim may name one it will not run)."""
    import glob
    import subprocess

    found = [shutil.which(f"python3.{minor}") for minor in range(12, 16)]
    found += sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / "3.1[2-9]*" / "bin" / "python3")))
    for candidate in filter(None, found):
        check = subprocess.run([candidate, "-c", "import sys; assert sys.version_info >= (3, 12)"], capture_output=True)
        if check.returncode == 0:
            return [candidate]
    return []


NEWER = _newer_python()


@pytest.mark.skipif(not NEWER, reason="no Python 3.12+ interpreter on PATH")
@pytest.mark.parametrize("tracer", ["monitoring", "setprofile"])
def test_trace_under_python_3_12_counts_alike_with_either_tracer(traced: tuple[Path, Path], tmp_path: Path, tracer: str) -> None:
    tree, out_311 = traced
    out = tmp_path / f"{tracer}.json"
    result = runner.invoke(app, ["trace", "--tracer", tracer, "--root", "EngineCore.step", "--warmup", "1", "--tree", str(tree),
                                 "-o", str(out), "--", NEWER[0], str(tree / "run.py"), "6"])
    assert result.exit_code == 0, result.output
    data, before = json.loads(out.read_text()), json.loads(out_311.read_text())
    assert data["python"].startswith(("3.12", "3.13"))
    assert (data["steps"], data["functions"]) == (before["steps"], before["functions"])


def test_trace_runs_a_module_with_the_programs_own_imports(tmp_path: Path) -> None:
    # the recorder's folder holds report.py and join.py: the program's own must win
    tree = tmp_path / "modtree"
    (tree / "app").mkdir(parents=True)
    (tree / "report.py").write_text("MARK = 'the program report'\n")
    (tree / "app" / "__init__.py").write_text("")
    (tree / "app" / "__main__.py").write_text(
        "import sys\nimport report\n\n\ndef step():\n    return report.MARK\n\n\n"
        "for _ in range(3):\n    step()\nassert report.MARK == 'the program report'\nsys.exit(3)\n")
    out = tmp_path / "mod.json"
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        result = runner.invoke(app, ["trace", "--root", "step", "-o", str(out), "--", sys.executable, "-m", "app"])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 3, result.output  # the program's own exit status
    data = json.loads(out.read_text())
    assert data["steps"] == 3 and data["functions"][str(tree / "app" / "__main__.py")]["step"] == [3, 3]


def test_scan_with_a_profile_of_another_tree_warns_and_covers_nothing(traced: tuple[Path, Path], tmp_path: Path) -> None:
    tree, _ = traced
    raw = tmp_path / "other.txt"
    raw.write_text("main (otherpkg/main.py:3);work (otherpkg/work.py:9) 5\n")
    result = runner.invoke(app, ["scan", str(tree), "--profile", str(raw), "--format", "json", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert "--profile's files are none of" in result.stderr
    assert {f["observed"]["status"] for f in json.loads(result.stdout)["findings"]} == {"not-covered"}


def test_ctrl_c_stops_the_program_and_its_counts_are_written(tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    # a server that takes a while to shut down after Ctrl-C, as a real one does
    started = tmp_path / "started"
    (tmp_path / "serve.py").write_text(
        f"import pathlib, time\n\n\ndef step():\n    time.sleep(0.01)\n\n\npathlib.Path({str(started)!r}).touch()\n"
        "try:\n    while True:\n        step()\nexcept KeyboardInterrupt:\n    time.sleep(1)\n    raise\n")
    out = tmp_path / "serve.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen([sys.executable, "-m", "cs_audit", "trace", "--root", "step", "--tree", str(tmp_path), "-o", str(out),
                             "--", sys.executable, str(tmp_path / "serve.py")], start_new_session=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C does: the whole group
    assert proc.wait(timeout=30) == 130
    assert json.loads(out.read_text())["steps"] > 0
