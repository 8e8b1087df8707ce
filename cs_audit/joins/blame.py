"""Git history for the ``added_in`` column: which commit introduced a switch.

A switch's ``added_in`` is the *oldest* commit among the blames of its read
sites (report contract: ``{commit, date, subject}`` of the commit that
introduced the first read).  This module is the only place cs-audit talks to
git, and it only ever reads:

* ``open_history(root)`` returns a :class:`GitHistory` when ``root`` lies in a
  git work tree with at least one commit, else a :class:`NoHistory` that
  carries the reason ("not a git repository", "git not installed", ...).
* Paths are POSIX and relative to the *scanned root*, which may be a
  subdirectory of the repository; they are translated to repo-relative paths
  for git.
* Blame always runs against the HEAD commit (``git blame <HEAD-sha> -- path``),
  never the work tree, so **callers pass HEAD line numbers**.  The scanner
  reads work-tree files, so for a file whose work-tree copy differs from HEAD
  the line numbers may not match; such files get no blame (``{}``) rather
  than a wrong one.  Files not in HEAD (untracked, newly added) get ``{}``
  too, and lines past the end of the file are ignored.
* One ``git blame --porcelain -w`` call per file covers all requested lines
  (adjacent lines merged into ``-L a,b`` ranges); results are cached on
  ``(repo path, blob sha at HEAD)`` per line, so asking again spawns nothing.
* Nothing checks out, stashes, resets or writes: every call runs with
  ``GIT_OPTIONAL_LOCKS=0`` (no index refresh written back) and
  ``-c core.fsmonitor=false``.
* In a shallow clone, blame stops at the shallow boundary; when the oldest
  blame *is* a boundary commit, :meth:`History.first_added` says so
  ("shallow clone: may be older") instead of presenting it as the origin.

:class:`FakeHistory` stands in for git in the tests of other modules.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from cs_audit.model import BlameInfo

if TYPE_CHECKING:  # pragma: no cover - typing only
    import git

__all__ = [
    "SHORT_SHA",
    "FakeHistory",
    "GitHistory",
    "History",
    "NoHistory",
    "open_history",
]

#: length of the abbreviated sha in ``BlameInfo.commit``
SHORT_SHA = 9
SHALLOW_MAY_BE_OLDER = "shallow clone: may be older"

_GIT_CONFIG = ("core.fsmonitor=false", "core.quotepath=false")
_GIT_ENV = {
    "GIT_OPTIONAL_LOCKS": "0",  # never write the index back (read-only)
    "GIT_LITERAL_PATHSPECS": "1",  # file names are names, not globs
    "GIT_TERMINAL_PROMPT": "0",
}
_HEADER = re.compile(rb"^([0-9a-f]{40}|[0-9a-f]{64}) (\d+) (\d+)(?: (\d+))?$")
_ONLY_N_LINES = re.compile(r"has only (\d+) lines?")


@runtime_checkable
class History(Protocol):
    """Read-only view of a repository's history (a ``BlameSource``)."""

    #: full sha of HEAD; None outside git
    commit: str | None
    #: why history is unavailable or partial (e.g. a shallow clone); None when complete
    reason: str | None
    shallow: bool

    def blame_lines(self, path: str, lines: Sequence[int]) -> dict[int, BlameInfo]:
        """Blame ``lines`` (HEAD line numbers) of ``path`` (relative to the root)."""
        ...

    def first_added(
        self, sites: Iterable[tuple[str, int]]
    ) -> tuple[BlameInfo | None, str | None]:
        """The oldest commit among the blames of ``sites``, with a caveat if any."""
        ...


# ---------------------------------------------------------------------------
# no history / fake history


@dataclass(frozen=True, slots=True)
class NoHistory:
    """History is unavailable; every query answers with ``reason``."""

    reason: str
    commit: str | None = None
    shallow: bool = False

    def blame_lines(self, path: str, lines: Sequence[int]) -> dict[int, BlameInfo]:
        return {}

    def first_added(
        self, sites: Iterable[tuple[str, int]]
    ) -> tuple[BlameInfo | None, str | None]:
        return None, self.reason


