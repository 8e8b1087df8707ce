"""Read-only access to a git repository: every git command cs-audit runs goes through
``cs_audit.git.runner``; paths follow ``--``, and every revision is verified with
``git rev-parse --verify REV^{commit}`` before use.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cs_audit.git import runner
from cs_audit.git.runner import GitError

SHORT_SHA = 9
UNSHALLOW_HINT = (
    "if this is a shallow clone (actions/checkout fetches one commit by default), fetch the "
    "history first: `git fetch --unshallow` (or `fetch-depth: 0` in actions/checkout)"
)

_FULL_SHA = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class CommitInfo:
    sha: str
    date: str  # YYYY-MM-DD, committer date in UTC
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:SHORT_SHA]


@dataclass(frozen=True, slots=True)
class TreeEntry:
    mode: str
    kind: str  # blob | commit (submodule) | tree
    sha: str


def _utc_day(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d")


class GitRepo:
    """A git work tree holding a scanned path; read-only queries only.

    ``rel`` is the scanned path relative to the top level (POSIX, ``""`` for the top);
    ``base`` is the directory the findings' paths are relative to (``rel`` itself, or
    its parent when ``rel`` names a file), with a trailing ``/`` unless empty.
    """

    def __init__(self, toplevel: Path, rel: str, is_file: bool) -> None:
        self.toplevel = toplevel
        self.rel = rel
        self.is_file = is_file
        parent = rel.rsplit("/", 1)[0] if is_file and "/" in rel else ("" if is_file else rel)
        self.base = f"{parent}/" if parent else ""
        #: a bare repository: commits can be audited, there is no work tree to check
        self.bare = False

    @classmethod
    def open(cls, path: Path) -> GitRepo:
        """The repository holding ``path``; :class:`GitError` outside git."""
        path = Path(path)
        if not path.exists():
            raise GitError(f"{path}: no such file or directory")
        is_file = not path.is_dir()
        where = path.parent if is_file else path
        try:
            out = runner.output(where, ["rev-parse", "--show-toplevel", "--show-prefix"])
        except GitError as exc:
            bare = runner.output(where, ["rev-parse", "--is-bare-repository"], check=False).strip() == b"true"
            if bare and not is_file:
                repo = cls(Path(path), "", False)  # a bare repository (a mirror): history only
                repo.bare = True
                return repo
            raise GitError(f"{path}: not inside a git work tree ({exc})") from None
        lines = out.decode("utf-8", "surrogateescape").split("\n")
        if len(lines) < 2 or not lines[0]:
            raise GitError(f"{path}: not inside a git work tree")
        toplevel, prefix = Path(lines[0]), lines[1].rstrip("/")
        if is_file:
            prefix = f"{prefix}/{path.name}" if prefix else path.name
        return cls(toplevel, prefix, is_file)

    # -- plumbing -------------------------------------------------------------

    def git(self, *args: str, check: bool = True) -> bytes:
        return runner.output(self.toplevel, list(args), check=check)

    def pathspec(self) -> list[str]:
        return ["--", self.rel] if self.rel else ["--"]

    # -- queries --------------------------------------------------------------

    def verify(self, rev: str) -> str:
        """Full sha of commit ``rev``; :class:`GitError` (with a hint) when unreachable."""
        if not rev or rev.startswith("-") or "\0" in rev or "\n" in rev:
            raise GitError(f"not a revision: {rev!r}")
        out = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
        sha = out.decode("ascii", "replace").strip()
        if not _FULL_SHA.match(sha):
            raise self._unreachable(rev)
        return sha

    def _unreachable(self, rev: str) -> GitError:
        """Why ``rev`` names no commit: a name git does not know (with the refs spelled
        like it) is a typo or an ancestor past the root; only a shallow clone's missing
        history warrants the unshallow hint."""
        shallow = self.is_shallow()
        named = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", rev, check=False).strip()
        if named:
            kind = self.git("cat-file", "-t", named.decode("ascii", "replace"), check=False).strip().decode("ascii", "replace")
            if kind:  # `HEAD:file`, a tag of a tree: there, but not a commit
                return GitError(f"revision {rev!r} names a {kind}, not a commit")
            # a sha git cannot find: history this clone has not fetched
            note = " (this is a shallow clone)" if shallow else ""
            return GitError(f"revision {rev!r} is not a commit reachable in {self.toplevel}{note}", UNSHALLOW_HINT)
        cut = min((i for i in (rev.find("~"), rev.find("^")) if i >= 0), default=len(rev))
        name, suffix = rev[:cut], rev[cut:]  # `main~2^` -> `main`, `~2^`
        if suffix and self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}", check=False).strip():
            why = f"; {name} has no such ancestor"
        else:
            close = difflib.get_close_matches(name, self.ref_names(), n=3)
            why = f"; did you mean {' or '.join(c + suffix for c in close)}?" if close else ""
        if shallow:
            return GitError(f"unknown revision {rev!r} in {self.toplevel}{why} (this is a shallow clone)", UNSHALLOW_HINT)
        return GitError(f"unknown revision {rev!r}{why}")

    def ref_names(self) -> list[str]:
        """The short names of the branches, tags and remote-tracking branches."""
        out = self.git("for-each-ref", "--format=%(refname:short)", "refs/heads", "refs/tags", "refs/remotes", check=False)
        return [name for name in out.decode("utf-8", "replace").splitlines() if name]

    def is_shallow(self) -> bool:
        out = self.git("rev-parse", "--is-shallow-repository", check=False)
        return out.strip() == b"true"

    def head(self) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).decode("ascii", "replace").strip()
        return out if _FULL_SHA.match(out) else None

    def commit_info(self, sha: str) -> CommitInfo:
        # not `git show -s`: it reads the commit's tree, and fails when that object is missing
        out = self.git("log", "-1", "--no-walk", "--no-show-signature", "--format=%H%x00%ct%x00%s", sha, "--")
        fields = out.decode("utf-8", "replace").rstrip("\n").split("\0", 2)
        if len(fields) != 3 or not fields[1].isdigit():
            raise GitError(f"git log: cannot read commit {sha}")
        full, ctime, subject = fields
        return CommitInfo(full, _utc_day(int(ctime)), subject)

    def committed_at(self, sha: str) -> int:
        """The committer time of commit ``sha`` (seconds since the epoch)."""
        out = self.git("log", "-1", "--no-walk", "--no-show-signature", "--format=%ct", sha, "--").strip()
        if not out.isdigit():
            raise GitError(f"git log: cannot read the date of commit {sha}")
        return int(out)

    def last_commit_by(self, when: int) -> str | None:
        """The last commit of HEAD's first-parent line committed at or before ``when`` (seconds
        since the epoch); None when it has none (or no HEAD)."""
        if self.head() is None:
            return None
        out = self.git("rev-list", "-1", "--first-parent", f"--before=@{when}", "HEAD", "--").decode("ascii", "replace").strip()
        return out if _FULL_SHA.match(out) else None

    def rev_range(self, spec: str) -> list[str]:
        """Commits of ``A..B`` oldest first (first-parent line of B, excluding A's history)."""
        if spec.count("..") != 1 or "..." in spec:
            raise GitError(f"--range wants A..B, got {spec!r}")
        left, right = spec.split("..")
        a = self.verify(left or "HEAD")
        b = self.verify(right or "HEAD")
        out = self.git("rev-list", "--reverse", "--first-parent", b, f"^{a}", "--")
        return out.decode("ascii").split()

    def tree(self, sha: str) -> dict[str, TreeEntry]:
        """Repo-relative path -> entry, for every file under the scanned path at ``sha``."""
        try:
            out = self.git("ls-tree", "-r", "-z", "--full-tree", sha, *self.pathspec())
        except GitError as exc:
            raise GitError(f"the tree of commit {sha[:SHORT_SHA]} cannot be read (a missing object?): {exc}") from None
        entries: dict[str, TreeEntry] = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, name = record.partition(b"\t")
            parts = meta.split()
            if len(parts) != 3:
                continue
            mode, kind, obj = (p.decode("ascii") for p in parts)
            entries[os.fsdecode(name)] = TreeEntry(mode, kind, obj)
        return entries

    def changes(self, old: str, new: str) -> dict[str, TreeEntry | None]:
        """Repo-relative path -> its entry at ``new`` (None: not there), for every file under
        the scanned path whose entry differs between commits ``old`` and ``new``."""
        out = self.git("diff-tree", "-r", "-z", "--no-renames", old, new, *self.pathspec())
        fields = out.split(b"\0")
        changed: dict[str, TreeEntry | None] = {}
        i = 0
        while i + 1 < len(fields):
            meta = fields[i]
            if not meta.startswith(b":"):
                i += 1
                continue
            parts = meta[1:].split()
            name = os.fsdecode(fields[i + 1])
            i += 2
            if len(parts) != 5:
                raise GitError(f"git diff-tree: cannot read {meta!r}")
            mode, sha = parts[1].decode("ascii"), parts[3].decode("ascii")
            if parts[4][:1] == b"D" or mode == "000000":
                changed[name] = None
            else:
                kind = {"160000": "commit", "040000": "tree"}.get(mode, "blob")
                changed[name] = TreeEntry(mode, kind, sha)
        return changed


class BlobReader:
    """One ``git cat-file --batch`` process for the lifetime of a :class:`TreeAuditor`."""

    def __init__(self, toplevel: Path) -> None:
        self._proc = runner.start(toplevel, ["cat-file", "--batch"])

    def read(self, sha: str, keep: int) -> bytes:
        """The first ``keep`` bytes of blob ``sha`` (the rest is read and dropped)."""
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(sha.encode("ascii") + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) != 3:
            raise GitError(f"git cat-file: cannot read object {sha}")
        size = int(header[2])
        data = proc.stdout.read(min(size, keep))
        left = size - len(data)
        while left > 0:
            chunk = proc.stdout.read(min(left, 1 << 20))
            if not chunk:
                raise GitError(f"git cat-file: object {sha} cut short")
            left -= len(chunk)
        proc.stdout.read(1)  # the newline after the contents
        return data

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self._proc.stdin is not None
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def safe_parts(path: str) -> list[str] | None:
    """Components of a tree path, or None when writing it could leave the directory."""
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", "..") or "\0" in part or part.casefold() == ".git":
            return None
    return parts
