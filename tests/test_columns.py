"""Columns (#22, problem 7): every finding says where its site starts and ends on its lines,
in characters, 1-based, the end just past the site (as ruff and SARIF count)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.testing import write_tree

runner = CliRunner()
TREE = {
    "engine/__init__.py": "",
    "engine/runner.py": """
        import logging, os
        logger = logging.getLogger(__name__)


        class Runner:
            def execute_model(self, batch):
                é = 1; logger.info(f"step {batch} {é}")
                if os.environ.get("MY_DBG"):
                    pass
                x = (1,
                     os.environ.get("LATE"))
                open("/tmp/out/x.txt", "w").write(str(x))
                return x
    """,
}
#: (rule, line, col, end_line, end_col): a non-ASCII name before the call counts one column,
#: a compound statement's header as written (no added parentheses), a read that starts on
#: a later line of its statement spans from the statement's start
EXPECTED = [
    ("default-on-emitter", 7, 16, 7, 48),
    ("eager-format", 7, 16, 7, 48),
    ("env-read-hot", 8, 12, 8, 36),
    ("env-read-hot", 10, 9, 11, 36),
    ("hardcoded-output-path", 12, 14, 12, 30),
    ("per-call-open", 12, 9, 12, 36),
]


def _scan(root: Path, *args: str) -> str:
    result = runner.invoke(app, ["scan", str(root), "-j", "1", "--no-cache", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_json_findings_carry_columns(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    findings = json.loads(_scan(root, "-f", "json"))["findings"]
    assert [(f["rule"], f["line"], f["col"], f["end_line"], f["end_col"]) for f in findings] == EXPECTED
    source = (root / "engine/runner.py").read_text().splitlines()
    opened = next(f for f in findings if f["rule"] == "per-call-open")
    assert source[opened["line"] - 1][opened["col"] - 1:opened["end_col"] - 1] == 'open("/tmp/out/x.txt", "w")'


def test_sarif_regions_and_the_flat_list_carry_columns(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    results = json.loads(_scan(root, "-f", "sarif"))["runs"][0]["results"]
    regions = [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]) for r in results]
    assert ("env-read-hot", {"startLine": 10, "startColumn": 9, "endLine": 11, "endColumn": 36}) in regions
    assert ("env-read-hot", {"startLine": 8, "startColumn": 12, "endColumn": 36}) in regions
    out = tmp_path / "out"
    out.mkdir()
    text = _scan(root, "-o", str(out / "r.md"))
    assert f"{root}/engine/runner.py:7:16: default-on-emitter " in text
    assert f"{root}/engine/runner.py:12:14: hardcoded-output-path " in text


def test_grouped_gitlab_and_junit_outputs(tmp_path: Path) -> None:
    from xml.etree import ElementTree

    root = write_tree(tmp_path / "tree", TREE)
    grouped = _scan(root, "-f", "grouped").splitlines()
    assert grouped[0] == "engine/runner.py:" and grouped[1].startswith("  7:16  default-on-emitter `logger.info`")
    gitlab = json.loads(_scan(root, "-f", "gitlab"))
    assert [(g["check_name"], g["location"]["positions"]["begin"]) for g in gitlab][:2] == [
        ("default-on-emitter", {"line": 7, "column": 16}), ("eager-format", {"line": 7, "column": 16})]
    assert {g["severity"] for g in gitlab} == {"major", "minor", "info"} and all(g["fingerprint"] for g in gitlab)
    suites = ElementTree.fromstring(_scan(root, "-f", "junit"))
    cases = suites.findall("./testsuite/testcase")
    assert suites.get("tests") == "6" and len(cases) == 6 and all(c.find("failure") is not None for c in cases)
    assert cases[0].get("name") == "default-on-emitter engine/runner.py:7:16"

