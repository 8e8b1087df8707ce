"""A reader per profile format, on profiles each test makes: the engine of
fixtures/confirm_engine run under cProfile, and the other formats written as their tools
document them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.confirm import jsonstream
from cs_audit.confirm.profiles import read_profile

runner = CliRunner()
ENGINE = Path(__file__).resolve().parent.parent / "fixtures" / "confirm_engine"
#: the engine's per-step log line, its once-only layout read, and a never-imported module's line
PER_STEP, ONCE, UNLOADED = ("engine/core.py", 33), ("engine/core.py", 30), ("engine/verifier.py", 13)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("profiles") / "engine_tree"
    shutil.copytree(ENGINE, root)
    return root


def _statuses(profile: Path, tree: Path, *args: str) -> dict:
    result = runner.invoke(app, ["confirm", str(profile), str(tree), "--format", "json", "-j", "1", *args])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    report["by_site"] = {(f["path"], f["line"]): f["observed"] for f in report["findings"]}
    return report


def test_pstats_of_cprofile_counts_calls_and_places_decorated_and_nested_functions(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "run.py", "4"], cwd=tree, check=True,
                   capture_output=True)
    report = _statuses(out, tree, "--root", "EngineCore.step")
    assert report["profile"]["format"] == "pstats" and report["profile"]["steps"] == 4
    assert report["by_site"][PER_STEP] == {"calls_per_step": 1.0, "status": "per-step"}
    assert report["by_site"][ONCE] == {"calls_per_step": 0.25, "status": "not-per-step"}
    assert report["by_site"][UNLOADED]["status"] == "not-covered"
    # step, _record, execute_model, the decorated _forward (its code starts at the decorator) and
    # the nested scale in it: all five ran per step and were placed
    agreement = report["agreement"]
    assert {k: v for k, v in agreement.items() if not k.startswith("functions_")} == {
        "claimed_per_step": 7, "claimed_ran": 7, "claimed_ran_per_step": 6, "ran_per_step": 6, "ran_per_step_claimed": 6}


def test_py_spy_raw_is_sampled_and_only_says_ran(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "raw.txt"
    out.write_text(
        "process 17:\"python run.py\";<module> (run.py:11);step (engine/core.py:25);_record (engine/core.py:33) 7\n"
        "<module> (run.py:11);step (engine/core.py:24);execute_model (engine/runner.py:11);_forward (engine/runner.py:18) 3\n"
        "<module> (run.py:11);step (engine/core.py) 1\n"  # --nolineno: the name alone places it
        "<module> (/usr/lib/python3.11/logging/__init__.py:1500) 2\n")
    profile = read_profile(out)
    assert profile.format == "py-spy-raw" and profile.sampled and profile.samples == 13
    report = _statuses(out, tree)
    assert report["by_site"][PER_STEP] == {"calls_per_step": None, "status": "ran"}
    assert report["by_site"][("engine/core.py", 24)]["status"] == "ran"  # step: in 11 samples
    assert report["by_site"][ONCE]["status"] == "unseen"  # in no sample: not evidence it never ran
    assert report["by_site"][UNLOADED]["status"] == "not-covered"
    assert report["agreement"] is None and report["files_outside"] == 1
    text = runner.invoke(app, ["confirm", str(out), str(tree), "-j", "1"]).stdout
    assert "a sampling profile gives time shares, not calls" in text


def _speedscope(frames: list[dict], profiles: list[dict]) -> str:
    # py-spy writes the profiles before the shared frames
    return json.dumps({"$schema": "https://www.speedscope.app/file-format-schema.json", "profiles": profiles,
                       "shared": {"frames": frames}, "exporter": "py-spy@0.4.0"})


FRAMES = [{"name": "<module>", "file": "run.py", "line": 11}, {"name": "step", "file": "engine/core.py", "line": 25},
          {"name": "_record", "file": "engine/core.py", "line": 33}, {"name": "execute_model", "file": "engine/runner.py", "line": 10}]


def test_speedscope_sampled(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "profile.speedscope.json"
    out.write_text(_speedscope(FRAMES, [{"type": "sampled", "name": "thread 1", "unit": "none", "startValue": 0,
                                        "endValue": 3, "samples": [[0, 1, 2], [0, 1, 3], [0, 1, 2]], "weights": [1, 1, 1]}]))
    profile = read_profile(out)
    assert (profile.format, profile.samples) == ("speedscope", 3)
    report = _statuses(out, tree)
    assert report["by_site"][PER_STEP]["status"] == "ran" and report["by_site"][ONCE]["status"] == "unseen"


def test_speedscope_evented_opens_are_calls(tree: Path, tmp_path: Path) -> None:
    events = []
    for at in range(3):  # three steps, each recording once
        events += [{"type": "O", "frame": 1, "at": 10 * at}, {"type": "O", "frame": 2, "at": 10 * at + 1},
                   {"type": "C", "frame": 2, "at": 10 * at + 2}, {"type": "C", "frame": 1, "at": 10 * at + 3}]
    out = tmp_path / "evented.json"
    out.write_text(_speedscope(FRAMES, [{"type": "evented", "name": "main", "unit": "microseconds", "startValue": 0,
                                        "endValue": 30, "events": events}]))
    report = _statuses(out, tree, "--root", "step")
    assert report["profile"]["sampled"] is False and report["profile"]["steps"] == 3
    assert report["by_site"][PER_STEP] == {"calls_per_step": 1.0, "status": "per-step"}
    assert report["by_site"][ONCE]["status"] == "never-ran"


def test_viztracer_json(tree: Path, tmp_path: Path) -> None:
    core, runner_py = tree / "engine" / "core.py", tree / "engine" / "runner.py"
    events = [{"ph": "X", "name": f"<module> ({tree / 'run.py'}:1)", "ts": 0, "dur": 100, "pid": 1, "tid": 1}]
    for step in range(4):
        events += [{"ph": "X", "name": f"EngineCore.step ({core}:21)", "ts": step * 10, "dur": 9, "pid": 1, "tid": 1},
                   {"ph": "X", "name": f"ModelRunner._forward ({runner_py}:13)", "ts": step * 10 + 1, "dur": 1, "pid": 1, "tid": 1},
                   {"ph": "X", "name": f"EngineCore._record ({core}:32)", "ts": step * 10 + 2, "dur": 1, "pid": 1, "tid": 1}]
    events.append({"ph": "X", "name": f"EngineCore._load_layout ({core}:29)", "ts": 1, "dur": 1, "pid": 1, "tid": 1})
    out = tmp_path / "result.json"
    out.write_text(json.dumps({"traceEvents": events, "viztracer_metadata": {"version": "1.0.0"}}))
    report = _statuses(out, tree, "--root", "EngineCore.step")
    assert report["profile"]["format"] == "viztracer" and report["profile"]["steps"] == 4
    assert report["by_site"][PER_STEP] == {"calls_per_step": 1.0, "status": "per-step"}
    assert report["by_site"][ONCE] == {"calls_per_step": 0.25, "status": "not-per-step"}
    assert report["by_site"][("engine/runner.py", 10)]["status"] == "never-ran"  # execute_model: not in the trace


def test_torch_profiler_chrome_trace_counts_profiler_steps(tree: Path, tmp_path: Path) -> None:
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
              {"ph": "X", "cat": "python_function", "name": "run.py(1): <module>", "ts": 0, "dur": 50, "pid": 1, "tid": 1}]
    for step in range(2):
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "ts": step * 10, "dur": 9, "pid": 1, "tid": 1},
                   {"ph": "X", "cat": "python_function", "name": "engine/core.py(21): step", "ts": step * 10, "dur": 8, "pid": 1, "tid": 1},
                   {"ph": "X", "cat": "python_function", "name": "engine/core.py(32): _record", "ts": step * 10 + 1, "dur": 1, "pid": 1, "tid": 1},
                   {"ph": "X", "cat": "python_function", "name": "<built-in method relu of type object at 0x7f>", "ts": 3, "dur": 1, "pid": 1, "tid": 1}]
    out = tmp_path / "trace.json"
    out.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [], "with_stack": 1, "traceEvents": events}))
    report = _statuses(out, tree)
    assert report["profile"]["format"] == "torch" and report["profile"]["steps"] == 2
    assert report["by_site"][PER_STEP] == {"calls_per_step": 1.0, "status": "per-step"}


def test_a_large_json_profile_is_read_item_by_item(tmp_path: Path) -> None:
    frame = {"name": "_record", "file": "engine/core.py", "line": 33}
    out = tmp_path / "big.speedscope.json"
    sample = [0] * 200
    with out.open("w") as handle:  # about 12 MB of samples, before the frames
        handle.write('{"$schema": "https://www.speedscope.app/file-format-schema.json", "profiles": [{"type": "sampled", "samples": [')
        handle.write(",".join([json.dumps(sample)] * 20_000))
        handle.write('], "weights": [' + ",".join(["1"] * 20_000) + ']}], "shared": {"frames": [' + json.dumps(frame) + "]}}")
    assert out.stat().st_size > 10_000_000
    tracemalloc.start()
    try:
        profile = read_profile(out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert profile.samples == 20_000 and list(profile.counts.values()) == [[20_000, 20_000]]
    assert peak < 8_000_000, peak  # a whole json.load of it takes several times the file's size


def test_the_stream_reader_reads_across_chunk_ends(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK", 5)
    doc = {"skip": [{"x": "]}\\\"["}, 123456789], "traceEvents": [{"ph": "X", "name": "f (/a/b.py:3)"}, 1.5e10, "s"]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with path.open() as handle:
        assert [v for _, v in jsonstream.items(handle, {("traceEvents",)})] == doc["traceEvents"]


def test_a_root_named_by_a_function_name_counts_only_the_trees_function(tree: Path, tmp_path: Path) -> None:
    # pstats names functions without their class: a `step` outside the tree is no step of it
    driver = tmp_path / "driver.py"
    driver.write_text(f"import runpy, sys\n\n\ndef step():\n    pass\n\n\nfor _ in range(10):\n    step()\n"
                      f"sys.argv = ['run.py', '4']\nsys.path.insert(0, {str(tree)!r})\n"
                      f"runpy.run_path({str(tree / 'run.py')!r}, run_name='__main__')\n")
    out = tmp_path / "driver.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), str(driver)], check=True, capture_output=True)
    report = _statuses(out, tree, "--root", "EngineCore.step")
    assert report["profile"]["steps"] == 4
    assert report["by_site"][PER_STEP] == {"calls_per_step": 1.0, "status": "per-step"}
