"""The work tree compared with a commit without git reading the work tree or the index's
stat data: ``git diff <rev>`` and ``git status`` refresh that stat data when files are
stat-dirty, and ``git diff`` writes the refreshed index back even with
``GIT_OPTIONAL_LOCKS=0``; they would also read every file through git's conversions.

Here cs-audit reads the files itself (regular files only, never through a symlink) and
hashes them as git would hash them with ``--no-filters``.  For a patch, the work tree is
written as a tree into a private temporary object directory (loose objects written here,
the repository's objects an alternate, so git writes nothing and touches no file of the
repository) and ``git diff-tree`` compares it with the commit: the same patch as
``git diff <rev>``, renames included.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cs_audit.files import read_regular
from cs_audit.git import runner
from cs_audit.git.runner import GitError

#: a work-tree file larger than this is compared by its first bytes only (no scan reads more)
MAX_HASHED_BYTES = 256 << 20


def object_id(kind: bytes, data: bytes, algorithm: str = "sha1") -> str:
    """The id git gives an object of ``kind`` (``blob``, ``tree``) holding ``data``."""
    h = hashlib.new(algorithm)
    h.update(kind + b" %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def algorithm_of(sha: str) -> str:
    return "sha256" if len(sha) == 64 else "sha1"


def same_blob(data: bytes, sha: str) -> bool:
    """Whether work-tree bytes ``data`` are blob ``sha``, as they are or with CRLF line ends
    made LF (a checkout with ``core.autocrlf``: the same lines, so the same line numbers)."""
    algorithm = algorithm_of(sha)
    if object_id(b"blob", data, algorithm) == sha:
        return True
    return b"\r\n" in data and object_id(b"blob", data.replace(b"\r\n", b"\n"), algorithm) == sha


class WorkTreeFiles:
    """Reads tracked paths from a work tree as git would see them, never following a
    symlink on the way: a path below a symlinked directory is not there (git says so too)."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self._dirs: dict[str, bool] = {"": True}

    def _dir_ok(self, directory: str) -> bool:
        ok = self._dirs.get(directory)
        if ok is None:
            parent = directory.rpartition("/")[0]
            try:
                ok = self._dir_ok(parent) and stat.S_ISDIR(os.lstat(self.top / directory).st_mode)
            except OSError:
                ok = False
            self._dirs[directory] = ok
        return ok

    def read(self, path: str) -> tuple[str, bytes] | None:
        """``(kind, bytes)`` of repo-relative ``path``: ``("file", contents)`` for a regular
        file (``"exec"`` when executable), ``("link", target)`` for a symlink; None when it
        is missing, unreadable or another kind of file."""
        if not self._dir_ok(path.rpartition("/")[0]):
            return None
        full = self.top / path
        try:
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                return "link", os.fsencode(os.readlink(full))
            if not stat.S_ISREG(st.st_mode):
                return None
            return ("exec" if st.st_mode & 0o100 else "file"), read_regular(full, MAX_HASHED_BYTES)
        except OSError:
            return None

    def matches(self, path: str, sha: str) -> bool:
        """Whether the work-tree file at ``path`` holds blob ``sha`` (see :func:`same_blob`)."""
        got = self.read(path)
        return got is not None and got[0] != "link" and same_blob(got[1], sha)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    mode: str
    sha: str
    #: git takes the entry as it is recorded (assume-unchanged, skip-worktree, a submodule)
    as_recorded: bool


def index_entries(top: Path, pathspec: Sequence[str]) -> dict[str, IndexEntry]:
    """Repo-relative path -> its index entry (stage 0, else the first stage listed), read
    with ``git ls-files``, which never writes the index."""
    out = runner.output(top, ["ls-files", "-z", "--stage", "-v", *pathspec])
    entries: dict[str, IndexEntry] = {}
    for record in out.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        parts = meta.split()
        if len(parts) != 4:
            continue
        tag, mode, sha = parts[0].decode("ascii", "replace"), parts[1].decode("ascii"), parts[2].decode("ascii")
        path = os.fsdecode(name)
        if path in entries and parts[3] != b"0":
            continue
        # a lowercase tag: assume-unchanged; S: skip-worktree
        entries[path] = IndexEntry(mode, sha, tag.islower() or tag == "S" or mode == "160000")
    return entries