@dataclass(slots=True)
class FakeHistory:
    """A fixed ``(path, line) -> BlameInfo`` table, for tests of other modules.

    ``FakeHistory({("a.py", 12): BlameInfo("abc1234", "2024-01-02", "subject")})``.
    Commits listed in ``boundary`` play the shallow boundary: when the oldest
    blame is one of them, ``first_added`` adds the shallow caveat.
    """

    blames: Mapping[tuple[str, int], BlameInfo]
    commit: str | None = None
    reason: str | None = None
    shallow: bool = False
    boundary: frozenset[str] = field(default_factory=frozenset)

    def blame_lines(self, path: str, lines: Sequence[int]) -> dict[int, BlameInfo]:
        return {n: self.blames[(path, n)] for n in lines if (path, n) in self.blames}

    def first_added(
        self, sites: Iterable[tuple[str, int]]
    ) -> tuple[BlameInfo | None, str | None]:
        found = [self.blames[s] for s in sites if s in self.blames]
        if not found:
            return None, self.reason or "no blame for these lines"
        oldest = min(found, key=lambda b: (b.date, b.commit))
        if oldest.commit in self.boundary:
            return oldest, SHALLOW_MAY_BE_OLDER
        return oldest, None


# ---------------------------------------------------------------------------
# git


@dataclass(frozen=True, slots=True)
class _Blamed:
    """One blamed line: the public info plus what ordering needs."""

    info: BlameInfo
    sha: str
    committer_time: int


