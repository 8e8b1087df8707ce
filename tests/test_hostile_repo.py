"""A scanned repository is untrusted: what it holds can make cs-audit fail with one clear
message, never make it run a program, write outside its outputs or exhaust memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cs_audit.config import ConfigError, DecisionsError, load_config, load_decisions


def _alias_bomb(levels: int = 5) -> str:
    """A few hundred bytes whose aliases nest into 9**levels list items when expanded."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_the_project_configuration_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cs-audit.yaml").write_text(_alias_bomb() + "hot_roots: [*l4]\n")
    with pytest.raises(ConfigError, match="anchors and aliases are not allowed"):
        load_config(str(tmp_path))


def test_an_alias_bomb_in_the_decisions_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cs-audit.decisions.yaml").write_text(_alias_bomb() + "X_DEBUG: {disposition: KEEP, reason: *l4}\n")
    with pytest.raises(DecisionsError, match="anchors and aliases are not allowed"):
        load_decisions(tmp_path)


def test_a_scan_with_an_alias_bomb_ends_at_once_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("print('x')\n")
    (tmp_path / "cs-audit.yaml").write_text(_alias_bomb(9) + "hot_roots: [*l8]\n")  # 9**9 items if expanded
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(tmp_path), "--no-history", "--no-cache", "-f", "json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "cs-audit: configuration error: cs-audit.yaml: line 1: anchors and aliases are not allowed here\n"


# -- programs a repository's own configuration names are never run

ENGINE = '''import os


class GPUModelRunner:
    def execute_model(self, batch):
        if os.environ.get("ENG_TRACE"):
            print("trace", batch)
        return batch
'''


def _repo_with_drivers(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose .gitattributes names a filter and a diff driver that its own
    .git/config defines as programs which leave a marker file when git runs them."""
    try:
        from tests.gitrepo import git, make_repo
    except ImportError:  # run from tests/
        from gitrepo import git, make_repo  # type: ignore[no-redef]

    marker = tmp_path / "MARKER"
    repo = make_repo(tmp_path, [("one", {"eng/model_runner.py": ENGINE, "run.sh": "export ENG_TRACE=1\n"}),
                                ("two", {"eng/model_runner.py": ENGINE + "\n# two\n"})])
    (repo / ".gitattributes").write_text("*.py diff=x filter=x\n*.sh diff=x filter=x\n")
    program = f"sh -c 'touch {marker}; cat'"
    for key, value in (("filter.x.clean", program), ("filter.x.smudge", program), ("filter.x.process", program),
                       ("diff.x.textconv", f"sh -c 'touch {marker}; cat \"$0\"'"), ("diff.x.command", program)):
        git(repo, "config", key, value)
    # the work tree is stat-dirty, as after a checkout: status and diff consult the filters
    (repo / "eng/model_runner.py").write_text(ENGINE + "\n# two\n# three\n")
    return repo, marker


@pytest.mark.parametrize("command", [
    ["scan", "{repo}", "-f", "json", "--no-cache"],
    ["switch", "ENG_TRACE", "{repo}"],
    ["check", "{repo}", "--since", "HEAD~1", "-f", "json"],
    ["report", "{repo}", "--rev", "HEAD~1", "-o", "{out}"],
    ["diff", "HEAD~1", "HEAD", "{repo}"],
])
def test_no_filter_or_diff_driver_of_the_repository_runs(tmp_path: Path, command: list[str]) -> None:
    repo, marker = _repo_with_drivers(tmp_path)
    argv = [part.format(repo=repo, out=tmp_path / "report.md") for part in command]
    proc = subprocess.run([sys.executable, "-m", "cs_audit", *argv, "-j", "1"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert not marker.exists(), f"git ran a program of the repository's configuration during {command[0]}"
