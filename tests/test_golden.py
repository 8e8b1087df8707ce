"""Golden reports of the fixture trees (JSON contract + audit markdown).

Regenerate after an intended change with `pytest --update-snapshots`, then read the diff.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from cs_audit.api import run_audit
from cs_audit.config import load_config
from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset

PROJECT = Path(__file__).resolve().parent.parent
SNAPSHOTS = PROJECT / "fixtures" / "snapshots"
TREES = ["compressspec", "sglang_trace", "bad_input"]


def _scan(name: str, jobs: int = 1, cache: bool = True):
    # relative root, as a user types it; commit pinned to null because the fixtures
    # live inside this project's own git history
    cwd = os.getcwd()
    os.chdir(PROJECT / "fixtures")
    try:
        result = run_audit(load_config(name, jobs=jobs, history=False, cache=cache))
    finally:
        os.chdir(cwd)
    return replace(result, commit=None, history_note=None, repositories=())


def _compare(path: Path, actual: str, update: bool) -> None:
    if update or not path.exists():
        path.write_text(actual, encoding="utf-8")
        if not update:
            pytest.fail(f"snapshot {path.name} was missing and has been written; rerun")
    assert actual == path.read_text(encoding="utf-8"), f"{path.name} differs; run pytest --update-snapshots and review"


@pytest.mark.parametrize("tree", TREES)
def test_golden_json(tree: str, update_snapshots: bool) -> None:
    _compare(SNAPSHOTS / f"{tree}.json", render_json(_scan(tree)), update_snapshots)


@pytest.mark.parametrize("tree", TREES)
def test_golden_markdown(tree: str, update_snapshots: bool) -> None:
    _compare(SNAPSHOTS / f"{tree}.md", render_markdown(_scan(tree), load_ruleset()), update_snapshots)


def test_worker_count_does_not_change_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    import cs_audit.api as api

    monkeypatch.setattr(api, "POOL_MIN_FILES", 0)  # force the process pool on a small tree
    # without the cache: with it, the second scan is served whole from the first one's stored report
    pooled, serial = _scan("compressspec", jobs=2, cache=False), _scan("compressspec", jobs=1, cache=False)
    assert pooled.stats.result == serial.stats.result == "analysed"
    assert render_json(pooled) == render_json(serial)


def test_contract_fields_present() -> None:
    report = json.loads(render_json(_scan("compressspec")))
    assert list(report)[:8] == ["tool", "schema_version", "root", "commit", "findings", "switches", "duplicates", "errors"]
    finding_keys = {"rule", "path", "line", "end_line", "function", "switch", "frequency", "gpu_sync", "message", "fingerprint"}
    assert all(finding_keys <= set(f) for f in report["findings"])
    switch_keys = {"name", "category", "reads", "setters", "readers", "added_in", "gated_sites", "gpu_sync",
                   "disposition", "merge_into", "reasons"}
    assert all(switch_keys <= set(s) for s in report["switches"])
    # the fixture fires every rule the registry ships
    assert {f["rule"] for f in report["findings"]} == set(load_ruleset().rules)
    assert all(f["frequency"] in {"step", "request", "round", "layer", "once", "unknown"} for f in report["findings"])
    assert len({f["fingerprint"] for f in report["findings"]}) == len(report["findings"])


def test_bad_input_is_reported_and_the_scan_goes_on() -> None:
    result = _scan("bad_input")
    assert [(e.path, e.kind) for e in result.errors] == [
        ("binary.py", "binary"), ("latin1_no_cookie.py", "encoding"), ("syntax_error.py", "syntax"),
    ]
    assert "4:" in next(e.message for e in result.errors if e.kind == "syntax")
    reads = {(r.path, r.line) for s in result.switches for r in s.reads}
    assert ("crlf.py", 3) in reads and ("ok.py", 7) in reads
