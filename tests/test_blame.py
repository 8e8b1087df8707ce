"""Tests for cs_audit.git.blame: git history behind the ``added_in`` column."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import git
import pytest

import cs_audit.git.blame as blame_module
from cs_audit.git.blame import (
    BLAME_CACHE_FORMAT,
    SHALLOW_MAY_BE_OLDER,
    FakeHistory,
    GitHistory,
    History,
    NoHistory,
    open_history,
)
from cs_audit.incremental.cache import blame_cache_dir
from cs_audit.model import BlameInfo

try:  # tests/ as a package or as a plain directory on sys.path
    from tests.gitrepo import START, head, make_repo, sha_of
    from tests.gitrepo import git as run_git
except ImportError:  # pragma: no cover - depends on how pytest was invoked
    from gitrepo import START, head, make_repo, sha_of  # type: ignore[no-redef]
    from gitrepo import git as run_git  # type: ignore[no-redef]


READER_V1 = "import os\nX = os.getenv('A')\n"
READER_V2 = READER_V1 + "Y = os.getenv('A')\n"
READER_V3 = "# one\n# two\n# three\nimport os  # edited\nX = os.getenv('A')\nY = os.getenv('A')\n"

HISTORY: list[tuple[str, dict[str, str | None]]] = [
    ("add reader", {"a.py": READER_V1}),
    (
        "add second read",
        {"a.py": READER_V2, "b.py": "import os\nZ = os.environ['A']\n"},
    ),
    ("shift lines down", {"a.py": READER_V3}),
]


def _git_history(root: Path) -> GitHistory:
    hist = open_history(root)
    assert isinstance(hist, GitHistory), hist.reason
    return hist


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record every git command: those GitPython runs and the blame/commit-graph processes."""
    calls: list[list[str]] = []
    original = git.cmd.Git.execute

    def counting(self: git.cmd.Git, command: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(
            [str(c) for c in command] if not isinstance(command, str) else [command]
        )
        return original(self, command, *args, **kwargs)

    spawn = blame_module._spawn

    def counting_spawn(argv: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append([str(c) for c in argv])
        return spawn(argv, *args, **kwargs)

    monkeypatch.setattr(git.cmd.Git, "execute", counting)
    monkeypatch.setattr(blame_module, "_spawn", counting_spawn)
    return calls


def _blame_calls(calls: list[list[str]]) -> list[list[str]]:
    return [c for c in calls if "blame" in c]


# -- first_added ------------------------------------------------------------


def test_first_added_is_oldest_read_after_edits_move_it_down(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, HISTORY)
    hist = _git_history(repo)
    # HEAD line numbers: X moved from line 2 to 5, Y from 3 to 6
    blamed = hist.blame_lines("a.py", [4, 5, 6])
    assert blamed[4].subject == "shift lines down"
    assert blamed[5].subject == "add reader"
    assert blamed[6].subject == "add second read"

    info, reason = hist.first_added([("a.py", 6), ("b.py", 2), ("a.py", 5)])
    assert reason is None
    assert info == BlameInfo(
        commit=sha_of(repo, "add reader")[:9],
        date="2026-01-01",
        subject="add reader",
        author="Test",
    )
    # without the oldest read, the next oldest wins
    info2, _ = hist.first_added([("a.py", 6), ("b.py", 2), ("a.py", 4)])
    assert info2 is not None and info2.subject == "add second read"
    assert info2.date == "2026-01-02"


def test_history_fields(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, HISTORY)
    hist = _git_history(repo)
    assert isinstance(hist, History)
    assert hist.commit == head(repo)
    assert hist.shallow is False
    assert hist.reason is None


# -- caching and batching ---------------------------------------------------


def test_blame_is_cached_and_batched_per_file(
    tmp_path: Path, spawned: list[list[str]]
) -> None:
    repo = make_repo(tmp_path, HISTORY)
    hist = _git_history(repo)
    first = hist.blame_lines("a.py", [1, 2, 5, 6])
    blames = _blame_calls(spawned)
    assert len(blames) == 1  # one call for the file, ranges merged
    assert blames[0].count("-L") == 2 and "1,2" in blames[0] and "5,6" in blames[0]
    assert head(repo) in blames[0]  # blame of HEAD, not of the work tree
    assert blames[0][blames[0].index("--") + 1] == "a.py"

    before = len(spawned)
    assert hist.blame_lines("a.py", [1, 2, 5, 6]) == first
    assert hist.blame_lines("a.py", [5]) == {5: first[5]}
    info, _ = hist.first_added([("a.py", 5), ("a.py", 6)])
    assert info == first[5]
    assert len(spawned) == before  # nothing spawned after the first blame


MANY_FILES: list[tuple[str, dict[str, str | None]]] = [
    ("first", {f"m{i}.py": f"import os\nA{i} = os.getenv('A{i}')\n" for i in range(5)}),
    ("second", {f"m{i}.py": f"import os\n# moved\nA{i} = os.getenv('A{i}')\nB = 1\n" for i in range(0, 5, 2)}),
]
MANY_SITES = [(f"m{i}.py", n) for i in range(5) for n in (1, 2, 3, 4)]


def _answers(hist: GitHistory) -> list[object]:
    per_switch = [[(f"m{i}.py", n) for n in (1, 2, 3, 4)] for i in range(5)]
    return [hist.first_added(sites) for sites in per_switch] + [
        hist.blame_lines(path, [1, 2, 3, 4]) for path in sorted({p for p, _ in MANY_SITES})
    ]


def test_prefetch_blames_each_file_once_in_parallel(
    tmp_path: Path, spawned: list[list[str]]
) -> None:
    repo = make_repo(tmp_path, MANY_FILES)
    reference = _answers(_git_history(repo))
    spawned.clear()
    hist = open_history(repo, jobs=3)
    assert isinstance(hist, GitHistory)
    hist.prefetch(MANY_SITES)
    blames = _blame_calls(spawned)
    assert sorted(c[-1] for c in blames) == [f"m{i}.py" for i in range(5)]  # once per file
    assert hist.files_blamed == 5
    before = len(spawned)
    assert _answers(hist) == reference  # the same answers as one query at a time
    assert len(spawned) == before  # all served from the prefetch
    hist.prefetch(MANY_SITES)
    assert len(spawned) == before


def test_blame_cache_on_disk_is_reused_and_keyed_by_head(
    tmp_path: Path, spawned: list[list[str]]
) -> None:
    repo = make_repo(tmp_path, MANY_FILES)
    cache = tmp_path / "cache"
    reference = _answers(_git_history(repo))
    cold = open_history(repo, cache_dir=cache)
    assert isinstance(cold, GitHistory)
    assert _answers(cold) == reference
    cold.close()
    assert len(list((cache / f"v{BLAME_CACHE_FORMAT}").glob("*.json"))) == 1
    spawned.clear()
    warm = open_history(repo, cache_dir=cache)
    assert isinstance(warm, GitHistory)
    assert _answers(warm) == reference  # identical with the cache ...
    assert _blame_calls(spawned) == [] and warm.files_blamed == 0  # ... and no blame ran
    warm.close()


def test_blame_cache_never_answers_for_another_head(tmp_path: Path) -> None:
    # a revert brings back an older blob whose changed line now blames to the revert: an
    # answer stored for that blob under the older HEAD must not be served
    repo = make_repo(tmp_path, [("first", {"a.py": "import os\nX = os.getenv('X', '1')\n"})])
    cache = tmp_path / "cache"
    before = open_history(repo, cache_dir=cache)
    assert isinstance(before, GitHistory)
    assert before.blame_lines("a.py", [2])[2].subject == "first"
    before.close()
    (repo / "a.py").write_text("import os\nX = os.getenv('X', '2')\n")
    run_git(repo, "commit", "-q", "-am", "second", when=START + timedelta(days=1))
    run_git(repo, "revert", "--no-edit", "HEAD", when=START + timedelta(days=2))
    after = open_history(repo, cache_dir=cache)
    assert isinstance(after, GitHistory)
    assert after.blame_lines("a.py", [2])[2].subject.startswith("Revert")
    assert after.files_blamed == 1
    after.close()
    assert len(list((cache / f"v{BLAME_CACHE_FORMAT}").glob("*.json"))) == 2


def test_blame_cache_survives_a_damaged_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, MANY_FILES)
    cache = tmp_path / "cache"
    reference = _answers(_git_history(repo))
    hist = open_history(repo, cache_dir=cache)
    assert isinstance(hist, GitHistory)
    _answers(hist)
    hist.close()
    (entry,) = (cache / f"v{BLAME_CACHE_FORMAT}").glob("*.json")
    for damage in (b"", b"{not json", entry.read_bytes()[:40], b'{"format": 1, "key": "other"}'):
        entry.write_bytes(damage)
        again = open_history(repo, cache_dir=cache)
        assert isinstance(again, GitHistory)
        assert _answers(again) == reference
        assert again.files_blamed == 5
        again.close()


def test_blame_cache_dir_follows_the_cache_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert blame_cache_dir(False, None) is None
    assert blame_cache_dir(False, str(tmp_path / "c")) is None
    assert blame_cache_dir(True, str(tmp_path / "c")) == str(tmp_path / "c" / "blame")
    assert blame_cache_dir(True, None) == str(tmp_path / "xdg" / "cs-audit" / "blame")


def test_temporary_commit_graph_gives_the_same_answers(
    tmp_path: Path, spawned: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path, MANY_FILES)
    reference = _answers(_git_history(repo))
    objects = sorted(p.relative_to(repo) for p in (repo / ".git").rglob("*"))
    monkeypatch.setattr(blame_module, "GRAPH_MIN_FILES", 1)
    spawned.clear()
    hist = _git_history(repo)
    hist.prefetch(MANY_SITES)
    graph = [c for c in spawned if "commit-graph" in c]
    assert len(graph) == 1
    where = hist._graph_env["GIT_OBJECT_DIRECTORY"]
    assert Path(where, "info", "commit-graph").is_file()
    assert _answers(hist) == reference
    hist.close()
    assert not Path(where).exists()  # removed on close
    # the repository itself was not written
    assert sorted(p.relative_to(repo) for p in (repo / ".git").rglob("*")) == objects
    # a shallow clone gets no graph (git ignores it there): same answers as before
    clone = _clone(repo, tmp_path / "clone", 1)
    shallow = _git_history(clone)
    shallow.prefetch(MANY_SITES)
    assert shallow._graph_env == {}
    shallow.close()


def test_jobs_do_not_change_the_answers(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, MANY_FILES)
    one = open_history(repo, jobs=1)
    many = open_history(repo, jobs=4)
    assert isinstance(one, GitHistory) and isinstance(many, GitHistory)
    many.prefetch(MANY_SITES)
    assert _answers(one) == _answers(many)


# -- no git / no commits / no git binary ------------------------------------


def _inside_git(path: Path) -> bool:
    return any((p / ".git").exists() for p in [path, *path.parents])


def test_non_git_directory(tmp_path: Path) -> None:
    if _inside_git(tmp_path):
        pytest.skip("tmp_path lies inside a git work tree")
    (tmp_path / "a.py").write_text(READER_V1)
    hist = open_history(tmp_path)
    assert isinstance(hist, NoHistory)
    assert hist.reason == "not a git repository"
    assert hist.commit is None and hist.shallow is False
    assert hist.blame_lines("a.py", [1, 2]) == {}
    assert hist.first_added([("a.py", 2)]) == (None, "not a git repository")


def test_missing_root_is_not_a_repository(tmp_path: Path) -> None:
    hist = open_history(tmp_path / "nope")
    assert hist.reason == "not a git repository"


def test_repository_without_commits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [])
    (repo / "a.py").write_text(READER_V1)
    hist = open_history(repo)
    assert isinstance(hist, NoHistory)
    assert hist.reason == "git repository has no commits"
    assert hist.first_added([("a.py", 1)]) == (None, "git repository has no commits")


