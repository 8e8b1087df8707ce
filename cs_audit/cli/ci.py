"""CI and history commands, registered on ``cs_audit.cli.app`` when imported:
``baseline``, ``check``, ``report`` and ``diff``.

Exit codes (``check``): 0 clean, 1 new gating findings, 2 usage or configuration error,
or the check could not complete (an unreachable ``--since`` revision, a file whose
analysis crashed, ...); 2 wins over 1.  ``report`` and ``diff`` exit 0 or 2.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from cs_audit.cli.common import (
    CONFIG,
    EXTEND_SELECT,
    IGNORE,
    INCLUDE_UPSTREAM,
    MAX_ANNOTATIONS,
    SELECT,
    app,
    check_directory,
    check_scannable,
    check_writable,
    emit,
    fail,
    output_path,
    plural,
    run_with_progress,
    say,
    selection_overrides,
    write_output,
)

if TYPE_CHECKING:
    from cs_audit.ci.check import CheckRun
    from cs_audit.config import AuditConfig
    from cs_audit.git.repo import CommitInfo, GitRepo
    from cs_audit.model import AuditResult
    from cs_audit.ruleset import RuleSet

DEFAULT_BASELINE = "cs-audit-baseline.json"
CHECK_FORMATS = ("text", "json", "sarif", "github", "markdown")
REPORT_FORMATS = ("markdown", "json")

_JOBS = typer.Option(None, "--jobs", "-j", min=1, help="worker processes (default: cores)")
_EXCLUDE = typer.Option([], "--exclude", help="glob of paths to skip (repeatable)")
_QUIET = typer.Option(False, "--quiet", "-q", help="no progress on stderr")


def _file_progress(label: str) -> Callable[[int, int], None] | None:
    """Per-file progress on a terminal (a first commit of a large tree takes a while)."""
    if not sys.stderr.isatty():
        return None

    def progress(done: int, total: int) -> None:
        if done == total:
            sys.stderr.write("\r\033[K")
        elif done % 20 == 0:
            sys.stderr.write(f"\r{label}: {done}/{plural(total, 'file')}")
        sys.stderr.flush()

    return progress


def _config(path: Path, jobs: int | None, exclude: list[str], config_file: Path | None = None,
            include_upstream: bool = False, **selection: tuple[str, ...]) -> tuple[AuditConfig, RuleSet]:
    from cs_audit.api import prepare_ruleset
    from cs_audit.config import ConfigError, load_config
    from cs_audit.ruleset import RuleDataError, load_ruleset

    check_scannable(path)
    try:
        config = load_config(str(path), config_file, jobs=jobs, exclude=tuple(exclude), history=False,
                             include_upstream=include_upstream or None, **selection)
        return config, prepare_ruleset(config, load_ruleset())
    except (ConfigError, RuleDataError) as exc:
        fail(f"configuration error: {exc}")


# ---------------------------------------------------------------------------
# baseline / check


@app.command()
def baseline(
    path: Path = typer.Argument(Path("."), help="tree to record"),
    output_raw: str = typer.Option(DEFAULT_BASELINE, "--output", "-o", help="baseline file to write"),
    jobs: Optional[int] = _JOBS,
    exclude: list[str] = _EXCLUDE,
    config_file: Optional[Path] = CONFIG,
    quiet: bool = _QUIET,
    select: list[str] = SELECT,
    extend_select: list[str] = EXTEND_SELECT,
    ignore: list[str] = IGNORE,
    include_upstream: bool = INCLUDE_UPSTREAM,
) -> None:
    """Record today's findings by fingerprint (suppressed ones left out) for `check --baseline`."""
    from cs_audit.ci.gate import context_for, entry_of, render_baseline
    from cs_audit.render.check import plain

    output = output_path(output_raw)
    assert output is not None
    check_writable(output)
    path = _work_tree_top(path, quiet)
    config, rs = _config(path, jobs, exclude, config_file, include_upstream, **selection_overrides(select, extend_select, ignore))
    result = run_with_progress(config, rs, quiet=quiet, keep=False)
    ctx = context_for(result)
    write_output(output, render_baseline((entry_of(f) for f in ctx.suppressed.kept), result.commit))
    say(f"cs-audit: {plural(len(ctx.suppressed.kept), 'finding')} recorded in {plain(output)}")


