"""Git history for the ``added_in`` column: which commit introduced a switch.

A switch's ``added_in`` is the *oldest* commit among the blames of its read
sites (report contract: ``{commit, date, subject}`` of the commit that
introduced the first read).  This module is the only place cs-audit talks to
git about blame, and it only ever reads the repository:

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
  than a wrong one (whether it differs is found by hashing the file here, not
  by ``git status``: see ``cs_audit.git.worktree``).  Files not in HEAD (untracked, newly added) get ``{}``
  too, and lines past the end of the file are ignored.
* Only the lines asked for are blamed: one ``git blame --porcelain -w`` per
  file covers all of them (adjacent lines merged into ``-L a,b`` ranges).
  :meth:`GitHistory.prefetch` takes every site of a scan at once, so each file
  is blamed once, and the files are blamed in parallel (``jobs`` git processes).
* Answers are cached per ``(repo path, blob sha at HEAD)`` and line in memory,
  so asking again spawns nothing; with ``cache_dir`` they are also kept on disk,
  one file per (HEAD commit, blame settings), so the next scan of the same
  commit spawns no blame at all.  The HEAD commit is part of the key because the
  blame of a blob depends on the history that leads to it (a revert brings back
  an old blob whose lines now blame to the revert).
* When many files need blame and the repository has no usable commit-graph,
  a commit-graph with changed-path Bloom filters is written into a private
  temporary object directory (``git commit-graph write`` with
  ``GIT_OBJECT_DIRECTORY`` pointing there and the repository's objects as an
  alternate) and the blames read it: each blame then skips the commits that
  did not touch its file without opening their trees.  Nothing is written into
  the repository, and the answers are the same with or without it (the graph
  only caches what git would read from the commits; a Bloom filter has false
  positives, never false negatives).
* Nothing checks out, stashes, resets or writes: every call runs with
  ``GIT_OPTIONAL_LOCKS=0`` (no index refresh written back) and
  ``-c core.fsmonitor=false``.
* In a shallow clone, blame stops at the shallow boundary; when the oldest
  blame *is* a boundary commit, :meth:`History.first_added` says so
  ("shallow clone: may be older") instead of presenting it as the origin.

:class:`FakeHistory` stands in for git in the tests of other modules.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cs_audit.files import keep_newest, opened_json, read_regular, sealed_json, try_write_atomically
from cs_audit.git import runner
from cs_audit.git.worktree import WorkTreeFiles
from cs_audit.model import BlameInfo

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
#: files to blame from which writing a temporary commit-graph pays for itself (writing one
#: costs about as much as that many blames without it; with it each blame costs much less)
GRAPH_MIN_FILES = 8
#: blame files kept on disk (one per HEAD commit and blame settings); older ones are deleted
KEEP_BLAME_FILES = 16
#: how much of a file named by the blame settings (``.mailmap``, an ignore-revs list) is read
MAX_SETTINGS_FILE_BYTES = 16 << 20
#: bump when the on-disk layout or what a blame is run with changes
BLAME_CACHE_FORMAT = 2
_BLAME_FLAGS = ("--porcelain", "-w", "--no-textconv")

_HEADER = re.compile(rb"^([0-9a-f]{40}|[0-9a-f]{64}) (\d+) (\d+)(?: (\d+))?$")
_ONLY_N_LINES = re.compile(r"has only (\d+) lines?")
_FULL_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def _settings_file(path: Path) -> bytes:
    """A file the blame settings name, as the settings key takes it (``<none>``: absent,
    unreadable, a symlink or no regular file)."""
    try:
        return read_regular(path, MAX_SETTINGS_FILE_BYTES)
    except OSError:
        return b"<none>"


class GitNotFound(Exception):
    """git itself could not be started."""


@runtime_checkable
class History(Protocol):
    """Read-only view of a repository's history (a ``BlameSource``)."""

    @property
    def commit(self) -> str | None:
        """Full sha of HEAD; None outside git."""
        ...

    @property
    def reason(self) -> str | None:
        """Why history is unavailable or partial (e.g. a shallow clone); None when complete."""
        ...

    @property
    def shallow(self) -> bool: ...

    def blame_lines(self, path: str, lines: Sequence[int]) -> dict[int, BlameInfo]:
        """Blame ``lines`` (HEAD line numbers) of ``path`` (relative to the root)."""
        ...

    def prefetch(self, sites: Iterable[tuple[str, int]]) -> None:
        """Blame all of ``sites`` at once (one git call per file, files in parallel), so
        that the queries that follow are answered from the cache.  Optional: the answers
        are the same without it."""
        ...

    def first_added(
        self, sites: Iterable[tuple[str, int]]
    ) -> tuple[BlameInfo | None, str | None]:
        """The oldest commit among the blames of ``sites``, with a caveat if any."""
        ...

    def first_reads(self, names: Iterable[str], reads: Reads) -> dict[str, tuple[BlameInfo, str | None]]:
        """name -> (the first commit whose code reads it, a caveat if any), for the names the
        history pass (``cs_audit.git.introduced``) found, ``reads`` telling which names a
        version of a file reads; the others are left to blame."""
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

    def prefetch(self, sites: Iterable[tuple[str, int]]) -> None:
        return None

    def first_added(
        self, sites: Iterable[tuple[str, int]]
    ) -> tuple[BlameInfo | None, str | None]:
        return None, self.reason

    def first_reads(self, names: Iterable[str], reads: Reads) -> dict[str, tuple[BlameInfo, str | None]]:
        return {}


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
    #: name -> the history pass's answer (the others fall back to the blames)
    reads: Mapping[str, BlameInfo] = field(default_factory=dict)

    def first_reads(self, names: Iterable[str], reads: Reads) -> dict[str, tuple[BlameInfo, str | None]]:
        return {n: (self.reads[n], SHALLOW_MAY_BE_OLDER if self.reads[n].commit in self.boundary else None)
                for n in names if n in self.reads}

    def blame_lines(self, path: str, lines: Sequence[int]) -> dict[int, BlameInfo]:
        return {n: self.blames[(path, n)] for n in lines if (path, n) in self.blames}

    def prefetch(self, sites: Iterable[tuple[str, int]]) -> None:
        return None

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
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d")


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


