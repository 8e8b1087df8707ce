"""Reading a source file for a fix and writing it back: the bytes as they were (encoding,
BOM, line endings, file mode) except where a transform changed them, written atomically,
and never over a file that changed since it was read."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass

import libcst as cst


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


class Stale(Exception):
    """The file changed since the scan read it."""


def stamp_of(abspath: str) -> tuple[int, int]:
    st = os.stat(abspath)
    return st.st_size, st.st_mtime_ns


def read_source(path: str, abspath: str) -> Source:
    with open(abspath, "rb") as handle:
        before = stamp_of(abspath)
        data = handle.read()
    return Source(path, abspath, data, before)


def parse(source: Source) -> cst.Module:
    """The module from its bytes: libcst reads the coding cookie and the BOM, and keeps each
    line's own ending; ``Module.bytes`` gives them back."""
    return cst.parse_module(source.data)


def write_atomic(source: Source, data: bytes) -> None:
    """Replace the file with ``data`` in one rename, keeping its mode; ``Stale`` if the file
    is no longer the one that was read."""
    if stamp_of(source.abspath) != source.stamp:
        raise Stale(source.path)
    with open(source.abspath, "rb") as handle:
        if handle.read() != source.data:
            raise Stale(source.path)
    mode = stat.S_IMODE(os.stat(source.abspath).st_mode)
    directory = os.path.dirname(source.abspath)
    fd, tmp = tempfile.mkstemp(prefix=".cs-audit-fix-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, source.abspath)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