@app.command()
def check(
    path: Path = typer.Argument(Path("."), help="tree to check"),
    baseline_file: Optional[Path] = typer.Option(None, "--baseline", "-b", help="only findings not in this baseline are new"),
    since: Optional[str] = typer.Option(None, "--since", help="only findings on lines changed since this revision"),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="rewrite --baseline without its fixed entries"),
    format: str = typer.Option("text", "--format", "-f", help="text, json, sarif, github or markdown"),
    output_raw: Optional[str] = typer.Option(None, "--output", "-o", help="write the report here (default: stdout)"),
    gate: list[str] = typer.Option([], "--gate", help="which findings of a rule gate: RULE:hot|default|any|off (repeatable; default: hot for the gates_ci rules of rules.yaml)"),
    strict: bool = typer.Option(False, "--strict", help="exit 2 when any file was skipped"),
    allow_parse_errors: bool = typer.Option(False, "--allow-parse-errors",
                                            help="go on when a file in the check's scope does not parse (default: exit 2)"),
    jobs: Optional[int] = _JOBS,
    exclude: list[str] = _EXCLUDE,
    max_annotations: int = MAX_ANNOTATIONS,
    config_file: Optional[Path] = CONFIG,
    quiet: bool = _QUIET,
    select: list[str] = SELECT,
    extend_select: list[str] = EXTEND_SELECT,
    ignore: list[str] = IGNORE,
    include_upstream: bool = INCLUDE_UPSTREAM,
) -> None:
    """Exit 1 when a gating finding is new (against --baseline and/or on lines changed --since REV)."""
    from cs_audit.ci.check import judge, open_check
    from cs_audit.ci.gate import BaselineError, GateError
    from cs_audit.git.repo import GitError

    if format not in CHECK_FORMATS:
        fail(f"unknown format {format!r}; choose from {', '.join(CHECK_FORMATS)}")
    if update_baseline and baseline_file is None:
        fail("--update-baseline needs --baseline FILE")
    output = output_path(output_raw)
    for target in (output, baseline_file if update_baseline else None):
        if target is not None:
            check_writable(target)
    path = _work_tree_top(path, quiet)
    config, rs = _config(path, jobs, exclude, config_file, include_upstream, **selection_overrides(select, extend_select, ignore))
    try:
        inputs = open_check(path, gate, rs, config, baseline_file, since)
    except (GateError, BaselineError) as exc:
        fail(str(exc))
    except GitError as exc:
        fail(f"--since: {exc}", exc.hint)

    result = run_with_progress(config, rs, quiet=quiet, keep=False)
    run = judge(result, config, rs, path, inputs, strict=strict, allow_parse_errors=allow_parse_errors,
                update_baseline=update_baseline)
    for line in run.messages:
        say(line)
    if run.baseline_text is not None and baseline_file is not None:
        write_output(baseline_file, run.baseline_text)
    state = _render_check(result, rs, run, format, output, max_annotations)
    if state == "incomplete":
        raise typer.Exit(2)
    if state == "fail":
        raise typer.Exit(1)


def _render_check(result: AuditResult, rs: RuleSet, run: CheckRun, format: str, output: Path | None,
                  max_annotations: int) -> str:
    """Write the check's report in ``format`` (stdout when ``output`` is None); its state."""
    from cs_audit.render.check import render_check_json, render_check_markdown, render_check_text, status
    from cs_audit.render.github import annotation, render_github
    from cs_audit.render.sarif import render_sarif

    outcome, ctx = run.outcome, run.context
    state = status(outcome)
    if format == "text":
        text = render_check_text(result, rs, outcome, ctx)
        if output is None and sys.stdout.isatty():
            style = {"pass": "green", "fail": "bold red", "incomplete": "bold yellow"}[state]
            from rich.console import Console
            from rich.text import Text

            console = Console(highlight=False)
            first, _, rest = text.partition("\n")
            console.print(Text(first, style=style))
            sys.stdout.write(rest)
        else:
            emit(text, output)
    elif format == "json":
        emit(render_check_json(result, outcome, ctx), output)
    elif format == "markdown":
        emit(render_check_markdown(result, rs, outcome, ctx), output)
    elif format == "sarif":
        states = {f.fingerprint: "new" for f in outcome.new}
        emit(render_sarif(result, rs, prefix=ctx.prefix, suppressed=ctx.suppressed.suppressed, notes=ctx.notes,
                           states=states, successful=not outcome.incomplete), output)
    else:
        text = render_github(result, rs, prefix=ctx.prefix, suppressed=ctx.suppressed.suppressed, notes=ctx.notes,
                             levels={f.fingerprint: "error" for f in outcome.new}, limit=max_annotations or None)
        shown = min(len(outcome.new), max_annotations or len(outcome.new))
        summary = (f"cs-audit check {state}: {plural(len(outcome.new), 'new gating finding')}"
                   f"{f' ({shown} shown as annotations, the most severe and hottest)' if shown < len(outcome.new) else ''}; "
                   f"{plural(len(result.findings), 'finding')} in all; every new one in `cs-audit check` "
                   "with the same options")
        text += annotation({"pass": "notice", "fail": "error", "incomplete": "error"}[state], summary) + "\n"
        emit(text, output)
    return state


