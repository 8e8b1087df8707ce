"""``fix``: apply the audit's own proposals as libcst transforms (``cs_audit.fix``).

Exit codes: ``--diff`` (the default) 0 nothing to fix, 1 a diff was printed; ``--write`` 0
written; 2 could not complete (bad options or config, or a file left as it was: changed since
the scan, or not one ``--write`` can replace safely; the others are written).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from cs_audit.cli import common as state
from cs_audit.cli.common import app, fail, say
from cs_audit.files import FIX_TEMP, remove_stale_temps
from cs_audit.render.safe import plain, visible


@app.command()
def fix(
    path: Path = typer.Argument(Path("."), help="tree (or file) to fix"),
    rule: list[str] = typer.Option([], "--rule", help="the rules to fix (repeatable, comma-separated; default: eager-format, env-read-hot, redundant-flush; duplicate-helper only when named)"),
    diff: bool = typer.Option(False, "--diff", help="print a unified diff and change nothing (the default); exit 1 if there is anything to fix"),
    write: bool = typer.Option(False, "--write", help="rewrite the files in place, atomically"),
    hot_only: bool = typer.Option(False, "--hot-only", help="fix only findings on a hot path (at any frequency but once and unknown)"),
    since: Optional[str] = typer.Option(None, "--since", help="fix only sites on lines changed since this revision"),
    into: Optional[str] = typer.Option(None, "--into", help="duplicate-helper: the module (dotted) that keeps the one copy"),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="also make fixes that change when a file is closed (per-call open -> cached handle)"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="worker processes (default: cores)"),
    exclude: list[str] = typer.Option([], "--exclude", help="glob of paths to skip (repeatable)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="neither read nor write the per-file facts cache"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress, no notes; only the diff and errors"),
    config_file: Optional[Path] = state.CONFIG,
    include_upstream: bool = state.INCLUDE_UPSTREAM,
) -> None:
    """Fix what the audit finds: lazy log messages, gated helper arguments, hoisted env reads,
    one copy of a duplicated helper, no redundant flush.  Prints a diff unless --write."""
    from cs_audit.cli.scan import _load
    from cs_audit.fix import DEFAULT_RULES, FIXABLE, fix_tree
    from cs_audit.fix import write as write_plan

    if diff and write:
        fail("--diff and --write exclude each other")
    wanted = tuple(dict.fromkeys(r.strip() for raw in rule for r in raw.split(",") if r.strip())) or DEFAULT_RULES
    unknown = [r for r in wanted if r not in FIXABLE]
    if unknown:
        fail(f"no fix for rule {', '.join(unknown)}; rules with a fix: {', '.join(FIXABLE)}")
    config, rs = _load(path, config_file, jobs=jobs, exclude=tuple(exclude), history=False,
                       cache=False if no_cache else None, select=wanted, include_upstream=include_upstream or None)
    from cs_audit.git.repo import GitError

    try:
        plan = fix_tree(config, rs, wanted, hot_only, into, unsafe_fixes, since)
    except GitError as exc:
        fail(f"--since: {exc}", exc.hint)
    for error in plan.errors:
        say(f"cs-audit: fix: {error}")
    if not quiet:
        for note in sorted((*plan.notes, *(n for f in plan.files for n in f.notes)), key=lambda n: (n.path, n.line)):
            where = f"{note.path}:{note.line}" if note.line else note.path  # line 0: the whole file
            say(f"{where}: {note.rule + ': ' if note.rule else ''}{note.text}")
        if plan.left_alone:
            say(f"cs-audit: fix: {plan.left_alone}")
    changed = plan.changed
    if write:
        for folder in sorted({os.path.dirname(f.source.abspath) for f in plan.files}):
            remove_stale_temps(folder, FIX_TEMP)  # what a killed `fix --write` left next to a file it rewrote
        left = dict(write_plan(plan))
        for where, why in left.items():
            say(plain(f"cs-audit: fix: {where}: {why}; left alone"))
        written = [f for f in changed if f.source.path not in left]
        if not quiet:
            lines = sum(f.changed_lines() for f in written)
            say(f"fixed {sum(f.fixed for f in written)} sites in {len(written)} files ({lines} lines changed)")
        if left or plan.errors:
            raise typer.Exit(2)
        return
    from cs_audit.ci.gate import repo_prefix

    prefix = repo_prefix(path)  # "" outside git: the paths are then the scanned tree's
    for f in changed:
        sys.stdout.write(visible(f.diff(prefix)))
    if not quiet:
        say(f"{sum(f.fixed for f in changed)} sites to fix in {len(changed)} files" if changed else "nothing to fix")
    if changed:
        raise typer.Exit(1)
