"""`cs-audit baseline` / `cs-audit check`: the CI gate, suppressions, exit codes."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import cs_audit.cli  # noqa: F401  (registers every command)
from cs_audit.ci.gate import (
    ALL,
    Baseline,
    default_gates,
    match_findings,
    parse_diff,
    parse_gates,
    unquote_path,
)
from cs_audit.ci.suppress import apply_suppressions
from cs_audit.cli import app
from cs_audit.extract.suppressions import parse_comment, suppressions_in
from cs_audit.model import AuditResult, BaselineEntry, Finding, Gates
from cs_audit.ruleset import load_ruleset
from tests.gitrepo import HOT_ENGINE, commit_files, git, make_repo
from tests.test_cli_like_ruff import cs_audit, one_line

runner = CliRunner()
PROJECT = Path(__file__).resolve().parent.parent

BASE = HOT_ENGINE
# the commit under test: an ungated f-string log in the hot step function (line 11)
LOGGED = BASE.replace(
    "        out = self.forward(batch)\n",
    "        out = self.forward(batch)\n        logger.info(f\"step {batch} done\")\n",
)
# the same code with the two methods swapped: only moved
SWAPPED = '''\
import logging
import os

logger = logging.getLogger(__name__)
_TRACE = os.environ.get("ENGINE_TRACE", "0") == "1"


class Runner:
    def forward(self, batch):
        return batch

    def execute_model(self, batch):
        out = self.forward(batch)
        logger.info(f"step {batch} done")
        if _TRACE:
            logger.debug("trace %s", out)
        return out
'''
# the class moved to another module; the old one re-exports it
MOVED_OUT = "from engine.model_runner import Runner  # noqa: F401\n"
LOG_LINE = 11


def cli(*args: str):
    return runner.invoke(app, [*args])


def commit(repo: Path, day: int, subject: str, files: dict[str, str | None]) -> str:
    """One more commit in a `make_repo` repository (day = days after START)."""
    return commit_files(repo, subject, files, day)


def check_json(*args: str) -> tuple[int, dict]:
    result = cli("check", *args, "-j", "1", "--format", "json")
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """init → add the ungated log → swap methods → move the class to another file."""
    return make_repo(tmp_path, [
        ("init", {"engine/__init__.py": "", "engine/runner.py": BASE}),
        ("add step log", {"engine/runner.py": LOGGED}),
        ("swap methods", {"engine/runner.py": SWAPPED}),
        ("move runner", {"engine/runner.py": MOVED_OUT, "engine/model_runner.py": SWAPPED}),
    ])


# ---------------------------------------------------------------------------
# the two required gates


def test_new_ungated_log_fails_check_since(history: Path) -> None:
    result = cli("check", str(history), "--since", "HEAD~3", "-j", "1")
    assert result.exit_code == 1, result.output
    out = result.stdout
    # each new site named, with the rule's fix from rules.yaml
    fix = load_ruleset().rules["default-on-emitter"].fix
    assert "NEW engine/model_runner.py:14:9 default-on-emitter" in out
    assert "NEW engine/model_runner.py:14:9 eager-format" in out
    assert f"fix: {fix}" in out
    # the commit that added it, checked on its own
    git(history, "checkout", "-q", "HEAD~2")
    result = cli("check", str(history), "--since", "HEAD~1", "-j", "1")
    assert result.exit_code == 1, result.output
    assert f"NEW engine/runner.py:{LOG_LINE}:9 default-on-emitter" in result.stdout


def test_new_ungated_log_fails_check_baseline(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/__init__.py": "", "engine/runner.py": BASE})])
    baseline = tmp_path / "baseline.json"
    made = cli("baseline", str(repo), "-o", str(baseline), "-j", "1")
    assert made.exit_code == 0, made.output
    assert json.loads(baseline.read_text())["findings"] == []
    assert cli("check", str(repo), "--baseline", str(baseline), "-j", "1").exit_code == 0
    (repo / "engine/runner.py").write_text(LOGGED)
    code, doc = check_json(str(repo), "--baseline", str(baseline))
    assert code == 1
    assert [(f["rule"], f["path"], f["line"]) for f in doc["check"]["new"]] == [
        ("default-on-emitter", "engine/runner.py", LOG_LINE), ("eager-format", "engine/runner.py", LOG_LINE),
    ]
    assert doc["check"]["status"] == "fail"


def test_only_moving_code_passes_since_and_baseline(history: Path, tmp_path: Path) -> None:
    # since the commit before each move, and since before both moves
    for rev in ("HEAD~1", "HEAD~2"):
        code, doc = check_json(str(history), "--since", rev)
        assert code == 0, doc["check"]
        assert doc["check"]["new"] == []
    code, doc = check_json(str(history), "--since", "HEAD~2")
    assert doc["check"]["moved"] >= 2  # the log line moved to another file and matched by code
    # a baseline taken before the moves still matches after them
    git(history, "checkout", "-q", "HEAD~2")
    baseline = tmp_path / "b.json"
    assert cli("baseline", str(history), "-o", str(baseline), "-j", "1").exit_code == 0
    git(history, "checkout", "-q", "main")
    code, doc = check_json(str(history), "--baseline", str(baseline))
    assert code == 0 and doc["check"]["new"] == [] and doc["check"]["fixed"] == []


def test_since_ignores_findings_on_unchanged_lines(history: Path) -> None:
    # HEAD~1..HEAD moved the class: the log line exists before and after
    assert cli("check", str(history), "--since", "HEAD", "-j", "1").exit_code == 0
    # an edit elsewhere in the file does not make the old log line new
    target = history / "engine/model_runner.py"
    target.write_text(target.read_text() + "\n\ndef helper():\n    return 1\n")
    assert cli("check", str(history), "--since", "HEAD", "-j", "1").exit_code == 0
    # an untracked file counts as all new
    (history / "engine/extra.py").write_text(LOGGED)
    result = cli("check", str(history), "--since", "HEAD", "-j", "1")
    assert result.exit_code == 1
    assert f"NEW engine/extra.py:{LOG_LINE}:9 default-on-emitter" in result.stdout


def test_since_in_a_subdirectory_maps_paths(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"svc/engine/runner.py": BASE, "README": "x\n"})])
    (repo / "svc/engine/runner.py").write_text(LOGGED)
    code, doc = check_json(str(repo / "svc"), "--since", "HEAD")  # a folder named: checked alone
    assert code == 1
    assert {f["path"] for f in doc["check"]["new"]} == {"engine/runner.py"}


# a gate read through a helper module outside the engine's folder
_FLAGS = "import os\n\n\ndef trace_on():\n    return os.environ.get('ENGINE_TRACE', '0') == '1'\n"
_HELPED = BASE.replace("import os\n", "import os\n\nfrom tools.flags import trace_on\n").replace(
    "        if _TRACE:\n            logger.debug(\"trace %s\", out)\n", "        if trace_on():\n            logger.info(f\"trace {out}\")\n")


def test_check_from_a_subfolder_gives_the_repository_roots_answer(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": BASE, "tools/flags.py": _FLAGS, "tools/__init__.py": ""})])
    (repo / "engine/runner.py").write_text(_HELPED)  # a gated trace: new, but gated
    answers = []
    for where in (repo, repo / "engine"):
        proc = cs_audit("check", ".", "--since", "HEAD", "-j", "1", "-f", "json", "--gate", "env-read-hot:off", cwd=where)
        doc = json.loads(proc.stdout)
        answers.append((proc.returncode, [(f["rule"], f["path"], f["line"]) for f in doc["check"]["new"]]))
    assert answers[0] == answers[1] == (0, []), answers  # from engine/ alone trace_on() resolved to nothing


def test_a_changed_file_that_does_not_parse_fails_the_check(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": BASE, "engine/other.py": "x = 1\n"})])
    (repo / "engine/other.py").write_text("def broken(:\n")
    proc = cs_audit("check", ".", "--since", "HEAD", "-j", "1", cwd=repo)
    assert proc.returncode == 2, proc.stdout
    assert one_line(proc.stderr).startswith("cs-audit: engine/other.py does not parse (")
    assert "incomplete: engine/other.py: syntax" in proc.stdout
    allowed = cs_audit("check", ".", "--since", "HEAD", "-j", "1", "--allow-parse-errors", cwd=repo)
    assert allowed.returncode == 0 and allowed.stderr == "", allowed.stdout + allowed.stderr
    # a file that did not parse before and is not changed is outside the scope of --since
    git(repo, "commit", "-qam", "broken", "--no-verify")
    assert cs_audit("check", ".", "--since", "HEAD", "-j", "1", cwd=repo).returncode == 0


# ---------------------------------------------------------------------------
# exit code 2


def test_an_unknown_since_is_one_line_naming_the_close_refs(history: Path) -> None:
    # a full clone has all its history: a name git does not know is a typo, not a shallow clone
    result = cli("check", str(history), "--since", "mian", "-j", "1")
    assert result.exit_code == 2
    assert result.stderr == "cs-audit: --since: unknown revision 'mian'; did you mean main?\n"
    result = cli("check", str(history), "--since", "--output=x", "-j", "1")
    assert result.exit_code == 2


def test_an_ancestor_past_the_root_is_an_unknown_revision(tmp_path: Path) -> None:
    single = make_repo(tmp_path, [("init", {"engine/runner.py": BASE})])
    result = cli("check", str(single), "--since", "HEAD~1", "-j", "1")
    assert result.exit_code == 2
    assert result.stderr == "cs-audit: --since: unknown revision 'HEAD~1'; HEAD has no such ancestor\n"
    result = cli("report", str(single), "--rev", "mian~1")
    assert result.exit_code == 2
    assert result.stderr == "cs-audit: unknown revision 'mian~1'; did you mean main~1?\n"


def test_shallow_clone_since_beyond_the_boundary_exits_2(history: Path, tmp_path: Path) -> None:
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{history}", str(clone))
    result = cli("check", str(clone), "--since", "HEAD~1", "-j", "1")
    assert result.exit_code == 2
    assert "shallow clone" in result.stderr and "git fetch --unshallow" in result.stderr


def test_since_outside_git_exits_2(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t/runner.py").write_text(LOGGED)
    result = cli("check", str(tmp_path / "t"), "--since", "HEAD", "-j", "1")
    assert result.exit_code == 2
    assert "not inside a git work tree" in result.stderr


def test_could_not_complete_wins_over_new_findings(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": LOGGED, "engine/broken.py": "def f(:\n"})])
    assert cli("check", str(repo), "-j", "1").exit_code == 2  # a file in the scope that does not parse
    assert cli("check", str(repo), "-j", "1", "--allow-parse-errors").exit_code == 1
    result = cli("check", str(repo), "--strict", "-j", "1")
    assert result.exit_code == 2
    assert "incomplete: engine/broken.py: syntax" in result.stdout


def test_usage_errors_exit_2(tmp_path: Path, history: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli("check", str(history), "--baseline", str(bad)).exit_code == 2
    bad.write_text(json.dumps({"tool": "other", "findings": []}))
    assert cli("check", str(history), "--baseline", str(bad)).exit_code == 2
    assert cli("check", str(history), "--baseline", str(tmp_path / "missing.json")).exit_code == 2
    assert cli("check", str(history), "--gate", "no-such-rule").exit_code == 2
    assert cli("check", str(history), "--format", "yaml").exit_code == 2
    assert cli("check", str(history), "--update-baseline").exit_code == 2
    assert cli("check", str(tmp_path / "nowhere")).exit_code == 2
    (history / "pyproject.toml").write_text("[tool.cs-audit]\nunknown_key = 1\n")
    assert cli("check", str(history)).exit_code == 2


# ---------------------------------------------------------------------------
# which rules gate


SYNC_BEHIND_SWITCH = BASE.replace('logger.debug("trace %s", out)', 'logger.info("trace %s", out.sum().item())')


def test_gates_are_configurable(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": LOGGED})])
    assert cli("check", str(repo), "-j", "1").exit_code == 1
    # each --gate entry sets one rule's scope and leaves the others gating
    assert cli("check", str(repo), "--gate", "default-on-emitter:off,eager-format:off", "-j", "1").exit_code == 0
    assert cli("check", str(repo), "--gate", "default-on-emitter:off", "-j", "1").exit_code == 1
    (repo / "pyproject.toml").write_text('[tool.cs-audit]\ngate = {"default-on-emitter" = "off", "eager-format" = "off"}\n')
    assert cli("check", str(repo), "-j", "1").exit_code == 0
    assert cli("check", str(repo), "--gate", "eager-format:any", "-j", "1").exit_code == 1
    (repo / "pyproject.toml").write_text('[tool.cs-audit]\ngate = {"eager-format" = "sometimes"}\n')
    bad = cli("check", str(repo), "-j", "1")
    assert bad.exit_code == 2 and "gate: eager-format:sometimes: the scope is one of hot, default, any, off" in bad.output


BENCH_HELPER = """\
import logging

