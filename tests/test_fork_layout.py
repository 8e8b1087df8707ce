"""A fork laid out as the CompressSpec team's (#43, tests/forkrepo.py ``make_compressspec``):
an outer repository whose ``.gitignore`` lists the engine's checkout ``vllm/``, a repository
of upstream then fork commits, and ``vllm_cpu/``, a submodule."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.forkrepo import make_compressspec
from tests.gitrepo import git
from tests.test_cli_like_ruff import cs_audit


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_compressspec(tmp_path_factory.mktemp("compressspec"))


def _scan(root: Path, *args: str, cwd: Path | None = None) -> dict:
    proc = cs_audit("scan", str(root), "--no-history", "-j", "1", "-f", "json", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_an_engine_checkout_the_outer_gitignore_lists_is_scanned_and_said(ws: Path, tmp_path: Path) -> None:
    (ws / "build").mkdir(exist_ok=True)
    (ws / "build" / "copy.py").write_text("X = 1\n")
    (ws / ".git" / "info" / "exclude").write_text("build/\n")
    try:
        report = _scan(ws)
    finally:
        (ws / ".git" / "info" / "exclude").write_text("")
        (ws / "build" / "copy.py").unlink()
        (ws / "build").rmdir()
    paths = {f["path"] for f in report["findings"]}
    assert "vllm/vllm/worker/runner.py" in paths
    assert [r["path"] for r in report["repositories"]] == [".", "vllm", "vllm_cpu"]
    notes = {n["path"]: n["message"] for n in report["notes"] if n["id"] == "ignored-folder"}
    assert "scanned" in notes["vllm"] and "not scanned" not in notes["vllm"]
    assert "not scanned (1 Python file" in notes["build"]
    assert report["errors"] == []


def test_check_since_head_in_the_outer_repository_fails_a_new_emitter_in_the_engine(ws: Path) -> None:
    runner = ws / "vllm" / "vllm" / "worker" / "runner.py"
    before = runner.read_text()
    runner.write_text(before.replace("        return batch\n\n    def check",
                                     "        logger.warning(f\"[CS] forward {batch}\")\n        return batch\n\n    def check", 1))
    try:
        # from the outer repository, and from a folder of the engine (checked from the engine's top)
        for cwd, shown in ((ws, "vllm/vllm/worker/runner.py"), (ws / "vllm/vllm/worker", "vllm/worker/runner.py")):
            proc = cs_audit("check", "--since", "HEAD", "-j", "1", ".", cwd=cwd)
            assert proc.returncode == 1, proc.stdout + proc.stderr
            assert f"NEW {shown}:20:9 default-on-emitter" in proc.stdout
    finally:
        runner.write_text(before)
    assert git(ws / "vllm", "status", "--porcelain") == ""
    assert os.listdir(ws / "vllm_cpu")
