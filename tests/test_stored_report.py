"""A scan of a tree whose inputs are all as they were serves the report it rendered then
(``api.audit_report``): the same bytes, the same exit status and warnings, and a fresh
report as soon as any input differs (a file, the configuration, an option, the decisions
file, the commit at HEAD, the format).  No timings are asserted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.testing import write_tree
from tests.gitrepo import commit_files, make_repo
from tests.test_cli import TREE

runner = CliRunner()
FILES = {path: text for path, text in TREE.items() if path.endswith("runner.py")}


def _scan(root: Path, out: Path, *options: str, fmt: str = "json") -> tuple[int, str, list[str], str]:
    """(exit code, the report written, the phases of the run, its stderr)."""
    result = runner.invoke(app, ["scan", str(root), "--format", fmt, "-o", str(out), "-j", "1", "-v", *options])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    text = " ".join(result.stderr.split())
    listed = text.split("phases: ", 1)[1] if "phases: " in text else ""
    phases = [name.strip() for name in re.findall(r"([a-z/ ]+?) \d+\.\d\ds,?", listed)]
    return result.exit_code, out.read_text(encoding="utf-8"), phases, result.stderr


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def test_an_unchanged_tree_serves_the_report_it_rendered(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", FILES)
    out = tmp_path / "out.json"
    code, cold, phases, _ = _scan(root, out, "--no-history")
    assert "stored report" not in phases and "render" in phases
    code_warm, warm, phases, _ = _scan(root, out, "--no-history")
    assert phases == ["discover", "stored report"]
    assert warm == cold and code_warm == code
    _, elsewhere, phases, _ = _scan(root, tmp_path / "elsewhere.json", "--no-history")
    assert phases == ["discover", "stored report"] and elsewhere == cold
    assert _scan(root, out, "--no-history", "--no-cache")[1] == cold


@pytest.mark.parametrize("options", [["--format", "text"], ["--format", "full"], ["--format", "concise", "--statistics"]],
                         ids=lambda o: " ".join(o))
def test_the_terminal_formats_print_what_they_printed(tmp_path: Path, options: list[str]) -> None:
    root = write_tree(tmp_path / "tree", FILES)
    out = tmp_path / "out.md"
    args = ["scan", str(root), "-o", str(out), "-j", "1", "--no-history", *options]
    cold = runner.invoke(app, args)
    markdown = out.read_text(encoding="utf-8")
    warm = runner.invoke(app, [*args, "-v"])
    assert cold.exit_code == warm.exit_code == 0, cold.output + warm.output
    assert "phases: discover" in warm.stdout and "stored report" in warm.stdout
    without_phases = [line for line in warm.stdout.splitlines() if not line.startswith("phases: ")]
    assert without_phases == cold.stdout.splitlines()
    assert "engine/runner.py:" in cold.stdout or "default-on-emitter" in cold.stdout
    assert out.read_text(encoding="utf-8") == markdown
    fresh = runner.invoke(app, [*args, "--no-cache"])
    assert fresh.stdout == cold.stdout and out.read_text(encoding="utf-8") == markdown
    toggled = [*args[:-1]] if args[-1] == "--statistics" else [*args, "--statistics"]
    other = runner.invoke(app, toggled)
    assert other.stdout != cold.stdout and other.stdout == runner.invoke(app, [*toggled, "--no-cache"]).stdout


def _edit_a_file(root: Path) -> list[str]:
    with open(root / "engine" / "runner.py", "a", encoding="utf-8") as handle:
        handle.write("\n\ndef _late(x):\n    logger.warning(f'late {x}')\n")
    return []


def _decide(root: Path) -> list[str]:
    (root / "cs-audit.decisions.yaml").write_text("MY_DBG: {disposition: KEEP, reason: asked for}\n", encoding="utf-8")
    return []


def _configure(root: Path) -> list[str]:
    (root / "pyproject.toml").write_text('[tool.cs-audit]\nignore = ["eager-format"]\n', encoding="utf-8")
    return []


def _ignore_a_rule(root: Path) -> list[str]:
    return ["--ignore", "default-on-emitter"]


def _another_format(root: Path) -> list[str]:
    return ["--format", "sarif"]


@pytest.mark.parametrize("change", [_edit_a_file, _decide, _configure, _ignore_a_rule, _another_format],
                         ids=lambda f: f.__name__.strip("_"))
def test_any_input_that_differs_gives_a_fresh_report(tmp_path: Path, change) -> None:
    root = write_tree(tmp_path / "tree", FILES)
    out = tmp_path / "out"
    _, before, _, _ = _scan(root, out, "--no-history")
    options = ["--no-history", *change(root)]
    _, after, phases, _ = _scan(root, out, *options)
    assert "stored report" not in phases
    assert after != before
    assert after == _scan(root, out, *options, "--no-cache")[1]
    _, again, phases, _ = _scan(root, out, *options)
    assert phases == ["discover", "stored report"] and again == after


def test_a_new_commit_at_head_gives_a_fresh_report(tmp_path: Path) -> None:
    root = make_repo(tmp_path, [("start", {"engine/runner.py": write_tree(tmp_path / "src", FILES).joinpath(
        "engine/runner.py").read_text(encoding="utf-8")})])
    out = tmp_path / "out.json"
    _, before, _, _ = _scan(root, out)
    head = commit_files(root, "nothing changed in the files", {}, day=1)
    _, after, phases, _ = _scan(root, out)
    assert "stored report" not in phases
    assert f'"commit": "{head}"' in after and after != before


def test_the_exit_status_and_warnings_of_a_stored_report_are_those_of_its_scan(tmp_path: Path) -> None:
    files = {**FILES, "broken.py": "def f(:\n",
             "pyproject.toml": '[tool.cs-audit]\nhot_roots = [{name = "no_such_function", frequency = "step"}]\n'}
    root = write_tree(tmp_path / "tree", files)
    out = tmp_path / "out.json"
    for options in (["--exit-non-zero-on-findings"], ["--strict"]):
        first = _scan(root, out, "--no-history", *options)
        second = _scan(root, out, "--no-history", *options)
        assert second[2] == ["discover", "stored report"]
        assert first[0] == second[0] == (1 if options == ["--exit-non-zero-on-findings"] else 2)
        assert "hot_roots[0]" in first[3] and "hot_roots[0]" in second[3]


def test_a_report_a_crash_shaped_is_not_stored(tmp_path: Path) -> None:
    project = Path(__file__).resolve().parent.parent
    root = write_tree(tmp_path / "tree", FILES)
    (root / "chain.py").write_bytes((project / "fixtures" / "hostile" / "and_chain_10000.py").read_bytes())
    out = tmp_path / "out.json"
    _, first, _, _ = _scan(root, out, "--no-history")
    assert '"parser-crash"' in first
    _, second, phases, _ = _scan(root, out, "--no-history")
    assert "stored report" not in phases and second == first
    assert not list((tmp_path / "xdg").rglob("reports/*.entry"))


@pytest.mark.parametrize("pass_fails", [True, False], ids=["history pass fails", "blame fails"])
def test_a_report_a_failed_history_shaped_is_not_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pass_fails: bool) -> None:
    # git failing for a while (a timeout, a lock) is no answer of the history: the next
    # scan asks again instead of serving what the failure gave
    from cs_audit.git import blame, introduced

    def log(*args: object) -> bytes:
        if pass_fails:
            raise introduced.PassError("git log failed: timed out")
        return b""  # a history that answers no name: every read is blamed

    spawn = blame._spawn

    def failing_blame(argv, *args, **kwargs):
        return (1, b"", b"fatal: timed out") if "blame" in argv else spawn(argv, *args, **kwargs)

    monkeypatch.setattr(introduced, "_log", log)
    if not pass_fails:
        monkeypatch.setattr(blame, "_spawn", failing_blame)
    root = make_repo(tmp_path, [("start", {"engine/runner.py": write_tree(tmp_path / "src", FILES).joinpath(
        "engine/runner.py").read_text(encoding="utf-8")})])
    out = tmp_path / "out.json"
    _, first, _, _ = _scan(root, out)
    assert ("blame failed" in first) != pass_fails
    _, second, phases, _ = _scan(root, out)
    assert "stored report" not in phases and second == first
    assert not list((tmp_path / "xdg").rglob("reports/*.entry"))
