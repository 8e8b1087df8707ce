"""In-source suppression comments: ``# cs-audit: ignore[rule-id] reason``.

A suppression sits in a comment on the finding's line or on the first line of the
statement that holds it, names one or more rule ids (``ignore[a, b]``) and gives a
reason after the bracket.  ``# cs-audit: ignore-file[rule-id] reason``, on any line,
silences those rules in the whole file.  It is read with ``tokenize`` (so text inside strings never
counts) and only in files that contain the marker at all.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import replace

from cs_audit.model import Suppression
from cs_audit.pyast import parse_quietly

MARKER = b"cs-audit"
_DIRECTIVE = re.compile(r"#\s*cs-audit\s*:\s*(?P<body>.*)$")
_IGNORE = re.compile(r"^ignore(?P<file>-file)?\s*(?:\[(?P<rules>[^\]]*)\])?(?P<reason>.*)$")
_REASON_LEAD = " \t:;,-\u2013\u2014"

def parse_comment(path: str, line: int, comment: str, known: Iterable[str]) -> Suppression | None:
    """The suppression in one comment token, or None when it holds no ``cs-audit:``."""
    m = _DIRECTIVE.search(comment)
    if not m:
        return None
    body = m.group("body").strip()
    ig = _IGNORE.match(body)
    if not ig:
        return Suppression(path, line, (), "", f"unknown directive {body[:40]!r}: write `# cs-audit: ignore[rule-id] reason`")
    whole = ig.group("file") is not None
    directive = "ignore-file" if whole else "ignore"
    raw_rules = ig.group("rules")
    reason = ig.group("reason").strip().lstrip(_REASON_LEAD).strip()
    rules = tuple(r.strip() for r in (raw_rules or "").split(",") if r.strip())
    if not rules:
        return Suppression(path, line, (), reason, f"names no rule: write `# cs-audit: {directive}[rule-id] reason`", whole_file=whole)
    known = set(known)
    unknown = [r for r in rules if r not in known]
    if unknown:
        return Suppression(path, line, rules, reason, f"unknown rule id {', '.join(unknown)}", whole_file=whole)
    if not reason:
        return Suppression(path, line, rules, "", "no reason given: say why after the bracket", whole_file=whole)
    return Suppression(path, line, rules, reason, whole_file=whole)


def suppressions_in(path: str, data: bytes, known: Iterable[str], tree: ast.Module | None = None) -> list[Suppression]:
    """Every ``cs-audit:`` comment of one Python file (tokenized: strings never count), each
    with the lines it covers (``tree``: the file's module, when already parsed)."""
    if MARKER not in data:
        return []
    known = tuple(known)
    out: list[Suppression] = []
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type == tokenize.COMMENT and "cs-audit" in tok.string:
                found = parse_comment(path, tok.start[0], tok.string, known)
                if found is not None:
                    out.append(found)
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, ValueError):
        return out  # a file that does not tokenize has no findings either
    if not out:
        return out
    starts = statement_starts_of(tree) if tree is not None else statement_starts(data)
    covered: dict[int, list[int]] = {}
    for line, start in sorted(starts.items()):
        covered.setdefault(start, []).append(line)
    return [replace(s, covers=tuple(covered.get(s.line, ()))) for s in out]


def statement_starts(data: bytes) -> dict[int, int]:
    """line -> first line of the innermost statement that holds it."""
    try:
        tree = parse_quietly(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    return statement_starts_of(tree)


def statement_starts_of(tree: ast.Module) -> dict[int, int]:
    """line -> first line of the innermost statement of ``tree`` that holds it."""
    spans: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.end_lineno is not None:
            spans.append((node.lineno, node.end_lineno))
    # widest first, so the innermost statement writes last
    spans.sort(key=lambda s: (-(s[1] - s[0]), s[0]))
    first: dict[int, int] = {}
    for start, end in spans:
        for line in range(start, end + 1):
            first[line] = start
    return first
