"""The audit markdown's §1 rows: one per statement, the rules that flag it merged into words,
repeats of one rule on one statement folded."""

from __future__ import annotations

import tempfile
from pathlib import Path

from cs_audit.model import EmitterDetail, EnvReadDetail, Finding, SyncDetail
from cs_audit.render.markdown import statement_words, statements
from cs_audit.ruleset import load_ruleset


def _f(rule: str, line: int, end_line: int | None = None, path: str = "pkg/runner.py", cost: float = 1.0, **kw) -> Finding:
    return Finding(rule=rule, path=path, line=line, end_line=end_line or line, function="Runner.step", switch=None,
                   frequency=kw.pop("frequency", "request"), gpu_sync=kw.pop("gpu_sync", False), message="",
                   fingerprint=f"{rule}{line}{kw.get('col', 0)}", cost_us=cost, **kw)


def test_rules_on_one_statement_merge_into_one_row_with_their_words() -> None:
    emit = _f("default-on-emitter", 10, 12, cost=250.0, detail=EmitterDetail("logger.info", "info"))
    eager = _f("eager-format", 10, 12, cost=12.0, eager_kinds=("f-string",), detail=EmitterDetail("logger.info", "info"))
    env = _f("env-read-hot", 11, cost=20.0, detail=EnvReadDetail("SGL_TAG", "os.getenv"))
    other = _f("env-read-hot", 20, cost=20.0, detail=EnvReadDetail("SGL_OTHER", "os.getenv"))
    rows = statements([env, other, emit, eager], load_ruleset())
    assert [len(s.findings) for s in rows] == [3, 1]
    assert rows[0].span == (10, 12) and rows[0].cost_us == 282.0
    assert statement_words(rows[0], load_ruleset()) == "f-string + per-request info line + env read of `SGL_TAG` in the message"
    assert statement_words(rows[1], load_ruleset()) == "env read of `SGL_OTHER`"


def test_two_syncs_of_one_call_site_fold_into_one_row() -> None:
    a = _f("sync-in-debug", 5, gpu_sync=True, col=4, detail=SyncDetail("item"))
    b = _f("sync-in-debug", 5, gpu_sync=True, col=30, detail=SyncDetail("item"))
    rows = statements([a, b], load_ruleset())
    assert len(rows) == 1
    assert statement_words(rows[0], load_ruleset()) == "device sync (`.item()`) ×2"


def test_statements_in_other_files_or_lines_stay_apart() -> None:
    rows = statements([_f("env-read-hot", 5), _f("env-read-hot", 5, path="pkg/other.py"), _f("env-read-hot", 6)], load_ruleset())
    assert len(rows) == 3


# ---------------------------------------------------------------- process sides
_SIDES = {
    "pkg/__init__.py": "",
    "pkg/runner.py": '''
import logging

logger = logging.getLogger(__name__)


class ModelRunner:
    def execute_model(self, batch):
        logger.info("ran %d", len(batch))


class TokenizerManager:
    def _handle_batch_output(self, out):
        logger.info("out %s", out)
''',
}


def test_each_process_side_has_its_own_rows_and_bottom_line() -> None:
    from cs_audit.render.markdown import render_markdown
    from cs_audit.ruleset import load_ruleset
    from cs_audit.testing import scan_files

    result = scan_files(_SIDES)
    assert {(f.function, f.process) for f in result.findings if f.rule == "default-on-emitter"} == {
        ("ModelRunner.execute_model", "worker"), ("TokenizerManager._handle_batch_output", "API server")}
    section = render_markdown(result, load_ruleset()).split("## 1.", 1)[1].split("\n## ", 1)[0]
    assert "### 1.1 worker (1 statements)" in section or "### 1.1 API server (1 statements)" in section
    assert section.count("**Bottom line (") == 2 and "**Bottom line:**" not in section


def test_one_side_has_one_bottom_line_without_headings() -> None:
    from cs_audit.render.markdown import render_markdown
    from cs_audit.ruleset import load_ruleset
    from cs_audit.testing import scan_files

    files = dict(_SIDES)
    files["pkg/runner.py"] = files["pkg/runner.py"].split("class TokenizerManager")[0]
    section = render_markdown(scan_files(files), load_ruleset()).split("## 1.", 1)[1].split("\n## ", 1)[0]
    assert "### 1.1" not in section and section.count("**Bottom line (worker):**") == 1


def _with_rule_words(rule: str, words: str | None) -> dict[str, str]:
    """The shipped rule files with ``rule``'s ``words`` line in rules.yaml replaced (None: dropped)."""
    import re

    from cs_audit.ruleset import read_rule_texts

    texts = read_rule_texts()
    entry = re.search(rf"  - id: {rule}\n(?:    .*\n)*?(    words: .*\n)", texts["rules.yaml"])
    assert entry is not None
    start, end = entry.span(1)
    replaced = "" if words is None else f"    words: {words}\n"
    return {**texts, "rules.yaml": texts["rules.yaml"][:start] + replaced + texts["rules.yaml"][end:]}


