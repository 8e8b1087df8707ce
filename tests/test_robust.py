"""Hostile input: the scan never crashes, never lies about what it skipped, never touches the tree.

Worker isolation (``cs_audit.pool``) is tested with small functions defined here: workers are
forked, so they run this module's code (and its monkeypatches) as the parent has it.
"""

from __future__ import annotations

import gc
import hashlib
import json
import multiprocessing
import os
import resource
import shutil
import signal
import stat
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cs_audit import api, pool
from cs_audit.api import analyse_file, run_audit
from cs_audit.cli import app
from cs_audit.config import AuditConfig
from cs_audit.extract import python as extract
from cs_audit.extract.discover import discover
from cs_audit.pool import Failure, map_files, map_isolated
from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset
from cs_audit.sources import FileError, SourceFile
from cs_audit.testing import write_tree
from tests.gitrepo import git

PROJECT = Path(__file__).resolve().parent.parent
HOSTILE = PROJECT / "fixtures" / "hostile"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

#: a module the scan has findings for (lines: default-on-emitter/eager-format 6, env-read-hot 7)
ENGINE = """\
import logging, os
logger = logging.getLogger(__name__)

class Runner:
    def execute_model(self, batch):
        logger.info(f"step {batch}")
        return os.environ.get("MY_DBG")
"""
ENGINE_LINES = [("default-on-emitter", 6), ("eager-format", 6), ("env-read-hot", 7)]


#: every file parsed for real, never served from a facts cache (where the engine has one)
NO_CACHE = {"cache": False} if "cache" in AuditConfig.__dataclass_fields__ else {}


def _scan(root: Path, **options: object):
    config = {"jobs": 2, "history": False, **NO_CACHE, **options}
    return run_audit(AuditConfig(root=str(root), **config))  # type: ignore[arg-type]


def _lines(result, path: str = "engine.py") -> list[tuple[str, int]]:
    return sorted((f.rule, f.line) for f in result.findings if f.path == path)


def _errors(result) -> dict[str, tuple[str, str]]:
    return {e.path: (e.kind, e.message) for e in result.errors}


# --------------------------------------------------------------------------- the worker pool


def _hostile(item: str) -> object:
    """What a parser can do to its process, keyed by item name; anything else echoes back."""
    if item == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if item == "abort":
        os.abort()
    if item == "killed":  # what the kernel's OOM killer does
        os.kill(os.getpid(), signal.SIGKILL)
    if item == "exit":
        os._exit(3)
    if item == "spin":
        while True:
            pass
    if item == "block":
        time.sleep(3600)
    if item == "hog":
        return len(b"x" * (3 << 30))  # over the worker's address-space cap
    if item == "raise":
        raise ValueError("boom")
    if item == "pid":
        return os.getpid()
    return item.upper()


def test_a_crashing_item_is_reported_the_worker_replaced_and_every_other_item_done() -> None:
    items = ["a", "b", "segv", "c", "d", "abort", "e", "killed", "f", "exit", "g"]
    for jobs in (1, 2):
        out = list(map_isolated(_hostile, items, jobs=jobs, chunk_size=4, timeout=30))
        assert out[0:2] == ["A", "B"] and out[3:5] == ["C", "D"] and out[6] == "E" and out[8] == "F" and out[10] == "G"
        assert out[2] == Failure("parser-crash", "the parser crashed the worker process (SIGSEGV)")
        assert out[5].kind == "parser-crash" and "SIGABRT" in out[5].detail
        assert out[7].kind == "parser-crash" and "SIGKILL" in out[7].detail and "out of memory" in out[7].detail
        assert out[9] == Failure("parser-crash", "worker process exited unexpectedly (status 3)")
    assert multiprocessing.active_children() == []  # every worker (and replacement) reaped


def test_the_worker_after_a_crash_is_a_new_process() -> None:
    out = list(map_isolated(_hostile, ["pid", "segv", "pid"], jobs=1, chunk_size=3))
    assert isinstance(out[1], Failure) and out[0] != out[2] and out[0] != os.getpid() != out[2]


def test_a_spinning_item_is_stopped_by_its_cpu_time_limit() -> None:
    started = time.monotonic()
    out = list(map_isolated(_hostile, ["a", "spin", "b"], jobs=1, timeout=1, wall_timeout=60))
    assert out[0] == "A" and out[2] == "B"
    assert out[1] == Failure("timeout", "used more than 1s of CPU time: stopped")
    assert time.monotonic() - started < 30


