"""``scan``, ``switch``, ``rules``, ``config`` and ``version``.

Exit codes: 0 done, 1 findings with ``--exit-non-zero-on-findings``, 2 could not complete
(bad config, unreadable root, an output that cannot be written, and with ``--strict`` any
skipped file).
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import typer

from cs_audit.cli import common as state
from cs_audit.cli.common import app, check_scannable, check_writable, fail, say, write_output

FORMATS = ("text", "concise", "full", "grouped", "json", "markdown", "html", "sarif", "github", "gitlab", "junit")
#: the formats that print on the terminal and write the markdown under reports/
TERMINAL_FORMATS = ("text", "concise", "full")
#: the largest source file whose lines the terminal output quotes
MAX_SOURCE_BYTES = 1 << 24


def _load(path: Path, config_file: Path | None = None, **overrides: object):
    """The configuration and rule set of a scan of ``path``, or a one-line error (exit 2)."""
    from cs_audit.api import prepare_ruleset
    from cs_audit.config import ConfigError, load_config
    from cs_audit.ruleset import RuleDataError, load_ruleset

    check_scannable(path)
    try:
        config = load_config(str(path), config_file, **overrides)
        return config, prepare_ruleset(config, load_ruleset())
    except (ConfigError, RuleDataError) as exc:
        fail(f"configuration error: {exc}")


def render_format(format: str, result, rs, max_annotations: int | None = None, path: Path | None = None,
                  observed=None) -> str:
    """The report of ``result`` in one of ``FORMATS`` other than text (``path``: the scanned
    tree, whose source lines the html format quotes; ``observed``: what a profile showed of
    each finding, for the json, markdown and html formats)."""
    if format == "html":
        from cs_audit.render.html import render_html

        sources = {}
        if path is not None:
            sources = _source_lines(path if path.is_dir() else path.parent, result.findings, full=True)
        return render_html(result, rs, sources, report_name(path) if path is not None else None, observed)
    if format == "json":
        from cs_audit.render.json import render_json

        return render_json(result, observed)
    if format == "markdown":
        from cs_audit.render.markdown import render_markdown

        return render_markdown(result, rs, observed=observed)
    from cs_audit.ci.gate import context_for

    ctx = context_for(result)
    if format == "sarif":  # SARIF 2.1.0; in-source suppressions marked, suppression problems as notifications
        from cs_audit.render.sarif import render_sarif

        return render_sarif(result, rs, prefix=ctx.prefix, suppressed=ctx.suppressed.suppressed, notes=ctx.notes)
    if format in ("grouped", "gitlab", "junit"):  # the findings no comment suppresses, as ruff's outputs
        from cs_audit.render import lint

        kept = ctx.suppressed.kept
        if format == "grouped":
            return lint.render_grouped(kept, ctx.prefix)
        return lint.render_gitlab(kept, rs, ctx.prefix) if format == "gitlab" else lint.render_junit(kept, ctx.prefix)
    from cs_audit.render.github import render_github  # workflow-command annotations

    where = f"every one in `cs-audit scan {path}`" if path is not None else "every one in the JSON or markdown report"
    return render_github(result, rs, prefix=ctx.prefix, suppressed=ctx.suppressed.suppressed, notes=ctx.notes,
                         limit=max_annotations or None, summary=where)


@app.command()
def scan(
    path: Path = typer.Argument(..., help="tree (or file) to audit"),
    format: str = typer.Option("text", "--format", "-f", "--output-format",
                               help="text or concise (terminal summary and one line per finding, markdown under reports/), "
                                    "full (each finding with its source and hot path), grouped (by file), json, markdown, "
                                    "html (one self-contained page), sarif, github, gitlab (Code Quality), junit"),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="write the report here"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="worker processes (default: cores)"),
    exclude: list[str] = typer.Option([], "--exclude", help="glob of paths to skip (repeatable)"),
    no_history: bool = typer.Option(False, "--no-history", help="skip git history"),
    strict: bool = typer.Option(False, "--strict", help="exit 2 when any file was skipped"),
    exit_non_zero: bool = typer.Option(False, "--exit-non-zero-on-findings", help="exit 1 when any finding is reported (suppressed ones left out)"),
    statistics: bool = typer.Option(False, "--statistics", help="on the terminal, the count of findings per rule instead of one line per finding"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress and no summary on the terminal, only errors"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print the time spent in each phase"),
    no_cache: bool = typer.Option(False, "--no-cache", help="neither read nor write the per-file facts cache"),
    max_annotations: int = state.MAX_ANNOTATIONS,
    config_file: Optional[Path] = state.CONFIG,
    select: list[str] = state.SELECT,
    extend_select: list[str] = state.EXTEND_SELECT,
    ignore: list[str] = state.IGNORE,
    profile_path: Optional[Path] = typer.Option(None, "--profile", help="a run's profile (as `confirm` reads): an observed column in §1, `observed` in the JSON"),
    profile_root: list[str] = typer.Option([], "--profile-root", help="the step root of a call-count profile that does not count its steps"),
    include_upstream: bool = state.INCLUDE_UPSTREAM,
) -> None:
    """Scan PATH and write the audit (terminal summary + markdown, or JSON)."""
    if format not in FORMATS:
        fail(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    profile = None
    if profile_path is not None:
        profile = state.load_profile(profile_path, None, profile_root, 0)
    terminal = format in TERMINAL_FORMATS
    out = state.output_path(output)
    target = out or (_report_target(path) if terminal else None)
    if target is not None:
        check_writable(target)
    config, rs = _load(path, config_file, jobs=jobs, exclude=tuple(exclude), history=not no_history,
                       cache=False if no_cache else None, include_upstream=include_upstream or None,
                       **state.selection_overrides(select, extend_select, ignore))
    # what the rendering reads besides the audit (the output file's name is only printed)
    render_id = repr((format, max_annotations, statistics, str(path), os.path.realpath(path), out is None, _profile_id(profile_path, profile_root)))
    report = state.run_with_progress(config, rs, quiet=quiet, report=(
        lambda result: _report(format, result, rs, config, max_annotations, path, out is None, statistics, profile), render_id))
    for line in report.warnings:
        say(line)
    if target is not None:
        write_output(target, report.text)
    else:
        sys.stdout.write(report.text)
    if terminal and not quiet:
        _print_terminal(report, str(target), verbose)
    elif verbose:
        say(phases_line(report.timings))
    if strict and report.skipped:
        raise typer.Exit(2)
    if exit_non_zero and report.reported:
        raise typer.Exit(1)


def _profile_id(profile_path: Path | None, profile_root: list[str]) -> str:
    """What a stored report must have been rendered with: the profile's path, size and time."""
    if profile_path is None:
        return ""
    st = profile_path.stat()
    return repr((os.path.realpath(profile_path), st.st_size, st.st_mtime_ns, profile_root))


