"""The command line as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.testing import write_tree

runner = CliRunner()
TREE = {
    "engine/runner.py": """
        import logging, os
        logger = logging.getLogger(__name__)

        class Runner:
            def execute_model(self, batch):
                logger.info(f"step {batch}")
                return os.environ.get("MY_DBG")
    """,
    "broken.py": "def f(:\n",
}


def test_scan_json_to_stdout_follows_the_contract(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    result = runner.invoke(app, ["scan", str(root), "--format", "json", "-j", "1"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["tool"] == "cs-audit" and report["schema_version"] == 1 and report["root"] == str(root)
    assert [(f["rule"], f["line"]) for f in report["findings"]] == [
        ("default-on-emitter", 6), ("eager-format", 6), ("env-read-hot", 7),
    ]
    assert report["errors"][0]["path"] == "broken.py"


def test_scan_text_writes_markdown_under_reports_of_the_cwd(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "mytree", TREE)
    work = tmp_path / "work"
    work.mkdir()
    cwd = os.getcwd()
    os.chdir(work)
    try:
        result = runner.invoke(app, ["scan", str(root), "-j", "1"])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    report = work / "reports" / "mytree.md"
    assert report.exists()
    assert "## 1. Default-ON cost, ranked by estimated per-step impact" in report.read_text()
    assert "report written to reports/mytree.md" in result.output
    assert not (root / "reports").exists()  # never into the scanned tree


def test_scan_markdown_to_chosen_file_and_strict_exit(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    out = tmp_path / "out" / "audit.md"
    result = runner.invoke(app, ["scan", str(root), "--format", "markdown", "--output", str(out), "--strict"])
    assert result.exit_code == 2  # broken.py was skipped
    assert out.read_text().startswith("# cs-audit: tree")


def test_missing_path_and_bad_config_exit_2(tmp_path: Path) -> None:
    assert runner.invoke(app, ["scan", str(tmp_path / "nope")]).exit_code == 2
    root = write_tree(tmp_path / "tree", {"pyproject.toml": "[tool.cs-audit]\nunknown_key = 1\n", "a.py": "x = 1\n"})
    result = runner.invoke(app, ["scan", str(root), "--format", "json"])
    assert result.exit_code == 2
    assert "unknown keys" in result.output


def test_oversized_or_unreadable_pyproject_is_a_config_error(tmp_path: Path) -> None:
    from cs_audit.config import MAX_CONFIG_BYTES

    big = write_tree(tmp_path / "big", {"pyproject.toml": "# pad\n" * (MAX_CONFIG_BYTES // 6 + 1), "a.py": "x = 1\n"})
    result = runner.invoke(app, ["scan", str(big), "--format", "json"])
    assert result.exit_code == 2 and "larger than" in result.output
    odd = write_tree(tmp_path / "odd", {"a.py": "x = 1\n"})
    (odd / "pyproject.toml").write_bytes(b"\xff\xfe[tool.cs-audit]\nunknown_key = 1\n")  # not UTF-8: still read, no traceback
    result = runner.invoke(app, ["scan", str(odd), "--format", "json"])
    assert result.exit_code == 2 and isinstance(result.exception, (SystemExit, type(None)))
    assert "configuration error" in result.output and "Invalid statement" in result.output


def test_project_hot_roots_extend_the_defaults(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {
        "pyproject.toml": '[tool.cs-audit]\nhot_roots = [{name = "tick", frequency = "step"}]\n',
        "a.py": "import logging\nlogger = logging.getLogger(__name__)\n\ndef tick():\n    logger.info('t')\n",
    })
    report = json.loads(runner.invoke(app, ["scan", str(root), "--format", "json"]).stdout)
    assert [(f["rule"], f["line"], f["frequency"]) for f in report["findings"]] == [("default-on-emitter", 5, "step")]


def test_rules_command_lists_and_explains() -> None:
    listing = runner.invoke(app, ["rules"])
    assert listing.exit_code == 0 and "sync-in-debug" in listing.output
    one = runner.invoke(app, ["rules", "eager-format"])
    assert "Why:" in one.output and "logger.debug(f\"pool {pool}\")" in one.output
    assert runner.invoke(app, ["rules", "no-such-rule"]).exit_code == 2


def test_output_to_a_device_is_written_in_place(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    fifo_like = Path("/dev/null")
    result = runner.invoke(app, ["scan", str(root), "--format", "json", "-o", str(fifo_like)])
    assert result.exit_code == 0
    assert fifo_like.is_char_device()  # not replaced by a regular file


def test_report_file_gets_the_mode_open_would_give(tmp_path: Path) -> None:
    import os
    import stat

    root = write_tree(tmp_path / "tree", TREE)
    out = tmp_path / "out" / "report.json"
    old_mask = os.umask(0o027)
    try:
        assert runner.invoke(app, ["scan", str(root), "--format", "json", "-j", "1", "-o", str(out)]).exit_code == 0
    finally:
        os.umask(old_mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # 0666 under the umask, not the temp file's 0600
    assert json.loads(out.read_text())["tool"] == "cs-audit"


def test_a_root_whose_name_is_not_utf8_gives_valid_json(tmp_path: Path) -> None:
    import os

    root = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    write_tree(root, {"a.py": "import os\nX = os.getenv('A')\n"})
    result = runner.invoke(app, ["scan", str(root), "--format", "json", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["root"].endswith("caf\\xe9")


def test_verbose_prints_each_phase_and_a_warm_run_loads_the_stored_result(tmp_path: Path, monkeypatch) -> None:
    import re

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = write_tree(tmp_path / "tree", TREE)
    out = tmp_path / "out.json"
    args = ["scan", str(root), "--format", "json", "-o", str(out), "-j", "1", "--no-history", "-v"]

    def phases(output: str) -> list[str]:
        text = " ".join(output.split())  # the console may wrap the line
        listed = text.split("phases: ", 1)[1]
        return [name.strip() for name in re.findall(r"([a-z/ ]+?) \d+\.\d\ds,?", listed)]

    cold = runner.invoke(app, args)
    assert cold.exit_code == 0, cold.output
    assert phases(cold.output) == ["discover", "parse/extract", "joins", "analysis", "store", "history", "render"]
    first = out.read_text()
    warm = runner.invoke(app, args)
    assert warm.exit_code == 0, warm.output
    assert phases(warm.output) == ["discover", "stored report"]  # the report rendered by the cold run
    assert out.read_text() == first
    other = runner.invoke(app, [*args, "--format", "sarif"])  # another report of the same audit
    assert other.exit_code == 0, other.output
    assert phases(other.output) == ["discover", "cached result", "history", "render"]


#: the environment of the subprocesses below: stdout block-buffered into a pipe, as it is
#: unless PYTHONUNBUFFERED is set (so that output left unflushed at exit would be lost)
BUFFERED_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _main_in_subprocess(*args: str) -> tuple[str, bool]:
    """``cs_audit.cli.main`` run with ``args`` in a fresh interpreter: its stdout, and whether
    the CI library (``cs_audit.ci.gate``) was imported by the time it exits."""
    code = textwrap.dedent("""
        import sys
        sys.argv = ["cs-audit", *sys.argv[1:]]
        import cs_audit.cli as cli
        exit_now = cli._exit_now
        def report(status):
            sys.stdout.write(f"\\nci imported: {'cs_audit.ci.gate' in sys.modules}\\n")
            exit_now(status)
        cli._exit_now = report
        cli.main()
    """)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=BUFFERED_ENV)
    return proc.stdout, proc.stdout.rstrip().endswith("ci imported: True")


def test_main_lists_every_command_and_imports_the_ci_library_only_in_the_commands_that_use_it() -> None:
    out, imported = _main_in_subprocess("version")
    assert out.startswith("0.") and not imported
    out, imported = _main_in_subprocess("--help")
    assert not imported and " check " in out and " baseline " in out and " scan " in out
    out, imported = _main_in_subprocess("check", "--help")
    assert not imported and "--baseline" in out


def test_main_exits_with_the_commands_status_and_everything_written(tmp_path: Path) -> None:
    """``main`` ends the process without freeing memory (``_exit_now``): the exit status is
    the command's, stdout is flushed into a pipe, the report file is complete."""
    root = write_tree(tmp_path / "tree", TREE)
    scan = [sys.executable, "-m", "cs_audit", "scan", str(root), "--no-history", "--no-cache", "--format", "json"]
    piped = subprocess.run(scan, capture_output=True, text=True, timeout=120, env=BUFFERED_ENV)
    assert piped.returncode == 0
    assert json.loads(piped.stdout)["findings"]  # the whole document, flushed into the pipe
    out = tmp_path / "report.json"
    written = subprocess.run([*scan, "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert written.returncode == 0 and json.loads(out.read_text()) == json.loads(piped.stdout)
    missing = subprocess.run([*scan[:4], str(tmp_path / "nope")], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr
    strict = subprocess.run([*scan, "--strict"], capture_output=True, text=True, timeout=120)
    assert strict.returncode == 2 and json.loads(strict.stdout)["errors"]  # broken.py: skipped, reported


@pytest.mark.parametrize(("status", "code", "stderr"), [(None, 0, ""), (0, 0, ""), (3, 3, ""), (261, 5, ""),
                                                       ("bye", 1, "bye\n")])
def test_exit_now_ends_the_process_as_sys_exit_would(status: object, code: int, stderr: str) -> None:
    proc = subprocess.run([sys.executable, "-c", f"import cs_audit.cli as c; print('out'); c._exit_now({status!r})"],
                          capture_output=True, text=True, timeout=60, env=BUFFERED_ENV)
    assert (proc.returncode, proc.stdout, proc.stderr) == (code, "out\n", stderr)


def test_a_scan_of_main_keeps_what_it_built_and_leaves_the_collector_off(tmp_path: Path, monkeypatch) -> None:
    """Run as by ``main`` (``_KEPT`` a list): the facts and model are kept, not freed, and the
    cyclic collector stays off after the scan; the report is the same as without keeping."""
    import gc

    import cs_audit.cli.common as cli

    root = write_tree(tmp_path / "tree", TREE)
    plain = runner.invoke(app, ["scan", str(root), "--no-history", "--no-cache", "--format", "json"])
    kept: list[object] = []
    monkeypatch.setattr(cli, "KEPT", kept)
    try:
        result = runner.invoke(app, ["scan", str(root), "--no-history", "--no-cache", "--format", "json"])
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert result.exit_code == plain.exit_code == 0 and result.stdout == plain.stdout
    facts, scripts, joins = kept[-1]  # type: ignore[misc]
    assert set(facts) == {"engine/runner.py"} and joins.model.facts is facts


def test_an_output_of_dash_is_standard_output_not_a_file(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", TREE)
    repo_root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": repo_root}
    done = subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(root), "-f", "json", "-o", "-", "-j", "1",
                           "--no-cache", "--no-history", "-q"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tool"] == "cs-audit"
    assert not (tmp_path / "-").exists()