def _work_tree_top(path: Path, quiet: bool) -> Path:
    """Run in a subfolder of a git work tree (``path`` the current folder), the top of that
    work tree: a subfolder's findings depend on code outside it (its helpers, the registry of
    its switches), so check answers for the repository whole wherever it runs, with the same
    paths as at the top.  ``path`` itself for a folder named on the command line, a file, or
    outside git."""
    from cs_audit.git.repo import GitError, GitRepo

    try:
        here = path.is_dir() and os.path.samefile(path, os.getcwd())
    except OSError:
        here = False
    if not here:
        return path
    try:
        repo = GitRepo.open(path)
    except GitError:
        return path
    if repo.bare or not repo.rel:
        return path
    if not quiet:
        say(f"cs-audit: {path} is inside the repository at {repo.toplevel}: checking the repository whole")
    return repo.toplevel


# ---------------------------------------------------------------------------
# report / diff


def _report_name(info: CommitInfo, format: str) -> str:
    return f"{info.date}_{info.short}.{'json' if format == 'json' else 'md'}"


def _render_report(result: AuditResult, rs: RuleSet, format: str, title: str) -> str:
    from cs_audit.render.json import render_json
    from cs_audit.render.markdown import render_markdown

    return render_json(result) if format == "json" else render_markdown(result, rs, title)


@app.command()
def report(
    path: Path = typer.Argument(Path("."), help="tree (inside a git work tree) to audit at past commits"),
    rev: Optional[str] = typer.Option(None, "--rev", help="audit this commit"),
    rev_range: Optional[str] = typer.Option(None, "--range", help="audit every commit of A..B (first-parent line)"),
    output_raw: Optional[str] = typer.Option(
        None, "--output", "-o", help="file for --rev, directory for --range (default: reports/<date>_<short-sha>.md)"),
    format: str = typer.Option("markdown", "--format", "-f", help="markdown or json"),
    jobs: Optional[int] = _JOBS,
    exclude: list[str] = _EXCLUDE,
) -> None:
    """Write the audit of past commits, read from git objects (no checkout; work tree and index untouched)."""
    from cs_audit.ci.revisions import TreeAuditor
    from cs_audit.cli.scan import report_name
    from cs_audit.config import ConfigError
    from cs_audit.git.repo import SHORT_SHA, GitError, GitRepo
    from cs_audit.render.check import plain

    if (rev is None) == (rev_range is None):
        fail("give exactly one of --rev REV or --range A..B")
    if format not in REPORT_FORMATS:
        fail(f"unknown format {format!r}; choose from {', '.join(REPORT_FORMATS)}")
    if rev is not None:
        output = output_path(output_raw)
        if output is not None:
            check_writable(output)
        else:
            check_directory(Path("reports"))
    else:
        output = Path(output_raw) if output_raw is not None else None
        check_directory(output or Path("reports"))
    try:
        repo = GitRepo.open(path)
        shas = [repo.verify(rev)] if rev is not None else repo.rev_range(rev_range or "")
    except GitError as exc:
        fail(str(exc), exc.hint)
    if not shas:
        fail(_empty_range(repo, rev_range or ""))
    failed = 0
    started = time.perf_counter()
    spent: list[float] = []  # each commit's audit, dating, rendering and writing, as its line says
    with TreeAuditor(repo, str(path), reuse=rev_range is not None, nested="dated", jobs=jobs, exclude=tuple(exclude)) as auditor:
        for i, sha in enumerate(shas, 1):
            began = time.perf_counter()
            try:
                info = repo.commit_info(sha)
                result = auditor.audit(sha, progress=_file_progress(f"[{i}/{len(shas)}] {info.short}"))
            except ConfigError as exc:
                failed += 1
                say(f"[{i}/{len(shas)}] {info.short} {info.date}: configuration error: {plain(exc)}")
                continue
            except GitError as exc:  # a missing object: this commit cannot be read, the others can
                failed += 1
                say(f"[{i}/{len(shas)}] {sha[:SHORT_SHA]}: cannot read the commit: {plain(exc)}")
                continue
            assert auditor.last_rs is not None
            if rev is not None:
                target = output or Path("reports") / _report_name(info, format)
            else:
                target = (output or Path("reports")) / _report_name(info, format)
            # `report .` is titled by the folder's name, as `scan .` is, and by the commit
            title = f"{report_name(path)} at {info.short}"
            write_output(target, _render_report(result, auditor.last_rs, format, title))
            spent.append(time.perf_counter() - began)
            if rev_range is not None:
                say(f"[{i}/{len(shas)}] {info.short} {info.date} {spent[-1]:.2f}s "
                     f"{plural(len(result.findings), 'finding')} -> {plain(target)}")
            else:
                say(f"cs-audit: report for {info.short} ({info.date}) written to {plain(target)}")
        stats = auditor.stats
    if rev_range is not None:
        say(f"cs-audit: {_range_timing(spent, time.perf_counter() - started, failed)}; files parsed {stats.analysed}, "
             f"reused {stats.reused}, from the cache {stats.cached}; joins reused for {plural(stats.joins_reused, 'commit')}"
             + (f", whole results from the cache for {plural(stats.stored, 'commit')}" if stats.stored else ""))
    if failed:
        raise typer.Exit(2)