def _observed(profile, config, result) -> tuple[dict | None, tuple[str, ...]]:
    """What ``profile`` (None: no --profile) showed of each finding, and a warning line when
    none of its files is the tree's."""
    if profile is None:
        return None, ()
    from cs_audit.confirm.join import join, observe_findings
    from cs_audit.extract.discover import discover

    sources, _ = discover(Path(config.root), config.exclude)
    run = join(profile, Path(config.root), [s.path for s in sources if s.path.endswith((".py", ".pyw"))])
    warning = () if run.root is not None else (
        f"cs-audit: the --profile's files are none of {result.root}'s (a profile of another tree?): every finding is 'not covered'",)
    return observe_findings(run, result.findings), warning


def _report(format: str, result, rs, config, max_annotations: int | None, path: Path, under_reports: bool, statistics: bool,
            profile=None):
    """``result`` rendered in ``format``, with what ``scan`` decides from it; for the terminal
    formats, the markdown report and the lines of the terminal (``_print_terminal``)."""
    from cs_audit.api import Report
    from cs_audit.ci.suppress import apply_suppressions

    kept = list(apply_suppressions(result).kept)  # no repository prefix needed: no git call
    observed, profile_warning = _observed(profile, config, result)
    reported, skipped = bool(kept), bool(result.errors)
    warnings = (*unmatched_root_warnings(config, result), *profile_warning)
    if format not in TERMINAL_FORMATS:
        return Report(render_format(format, result, rs, max_annotations, path, observed), reported, skipped, warnings)
    from cs_audit.render.console import finding_lines, statistics_lines, summary_lines
    from cs_audit.render.markdown import render_markdown

    markdown = render_markdown(result, rs, report_name(path), tree_digest(path) if under_reports else None, observed)
    base = path if path.is_dir() else path.parent
    # the summary and the finding lines name a file alike, from where the user ran the scan
    shown_base = str(result.root) if path.is_dir() else str(base)
    if statistics:
        details = statistics_lines(kept, rs)
    else:
        full = format == "full"
        details = finding_lines(kept, shown_base, _source_lines(base, kept, full), full)
    return Report(markdown, reported, skipped, warnings, summary=tuple(summary_lines(result, rs, shown_base)), details=tuple(details))


