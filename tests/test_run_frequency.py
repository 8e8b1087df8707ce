"""How often a site runs (``joins.runs``, ``joins.reach``): a guard in the site's function or
up its chain keeps it out of §1, the report names the guard, and ``why`` shows it.  The
shapes one by one are the annotated ``fixtures/annotated/toyserve/rarity.py``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.testing import write_tree

runner = CliRunner()

ENGINE = '''
import functools
import logging

logger = logging.getLogger(__name__)
_KERNELS = {}


def get_kernel(key):
    kernel = _KERNELS.get(key)
    if kernel is not None:
        return kernel
    _KERNELS[key] = kernel = compile_kernel(key)
    return kernel


def compile_kernel(key):
    return publish(key)


def publish(key):
    logger.info("published kernel %s", key)
    return key


@functools.lru_cache(maxsize=None)
def tuned_config(n):
    logger.info("tuned config for %d", n)
    return n


class GPUModelRunner:
    def execute_model(self, batch):
        get_kernel(len(batch))
        tuned_config(len(batch))
        logger.info("step of %d", len(batch))
        return batch
'''


def _scan(root: Path) -> dict:
    return json.loads(runner.invoke(app, ["scan", str(root), "-f", "json", "--no-cache", "--no-history", "-j", "1"]).stdout)


def test_a_guard_two_calls_up_and_a_memoised_function_are_named_and_not_costed(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {"runner.py": ENGINE})
    found = {f["line"]: f for f in _scan(root)["findings"] if f["rule"] == "default-on-emitter"}
    published, tuned, step = found[21], found[27], found[35]
    assert step["path_kind"] == "normal" and step["estimated_cost_us_per_step"] > 0 and "guard" not in step
    assert published["path_kind"] == "rare" and published["estimated_cost_us_per_step"] == 0
    assert published["guard"] == {"path": "runner.py", "line": 10, "depth": 2}
    assert published["path_reason"] == "on a cache miss (the branch stores into `_KERNELS`) (runner.py:10, 2 calls up)"
    assert published["cost_if_every_time_us"] == step["estimated_cost_us_per_step"]
    assert tuned["guard"] == {"path": "runner.py", "line": 26, "depth": 0}
    assert tuned["path_reason"].startswith("memoised by `@lru_cache`")


def test_section_1_ranks_only_what_runs_every_time_and_lists_the_rest_with_the_guard(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {"runner.py": ENGINE})
    out = tmp_path / "audit.md"
    runner.invoke(app, ["scan", str(root), "-f", "markdown", "-o", str(out), "--no-cache", "--no-history", "-j", "1"])
    section = out.read_text().split("## 1.", 1)[1].split("\n## ", 1)[0]
    ranked, _, reachable = section.partition("### Reachable, not every step")
    assert "**Verdict:**" in ranked and "2 more default-ON statements are reachable" in ranked
    assert "step of %d" in ranked and "published kernel" not in ranked and "tuned config" not in ranked
    assert "published kernel" in reachable and "runner.py:10, 2 calls up" in reachable.replace("\\_", "_")
    assert "tuned config" in reachable


def test_why_names_the_guard_up_the_chain(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {"runner.py": ENGINE})
    rare = runner.invoke(app, ["why", f"{root / 'runner.py'}:21", "--no-cache"]).stdout
    assert "not every time: rare path, on a cache miss (the branch stores into `_KERNELS`)" in rare
    assert "runner.py:10, 2 calls up" in rare and "-> runner.publish" in rare
    hot = runner.invoke(app, ["why", f"{root / 'runner.py'}:35", "--no-cache"]).stdout
    assert "hot (step) by default" in hot


# A kernel loader memoised by a project's own decorator, imported from another module of the
# package and typed `(F) -> F` (a call lands on the loader itself, not on the wrapper), one
# helper below the function the hot code calls.
MEMO_PACKAGE = {
    "toyjit/__init__.py": "",
    "toyjit/utils/__init__.py": "from toyjit.utils.common import cache_once, load_kernel\n",
    "toyjit/utils/common.py": '''import functools
import os
from typing import TypeVar

F = TypeVar("F")


def cache_once(fn: F) -> F:
    built = {}

    @functools.wraps(fn)
    def wrapper(*args):
        if args not in built:
            built[args] = fn(*args)
        return built[args]

    return wrapper


def load_kernel(name):
    return os.environ.get("TOYJIT_FLAGS", "") + name
''',
    "toyjit/ops.py": '''from toyjit.utils import cache_once, load_kernel


@cache_once
def _kernel_module(dtype):
    return load_kernel(f"rope_{dtype}")


def fused_rope(x):
    module = _kernel_module(x.dtype)
    return module, x
''',
    # run eagerly: no graph replay decides how often the forward's Python runs, the memo does
    "pyproject.toml": '[tool.cs-audit]\ndeployment = {features = ["eager"]}\n',
    "toyjit/model.py": '''from toyjit.ops import fused_rope


class ToyAttention:
    def forward(self, x):
        return fused_rope(x)
''',
}


def _memo_site(tmp_path: Path) -> dict:
    report = _scan(write_tree(tmp_path, MEMO_PACKAGE))
    # the read is reported where the hot code calls the first helper on the way to it
    return next(f for f in report["findings"] if f["rule"] == "env-read-hot" and f["path"] == "toyjit/model.py")


def test_a_helper_memoised_by_a_decorator_of_another_module_reads_once_per_key(tmp_path: Path) -> None:
    site = _memo_site(tmp_path)
    assert site["path_kind"] == "rare", site
    assert "cache_once" in site["path_reason"] and "common.py" in site["path_reason"]


def test_without_memoised_calls_the_loader_call_is_a_per_layer_read(tmp_path: Path, monkeypatch) -> None:
    import cs_audit.analysis.env_read_hot as env_read_hot

    monkeypatch.setattr(env_read_hot, "through_memo", lambda model, path, site, run, rs: run)
    assert _memo_site(tmp_path)["path_kind"] == "normal"


def _dispatch_problems() -> list[str]:
    from cs_audit.testing import check_annotations

    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "annotated" / "toyserve" / "rarity.py"
    text = fixture.read_text(encoding="utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if '"extend step' in row)
    return [p for p in check_annotations({"toyserve/rarity.py": text}) if f":{line}:" in p]


def test_a_dispatch_before_a_final_raise_is_no_error_path() -> None:
    assert _dispatch_problems() == []


def test_without_dispatches_the_code_before_a_final_raise_is_taken_for_its_error_path(monkeypatch) -> None:
    import cs_audit.extract.paths as paths

    monkeypatch.setattr(paths, "_returns_normally_first", lambda stmts: False)
    assert _dispatch_problems()


def _rarity_problems() -> list[str]:
    from cs_audit.testing import check_annotations

    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "annotated" / "toyserve" / "rarity.py"
    return check_annotations({"toyserve/rarity.py": fixture.read_text(encoding="utf-8")})


def test_without_rejections_a_checks_warning_before_return_true_is_a_normal_path(monkeypatch) -> None:
    import cs_audit.extract.paths as paths

    monkeypatch.setattr(paths, "_rejects", lambda rest: None)
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "annotated" / "toyserve" / "rarity.py"
    line = next(i for i, row in enumerate(fixture.read_text().splitlines(), 1) if '"batch of %d rejected' in row)
    assert any(problem.startswith(f"toyserve/rarity.py:{line}:") for problem in _rarity_problems())


def test_without_failures_a_checks_warning_after_return_true_is_a_normal_path(monkeypatch) -> None:
    import cs_audit.extract.paths as paths

    assert _rarity_problems() == []
    monkeypatch.setattr(paths, "_fails", lambda rest: None)
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "annotated" / "toyserve" / "rarity.py"
    line = next(i for i, row in enumerate(fixture.read_text().splitlines(), 1) if '"batch of %d too large to cache' in row)
    assert [problem for problem in _rarity_problems() if problem.startswith("toyserve/rarity.py:")] == [
        p for p in _rarity_problems() if p.startswith(f"toyserve/rarity.py:{line}:")] != []


def test_without_capture_and_prefill_in_the_rare_tests_their_branches_are_per_step(monkeypatch) -> None:
    import re
    from dataclasses import replace

    from cs_audit import ruleset as ruleset_module

    shipped = ruleset_module.load_ruleset()
    pattern = shipped.rare_test_re.pattern.replace("|capturing|capture_mode|in_capture|graph_capture|for_capture", "")
    pattern = pattern[:pattern.index(")|^(") + 1]  # and without the prefill names
    assert pattern != shipped.rare_test_re.pattern
    narrower = replace(shipped, rare_test_re=re.compile(pattern))
    monkeypatch.setattr(ruleset_module, "load_ruleset", lambda *a, **k: narrower)
    monkeypatch.setattr("cs_audit.api.load_ruleset", lambda *a, **k: narrower)
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "annotated" / "toyserve" / "rarity.py"
    rows = fixture.read_text().splitlines()
    lines = [next(i for i, row in enumerate(rows, 1) if text in row) for text in ('"capturing a graph', '"prefill of', '"chunk of')]
    problems = _rarity_problems()
    assert all(any(problem.startswith(f"toyserve/rarity.py:{line}:") for problem in problems) for line in lines)


def test_a_negated_event_name_is_no_event(monkeypatch) -> None:
    import cs_audit.extract.paths as paths

    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "annotated" / "toyserve" / "rarity.py"
    line = next(i for i, row in enumerate(fixture.read_text().splitlines(), 1) if '"replaying a graph' in row)
    # every name of the test, negated or not, taken for the event: the replay is called rare
    monkeypatch.setattr(paths, "_event_names", lambda test, events, holds=True: [n for n in paths._test_names(test) if events.search(n)])
    assert [p for p in _rarity_problems() if p.startswith(f"toyserve/rarity.py:{line}:")]


# ---------------------------------------------------------------- a model's forward replayed as a graph
_REPLAYED = {"engine/runner.py": '''
import logging

logger = logging.getLogger(__name__)


def note_batch(n):
    logger.info(f"batch of {n}")


class ToyModelRunner:
    def execute_model(self, batch):
        note_batch(len(batch))
        return self.layer.forward(batch)


class ToyDecoderLayer:
    def forward(self, x):
        logger.info(f"layer input {x}")
        note_batch(1)
        return self.project(x)

    def project(self, x):
        logger.info(f"projected {x}")
        return x
'''}


def _replayed_runs(tmp_path: Path, deployment: str = "") -> dict[int, tuple[str, str, str]]:
    files = {**_REPLAYED, **({"pyproject.toml": f"[tool.cs-audit]\n{deployment}\n"} if deployment else {})}
    root = write_tree(tmp_path / "t", files)
    result = runner.invoke(app, ["scan", str(root), "--format", "json", "--no-cache", "--no-history", "-j", "1"])
    assert result.exit_code == 0, result.output
    return {f["line"]: (f["frequency"], f["path_kind"], f.get("path_reason") or "")
            for f in json.loads(result.stdout)["findings"] if f["rule"] == "default-on-emitter"}


def test_a_model_forward_replayed_as_a_graph_runs_its_python_only_at_capture_and_prefill(tmp_path: Path) -> None:
    runs = _replayed_runs(tmp_path)
    # the layer's own line and what only the layer calls: rare, the guard at the layer's forward
    assert runs[18][:2] == ("layer", "rare") and "captured graph" in runs[18][2] and "runner.py:17)" in runs[18][2]
    assert runs[23][:2] == ("layer", "rare") and "runner.py:17, 1 call up" in runs[23][2]
    # a helper the runner calls too runs every step, as often as the runner calls it
    assert runs[7][:2] == ("step", "normal")


@pytest.mark.parametrize("deployment", ['deployment = {features = ["eager"]}', 'deployment = {platform = "cpu"}'])
def test_an_eager_deployment_or_a_platform_without_graphs_runs_the_forward_every_step(tmp_path: Path, deployment: str) -> None:
    runs = {line: run[:2] for line, run in _replayed_runs(tmp_path, deployment).items()}
    assert runs == {7: ("layer", "normal"), 18: ("layer", "normal"), 23: ("layer", "normal")}


def test_the_report_says_the_forward_is_replayed(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", _REPLAYED)
    out = tmp_path / "audit.md"
    result = runner.invoke(app, ["scan", str(root), "-o", str(out), "--no-cache", "--no-history", "-j", "1"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "| `feature=eager` | `off` |" in text and "Python of 2 hot sites only a model's `forward` reaches" in text
    section1 = text.split("\n## 1")[1].split("### Reachable, not every step")[0]
    assert "runner.py:7" in section1 and "runner.py:18" not in section1


_REPLAYED_EDGES = {"engine/runner.py": '''
import logging

logger = logging.getLogger(__name__)


def shared(n):
    logger.info(f"shared {n}")


def check_unsupported(n):
    logger.info(f"checking {n}")


class ToyDecoderLayer:
    def forward(self, x):
        shared(1)
        return x


class ToyModelRunner:
    def __init__(self):
        self.layer = ToyDecoderLayer()

    def execute_model(self, batch):
        check_unsupported(batch)
        if batch.forward_mode.is_extend():
            shared(len(batch))
        return self.layer.forward(batch)
'''}


def test_what_the_runner_calls_only_past_a_guard_and_the_replay_calls_is_not_per_step(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", _REPLAYED_EDGES)
    result = runner.invoke(app, ["scan", str(root), "--format", "json", "--no-cache", "--no-history", "-j", "1"])
    runs = {f["line"]: f for f in json.loads(result.stdout)["findings"] if f["rule"] == "default-on-emitter"}
    # the runner calls `shared` on a prefill only, the layer's forward inside the replayed graph
    assert runs[7]["path_kind"] == "rare"
    # the replayed root's chain starts at the replayed root, not at the runner that calls it
    assert runs[7]["hot_path"][0].endswith("ToyDecoderLayer.forward")
    # a check named for what it checks is no failure handler: it runs every step
    assert (runs[11]["frequency"], runs[11]["path_kind"]) == ("step", "normal")


def _rarity_lines(*texts: str) -> list[int]:
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "annotated" / "toyserve" / "rarity.py"
    rows = fixture.read_text().splitlines()
    return [next(i for i, row in enumerate(rows, 1) if text in row) for text in texts]


def test_without_events_a_test_must_fail_for_what_follows_its_return_is_per_step(monkeypatch) -> None:
    import cs_audit.extract.paths as paths

    original = paths._event_names
    monkeypatch.setattr(paths, "_event_names", lambda test, events, holds=True: original(test, events) if holds else [])
    problems = _rarity_problems()
    for line in _rarity_lines('"deferred copy', '"shared reads'):
        assert any(p.startswith(f"toyserve/rarity.py:{line}:") for p in problems), line


def test_without_past_events_a_step_after_warm_up_is_taken_for_warm_up(monkeypatch) -> None:
    import cs_audit.extract.paths as paths

    monkeypatch.setattr(paths, "_PAST_EVENT", re.compile("$^"))
    (line,) = _rarity_lines('"warm step')
    assert any(p.startswith(f"toyserve/rarity.py:{line}:") for p in _rarity_problems())


def test_without_wait_clocks_a_log_past_a_waits_bound_is_per_step(monkeypatch) -> None:
    import cs_audit.extract.paths as paths

    assert _rarity_problems() == []
    monkeypatch.setattr(paths, "_waited_past", lambda test, active, elapsed: None)
    text = (Path(__file__).resolve().parent.parent / "fixtures" / "annotated" / "toyserve" / "rarity.py").read_text()
    lines = [i for i, row in enumerate(text.splitlines(), 1) if '"waiting for a peer' in row or '"stalled on' in row]
    problems = _rarity_problems()
    assert len(lines) == 2 and all(any(p.startswith(f"toyserve/rarity.py:{n}:") for p in problems) for n in lines)
