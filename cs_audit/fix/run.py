"""Planning a run: the scan, the targets per file, each rule's transform over each file; and writing."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import replace

import libcst as cst

from cs_audit.fix.base import FIXABLE, FileFix, FixPlan, Note, Target, Transform
from cs_audit.fix.source import Source, parse, read_source
from cs_audit.frequency import is_hot


def apply(source: Source, targets: dict[str, list[Target]], transforms: dict[str, Transform],
          own: Callable[[int], bool] | None = None) -> FileFix:
    """Run each rule's transform over the file, in ``FIXABLE`` order.  ``own``: whether a
    line of the file (1-based, as read) is the fork's own (None: every line is); a
    transform whose change of the file reaches beyond those lines is undone and noted."""
    out = FileFix(source, source.data)
    try:
        module = parse(source)
    except cst.ParserSyntaxError as exc:
        out.notes.append(Note(source.path, exc.raw_line, "", f"not parsed: {exc.message}"))
        return out
    first = module.code
    edits: list[_Edit] = []  # each earlier transform's change of the file
    for rule in FIXABLE:
        if not targets.get(rule):
            continue
        moved = [_moved(t, edits) for t in targets[rule]]
        original = {m.line: t.line for m, t in zip(moved, targets[rule])}

        def note(line: int, text: str, rule: str = rule, original: dict[int, int] = original) -> None:
            out.notes.append(Note(source.path, original.get(line, line), rule, text))

        before, kept = module.code, module
        module, n = transforms[rule](module, moved, note)
        if n and own is not None:
            outside = _beyond(first, module.code, own)
            if outside:
                module, n = kept, 0
                for t in targets[rule]:
                    out.notes.append(Note(source.path, t.line, rule, f"left alone: its fix would also edit the upstream's lines "
                                          f"(at line {outside}; --include-upstream makes it)"))
        out.fixed += n
        if n:
            edits.append(_Edit(before, module.code))
    out.new = module.bytes
    return out


def _beyond(first: str, now: str, own: Callable[[int], bool]) -> int:
    """The first line of ``first`` (1-based) that the change to ``now`` rewrites or removes
    and is not ``own``, or next to which it adds lines with neither neighbour ``own``; 0 when
    the change keeps to own lines."""
    old, new = _LINE.findall(first), _LINE.findall(now)
    for tag, a1, a2, _b1, _b2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert":
            if not (own(a1) or own(a1 + 1)):
                return max(a1, 1)
            continue
        bad = next((n for n in range(a1 + 1, a2 + 1) if not own(n)), 0)
        if bad:
            return bad
    return 0


#: a line with its own ending, as Python counts lines (a form feed does not end one)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
#: past this length a line's columns are not diffed (character diffs grow with the square)
_LONGEST_DIFFED_LINE = 2000


class _Edit:
    """One transform's change of a file, to follow a position from the text before it into
    the text after: an unchanged line moves whole; a line of a rewritten stretch goes to the
    most alike line of what replaced it (a wrapped statement, a message split over lines),
    and its column with the characters around it."""

    def __init__(self, before: str, after: str) -> None:
        self.old, self.new = _LINE.findall(before), _LINE.findall(after)
        self.blocks = difflib.SequenceMatcher(None, self.old, self.new, autojunk=False).get_opcodes()

    def where(self, line: int, col: int, at_least: int = 1) -> tuple[int, int]:
        """(line, col) after the change of the 1-based ``line`` and 0-based ``col``; a line of
        a rewritten stretch is taken at ``at_least`` or below (a statement's end below its start)."""
        i = line - 1
        for tag, a1, a2, b1, b2 in self.blocks:
            if not a1 <= i < a2:
                continue
            if tag == "equal":
                return b1 + i - a1 + 1, col
            candidates = range(max(b1, at_least - 1), b2)
            if not candidates:  # the line is gone, or what replaced it ends above ``at_least``
                return max(b2 + 1, at_least), 0
            text = self.old[i].strip()
            j = max(candidates, key=lambda k: (difflib.SequenceMatcher(None, text, self.new[k].strip()).ratio(), -k))
            return j + 1, _column(self.old[i], self.new[j], col)
        return line, col


def _column(old: str, new: str, col: int) -> int:
    """Where the character at ``col`` of ``old`` is in ``new``: at the same offset into an
    unchanged run of characters, else where the changed run starts."""
    if max(len(old), len(new)) > _LONGEST_DIFFED_LINE:
        return 0
    for tag, c1, c2, d1, _d2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if c1 <= col < c2:
            return d1 + (col - c1 if tag == "equal" else 0)
    return len(new.rstrip("\r\n"))


def _moved(target: Target, edits: list[_Edit]) -> Target:
    """The target's position after the earlier transforms' changes to the file."""
    line, col, end = target.line, target.col, target.end_line
    for edit in edits:
        line, col = edit.where(line, col)
        end = max(edit.where(end, 0, at_least=line)[0], line)
    moved = (line, col, end)
    return target if moved == (target.line, target.col, target.end_line) else replace(target, line=line, col=col, end_line=end)


def plan_files(root_abspath: str, by_file: dict[str, dict[str, list[Target]]], stamps: dict[str, tuple[int, int]],
               transforms: dict[str, Transform], own: Callable[[str, int, int], bool] | None = None) -> FixPlan:
    import os

    files: list[FileFix] = []
    notes: list[Note] = []
    errors: list[str] = []
    for path in sorted(by_file):
        abspath = os.path.join(root_abspath, path)
        try:
            source = read_source(path, abspath)
        except OSError as exc:
            errors.append(f"{path}: {exc.strerror or exc}")
            continue
        if path in stamps and stamps[path] != source.stamp:
            errors.append(f"{path}: changed since the scan: not fixed (run fix again)")
            continue
        lines = None if own is None else (lambda n, path=path: own(path, n, n))
        fix = apply(source, by_file[path], transforms, lines)
        files.append(fix)
    return FixPlan(files, notes, errors)


def write(plan: FixPlan) -> list[tuple[str, str]]:
    """Write every changed file, going on past one that cannot be: (path, why) of each file
    left as it was."""
    from cs_audit.fix.source import LeftAlone, write_atomic

    left: list[tuple[str, str]] = []
    for fix in plan.changed:
        try:
            write_atomic(fix.source, fix.new)
        except LeftAlone as exc:
            left.append((fix.source.path, str(exc)))
        except OSError as exc:
            left.append((fix.source.path, f"not written: {exc.strerror or exc}"))
    return left


def _own_lines(config, result, base: str):
    """Whether lines of a file are the fork's own, when the tree names an upstream (None:
    every line is, or ``--include-upstream``)."""
    if not result.upstream or config.include_upstream:
        return None
    from pathlib import Path

    from cs_audit.api import upstream_origins
    from cs_audit.git.upstream import OWN

    origins = upstream_origins(Path(base), result.repositories, config)
    if not origins.known:
        return None
    return lambda path, line, end: origins.of(path, line, end) == OWN


def _changed_since(since: str, result, base: str):
    """Whether lines of a file changed since revision ``since`` (those of the sub-repositories
    compared as ``check --since`` compares them)."""
    from pathlib import Path

    from cs_audit.ci.gate import changed_lines, lines_changed, sub_repository_changes
    from cs_audit.git.repo import GitRepo

    repo = GitRepo.open(Path(base))
    sha = repo.verify(since)
    changed = changed_lines(repo, sha)
    subs = [(p, c) for p, c in result.repositories if p != "."]
    if subs:
        changed.update(sub_repository_changes(repo, sha, Path(base), subs)[0])
    return lambda path, line, end: lines_changed(changed, path, line, end)


def fix_tree(config, rs, rules: tuple[str, ...], hot_only: bool = False, into: str | None = None,
             unsafe: bool = False, since: str | None = None) -> FixPlan:
    """Scan ``config.root`` and plan the fixes of ``rules`` (nothing is written).  ``since``:
    only targets on lines changed since that revision (raises ``GitError``)."""
    import os

    from cs_audit.api import fix_inputs
    from cs_audit.fix.targets import targets_by_file
    from cs_audit.fix.transforms import transforms_for

    result, facts, stamps = fix_inputs(config, rs)
    root = os.path.abspath(config.root)
    base = root if os.path.isdir(root) else os.path.dirname(root)
    own = _own_lines(config, result, base)
    changed = _changed_since(since, result, base) if since else None
    # (path, line) of each site left alone on the upstream's lines: its findings the scan left
    # out, and the targets found beside the findings (every eager log call)
    upstream = {(f.path, f.line) for f in result.upstream_findings
                if f.rule in rules and (not hot_only or is_hot(f.frequency)) and (changed is None or changed(f.path, f.line, f.end_line))}

    def wanted(path: str, line: int, end: int) -> bool:
        if changed is not None and not changed(path, line, end):
            return False
        if own is not None and not own(path, line, end):
            upstream.add((path, line))
            return False
        return True

    by_file = targets_by_file(result, facts, rules, hot_only, base, into, unsafe,
                              wanted if own is not None or changed is not None else None)
    plan = plan_files(base, by_file, stamps, transforms_for(rules, result=result, facts=facts, into=into, unsafe=unsafe), own)
    if upstream and own is not None:
        files = len({path for path, _ in upstream})
        plan.left_alone = (f"left alone, the upstream's: {len(upstream)} site{'s' if len(upstream) != 1 else ''} on its lines "
                           f"in {files} file{'s' if files != 1 else ''} (--include-upstream fixes them too)")
    # the scan does not follow a symlink: its file or folder goes unfixed, said once
    plan.notes.extend(Note(e.path, 0, "", "a symlink: not followed, not fixed") for e in result.errors
                      if e.kind == "symlink" and (e.path.endswith(".py") or os.path.isdir(os.path.join(base, e.path))))
    return plan
