"""Which rules a scan reports (#22): --select / --extend-select / --ignore, on the command
line and in the configuration, per-file ignores, and `# cs-audit: ignore-file[rule] reason`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.testing import write_tree

runner = CliRunner()
RUNNER = """
    import logging, os
    logger = logging.getLogger(__name__)


    class Runner:
        def execute_model(self, batch):
            logger.info(f"step {batch}")
            return os.environ.get("MY_DBG")
"""
TREE = {"engine/__init__.py": "", "engine/runner.py": RUNNER, "tools/runner.py": RUNNER}
EVERY = [
    ("engine/runner.py", "default-on-emitter"), ("engine/runner.py", "eager-format"), ("engine/runner.py", "env-read-hot"),
    ("tools/runner.py", "default-on-emitter"), ("tools/runner.py", "eager-format"), ("tools/runner.py", "env-read-hot"),
]


def _findings(root: Path, *args: str) -> list[tuple[str, str]]:
    result = runner.invoke(app, ["scan", str(root), "-f", "json", "-j", "1", "--no-history", *args])
    assert result.exit_code == 0, result.output
    return [(f["path"], f["rule"]) for f in json.loads(result.stdout)["findings"]]


def test_select_ignore_and_extend_select_on_the_command_line(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    assert _findings(root) == EVERY
    assert _findings(root, "--select", "env-read-hot") == [x for x in EVERY if x[1] == "env-read-hot"]
    assert _findings(root, "--select", "env-read-hot,eager-format", "--ignore", "eager-format") == [
        x for x in EVERY if x[1] == "env-read-hot"]
    assert _findings(root, "--select", "env-read-hot", "--extend-select", "eager-format") == [
        x for x in EVERY if x[1] != "default-on-emitter"]
    assert _findings(root, "--ignore", "ALL", "--extend-select", "default-on-emitter") == []  # ignore wins, as ruff's
    bad = runner.invoke(app, ["scan", str(root), "-f", "json", "--ignore", "env-read-hat"])
    assert bad.exit_code == 2 and "--ignore: unknown rule id 'env-read-hat'" in bad.output


def test_selection_and_per_file_ignores_in_the_configuration(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {**TREE, "pyproject.toml": """
        [tool.cs-audit]
        ignore = ["eager-format"]
        [tool.cs-audit.per_file_ignores]
        "tools/*" = ["ALL"]
        "engine/runner.py" = ["default-on-emitter"]
    """})
    assert _findings(root) == [("engine/runner.py", "env-read-hot")]
    # --select replaces the configuration's select, not its ignores
    assert _findings(root, "--select", "eager-format,env-read-hot") == [("engine/runner.py", "env-read-hot")]
    (root / "pyproject.toml").write_text('[tool.cs-audit]\nselect = ["env-read-hot"]\n[tool.cs-audit.per_file_ignores]\n"x/*" = ["typo"]\n')
    bad = runner.invoke(app, ["scan", str(root), "-f", "json"])
    assert bad.exit_code == 2 and "per_file_ignores['x/*']: unknown rule id 'typo'" in bad.output
    (root / "pyproject.toml").write_text('[tool.cs-audit]\nselect = "env-read-hot"\n')
    bad = runner.invoke(app, ["scan", str(root), "-f", "json"])
    assert bad.exit_code == 2 and "select must be a list of rule ids" in bad.output


def test_ignore_file_comment_suppresses_its_rules_in_the_whole_file(tmp_path: Path) -> None:
    header = "# cs-audit: ignore-file[eager-format, env-read-hot] a debugging tool, never on the serving path\n"
    root = write_tree(tmp_path / "tree", {**TREE, "tools/runner.py": header + RUNNER.replace("\n    ", "\n").lstrip("\n"),
                                          "tools/other.py": "# cs-audit: ignore-file[sync-in-debug] stale\nx = 1\n",
                                          "tools/bad.py": "# cs-audit: ignore-file reason but no rule\n"})
    result = runner.invoke(app, ["check", str(root), "-f", "json", "-j", "1"])
    report = json.loads(result.stdout)
    check = report["check"]
    by_fingerprint = {f["fingerprint"]: (f["path"], f["rule"]) for f in report["findings"]}
    suppressed = sorted(by_fingerprint[s["fingerprint"]] for s in check["suppressed"])
    assert suppressed == [("tools/runner.py", "eager-format"), ("tools/runner.py", "env-read-hot")]
    notes = {(n["path"], n["id"]): n["message"] for n in check["notes"]}
    assert "matches no finding in this file" in notes[("tools/other.py", "unused-suppression")]
    assert "ignore-file[rule-id]" in notes[("tools/bad.py", "invalid-suppression")]
    assert {(f["path"], f["rule"]) for f in check["new"]} == {x for x in EVERY if x[0] == "engine/runner.py"} | {
        ("tools/runner.py", "default-on-emitter")}
    # a rule the scan does not report makes no suppression unused
    quiet = runner.invoke(app, ["check", str(root), "-f", "json", "-j", "1", "--ignore", "sync-in-debug"])
    assert ("tools/other.py", "unused-suppression") not in {(n["path"], n["id"]) for n in json.loads(quiet.stdout)["check"]["notes"]}


def test_a_rule_the_check_does_not_report_keeps_its_baseline_entries(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    base = tmp_path / "b.json"
    assert runner.invoke(app, ["baseline", str(root), "-o", str(base), "-j", "1"]).exit_code == 0
    before = base.read_text()
    result = runner.invoke(app, ["check", str(root), "-b", str(base), "--update-baseline", "--ignore", "env-read-hot",
                                 "-f", "json", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["check"]["fixed"] == [] and base.read_text() == before