def _spawn(
    args: Sequence[str], cwd: Path, env: Mapping[str, str], stdin: bytes = b""
) -> tuple[int, bytes, bytes]:
    """Run one git command through the runner: ``(exit code, stdout, stderr)``; ``env``
    is added to the runner's environment.  Every git process of this module goes
    through here."""
    return runner.run(cwd, args, env=env, stdin=stdin)


FileKey = tuple[str, str]  # (repo-relative path, blob sha at HEAD)
#: which names a version of a Python file reads (None: it does not parse)
Reads = Callable[[bytes], "frozenset[str] | None"]
Known = dict[int, "_Blamed | None"]  # line -> blame (None: git gave none, e.g. past the end)


class _BlameStore:
    """The blame answers of one (HEAD commit, blame settings) on disk: ``<dir>/<key>.json``.

    Written whole and atomically (temp file + rename); a missing, truncated or foreign
    file reads as empty.  The directory keeps the ``KEEP_BLAME_FILES`` most recently
    used files."""

    def __init__(self, directory: Path, key: str) -> None:
        self.directory = directory
        self.key = key
        self.path = directory / f"{key}.json"

    def load(self) -> dict[FileKey, Known]:
        try:
            raw: Any = opened_json(self.path.read_bytes())
        except OSError:
            return {}
        try:
            if raw["format"] != BLAME_CACHE_FORMAT or raw["key"] != self.key:
                return {}
            commits: dict[str, _Blamed] = {}
            for sha, (ctime, subject, author) in raw["commits"].items():
                if not _FULL_SHA.match(sha):
                    return {}
                ctime = int(ctime)
                info = BlameInfo(sha[:SHORT_SHA], _utc_day(ctime), str(subject), str(author))
                commits[sha] = _Blamed(info, sha, ctime)
            out: dict[FileKey, Known] = {}
            for entry in raw["files"]:
                known: Known = {
                    int(n): (None if sha is None else commits[sha])
                    for n, sha in entry["lines"].items()
                }
                out[(str(entry["path"]), str(entry["blob"]))] = known
        except (KeyError, TypeError, ValueError, AttributeError):
            return {}
        with contextlib.suppress(OSError):
            os.utime(self.path)  # most recently used
        return out

    def save(self, entries: Mapping[FileKey, Known]) -> None:
        commits: dict[str, list[Any]] = {}
        files = []
        for (path, blob), known in sorted(entries.items()):
            lines: dict[str, str | None] = {}
            for n in sorted(known):
                b = known[n]
                lines[str(n)] = None if b is None else b.sha
                if b is not None:
                    commits[b.sha] = [b.committer_time, b.info.subject, b.info.author]
            files.append({"path": path, "blob": blob, "lines": lines})
        data = sealed_json({"format": BLAME_CACHE_FORMAT, "key": self.key, "commits": commits, "files": files})
        if try_write_atomically(self.path, data):
            keep_newest(self.directory, KEEP_BLAME_FILES, lambda e: e.name.endswith(".json"), spare=self.path)