def test_git_binary_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path, HISTORY)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # the runner finds no git
    hist = open_history(repo)
    assert isinstance(hist, NoHistory)
    assert hist.reason == "git not installed"


# -- shallow clones ---------------------------------------------------------


def _clone(src: Path, dst: Path, depth: int) -> Path:
    run_git(dst.parent, "clone", "-q", "--depth", str(depth), src.as_uri(), dst.name)
    return dst


def test_shallow_clone_depth_one(tmp_path: Path) -> None:
    src = make_repo(tmp_path, HISTORY)
    clone = _clone(src, tmp_path / "clone", 1)
    hist = _git_history(clone)
    assert hist.shallow is True
    tip = head(src)
    assert (
        hist.reason == f"shallow clone: history before {tip[:9]} 2026-01-03 is missing"
    )
    info, reason = hist.first_added([("a.py", 5), ("a.py", 6)])
    # everything blames to the boundary commit: say so, do not pretend
    assert info is not None and info.commit == tip[:9]
    assert reason == SHALLOW_MAY_BE_OLDER


def test_shallow_clone_depth_two(tmp_path: Path) -> None:
    src = make_repo(tmp_path, HISTORY)
    clone = _clone(src, tmp_path / "clone", 2)
    hist = _git_history(clone)
    assert hist.shallow is True and "shallow" in (hist.reason or "")
    # line 4 was last changed by the tip, which is inside the shallow history
    info, reason = hist.first_added([("a.py", 4)])
    assert info is not None and info.subject == "shift lines down"
    assert reason is None
    # line 6 really comes from the boundary commit; line 5 is older still
    info, reason = hist.first_added([("a.py", 4), ("a.py", 5)])
    assert info is not None and info.subject == "add second read"
    assert reason == SHALLOW_MAY_BE_OLDER


