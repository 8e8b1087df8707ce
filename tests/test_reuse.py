"""A changed file whose facts are unchanged, or unchanged but for moved lines, reuses the
root's last stored whole-tree result (``api._result_of_equal_facts``, ``cs_audit.incremental.reuse``):
the report is exactly that of an uncached scan, and no joins run.  Anything else that
changed goes through the full analysis.  No timings are asserted."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from cs_audit import api
from cs_audit.api import run_audit
from cs_audit.config import load_config
from cs_audit.extract.python import extract_python
from cs_audit.incremental.reuse import line_map, moved_results
from cs_audit.model import DuplicateGroup, DuplicateSite, FileFacts, Finding
from cs_audit.render.json import render_json
from cs_audit.ruleset import load_ruleset

PROJECT = Path(__file__).resolve().parent.parent
FIXTURES = PROJECT / "fixtures"


def _scan(root: Path, cache_root: Path | None) -> str:
    return _scan_stats(root, cache_root)[0]


def _scan_stats(root: Path, cache_root: Path | None):
    """The JSON report of a scan and what the scan did (``ScanStats``)."""
    config = load_config(str(root), history=False, cache=cache_root is not None,
                         cache_dir=str(cache_root) if cache_root else None, jobs=1)
    result = run_audit(config)
    return render_json(replace(result, root="<root>", commit=None, history_note=None)), result.stats


def _insert(path: Path, before_line: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(before_line - 1, text)
    path.write_text("".join(lines), encoding="utf-8")


@pytest.fixture(params=["compressspec", "sglang_trace"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(FIXTURES / request.param, root)
    return root


def _files_with_findings(root: Path, report: str) -> list[Path]:
    return [p for p in sorted(root.rglob("*.py")) if f'"{p.relative_to(root).as_posix()}"' in report]


def test_comment_on_top_of_each_file_reuses_the_stored_result(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_root = tmp_path / "cache"
    before = _scan(tree, cache_root)
    files = _files_with_findings(tree, before)
    assert len(files) >= 2
    for target in files:
        _insert(target, 1, "# moved every line of this file down by one\n")
        uncached = _scan(tree, None)
        assert uncached != before  # lines moved in the report
        report, stats = _scan_stats(tree, cache_root)
        assert report == uncached and stats.result == "moved", target
        before = uncached


def test_lines_moved_anywhere_give_the_uncached_report(tree: Path, tmp_path: Path) -> None:
    """Blank lines and comments at many places (inside functions, between statements of a
    gated block, in multi-line calls): whichever path the scan takes, the report is right."""
    cache_root = tmp_path / "cache"
    _scan(tree, cache_root)
    files = _files_with_findings(tree, _scan(tree, None))
    for target in files[:3]:
        count = len(target.read_text(encoding="utf-8").splitlines())
        for line in range(2, count, max(1, count // 6)):
            text = target.read_text(encoding="utf-8")
            _insert(target, line, "\n" if line % 2 else "    # note\n")
            try:
                compile(target.read_text(encoding="utf-8"), str(target), "exec")
            except SyntaxError:  # a blank line after a backslash continuation: not an edit to test
                target.write_text(text, encoding="utf-8")
                continue
            assert _scan(tree, cache_root) == _scan(tree, None), (target, line)


def test_unchanged_facts_reuse_the_stored_result(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_root = tmp_path / "cache"
    before = _scan(tree, cache_root)
    target = _files_with_findings(tree, before)[0]
    with open(target, "a", encoding="utf-8") as handle:
        handle.write("\n_EDITED = 1  # a module constant no rule reads\n")
    report, stats = _scan_stats(tree, cache_root)
    assert report == before and stats.result == "stored" and stats.analysed == (target.relative_to(tree).as_posix(),)


def test_a_new_call_is_analysed(tree: Path, tmp_path: Path) -> None:
    cache_root = tmp_path / "cache"
    before = _scan(tree, cache_root)
    target = _files_with_findings(tree, before)[0]
    _insert(target, 1, "import logging\nlogging.getLogger(__name__).info(f'{__name__} loaded')\n")
    after = _scan(tree, cache_root)
    assert after == _scan(tree, None)
    assert "{__name__} loaded" in after and after != before


# ------------------------------------------------------------------ line_map / moved_results
RS = load_ruleset()
SOURCE = '''import os
import logging

logger = logging.getLogger(__name__)


def step(batch):
    if os.getenv("TRACE_STEP"):
        logger.info(f"step {len(batch)}")
    return run(batch)


def run(batch):
    return [b * 2 for b in batch]
'''


def _facts(text: str) -> FileFacts:
    facts = extract_python("m.py", text.encode(), RS)
    assert isinstance(facts, FileFacts)
    return facts


def test_line_map_of_inserted_lines() -> None:
    old = _facts(SOURCE)
    new = _facts("# a\n# b\n" + SOURCE.replace("    return run", "\n    return run"))
    mapping = line_map(old, new)
    assert mapping is not None
    assert mapping[8] == 10 and mapping[9] == 11  # the gate line and the log line, 2 down
    assert mapping[10] == 13  # `return run(batch)`: one more blank line above it


def test_line_map_refuses_other_changes() -> None:
    old = _facts(SOURCE)
    assert line_map(old, _facts(SOURCE.replace("step {len", "steps {len"))) is None  # code text
    assert line_map(old, _facts(SOURCE.replace('"TRACE_STEP"', '"TRACE_STEPS"'))) is None  # a switch
    assert line_map(old, _facts(SOURCE + "\n\ndef extra():\n    run([])\n")) is None  # a call more


def test_line_map_refuses_lines_that_change_order_or_merge() -> None:
    old = _facts(SOURCE)
    step, run = old.functions
    swapped = replace(old, functions=(replace(step, line=run.line, end_line=run.end_line),
                                      replace(run, line=step.line, end_line=step.end_line)))
    assert line_map(old, swapped) is None
    merged = replace(old, functions=(step, replace(run, line=step.line, end_line=run.end_line)))
    assert line_map(old, merged) is None


def test_line_map_keeps_body_lines_on_its_side_of_the_small_helper_limit() -> None:
    old = _facts(SOURCE)
    step = old.functions[0]
    assert line_map(old, replace(old, functions=(replace(step, body_lines=step.body_lines + 3), *old.functions[1:]))) is not None
    assert line_map(old, replace(old, functions=(replace(step, body_lines=400), *old.functions[1:]))) is None


def _finding(path: str, line: int) -> Finding:
    return Finding("env-read-hot", path, line, line, "step", "TRACE_STEP", "step", False, "m", "fp")


def test_moved_results_map_only_the_moved_files() -> None:
    findings = (_finding("m.py", 8), _finding("other.py", 8))
    duplicates = (DuplicateGroup("h", (DuplicateSite("m.py", 7, "step"), DuplicateSite("other.py", 7, "step"))),)
    moved = moved_results(findings, (), duplicates, {"m.py": {7: 9, 8: 10}})
    assert moved is not None
    assert [(f.path, f.line, f.end_line) for f in moved[0]] == [("m.py", 10, 10), ("other.py", 8, 8)]
    assert [(s.path, s.line) for s in moved[2][0].sites] == [("m.py", 9), ("other.py", 7)]
    assert moved_results(findings, (), (), {"m.py": {7: 9}}) is None  # line 8 unknown: analyse


def test_records_are_shared_by_the_relative_and_absolute_root(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cs_audit.incremental import cache

    monkeypatch.setattr(cache, "RACY_NS", 0)
    cache_root = tmp_path / "cache"
    _scan(tree, cache_root)  # absolute root
    target = _files_with_findings(tree, _scan(tree, None))[0]
    _insert(target, 1, "# moved\n")
    expected = _scan(tree, None)
    hashed: list[str] = []
    real_key = cache.source_key
    monkeypatch.setattr(cache, "source_key", lambda source, limit: hashed.append(source.path) or real_key(source, limit))
    monkeypatch.chdir(tree.parent)
    report, stats = _scan_stats(Path(tree.name), cache_root)
    assert report == expected and stats.result == "moved"
    assert hashed == [target.relative_to(tree).as_posix()]  # only the edited file was read for its key


def test_a_changed_file_is_analysed_once_when_the_tree_is_analysed_again(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result that cannot be cached (an internal error, a timeout) is not computed a second
    time by the full analysis that follows the comparison."""
    from cs_audit.sources import FileError

    cache_root = tmp_path / "cache"
    _scan(tree, cache_root)
    target = _files_with_findings(tree, _scan(tree, None))[0]
    relative = target.relative_to(tree).as_posix()
    _insert(target, 1, "# moved\n")
    log = tmp_path / "analysed.log"
    real = api.analyse_file

    def failing(source, *args, **kwargs):  # runs in the worker processes (forked after the patch)
        if source.path != relative:
            return real(source, *args, **kwargs)
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(source.path + "\n")
        return FileError(source.path, "internal", "internal error: simulated")

    monkeypatch.setattr(api, "analyse_file", failing)
    report = _scan(tree, cache_root)
    assert "internal error: simulated" in report
    assert log.read_text(encoding="utf-8").splitlines() == [relative]