logger = logging.getLogger(__name__)


def report_throughput(results):
    logger.warning(f"throughput {results}")
"""


def test_check_gates_what_runs_by_default_on_a_hot_path(tmp_path: Path) -> None:
    # an f-string in a benchmark helper nothing calls is a finding, and no reason to fail CI
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": BASE, "benchmarks/bench.py": BENCH_HELPER})])
    code, doc = check_json(str(repo), "--since", "HEAD~0")
    assert code == 0
    code, doc = check_json(str(repo))
    assert code == 0 and doc["check"]["new"] == []
    assert ("eager-format", "unknown") in {(f["rule"], f["frequency"]) for f in doc["findings"]}
    # every rule the registry marks as gating CI, on what runs on a hot path
    assert {g["rule"]: g["scope"] for g in doc["check"]["gates"]} == {
        rule: "hot" for rule, spec in load_ruleset().rules.items() if spec.gates_ci}
    # widened, the same helper gates
    code, doc = check_json(str(repo), "--gate", "eager-format:any")
    assert code == 1 and [(f["rule"], f["path"]) for f in doc["check"]["new"]] == [("eager-format", "benchmarks/bench.py")]
    # a new per-step warning fails CI; the same warning in an except block does not
    warned = BASE.replace("        out = self.forward(batch)\n",
                          "        out = self.forward(batch)\n        logger.warning(\"slow step %s\", batch)\n")
    commit_files(repo, "per-step warning", {"engine/runner.py": warned}, 2)
    code, doc = check_json(str(repo), "--since", "HEAD~1")
    assert code == 1 and [(f["rule"], f["line"], f["path_kind"]) for f in doc["check"]["new"]] == [
        ("default-on-emitter", 11, "normal")]
    excepted = BASE.replace("        out = self.forward(batch)\n", (
        "        try:\n            out = self.forward(batch)\n        except RuntimeError:\n"
        "            logger.warning(\"slow step %s\", batch)\n            raise\n"))
    commit_files(repo, "warning on the error path", {"engine/runner.py": excepted}, 3)
    code, doc = check_json(str(repo), "--since", "HEAD~1")
    assert code == 0 and [(f["rule"], f["path_kind"]) for f in doc["findings"] if f["rule"] == "default-on-emitter"] == [
        ("default-on-emitter", "error")]


def test_sync_in_debug_gates_only_without_a_switch_by_default(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": SYNC_BEHIND_SWITCH})])
    code, doc = check_json(str(repo))
    assert [(f["rule"], f["switch"]) for f in doc["findings"]] == [("sync-in-debug", "ENGINE_TRACE")]
    assert code == 0
    code, doc = check_json(str(repo), "--gate", "sync-in-debug:any")
    assert code == 1 and [f["rule"] for f in doc["check"]["new"]] == ["sync-in-debug"]


def test_default_gates_come_from_rules_yaml() -> None:
    rs = load_ruleset()
    data = yaml.safe_load((PROJECT / "rules/rules.yaml").read_text())
    gating = {r["id"] for r in data["rules"] if r.get("gates_ci")}
    gates = default_gates(rs)
    assert set(gates.rules) == gating == {"default-on-emitter", "eager-format", "sync-in-debug", "env-read-hot"}
    assert set(gates.rules.values()) == {"hot"}
    assert parse_gates(["eager-format:default", "env-read-hot:off"], rs).rules == {
        "default-on-emitter": "hot", "eager-format": "default", "sync-in-debug": "hot"}
    assert parse_gates(["duplicate-helper"], rs).rules["duplicate-helper"] == "hot"


# ---------------------------------------------------------------------------
# baseline: fixed entries and --update-baseline


def test_fixed_entries_reported_and_update_baseline_drops_them(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": LOGGED})])
    baseline = tmp_path / "b.json"
    assert cli("baseline", str(repo), "-o", str(baseline), "-j", "1").exit_code == 0
    recorded = json.loads(baseline.read_text())["findings"]
    assert sorted(e["rule"] for e in recorded) == ["default-on-emitter", "eager-format"]  # entries by fingerprint
    # the log line goes, a different ungated print comes
    (repo / "engine/runner.py").write_text(BASE.replace('        return out\n', '        print("x")\n        return out\n', 1))
    code, doc = check_json(str(repo), "--baseline", str(baseline), "--update-baseline")
    assert code == 1
    assert sorted(e["fingerprint"] for e in doc["check"]["fixed"]) == sorted(e["fingerprint"] for e in recorded)
    assert [f["rule"] for f in doc["check"]["new"]] == ["default-on-emitter"]
    # rewritten without the fixed entries; the new finding is not accepted into it
    assert json.loads(baseline.read_text())["findings"] == []
    assert cli("check", str(repo), "--baseline", str(baseline), "-j", "1").exit_code == 1


def test_baseline_survives_line_shifts(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": LOGGED})])
    baseline = tmp_path / "b.json"
    assert cli("baseline", str(repo), "-o", str(baseline), "-j", "1").exit_code == 0
    (repo / "engine/runner.py").write_text("# a header\n# more\n\n" + LOGGED)
    code, doc = check_json(str(repo), "--baseline", str(baseline))
    assert code == 0 and doc["check"]["new"] == [] and doc["check"]["fixed"] == []


def test_baseline_file_is_deterministic(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": LOGGED, "engine/other.py": LOGGED})])
    one, two = tmp_path / "1.json", tmp_path / "2.json"
    assert cli("baseline", str(repo), "-o", str(one), "-j", "1").exit_code == 0
    assert cli("baseline", str(repo), "-o", str(two), "-j", "2").exit_code == 0
    assert one.read_bytes() == two.read_bytes()
    doc = json.loads(one.read_text())
    assert doc["tool"] == "cs-audit" and doc["baseline_version"] == 1
    assert [e["fingerprint"] for e in doc["findings"]] == sorted(e["fingerprint"] for e in doc["findings"])


# ---------------------------------------------------------------------------
# suppressions


def _with_comment(comment: str) -> str:
    return LOGGED.replace('logger.info(f"step {batch} done")', f'logger.info(f"step {{batch}} done")  {comment}')


def test_suppression_with_a_reason_silences_the_site(tmp_path: Path) -> None:
    src = _with_comment("# cs-audit: ignore[default-on-emitter, eager-format] one line per step is the product")
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": BASE}), ("log", {"engine/runner.py": src})])
    code, doc = check_json(str(repo), "--since", "HEAD~1")
    assert code == 0, doc["check"]
    assert [s["reason"] for s in doc["check"]["suppressed"]] == ["one line per step is the product"] * 2
    assert doc["check"]["notes"] == []
    # the JSON contract's findings list is untouched: both findings are still there
    assert [f["rule"] for f in doc["findings"]] == ["default-on-emitter", "eager-format"]


def test_suppression_without_a_reason_is_reported_and_suppresses_nothing(tmp_path: Path) -> None:
    src = _with_comment("# cs-audit: ignore[default-on-emitter]")
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": src})])
    code, doc = check_json(str(repo))
    assert code == 1
    assert [f["rule"] for f in doc["check"]["new"]] == ["default-on-emitter", "eager-format"]
    assert [(n["id"], n["path"], n["line"]) for n in doc["check"]["notes"]] == [
        ("invalid-suppression", "engine/runner.py", LOG_LINE)]
    assert "no reason" in doc["check"]["notes"][0]["message"]
    text = cli("check", str(repo), "-j", "1").stdout
    assert f"engine/runner.py:{LOG_LINE} invalid-suppression" in text


def test_partial_and_unused_suppressions(tmp_path: Path) -> None:
    src = _with_comment("# cs-audit: ignore[eager-format] the f-string is cheap here")
    src = src.replace("    def forward(self, batch):\n", "    def forward(self, batch):  # cs-audit: ignore[env-read-hot] stale\n")
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": src})])
    code, doc = check_json(str(repo))
    assert code == 1  # default-on-emitter is still there
    assert [f["rule"] for f in doc["check"]["new"]] == ["default-on-emitter"]
    assert [(n["id"], n["line"]) for n in doc["check"]["notes"]] == [("unused-suppression", 16)]


def test_suppression_comment_forms() -> None:
    known = load_ruleset().rules
    ok = parse_comment("a.py", 3, "# cs-audit: ignore[eager-format] — cheap", known)
    assert ok is not None and ok.problem is None and ok.rules == ("eager-format",) and ok.reason == "cheap"
    assert parse_comment("a.py", 3, "# just a comment", known) is None
    assert "no reason" in (parse_comment("a.py", 3, "# cs-audit: ignore[eager-format]   ", known).problem or "")
    assert "unknown rule" in (parse_comment("a.py", 3, "# cs-audit: ignore[nope] why", known).problem or "")
    assert "names no rule" in (parse_comment("a.py", 3, "# cs-audit: ignore because", known).problem or "")
    assert "unknown directive" in (parse_comment("a.py", 3, "# cs-audit: disable[eager-format] x", known).problem or "")
    both = parse_comment("a.py", 3, "# noqa: E501  # cs-audit: ignore[eager-format,env-read-hot] r", known)
    assert both is not None and both.rules == ("eager-format", "env-read-hot") and both.problem is None
    # a marker inside a string is not a comment
    data = b's = "# cs-audit: ignore[eager-format] no"\nx = 1  # cs-audit: ignore[eager-format] yes\n'
    assert [(s.line, s.reason) for s in suppressions_in("a.py", data, known)] == [(2, "yes")]


def _finding(rule: str, line: int, end_line: int, fp: str) -> Finding:
    return Finding(rule=rule, path="m.py", line=line, end_line=end_line, function="f", switch=None,
                   frequency="step", gpu_sync=False, message="m", fingerprint=fp, code="c")


def test_suppression_on_the_statements_first_line(tmp_path: Path) -> None:
    src = (
        "def f(x):\n"
        "    total = combine(  # cs-audit: ignore[sync-in-debug] measured, rare\n"
        "        x,\n"
        "        x.item(),\n"
        "    )  # cs-audit: ignore[eager-format] too late\n"
        "    return total\n"
    )
    comments = tuple(suppressions_in("m.py", src.encode(), load_ruleset().rules))
    result = AuditResult(root=str(tmp_path), commit=None, findings=(
        _finding("sync-in-debug", 4, 4, "a"),  # an expression line inside the statement of lines 2-5
        _finding("eager-format", 4, 4, "b"),
    ), switches=(), duplicates=(), errors=(), files_scanned=1, suppressions=comments)
    sup = apply_suppressions(result)
    assert sup.suppressed == {"a": "measured, rare"}
    assert [f.fingerprint for f in sup.kept] == ["b"]
    # a comment on the statement's last line is neither the finding's line nor the first line
    assert [(n.id, n.line) for n in sup.notes] == [("unused-suppression", 5)]


# ---------------------------------------------------------------------------
# matching and diff parsing


def test_match_pairs_by_fingerprint_then_by_code() -> None:
    a = _finding("eager-format", 3, 3, "fp-a")
    moved = Finding(rule="eager-format", path="other.py", line=40, end_line=40, function="f", switch=None,
                    frequency="step", gpu_sync=False, message="m", fingerprint="fp-moved", code="c")
    fresh = Finding(rule="eager-format", path="m.py", line=9, end_line=9, function="g", switch=None,
                    frequency="step", gpu_sync=False, message="m", fingerprint="fp-new", code="c")
    old = [BaselineEntry("fp-a", "eager-format", "m.py", 3, "f", "c"), BaselineEntry("fp-gone", "env-read-hot", "m.py", 5, "f", "d")]
    new, gone, moved_n = match_findings([moved, fresh], old)
    assert [f.fingerprint for f in new] == ["fp-new"]
    assert [e.fingerprint for e in gone] == ["fp-gone"]
    assert moved_n == 1
    assert match_findings([a], old)[0] == []


def test_parse_diff_counts_hunk_bodies_and_follows_renames() -> None:
    patch = (
        b"diff --git a/x.py b/y.py\n"
        b"similarity index 90%\nrename from x.py\nrename to y.py\n"
        b"--- a/x.py\n+++ b/y.py\n"
        b"@@ -3,2 +3,3 @@ def f():\n"
        b"--- not a header\n-old\n+++ not a header either\n+new\n+newer\n"
        b"@@ -10 +11,0 @@\n-gone\n"
        b"diff --git a/only_renamed.py b/renamed.py\nsimilarity index 100%\n"
        b"rename from only_renamed.py\nrename to renamed.py\n"
        b"diff --git \"a/sp ace\\tq.py\" \"b/sp ace\\tq.py\"\n--- \"a/sp ace\\tq.py\"\n+++ \"b/sp ace\\tq.py\"\n"
        b"@@ -0,0 +1 @@\n+x\n"
        b"diff --git a/del.py b/del.py\n--- a/del.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    )
    assert parse_diff(patch) == {"y.py": {3, 4, 5}, "sp ace\tq.py": {1}}
    assert unquote_path(b'"caf\\303\\251.py"') == "café.py".encode()


def test_real_git_diff_follows_renames(tmp_path: Path) -> None:
    from cs_audit.ci.gate import changed_lines
    from cs_audit.git.repo import GitRepo

    repo = make_repo(tmp_path, [("init", {"a.py": BASE})])
    git(repo, "mv", "a.py", "b.py")
    (repo / "b.py").write_text(BASE + "x = 1\n")
    changed = changed_lines(GitRepo.open(repo), git(repo, "rev-parse", "HEAD").strip())
    assert changed == {"b.py": frozenset({len(BASE.splitlines()) + 1})}
    assert ALL not in changed.values()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert "b.py" in status  # the test's own staging is still there: nothing was reset


def test_gates_object() -> None:
    gates = Gates({"sync-in-debug": "default", "eager-format": "any", "default-on-emitter": "hot"})
    f = _finding("sync-in-debug", 1, 1, "x")
    assert gates.gates(f)
    assert not gates.gates(replace(f, switch="DBG"))
    assert gates.gates(replace(_finding("eager-format", 1, 1, "x"), switch="DBG", frequency="unknown"))
    assert not gates.gates(_finding("env-read-hot", 1, 1, "y"))
    emitter = replace(_finding("default-on-emitter", 1, 1, "z"), frequency="step")
    assert gates.gates(emitter)
    assert not gates.gates(replace(emitter, frequency="unknown"))
    assert not gates.gates(replace(emitter, frequency="once"))
    assert not gates.gates(replace(emitter, path_kind="error"))
    assert not gates.gates(replace(emitter, path_kind="rare"))
    assert not gates.gates(replace(emitter, switch="DBG"))
    assert Baseline(None, ()).entries == ()


# ---------------------------------------------------------------------------
# pre-commit hook definition


def test_pre_commit_hooks_file_names_registered_commands() -> None:
    hooks = yaml.safe_load((PROJECT / ".pre-commit-hooks.yaml").read_text())
    assert {h["id"] for h in hooks} == {"cs-audit-check", "cs-audit-baseline-check"}
    commands = {c.name or c.callback.__name__ for c in app.registered_commands}
    for hook in hooks:
        assert hook["language"] == "python" and hook["pass_filenames"] is False
        entry = hook["entry"].split()
        assert entry[0] == "cs-audit" and entry[1] in commands
        assert set(hook) <= {"id", "name", "description", "entry", "args", "language", "pass_filenames", "types",
                             "files", "always_run", "require_serial", "stages", "minimum_pre_commit_version"}


def test_check_since_leaves_the_index_and_work_tree_untouched(history: Path) -> None:
    from tests.test_history import _state

    (history / "engine/model_runner.py").write_text(SWAPPED + "\nprint('edited')\n")
    before = _state(history)
    assert cli("check", str(history), "--since", "HEAD~3", "-j", "1").exit_code == 1
    assert cli("check", str(history), "--since", "HEAD", "-j", "1").exit_code in (0, 1)
    assert _state(history) == before  # .git/index bytes and mtime, every file, refs, HEAD


# a second ungated log in the hot step function, on the line after the first (line 15)
TWO_LOGS = SWAPPED.replace("        logger.info(f\"step {batch} done\")\n",
                           "        logger.info(f\"step {batch} done\")\n        logger.info(f\"again {batch}\")\n")


@pytest.mark.parametrize(("change", "since", "new"), [
    ("touch", "HEAD~3", [("default-on-emitter", "engine/model_runner.py", 14), ("eager-format", "engine/model_runner.py", 14)]),
    ("touch", "HEAD", []),
    ("edit", "HEAD", [("default-on-emitter", "engine/model_runner.py", 15), ("eager-format", "engine/model_runner.py", 15)]),
    ("edit", "HEAD~3", [("default-on-emitter", "engine/model_runner.py", 14), ("eager-format", "engine/model_runner.py", 14),
                        ("default-on-emitter", "engine/model_runner.py", 15), ("eager-format", "engine/model_runner.py", 15)]),
    ("rename", "HEAD", [("default-on-emitter", "engine/stepper.py", 15), ("eager-format", "engine/stepper.py", 15)]),
])
def test_check_since_on_a_stat_dirty_tree_leaves_the_index_alone(history: Path, change: str, since: str,
                                                                   new: list[tuple[str, str, int]]) -> None:
    """Every tracked file's mtime changed after the commit (as after a checkout or a
    build): the comparison with the work tree must not refresh .git/index, and the
    lines it finds changed are those git diff finds (a staged rename keeps its history)."""
    import os
    import time

    from tests.test_history import _state

    if change == "rename":
        git(history, "mv", "engine/model_runner.py", "engine/stepper.py")
        (history / "engine/stepper.py").write_text(TWO_LOGS)
    elif change == "edit":
        (history / "engine/model_runner.py").write_text(TWO_LOGS)
    later = time.time() + 100
    for name in git(history, "ls-files", "-z").split("\0"):
        if name:
            os.utime(history / name, (later, later))
    before = _state(history)
    code, doc = check_json(str(history), "--since", since)
    assert [(f["rule"], f["path"], f["line"]) for f in doc["check"]["new"]] == new
    assert (code, doc["check"]["status"], doc["check"]["incomplete"]) == (1 if new else 0, "fail" if new else "pass", [])
    assert _state(history) == before  # .git/index bytes and mtime, every file, refs, HEAD


def test_text_output_escapes_hostile_file_names(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/__init__.py": ""})])
    (repo / "engine/new\nline \u202e.py").write_text(LOGGED)  # untracked: all lines new
    result = cli("check", str(repo), "--since", "HEAD", "-j", "1")
    assert result.exit_code == 1, result.output
    assert f"NEW engine/new\\x0aline \\u202e.py:{LOG_LINE}:9 default-on-emitter" in result.stdout
    assert "\u202e" not in result.stdout
    md = cli("check", str(repo), "--since", "HEAD", "-j", "1", "--format", "markdown")
    assert "\u202e" not in md.stdout and "| `default-on-emitter` |" in md.stdout


def test_entries_of_a_file_that_no_longer_parses_are_not_fixed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": LOGGED})])
    baseline = tmp_path / "b.json"
    assert cli("baseline", str(repo), "-o", str(baseline), "-j", "1").exit_code == 0
    recorded = baseline.read_bytes()
    (repo / "engine/runner.py").write_text(LOGGED + "def broken(:\n")
    code, doc = check_json(str(repo), "--baseline", str(baseline), "--update-baseline", "--allow-parse-errors")
    assert code == 0 and doc["check"]["fixed"] == []
    assert json.loads(baseline.read_bytes())["findings"] == json.loads(recorded)["findings"]


def test_suppressions_are_facts_of_the_scan_and_follow_moved_lines(tmp_path: Path) -> None:
    """The suppression comments come with the scan's result (read where the file was
    analysed, never read again by a renderer), so a cached result after an edit that only
    moved lines suppresses exactly what a fresh scan does."""
    from cs_audit.api import run_audit
    from cs_audit.config import AuditConfig
    from cs_audit.testing import write_tree

    root = write_tree(tmp_path / "t", {"eng/model_runner.py": """
        import logging

        logger = logging.getLogger(__name__)


        class GPUModelRunner:
            def execute_model(self, batch):
                logger.info(f"step {batch}")  # cs-audit: ignore[default-on-emitter] the product's one step line
                logger.info(  # cs-audit: ignore[eager-format] measured cheap
                    f"done {batch}")
                return batch
    """})
    cache_dir = str(tmp_path / "cache")

    def scan(cache: bool):
        return run_audit(AuditConfig(root=str(root), jobs=1, history=False, cache=cache, cache_dir=cache_dir))

    first = scan(True)
    assert [(s.line, s.rules) for s in first.suppressions] == [(8, ("default-on-emitter",)), (9, ("eager-format",))]
    assert len(apply_suppressions(first).suppressed) == 2
    target = root / "eng/model_runner.py"
    target.write_text("# a comment line moves everything below it\n" + target.read_text())
    cached, fresh = scan(True), scan(False)
    assert [(s.line, s.covers) for s in cached.suppressions] == [(s.line, s.covers) for s in fresh.suppressions]
    assert apply_suppressions(cached) == apply_suppressions(fresh)
    assert [s.line for s in fresh.suppressions] == [9, 10] and len(apply_suppressions(fresh).suppressed) == 2
