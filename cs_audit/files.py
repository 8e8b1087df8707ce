"""Writing the files cs-audit owns: reports, cache entries, blame records.  Each is written
whole or not at all (a temp file in the target's directory, then a rename), and a store
of such files keeps only its newest entries."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

#: when this run started (the command line imports this module as it starts)
STARTED = time.time()
#: how much older than the run a temp file must be to count as a killed run's: a run that
#: started earlier and is still writing one keeps it
STALE_AFTER_S = 600
#: the temp file ``write_atomically`` makes next to its target: a dot, the target's name cut
#: short, mkstemp's random part, ``.tmp``
ATOMIC_TEMP = re.compile(r"\.[^/]{1,16}\.[a-z0-9_]{8}\.tmp")
#: the temp file ``cs_audit.fix.source.write_atomic`` makes next to the file it rewrites
FIX_TEMP = re.compile(r"\.cs-audit-fix-[a-z0-9_]{8}")


def write_atomically(target: str | Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``target`` through a temp file and a rename, so a reader never sees
    half of it; ``mode``: the file's permission bits (default: the temp file's 0600).
    Raises ``OSError``; the temp file is gone either way."""
    directory = os.path.dirname(os.fspath(target)) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(os.fspath(target))[:16]}.", suffix=".tmp")
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def try_write_atomically(target: str | Path, data: bytes) -> bool:
    """``write_atomically`` for a store that can do without the file: False when it failed."""
    try:
        write_atomically(target, data)
    except OSError:
        return False
    return True


def keep_newest(directory: str | Path, keep: int, select: Callable[[os.DirEntry[str]], bool],
                spare: str | Path | None = None) -> None:
    """Delete all but the ``keep`` most recently modified entries of ``directory`` that
    ``select`` picks (a directory with what it holds), never ``spare``."""
    try:
        with os.scandir(directory) as listing:
            entries = sorted((e for e in listing if select(e)), key=lambda e: e.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in entries[keep:]:
        if spare is not None and os.path.abspath(old.path) == os.path.abspath(spare):
            continue
        with contextlib.suppress(OSError):
            if old.is_dir(follow_symlinks=False):
                shutil.rmtree(old.path, ignore_errors=True)
            else:
                os.unlink(old.path)


def remove_stale_temps(directory: str | Path, name: re.Pattern[str], below: bool = False) -> None:
    """Delete the temp files that killed runs left in ``directory`` (and in every folder
    below it, with ``below``; links are not followed): the regular files whose whole name
    ``name`` matches, owned by this user, last written ``STALE_AFTER_S`` before this run
    started.  Whatever cannot be listed or deleted is left."""
    cutoff = STARTED - STALE_AFTER_S
    uid = os.geteuid() if hasattr(os, "geteuid") else None  # whose files this process makes
    folders = [os.fspath(directory)]
    while folders:
        try:
            with os.scandir(folders.pop()) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            with contextlib.suppress(OSError):
                if below and entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif name.fullmatch(entry.name):
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode) and uid in (None, info.st_uid) and info.st_mtime < cutoff:
                        os.unlink(entry.path)


class Refused(OSError):
    """A file cs-audit will not read: a symlink, or not a regular file."""


def read_regular(path: str | Path, max_bytes: int) -> bytes:
    """The first ``max_bytes`` bytes (all for -1) of ``path``, a regular file reached without following
    a symlink (a FIFO would block a plain open, ``/dev/zero`` would never end).  Raises
    ``Refused`` for a symlink or any other kind of file, ``OSError`` when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if os.path.islink(path):
            raise Refused("a symlink: not followed") from None
        raise OSError(f"cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise Refused("not a regular file")
        try:
            return handle.read(max_bytes)
        except OSError as exc:
            raise OSError(f"cannot read: {exc.strerror or exc}") from None


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def text_lines(path: str | Path, max_bytes: int) -> list[str]:
    """The lines of a text file as an editor numbers them (CRLF, LF or a lone CR ends one;
    a form feed does not), undecodable bytes replaced; ``read_regular``'s errors."""
    return _LINE_BREAK.split(read_regular(path, max_bytes).decode("utf-8", errors="replace"))


def sealed_json(value: object) -> bytes:
    """``value`` as JSON after a line holding its BLAKE2b digest: a stored entry whose bits
    flipped or were torn reads as missing (``opened_json``), not as other data."""
    body = json.dumps(value, sort_keys=True).encode()
    return hashlib.blake2b(body, digest_size=16).hexdigest().encode() + b"\n" + body


def opened_json(data: bytes) -> object:
    """The value ``sealed_json`` gave ``data``; None when the digest does not match."""
    digest, _, body = data.partition(b"\n")
    if hashlib.blake2b(body, digest_size=16).hexdigest().encode() != digest:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None