def test_facts_loaded_while_a_changed_file_is_analysed_are_not_loaded_again(
        tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a worker analyses the changed file, this process loads the other files' facts a
    full analysis needs; the full analysis that follows (a new call) takes them as they are."""
    import collections
    import time

    from cs_audit.incremental import cache

    cache_root = tmp_path / "cache"
    _scan(tree, cache_root)
    target = _files_with_findings(tree, _scan(tree, None))[0]
    _insert(target, 1, "print('new call')\n")
    expected = _scan(tree, None)
    real_analyse, real_load = api.analyse_file, cache.load
    loaded: collections.Counter[str] = collections.Counter()

    def slow(source, *args, **kwargs):  # runs in the worker (forked after the patch)
        time.sleep(1.0)  # time enough for this process to load every other file
        return real_analyse(source, *args, **kwargs)

    def counting(cache_dir, key):
        loaded[key] += 1
        return real_load(cache_dir, key)

    monkeypatch.setattr(api, "analyse_file", slow)
    monkeypatch.setattr(cache, "load", counting)
    assert _scan(tree, cache_root) == expected
    files = [p for p in tree.rglob("*") if p.is_file()]
    assert len(loaded) >= len(files) - 1  # every other file's entry (and the edited file's old one)
    assert max(loaded.values()) == 1, loaded.most_common(3)


def test_a_changed_file_that_crashes_its_worker_is_reported_and_the_rest_is_the_uncached_report(
        tree: Path, tmp_path: Path) -> None:
    """The changed file's worker dies (libcst overflows its stack) while this process loads
    the other files' facts: the file is a ``parser-crash``, everything else as uncached."""
    cache_root = tmp_path / "cache"
    _scan(tree, cache_root)
    target = _files_with_findings(tree, _scan(tree, None))[0]
    target.write_bytes((FIXTURES / "hostile" / "and_chain_10000.py").read_bytes())
    expected = _scan(tree, None)
    assert '"parser-crash"' in expected and "SIGSEGV" in expected
    assert _scan(tree, cache_root) == expected


def test_a_corrupt_tree_record_means_a_full_analysis(tree: Path, tmp_path: Path) -> None:
    cache_root = tmp_path / "cache"
    _scan(tree, cache_root)
    (record,) = cache_root.rglob("trees/*.entry")
    record.write_bytes(b"cs-audit tree 7\n" + b"\x80not an entry")
    target = _files_with_findings(tree, _scan(tree, None))[0]
    _insert(target, 1, "# moved\n")
    assert _scan(tree, cache_root) == _scan(tree, None)
    assert record.read_bytes() != b"cs-audit tree 7\n" + b"\x80not an entry"  # rewritten by the full analysis


# ------------------------------------------------------------------ call resolutions per root
def test_a_new_call_resolves_the_calls_of_the_changed_file_only(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_root = tmp_path / "cache"
    before = _scan(tree, cache_root)
    target = _files_with_findings(tree, before)[0]
    _insert(target, 1, "import logging\nlogging.getLogger(__name__).info(f'{__name__} loaded')\n")
    after, stats = _scan_stats(tree, cache_root)
    assert stats.resolved == (target.relative_to(tree).as_posix(),)
    assert after == _scan(tree, None) and after != before


def test_a_corrupt_resolutions_record_means_every_file_is_resolved(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_root = tmp_path / "cache"
    before = _scan(tree, cache_root)
    (record,) = cache_root.rglob("resolutions/*.entry")
    record.write_bytes(b"cs-audit resolutions 7\n" + b"\x80not an entry")
    target = _files_with_findings(tree, before)[0]
    _insert(target, 1, "import logging\nlogging.getLogger(__name__).info(f'{__name__} loaded')\n")
    after, stats = _scan_stats(tree, cache_root)
    uncached, fresh = _scan_stats(tree, None)
    assert len(fresh.resolved) > 1 and stats.resolved == fresh.resolved
    assert after == uncached
    assert record.read_bytes() != b"cs-audit resolutions 7\n" + b"\x80not an entry"  # stored again


# ------------------------------------------------------------------ site gates per root
GATED_TREE = {
    "pkg/__init__.py": "",
    "pkg/flags.py": '''import os


def trace_on():
    return os.getenv("PKG_TRACE") == "1"


DUMP_DIR = os.getenv("PKG_DUMP_DIR")


class Breakdown:
    @classmethod
    def get(cls):
        if not _BREAKDOWN_ON:
            return None
        return cls()

    def record(self, name):
        print(f"breakdown {name}")


_BREAKDOWN_ON = os.getenv("PKG_BREAKDOWN") == "1"
''',
    "pkg/engine.py": '''import logging

from pkg import flags
from pkg.flags import Breakdown, trace_on

logger = logging.getLogger(__name__)


class Engine:
    def step(self, batch):
        if trace_on():
            logger.info(f"step {len(batch)}")
            print(batch.sum().item())
        if flags.DUMP_DIR:
            with open(f"{flags.DUMP_DIR}/dump.jsonl", "a") as fh:
                fh.write(str(batch))
        bd = Breakdown.get()
        if bd is not None:
            bd.record("step")
        return batch
''',
    "pkg/other.py": "def helper(x):\n    return x + 1\n",
}


@pytest.fixture
def gated_tree(tmp_path: Path) -> Path:
    root = tmp_path / "gated"
    for name, text in GATED_TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _edit(root: Path, name: str, old: str, new: str) -> None:
    path = root / name
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


# what another file defines decides the switch of a gate in a file that did not change: the
# gates of the unchanged file are taken from the last scan only while none of that changed
@pytest.mark.parametrize("name, old, new", [
    ("pkg/flags.py", '"PKG_TRACE"', '"PKG_TRACE_ON"'),  # the env helper reads another variable
    ("pkg/flags.py", 'return os.getenv("PKG_TRACE") == "1"', "return False"),  # no longer an env helper
    ("pkg/flags.py", 'os.getenv("PKG_DUMP_DIR")', 'os.getenv("PKG_OUT_DIR")'),  # a module constant reads another
    ("pkg/flags.py", "if not _BREAKDOWN_ON:", "if not _PROFILE_ON:"),  # an entry gate tests another name
    ("pkg/flags.py", "def trace_on():", "def trace_enabled():"),  # the helper is gone
    ("pkg/engine.py", "if trace_on():", "if not trace_on():"),  # a gate of the changed file itself
    ("pkg/engine.py", "        return batch\n", "        if trace_on():\n            self.dump(batch)\n        return batch\n"),  # a new gated call
    ("pkg/other.py", "    return x + 1", "    print(x)\n    return x + 1"),  # nothing a gate reads
])
def test_site_gates_after_an_edit_are_those_of_an_uncached_scan(gated_tree: Path, tmp_path: Path, name: str, old: str, new: str) -> None:
    cache_root = tmp_path / "cache"
    before = _scan(gated_tree, cache_root)
    _edit(gated_tree, name, old, new)
    after, stats = _scan_stats(gated_tree, cache_root)
    assert stats.result == "analysed"
    assert after == _scan(gated_tree, None)
    if name == "pkg/flags.py":
        assert after != before


def test_a_gate_of_an_unchanged_file_follows_the_helper_another_file_changed(gated_tree: Path, tmp_path: Path) -> None:
    cache_root = tmp_path / "cache"
    assert "pkg/engine.py:12 info()" in _scan(gated_tree, cache_root)
    _edit(gated_tree, "pkg/flags.py", '"PKG_TRACE"', '"PKG_TRACE_ON"')
    after = _scan(gated_tree, cache_root)
    assert after == _scan(gated_tree, None)
    switch = next(s for s in json.loads(after)["switches"] if s["name"] == "PKG_TRACE_ON")
    assert any("pkg/engine.py:12 info()" in reason for reason in switch["reasons"])



EDGE_TREE = {
    "pkg/__init__.py": "",
    "pkg/flags.py": 'import os\n\n\ndef trace_on():\n    return os.getenv("PKG_TRACE") == "1"\n',
    "pkg/engine.py": '''from pkg.flags import trace_on


class Engine:
    def step(self, batch):
        if trace_on():
            self._trace(batch)
        return batch

    def _trace(self, batch):
        print(batch.sum().item())
''',
    "pkg/other.py": "def helper(x):\n    return x + 1\n",
}


# an edge's switch is taken by the index of its call while the gates digest holds: an edit
# elsewhere that changes it (the helper reads no variable now), or one of the edge's own gate
@pytest.mark.parametrize("name, old, new", [
    ("pkg/flags.py", 'return os.getenv("PKG_TRACE") == "1"', "return False"),
    ("pkg/engine.py", "if trace_on():", "if not trace_on():"),
    ("pkg/other.py", "    return x + 1", "    print(x)\n    return x + 1"),
])
def test_the_switch_of_an_edge_after_an_edit_is_that_of_an_uncached_scan(tmp_path: Path, name: str, old: str, new: str) -> None:
    root = tmp_path / "edges"
    for path, text in EDGE_TREE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    cache_root = tmp_path / "cache"
    assert "default-on-emitter" not in _scan(root, cache_root)  # the print runs only with PKG_TRACE set
    _edit(root, name, old, new)
    after = _scan(root, cache_root)
    assert after == _scan(root, None)
    assert ("default-on-emitter" in after) == (name != "pkg/other.py")



USES_TREE = {
    "pkg/__init__.py": "",
    "pkg/store.py": 'import os\n\nOUT = os.getenv("PKG_OUT")\n\n\ndef save(x):\n    with open(OUT, "w") as fh:\n        fh.write(x)\n',
    "pkg/other.py": "def helper(x):\n    return x + 1\n",
}


# where a variable's value goes in a file is taken from the last scan while the file's facts
# are those of then: the file that reads it now opens it to read (or another file changed)
@pytest.mark.parametrize("name, old, new, category", [
    ("pkg/store.py", '"w"', '"r"', "input-path"),
    ("pkg/other.py", "    return x + 1", "    print(x)\n    return x + 1", "output-path"),
])
def test_where_a_value_goes_after_an_edit_is_that_of_an_uncached_scan(tmp_path: Path, name: str, old: str, new: str,
                                                                      category: str) -> None:
    root = tmp_path / "uses"
    for path, text in USES_TREE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    cache_root = tmp_path / "cache"
    assert _category(_scan(root, cache_root), "PKG_OUT") == "output-path"
    _edit(root, name, old, new)
    after = _scan(root, cache_root)
    assert after == _scan(root, None)
    assert _category(after, "PKG_OUT") == category


def _category(report: str, name: str) -> str:
    return next(s["category"] for s in json.loads(report)["switches"] if s["name"] == name)


TYPED_TREE = {
    "pkg/__init__.py": "",
    "pkg/engine.py": '''from pkg import helpers


class Engine:
    def __init__(self):
        self.proc = helpers.make()

    def step(self, batch):
        return self.proc.run(batch)
''',
    "pkg/helpers.py": '''import os


class Plain:
    def run(self, batch):
        return batch


class Checked:
    def run(self, batch):
        if os.getenv("PKG_CHECK"):
            print(len(batch))
        return batch


def make():
    return Plain()
''',
}


def test_a_call_of_an_unchanged_file_follows_what_another_file_now_returns(tmp_path: Path) -> None:
    """The resolution tables are digested per file and kept: the changed file's part is worked
    out again, so the unchanged caller's stored resolution is not taken."""
    root = tmp_path / "typed"
    for name, text in TYPED_TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    cache_root = tmp_path / "cache"
    assert "env-read-hot" not in _scan(root, cache_root)
    _edit(root, "pkg/helpers.py", "return Plain()", "return Checked()")
    after, stats = _scan_stats(root, cache_root)
    assert "pkg/engine.py" in stats.resolved
    assert after == _scan(root, None) and "env-read-hot" in after


CYCLE_TREE = {
    "pkg/__init__.py": "",
    "pkg/flags.py": '''import os

DUMP = None
TRACE = object() if DUMP else None
DUMP = object() if TRACE else None
TRACE = object() if os.getenv("PKG_TRACE") else None
''',
    "pkg/engine.py": '''from pkg import flags


def step(batch):
    if flags.TRACE:
        print(batch)
    if flags.DUMP:
        print(len(batch))
    return batch
''',
    "pkg/other.py": "def helper(x):\n    return x + 1\n",
}


@pytest.mark.parametrize("name, old, new", [
    ("pkg/other.py", "    return x + 1", "    print(x)\n    return x + 1"),
    ("pkg/flags.py", "if DUMP else None", "if DUMP and os.getenv('PKG_DUMP') else None"),
])
def test_gates_on_a_cycle_of_names_after_an_edit_are_those_of_an_uncached_scan(tmp_path: Path, name: str, old: str, new: str) -> None:
    """Names whose assignments are gated by each other: what such a gate resolves to may depend
    on which was asked first, so those answers are not kept; the report is the uncached one."""
    root = tmp_path / "cycle"
    for path, text in CYCLE_TREE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    cache_root = tmp_path / "cache"
    _scan(root, cache_root)
    _edit(root, name, old, new)
    assert _scan(root, cache_root) == _scan(root, None)


ORDER_TREE = {
    "pkg/__init__.py": "",
    "pkg/flags.py": '''import os

DUMP = None
TRACE = object() if DUMP else None
DUMP = object() if TRACE and os.getenv("PKG_DUMP") else None
TRACE = object() if os.getenv("PKG_TRACE") else None
''',
    "pkg/engine.py": '''from pkg import flags


def step(batch):
    if flags.TRACE:
        print(batch)
    if flags.DUMP:
        print(len(batch))
    return batch
''',
    "pkg/aaa.py": "from pkg import flags\n\n\ndef helper(x):\n    return x + 1\n",
}


def test_an_answer_a_gate_cycle_shaped_is_not_kept_for_an_unchanged_file(tmp_path: Path) -> None:
    """TRACE and DUMP gate each other: which switch the engine's sites get depends on which
    name is asked first.  A gated site added in a file asked before the engine's turns the
    order around; the engine's file is unchanged, yet its stored answers must not be taken."""
    root = tmp_path / "order"
    for path, text in ORDER_TREE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    cache_root = tmp_path / "cache"
    before = {s["name"]: s["gated_sites"] for s in json.loads(_scan(root, cache_root))["switches"]}
    _edit(root, "pkg/aaa.py", "    return x + 1", "    if flags.DUMP:\n        print(x)\n    return x + 1")
    after = _scan(root, cache_root)
    assert after == _scan(root, None)
    # the edit did turn the order around (else this test would check nothing)
    assert {s["name"]: s["gated_sites"] for s in json.loads(after)["switches"]} != before


def test_a_changed_import_of_a_tested_module_name_is_followed_again(tmp_path: Path) -> None:
    """A gate on a module name a module imports from another one (``joins.gates._exported``):
    changing only where the middle module imports it from gives the uncached answer."""
    from cs_audit.testing import write_tree

    root = write_tree(tmp_path / "t", {
        "pkg/__init__.py": "",
        "pkg/probe.py": "def is_npu():\n    return False\n\n\nACCEL_READY = is_npu()\n",
        "pkg/flags.py": "import os\n\nACCEL_READY = os.environ.get('TOY_ACCEL', '1') == '1'\n",
        "pkg/middle.py": "from pkg.probe import ACCEL_READY  # noqa: F401\n",
        "pkg/runner.py": ("import logging\nfrom pkg.middle import ACCEL_READY\nlogger = logging.getLogger(__name__)\n\n\n"
                          "class ModelRunner:\n    def execute_model(self, batch):\n        if ACCEL_READY:\n"
                          "            logger.info('accelerated %d', len(batch))\n"),
    })
    cache = tmp_path / "cache"
    def emitted(report: str) -> list[int]:
        return [f["line"] for f in json.loads(report)["findings"] if f["rule"] == "default-on-emitter"]

    assert emitted(_scan(root, cache)) == []  # another platform's probe: off
    (root / "pkg" / "middle.py").write_text("from pkg.flags import ACCEL_READY  # noqa: F401\n")
    after = _scan(root, cache)
    assert emitted(after) == [9] and after == _scan(root, None)  # a flag on by default