def test_a_blocked_item_is_stopped_by_the_wall_clock() -> None:
    out = list(map_isolated(_hostile, ["a", "block", "b"], jobs=2, chunk_size=3, timeout=60, wall_timeout=1))
    assert out == ["A", Failure("timeout", "no CPU used for 1s of wall-clock time (blocked): stopped"), "B"]


def test_a_busy_item_outliving_the_wall_clock_is_left_to_its_cpu_limit() -> None:
    # a loaded machine slows a parser down: the wall clock alone would make verdicts depend on -j
    out = list(map_isolated(_hostile, ["spin", "a"], timeout=2, wall_timeout=2))
    assert out == [Failure("timeout", "used more than 2s of CPU time: stopped"), "A"]


def test_workers_run_under_an_address_space_cap() -> None:
    def cap(_item: str) -> int:
        return resource.getrlimit(resource.RLIMIT_AS)[0]

    assert list(map_isolated(cap, ["x"], memory_limit=1 << 30)) == [1 << 30]
    out = list(map_isolated(_hostile, ["a", "hog", "b"], jobs=1, memory_limit=1 << 30))
    assert out == ["A", Failure("parser-crash", "out of memory"), "B"]
    source = SourceFile("big.py", "/nonexistent/big.py", "python")
    (error,) = map_files(lambda s: _hostile("hog"), [source], memory_limit=1 << 30)
    assert error == FileError("big.py", "parser-crash", "out of memory (limit 1024 MiB per worker)")


def test_an_exception_is_an_internal_error_for_that_item_only() -> None:
    assert list(map_isolated(_hostile, ["a", "raise", "b"])) == ["A", Failure("internal", "ValueError: boom"), "B"]


_POISONED = False


def _stateful(item: str) -> str:
    """Crashes on "victim" only in a worker that earlier did "poison": a verdict that depends on
    the worker's history, which the pool must not report as the file's."""
    global _POISONED
    if item == "poison":
        _POISONED = True
    if item == "victim" and _POISONED:
        os.kill(os.getpid(), signal.SIGSEGV)
    return item


def test_a_failure_that_depends_on_the_worker_history_is_confirmed_in_a_fresh_worker() -> None:
    items = ["a", "poison", "victim", "b", "c", "d"]
    for jobs in (1, 2, 3):
        for chunk in (1, 2, 3, 6):
            assert list(map_isolated(_stateful, items, jobs=jobs, chunk_size=chunk)) == items, (jobs, chunk)


def _sleepy(item: int) -> int:
    time.sleep((item * 7919 % 13) / 1000)
    return item * item


def test_one_result_per_item_in_input_order_whatever_the_worker_count() -> None:
    items = list(range(200))
    for jobs in (1, 2, 4):
        assert list(map_isolated(_sleepy, items, jobs=jobs)) == [i * i for i in items]
    assert list(map_isolated(_sleepy, [], jobs=4)) == []


def test_abandoning_the_results_stops_the_workers() -> None:
    results = map_isolated(_sleepy, list(range(100)), jobs=2, chunk_size=5)
    assert next(results) == 0
    results.close()
    assert multiprocessing.active_children() == []


def test_the_workers_start_on_the_call_and_ready_says_when_an_answer_waits() -> None:
    results = map_isolated(_hostile, ["pid"], jobs=1)
    deadline = time.monotonic() + 30
    while not results.ready() and time.monotonic() < deadline:  # no ``next`` yet: already at work
        time.sleep(0.01)
    assert results.ready()
    (pid,) = results
    assert pid != os.getpid()
    assert results.ready()  # no worker at work: nothing to wait for


def _sleepy_source(source: SourceFile) -> str:
    time.sleep(0.05)
    return source.path


def test_closing_file_results_stops_the_workers() -> None:
    sources = [SourceFile(f"f{i}.py", f"/nonexistent/f{i}.py", "python") for i in range(60)]
    results = map_files(_sleepy_source, sources, jobs=2)
    assert next(results) == "f0.py"
    results.close()
    assert multiprocessing.active_children() == []


