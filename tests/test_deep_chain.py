"""A call chain thousands of functions deep: each finding's hot path stays short, the report
grows with the number of findings and not with the square of the chain's depth, ``why`` still
prints the whole chain, and running out of memory anyway is one line, not a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.joins.chains import SHOWN, TAIL

PROJECT = Path(__file__).resolve().parent.parent
runner = CliRunner()

#: functions in the chain below the root: deep enough that whole chains in every finding
#: (about DEPTH²/2 names) would dwarf the rest of the report
DEPTH = 400


def _chain(depth: int) -> str:
    """``ModelRunner.execute_model -> f0 -> f1 -> ... -> f{depth-1}``, each function logging."""
    lines = ["import logging", "", "logger = logging.getLogger(__name__)", ""]
    for i in range(depth):
        lines += [f"def f{i}(x):", "    logger.info('step %d', x)"]
        lines += [f"    return f{i + 1}(x)"] if i < depth - 1 else []
        lines.append("")
    lines += ["class ModelRunner:", "    def execute_model(self):", "        return f0(1)", ""]
    return "\n".join(lines)


def _deep_tree(tmp_path: Path) -> Path:
    root = tmp_path / "deep"
    root.mkdir()
    (root / "runner.py").write_text(_chain(DEPTH))
    return root


def test_a_deep_chain_gives_short_hot_paths_and_a_small_report(tmp_path: Path) -> None:
    root = _deep_tree(tmp_path)
    result = runner.invoke(app, ["scan", str(root), "-f", "json", "--no-cache", "--no-history", "-j", "1"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    emitters = {f["function"]: f for f in report["findings"] if f["rule"] == "default-on-emitter"}
    assert len(emitters) == DEPTH
    assert max(len(f["hot_path"]) for f in emitters.values()) == SHOWN
    # a short chain is whole; a long one is its root, then its last calls, and says how many it left out
    assert emitters["f3"]["hot_path"] == ["runner.ModelRunner.execute_model", "runner.f0", "runner.f1", "runner.f2", "runner.f3"]
    assert "hot_path_elided" not in emitters["f3"]
    deepest = emitters[f"f{DEPTH - 1}"]
    assert deepest["hot_path"] == ["runner.ModelRunner.execute_model", *(f"runner.f{i}" for i in range(DEPTH - TAIL, DEPTH))]
    assert deepest["hot_path_elided"] == DEPTH - TAIL
    # what each finding takes does not grow with its depth (whole chains: over 5 KB each on average)
    assert len(result.stdout) / len(report["findings"]) < 2_000


def test_the_html_says_how_many_calls_a_cut_chain_leaves_out(tmp_path: Path) -> None:
    root = _deep_tree(tmp_path)
    out = tmp_path / "audit.html"
    result = runner.invoke(app, ["scan", str(root), "-f", "html", "-o", str(out), "--no-cache", "--no-history", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert f"… {DEPTH - TAIL} functions left out (cs-audit why runner." in out.read_text()


def test_why_prints_the_whole_chain_the_report_cuts(tmp_path: Path) -> None:
    root = _deep_tree(tmp_path)
    line = _chain(DEPTH).splitlines().index(f"def f{DEPTH - 1}(x):") + 2  # its logger.info, 1-based
    result = runner.invoke(app, ["why", f"{root / 'runner.py'}:{line}", "--tree", str(root), "--no-cache", "-j", "1"])
    assert result.exit_code == 0, result.output
    called = [text.split()[1] for text in result.stdout.splitlines() if text.lstrip().startswith("->")]
    assert called == [f"runner.f{i}" for i in range(DEPTH)]


def test_running_out_of_memory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A MemoryError anywhere in a command (here while the JSON is rendered, where the
    quadratic reports ran out) ends it with one line on stderr: no traceback, no report."""
    root = _deep_tree(tmp_path)
    out = tmp_path / "report.json"
    program = ("import sys, cs_audit.render.json as j\n"
               "def render(result, observed=None): raise MemoryError\n"
               "j.render_json = render\n"
               "from cs_audit.cli import main\n"
               f"sys.argv = ['cs-audit', 'scan', {str(root)!r}, '-f', 'json', '-o', {str(out)!r}, '--no-cache', '--no-history', '-q']\n"
               "main()\n")
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [done.stderr.strip()] and done.stderr.startswith("cs-audit: out of memory:")
    assert not out.exists()
    assert not list(tmp_path.glob("cs-audit-traceback-*"))