# -- root below the repository top -------------------------------------------


def test_root_is_a_subdirectory(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path,
        [
            ("add pkg", {"pkg/sub/m.py": READER_V1, "top.py": "x = 1\n"}),
            ("extend pkg", {"pkg/sub/m.py": READER_V2}),
        ],
    )
    pkg = _git_history(repo / "pkg")
    assert pkg.commit == head(repo)
    assert pkg.blame_lines("sub/m.py", [2, 3]) == {
        2: BlameInfo(sha_of(repo, "add pkg")[:9], "2026-01-01", "add pkg", "Test"),
        3: BlameInfo(
            sha_of(repo, "extend pkg")[:9], "2026-01-02", "extend pkg", "Test"
        ),
    }
    sub = _git_history(repo / "pkg" / "sub")
    assert sub.blame_lines("m.py", [2]) == {2: pkg.blame_lines("sub/m.py", [2])[2]}
    # the repo-relative spelling and escapes do not resolve from a subdirectory
    assert pkg.blame_lines("pkg/sub/m.py", [2]) == {}
    assert pkg.blame_lines("../top.py", [1]) == {}


# -- files git cannot blame ---------------------------------------------------


def test_untracked_and_staged_files_have_no_blame(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, HISTORY)
    (repo / "new.py").write_text(READER_V1)
    (repo / "staged.py").write_text(READER_V1)
    run_git(repo, "add", "staged.py")
    hist = _git_history(repo)
    assert hist.blame_lines("new.py", [1, 2]) == {}
    assert hist.blame_lines("staged.py", [1, 2]) == {}
    assert hist.first_added([("new.py", 2)]) == (None, "new.py not committed")
    # an uncommitted read is newer than any commit: no caveat on the others
    info, reason = hist.first_added([("new.py", 2), ("a.py", 6)])
    assert info is not None and info.subject == "add second read" and reason is None