def _print_terminal(report, written_to: str, verbose: bool) -> None:
    """The summary, then one line per finding no comment suppresses (or their counts)."""
    from rich.console import Console

    from cs_audit.render.console import print_lines

    console = Console(highlight=False)
    lines = list(report.summary)
    if verbose:
        lines.append((phases_line(report.timings), ""))
    lines.append((state.plain(f"report written to {written_to}"), "green"))
    print_lines(console, lines)
    if report.details:
        console.print()
        print_lines(console, [(line, "") for line in report.details])


def _source_lines(base: Path, findings, full: bool) -> dict[tuple[str, int], str]:
    """(path, line) -> the text of that line, for the findings' lines (all of each finding's
    lines when ``full``); a file that cannot be read now gives none."""
    from cs_audit.files import text_lines
    from cs_audit.render.console import FULL_LINES

    wanted: dict[str, set[int]] = {}
    for f in findings:
        last = min(f.end_line, f.line + FULL_LINES - 1) if full else f.line
        wanted.setdefault(f.path, set()).update(range(f.line, last + 1))
    out: dict[tuple[str, int], str] = {}
    for rel, numbers in wanted.items():
        try:
            lines = text_lines(base / rel, MAX_SOURCE_BYTES)
        except OSError:
            continue
        out.update(((rel, n), lines[n - 1]) for n in numbers if 0 < n <= len(lines))
    return out


def report_name(path: Path) -> str:
    """The name of a tree's markdown report under ``reports/``: the last part of its
    resolved path (``scan .`` is named after the folder)."""
    from cs_audit.extract.discover import display_path

    resolved = path.resolve()
    return display_path(resolved.name) or "root"


def tree_digest(path: Path) -> str:
    """What a report under ``reports/`` records of its tree (its resolved path, hashed: the
    report names no folder of the user's machine)."""
    import hashlib

    return hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:16]


