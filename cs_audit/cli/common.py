"""The typer application the commands register on, and what every command shares:
one-line errors, status lines, output files."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import typer

from cs_audit import files

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Audit env-var debug switches, trace helpers, dumps and log lines.")
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


def write_atomically(path: Path, text: str) -> None:
    """Write via a temp file + rename, so a reader never sees half a report; a target
    that exists and is not a regular file (`/dev/null`, a FIFO) is written in place."""
    if path.exists() and not path.is_file():
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        return
    # the mode open() would have made, not mkstemp's 0600
    files.write_atomically(path, text.encode("utf-8"), mode=0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_output(path: Path, text: str) -> None:
    """Write an output file atomically, except onto a device or pipe (``-o /dev/null``,
    ``-o /dev/stdout``), which an atomic rename would replace with a regular file."""
    write_atomically(path, text)


def emit(text: str, output: Path | None) -> None:
    if output is not None:
        write_output(output, text)
    else:
        sys.stdout.write(text)