def test_modified_file_has_no_blame(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, HISTORY)
    (repo / "a.py").write_text("# inserted\n" + READER_V3)
    hist = _git_history(repo)
    assert hist.blame_lines("a.py", [5]) == {}
    assert hist.first_added([("a.py", 5)]) == (None, "a.py modified since HEAD")
    info, reason = hist.first_added([("a.py", 5), ("b.py", 2)])
    assert info is not None and info.subject == "add second read"
    assert reason == "partial: a.py modified since HEAD"


def test_touched_but_unchanged_file_is_blamed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, HISTORY)
    (repo / "a.py").write_text(READER_V3)  # same bytes, new mtime
    hist = _git_history(repo)
    assert hist.blame_lines("a.py", [5])[5].subject == "add reader"


def test_lines_outside_the_file_are_ignored(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, HISTORY)
    hist = _git_history(repo)
    assert set(hist.blame_lines("a.py", [0, -3, 1, 6, 7, 50])) == {1, 6}
    assert hist.blame_lines("a.py", [40, 41]) == {}
    assert hist.blame_lines("b.py", [2, 3]) == {2: hist.blame_lines("b.py", [2])[2]}
    assert hist.first_added([("a.py", 99)]) == (None, "no blame for these lines")


def test_non_utf8_content_and_subject(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("ünïcode subject", {"a.py": "x = 1\n"})])
    (repo / "a.py").write_bytes(b"x = 1\ny = '\xe9'\n")
    run_git(repo, "commit", "-q", "-am", "latin-1 line")
    hist = _git_history(repo)
    blamed = hist.blame_lines("a.py", [1, 2])
    assert blamed[1].subject == "ünïcode subject"
    assert blamed[2].subject == "latin-1 line"


