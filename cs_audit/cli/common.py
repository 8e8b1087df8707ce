"""The typer application the commands register on, and what every command shares:
one-line errors, status lines, output files."""

from __future__ import annotations

import gc
import os
import stat
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from cs_audit import files

try:  # typer from 0.2x bundles its own click, whose exceptions are not click's
    from typer._click import exceptions as click
except ImportError:  # pragma: no cover - a typer that uses click itself
    from click import exceptions as click  # type: ignore[no-redef]


class PlainGroup(TyperGroup):
    """The command group, whose usage errors are one plain line (typer draws a box around
    them, wrapped at the terminal width) with exit code 2."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,  # type: ignore[override]
             complete_var: str | None = None, standalone_mode: bool = True, **kwargs: Any) -> Any:
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **kwargs)
        except click.NoArgsIsHelpError as exc:
            exc.show()
            code = 2
        except click.ClickException as exc:
            ctx = exc.ctx if isinstance(exc, click.UsageError) else None
            what = ctx.info_name if ctx is not None and ctx.parent is not None else "usage"
            see = f" (see '{plain(ctx.command_path)} --help')" if ctx is not None else ""
            sys.stderr.write(f"cs-audit: {plain(what)}: {plain(exc.format_message())}{see}\n")
            code = 2
        except typer.Abort:
            sys.stderr.write("cs-audit: interrupted\n")
            code = 130
        code = code if isinstance(code, int) else 0
        if not standalone_mode:
            return code
        sys.exit(code)


app = typer.Typer(cls=PlainGroup, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Audit env-var debug switches, trace helpers, dumps and log lines.")


def _show_version(value: bool) -> None:
    if value:
        from cs_audit import __version__

        typer.echo(f"cs-audit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,
                                          help="print the version and exit")) -> None:
    """Audit env-var debug switches, trace helpers, dumps and log lines."""
#: what the scans of this process built, kept alive until it ends: set by ``main``, whose
#: process exits without freeing memory (None when the commands are called otherwise: tests)
KEPT: list[object] | None = None


def plain(text: object) -> str:
    """One line of terminal text: control and bidi characters escaped (``\\x0a``, ``\\u202e``)."""
    from cs_audit.render.check import plain as escape

    return escape(text)


PROGRESS_MIN_FILES = 200


#: seconds between two progress lines when stderr is no terminal (a CI log)
PROGRESS_EVERY = 5.0


def run_with_progress(config, rs, quiet: bool, keep: bool = True, report=None):
    """``run_audit`` with progress on stderr: a bar on a terminal, a line every few seconds
    otherwise, nothing when ``quiet``.  ``keep``: the scan's objects are kept, not freed,
    for a process that ends soon after (``KEPT``).  ``report``: (render, render_id): the
    rendered ``api.Report`` instead of the audit (``api.audit_report``: stored when nothing changed)."""
    from cs_audit.api import audit_report, run_audit

    kept = KEPT if keep else None

    def audit(progress=None):
        if report is None:
            return run_audit(config, rs, progress, keep=kept)
        return audit_report(config, report[0], report[1], rs, progress, keep=kept)

    if kept is not None:
        # the process ends soon without freeing memory: the cyclic collector stays off from
        # here (``run_audit`` pauses it for the scan only), as switching it back on would have
        # its next collection traverse everything the scan kept (a noticeable part of a one-file run)
        gc.disable()
    if quiet:
        return audit()
    if not sys.stderr.isatty():
        with _ProgressLines() as lines:
            return audit(lines.files)
    # imported here: a run without a terminal (CI, scripts, benchmarks) never draws a bar
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("analysing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("files", total=None)

        def progress(done: int, total: int) -> None:
            if total >= PROGRESS_MIN_FILES:
                bar.update(task, completed=done, total=total)

        return audit(progress)


class _ProgressLines:
    """A plain line on stderr every ``PROGRESS_EVERY`` seconds while a scan runs (a CI log
    shows that it is alive, and where it is), from a thread: the scan reports files only."""

    def __init__(self) -> None:
        import threading

        self.started = time.monotonic()
        self.done = self.total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cs-audit-progress", daemon=True)

    def files(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def _line(self) -> str:
        secs = time.monotonic() - self.started
        if not self.total:
            return f"cs-audit: scanning ({secs:.0f}s)"
        if self.done < self.total:
            return f"cs-audit: analysing files: {self.done}/{self.total} done ({secs:.0f}s)"
        return f"cs-audit: joining and analysing {self.total} files ({secs:.0f}s)"

    def _run(self) -> None:
        while not self._stop.wait(PROGRESS_EVERY):
            say(self._line())

    def __enter__(self) -> _ProgressLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def plural(n: int, word: str) -> str:
    """``1 file``, ``2 files``."""
    from cs_audit.render.check import plural as counted

    return counted(n, word)


def fail(message: str, hint: str | None = None, code: int = 2) -> NoReturn:
    """End the command with one plain line on stderr (never wrapped, whatever the width)."""
    sys.stderr.write(f"cs-audit: {plain(message)}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    sys.stderr.flush()
    raise typer.Exit(code)


#: ``--include-upstream`` of the commands that report, gate or fix findings
INCLUDE_UPSTREAM = typer.Option(False, "--include-upstream",
                                help="also the findings on the upstream's lines (default: the fork's own, when the tree names an upstream)")

#: ``--config FILE`` of the commands that scan the work tree
CONFIG = typer.Option(None, "--config", help="the configuration file to use (pyproject.toml, cs-audit.toml or cs-audit.yaml) "
                                             "instead of the nearest one above PATH")


#: ``--select``, ``--extend-select`` and ``--ignore`` (rule ids, repeatable or comma-separated)
SELECT = typer.Option([], "--select", help="report only these rules (ids or ALL; repeatable, comma-separated); replaces the configuration's select")
EXTEND_SELECT = typer.Option([], "--extend-select", help="report these rules too (repeatable, comma-separated)")
IGNORE = typer.Option([], "--ignore", help="do not report these rules (repeatable, comma-separated); added to the configuration's ignore")


def selection_overrides(select: list[str], extend_select: list[str], ignore: list[str]) -> dict[str, tuple[str, ...]]:
    """The ``load_config`` overrides of the rule-selection options (``a,b`` splits as ruff's);
    an unknown rule id ends the command (exit 2) naming the option."""
    from cs_audit.analysis.selection import unknown_rules
    from cs_audit.ruleset import load_ruleset

    out: dict[str, tuple[str, ...]] = {}
    known = load_ruleset().rules if select or extend_select or ignore else {}
    for name, raw in (("select", select), ("extend_select", extend_select), ("ignore", ignore)):
        ids = tuple(part.strip() for value in raw for part in value.split(",") if part.strip())
        unknown = unknown_rules(ids, known)
        if unknown:
            fail(f"--{name.replace('_', '-')}: unknown rule id {', '.join(map(repr, unknown))} (known: {', '.join(known)}, ALL)")
        if ids:
            out[name] = ids
    return out


#: ``--max-annotations N`` of the github format (0: every finding)
MAX_ANNOTATIONS = typer.Option(10, "--max-annotations", min=0,
                               help="github format: at most N finding annotations, the most severe and hottest (0: all)")


def check_scannable(path: Path) -> None:
    """End the command (exit 2) unless ``path`` is a folder or a Python file (scanned as a
    tree of one file)."""
    if not path.exists():
        fail(f"{path}: no such file or directory")
    if not path.is_dir() and not (path.is_file() and path.suffix == ".py"):
        fail(f"{path}: not a directory nor a .py file: give the folder to scan, or one Python file")


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


def output_path(raw: str | None) -> Path | None:
    """``-o`` as a path; one that ends in a separator names a directory, refused (exit 2);
    ``-`` is standard output, as for most tools (not a file named `-`)."""
    if raw is None:
        return None
    if raw == "-":
        return Path("/dev/stdout")
    if raw.endswith(("/", os.sep)) and not raw.startswith("/dev/"):
        fail(f"{raw}: cannot write: names a directory (give a file name)")
    return Path(raw)


def check_writable(path: Path) -> None:
    """End the command (exit 2) unless ``write_output(path, ...)`` can succeed, checked
    before the scan so that a report that cannot be written never costs a whole scan nor
    ends a ``check`` with the status of a gating failure."""
    if _is_stdout(path):
        return
    try:
        st = os.stat(path) if os.path.lexists(path) else None
    except OSError as exc:
        fail(f"{path}: cannot write: {exc.strerror or exc}")
    if path.is_symlink():
        if st is None or not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            fail(f"{path}: refusing to write through a symlink (give the file it points to)")
        return
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            fail(f"{path}: not a regular file (a directory)")
        if not stat.S_ISREG(st.st_mode):
            if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
                fail(f"{path}: not a regular file")
            return
    parent = Path(os.path.dirname(os.path.abspath(path)))
    existing = parent
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        fail(f"{path}: cannot write: {existing} is not a directory")
    # what the write will do, done and undone: the first missing folder made, or the temp
    # file of the atomic write; the one sure test (root passes permission checks, /proc
    # refuses new entries)
    try:
        if existing != parent:
            first = parent
            while first.parent != existing:
                first = first.parent
            os.mkdir(first)
            os.rmdir(first)
        else:
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name[:16]}.", suffix=".tmp")
            os.close(fd)
            os.unlink(tmp)
    except OSError as exc:
        fail(f"{path}: cannot write: {exc.strerror or exc}")


def check_directory(directory: Path) -> None:
    """End the command (exit 2) unless files can be written into ``directory`` (made if missing)."""
    check_writable(directory / "report")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def emit(text: str, output: Path | None) -> None:
    if output is not None:
        write_output(output, text)
    else:
        sys.stdout.write(text)


def load_profile(profile_path: Path, profile_format: str | None, root: list[str], steps: int):
    """A run's profile (``confirm``, ``scan --profile``), its steps from ``steps`` or ``root``
    when given; a bad one ends the command in one line."""
    from cs_audit.confirm.profiles import ProfileError
    from cs_audit.confirm.report import profile_with_steps

    try:
        return profile_with_steps(profile_path, profile_format, root, steps)
    except ProfileError as exc:
        fail(str(exc))
