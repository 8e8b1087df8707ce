"""Reading a source file for a fix and writing it back: the bytes as they were (encoding,
BOM, line endings) except where a transform changed them, written atomically with the
file's owner, group and mode, never over a file that changed since it was read, and never
one the invoking user could not write itself."""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from dataclasses import dataclass

import libcst as cst

from cs_audit.files import read_regular


@dataclass(frozen=True)
class Source:
    path: str  # relative to the root, POSIX
    abspath: str
    data: bytes
    #: (size, mtime_ns) when read: a later stat that differs means the file changed
    stamp: tuple[int, int]

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def read_source(path: str, abspath: str) -> Source:
    """The file as it is now; ``files.Refused`` for a symlink (a rename would replace the link,
    not the file it names) or anything but a regular file."""
    before = os.stat(abspath, follow_symlinks=False)
    return Source(path, abspath, read_regular(abspath, -1), (before.st_size, before.st_mtime_ns))


def parse(source: Source) -> cst.Module:
    """The module from its bytes: libcst reads the coding cookie and the BOM, and keeps each
    line's own ending; ``Module.bytes`` gives them back."""
    return cst.parse_module(source.data)


class LeftAlone(Exception):
    """A file ``fix --write`` does not rewrite, with why in a few words."""


class Stale(LeftAlone):
    """The file changed since the scan read it."""

    def __init__(self) -> None:
        super().__init__("changed since the scan")


#: the prefix of the temp file a rewrite is prepared in, beside the file it replaces
TEMP_PREFIX = ".cs-audit-fix-"
_FOLDER_ONLY = getattr(os, "O_PATH", os.O_RDONLY)


def write_atomic(source: Source, data: bytes) -> None:
    """Replace the file with ``data`` in one rename, keeping its owner, group and mode.
    Raises ``Stale`` if the file is no longer the one that was read, ``LeftAlone`` if it is not
    one to replace (a symlink, hard links, not yours to write), ``OSError`` if writing failed;
    the temp file is removed on every way out."""
    # every step names the file from this one folder, which needs no read permission to hold
    folder = os.open(os.path.dirname(source.abspath), _FOLDER_ONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    name = os.path.basename(source.abspath)
    try:
        was = _unchanged(folder, name, source)
        why = _not_yours_to_write(folder, name, was) or _linked(was)
        if why:
            raise LeftAlone(why)
        temp = _prepared(folder, data, was)
        try:
            if not _same(os.stat(name, dir_fd=folder, follow_symlinks=False), was):
                raise Stale()
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            _remove(folder, temp)
            raise
    finally:
        os.close(folder)


def _unchanged(folder: int, name: str, source: Source) -> os.stat_result:
    """The file's status, when it is still the regular file that was read."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        if stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
            raise LeftAlone("a symlink: not followed") from None
        raise
    with open(fd, "rb") as handle:
        was = os.fstat(handle.fileno())
        if not stat.S_ISREG(was.st_mode):
            raise LeftAlone("not a regular file")
        if (was.st_size, was.st_mtime_ns) != source.stamp or handle.read() != source.data:
            raise Stale()
    return was


def _not_yours_to_write(folder: int, name: str, was: os.stat_result) -> str:
    """Why the invoking user may not change the file itself (whatever its folder allows), or "".
    Root may write another user's file, not one whose mode lets no one write it."""
    mode = stat.S_IMODE(was.st_mode)
    if not mode & 0o222:
        return f"read-only (mode {mode:04o})"
    # the kernel's own check (plain access, no flags): a C library may judge flagged checks
    # from the mode bits alone, which says yes to any uid 0
    if not os.access(name, os.W_OK, dir_fd=folder):
        return f"not writable by you (owner uid {was.st_uid}, mode {mode:04o})"
    return ""


def _linked(was: os.stat_result) -> str:
    """Why a file with other names is left alone, or "": a rename would give this name a new
    file and split the link, and a rewrite in place could not be atomic."""
    return f"has {was.st_nlink} hard links (a rename would split them)" if was.st_nlink > 1 else ""


def _prepared(folder: int, data: bytes, was: os.stat_result) -> str:
    """The name of a new file in ``folder`` holding ``data`` with the owner, group and mode of
    ``was``; ``LeftAlone`` when the user may not give it that owner or group."""
    temp = TEMP_PREFIX + secrets.token_hex(6)
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
    except OSError as exc:
        raise LeftAlone(f"cannot create a file in its folder: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            made = os.fstat(handle.fileno())
            if (made.st_uid, made.st_gid) != (was.st_uid, was.st_gid):
                try:
                    os.fchown(handle.fileno(), was.st_uid, was.st_gid)
                except PermissionError:
                    raise LeftAlone(f"owned by uid {was.st_uid} gid {was.st_gid}, which a rewrite by you "
                                    "could not keep") from None
            # after the owner: a change of owner clears the set-id bits
            os.fchmod(handle.fileno(), stat.S_IMODE(was.st_mode))
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        _remove(folder, temp)
        raise
    return temp


def _same(now: os.stat_result, was: os.stat_result) -> bool:
    return (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) == (was.st_dev, was.st_ino, was.st_size, was.st_mtime_ns)


def _remove(folder: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=folder)
    except OSError:
        pass
