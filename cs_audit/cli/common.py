"""The typer application the commands register on, and what every command shares:
one-line errors, status lines, output files."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import NoReturn

import typer

from cs_audit import files

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Audit env-var debug switches, trace helpers, dumps and log lines.")
#: what the scans of this process built, kept alive until it ends: set by ``main``, whose
#: process exits without freeing memory (None when the commands are called otherwise: tests)
KEPT: list[object] | None = None


def plain(text: object) -> str:
    """One line of terminal text: control and bidi characters escaped (``\\x0a``, ``\\u202e``)."""
    from cs_audit.render.check import plain as escape

    return escape(text)


def fail(message: str, hint: str | None = None, code: int = 2) -> NoReturn:
    """End the command with one plain line on stderr (never wrapped, whatever the width)."""
    sys.stderr.write(f"cs-audit: {plain(message)}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    sys.stderr.flush()
    raise typer.Exit(code)


def say(line: str) -> None:
    """One progress or status line on stderr (unwrapped, flushed: readable in CI logs)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _is_stdout(path: Path) -> bool:
    """Whether ``path`` names this process's standard output (``-o /dev/stdout``)."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError):
        return False


def write_output(path: Path, text: str) -> None:
    """Write an output file atomically (temp file and rename in its directory), so a reader
    never sees half a report.  A device or pipe (``-o /dev/null``, a FIFO) is written in
    place, and ``-o /dev/stdout`` goes to standard output; any other existing target that
    is no regular file, and every other symlink, is refused (a rename would replace the
    link, a write through it could land anywhere).  Failures end the command with one line."""
    try:
        if _is_stdout(path):
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        st = os.stat(path) if os.path.lexists(path) else None
        if path.is_symlink():
            if st is None or not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
                fail(f"{path}: refusing to write through a symlink (give the file it points to)")
        elif st is not None and not stat.S_ISREG(st.st_mode) and not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            fail(f"{path}: not a regular file" + (" (a directory)" if stat.S_ISDIR(st.st_mode) else ""))
        if st is not None and not stat.S_ISREG(st.st_mode):
            with open(path, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
            return
        # the mode open() would have made, not mkstemp's 0600
        files.write_atomically(path, text.encode("utf-8"), mode=0o666 & ~_umask())
    except OSError as exc:
        fail(f"{path}: cannot write: {exc.strerror or exc}")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def emit(text: str, output: Path | None) -> None:
    if output is not None:
        write_output(output, text)
    else:
        sys.stdout.write(text)
