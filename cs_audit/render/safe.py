"""Text of the scanned tree shown where it could act: control, C1 and bidi characters
escaped (`\\x1b`, `\\u202e`), so a file name or a line of code cannot clear a terminal, set its
title, forge a CI log line or reverse what a page shows. No imports: a warm scan's outputs
use it without loading the analysis."""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(text: object) -> str:
    """One line of terminal text: control and bidi characters escaped (``\\x0a``, ``\\u202e``)."""
    return _UNSAFE.sub(_shown, str(text))


#: ``_UNSAFE`` less the tab and line feed a block of text keeps
_UNSAFE_IN_BLOCK = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(text: object, keep_cr: bool = False) -> str:
    """Lines of text (a diff, a code snippet) with every other control and bidi character
    escaped as ``plain`` does: an ESC or an RLO in the scanned tree cannot reach a terminal,
    a CI log or a page as itself."""
    if keep_cr:  # a workflow command encodes carriage returns itself
        return _UNSAFE_IN_BLOCK.sub(lambda m: m.group() if m.group() == "\r" else _shown(m), str(text))
    return _UNSAFE_IN_BLOCK.sub(_shown, str(text))
