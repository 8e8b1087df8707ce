"""``cs-audit check`` as two calls: ``open_check`` reads what the check compares with (the
gates, the baseline, the ``--since`` revision), ``judge`` takes a finished audit to the
check's outcome: the gating findings that are new, the baseline entries fixed, whether the
check completed, and the baseline ``--update-baseline`` leaves.  The command line parses the
options, runs the audit, renders the outcome and turns it into an exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from cs_audit.ci.gate import (
    Baseline,
    changed_lines,
    check_against_baseline,
    context_for,
    gating_findings,
    left_out_entries,
    left_out_note,
    load_baseline,
    match_findings,
    parse_gates,
    render_baseline,
    sub_repository_changes,
    touches,
    updated_baseline,
)
from cs_audit.config import AuditConfig, ConfigError
from cs_audit.git.repo import GitError, GitRepo
from cs_audit.model import INCOMPLETE, AuditResult, BaselineEntry, CheckOutcome, Finding, Gates, ReportContext
from cs_audit.render.check import plural
from cs_audit.ruleset import RuleSet

#: error kinds of a file whose code could not be read as Python
UNPARSED = frozenset({"syntax", "encoding"})


@dataclass(frozen=True)
class CheckInputs:
    """What a check compares the audit with."""

    gates: Gates
    baseline: Baseline | None
    #: the baseline file as given (``--baseline``), None without one
    baseline_file: Path | None
    #: the repository ``--since`` diffs in, the revision as given and its full sha
    repo: GitRepo | None
    since: str | None
    since_sha: str | None


@dataclass(frozen=True)
class CheckRun:
    outcome: CheckOutcome
    #: the report context, with the check's notes
    context: ReportContext
    #: lines for stderr, in order
    messages: tuple[str, ...]
    #: the baseline file's new text for ``--update-baseline``; None: leave the file as it is
    baseline_text: str | None


def open_check(path: Path, gate: list[str], rs: RuleSet, config: AuditConfig, baseline_file: Path | None,
               since: str | None) -> CheckInputs:
    """Raises ``GateError`` or ``BaselineError`` (a bad ``--gate`` or baseline) and ``GitError``
    (``--since``: no repository, a bare one, an unknown revision)."""
    gates = parse_gates(gate, rs, config.gate, config.config_source)
    base = load_baseline(baseline_file) if baseline_file is not None else None
    repo = GitRepo.open(path) if since is not None else None
    if repo is not None and repo.bare:
        raise GitError(f"{path} is a bare repository: check needs a work tree")
    since_sha = repo.verify(since) if repo is not None and since is not None else None
    return CheckInputs(gates, base, baseline_file, repo, since, since_sha)


def judge(result: AuditResult, config: AuditConfig, rs: RuleSet, path: Path, inputs: CheckInputs, *,
          strict: bool, allow_parse_errors: bool, update_baseline: bool) -> CheckRun:
    """The outcome of the check of ``result`` (the audit of ``path`` under ``config``)."""
    base = inputs.baseline
    messages: list[str] = []
    ctx = context_for(result)
    kept = list(ctx.suppressed.kept)
    outcome = CheckOutcome(inputs.gates, since=inputs.since_sha,
                           baseline=str(inputs.baseline_file) if inputs.baseline_file else None)
    candidates = gating_findings(kept, inputs.gates)
    outcome.gating = len(candidates)
    skipped = {e.path for e in result.errors}
    left_out = (*result.upstream_findings, *result.cheap_reads)  # found, and kept out of the findings
    # baseline entries of rules or files this check does not report: neither new nor fixed, kept
    unreported: list[BaselineEntry] = []
    if base is not None:
        from cs_audit.api import selection_of
        from cs_audit.extract.excludes import exclude_matcher

        chosen = selection_of(config, rs)
        excluded = exclude_matcher(config.exclude) if config.exclude else None  # files this check does not read

        def reported(e: BaselineEntry) -> bool:
            return chosen.enabled(e.rule, e.path) and (excluded is None or not excluded.excludes(e.path))

        unreported = [e for e in base.entries if not reported(e)]
        base = replace(base, entries=tuple(e for e in base.entries if reported(e)))
        candidates, fixed, outcome.moved = check_against_baseline(kept, result.findings, base, inputs.gates)
        # an entry in a file that could not be analysed this time is unknown, not fixed; one
        # matching a finding the audit left out (upstream, checked cheap) is left out, not fixed
        outcome.fixed, kept_out = left_out_entries([e for e in fixed if e.path not in skipped], left_out)
        if kept_out:
            outcome.notes.append(left_out_note(kept_out))
    changed: dict[str, frozenset[int]] | None = None  # None: every file is in the check's scope
    repo, since, since_sha = inputs.repo, inputs.since, inputs.since_sha
    if repo is not None and since_sha is not None:
        try:
            changed = _changed_since(repo, since_sha, path, outcome, result.repositories)
            candidates = _new_since(repo, since_sha, path, config, kept, candidates, outcome, changed)
        except GitError as exc:
            outcome.incomplete.append(f"--since {since}: {exc}")
        except ConfigError as exc:
            outcome.incomplete.append(f"--since {since}: the project configuration at that commit is malformed: {exc}")
    outcome.new = candidates
    if outcome.notes:
        ctx = replace(ctx, notes=ctx.notes + tuple(outcome.notes))
    for e in result.errors:
        if strict or e.kind in INCOMPLETE:
            outcome.incomplete.append(f"{e.path}: {e.kind}: {e.message}")
    if not allow_parse_errors:
        messages.extend(_unparsed_in_scope(result, changed, outcome, strict))

    baseline_text = None
    if update_baseline and base is not None and inputs.baseline_file is not None:
        if outcome.incomplete:
            messages.append("cs-audit: the check did not complete: the baseline was not rewritten")
        else:
            kept_entries = updated_baseline(base, (*result.findings, *left_out), skipped) + unreported
            # the same entries: the file is left as it is (no new commit, no churn in its diffs)
            if sorted(e.fingerprint for e in kept_entries) != sorted(e.fingerprint for e in (*base.entries, *unreported)):
                baseline_text = render_baseline(kept_entries, result.commit)
    return CheckRun(outcome, ctx, tuple(messages), baseline_text)


def _unparsed_in_scope(result: AuditResult, changed: dict[str, frozenset[int]] | None, outcome: CheckOutcome,
                       strict: bool) -> list[str]:
    """A file in the check's scope (changed since ``--since``; every file without it) that
    does not parse makes the check incomplete, named on one line of stderr (returned): its
    findings, and the hot roots it holds, are unknown, as ruff fails on a syntax error."""
    broken = [e for e in result.errors if e.kind in UNPARSED and (changed is None or e.path in changed)]
    if not broken:
        return []
    first = broken[0]
    more = f" (and {plural(len(broken) - 1, 'more file')})" if len(broken) > 1 else ""
    if not strict:  # --strict listed every skipped file already
        outcome.incomplete.extend(f"{e.path}: {e.kind}: {e.message}" for e in broken)
    return [f"cs-audit: {first.path} does not parse ({first.message}){more}: its findings are unknown; "
            "fix it, or pass --allow-parse-errors to check the rest"]


def _changed_since(repo: GitRepo, sha: str, path: Path, outcome: CheckOutcome,
                   repositories: tuple[tuple[str, str | None], ...] = ()) -> dict[str, frozenset[int]]:
    """Lines changed since ``sha`` by path from the scanned root, those of the tree's
    sub-repositories included (each compared on its own: the outer diff holds none of their files)."""
    changed = changed_lines(repo, sha)
    subs = [(p, c) for p, c in repositories if p != "."]
    if subs:
        more, notes = sub_repository_changes(repo, sha, path if path.is_dir() else path.parent, subs)
        changed.update(more)
        outcome.notes.extend(notes)
    return changed


def _new_since(repo: GitRepo, sha: str, path: Path, config: AuditConfig, kept: list[Finding],
               candidates: list[Finding], outcome: CheckOutcome, changed: dict[str, frozenset[int]]) -> list[Finding]:
    """Candidates on ``changed`` lines (since ``sha``) that the audit of ``sha`` did not already have.

    All current (unsuppressed) findings are matched against those of ``sha``, so a copy of
    an existing line is new while the original still pairs with itself."""
    from cs_audit.ci.revisions import TreeAuditor

    candidates = [f for f in candidates if touches(f, changed)]
    if not candidates:
        return candidates  # nothing on a changed line: no need to audit the older tree
    with TreeAuditor(repo, str(path), reuse=False, jobs=config.jobs, exclude=config.exclude) as auditor:
        before = auditor.audit(sha)
        assert auditor.last_rs is not None
        before_ctx = context_for(before, prefix="")
        # what REV had on the upstream's lines counts too: a line the fork took over since is not new for it
        new, _, moved = match_findings(kept, [*before_ctx.suppressed.kept, *before.upstream_findings])
    outcome.moved += moved
    fresh = {id(f) for f in new}
    return [f for f in candidates if id(f) in fresh]