class _LooseObjects:
    """A temporary object directory the objects of the work-tree tree are written into."""

    def __init__(self, algorithm: str) -> None:
        self.algorithm = algorithm
        self.path = tempfile.mkdtemp(prefix="cs-audit-diff-")

    def write(self, kind: bytes, data: bytes) -> str:
        sha = object_id(kind, data, self.algorithm)
        directory = os.path.join(self.path, sha[:2])
        os.makedirs(directory, exist_ok=True)
        target = os.path.join(directory, sha[2:])
        if not os.path.exists(target):
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            with os.fdopen(fd, "wb") as handle:
                handle.write(zlib.compress(kind + b" %d\0" % len(data) + data, 1))
        return sha

    def tree(self, files: dict[str, tuple[str, str]]) -> str:
        """Write the trees holding ``files`` (path -> (mode, sha)); the top tree's sha."""
        root: dict[bytes, object] = {}
        for path, entry in files.items():
            node = root
            *dirs, name = os.fsencode(path).split(b"/")
            for part in dirs:
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    break  # a file where a directory should be: git cannot hold both either
                node = child
            else:
                node.setdefault(name, entry)
        return self._write_tree(root)

    def _write_tree(self, node: dict[bytes, object]) -> str:
        rows: list[tuple[bytes, bytes]] = []
        for name, value in node.items():
            if isinstance(value, dict):
                mode, sha, key = "40000", self._write_tree(value), name + b"/"
            else:
                (mode, sha), key = value, name  # type: ignore[misc]
            rows.append((key, mode.encode("ascii") + b" " + name + b"\0" + bytes.fromhex(sha)))
        rows.sort()  # git orders a tree's entries by name, a directory's name taken with a trailing "/"
        return self.write(b"tree", b"".join(row for _, row in rows))

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _quoted(path: str) -> str:
    """``path`` as one entry of ``GIT_ALTERNATE_OBJECT_DIRECTORIES`` (C-quoted, so a ``:``
    or a newline in it stays part of it)."""
    out = []
    for byte in os.fsencode(path):
        ch = chr(byte)
        out.append(f"\\{ch}" if ch in '"\\' else ch if 0x20 <= byte < 0x7F else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def worktree_patch(top: Path, sha: str, pathspec: Sequence[str], diff_args: Sequence[str]) -> bytes:
    """``git diff <diff_args> <sha> <pathspec>`` (the commit against the work tree), without
    git reading the work tree or writing anything: ``git diff-tree`` of the commit and the
    work tree written as a tree (paths of the index, contents from the disk)."""
    objects = Path(os.fsdecode(runner.output(top, ["rev-parse", "--git-path", "objects"]).rstrip(b"\n")))
    objects = objects if objects.is_absolute() else top / objects
    files = WorkTreeFiles(top)
    store = _LooseObjects(algorithm_of(sha))
    try:
        listing: dict[str, tuple[str, str]] = {}
        for path, entry in index_entries(top, pathspec).items():
            if entry.as_recorded:
                listing[path] = (entry.mode, entry.sha)
                continue
            got = files.read(path)
            if got is None:
                continue  # deleted in the work tree
            kind, data = got
            if kind == "link":
                listing[path] = ("120000", entry.sha if entry.mode == "120000" and same_blob(data, entry.sha)
                                 else store.write(b"blob", data))
                continue
            mode = "100755" if kind == "exec" else "100644"
            # the index's blob (in the repository's objects) while the bytes are still its; an
            # empty file is written here, as an intent-to-add entry names a blob nobody wrote
            listing[path] = (mode, entry.sha if data and same_blob(data, entry.sha) else store.write(b"blob", data))
        tree = store.tree(listing)
        env = {"GIT_OBJECT_DIRECTORY": store.path, "GIT_ALTERNATE_OBJECT_DIRECTORIES": _quoted(str(objects.resolve()))}
        code, out, err = runner.run(top, ["diff-tree", *diff_args, sha, tree, *pathspec], env=env)
    except OSError as exc:
        raise GitError(f"cannot compare the work tree with {sha[:9]}: {exc.strerror or exc}") from None
    finally:
        store.close()
    if code == 127 and not out:
        raise GitError("git is not installed")
    if code != 0:
        message = err.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git diff-tree failed: {message[-1] if message else f'exit {code}'}")
    return out
