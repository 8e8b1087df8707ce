"""The command line: a thin typer layer over ``cs_audit.api``.

Exit codes: 0 clean, 1 findings at or above ``--fail-on``, 2 could not complete
(bad config, unreadable root, and with ``--strict`` any skipped file).
"""

from __future__ import annotations

import difflib
import gc
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Console

from cs_audit import __version__
from cs_audit.api import prepare_ruleset, run_audit
from cs_audit.config import ConfigError, load_config
from cs_audit.render import FORMATS
from cs_audit.render.console import print_summary, print_switch
from cs_audit.render.markdown import render_markdown, title
from cs_audit.ruleset import RuleDataError, load_ruleset

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Audit env-var debug switches, trace helpers, dumps and log lines.")
PROGRESS_MIN_FILES = 200
#: what the scans of this process built, kept alive until it ends: set by ``main``, whose
#: process exits without freeing memory (None when the commands are called otherwise: tests)
_KEPT: list[object] | None = None


def _format_names() -> list[str]:
    return ["text", *FORMATS]


def write_atomically(path: Path, text: str) -> None:
    """Write via a temp file + rename, so a reader never sees half a report; a target
    that exists and is not a regular file (`/dev/null`, a FIFO) is written in place."""
    if path.exists() and not path.is_file():
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # what open() would have made, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@app.command()
def scan(
    path: Path = typer.Argument(..., help="tree (or file) to audit"),
    format: str = typer.Option("text", "--format", "-f", help="text (terminal summary + markdown under reports/), json, markdown, ..."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write the report here"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="worker processes (default: cores)"),
    exclude: list[str] = typer.Option([], "--exclude", help="glob of paths to skip (repeatable)"),
    no_history: bool = typer.Option(False, "--no-history", help="skip git history"),
    strict: bool = typer.Option(False, "--strict", help="exit 2 when any file was skipped"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print the time spent in each phase"),
    no_cache: bool = typer.Option(False, "--no-cache", help="neither read nor write the per-file facts cache"),
) -> None:
    """Scan PATH and write the audit (terminal summary + markdown, or JSON)."""
    err = Console(stderr=True)
    if format not in _format_names():
        err.print(f"cs-audit: unknown format {format!r}; choose from {', '.join(_format_names())}", markup=False)
        raise typer.Exit(2)
    if not path.exists():
        err.print(f"cs-audit: {path}: no such file or directory", markup=False)
        raise typer.Exit(2)
    try:
        config = load_config(str(path), jobs=jobs, exclude=tuple(exclude), history=not no_history,
                             cache=False if no_cache else None)
        rs = prepare_ruleset(config, load_ruleset())
    except (ConfigError, RuleDataError) as exc:
        err.print(f"cs-audit: configuration error: {exc}", markup=False)
        raise typer.Exit(2)
    result = _run_with_progress(config, rs, err, quiet=format != "text")
    started = time.perf_counter()
    if format == "text":
        target = output or Path("reports") / f"{title(result)}.md"
        write_atomically(target, render_markdown(result, rs))
        result = replace(result, timings=(*result.timings, ("render", time.perf_counter() - started)))
        print_summary(Console(), result, rs, str(target), verbose)
    else:
        text = FORMATS[format](result, rs)
        if output:
            write_atomically(output, text)
        else:
            sys.stdout.write(text)
        result = replace(result, timings=(*result.timings, ("render", time.perf_counter() - started)))
    if verbose and format != "text":
        err.print("phases: " + ", ".join(f"{name} {secs:.2f}s" for name, secs in result.timings))
    if strict and result.errors:
        raise typer.Exit(2)


def _run_with_progress(config, rs, err: Console, quiet: bool):
    if _KEPT is not None:
        # the process ends soon without freeing memory: the cyclic collector stays off from
        # here (``run_audit`` pauses it for the scan only), as switching it back on would have
        # its next collection traverse everything the scan kept (~0.3 s for SGLang)
        gc.disable()
    if quiet or not err.is_terminal:
        return run_audit(config, rs, keep=_KEPT)
    # imported here: a run without a terminal (CI, scripts, benchmarks) never draws a bar
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("analysing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("files", total=None)

        def progress(done: int, total: int) -> None:
            if total >= PROGRESS_MIN_FILES:
                bar.update(task, completed=done, total=total)

        return run_audit(config, rs, progress, keep=_KEPT)


@app.command()
def switch(
    name: str = typer.Argument(..., help="the env var"),
    path: Path = typer.Argument(Path("."), help="tree to audit"),
    no_history: bool = typer.Option(False, "--no-history", help="skip git history"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1),
) -> None:
    """Everything about one switch: reads, gated sites, setters, readers, added-in, disposition and why."""
    err = Console(stderr=True)
    if not path.exists():
        err.print(f"cs-audit: {path}: no such file or directory", markup=False)
        raise typer.Exit(2)
    try:
        config = load_config(str(path), jobs=jobs, history=not no_history)
        rs = prepare_ruleset(config, load_ruleset())
    except (ConfigError, RuleDataError) as exc:
        err.print(f"cs-audit: configuration error: {exc}", markup=False)
        raise typer.Exit(2)
    result = _run_with_progress(config, rs, err, quiet=False)
    found = next((s for s in result.switches if s.name == name), None)
    if found is None:
        close = difflib.get_close_matches(name, [s.name for s in result.switches], n=5)
        err.print(f"cs-audit: no switch {name!r} is read in {path}" + (f"; did you mean {', '.join(close)}?" if close else ""), markup=False)
        raise typer.Exit(2)
    print_switch(Console(), found, [f for f in result.findings if f.switch == name or dict(f.extra).get("var", "").split(",")[0] == name])


@app.command()
def rules(rule_id: Optional[str] = typer.Argument(None, help="show one rule in full")) -> None:
    """List the rule ids, or show one with its rationale and examples."""
    rs = load_ruleset()
    console = Console()
    if rule_id is None:
        for spec in rs.rules.values():
            console.print(f"{spec.id:<24} {spec.severity:<7} {spec.summary}", markup=False, highlight=False)
        return
    if rule_id not in rs.rules:
        Console(stderr=True).print(f"cs-audit: unknown rule {rule_id!r}; known: {', '.join(rs.rules)}", markup=False)
        raise typer.Exit(2)
    spec = rs.rules[rule_id]
    console.print(f"{spec.id} ({spec.severity})\n\n{spec.summary}\n\nWhy: {spec.why}\n\nFix: {spec.fix}\n\n"
                  f"Flagged:\n{spec.example}\nSilent:\n{spec.ok}", markup=False, highlight=False)


@app.command("config")
def show_config(path: Path = typer.Argument(Path("."), help="project to read the configuration of")) -> None:
    """Print the final configuration for PATH (project file + defaults)."""
    try:
        config = load_config(str(path))
    except ConfigError as exc:
        Console(stderr=True).print(f"cs-audit: configuration error: {exc}", markup=False)
        raise typer.Exit(2)
    for key, value in sorted(vars(config).items()):
        typer.echo(f"{key} = {value!r}")


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def _own_commands() -> frozenset[str]:
    """The names of the commands this module defines (as typer names them)."""
    return frozenset(c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands if c.callback)


def main() -> None:
    # the CI commands (check, baseline, report, diff) and what they import (gate, history,
    # SARIF) are registered for any command line but one of the commands defined here:
    # `cs-audit scan` starts ~20 ms sooner, `cs-audit --help` still lists them all
    args = sys.argv[1:]
    if not args or args[0] not in _own_commands():
        import cs_audit.cli_ci  # noqa: F401  (registers the CI commands)
    global _KEPT
    _KEPT = []
    try:
        app()
        status: object = 0
    except SystemExit as exc:  # typer ends every command this way
        status = exc.code
    _exit_now(status)


def _exit_now(status: object) -> NoReturn:
    """End the process as ``sys.exit(status)`` would, without freeing memory: a scan leaves a
    tree's worth of objects (its facts and model, kept in ``_KEPT``) and the interpreter's
    teardown frees every one, ~0.1-0.3 s of a command that may have taken 0.3 s.  Everything
    the commands write is written by then (reports through closed files, stdout and stderr
    flushed here), and the exit handlers skipped have nothing left to do: the worker processes
    and blame threads are joined before a command returns, and nothing logs to a handler."""
    if status is None:
        code = 0
    elif isinstance(status, int):
        code = status
    else:  # sys.exit("message"): printed, exit status 1
        sys.stderr.write(f"{status}\n")
        code = 1
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed pipe (`| head`): nothing left to say on it
        code = code or 1
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code % 256)  # as the shell sees sys.exit(code)