def _utc_day(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d")


def _ranges(lines: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted, merged ``(start, end)`` ranges covering ``lines``."""
    out: list[tuple[int, int]] = []
    for n in sorted(set(lines)):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def parse_porcelain(output: bytes) -> dict[int, _Blamed]:
    """Parse ``git blame --porcelain`` output into ``final line -> _Blamed``.

    Porcelain prints a commit's headers only the first time the commit
    appears, so headers are collected per sha and resolved at the end.
    """
    line_sha: dict[int, str] = {}
    headers: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for raw in output.split(b"\n"):
        if raw.startswith(b"\t"):  # the line's content
            current = None
            continue
        m = _HEADER.match(raw)
        if m:
            sha = m.group(1).decode("ascii")
            line_sha[int(m.group(3))] = sha
            current = headers.setdefault(sha, {})
            continue
        if current is not None and raw:
            key, _, value = raw.partition(b" ")
            current.setdefault(key.decode("ascii", errors="replace"), _decode(value))
    out: dict[int, _Blamed] = {}
    for line, sha in line_sha.items():
        h = headers.get(sha, {})
        ctime = int(h.get("committer-time", "0") or 0)
        info = BlameInfo(
            commit=sha[:SHORT_SHA],
            date=_utc_day(ctime),
            subject=h.get("summary", ""),
            author=h.get("author", ""),
        )
        out[line] = _Blamed(info, sha, ctime)
    return out


class GitHistory:
    """History read from a git work tree via GitPython (read-only, cached).

    Build it with :func:`open_history`.  Besides the :class:`History`
    protocol it records why a file got no blame in ``skipped``
    (repo-relative path -> "not committed" | "modified since HEAD" |
    "blame failed: ...").
    """

    commit: str | None
    reason: str | None
    shallow: bool

    def __init__(self, repo: git.Repo, root: Path) -> None:
        """Use :func:`open_history`; raises ``ValueError`` when unusable."""
        self._repo = repo
        worktree = repo.working_tree_dir
        if worktree is None:
            raise ValueError("not a git work tree (bare repository)")
        self._worktree = Path(worktree).resolve()
        rel = os.path.relpath(root.resolve(), self._worktree)
        if rel == os.curdir:
            self._prefix = ""
        elif rel == os.pardir or rel.startswith(os.pardir + os.sep):
            raise ValueError("root is outside the git work tree")
        else:
            self._prefix = Path(rel).as_posix()
        head = self._git_text(
            "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False
        )
        if not head:
            raise ValueError("git repository has no commits")
        self.commit = head
        shallow_file = Path(self._git_text("rev-parse", "--git-path", "shallow"))
        if not shallow_file.is_absolute():
            shallow_file = self._worktree / shallow_file
        flag = self._git_text("rev-parse", "--is-shallow-repository", check=False)
        self.shallow = flag == "true" or shallow_file.is_file()
        self._boundary: frozenset[str] = frozenset()
        self.reason = self._shallow_reason(shallow_file) if self.shallow else None
        self.skipped: dict[str, str] = {}
        self._blobs: dict[str, str] | None = None
        self._dirty: frozenset[str] | None = None
        self._cache: dict[tuple[str, str], dict[int, _Blamed | None]] = {}

    # -- git plumbing -------------------------------------------------------

    def _git_bytes(self, *args: str, check: bool = True) -> bytes:
        """Run ``git -c ... <args>`` in the work tree; stdout as bytes."""
        from git.exc import GitCommandError

        argv: list[str] = [str(self._repo.git.GIT_PYTHON_GIT_EXECUTABLE or "git")]
        for kv in _GIT_CONFIG:
            argv += ["-c", kv]
        argv += args
        try:
            out = self._repo.git.execute(
                argv,
                env=_GIT_ENV,
                stdout_as_string=False,
                strip_newline_in_stdout=False,
            )
        except GitCommandError:
            if check:
                raise
            return b""
        assert isinstance(out, bytes)
        return out

    def _git_text(self, *args: str, check: bool = True) -> str:
        return _decode(self._git_bytes(*args, check=check)).strip()

    def _shallow_reason(self, shallow_file: Path) -> str:
        """Name the boundary commits (``.git/shallow``) in the reason."""
        try:
            shas = sorted(set(shallow_file.read_text("ascii").split()))
        except OSError:
            shas = []
        self._boundary = frozenset(shas)
        if not shas:
            return "shallow clone: older history is missing"
        out = self._git_text(
            "log", "--no-walk=unsorted", "--format=%H %ct", *shas, check=False
        )
        dated = sorted(
            (int(t), sha)
            for sha, _, t in (ln.partition(" ") for ln in out.splitlines())
            if t
        )
        names = [f"{sha[:SHORT_SHA]} {_utc_day(t)}" for t, sha in dated] or [
            s[:SHORT_SHA] for s in shas
        ]
        return f"shallow clone: history before {', '.join(names)} is missing"

    def _repo_path(self, path: str) -> str | None:
        """Root-relative POSIX path -> repo-relative path (None if it escapes)."""
        p = posixpath.normpath(path.replace(os.sep, "/"))
        if p in ("", ".", "..") or p.startswith(("/", "../")):
            return None
        return posixpath.join(self._prefix, p) if self._prefix else p

    def _blob(self, repo_path: str) -> str | None:
        """Blob sha of ``repo_path`` at HEAD (one ``ls-tree`` for the whole root)."""
        if self._blobs is None:
            spec = [self._prefix] if self._prefix else []
            out = self._git_bytes(
                "ls-tree", "-r", "-z", "--full-tree", self.commit or "HEAD", "--", *spec
            )
            blobs: dict[str, str] = {}
            for entry in out.split(b"\0"):
                meta, _, name = entry.partition(b"\t")
                parts = meta.split()
                if len(parts) == 3 and parts[1] == b"blob":
                    blobs[os.fsdecode(name)] = parts[2].decode("ascii")
            self._blobs = blobs
        return self._blobs.get(repo_path)

    def _is_dirty(self, repo_path: str) -> bool:
        """Whether the work-tree copy differs from HEAD (one ``diff`` for the root)."""
        if self._dirty is None:
            spec = [self._prefix] if self._prefix else []
            # `git status` with GIT_OPTIONAL_LOCKS=0 refreshes stat data in memory only;
            # `git diff <rev>` would rewrite .git/index when only stat data changed
            out = self._git_bytes(
                "status",
                "--porcelain",
                "-z",
                "--untracked-files=no",
                "--no-renames",
                "--ignore-submodules",
                "--",
                *spec,
            )
            self._dirty = frozenset(os.fsdecode(entry[3:]) for entry in out.split(b"\0") if len(entry) > 3)
        return repo_path in self._dirty

    def _run_blame(self, repo_path: str, lines: Sequence[int]) -> dict[int, _Blamed]:
        """One porcelain blame over merged ranges; ranges past EOF are dropped."""
        from git.exc import GitCommandError

        ranges = _ranges(lines)
        while ranges:
            args = ["blame", "--porcelain", "-w"]
            for a, b in ranges:
                args += ["-L", f"{a},{b}"]
            args += [self.commit or "HEAD", "--", repo_path]
            try:
                return parse_porcelain(self._git_bytes(*args))
            except GitCommandError as exc:
                m = _ONLY_N_LINES.search(str(exc.stderr))
                if not m:
                    self.skipped[repo_path] = (
                        f"blame failed: {str(exc.stderr).strip()[:200]}"
                    )
                    return {}
                n = int(m.group(1))
                clamped = [(a, min(b, n)) for a, b in ranges if a <= n]
                if clamped == ranges:  # no progress: give up rather than loop
                    self.skipped[repo_path] = (
                        f"blame failed: {str(exc.stderr).strip()[:200]}"
                    )
                    return {}
                ranges = clamped
        return {}

    # -- queries --------------------------------------------------------------

    def _blamed(self, path: str, lines: Sequence[int]) -> dict[int, _Blamed]:
        repo_path = self._repo_path(path)
        if repo_path is None:
            return {}
        blob = self._blob(repo_path)
        if blob is None:
            self.skipped[repo_path] = "not committed"
            return {}
        if self._is_dirty(repo_path):
            self.skipped[repo_path] = "modified since HEAD"
            return {}
        wanted = sorted({n for n in lines if n >= 1})
        cached = self._cache.setdefault((repo_path, blob), {})
        missing = [n for n in wanted if n not in cached]
        if missing:
            got = self._run_blame(repo_path, missing)
            for n in missing:
                cached[n] = got.get(n)
        return {n: b for n in wanted if (b := cached[n]) is not None}

    def blame_lines(self, path: str, lines: Sequence[int]) -> dict[int, BlameInfo]:
        """Blame HEAD ``lines`` of root-relative ``path``; ``{}`` if not blamable."""
        return {n: b.info for n, b in self._blamed(path, lines).items()}

    def first_added(
        self, sites: Iterable[tuple[str, int]]
    ) -> tuple[BlameInfo | None, str | None]:
        """Oldest commit (committer date, then sha) among the blames of ``sites``.

        Returns ``(info, None)``; ``(None, reason)`` when no site has blame;
        ``(info, caveat)`` when the answer may be too new: the oldest blame is
        the shallow boundary, or some sites sit in files modified since HEAD.
        """
        by_path: dict[str, set[int]] = {}
        for path, line in sites:
            by_path.setdefault(path, set()).add(line)
        found: list[_Blamed] = []
        unblamed: list[str] = []
        for path in sorted(by_path):
            got = self._blamed(path, sorted(by_path[path]))
            found.extend(got.values())
            repo_path = self._repo_path(path)
            if repo_path is not None and repo_path in self.skipped:
                unblamed.append(f"{path} {self.skipped[repo_path]}")
        if not found:
            return None, "; ".join(unblamed) if unblamed else "no blame for these lines"
        oldest = min(found, key=lambda b: (b.committer_time, b.sha))
        caveats: list[str] = []
        if oldest.sha in self._boundary:
            caveats.append(SHALLOW_MAY_BE_OLDER)
        # untracked files hold reads newer than any commit: they cannot change
        # the oldest, but files modified since HEAD might
        partial = [u for u in unblamed if not u.endswith(" not committed")]
        if partial:
            caveats.append("partial: " + "; ".join(partial))
        return oldest.info, "; ".join(caveats) or None

    def close(self) -> None:
        """Release GitPython's cached processes (safe to call twice)."""
        self._repo.close()


def open_history(root: str | Path) -> History:
    """A :class:`GitHistory` for the work tree holding ``root``, else :class:`NoHistory`."""
    try:
        import git
        from git.exc import (
            GitCommandNotFound,
            InvalidGitRepositoryError,
            NoSuchPathError,
        )
    except (
        ImportError
    ) as exc:  # GitPython raises ImportError when git itself is missing
        msg = str(exc).lower()
        if "git executable" in msg or "bad git" in msg:
            return NoHistory("git not installed")
        return NoHistory("gitpython not installed")
    root_path = Path(root)
    if not root_path.is_dir():
        return NoHistory("not a git repository")
    try:
        repo = git.Repo(root_path, search_parent_directories=True)
    except (InvalidGitRepositoryError, NoSuchPathError):
        return NoHistory("not a git repository")
    try:
        return GitHistory(repo, root_path)
    except GitCommandNotFound:
        repo.close()
        return NoHistory("git not installed")
    except ValueError as exc:
        repo.close()
        return NoHistory(str(exc))
