"""The CI gate: baselines, which findings gate, new/fixed by fingerprint, ``--since``.

* A **baseline** (``cs-audit baseline``) records every finding of a tree by its
  ``fingerprint`` (rule, path, function, normalised code, occurrence: no line numbers,
  so it survives line shifts and unrelated edits).
* A finding is **new** when nothing earlier matches it: first by fingerprint, then
  (for code that moved to another file, e.g. a rename) by rule, function and code.
* **Gating** rules come from ``gates_ci: true`` in ``rules/rules.yaml``; each gates only its
  findings that run by default on a hot path (``hot``: no switch, a hot frequency, a normal
  ``path_kind``).  The project's ``gate`` table and ``--gate RULE:SCOPE`` set one rule's
  scope (``hot``, ``default``: no switch, ``any``, ``off``) and leave the others.
* ``--since REV`` keeps only findings on lines changed since REV (the patch of
  ``git diff -U0 --find-renames REV`` against the work tree, made without git reading
  the work tree or writing the index: ``cs_audit.git.worktree``; untracked files count
  as all-new), and of those only the ones the audit of REV itself did not have.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cs_audit.ci.suppress import apply_suppressions, skipped_notes
from cs_audit.git.changes import ALL, changed_lines, parse_diff, unquote_path  # noqa: F401  (re-exported)
from cs_audit.git.repo import GitError, GitRepo
from cs_audit.model import (
    GATE_SCOPES,
    SUB_REPO,
    UPSTREAM_NOTE,
    AuditResult,
    BaselineEntry,
    Finding,
    Gates,
    Notification,
    ReportContext,
    root_notes,
    tree_notes,
)
from cs_audit.ruleset import RuleSet

BASELINE_VERSION = 1
MAX_BASELINE_BYTES = 64 << 20


class BaselineError(ValueError):
    """The baseline file is missing or malformed (exit code 2)."""


class GateError(ValueError):
    """A ``--gate`` value names no rule (exit code 2)."""


# ---------------------------------------------------------------------------
# which findings gate


def default_gates(rs: RuleSet) -> Gates:
    """The rules with ``gates_ci: true``, each gating its findings that run by default on a hot path."""
    return Gates({r.id: "hot" for r in rs.rules.values() if r.gates_ci})


def parse_gates(values: Sequence[str], rs: RuleSet, configured: Sequence[tuple[str, str]] = (),
                configured_in: str | None = None) -> Gates:
    """The default gates, then the project's ``gate`` table (``configured``), then ``--gate``
    values (repeatable, comma-separated ``RULE[:SCOPE]``, SCOPE one of ``GATE_SCOPES``,
    ``hot`` when left out): each names a rule's scope and leaves the other rules as they are."""
    out = dict(default_gates(rs).rules)
    items = [(rule, scope, f"{configured_in or 'configuration'}: gate") for rule, scope in configured]
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if item:
                rule, _, scope = item.partition(":")
                items.append((rule, scope or "hot", "--gate"))
    for rule, scope, where in items:
        if rule not in rs.rules:
            raise GateError(f"{where}: unknown rule {rule!r}; known: {', '.join(rs.rules)}")
        if scope not in GATE_SCOPES:
            raise GateError(f"{where}: {rule}:{scope}: the scope is one of {', '.join(GATE_SCOPES)}")
        out[rule] = scope
    return Gates({rule: scope for rule, scope in out.items() if scope != "off"})


# ---------------------------------------------------------------------------
# baselines


@dataclass(frozen=True)
class Baseline:
    commit: str | None
    entries: tuple[BaselineEntry, ...]


def entry_of(f: Finding) -> BaselineEntry:
    return BaselineEntry(f.fingerprint, f.rule, f.path, f.line, f.function, f.code)