def test_a_rule_file_words_a_rule_in_section_1() -> None:
    """A rule's words in §1 are its entry's in rules.yaml (its module adds the level and how
    often): a rule file that words it otherwise changes the row and the folder count, and
    the report's JSON not at all."""
    from cs_audit.api import run_audit
    from cs_audit.config import AuditConfig
    from cs_audit.render.json import render_json
    from cs_audit.render.markdown import render_markdown
    from cs_audit.ruleset import load_ruleset
    from cs_audit.testing import write_tree

    files = {"pkg/__init__.py": "", **{f"pkg/m{i}.py": _SIDES["pkg/runner.py"].split("class TokenizerManager")[0]
                                       for i in range(30)}}  # past the ranked rows: a folder row
    shipped = load_ruleset()
    mine = load_ruleset(_with_rule_words("default-on-emitter", "{phrase: record, noun: emitted record, rank: 1}"))
    with tempfile.TemporaryDirectory() as tmp:
        config = AuditConfig(root=str(write_tree(Path(tmp), files)), jobs=1, history=False, cache=False)
        before, after = run_audit(config, shipped), run_audit(config, mine)
    assert render_json(before) == render_json(after)
    old, new = render_markdown(before, shipped), render_markdown(after, mine)
    assert "| per-step info line: `logger.info(" in old and "| log line ×5 |" in old
    assert "| per-step info record: `logger.info(" in new and "| emitted record ×5 |" in new
    assert "info line" not in new and "| log line ×" not in new


def test_a_rule_without_words_is_a_one_line_error_naming_it() -> None:
    import pytest

    from cs_audit.ruleset import RuleDataError, load_ruleset

    with pytest.raises(RuleDataError) as missing:
        load_ruleset(_with_rule_words("per-call-open", None))
    assert str(missing.value) == ("rules.yaml: per-call-open: no words (a table of phrase, noun (non-empty strings) "
                                  "and rank (a whole number), as the shipped rules have)")
    with pytest.raises(RuleDataError, match=r"^rules.yaml: sync-in-debug: words must be a table of phrase, noun .*'rank': 'first'"):
        load_ruleset(_with_rule_words("sync-in-debug", "{phrase: sync, noun: sync, rank: first}"))


def test_a_hot_root_takes_a_process_and_an_unknown_key_is_refused() -> None:
    import pytest

    from cs_audit.ruleset import RuleDataError, load_ruleset

    rs = load_ruleset().with_extra_roots([{"name": "verify_round", "class": "*Server", "frequency": "round", "process": "verify server"}])
    verify, execute = rs.hot_root_for("verify_round", "MyServer", "srv.py"), rs.hot_root_for("execute_model", None, "w.py")
    assert verify is not None and verify.process == "verify server"
    assert execute is not None and execute.process == "worker"
    with pytest.raises(RuleDataError):
        load_ruleset().with_extra_roots([{"name": "x", "side": "api"}])


# ---------------------------------------------------------------- §3.1 groups information
_INFO = {
    "pkg/__init__.py": "",
    "pkg/a.py": '''
import logging

logger = logging.getLogger(__name__)


class ModelRunner:
    def execute_model(self, batch):
        logger.info("[KVSYNC] moved %d blocks", len(batch))
        logger.warning_once("pkg says %s", batch)
        logger.info("[PKG warning] %s", batch)
''',
    "pkg/b.py": '''
import logging

logger = logging.getLogger(__name__)


class Scheduler:
    def schedule(self, batch):
        logger.info("[KVSYNC] gen=%d", len(batch))
        logger.warning_once("other %s", batch)
        logger.info("[PKG warning] %s", batch)
        logger.info("dropped request %s after timeout", batch)


class Worker:
    def execute_model(self, batch):
        logger.info("dropped request %s after timeout", batch)
''',
}


def test_section_3_1_groups_one_tag_or_one_record_across_files_never_stop_words() -> None:
    import tempfile
    from pathlib import Path

    from cs_audit.api import run_audit
    from cs_audit.config import load_config
    from cs_audit.render.markdown import info_groups
    from cs_audit.ruleset import load_ruleset
    from cs_audit.testing import write_tree

    with tempfile.TemporaryDirectory() as tmp:
        root = write_tree(Path(tmp) / "pkg", _INFO)
        result = run_audit(load_config(str(root), jobs=1, history=False, cache=False))
        keys = [key for key, _ in info_groups(result, load_ruleset())]
    assert "tag *kvsync*" in keys
    assert "record “dropped request … after timeout”" not in keys  # one file only
    # `warning` (a generic word, also in `warning_once`) and `pkg` (the tree's own name) group nothing
    assert not [k for k in keys if "warning" in k or k == "tag *pkg*"]
