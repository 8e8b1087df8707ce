"""Which lines of a file hold a token worth a closer look: the libcst walk's tokens
(``SNIPPET_TOKENS``) and the literals that find them, counted per line as prefix sums."""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate

#: statements holding one of these get the libcst walk
SNIPPET_TOKENS = re.compile(
    r"environ|getenv|putenv|envs\.|logg|\blog\.|_log\b|log_|print|\.write\(|dump|save\(|\.item\(|\.cpu\(|tolist\(|\.numpy\(|"
    r"synchroni[sz]e|open\(|flush\(|strftime|datetime|time_ns|makedirs|mkdir|trace|diag|debug|[\"']cpu[\"']|"
    r"path\.join|\.jsonl|\.pt\b"
)
#: literal substrings of SNIPPET_TOKENS: a line matches the pattern only if it holds one; a
#: literal marked True implies a match, the others are confirmed with the pattern on the line.
#: One literal may stand for several alternatives ("env": environ, getenv, putenv, envs.):
#: each literal costs a scan of the whole file, a confirmation only a line.
_TOKEN_LITERALS: tuple[tuple[str, bool], ...] = (
    ("env", False), ("log", False), ("print", True), (".write(", True),
    ("dump", True), ("save(", True), (".item(", True), ("cpu", False), ("tolist(", True), (".numpy(", True),
    ("synchroni", False), ("open(", True), ("flush(", True), ("time", False),
    ("makedirs", True), ("mkdir", True), ("trace", True), ("diag", True), ("debug", True),
    ("path.join", True), (".jsonl", True), (".pt", False),
)


@lru_cache(maxsize=8)
def snippet_literals(api: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, bool], ...]:
    """The extractor's own literals, and for each API of the rule set (``RuleSet.api_literals``)
    whose uses SNIPPET_TOKENS does not already match, its shortest form as a literal that
    matches by itself: an API added to the rules is walked wherever it is used."""
    extra: list[str] = []
    for forms in api:
        if any(SNIPPET_TOKENS.search(form) for form in forms):
            continue
        shortest = min(forms, key=len)
        if shortest and not any(known in shortest for known in extra):
            extra.append(shortest)
    return _TOKEN_LITERALS + tuple((literal, True) for literal in sorted(extra))


#: what a comprehension or an assignment expression writes: without one on its lines, an
#: expression stores no name (``StoredNames``)
STORING_LITERALS = (("for", True), (":=", True))


def line_prefix(lines: list[str], text: str, starts: list[int], pattern: re.Pattern[str],
                literals: tuple[tuple[str, bool], ...]) -> list[int]:
    """prefix[i]: how many of the first i ``lines`` (of ``text``, starting at ``starts``) hold a
    match of ``pattern``.  Every match holds one of ``literals`` (found with ``str.find``, much
    faster than the pattern's scan); a line holding a literal marked False is confirmed with
    the pattern."""
    n = len(lines)
    flags = bytearray(n)
    checked = bytearray(n)
    search = pattern.search
    for literal, exact in literals:
        find = text.find
        pos = find(literal)
        while pos != -1:
            line = bisect_right(starts, pos) - 1
            if not flags[line]:
                if exact:
                    flags[line] = 1
                elif not checked[line]:
                    checked[line] = 1
                    if search(lines[line]) is not None:
                        flags[line] = 1
            if line + 1 >= n:
                break
            pos = find(literal, starts[line + 1])
    return list(accumulate(flags, initial=0))