class GitHistory:
    """History read from a git work tree (read-only, cached).

    Build it with :func:`open_history`.  Besides the :class:`History`
    protocol it records why a file got no blame in ``skipped``
    (repo-relative path -> "not committed" | "modified since HEAD" |
    "blame failed: ...") and counts the files it had git blame in
    ``files_blamed``.  Call :meth:`close` when done: it writes the disk cache
    and removes the temporary commit-graph.
    """

    commit: str | None
    reason: str | None
    shallow: bool

    def __init__(
        self,
        worktree: Path,
        root: Path,
        cache_dir: str | Path | None = None,
        jobs: int | None = None,
    ) -> None:
        """Use :func:`open_history`; raises ``ValueError`` when unusable."""
        self._worktree = worktree.resolve()
        mailmap = self._worktree / ".mailmap"
        if os.path.lexists(mailmap) and not (mailmap.is_file() and not mailmap.is_symlink()):
            # git blame reads it, and a FIFO would block it, /dev/zero never end
            raise ValueError(".mailmap is not a regular file: history skipped")
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
        self.files_blamed = 0
        self._jobs = max(1, jobs or os.cpu_count() or 1)
        self._blobs: dict[str, str] | None = None
        self._files: WorkTreeFiles | None = None
        self._dirty: dict[str, bool] = {}  # repo path -> its work-tree copy is not HEAD's
        self._cache: dict[FileKey, Known] = {}
        self._failed: set[FileKey] = set()  # blame failed: answered empty, never stored on disk
        self._cache_dir = Path(cache_dir) if cache_dir else None
        self._store: _BlameStore | None = None
        self._stored: dict[FileKey, Known] | None = None
        self._unsaved = False
        self._graph_tried = False
        self._graph_env: dict[str, str] = {}
        self._graph_cleanup: weakref.finalize | None = None

    # -- git plumbing -------------------------------------------------------

    def _git_bytes(self, *args: str, check: bool = True) -> bytes:
        """stdout of one git command in the work tree; with ``check`` a failure raises
        ``ValueError`` (the history is unusable), else gives ``b""``."""
        code, out, err = _spawn(args, self._worktree, {})
        if code == 127:
            raise GitNotFound(_decode(err))
        if code != 0:
            if check:
                raise ValueError(f"git {args[0]} failed: {_decode(err).strip()[:200]}")
            return b""
        return out

    def _git_text(self, *args: str, check: bool = True) -> str:
        return _decode(self._git_bytes(*args, check=check)).strip()

    def _env(self) -> dict[str, str]:
        """Environment of a blame process (with the temporary commit-graph, if any)."""
        return dict(self._graph_env)

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
            try:
                out = self._git_bytes(
                    "ls-tree", "-r", "-z", "--full-tree", self.commit or "HEAD", "--", *spec
                )
            except ValueError as exc:
                head = (self.commit or "HEAD")[:SHORT_SHA]
                raise ValueError(f"the tree of HEAD ({head}) cannot be read, a missing object? {exc}") from None
            blobs: dict[str, str] = {}
            for entry in out.split(b"\0"):
                meta, _, name = entry.partition(b"\t")
                parts = meta.split()
                if len(parts) == 3 and parts[1] == b"blob":
                    blobs[os.fsdecode(name)] = parts[2].decode("ascii")
            self._blobs = blobs
        return self._blobs.get(repo_path)

    def _is_dirty(self, repo_path: str, blob: str) -> bool:
        """Whether the work-tree copy is not blob ``blob`` of HEAD, read and hashed here: git
        status would refresh the index's stat data and read the file through git's filters."""
        dirty = self._dirty.get(repo_path)
        if dirty is None:
            if self._files is None:
                self._files = WorkTreeFiles(self._worktree)
            dirty = self._dirty[repo_path] = not self._files.matches(repo_path, blob)
        return dirty

    # -- the disk cache -------------------------------------------------------

    def _settings_key(self) -> str:
        """Everything a blame answer depends on besides the file: HEAD, the blame
        flags, git's version, the blame/mailmap/diff configuration and the files it
        names (ignore-revs lists, ``.mailmap``), replace refs, grafts and the shallow
        boundary."""
        h = hashlib.sha256()

        def add(label: str, data: bytes) -> None:
            h.update(label.encode("utf-8", "surrogateescape") + b"\0" + data + b"\0")

        add("format", f"{BLAME_CACHE_FORMAT} {' '.join(_BLAME_FLAGS)}".encode())
        add("head", (self.commit or "").encode())
        add("git", self._git_bytes("--version", check=False))
        config = self._git_bytes(
            "config", "--null", "--get-regexp", r"^(blame|mailmap|diff)\.", check=False
        )
        add("config", config)
        named = [".mailmap"]
        for record in config.split(b"\0"):
            key, _, value = record.partition(b"\n")
            if key in (b"blame.ignorerevsfile", b"mailmap.file") and value:
                named.append(os.fsdecode(value))
        for name in named:
            p = Path(os.path.expanduser(name))
            add(name, _settings_file(p if p.is_absolute() else self._worktree / p))
        add("replace", self._git_bytes(
            "for-each-ref", "--format=%(refname) %(objectname)", "refs/replace/", check=False
        ))
        grafts = Path(self._git_text("rev-parse", "--git-path", "info/grafts", check=False) or "-")
        add("grafts", _settings_file(grafts if grafts.is_absolute() else self._worktree / grafts))
        add("shallow", f"{self.shallow} {' '.join(sorted(self._boundary))}".encode())
        return h.hexdigest()[:32]

    def _on_disk(self) -> dict[FileKey, Known]:
        """The answers stored for this HEAD and these settings (read once)."""
        if self._stored is None:
            self._stored = {}
            if self._cache_dir is not None:
                directory = self._cache_dir / f"v{BLAME_CACHE_FORMAT}"
                self._store = _BlameStore(directory, self._settings_key())
                self._stored = self._store.load()
        return self._stored

    def _save(self) -> None:
        if not self._unsaved or self._store is None:
            return
        entries = dict(self._on_disk())
        for key, known in self._cache.items():
            if key not in self._failed:
                entries[key] = known
        self._store.save(entries)
        self._unsaved = False

    # -- the temporary commit-graph -------------------------------------------

    def _write_graph(self) -> None:
        """A commit-graph with changed-path Bloom filters for HEAD's history, in a private
        temporary object directory the blames then read (the repository is not written)."""
        self._graph_tried = True
        if self.shallow or not self.commit:
            return  # git ignores commit-graphs in shallow clones
        objects = self._git_text("rev-parse", "--git-path", "objects", check=False)
        if not objects:
            return
        where = Path(objects)
        where = (where if where.is_absolute() else self._worktree / where).resolve()
        if not where.is_dir() or any(c in str(where) for c in (os.pathsep, '"')):
            return  # an alternates list cannot hold this path unquoted
        tmp = tempfile.mkdtemp(prefix="cs-audit-graph-")
        # close() removes it from here on, even when a signal stops the write midway (the
        # CLI exits without running finalizers)
        self._graph_cleanup = weakref.finalize(self, shutil.rmtree, tmp, True)
        env = {
            "GIT_OBJECT_DIRECTORY": tmp,
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(where),
        }
        try:
            os.mkdir(os.path.join(tmp, "info"))
            os.mkdir(os.path.join(tmp, "pack"))
        except OSError:
            self._drop_graph()
            return
        code, _, _ = _spawn(
            ("commit-graph", "write", "--no-progress", "--stdin-commits", "--changed-paths"),
            self._worktree,
            env,
            stdin=f"{self.commit}\n".encode("ascii"),
        )
        if code != 0 or not os.path.isfile(os.path.join(tmp, "info", "commit-graph")):
            self._drop_graph()
            return
        self._graph_env = env

    def _drop_graph(self) -> None:
        self._graph_env = {}
        if self._graph_cleanup is not None:
            self._graph_cleanup()
            self._graph_cleanup = None

    # -- blame --------------------------------------------------------------

    def _run_blame(
        self, repo_path: str, lines: Sequence[int], env: Mapping[str, str]
    ) -> tuple[dict[int, _Blamed], str | None]:
        """One porcelain blame over merged ranges; ranges past EOF are dropped.
        ``(answers, None)``, or ``({}, why)`` when git failed.  Thread-safe."""
        ranges = _ranges(lines)
        while ranges:
            args = ["blame", *_BLAME_FLAGS]
            for a, b in ranges:
                args += ["-L", f"{a},{b}"]
            args += [self.commit or "HEAD", "--", repo_path]
            code, out, err = _spawn(args, self._worktree, env)
            if code == 0:
                return parse_porcelain(out), None
            message = _decode(err).strip()
            m = _ONLY_N_LINES.search(message)
            if not m:
                return {}, f"blame failed: {message[:200] or f'exit {code}'}"
            n = int(m.group(1))
            clamped = [(a, min(b, n)) for a, b in ranges if a <= n]
            if clamped == ranges:  # no progress: give up rather than loop
                return {}, f"blame failed: {message[:200]}"
            ranges = clamped
        return {}, None

    def _blame_files(self, todo: Sequence[tuple[FileKey, Sequence[int]]]) -> None:
        """Blame the missing lines of each file (one git process per file, ``jobs`` at a
        time) and record the answers."""
        if not self._graph_tried and self.files_blamed + len(todo) >= GRAPH_MIN_FILES:
            self._write_graph()
        env = self._env()

        def one(item: tuple[FileKey, Sequence[int]]) -> tuple[dict[int, _Blamed], str | None]:
            return self._run_blame(item[0][0], item[1], env)

        jobs = min(self._jobs, len(todo))
        if jobs <= 1:
            results = [one(item) for item in todo]
        else:
            with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="cs-audit-blame") as pool:
                results = list(pool.map(one, todo))
        self.files_blamed += len(todo)
        for (key, lines), (got, error) in zip(todo, results):
            if error is not None and self._graph_env:
                # never let the temporary graph be the reason for a missing answer
                got, error = self._run_blame(key[0], lines, {})
            known = self._known(key)
            if error is not None:
                self.skipped[key[0]] = error
                self._failed.add(key)
            else:
                self._unsaved = True
            for n in lines:
                known[n] = got.get(n)

    def _resolve(self, path: str) -> FileKey | None:
        """``(repo path, blob)`` of a root-relative path that can be blamed, else None
        (the reason recorded in ``skipped``)."""
        repo_path = self._repo_path(path)
        if repo_path is None:
            return None
        blob = self._blob(repo_path)
        if blob is None:
            self.skipped[repo_path] = "not committed"
            return None
        if self._is_dirty(repo_path, blob):
            self.skipped[repo_path] = "modified since HEAD"
            return None
        return repo_path, blob

    def _known(self, key: FileKey) -> Known:
        """The answers known for a file so far (memory, seeded from the disk cache)."""
        known = self._cache.get(key)
        if known is None:
            known = self._cache[key] = dict(self._on_disk().get(key, {}))
        return known

    # -- queries --------------------------------------------------------------

    def prefetch(self, sites: Iterable[tuple[str, int]]) -> None:
        """Blame every line of ``sites`` not known yet: one git call per file, the files
        ``jobs`` at a time.  The answers are the same as asking one query at a time."""
        wanted: dict[FileKey, set[int]] = {}
        by_path: dict[str, set[int]] = {}
        for path, line in sites:
            if line >= 1:
                by_path.setdefault(path, set()).add(line)
        for path in sorted(by_path):
            key = self._resolve(path)
            if key is not None:
                wanted.setdefault(key, set()).update(by_path[path])
        todo: list[tuple[FileKey, Sequence[int]]] = []
        for key in sorted(wanted):
            known = self._known(key)
            missing = sorted(n for n in wanted[key] if n not in known)
            if missing:
                todo.append((key, missing))
        if todo:
            self._blame_files(todo)

    def _blamed(self, path: str, lines: Sequence[int]) -> dict[int, _Blamed]:
        key = self._resolve(path)
        if key is None:
            return {}
        wanted = sorted({n for n in lines if n >= 1})
        known = self._known(key)
        missing = [n for n in wanted if n not in known]
        if missing:
            self._blame_files([(key, missing)])
        return {n: b for n in wanted if (b := known.get(n)) is not None}

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
        self.prefetch((path, line) for path, lines in by_path.items() for line in lines)
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

    def first_reads(self, names: Iterable[str], reads: Reads) -> dict[str, tuple[BlameInfo, str | None]]:
        """The history pass over the Python files under the scanned path (answers stored on
        disk next to the blames); {} when git cannot give the history."""
        from cs_audit.git.introduced import FirstReads, PassError

        if not self.commit:
            return {}
        cache_dir = self._cache_dir / f"v{BLAME_CACHE_FORMAT}" if self._cache_dir is not None else None
        finder = FirstReads(self._worktree, self.commit, self._prefix, reads, self._boundary, cache_dir)
        try:
            answers = finder.answers(names)
        except PassError as exc:
            self.skipped.setdefault("<history pass>", str(exc))
            return {}
        out: dict[str, tuple[BlameInfo, str | None]] = {}
        for name, a in answers.items():
            if a is not None:
                out[name] = (BlameInfo(a.sha[:SHORT_SHA], _utc_day(a.ctime), a.subject),
                             SHALLOW_MAY_BE_OLDER if a.boundary else None)
        return out

    @property
    def settled(self) -> bool:
        """Whether every answer so far is one the history gives again (no blame and no
        history pass failed: a timeout, a git error)."""
        return not self._failed and "<history pass>" not in self.skipped

    def close(self) -> None:
        """Write the disk cache, remove the temporary commit-graph and release
        GitPython's cached processes (safe to call twice)."""
        try:
            self._save()
        finally:
            self._drop_graph()


def open_history(
    root: str | Path, cache_dir: str | Path | None = None, jobs: int | None = None
) -> History:
    """A :class:`GitHistory` for the work tree holding ``root``, else :class:`NoHistory`.

    ``cache_dir``: keep blame answers on disk there;
    None: in memory only.  ``jobs``: git blame processes at a time (default: cores).
    """
    root_path = Path(root)
    if not root_path.is_dir():
        return NoHistory("not a git repository")
    code, out, _ = _spawn(("rev-parse", "--is-bare-repository"), root_path, {})
    if code == 127:
        return NoHistory("git not installed")
    if code != 0:
        return NoHistory("not a git repository")
    if _decode(out).strip() == "true":
        return NoHistory("not a git work tree (bare repository)")
    code, out, _ = _spawn(("rev-parse", "--show-toplevel"), root_path, {})
    if code != 0 or not _decode(out).strip():
        return NoHistory("not a git work tree (bare repository)")
    try:
        return GitHistory(Path(_decode(out).strip()), root_path, cache_dir=cache_dir, jobs=jobs)
    except GitNotFound:
        return NoHistory("git not installed")
    except ValueError as exc:
        return NoHistory(str(exc))
