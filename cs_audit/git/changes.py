"""Lines of a work tree changed since a commit: ``git diff -U0`` read into line numbers
(``check --since``, and the fork's own lines since its upstream's revision)."""

from __future__ import annotations

import os
import re

from cs_audit.git.repo import GitError, GitRepo
from cs_audit.git.worktree import worktree_patch

#: a path mapped to ALL had every line changed (an untracked or added file)
ALL: frozenset[int] = frozenset({-1})
_HUNK = re.compile(rb"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {b"a": 7, b"b": 8, b"t": 9, b"n": 10, b"v": 11, b"f": 12, b"r": 13, b'"': 34, b"\\": 92}


def unquote_path(raw: bytes) -> bytes:
    """Undo git's C-style quoting of a path in diff headers (``"a\\tb"``, octal escapes)."""
    if not (raw.startswith(b'"') and raw.endswith(b'"') and len(raw) >= 2):
        return raw
    body, out, i = raw[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i:i + 1]
        if ch == b"\\" and i + 1 < len(body):
            nxt = body[i + 1:i + 2]
            octal = body[i + 1:i + 4]
            if len(octal) == 3 and all(0x30 <= c <= 0x37 for c in octal):
                out.append(int(body[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, nxt[0]))
            i += 2
            continue
        out += ch
        i += 1
    return bytes(out)


def parse_diff(patch: bytes) -> dict[str, set[int]]:
    """``git diff -U0`` output -> new path -> added/changed line numbers (new side).

    A file renamed without edits has no hunks and so no changed lines; a file whose
    new side is ``/dev/null`` (deleted) is left out.
    """
    changed: dict[str, set[int]] = {}
    current: str | None = None
    lines = patch.split(b"\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith(b"diff --git "):
            current = None
        elif line.startswith(b"+++ "):
            target = unquote_path(line[4:].rstrip(b"\t"))
            current = None if target == b"/dev/null" else os.fsdecode(target[2:] if target.startswith(b"b/") else target)
            if current is not None:
                changed.setdefault(current, set())
        elif line.startswith(b"@@ ") and current is not None:
            m = _HUNK.match(line)
            if not m:
                continue
            old_n = int(m.group(1)) if m.group(1) is not None else 1
            start = int(m.group(2))
            new_n = int(m.group(3)) if m.group(3) is not None else 1
            changed[current].update(range(start, start + new_n))
            # skip the hunk body by count, so a removed line that reads "--- x" or "+++ y"
            # is never taken for a header
            remaining = old_n + new_n
            while remaining > 0 and i < len(lines):
                body = lines[i]
                i += 1
                if body.startswith(b"\\"):
                    continue
                remaining -= 1
    return changed


#: the options of every diff read here: hunks without context, renames followed, no filters
_DIFF = ("-r", "-p", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames",
         "--src-prefix=a/", "--dst-prefix=b/", "--ignore-submodules")


def _under_base(repo: GitRepo, patch: bytes) -> dict[str, frozenset[int]]:
    """The changed lines of ``patch`` by path from the scanned base."""
    return {path[len(repo.base):]: frozenset(lines) for path, lines in parse_diff(patch).items() if path.startswith(repo.base)}


def commit_lines(repo: GitRepo, old: str, new: str) -> dict[str, frozenset[int]]:
    """Root-relative path -> lines commit ``new`` changed since commit ``old`` (every line of
    a file added since)."""
    return _under_base(repo, repo.git("diff-tree", *_DIFF, old, new, *repo.pathspec()))


def changed_lines(repo: GitRepo, sha: str) -> dict[str, frozenset[int]]:
    """Root-relative path -> lines changed between commit ``sha`` and the work tree."""
    if repo.bare:
        raise GitError(f"{repo.toplevel} is a bare repository: --since compares with a work tree")
    # not `git diff <sha>`: it rewrites .git/index when tracked files are only stat-dirty
    out = _under_base(repo, worktree_patch(repo.toplevel, sha, repo.pathspec(), _DIFF))
    untracked = repo.git("ls-files", "-z", "--others", "--exclude-standard", *repo.pathspec())
    for raw in untracked.split(b"\0"):
        path = os.fsdecode(raw)
        if raw and path.startswith(repo.base):
            out[path[len(repo.base):]] = ALL
    return out