def render_baseline(entries: Iterable[BaselineEntry], commit: str | None) -> str:
    """The baseline file, entries by fingerprint: code that moves changes no line of it
    but its own entry's (a committed baseline's diffs stay small)."""
    rows = sorted(entries, key=lambda e: (e.fingerprint, e.path, e.rule, e.line))
    doc = {
        "tool": "cs-audit",
        "baseline_version": BASELINE_VERSION,
        "commit": commit,
        "findings": [
            {"fingerprint": e.fingerprint, "rule": e.rule, "path": e.path, "line": e.line,
             "function": e.function, "code": e.code}
            for e in rows
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def load_baseline(path: Path) -> Baseline:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BASELINE_BYTES + 1)
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline; create one with `cs-audit baseline PATH -o {path}`") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BASELINE_BYTES:
        raise BaselineError(f"{path}: larger than {MAX_BASELINE_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("tool") != "cs-audit" or not isinstance(doc.get("findings"), list):
        raise BaselineError(f"{path}: not a cs-audit baseline (expected tool: cs-audit and a findings list)")
    if doc.get("baseline_version") != BASELINE_VERSION:
        raise BaselineError(f"{path}: baseline_version {doc.get('baseline_version')!r} is not {BASELINE_VERSION}")
    entries: list[BaselineEntry] = []
    for i, item in enumerate(doc["findings"]):
        if not isinstance(item, dict) or not isinstance(item.get("fingerprint"), str) or not isinstance(item.get("rule"), str):
            raise BaselineError(f"{path}: findings[{i}] needs string fingerprint and rule")
        line = item.get("line", 0)
        function = item.get("function")
        entries.append(BaselineEntry(
            item["fingerprint"], item["rule"], str(item.get("path", "")), line if isinstance(line, int) else 0,
            function if isinstance(function, str) else None, str(item.get("code", "")),
        ))
    commit = doc.get("commit")
    return Baseline(commit if isinstance(commit, str) else None, tuple(entries))


# ---------------------------------------------------------------------------
# matching


def _norm(code: str) -> str:
    return " ".join(code.split())


def match_findings(current: Sequence[Any], previous: Sequence[Any]) -> tuple[list[Any], list[Any], int]:
    """Pair two lists of findings (or baseline entries).

    First by fingerprint; then the leftovers by (rule, function, normalised code), which
    catches code moved to another file or renamed with its file.  Returns
    ``(new, gone, moved)``: current items with no partner, previous items with no
    partner, and how many pairs the second pass made.
    """
    prev_fps = {p.fingerprint for p in previous}
    cur_fps = {c.fingerprint for c in current}
    new = [c for c in current if c.fingerprint not in prev_fps]
    gone = [p for p in previous if p.fingerprint not in cur_fps]
    pool: dict[tuple[str, str | None, str], list[int]] = {}
    for i, p in enumerate(gone):
        pool.setdefault((p.rule, p.function, _norm(p.code)), []).append(i)
    taken: set[int] = set()
    still_new: list[Any] = []
    for c in new:
        bucket = pool.get((c.rule, c.function, _norm(c.code)))
        if bucket:
            taken.add(bucket.pop(0))
        else:
            still_new.append(c)
    return still_new, [p for i, p in enumerate(gone) if i not in taken], len(taken)


# ---------------------------------------------------------------------------
# --since: lines changed since a revision

def sub_repository_changes(repo: GitRepo, sha: str, root: Path,
                           repositories: Iterable[tuple[str, str | None]]) -> tuple[dict[str, frozenset[int]], list[Notification]]:
    """Lines changed in the files of each sub-repository of the scanned tree (paths from the
    scanned root), and a note on what each was compared with: a submodule with the commit
    ``sha`` pins it at (its own history), a nested repository (no commit of the outer one
    names a state of it) with its own HEAD.  A submodule ``sha`` did not have counts in full."""
    out: dict[str, frozenset[int]] = {}
    notes: list[Notification] = []
    for path, head in repositories:
        if path == "." or head is None:
            continue
        where = root / path
        try:
            sub = GitRepo.open(where)
        except GitError as exc:
            notes.append(Notification(SUB_REPO, path, None, f"not compared: {exc}"))
            continue
        pinned = _pinned(repo, sha, path)
        if pinned == "":
            message, against = "nested repository: no commit of the outer one names a state of it; compared with its own HEAD", head
        elif pinned is None:
            message, against = f"submodule not in {sha[:9]}: every line of its files counts as changed", None
        else:
            try:
                against = sub.verify(pinned)
                message = f"submodule: compared with the commit {sha[:9]} pins it at ({pinned[:9]})"
            except GitError:
                message, against = (f"submodule pinned at {pinned[:9]} in {sha[:9]}, a commit its repository lacks; "
                                    "compared with its own HEAD"), head
        if against is None:
            listed = sub.git("ls-files", "-z", "-co", "--exclude-standard", *sub.pathspec())
            changed = {os.fsdecode(raw): ALL for raw in listed.split(b"\0") if raw}
        else:
            changed = changed_lines(sub, against)
        for rel, lines in changed.items():
            out[f"{path}/{rel}"] = lines
        notes.append(Notification(SUB_REPO, path, None, message, level="note"))
    return out, notes


def _pinned(repo: GitRepo, sha: str, path: str) -> str | None:
    """The commit ``sha`` of the outer repository pins submodule ``path`` at; None when it
    has no gitlink there; "" when the path is no submodule of the outer one at all (a nested
    repository: the outer index has no gitlink for it)."""
    full = f"{repo.base}{path}"
    index = repo.git("ls-files", "-s", "-z", "--", full, check=False)
    if not index.startswith(b"160000 "):
        return ""
    out = repo.git("ls-tree", "-z", "--full-tree", sha, "--", full, check=False)
    meta = out.split(b"\t", 1)[0].split()
    return meta[2].decode("ascii") if len(meta) == 3 and meta[0] == b"160000" else None


def touches(f: Finding, changed: dict[str, frozenset[int]]) -> bool:
    return lines_changed(changed, f.path, f.line, f.end_line)


def lines_changed(changed: dict[str, frozenset[int]], path: str, line: int, end_line: int) -> bool:
    """Whether lines ``line``..``end_line`` of ``path`` are among ``changed``."""
    lines = changed.get(path)
    if not lines:
        return False
    return lines is ALL or any(n in lines for n in range(line, max(line, end_line) + 1))


# ---------------------------------------------------------------------------
# the outcome of a check


def gating_findings(findings: Iterable[Finding], gates: Gates) -> list[Finding]:
    return [f for f in findings if gates.gates(f)]


def check_against_baseline(kept: Sequence[Finding], everything: Sequence[Finding], baseline: Baseline,
                           gates: Gates) -> tuple[list[Finding], list[BaselineEntry], int]:
    """(new gating findings, fixed baseline entries, moved pairs)."""
    new_all, _, _ = match_findings(list(kept), list(baseline.entries))
    new_ids = {id(f) for f in new_all}
    # fixed: entries with no partner among all current findings (suppressed ones are not fixed)
    _, gone, moved = match_findings(list(everything), list(baseline.entries))
    return [f for f in kept if id(f) in new_ids and gates.gates(f)], gone, moved


def left_out_entries(gone: Sequence[BaselineEntry], left_out: Sequence[Finding]) -> tuple[list[BaselineEntry], list[BaselineEntry]]:
    """(fixed, left out) of the baseline entries no reported finding pairs with: an entry that
    pairs with a finding the audit found and left out of its findings (on the upstream's
    lines, or a read checked cheap) is not fixed; it would be back with ``--include-upstream``."""
    _, fixed, _ = match_findings(list(left_out), list(gone))
    fixed_ids = {id(e) for e in fixed}
    return fixed, [e for e in gone if id(e) not in fixed_ids]


def left_out_note(entries: Sequence[BaselineEntry]) -> Notification:
    """What ``check --baseline`` says of the entries ``left_out_entries`` kept from "fixed"."""
    n = len(entries)
    where = ", ".join(sorted({e.path for e in entries})[:3])
    more = ", ..." if len({e.path for e in entries}) > 3 else ""
    return Notification(UPSTREAM_NOTE, "", None,
                        f"{n} baseline entr{'ies' if n != 1 else 'y'} ({where}{more}) match findings this check leaves out "
                        "(on the upstream's lines, or reads checked cheap): left out, not fixed, and kept in the baseline "
                        "(--include-upstream checks them)", "note")


def updated_baseline(baseline: Baseline, everything: Sequence[Finding], skipped: Iterable[str] = ()) -> list[BaselineEntry]:
    """The baseline without its fixed entries.  An entry whose fingerprint still has a
    finding is kept as it was (its line number too: a moved line is no reason to rewrite
    it); one paired with moved code by rule, function and code takes that finding's entry.
    New findings are *not* added.  Entries in ``skipped`` files (not analysed this time)
    are kept as they were."""
    by_fp = {f.fingerprint: f for f in everything}
    skipped = set(skipped)
    entries: list[BaselineEntry] = []
    leftovers: list[BaselineEntry] = []
    for e in baseline.entries:
        if e.path in skipped:
            entries.append(e)
        elif e.fingerprint in by_fp:
            del by_fp[e.fingerprint]
            entries.append(e)
        else:
            leftovers.append(e)
    pool: dict[tuple[str, str | None, str], list[Finding]] = {}
    for f in by_fp.values():
        pool.setdefault((f.rule, f.function, _norm(f.code)), []).append(f)
    for e in leftovers:
        bucket = pool.get((e.rule, e.function, _norm(e.code)))
        if bucket:
            entries.append(entry_of(bucket.pop(0)))
    return entries


# ---------------------------------------------------------------------------
# what the SARIF and GitHub renderers need besides the audit


def repo_prefix(root: Path) -> str:
    """Where ``root`` (or its directory, for a file) sits inside its git repository."""
    try:
        return GitRepo.open(root).base
    except GitError:
        return ""


def context_for(result: AuditResult, prefix: str | None = None) -> ReportContext:
    """What the SARIF, GitHub and check reports need besides the audit: its suppressions
    applied, and where ``result.root`` sits in its repository (``prefix``: given)."""
    sup = apply_suppressions(result)
    root = Path(result.root)
    return ReportContext(repo_prefix(root) if prefix is None else prefix, sup,
                         sup.notes + tuple(skipped_notes(result)) + root_notes(result.roots) + tree_notes(result))
