"""The full audit (§2–§4) on a git repository built from the compressspec fixture with
fixed dates: added-in commits, setters, readers, dispositions, decisions file; the
same tree outside git and as a shallow clone."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from cs_audit.api import run_audit
from cs_audit.config import load_config
from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset
from tests.gitrepo import git_env, make_repo

PROJECT = Path(__file__).resolve().parent.parent
FIXTURE = PROJECT / "fixtures" / "compressspec"
SNAPSHOTS = PROJECT / "fixtures" / "snapshots"


def _files(*prefixes: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for path in sorted(FIXTURE.rglob("*")):
        rel = path.relative_to(FIXTURE).as_posix()
        if path.is_file() and "__pycache__" not in rel and rel.startswith(prefixes):
            out[rel] = path.read_text(encoding="utf-8")
    return out


#: five commits, one day apart from 2026-01-01: the engine first, debug switches later
HISTORY = [
    ("engine: runner, scheduler, verify server",
     _files("vllm/vllm/v1", "vllm/vllm/envs.py", "vllm/vllm/__init__.py", "verify/", "vllm/vllm/breakdown_logger.py")),
    ("cpu verify engine and compaction", _files("vllm/vllm/cpu_verify", "vllm_cpu/")),
    ("models", _files("vllm/vllm/model_executor")),
    ("runners and launcher", _files("scripts/", ".env", "launch.py")),
    ("analysis scripts", _files("analysis/")),
]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    covered = {rel for _, files in HISTORY for rel in files}
    assert covered == set(_files("")), "every fixture file is committed once"
    return make_repo(tmp_path_factory.mktemp("hist"), HISTORY, name="compressspec")


def _scan(root: Path, **options: object):
    result = run_audit(load_config(str(root), jobs=1, **options))
    return replace(result, root="compressspec")


def _by_name(result) -> dict:
    return {s.name: s for s in result.switches}


def test_added_in_is_the_commit_of_the_first_read(repo: Path) -> None:
    switches = _by_name(_scan(repo))
    assert switches["LOG_DELTA_SELECTION"].added_in.subject == "engine: runner, scheduler, verify server"
    assert switches["LOG_DELTA_SELECTION"].added_in.date == "2026-01-01"
    assert switches["CPU_KV_HASH_DBG"].added_in.subject == "cpu verify engine and compaction"
    assert switches["LAYER_PROBE"].added_in.date == "2026-01-03"
    assert all(s.added_in is not None for s in switches.values()), [s.name for s in switches.values() if s.added_in is None]


def test_setters_readers_and_dispositions(repo: Path) -> None:
    switches = _by_name(_scan(repo, history=False))
    diff = switches["COMPACT_DIFF_STAT"]
    assert [(x.path, x.kind, x.value) for x in diff.setters] == [
        ("scripts/run_breakdown.sh", "passthrough", "0"), ("scripts/sweep.sh", "set", "1"),
    ]
    assert diff.readers == (("scripts/accept.sh", 7, "grep diff_stat"),)
    assert diff.disposition == "KEEP" and diff.decided_by == "keep-read-by-scripts"
    assert [r[0] for r in switches["BREAKDOWN_DIR"].readers] == ["analysis/collect_cells.py"] * 2 + ["analysis/recompact_summary.py"] * 2
    assert {r[2] for r in switches["RECOMPACT_TRACE"].readers} == {"recompact_trace.jsonl"}
    assert [x.kind for x in switches["KV_DUMP_NCT"].setters] == ["commented"]
    assert switches["KV_DUMP_NCT"].disposition == "REMOVE"
    assert switches["ATTN_KV_DUMP_DIR"].disposition == "MERGE" and switches["ATTN_KV_DUMP_DIR"].merge_into == "CS_OUT"
    # unset and unread decides before the level-knob merge; a set level knob merges by level
    assert switches["COMPRESSION_SPEC_DEBUG"].decided_by == "remove-unset-debug"
    assert (switches["VERIFY_DEBUG"].decided_by, switches["VERIFY_DEBUG"].merge_into) == ("merge-level-knob", "CS_TRACE=2")
    assert switches["COMPACT_METHOD"].disposition == "KEEP" and switches["COMPACT_METHOD"].decided_by == "keep-config"


def test_decisions_file_overrides_and_is_reported(repo: Path, tmp_path: Path) -> None:
    copy = tmp_path / "compressspec"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    (copy / "cs-audit.decisions.yaml").write_text("KV_DUMP_NCT:\n  disposition: KEEP\n  reason: parity hunts need it\n")
    result = _scan(copy)
    kv = _by_name(result)["KV_DUMP_NCT"]
    assert kv.disposition == "KEEP" and kv.decided_by == "decisions-file"
    assert kv.reasons[0] == "decided in cs-audit.decisions.yaml: parity hunts need it"
    assert result.overridden == ("KV_DUMP_NCT",)
    assert "overriding the rules" in render_markdown(result, load_ruleset())


def test_bad_decisions_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    copy = tmp_path / "compressspec"
    shutil.copytree(FIXTURE, copy)
    (copy / "cs-audit.decisions.yaml").write_text("KV_DUMP_NCT: [not, a, mapping]\n")
    result = _scan(copy)
    assert [(e.path, e.kind) for e in result.errors] == [("cs-audit.decisions.yaml", "io")]
    assert _by_name(result)["KV_DUMP_NCT"].decided_by != "decisions-file"


def test_outside_git_history_is_null_with_a_reason(tmp_path: Path) -> None:
    copy = tmp_path / "compressspec"
    shutil.copytree(FIXTURE, copy)
    result = _scan(copy)
    assert result.commit is None and result.errors == ()
    assert all(s.added_in is None and s.added_in_note == "not a git repository" for s in result.switches)


def test_shallow_clone_says_history_is_truncated(repo: Path, tmp_path: Path) -> None:
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)],
                   check=True, env=git_env(), capture_output=True)
    result = _scan(shallow)
    assert result.errors == ()
    assert "shallow" in (result.history_note or "")
    diff = _by_name(result)["COMPACT_DIFF_STAT"]
    assert diff.added_in is not None and diff.added_in_note == "shallow clone: may be older"


def test_golden_full_audit_with_history(repo: Path, update_snapshots: bool) -> None:
    result = _scan(repo)
    result = replace(result, timings=())
    for name, text in (("compressspec_history.json", render_json(result)),
                       ("compressspec_history.md", render_markdown(result, load_ruleset()))):
        path = SNAPSHOTS / name
        if update_snapshots or not path.exists():
            path.write_text(text, encoding="utf-8")
        assert text == path.read_text(encoding="utf-8"), f"{name} differs; run pytest --update-snapshots and review"
    report = json.loads(render_json(result))
    assert report["commit"] == result.commit and len(report["commit"]) == 40