def _report_target(path: Path) -> Path:
    """``reports/<name>.md`` for a scan of ``path``, or a one-line error (exit 2) when that
    file is a report of another tree, not a report of ``scan`` at all, or tracked by git in
    the current directory: the user's file is never overwritten."""
    from cs_audit.files import read_regular
    from cs_audit.git.runner import run
    from cs_audit.render.markdown import TREE_MARK

    target = Path("reports") / f"{report_name(path)}.md"
    hint = "give -o FILE, or move it away"
    if os.path.lexists(target):  # git is asked only then: a scan's first report costs no git call
        code, listed, _ = run(".", ["ls-files", "-z", "--", target.as_posix()])  # pathspecs are literal in every git call
        if code == 0 and listed:
            fail(f"{target}: tracked by git in the current directory: not overwritten; {hint}")
        try:
            text = read_regular(target, MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
        except OSError as exc:
            fail(f"{target}: cannot read: {exc}; {hint}")
        last = text.rstrip().rsplit("\n", 1)[-1]
        if last != TREE_MARK.format(tree_digest(path)):
            what = (f"holds the report of another tree named {report_name(path)!r}" if last.startswith(TREE_MARK.split("{")[0])
                    else "is no report that scan wrote for this tree")
            fail(f"{target}: {what}: not overwritten; {hint}")
    return target


def unmatched_root_warnings(config, result) -> Iterator[str]:
    """One warning line per hot root of the project's configuration that matches no
    function of the tree (a typo, or a root an earlier rule already matches)."""
    if result.roots is None:
        return
    for i, (entry, match) in enumerate(zip(config.hot_roots, result.roots.rules)):
        if not match.functions:
            shown = ", ".join(f"{k} = {v!r}" for k, v in entry.items())
            yield state.plain(f"cs-audit: warning: {config.config_source}: hot_roots[{i}] {{{shown}}} matches no function "
                              "of this tree (none so named, or an earlier root matches them)")


def phases_line(timings) -> str:
    return "phases: " + ", ".join(f"{name} {secs:.2f}s" for name, secs in timings)


@app.command()
def switch(
    name: str = typer.Argument(..., help="the env var"),
    path: Path = typer.Argument(Path("."), help="tree to audit"),
    no_history: bool = typer.Option(False, "--no-history", help="skip git history"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1),
    config_file: Optional[Path] = state.CONFIG,
) -> None:
    """Everything about one switch: reads, gated sites, setters, readers, added-in, disposition and why."""
    config, rs = _load(path, config_file, jobs=jobs, history=not no_history)
    from rich.console import Console

    from cs_audit.render.console import print_switch

    result = state.run_with_progress(config, rs, quiet=False)
    found = next((s for s in result.switches if s.name == name), None)
    if found is None:
        close = difflib.get_close_matches(name, [s.name for s in result.switches], n=5)
        fail(f"no switch {name!r} is read in {path}" + (f"; did you mean {', '.join(close)}?" if close else ""))
    from cs_audit.render.json import detail_fields

    print_switch(Console(), found, [f for f in result.findings if (f.switch and f.switch.text) == name or detail_fields(f).get("var", "").split(",")[0] == name])


@app.command()
def rules(rule_id: Optional[str] = typer.Argument(None, help="show one rule in full")) -> None:
    """List the rule ids, or show one with its rationale and examples."""
    from rich.console import Console

    from cs_audit.ruleset import load_ruleset

    rs = load_ruleset()
    console = Console()
    if rule_id is None:
        for spec in rs.rules.values():
            console.print(f"{spec.id:<24} {spec.severity:<7} {spec.summary}", markup=False, highlight=False, soft_wrap=True)
        return
    if rule_id not in rs.rules:
        fail(f"unknown rule {rule_id!r}; known: {', '.join(rs.rules)}")
    spec = rs.rules[rule_id]
    console.print(f"{spec.id} ({spec.severity})\n\n{spec.summary}\n\nWhy: {spec.why}\n\nFix: {spec.fix}\n\n"
                  f"Flagged:\n{spec.example}\nSilent:\n{spec.ok}", markup=False, highlight=False, soft_wrap=True)


@app.command("config")
def show_config(
    path: Path = typer.Argument(Path("."), help="project to read the configuration of"),
    config_file: Optional[Path] = state.CONFIG,
) -> None:
    """Print, as TOML, the configuration a scan of PATH uses (project file, defaults, shipped hot roots)."""
    from cs_audit.render.config import render_config

    config, rs = _load(path, config_file)
    sys.stdout.write(render_config(config, rs))


@app.command()
def version() -> None:
    """Print the version."""
    from cs_audit import __version__

    typer.echo(__version__)