def test_dropping_unread_results_stops_the_workers() -> None:
    results = map_isolated(_sleepy, list(range(100)), jobs=2, chunk_size=5)
    assert len(multiprocessing.active_children()) == 2
    del results
    gc.collect()
    assert multiprocessing.active_children() == []


def _noisy(item: str) -> str:
    print("worker output must not reach the report", item)
    os.write(1, b"nor raw writes to fd 1\n")
    return item


def test_worker_stdout_never_reaches_the_parents_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    assert list(map_isolated(_noisy, ["a", "b"])) == ["a", "b"]
    assert capfd.readouterr().out == ""


def test_a_crash_leaves_no_core_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    list(map_isolated(_hostile, ["segv", "abort"]))
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- real parser crashes, end to end


def test_hostile_fixtures_are_what_make_py_writes() -> None:
    spec = _load_make()
    for name, text in spec.FILES.items():
        assert (HOSTILE / name).read_bytes() == text.encode("ascii"), f"rerun python fixtures/hostile/make.py ({name})"


def _load_make():
    import importlib.util

    loaded = importlib.util.spec_from_file_location("hostile_make", HOSTILE / "make.py")
    assert loaded and loaded.loader
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def test_libcst_segfault_and_slow_files_are_reported_and_everything_else_scanned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool, "TIMEOUT_S", 3.0)
    monkeypatch.setattr(api, "POOL_MIN_FILES", 0)
    root = tmp_path / "tree"
    shutil.copytree(HOSTILE, root, ignore=shutil.ignore_patterns("make.py"))
    for i in range(6):  # ordinary files around the hostile ones, in the same chunks
        write_tree(root, {f"engine{i}.py": ENGINE, f"zz/engine{i}.py": ENGINE})
    result = _scan(root, jobs=2)
    expected = _load_make().EXPECTED
    errors = _errors(result)
    assert set(errors) == {name for name, verdict in expected.items() if verdict}
    for name, verdict in expected.items():
        if verdict:
            kind, word = verdict
            assert errors[name][0] == kind and word in errors[name][1], (name, errors[name])
    for i in range(6):
        assert _lines(result, f"engine{i}.py") == sorted(ENGINE_LINES)
        assert _lines(result, f"zz/engine{i}.py") == sorted(ENGINE_LINES)


