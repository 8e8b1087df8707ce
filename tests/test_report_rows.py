"""The audit markdown's §1 rows: one per statement, the rules that flag it merged into words,
repeats of one rule on one statement folded."""

from __future__ import annotations

from cs_audit.model import EmitterDetail, EnvReadDetail, Finding, SyncDetail
from cs_audit.render.markdown import statement_words, statements


def _f(rule: str, line: int, end_line: int | None = None, path: str = "pkg/runner.py", cost: float = 1.0, **kw) -> Finding:
    return Finding(rule=rule, path=path, line=line, end_line=end_line or line, function="Runner.step", switch=None,
                   frequency=kw.pop("frequency", "request"), gpu_sync=kw.pop("gpu_sync", False), message="",
                   fingerprint=f"{rule}{line}{kw.get('col', 0)}", cost_us=cost, **kw)


def test_rules_on_one_statement_merge_into_one_row_with_their_words() -> None:
    emit = _f("default-on-emitter", 10, 12, cost=250.0, detail=EmitterDetail("logger.info", "info"))
    eager = _f("eager-format", 10, 12, cost=12.0, eager_kinds=("f-string",), detail=EmitterDetail("logger.info", "info"))
    env = _f("env-read-hot", 11, cost=20.0, detail=EnvReadDetail("SGL_TAG", "os.getenv"))
    other = _f("env-read-hot", 20, cost=20.0, detail=EnvReadDetail("SGL_OTHER", "os.getenv"))
    rows = statements([env, other, emit, eager])
    assert [len(s.findings) for s in rows] == [3, 1]
    assert rows[0].span == (10, 12) and rows[0].cost_us == 282.0
    assert statement_words(rows[0]) == "f-string + per-request info line + env read of `SGL_TAG` in the message"
    assert statement_words(rows[1]) == "env read of `SGL_OTHER`"


def test_two_syncs_of_one_call_site_fold_into_one_row() -> None:
    a = _f("sync-in-debug", 5, gpu_sync=True, col=4, detail=SyncDetail("item"))
    b = _f("sync-in-debug", 5, gpu_sync=True, col=30, detail=SyncDetail("item"))
    rows = statements([a, b])
    assert len(rows) == 1
    assert statement_words(rows[0]) == "device sync (`.item()`) ×2"


def test_statements_in_other_files_or_lines_stay_apart() -> None:
    rows = statements([_f("env-read-hot", 5), _f("env-read-hot", 5, path="pkg/other.py"), _f("env-read-hot", 6)])
    assert len(rows) == 3