def _range_timing(spent: list[float], total: float, failed: int) -> str:
    """How long ``report --range`` took, in parts that add up to the total as printed: the
    first commit, the others (as their lines say, each rounded to 0.01 s) and the rest."""
    cents = [round(t * 100) for t in spent]
    whole = max(round(total * 100), sum(cents))
    parts = [f"the first {cents[0] / 100:.2f}s"] if cents else []
    if len(cents) > 1:
        later = sum(cents[1:])
        parts.append(f"the other {len(cents) - 1} {later / 100:.2f}s ({later / 100 / (len(cents) - 1):.2f}s each)")
    rest = "setting up and cleaning up" + (f", and {plural(failed, 'commit')} not audited" if failed else "")
    parts.append(f"{(whole - sum(cents)) / 100:.2f}s {rest}")
    return f"{plural(len(cents), 'commit')} in {whole / 100:.2f}s: {', '.join(parts)}"


def _empty_range(repo: GitRepo, spec: str) -> str:
    """Why ``--range spec`` audits nothing: empty, or given the wrong way round."""
    from cs_audit.git.repo import GitError
    from cs_audit.render.check import plain

    left, _, right = spec.partition("..")
    try:
        swapped = bool(repo.rev_range(f"{right}..{left}"))
    except GitError:
        swapped = False
    why = (f"swapped? A..B is the commits of B that A lacks; {right or 'HEAD'}..{left or 'HEAD'} has some" if swapped
           else "A and B are the same commit, or B is an ancestor of A")
    return f"--range {plain(spec)}: holds no commits ({plain(why)})"


@app.command("diff")
def diff_cmd(
    rev1: str = typer.Argument(..., help="older commit"),
    rev2: str = typer.Argument(..., help="newer commit"),
    path: Path = typer.Argument(Path("."), help="tree (inside a git work tree) to compare"),
    output_raw: Optional[str] = typer.Option(None, "--output", "-o", help="write the markdown here (default: stdout)"),
    jobs: Optional[int] = _JOBS,
    exclude: list[str] = _EXCLUDE,
) -> None:
    """What changed in the audit between two commits: switches, findings, dispositions (markdown)."""
    from cs_audit.ci.gate import match_findings
    from cs_audit.ci.revisions import TreeAuditor
    from cs_audit.config import ConfigError
    from cs_audit.git.repo import GitError, GitRepo
    from cs_audit.render.diff import render_diff

    output = output_path(output_raw)
    if output is not None:
        check_writable(output)
    try:
        repo = GitRepo.open(path)
        sha1, sha2 = repo.verify(rev1), repo.verify(rev2)
        info1, info2 = repo.commit_info(sha1), repo.commit_info(sha2)
    except GitError as exc:
        fail(str(exc), exc.hint)
    with TreeAuditor(repo, str(path), reuse=True, nested="dated", jobs=jobs, exclude=tuple(exclude)) as auditor:
        try:
            before = auditor.audit(sha1)
            after = auditor.audit(sha2)
        except ConfigError as exc:
            fail(f"configuration error: {exc}")
        except GitError as exc:
            fail(f"cannot read a commit: {exc}")
    new, fixed, moved = match_findings(list(after.findings), list(before.findings))
    emit(render_diff(before, after, info1, info2, new, fixed, moved), output)
