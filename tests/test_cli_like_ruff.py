"""The command line as ruff and semgrep users expect it (#22): one-line errors, exit codes
0/1/2, outputs checked before the scan, flat finding lists, report names, configuration."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.testing import write_tree
from tests.gitrepo import commit_files, git, make_repo
from tests.test_cli import TREE as CLI_TREE

runner = CliRunner()
WORKTREE = str(Path(__file__).resolve().parents[1])
# the tree of tests/test_cli.py without its file that does not parse
TREE = {rel: text for rel, text in CLI_TREE.items() if rel != "broken.py"}
CLEAN = {"engine/quiet.py": "def f(x):\n    return x + 1\n"}


def cs_audit(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m cs_audit ARGS`` in a fresh process, stderr and stdout piped (no terminal)."""
    environ = {**os.environ, "PYTHONPATH": WORKTREE, **(env or {})}
    return subprocess.run([sys.executable, "-m", "cs_audit", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=environ)


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("cs-audit: "), stderr
    return lines[0]


# -- errors and exit codes


@pytest.mark.parametrize("args", [["scan", "--bogus"], ["nope"], ["scan"], ["scan", ".", "-j", "0"]])
def test_a_usage_error_is_one_plain_line_with_exit_2(args: list[str], tmp_path: Path) -> None:
    proc = cs_audit(*args, cwd=tmp_path, env={"COLUMNS": "40"})
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert "╭" not in line and "--help" in line


def test_version_option() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("cs-audit 0.")


def test_an_output_that_cannot_be_written_is_refused_before_the_scan(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    cache = tmp_path / "xdg"
    for args in (["-f", "sarif", "-o", "/proc/x"], ["-o", str(tmp_path / "newdir") + "/"], ["-f", "json", "-o", str(tmp_path)]):
        proc = cs_audit("scan", str(root), *args, env={"XDG_CACHE_HOME": str(cache)})
        assert proc.returncode == 2, (args, proc.stderr)
        assert "cannot write" in one_line(proc.stderr) or "not a regular file" in proc.stderr
        assert not cache.exists()  # the scan never started
    assert not (tmp_path / "newdir").exists()
    # a current directory where reports/ cannot be made
    proc = cs_audit("scan", str(root), cwd=Path("/proc"), env={"XDG_CACHE_HOME": str(cache)})
    assert proc.returncode == 2 and "reports/tree.md: cannot write" in one_line(proc.stderr)
    assert not cache.exists()


def test_check_with_an_unwritable_output_neither_gates_nor_rewrites_the_baseline(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    base = tmp_path / "base.json"
    base.write_text('{"tool": "cs-audit", "baseline_version": 1, "commit": null, "findings": []}\n')
    before = base.read_bytes()
    result = runner.invoke(app, ["check", str(root), "-b", str(base), "--update-baseline", "-f", "sarif", "-o", "/proc/x"])
    assert result.exit_code == 2  # not 1: the findings are not what failed
    assert "cannot write" in result.stderr and base.read_bytes() == before


def test_scan_exits_1_on_findings_only_when_asked(tmp_path: Path) -> None:
    dirty = write_tree(tmp_path / "dirty", TREE)
    clean = write_tree(tmp_path / "clean", CLEAN)
    out = ["-f", "json", "-o", os.devnull, "-j", "1"]
    assert runner.invoke(app, ["scan", str(dirty), *out]).exit_code == 0
    assert runner.invoke(app, ["scan", str(dirty), *out, "--exit-non-zero-on-findings"]).exit_code == 1
    assert runner.invoke(app, ["scan", str(clean), *out, "--exit-non-zero-on-findings"]).exit_code == 0


def test_the_verbose_phase_line_is_one_line(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    proc = cs_audit("scan", str(root), "-f", "json", "-o", os.devnull, "-v", "--no-cache", env={"COLUMNS": "40"})
    assert proc.returncode == 0
    phases = [line for line in proc.stderr.splitlines() if line.startswith("phases: ")]
    assert len(phases) == 1 and phases[0].endswith("s") and " render " in phases[0], proc.stderr


def test_progress_lines_without_a_terminal_and_none_with_quiet(tmp_path: Path, monkeypatch) -> None:
    import cs_audit.cli.common as common

    monkeypatch.setattr(common, "PROGRESS_EVERY", 0.001)
    root = write_tree(tmp_path / "tree", TREE)
    args = ["scan", str(root), "-f", "json", "-o", os.devnull, "-j", "1", "--no-cache"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0
    progress = [line for line in result.stderr.splitlines() if line.startswith("cs-audit: ")]
    assert progress and all(line.endswith("s)") for line in progress), result.stderr
    quiet = runner.invoke(app, [*args, "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    check = runner.invoke(app, ["check", str(root), "-j", "1", "-f", "json"])  # a CI log: check shows progress too
    assert check.exit_code == 1 and any(line.startswith("cs-audit: ") for line in check.stderr.splitlines())
    assert runner.invoke(app, ["check", str(root), "-j", "1", "-f", "json", "-q"]).stderr == ""



# -- the terminal output


def test_piped_summary_never_cuts_a_path_and_lists_every_finding_below_it(tmp_path: Path) -> None:
    root = write_tree(tmp_path / ("a-tree-with-a-rather-long-name-" * 3), {
        **TREE,
        "engine/quiet.py": "import os\n\ndef g():\n    return os.getenv('Q')  # cs-audit: ignore[env-read-hot] read once by the caller\n",
    })
    proc = cs_audit("scan", str(root), "--no-history", "-j", "1", cwd=tmp_path, env={"COLUMNS": "40"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.split()[2:3] == [f"{root}/engine/runner.py:6"] for line in lines), proc.stdout  # the top site, whole
    listed = lines[lines.index(next(x for x in lines if x.startswith("report written to"))) + 1:]
    assert [x for x in listed if x] == [
        f"{root}/engine/runner.py:6:9: default-on-emitter `logger.info` (info) runs every engine step with no debug env "
        "set; gate it behind a trace level or log it once.",
        f"{root}/engine/runner.py:6:9: eager-format `logger.info` builds its message (f-string) before the level check "
        "decides; pass lazy %-style arguments.",
        f"{root}/engine/runner.py:7:16: env-read-hot `MY_DBG` is read from the environment via `os.environ.get` every "
        "engine step; resolve it once at import and test the constant.",
    ]  # the suppressed read in quiet.py is not listed


def test_full_output_adds_the_source_line_and_the_hot_path_and_statistics_counts(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    full = runner.invoke(app, ["scan", str(root), "--output-format", "full", "-o", str(tmp_path / "r.md"), "-j", "1"])
    assert full.exit_code == 0, full.output
    text = full.stdout
    assert f"{root}/engine/runner.py:7:16: env-read-hot " in text
    assert '  7 |         return os.environ.get("MY_DBG")\n  hot path: engine.runner.Runner.execute_model\n' in text
    stats = runner.invoke(app, ["scan", str(root), "--statistics", "-o", str(tmp_path / "r.md"), "-j", "1"])
    tail = stats.stdout.split("report written to", 1)[1].splitlines()[2:]
    assert [line.split()[:3] for line in tail] == [
        ["1", "default-on-emitter", "[high]"], ["1", "eager-format", "[medium]"], ["1", "env-read-hot", "[medium]"],
    ]
    assert "engine/runner.py:6:9:" not in stats.stdout



# -- report names


def test_scan_dot_is_named_after_the_folder(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "engine-x", TREE)
    proc = cs_audit("scan", ".", "-q", "--no-history", "-j", "1", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (root / "reports").iterdir()) == ["engine-x.md"]
    assert (root / "reports" / "engine-x.md").read_text().startswith("# cs-audit: engine-x\n")


def test_a_report_of_another_tree_of_the_same_name_or_a_tracked_one_is_not_overwritten(tmp_path: Path) -> None:
    first = write_tree(tmp_path / "a" / "vllm", TREE)
    second = write_tree(tmp_path / "b" / "vllm", CLEAN)
    work = tmp_path / "work"
    work.mkdir()
    assert cs_audit("scan", str(first), "-q", "--no-history", cwd=work).returncode == 0
    report = work / "reports" / "vllm.md"
    kept = report.read_bytes()
    assert cs_audit("scan", str(first), "-q", "--no-history", cwd=work).returncode == 0  # the same tree: rewritten
    clash = cs_audit("scan", str(second), "-q", "--no-history", cwd=work)
    assert clash.returncode == 2 and "another tree named 'vllm'" in one_line(clash.stderr)
    assert report.read_bytes() == kept
    assert cs_audit("scan", str(second), "-q", "--no-history", "-o", str(work / "vllm-b.md"), cwd=work).returncode == 0
    # a file of the user's under reports/, tracked by git in the current directory
    git(work, "init", "-q")
    (work / "reports" / "README.md").write_text("# our reports\n")
    git(work, "add", "reports/README.md")
    readme = write_tree(tmp_path / "c" / "README", CLEAN)
    tracked = cs_audit("scan", str(readme), "-q", "--no-history", cwd=work)
    assert tracked.returncode == 2 and "tracked by git" in one_line(tracked.stderr)
    assert (work / "reports" / "README.md").read_text() == "# our reports\n"


def test_a_single_file_is_a_python_file_or_refused(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {**TREE, "README": "not python\n"})
    refused = cs_audit("scan", str(root / "README"), cwd=tmp_path)
    assert refused.returncode == 2 and "not a directory nor a .py file" in one_line(refused.stderr)
    assert not (tmp_path / "reports").exists()
    one = runner.invoke(app, ["scan", str(root / "engine" / "runner.py"), "-f", "json", "-j", "1"])
    assert one.exit_code == 0
    assert [(f["rule"], f["path"], f["line"]) for f in json.loads(one.stdout)["findings"]] == [
        ("default-on-emitter", "runner.py", 6), ("eager-format", "runner.py", 6), ("env-read-hot", "runner.py", 7)]


# -- configuration


def test_every_configuration_key_is_checked_and_named(tmp_path: Path) -> None:
    cases = {
        'exclude = "v*"': "exclude",
        'exclude = [""]': "exclude",
        "max_file_bytes = -5": "max_file_bytes",
        'default_level = "verbose"': "default_level",
        "hot_roots = [{name = 3}]": "hot_roots[0].name",
        'hot_roots = [{name = "tick"}, {name = "step", class = 1}]': "hot_roots[1].class",
        'hot_roots = [{name = "tick", frequency = "often"}]': "hot_roots[0].frequency",
        'hot_roots = [{name = "tick", when = "x"}]': "hot_roots[0]: unknown keys",
        "emitters = 3": "emitters",
    }
    for i, (line, named) in enumerate(cases.items()):
        root = write_tree(tmp_path / f"t{i}", {**CLEAN, "pyproject.toml": f"[tool.cs-audit]\n{line}\n"})
        for command in (["scan", str(root), "-f", "json"], ["config", str(root)]):
            result = runner.invoke(app, command)
            assert result.exit_code == 2, (line, command, result.output)
            assert f"pyproject.toml [tool.cs-audit]: {named}" in one_line(result.stderr), (line, result.stderr)


LOGGING_TICK = "import logging\nlogger = logging.getLogger(__name__)\n\ndef tick():\n    logger.info('t')\n"


def _rules_and_paths(stdout: str) -> list[tuple[str, str]]:
    return [(f["rule"], f["path"]) for f in json.loads(stdout)["findings"]]


def test_the_nearest_configuration_up_to_the_repository_root_is_used(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", {
        "pyproject.toml": '[tool.cs-audit]\nhot_roots = [{name = "tick", frequency = "step"}]\nexclude = ["sub/gen/*"]\n',
        "sub/pyproject.toml": "[project]\nname = 'sub'\n",  # no [tool.cs-audit]: not ours, looked past
        "sub/a.py": LOGGING_TICK,
        "sub/gen/b.py": LOGGING_TICK,
        "other/cs-audit.yaml": "hot_roots: []\n",
        "other/a.py": LOGGING_TICK,
    })
    git(repo, "init", "-q")
    sub = runner.invoke(app, ["scan", str(repo / "sub"), "-f", "json", "-j", "1", "--no-history"])
    assert sub.exit_code == 0, sub.output
    assert _rules_and_paths(sub.stdout) == [("default-on-emitter", "a.py")]  # the root's hot root; gen/ excluded
    nearer = runner.invoke(app, ["scan", str(repo / "other"), "-f", "json", "-j", "1", "--no-history"])
    assert _rules_and_paths(nearer.stdout) == []  # its own cs-audit.yaml wins, with no hot root
    shown = runner.invoke(app, ["config", str(repo / "sub")])
    assert shown.exit_code == 0 and "# the configuration of a scan of" in shown.stdout
    assert "../pyproject.toml [tool.cs-audit]" in shown.stdout
    # outside a repository, a folder above the scanned one is nobody's configuration of it
    loose = write_tree(tmp_path / "loose", {"pyproject.toml": '[tool.cs-audit]\nexclude = ["*"]\n',
                                            "sub/engine/runner.py": TREE["engine/runner.py"]})
    alone = runner.invoke(app, ["scan", str(loose / "sub"), "-f", "json", "-j", "1", "--no-history"])
    assert len(_rules_and_paths(alone.stdout)) == 3


def test_config_file_option_and_config_prints_toml_with_the_shipped_roots(tmp_path: Path) -> None:
    import tomllib

    root = write_tree(tmp_path / "tree", {"a.py": LOGGING_TICK, "pyproject.toml": "[tool.cs-audit]\nexclude = ['*']\n"})
    chosen = write_tree(tmp_path / "conf", {"cs-audit.toml": 'hot_roots = [{name = "tick", frequency = "round"}]\n'})
    result = runner.invoke(app, ["scan", str(root), "-f", "json", "-j", "1", "--no-history", "--config", str(chosen / "cs-audit.toml")])
    assert result.exit_code == 0, result.output
    assert [(f["rule"], f["frequency"]) for f in json.loads(result.stdout)["findings"]] == [("default-on-emitter", "round")]
    shown = runner.invoke(app, ["config", str(root), "--config", str(chosen / "cs-audit.toml")])
    assert shown.exit_code == 0, shown.output
    table = tomllib.loads(shown.stdout)["tool"]["cs-audit"]
    assert table["exclude"] == [] and table["default_level"] == "info" and table["max_file_bytes"] == 1 << 20
    assert table["hot_roots"][0] == {"name": "tick", "frequency": "round"}
    assert {"name": "execute_model", "frequency": "step"} in table["hot_roots"][1:]  # shipped
    missing = runner.invoke(app, ["scan", str(root), "--config", str(tmp_path / "nope.toml")])
    assert missing.exit_code == 2 and "nope.toml: no such file" in one_line(missing.stderr)


def test_a_project_hot_root_that_matches_nothing_is_a_warning(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {
        **TREE, "pyproject.toml": '[tool.cs-audit]\nhot_roots = [{name = "tick_typo", frequency = "step"}]\n'})
    result = runner.invoke(app, ["scan", str(root), "-f", "json", "-o", os.devnull, "-j", "1", "-q"])
    assert result.exit_code == 0
    assert one_line(result.stderr).startswith(
        "cs-audit: warning: pyproject.toml [tool.cs-audit]: hot_roots[0] {name = 'tick_typo', frequency = 'step'} matches no function")


# -- the small ones

RUNNER = """import logging, os
logger = logging.getLogger(__name__)


class Runner:
    def execute_model(self, batch):
        logger.info(f"step {batch}")
        return os.environ.get("MY_DBG")
"""


def test_a_swapped_or_empty_range_is_an_error_and_counts_are_singular(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("one", {"a.py": "x = 1\n"}), ("two", {"a.py": "x = 2\n"})])
    swapped = cs_audit("report", ".", "--range", "HEAD..HEAD~1", cwd=repo)
    assert swapped.returncode == 2 and "HEAD~1..HEAD has some" in one_line(swapped.stderr)
    empty = cs_audit("report", ".", "--range", "HEAD..HEAD", cwd=repo)
    assert empty.returncode == 2 and "holds no commits" in one_line(empty.stderr)
    assert not (repo / "reports").exists()
    one = cs_audit("report", ".", "--range", "HEAD~1..HEAD", "-o", str(tmp_path / "out"), cwd=repo)
    assert one.returncode == 0 and "cs-audit: 1 commit in " in one.stderr and " 0 findings ->" in one.stderr
    single = make_repo(tmp_path, [("init", {"engine/runner.py": RUNNER.replace('        return os.environ.get("MY_DBG")\n', "")})],
                       name="single")
    recorded = cs_audit("baseline", ".", "-o", str(tmp_path / "b.json"), "-j", "1", cwd=single)
    assert recorded.returncode == 0 and "cs-audit: 2 findings recorded" in recorded.stderr
    (single / "engine/runner.py").write_text(RUNNER.replace('logger.info(f"step {batch}")', "pass"))
    checked = cs_audit("check", ".", "-j", "1", "--since", "HEAD", cwd=single)
    assert checked.returncode == 1 and "; 1 file\n" in checked.stdout and "FAILED: 1 new finding " in checked.stdout


def test_check_markdown_since_without_a_baseline_has_no_fixed_section(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": RUNNER})])
    result = runner.invoke(app, ["check", str(repo), "--since", "HEAD", "-f", "markdown", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert "Fixed since the baseline" not in result.stdout and "## New findings" in result.stdout


def test_update_baseline_leaves_the_file_alone_unless_its_set_changed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": RUNNER})])
    baseline = tmp_path / "b.json"
    assert runner.invoke(app, ["baseline", str(repo), "-o", str(baseline), "-j", "1"]).exit_code == 0
    recorded = baseline.read_bytes()
    fingerprints = [e["fingerprint"] for e in json.loads(recorded)["findings"]]
    assert fingerprints == sorted(fingerprints) and len(fingerprints) == 3
    # lines move and a commit is made: the same findings, the file is not rewritten
    commit_files(repo, "shift", {"engine/runner.py": "# header\n\n" + RUNNER}, day=1)
    check = ["check", str(repo), "-b", str(baseline), "--update-baseline", "-j", "1"]
    assert runner.invoke(app, check).exit_code == 0
    assert baseline.read_bytes() == recorded
    # one finding fixed: rewritten without it, the others as they were
    (repo / "engine/runner.py").write_text("# header\n\n" + RUNNER.replace('        return os.environ.get("MY_DBG")\n', ""))
    assert runner.invoke(app, check).exit_code == 0
    entries = json.loads(baseline.read_bytes())["findings"]
    before = {e["fingerprint"]: e for e in json.loads(recorded)["findings"]}
    assert len(entries) == 2 and all(before[e["fingerprint"]] == e for e in entries)


MANY = "import logging\nlogger = logging.getLogger(__name__)\n\n\nclass Runner:\n    def execute_model(self, batch):\n" + "".join(
    f"        logger.info('step {i}')\n" for i in range(12))


def test_github_annotations_are_capped_with_a_summary_and_json_findings_have_a_severity(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {"engine/runner.py": MANY, "engine/env.py": TREE["engine/runner.py"]})
    result = runner.invoke(app, ["scan", str(root), "-f", "github", "-j", "1"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    findings = [line for line in lines if line.startswith(("::warning file=", "::notice file="))]
    assert len(findings) == 10 and all("cs-audit default-on-emitter::" in line for line in findings)  # high first
    assert lines[-1] == (f"::notice::cs-audit: 15 findings (13 high, 2 medium), 10 shown as annotations (the most severe "
                         f"and hottest); every one in `cs-audit scan {root}`")
    assert len(runner.invoke(app, ["scan", str(root), "-f", "github", "--max-annotations", "0"]).stdout.splitlines()) == 16
    report = json.loads(runner.invoke(app, ["scan", str(root), "-f", "json", "-j", "1"]).stdout)
    assert {(f["rule"], f["severity"]) for f in report["findings"]} == {
        ("default-on-emitter", "high"), ("eager-format", "medium"), ("env-read-hot", "medium")}


def test_rules_are_one_line_each_when_piped() -> None:
    proc = cs_audit("rules", env={"COLUMNS": "40"})
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert len(lines) == 9 and all(len(line.split()) > 3 for line in lines), proc.stdout


def test_check_github_caps_the_new_finding_annotations(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("init", {"engine/__init__.py": ""})])
    (repo / "engine" / "runner.py").write_text(MANY)  # untracked: every line is new
    result = runner.invoke(app, ["check", str(repo), "--since", "HEAD", "-f", "github", "--max-annotations", "3", "-j", "1"])
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert len([line for line in lines if line.startswith("::error file=")]) == 3
    assert lines[-1].startswith("::error::cs-audit check fail: 12 new gating findings (3 shown as annotations")


def test_the_range_summary_counts_what_the_cache_served(tmp_path: Path) -> None:
    # a second run of a range is served by the disk cache: its summary said "files parsed 0,
    # reused 0; joins reused for 0 commits" although it wrote every report
    repo = make_repo(tmp_path, [("one", {"engine/runner.py": RUNNER}), ("two", {"engine/util.py": "x = 2\n"})])
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    runs = [cs_audit("report", ".", "--range", "HEAD~1..HEAD", "-o", str(tmp_path / "out"), "-j", "1", cwd=repo, env=env)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0]
    first, second = (r.stderr.splitlines()[-1] for r in runs)
    assert "files parsed 2, reused 0, from the cache 0;" in first, first
    assert "files parsed 0, reused 0, from the cache 2;" in second and "whole results from the cache for 1 commit" in second, second


# -- what a new user met (#45)


def test_check_names_each_new_site_as_scan_does_with_its_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    monkeypatch.chdir(root)
    scanned = runner.invoke(app, ["scan", ".", "-f", "concise", "-o", str(tmp_path / "r.md"), "--no-history", "-j", "1"])
    checked = runner.invoke(app, ["check", ".", "-j", "1", "-q"])
    assert (scanned.exit_code, checked.exit_code) == (0, 1), checked.output
    listed = [m.groups() for m in re.finditer(r"^(\S+:\d+:\d+): (\S+) ", scanned.stdout, re.MULTILINE)]
    new = [m.groups() for m in re.finditer(r"^NEW (\S+:\d+:\d+) (\S+): ", checked.stdout, re.MULTILINE)]
    assert listed and new == listed, checked.stdout


def test_why_past_the_last_line_is_an_error(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    source = root / "engine" / "runner.py"
    last = len(source.read_text().splitlines())
    answered = runner.invoke(app, ["why", f"{source}:{last}", "--tree", str(root), "-j", "1"])
    assert answered.exit_code == 0 and f"runner.py:{last} is in engine.runner.Runner.execute_model" in answered.stdout
    for line in (last + 1, 9999, 0):
        past = runner.invoke(app, ["why", f"{source}:{line}", "--tree", str(root), "-j", "1"])
        assert (past.exit_code, past.stdout) == (2, ""), past.output
        assert one_line(past.stderr) == f"cs-audit: {source}:{line}: no such line (the file has {last} lines)"


def test_callgraph_path_defaults_to_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    monkeypatch.chdir(root)
    result = runner.invoke(app, ["callgraph", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert [f["id"] for f in json.loads(result.stdout)["functions"]] == ["engine.runner.Runner.execute_model"]


def test_a_report_of_dot_is_titled_by_the_folder_and_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path, [("one", {"engine/runner.py": RUNNER}), ("two", {"engine/util.py": "x = 2\n"})])
    monkeypatch.chdir(repo)
    out = tmp_path / "one.md"
    result = runner.invoke(app, ["report", ".", "--rev", "HEAD~1", "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    sha = git(repo, "rev-parse", "HEAD~1").strip()
    assert out.read_text().splitlines()[0] == f"# cs-audit: repo at {sha[:9]}"


def test_switch_keeps_each_line_whole_when_piped(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    scanned = json.loads(runner.invoke(app, ["scan", str(root), "-f", "json", "--no-history", "-j", "1"]).stdout)
    reasons = next(s["reasons"] for s in scanned["switches"] if s["name"] == "MY_DBG")
    shown = runner.invoke(app, ["switch", "MY_DBG", str(root), "--no-history", "-j", "1"], env={"COLUMNS": "40"})
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert [line for line in lines if line.startswith("  - ")] == [f"  - {reason}" for reason in reasons]
    assert lines[lines.index("reads (1)") + 1].split() == ["engine/runner.py:7", "Runner.execute_model", "per", "call"]


DUMP_TREE = {"engine/runner.py": (
    "import os\n\n\nclass ModelRunner:\n    def execute_model(self, x):\n        self.dump(x)\n        return x\n\n"
    "    def dump(self, x):\n        if not os.environ.get('CS_DUMP_DIR'):\n            return\n"
    "        with open(os.path.join(os.environ['CS_DUMP_DIR'], 'x.txt'), 'a') as f:\n            f.write(str(x))\n")}


def test_why_and_the_finding_say_a_line_behind_an_env_test_runs_only_with_it_set(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", DUMP_TREE)
    source = root / "engine" / "runner.py"
    gated = runner.invoke(app, ["why", f"{source}:12", "--tree", str(root), "-j", "1"])
    assert gated.exit_code == 0, gated.output
    assert gated.stdout.splitlines()[0].endswith("hot (step) by default, but this line runs only with CS_DUMP_DIR set")
    test = runner.invoke(app, ["why", f"{source}:10", "--tree", str(root), "-j", "1"])
    assert test.stdout.splitlines()[0].endswith(": hot (step) by default")  # the test itself runs every step
    scanned = runner.invoke(app, ["scan", str(root), "-f", "concise", "-o", str(tmp_path / "r.md"), "--no-history", "-j", "1"])
    opened = next(x for x in scanned.stdout.splitlines() if "per-call-open a file" in x)
    assert "every engine step only when `CS_DUMP_DIR` is set" in opened


ENVS = '''import os

environment_variables = {
    "MY_TRACE": lambda: os.getenv("MY_TRACE", "0") == "1",
    "MY_CHUNK": lambda: int(
        os.environ.get("MY_CHUNK", "8")
    ),
}


def __getattr__(name):
    return environment_variables[name]()
'''


def test_a_registry_switch_is_read_at_its_own_entry(tmp_path: Path) -> None:
    """A switch of a table of getters (vLLM's envs.py) is read at its entry, not where the table starts."""
    runner_py = "from engine import envs\n\n\ndef step():\n    return envs.MY_TRACE, envs.MY_CHUNK\n"
    root = write_tree(tmp_path / "tree", {"engine/__init__.py": "", "engine/envs.py": ENVS, "engine/runner.py": runner_py})
    scanned = runner.invoke(app, ["scan", str(root), "-f", "json", "--no-history", "--no-cache", "-j", "1"])
    assert scanned.exit_code == 0, scanned.output
    switches = {s["name"]: s for s in json.loads(scanned.stdout)["switches"]}
    table = {name: [r["line"] for r in switches[name]["reads"] if r["path"] == "engine/envs.py"]
             for name in ("MY_TRACE", "MY_CHUNK")}
    assert table == {"MY_TRACE": [4], "MY_CHUNK": [6]}
    shown = runner.invoke(app, ["switch", "MY_CHUNK", str(root), "--no-history", "-j", "1"])
    assert shown.exit_code == 0 and "engine/envs.py:6 " in shown.stdout, shown.output


def test_an_export_to_the_off_value_is_no_setter(tmp_path: Path) -> None:
    """`CS_STATE_DEBUG=0` (or `false`, or empty) in a runner leaves the switch off: no setter in the disposition."""
    engine = ("import logging, os\nlogger = logging.getLogger(__name__)\n\n\nclass Runner:\n"
              "    def execute_model(self, batch):\n"
              "        if os.environ.get(\"CS_STATE_DEBUG\"):\n            logger.info(\"state %s\", batch)\n"
              "        if os.environ.get(\"CS_KV_DEBUG\"):\n            logger.info(\"kv %s\", batch)\n        return batch\n")
    runners = {"run.sh": "export CS_STATE_DEBUG=0\nexport CS_KV_DEBUG=1\npython -m engine\n",
               "bench.sh": "CS_STATE_DEBUG=false python -m engine\nexport CS_STATE_DEBUG=\n"}
    root = write_tree(tmp_path / "tree", {"engine/runner.py": engine, **runners})
    scanned = runner.invoke(app, ["scan", str(root), "-f", "json", "--no-history", "--no-cache", "-j", "1"])
    assert scanned.exit_code == 0, scanned.output
    switches = {s["name"]: s for s in json.loads(scanned.stdout)["switches"]}
    state, kv = switches["CS_STATE_DEBUG"], switches["CS_KV_DEBUG"]
    assert (state["setters"]["count"], state["setters"]["off"], kv["setters"]["count"]) == (0, 3, 1)
    assert "0 setter(s) in runners/launchers, 3 to the off value" in state["reasons"]
    assert "no setting turns it on" in state["reasons"]
    assert "1 setter(s) in runners/launchers" in kv["reasons"]
