"""Planning a run: the scan, the targets per file, each rule's transform over each file; and writing."""

from __future__ import annotations

import difflib
from dataclasses import replace

import libcst as cst

from cs_audit.fix.base import FIXABLE, FileFix, FixPlan, Note, Target, Transform
from cs_audit.fix.source import Source, Stale, parse, read_source


def apply(source: Source, targets: dict[str, list[Target]], transforms: dict[str, Transform]) -> FileFix:
    """Run each rule's transform over the file, in ``FIXABLE`` order."""
    out = FileFix(source, source.data)
    try:
        module = parse(source)
    except cst.ParserSyntaxError as exc:
        out.notes.append(Note(source.path, exc.raw_line, "", f"not parsed: {exc.message}"))
        return out
    shifts: list[list[tuple[str, int, int, int, int]]] = []  # each earlier transform's line changes
    for rule in FIXABLE:
        if not targets.get(rule):
            continue
        moved = [_moved(t, shifts) for t in targets[rule]]
        original = {m.line: t.line for m, t in zip(moved, targets[rule])}

        def note(line: int, text: str, rule: str = rule, original: dict[int, int] = original) -> None:
            out.notes.append(Note(source.path, original.get(line, line), rule, text))

        before = module.code
        module, n = transforms[rule](module, moved, note)
        out.fixed += n
        if n:
            shifts.append(difflib.SequenceMatcher(None, before.splitlines(), module.code.splitlines(), autojunk=False).get_opcodes())
    out.new = module.bytes
    return out


def _moved(target: Target, shifts: list) -> Target:
    """The target's lines after the earlier transforms' changes to the file (a line inside a
    changed block goes to the start of the block that replaced it)."""
    line, end = target.line, target.end_line
    for opcodes in shifts:
        line, end = _map_line(line, opcodes), _map_line(end, opcodes)
    return target if (line, end) == (target.line, target.end_line) else replace(target, line=line, end_line=max(end, line))


def _map_line(line: int, opcodes: list) -> int:
    i = line - 1
    for tag, a1, a2, b1, _b2 in opcodes:
        if a1 <= i < a2:
            return (b1 + (i - a1) if tag == "equal" else b1) + 1
    return line


def plan_files(root_abspath: str, by_file: dict[str, dict[str, list[Target]]], stamps: dict[str, tuple[int, int]],
               transforms: dict[str, Transform]) -> FixPlan:
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
            notes.append(Note(path, 0, "", "changed since the scan: not fixed (run fix again)"))
            continue
        fix = apply(source, by_file[path], transforms)
        files.append(fix)
    return FixPlan(files, notes, errors)


def write(plan: FixPlan) -> list[str]:
    """Write every changed file; the paths refused because they changed since they were read."""
    from cs_audit.fix.source import write_atomic

    refused: list[str] = []
    for fix in plan.changed:
        try:
            write_atomic(fix.source, fix.new)
        except Stale:
            refused.append(fix.source.path)
    return refused


def fix_tree(config, rs, rules: tuple[str, ...], hot_only: bool = False, into: str | None = None,
             unsafe: bool = False) -> FixPlan:
    """Scan ``config.root`` and plan the fixes of ``rules`` (nothing is written)."""
    import os

    from cs_audit.api import fix_inputs
    from cs_audit.fix.targets import targets_by_file
    from cs_audit.fix.transforms import transforms_for

    result, facts, stamps = fix_inputs(config, rs)
    root = os.path.abspath(config.root)
    base = root if os.path.isdir(root) else os.path.dirname(root)
    by_file = targets_by_file(result, facts, rules, hot_only, base, into, unsafe)
    return plan_files(base, by_file, stamps, transforms_for(rules, result=result, facts=facts, into=into, unsafe=unsafe))
