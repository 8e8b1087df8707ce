"""Audits of past commits, read from git objects: no checkout, work tree and index untouched.

* :class:`GitRepo` runs read-only git commands only, as argument lists, with
  ``core.fsmonitor`` and hooks off, ``GIT_OPTIONAL_LOCKS=0`` (nothing written back to
  the index), ``--`` before paths, and every revision verified with
  ``git rev-parse --verify REV^{commit}`` before use.
* :class:`TreeAuditor` writes the tree of a commit into a private temporary directory
  (``git ls-tree`` + ``git cat-file --batch``; never ``git archive``, whose
  ``export-subst``/``export-ignore`` attributes would change the bytes) and runs
  :func:`cs_audit.api.run_audit` on it, so a past commit is audited by exactly the code
  that audits a work tree.  Across commits the directory is updated in place (only
  changed paths are rewritten) and, with ``reuse=True``, the per-file facts of blobs
  already analysed are reused: each further commit only parses what it changed.  When
  the Python facts of a commit are the same as those of the commit audited before it
  (a commit that changed only docs, CI files or shell scripts), the whole-tree joins
  (the call-graph model, the findings and the duplicate groups, pure functions of those
  facts and the rules) are reused too; setters, readers, switches and dispositions are
  always computed afresh.
* A repository of its own inside the work tree that the commit does not record (one the
  outer ``.gitignore`` lists, or an untracked one: no commit of the outer repository names a
  state of it) is written from its own objects, with ``nested="dated"``: at the last commit
  of its HEAD's first-parent line made no later than the outer commit (its committer date),
  the workspace as it stood then; its HEAD would put code written since into the report of
  an older commit.  The report names the commit taken, or says the repository was left out
  (no commit of it by then).  A submodule checked out in the work tree is written at the
  commit the outer commit pins, from its own objects; one not checked out, or whose
  repository lacks that commit, is an ``errors`` entry (its files are not audited).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cs_audit import api
from cs_audit.config import AuditConfig, load_config
from cs_audit.extract.discover import display_path
from cs_audit.git.repo import SHORT_SHA, BlobReader, GitRepo, TreeEntry, safe_parts
from cs_audit.model import AuditResult, BlameInfo
from cs_audit.ruleset import RuleSet, load_ruleset
from cs_audit.sources import FileError

if TYPE_CHECKING:
    from cs_audit.git.upstream import Origins

#: blobs larger than this are written truncated: nothing cs-audit reads needs more
#: (a file over ``max_file_bytes`` is skipped as too large from its first bytes alone)
MAX_WRITTEN_BLOB = 16 << 20


@dataclass
class _Nested:
    """A repository inside the work tree that no commit of the outer one records, or a
    submodule checked out there."""

    path: str  # from the scanned root
    repo: GitRepo
    #: the commit written for the outer commit last audited (None: left out), and why
    sha: str | None = None
    note: str = ""
    #: its tree at ``sha``: path in the temporary tree -> entry (blobs), and its submodules
    files: dict[str, TreeEntry] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    #: a submodule: written at the commit the outer commit pins, when its repository has it
    pinned: bool = False


@dataclass
class AuditStats:
    """How much work the audits of a :class:`TreeAuditor` did (for progress and tests)."""

    commits: int = 0
    analysed: int = 0  # files parsed
    reused: int = 0  # files whose facts came from an earlier commit's identical blob
    cached: int = 0  # files whose facts (or whole tree's result) came from the disk cache
    joins_reused: int = 0  # commits whose whole-tree joins came from the commit before
    stored: int = 0  # commits whose whole result came from the disk cache (a range audited before)


class TreeAuditor:
    """Audit commits of ``repo`` at its scanned path, from git objects only.

    Use as a context manager; the temporary tree is removed on exit.
    ``overrides`` are :func:`cs_audit.config.load_config` overrides (``jobs``,
    ``exclude``); the project configuration is read from each commit's own tree.
    """

    def __init__(self, repo: GitRepo, display_root: str, reuse: bool = True, nested: str | None = None,
                 **overrides: Any) -> None:
        self.repo = repo
        #: "dated": the repositories inside the work tree that no commit records are written
        #: as they stood at each commit's date (see the module); None: left out unsaid
        self.nested_at = nested
        self._nested: list[_Nested] | None = None  # found at the first audit
        self.display_root = display_root
        self.reuse = reuse
        self.overrides = {"history": False, **overrides}
        self.stats = AuditStats()
        self._workdir = Path(tempfile.mkdtemp(prefix="cs-audit-rev-"))
        self._current: dict[str, TreeEntry] = {}
        self._current_sha: str | None = None  # the commit the directory holds
        self._links: dict[str, str] = {}  # path -> pinned commit of each submodule of that commit
        self._blobs: BlobReader | None = None
        #: the blob readers of the nested repositories, and which of them holds each path written
        self._nested_blobs: dict[Path, BlobReader] = {}
        self._owner: dict[str, Path] = {}
        #: per-file results and joins reused across the commits (None: audit each from scratch)
        self._memo: api.ScanMemo | None = api.ScanMemo() if reuse else None
        self._shipped_rs: RuleSet | None = None
        self.last_rs: RuleSet | None = None

    def __enter__(self) -> TreeAuditor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._close_readers()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def _close_readers(self) -> None:
        for reader in (self._blobs, *self._nested_blobs.values()):
            if reader is not None:
                reader.close()
        self._blobs = None
        self._nested_blobs = {}

    @property
    def root(self) -> Path:
        """The scanned path inside the temporary tree."""
        return self._workdir / self.repo.rel if self.repo.rel else self._workdir

    # -- the tree on disk -------------------------------------------------------

    def _listing(self, sha: str) -> dict[str, TreeEntry]:
        """The files to write for ``sha``: the full listing for the first commit, then the
        previous commit's listing updated with ``git diff-tree`` (only what changed)."""
        if self._current_sha is None:
            tree = self.repo.tree(sha)
            self._links = {p: e.sha for p, e in tree.items() if e.kind == "commit"}
            return {p: e for p, e in tree.items() if e.kind == "blob" and safe_parts(p)}
        new = dict(self._current)
        for path, entry in self.repo.changes(self._current_sha, sha).items():
            self._links.pop(path, None)
            if entry is not None and entry.kind == "commit":
                self._links[path] = entry.sha  # a submodule: its files are not in these objects
            if entry is not None and entry.kind == "blob" and safe_parts(path):
                new[path] = entry
            else:
                new.pop(path, None)
        return new

    def _write_tree(self, sha: str) -> dict[str, TreeEntry]:
        """Make the temporary directory hold exactly the tree of ``sha`` (changed paths only);
        when git cannot give it (a missing object), the directory is emptied and the next
        commit is written whole, so a failure never leaves a mix of two trees."""
        try:
            return self._update_tree(sha)
        except BaseException:
            self._current, self._current_sha = {}, None
            for entry in list(self._workdir.iterdir()):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        entry.unlink()
            self._close_readers()  # their answers may be out of step after a failed read
            raise

    def _update_tree(self, sha: str) -> dict[str, TreeEntry]:
        new = self._listing(sha)
        if self.nested_at is not None:
            new = self._with_nested(sha, new)
        old = self._current
        self._current_sha = None  # until the directory holds ``new``
        gone = [p for p in old if p not in new or old[p] != new[p]]
        for path in sorted(gone, reverse=True):
            target = self._workdir / path
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            parent = target.parent
            while parent != self._workdir:
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent
        if self._blobs is None:
            self._blobs = BlobReader(self.repo.toplevel)
        keep = MAX_WRITTEN_BLOB
        for path in sorted(p for p in new if p not in old or old[p] != new[p]):
            entry = new[path]
            target = self._workdir / path
            if not _make_parents(self._workdir, path):
                continue  # a parent that is a symlink of the commit: never created or written through
            owner = self._owner.get(path)
            reader = self._blobs if owner is None else self._nested_reader(owner)
            data = reader.read(entry.sha, keep)
            if entry.mode == "120000":
                os.symlink(os.fsdecode(data), target)
                continue
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        if not self.repo.is_file:
            self.root.mkdir(parents=True, exist_ok=True)
        self._current = new
        self._current_sha = sha
        return new

    def _nested_reader(self, toplevel: Path) -> BlobReader:
        reader = self._nested_blobs.get(toplevel)
        if reader is None:
            reader = self._nested_blobs[toplevel] = BlobReader(toplevel)
        return reader

    # -- repositories no commit records -------------------------------------------

    def _find_nested(self) -> list[_Nested]:
        """The repositories a scan of the work tree enters: those the outer ``.gitignore``
        lists, untracked ones and those inside them, and the submodules checked out."""
        from cs_audit.extract.discover import discover_tree
        from cs_audit.git.repo import GitError

        if self.repo.bare or self.repo.is_file:
            return []
        top = self.repo.toplevel / self.repo.rel if self.repo.rel else self.repo.toplevel
        found = discover_tree(top, tuple(self.overrides.get("exclude", ())))
        pinned = [r.path + "/" for r in found.repos if r.kind == "submodule"]
        out = []
        for r in found.repos:
            if any(r.path.startswith(p) for p in pinned):
                continue  # a repository inside a submodule goes with the submodule
            try:
                out.append(_Nested(r.path, GitRepo.open(top / r.path), pinned=r.kind == "submodule"))
            except GitError:
                continue
        return out

    def _with_nested(self, sha: str, listing: dict[str, TreeEntry]) -> dict[str, TreeEntry]:
        """``listing`` with the files of each nested repository at the commit ``nested_at``
        picks for outer commit ``sha`` in place of whatever the outer tree has there."""
        from cs_audit.git.repo import GitError

        if self._nested is None:
            self._nested = self._find_nested()
        if not self._nested:
            return listing
        when = self.repo.committed_at(sha)
        prefixes = tuple(f"{self.repo.base}{n.path}/" for n in self._nested)
        out = {p: e for p, e in listing.items() if not p.startswith(prefixes)}
        self._owner = {}
        for n, prefix in zip(self._nested, prefixes):
            try:
                if n.pinned:
                    chosen = self._pinned_commit(n)
                else:
                    chosen = n.repo.last_commit_by(when)
                if chosen != n.sha or not (n.files or n.links):
                    n.sha, n.files, n.links = chosen, {}, {}
                    if chosen is not None:
                        tree = n.repo.tree(chosen)
                        n.files = {prefix + p: e for p, e in tree.items() if e.kind == "blob" and safe_parts(p)}
                        n.links = {p: e.sha for p, e in tree.items() if e.kind == "commit"}
                if n.pinned:
                    n.note = "" if chosen is None else f"submodule: audited at the commit this commit pins ({chosen[:SHORT_SHA]})"
                elif chosen is None:
                    n.note = (f"repository of its own, no commit of {self.repo.toplevel.name} records it: left out, "
                              f"its HEAD's line has no commit made by {_day(when)}")
                else:
                    info = n.repo.commit_info(chosen)
                    n.note = (f"repository of its own, no commit of {self.repo.toplevel.name} records it: audited at "
                              f"{info.short} ({info.date}, '{info.subject[:60]}'), the last commit of its HEAD's "
                              f"line made by this commit's date")
            except GitError as exc:
                n.sha, n.files, n.links = None, {}, {}
                n.note = f"repository of its own, no commit of the outer one records it: left out, its history cannot be read ({exc})"
            for p, e in n.files.items():
                out[p] = e
                self._owner[p] = n.repo.toplevel
        return out

    def _pinned_commit(self, n: _Nested) -> str | None:
        """The commit the outer commit written pins submodule ``n`` at, when its repository
        has it (else None: the submodule stays an ``errors`` entry, as without a checkout)."""
        from cs_audit.git.repo import GitError

        pinned = self._links.get(f"{self.repo.base}{n.path}")
        if pinned is None:
            return None
        try:
            return n.repo.verify(pinned)
        except GitError:
            return None

    # -- audits -----------------------------------------------------------------

    def config(self) -> AuditConfig:
        """The configuration of the commit last written (raises ``ConfigError``)."""
        root_name = Path(self.repo.rel).name if self.repo.rel else Path(self.display_root).resolve().name
        return replace(load_config(str(self.root), **self.overrides), root_name=root_name or None)

    def audit(self, sha: str, rs: RuleSet | None = None, progress: api.Progress | None = None) -> AuditResult:
        """The audit of commit ``sha`` as ``cs-audit scan`` would report a checkout of it.

        ``rs`` is the unprepared rule set (default: the shipped one); the commit's project
        configuration is layered on it, and the result kept in ``last_rs`` for rendering.
        Raises ``ConfigError`` when the commit's project configuration is malformed.
        """
        self._write_tree(sha)
        config = self.config()
        if rs is None:
            if self._shipped_rs is None:
                self._shipped_rs = load_ruleset()  # parsed once, not per commit
            rs = self._shipped_rs
        base_rs = rs
        self.last_rs = api.prepare_ruleset(config, base_rs)
        memo = self._memo
        before = (memo.reused, memo.joins_reused) if memo is not None else (0, 0)
        result = api.run_audit(config, base_rs, progress, memo=memo, origins=lambda: self._origins(sha, config))
        # what the scan itself says it did: the memo counts none of a result the disk cache
        # served whole, and counts a file the disk cache served as computed
        done = result.stats
        parsed = len(done.analysed) if done is not None else result.files_scanned
        reused = memo.reused - before[0] if memo is not None else 0
        self.stats.analysed += parsed
        self.stats.reused += reused
        if done is not None:
            self.stats.cached += max(done.files - parsed - reused, 0)
            self.stats.stored += done.result == "stored"
        if memo is not None:
            self.stats.joins_reused += memo.joins_reused - before[1]
        self.stats.commits += 1
        result = self._dated(sha, config, result)
        nested = self._nested or []
        return replace(result, root=self.display_root, commit=sha, history_note=None,
                       repositories=((".", sha), *((n.path, n.sha) for n in nested if n.sha is not None or not n.pinned)),
                       sub_repositories=tuple((n.path, n.note) for n in nested if n.note),
                       errors=tuple(sorted((*result.errors, *self._gitlinks()), key=lambda e: (e.path, e.kind, e.message))))

    def _origins(self, sha: str, config: AuditConfig) -> Origins:
        """Whose each line of the tree written for ``sha`` is: the upstream each repository
        names or shows at the commit written of it (``cs_audit.git.upstream.past_origins``)."""
        from cs_audit.git.upstream import past_origins

        commits = {".": (self.repo, sha), **{n.path: (n.repo, n.sha) for n in self._nested or [] if n.sha is not None}}
        return past_origins(self.root, commits, config.upstream, api.upstream_cache(config))

    def _dated(self, sha: str, config: AuditConfig, result: AuditResult) -> AuditResult:
        """The switches' ``added_in`` at commit ``sha``: the first commit of its history whose
        code reads each (the history pass; a commit after one already dated reads only the
        commits since).  No blame: there is no work tree of that commit to blame."""
        from cs_audit.extract.reads import names_read
        from cs_audit.git.introduced import FirstReads, PassError
        from cs_audit.incremental import cache

        if not result.switches:
            return result
        where = cache.blame_cache_dir(config.cache, config.cache_dir)
        cache_dir = Path(where) / "v1" if where else None
        finder = FirstReads(self.repo.toplevel, sha, self.repo.base.rstrip("/"), names_read, cache_dir=cache_dir)
        try:
            answers = finder.answers(s.name for s in result.switches)
            # a switch a nested repository reads: the oldest first read among the histories
            for n in self._nested or []:
                if n.sha is None:
                    continue
                inner = FirstReads(n.repo.toplevel, n.sha, "", names_read, cache_dir=cache_dir)
                for name, a in inner.answers(s.name for s in result.switches).items():
                    known = answers.get(name)
                    if a is not None and (known is None or a.ctime < known.ctime):
                        answers[name] = a
        except PassError as exc:
            return replace(result, switches=tuple(replace(s, added_in=None, added_in_note=f"history skipped: {exc}")
                                                  for s in result.switches))
        switches = []
        for s in result.switches:
            a = answers.get(s.name)
            info = BlameInfo(a.sha[:SHORT_SHA], _day(a.ctime), a.subject) if a is not None else None
            switches.append(replace(s, added_in=info, added_in_note=None if info else "no read of it in the committed history"))
        return replace(result, switches=tuple(switches))

    def _gitlinks(self) -> list[FileError]:
        """A submodule of the commit written: said, as its files are in another repository."""
        written = {n.path for n in self._nested or [] if n.pinned and n.sha is not None}
        links = [(path[len(self.repo.base):], sha) for path, sha in sorted(self._links.items())
                 if path.startswith(self.repo.base) and path[len(self.repo.base):] not in written]
        links += [(f"{n.path}/{path}", sha) for n in self._nested or [] for path, sha in sorted(n.links.items())]
        return [FileError(display_path(path), "submodule",
                          f"submodule pinned at {sha[:SHORT_SHA]}: a past commit is audited from this repository's "
                          "objects, the submodule's files are not")
                for path, sha in links]


def _day(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d")


def _make_parents(workdir: Path, path: str) -> bool:
    """Create the directories of ``path`` under ``workdir`` one at a time, never through a
    symlink (a commit may hold ``d -> /elsewhere`` and ``d/sub/x.py``): False when one of
    them is a link or no directory, and nothing is created from there on."""
    current = workdir
    for part in path.split("/")[:-1]:
        current = current / part
        if current.is_symlink():
            return False
        if not current.exists():
            current.mkdir()
        elif not current.is_dir():
            return False
    return True
