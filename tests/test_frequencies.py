"""A frequency is configuration: a project declares its own (a scheduler `tick`) with its rank,
words and per-step multiplier in ``[tool.cs-audit.costs.frequencies]``, gives it to a hot root,
and the report words and costs the root's sites by it."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import write_tree

TICK = {
    "pyproject.toml": """
        [tool.cs-audit]
        hot_roots = [{name = "on_tick", class = "*Clock", frequency = "tick"}]

        [tool.cs-audit.costs.frequencies.tick]
        rank = 5
        multiplier = 64
        symbol = "T"
        words = "on every scheduler tick"
        legend = "one tick of the scheduler's clock"
    """,
    "eng/clock.py": """
        import logging

        logger = logging.getLogger(__name__)


        class Clock:
            def on_tick(self, n):
                logger.info("tick %d", n)
    """,
}


def _scan(root: Path, form: str) -> str:
    result = CliRunner().invoke(app, ["scan", str(root), "-f", form, "--no-cache", "--no-history", "-j", "1"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_project_frequency_words_and_costs_its_root_sites(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TICK)
    findings = json.loads(_scan(root, "json"))["findings"]
    emitter = next(f for f in findings if f["rule"] == "default-on-emitter")
    assert (emitter["path"], emitter["frequency"]) == ("eng/clock.py", "tick")
    assert "runs on every scheduler tick with no debug env set" in emitter["message"]
    # one emitted record per event (rules/costs.yaml), 64 events per step
    assert emitter["estimated_cost_us_per_step"] == round(load_ruleset().costs_us["log_emitted"] * 64, 2)
    report = _scan(root, "markdown")
    assert "**tick** = one tick of the scheduler's clock." in report  # ranked above layer: listed last
    assert "layer ×32 (L), tick ×64 (T)." in report
    assert "| tick |" in report


def test_a_project_can_change_a_shipped_frequency_multiplier(tmp_path: Path) -> None:
    files = {**TICK, "pyproject.toml": '[tool.cs-audit]\nhot_roots = [{name = "on_tick", frequency = "request"}]\n'
                                       "[tool.cs-audit.costs.frequencies.request]\nmultiplier = 8\n"}
    emitter = next(f for f in json.loads(_scan(write_tree(tmp_path / "tree", files), "json"))["findings"]
                   if f["rule"] == "default-on-emitter")
    assert emitter["frequency"] == "request" and "runs once per request per step" in emitter["message"]
    assert emitter["estimated_cost_us_per_step"] == round(load_ruleset().costs_us["log_emitted"] * 8, 2)