def test_committer_date_orders_and_dates(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("first", {"a.py": "a = 1\n"})])
    (repo / "a.py").write_text("a = 1\nb = 2\n")
    # authored long before, committed (e.g. rebased) the day after "first"
    run_git(
        repo,
        "commit",
        "-q",
        "-am",
        "rebased",
        "--date=2025-06-01T00:00:00+0000",
        when=START + timedelta(days=1),
    )
    hist = _git_history(repo)
    assert hist.blame_lines("a.py", [2])[2].date == "2026-01-02"
    info, _ = hist.first_added([("a.py", 2), ("a.py", 1)])
    assert info is not None and info.subject == "first"


def test_same_committer_date_ties_by_sha(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, [("first", {"a.py": "a = 1\n"})])
    (repo / "a.py").write_text("b = 2\na = 1\n")
    run_git(repo, "commit", "-q", "-am", "again", when=START)
    hist = _git_history(repo)
    first, again = sha_of(repo, "first"), sha_of(repo, "again")
    # built so that the smaller sha is neither the first line nor the first subject
    assert first < again
    info, _ = hist.first_added([("a.py", 1), ("a.py", 2)])
    assert info is not None and info.commit == first[:9]


# -- determinism --------------------------------------------------------------


def test_output_is_deterministic(tmp_path: Path) -> None:
    one = _git_history(make_repo(tmp_path, HISTORY, name="one"))
    two = _git_history(make_repo(tmp_path, HISTORY, name="two"))
    sites = [("a.py", 4), ("a.py", 5), ("a.py", 6), ("b.py", 1), ("b.py", 2)]
    assert one.commit == two.commit
    assert one.blame_lines("a.py", [4, 5, 6]) == two.blame_lines("a.py", [6, 5, 4, 5])
    answers = {
        one.first_added(sites),
        one.first_added(reversed(sites)),
        two.first_added(sites),
    }
    assert len(answers) == 1
    assert [b.date for b in one.blame_lines("a.py", [4, 5, 6]).values()] == [
        "2026-01-03",
        "2026-01-01",
        "2026-01-02",
    ]


# -- fakes ------------------------------------------------------------------


def test_fake_history_orders_by_date_then_commit() -> None:
    fake = FakeHistory(
        {
            ("a.py", 12): BlameInfo("bbb2222", "2024-01-02", "a: later sha"),
            ("a.py", 13): BlameInfo("aaa1111", "2024-01-02", "b: earlier sha"),
            ("b.py", 1): BlameInfo("ccc3333", "2024-03-01", "newer"),
        },
        commit="f" * 40,
    )
    assert isinstance(fake, History)
    assert fake.blame_lines("a.py", [12, 99]) == {12: fake.blames[("a.py", 12)]}
    info, reason = fake.first_added([("b.py", 1), ("a.py", 12), ("a.py", 13)])
    assert info is not None and info.subject == "b: earlier sha" and reason is None
    assert fake.first_added([("c.py", 1)]) == (None, "no blame for these lines")
    shallow = FakeHistory(fake.blames, shallow=True, boundary=frozenset({"aaa1111"}))
    assert shallow.first_added([("a.py", 13)])[1] == SHALLOW_MAY_BE_OLDER


def test_no_history_is_a_history() -> None:
    assert isinstance(NoHistory("git not installed"), History)


def test_make_repo_fixes_identity_and_dates(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, HISTORY[:1])
    out = subprocess.run(
        ["git", "log", "--format=%an <%ae> %cI %aI"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert (
        out
        == "Test <t@example.com> 2026-01-01T00:00:00+00:00 2026-01-01T00:00:00+00:00"
    )