def test_a_file_the_cpu_limit_stopped_is_not_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeout from the CPU-time limit is the file's verdict under that limit: the cache
    keeps it for the file's bytes, so a later scan reports it again without spending the
    limit on it again, whether the tree is unchanged or another file was edited."""
    monkeypatch.setattr(pool, "TIMEOUT_S", 1.0)
    root = write_tree(tmp_path / "tree", {"engine.py": ENGINE})
    shutil.copy(HOSTILE / "subscript_2500.py", root / "slow.py")
    cached = {"jobs": 1, "cache": True, "cache_dir": str(tmp_path / "cache")}
    first = _scan(root, **cached)
    verdict = ("timeout", "used more than 1s of CPU time: stopped")
    assert _errors(first) == {"slow.py": verdict}
    assert first.stats is not None and first.stats.analysed == ("engine.py", "slow.py")
    second = _scan(root, **cached)
    assert second.stats is not None and (second.stats.analysed, second.stats.result) == ((), "stored")
    assert _errors(second) == {"slow.py": verdict} and _lines(second) == _lines(first)
    (root / "engine.py").write_text(ENGINE + "\nLIMIT = 1\n")
    third = _scan(root, **cached)
    assert third.stats is not None and third.stats.analysed == ("engine.py",)
    assert _errors(third) == {"slow.py": verdict} and _lines(third) == _lines(first)


def test_the_cli_survives_a_segfaulting_file_and_strict_exits_2(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {"engine.py": ENGINE})
    shutil.copy(HOSTILE / "and_chain_10000.py", root / "crash.py")
    runner = CliRunner()
    done = runner.invoke(app, ["scan", str(root), "--format", "json", "-j", "1", "--no-history"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert [(e["path"], e["kind"]) for e in report["errors"]] == [("crash.py", "parser-crash")]
    assert {f["path"] for f in report["findings"]} == {"engine.py"}
    strict = runner.invoke(app, ["scan", str(root), "--format", "json", "--strict", "--no-history"])
    assert strict.exit_code == 2


def test_an_internal_error_in_one_extractor_is_an_error_for_that_file_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = extract.index_module

    def fragile(tree, text, path, rs):
        if path.endswith("victim.py"):
            raise KeyError("extractor bug")
        return real(tree, text, path, rs)

    monkeypatch.setattr(extract, "index_module", fragile)  # inherited by the forked workers
    monkeypatch.setattr(api, "POOL_MIN_FILES", 0)
    root = write_tree(tmp_path / "tree", {"engine.py": ENGINE, "victim.py": ENGINE, "z.py": ENGINE})
    result = _scan(root, jobs=2)
    assert _errors(result) == {"victim.py": ("internal", "internal error: KeyError: 'extractor bug'")}
    assert _lines(result, "engine.py") == _lines(result, "z.py") == sorted(ENGINE_LINES)


# --------------------------------------------------------------------------- bad input, file by file


def test_syntax_error_is_reported_with_line_and_column(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {"engine.py": ENGINE, "bad.py": "x = 1\nif x\n    pass\n",
                                       "indent.py": "def f():\nreturn 1\n"})
    errors = _errors(_scan(root))
    assert errors["bad.py"] == ("syntax", "syntax error at 2:5: expected ':'")
    assert errors["indent.py"][0] == "syntax" and errors["indent.py"][1].startswith("syntax error at 2:1: expected an indented block")


def test_encodings(tmp_path: Path) -> None:
    latin1 = "# -*- coding: latin-1 -*-\n" + ENGINE.replace('"step {batch}"', '"\u00e9tape {batch}"')
    root = write_tree(tmp_path / "t", {
        "engine.py": latin1.encode("latin-1"),
        "no_cookie.py": 'x = 1\nNAME = "caf\u00e9"\n'.encode("latin-1"),
        "bad_cookie.py": b"# coding: klingon\nx = 1\n",
        "bom_and_cookie.py": b"\xef\xbb\xbf# coding: latin-1\nx = 1\n",
        "not_text_codec.py": b"# coding: rot13\nx = 1\n",
    })
    result = _scan(root)
    assert _lines(result) == sorted((rule, line + 1) for rule, line in ENGINE_LINES)  # scanned normally
    errors = _errors(result)
    assert errors["no_cookie.py"] == ("encoding", "cannot decode at 2:12 as utf-8: invalid continuation byte (byte 0xe9)")
    assert errors["bad_cookie.py"] == ("encoding", "bad coding declaration: unknown encoding: klingon")
    assert errors["bom_and_cookie.py"] == ("encoding", "bad coding declaration: encoding problem: utf-8")
    assert errors["not_text_codec.py"][0] == "encoding"
    assert set(errors) == {"no_cookie.py", "bad_cookie.py", "bom_and_cookie.py", "not_text_codec.py"}


def test_nul_bytes_are_binary(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {"blob.py": b"x = 1\0\0\x89PNG", "run.sh": b"#!/bin/sh\nexport A=1\0"})
    assert _errors(_scan(root)) == {
        "blob.py": ("binary", "contains NUL bytes: not a text file, skipped"),
        "run.sh": ("binary", "contains NUL bytes: not a text file, skipped"),
    }


def test_files_over_the_size_cap_are_skipped_as_too_large(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {"big.py": b"x = 1\n" * 20, "fits.py": b"x = 1\n" * 10})
    assert _errors(_scan(root, max_file_bytes=60)) == {"big.py": ("too-large", "larger than 60 bytes: skipped")}


@pytest.mark.skipif(IS_ROOT, reason="running as root: permission bits do not stop root from reading; "
                                      "the io tests below use a directory and a FIFO instead")
def test_unreadable_file_is_an_io_error(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {"engine.py": ENGINE, "secret.py": "x = 1\n"})
    (root / "secret.py").chmod(0)
    try:
        assert _errors(_scan(root)) == {"secret.py": ("io", "cannot read: Permission denied")}
    finally:
        (root / "secret.py").chmod(0o644)


def test_a_listed_file_that_cannot_be_read_is_an_io_error(tmp_path: Path) -> None:
    # git lists a.py from its index, but in the work tree it is now a directory
    root = write_tree(tmp_path / "repo", {"a.py": "x = 1\n", "engine.py": ENGINE})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "c")
    (root / "a.py").unlink()
    write_tree(root, {"a.py/inner.txt": "not python"})
    result = _scan(root)
    assert _errors(result) == {"a.py": ("io", "a directory, not a regular file: skipped")}
    assert _lines(result) == sorted(ENGINE_LINES)
    # and analyse_file itself (a file that vanished or turned into something unreadable after discovery)
    got = analyse_file(SourceFile("gone.py", str(root / "gone.py"), "python"), load_ruleset(), 1 << 20)
    assert got == FileError("gone.py", "io", "cannot read: No such file or directory")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_named_like_source_is_an_io_error_and_never_opened(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {"engine.py": ENGINE})
    os.mkfifo(root / "pipe.py")  # opening it would block forever
    started = time.monotonic()
    result = _scan(root)
    assert _errors(result) == {"pipe.py": ("io", "a FIFO, not a regular file: skipped")}
    assert time.monotonic() - started < 30


def test_empty_bom_crlf_cr_and_form_feed_files_have_editor_line_numbers(tmp_path: Path) -> None:
    ff = ENGINE.replace("logger = ", "\x0clogger = ").replace("class Runner", "\x0c\nclass Runner")
    variants = {
        "empty.py": b"",
        "lf.py": ENGINE.encode(),
        "bom.py": b"\xef\xbb\xbf" + ENGINE.encode(),
        "crlf.py": ENGINE.replace("\n", "\r\n").encode(),
        "cr.py": ENGINE.replace("\n", "\r").encode(),
        "bom_crlf_cookie.py": b"\xef\xbb\xbf# coding: utf-8\r\n" + ENGINE.replace("\n", "\r\n").encode(),
        "formfeed.py": ff.encode(),
    }
    result = _scan(write_tree(tmp_path / "t", variants))
    assert _errors(result) == {}
    assert result.files_scanned == len(variants)
    assert _lines(result, "lf.py") == _lines(result, "bom.py") == _lines(result, "crlf.py") == _lines(result, "cr.py") \
        == sorted(ENGINE_LINES)
    assert _lines(result, "bom_crlf_cookie.py") == sorted((r, n + 1) for r, n in ENGINE_LINES)
    assert _lines(result, "formfeed.py") == sorted((r, n + 1) for r, n in ENGINE_LINES)  # "\x0c\n" is a line
    assert _lines(result, "empty.py") == []


# --------------------------------------------------------------------------- discovery


def test_symlinks_in_a_walk_are_listed_not_followed_and_the_walk_ends(tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"leak.py": ENGINE})
    root = write_tree(tmp_path / "t", {"engine.py": ENGINE, "pkg/mod.py": "x = 1\n"})
    (root / "a").symlink_to(".")  # a loop
    (root / "pkg" / "up").symlink_to("..")
    (root / "out").symlink_to(outside)  # leaves the root
    (root / "leak.py").symlink_to(outside / "leak.py")
    (root / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    result = _scan(root)
    assert result.files_scanned == 2
    assert _errors(result) == {p: ("symlink", "symbolic link: not followed")
                               for p in ("a", "pkg/up", "out", "leak.py", "dangling.py")}
    assert {f.path for f in result.findings} == {"engine.py"}


def test_symlinks_in_a_git_tree_are_listed_not_followed(tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"leak.py": ENGINE, "sub/x.py": ENGINE})
    root = write_tree(tmp_path / "repo", {"engine.py": ENGINE, "sub/x.py": "x = 1\n"})
    (root / "leak.py").symlink_to(outside / "leak.py")
    (root / "a").symlink_to(".")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "c")
    shutil.rmtree(root / "sub")  # a tracked directory replaced by a link that leaves the tree
    (root / "sub").symlink_to(outside / "sub")
    result = _scan(root, history=True)
    assert _errors(result) == {p: ("symlink", "symbolic link: not followed") for p in ("leak.py", "a", "sub")}
    assert {f.path for f in result.findings} == {"engine.py"}
    assert result.commit is not None


HOSTILE_NAMES = ["with space.py", "pipe|name.py", "back`tick`.py", "new\nline.py", "@mention.py",
                 "bidi\u202ename.py", "caf\u00e9.py", "tab\tname.py"]


def _write_hostile_names(root: Path) -> None:
    for name in HOSTILE_NAMES:
        (root / name).write_text(ENGINE, encoding="utf-8")
    # not valid UTF-8: a latin-1 "café", written by its bytes
    with open(os.path.join(os.fsencode(root), b"latin1_caf\xe9.py"), "wb") as handle:
        handle.write(ENGINE.encode())


@pytest.mark.parametrize("in_git", [False, True])
def test_hostile_file_names_are_scanned_and_reported_as_valid_utf8(tmp_path: Path, in_git: bool) -> None:
    root = tmp_path / "t"
    root.mkdir()
    _write_hostile_names(root)
    if in_git:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "c")
    result = _scan(root)
    shown = [*HOSTILE_NAMES, "latin1_caf\\xe9.py"]
    assert result.files_scanned == len(shown) and _errors(result) == {}
    for name in shown:
        assert _lines(result, name) == sorted(ENGINE_LINES), name
    text = render_json(result)
    text.encode("utf-8")  # no lone surrogates: writable as UTF-8
    assert {f["path"] for f in json.loads(text)["findings"]} == set(shown)
    render_markdown(result, load_ruleset()).encode("utf-8")


def test_not_a_git_repository_is_scanned_with_no_commit(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", {"engine.py": ENGINE})
    result = _scan(root, history=True)
    assert result.commit is None and _lines(result) == sorted(ENGINE_LINES)


def test_a_root_ignored_by_an_enclosing_repository_is_walked(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", {".gitignore": "build/\n", "top.py": "x = 1\n", "build/engine.py": ENGINE})
    git(repo, "init", "-q")
    sources, errors = discover(repo / "build")
    assert [s.path for s in sources] == ["engine.py"] and errors == []
    assert [s.path for s in discover(repo)[0]] == ["top.py"]  # from the top, build/ stays ignored


def test_discovery_ignores_the_callers_git_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = write_tree(tmp_path / "other", {"other.py": "x = 1\n"})
    git(other, "init", "-q")
    git(other, "add", "-A")
    root = write_tree(tmp_path / "t", {"engine.py": ENGINE})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert [s.path for s in discover(root)[0]] == ["engine.py"]


# --------------------------------------------------------------------------- the tree is never touched


def _fingerprint(root: Path) -> dict[str, tuple[str, int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            st = os.lstat(path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else os.readlink(path) \
                if stat.S_ISLNK(st.st_mode) else "dir"
            out[os.fsdecode(path.relative_to(root))] = (digest, st.st_mtime_ns, st.st_mode)
    return out


def _tree_for_touch_test(root: Path) -> Path:
    write_tree(root, {"engine.py": ENGINE, "pkg/__init__.py": "", "pkg/bad.py": "def f(:\n", "run.sh": "export MY_DBG=1\n",
                      "pkg/same.py": ENGINE, "pkg/latin.py": "# coding: latin-1\nA = 'caf\u00e9'\n".encode("latin-1")})
    _write_hostile_names(root / "pkg")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    write_tree(root, {"untracked.py": ENGINE, "engine.py": ENGINE + "\n# edited, not staged\n"})
    later = time.time() + 10  # stat data changed, content not: what makes `git diff`/`status` refresh the index
    os.utime(root / "pkg" / "same.py", (later, later))
    return root


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
@pytest.mark.parametrize("history", [True, False], ids=["history", "no-history"])
def test_scanning_changes_nothing_in_the_tree(tmp_path: Path, read_only: bool, history: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree_for_touch_test(tmp_path / "repo")
    if read_only:  # (as root, permission bits do not stop writes: the fingerprint below does)
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    os.chmod(path, os.stat(path).st_mode & ~0o222)
        os.chmod(root, 0o555)
    before = _fingerprint(root)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    runner = CliRunner()
    flags = [] if history else ["--no-history"]
    try:
        for args in (["--format", "json"], ["--format", "markdown", "--output", str(work / "r.md")], []):
            done = runner.invoke(app, ["scan", str(root), "-j", "2", *flags, *args])  # default settings, cache too
            assert done.exit_code == 0, done.output
        assert (work / "reports" / "repo.md").exists() and (work / "r.md").exists()
        assert _fingerprint(root) == before  # bytes, mtimes, modes of every file, .git/index included
    finally:
        for dirpath, _dirnames, _filenames in os.walk(root):
            os.chmod(dirpath, 0o755)
