"""Per-file facts of the files that may read what a scan's writers write: the file
names and globs a file mentions, and the words shell pipelines ``grep`` for.  The join
with the writers is ``cs_audit.joins.readers``."""

from __future__ import annotations

import re

from cs_audit.model import ScriptFacts

FILE_REF = re.compile(
    r"[A-Za-z0-9_*?{}\[\]\-.$]*[A-Za-z0-9_*}\]]\.(?:jsonl|json|pt|pth|csv|log|txt|npy|npz|pkl|pickle|parquet|tsv)\b"
)
GREP = re.compile(r"\b(?:grep|egrep|fgrep|zgrep|rg)\b((?:\s+-{1,2}[\w-]+(?:=\S+)?)*)\s+(['\"]?)([^'\"\s|;&]+)\2")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


#: the extension part of FILE_REF: every match holds one, and a match never spans lines
_FILE_EXT = re.compile(r"\.(?:jsonl|json|pt|pth|csv|log|txt|npy|npz|pkl|pickle|parquet|tsv)\b")


def file_refs(text: str) -> tuple[tuple[int, str], ...]:
    """(line, base name) of every file name or glob the text mentions.

    FILE_REF backtracks over every identifier run, so it only runs on the lines that
    hold an extension (``_FILE_EXT``, a fast scan): the same matches, in the same order."""
    out = []
    line, counted, pos, size = 1, 0, 0, len(text)
    search = _FILE_EXT.search
    while True:
        hit = search(text, pos)
        if hit is None:
            break
        begin = text.rfind("\n", 0, hit.start()) + 1
        end = text.find("\n", hit.end())
        if end == -1:
            end = size
        for match in FILE_REF.finditer(text, begin, end):
            name = match.group().rsplit("/", 1)[-1]
            if name.strip("*.?") and not name.startswith("."):
                start = match.start()
                line += text.count("\n", counted, start)
                counted = start
                out.append((line, name))
        pos = end + 1
        if pos >= size:
            break
    return tuple(dict.fromkeys(out))


def grep_patterns(text: str) -> tuple[tuple[int, str], ...]:
    return tuple((_line_of(text, m.start()), m.group(3)) for m in GREP.finditer(text) if len(m.group(3)) >= 4)


#: commands that start another program: a file named in their arguments is handed on to it
#: (`python analyze.py --in accept_rate.jsonl`), which the script itself does not read
LAUNCHERS = frozenset({
    "python", "python3", "torchrun", "deepspeed", "accelerate", "srun", "mpirun", "bash", "sh", "uv", "exec",
})
_WRAPPERS = frozenset({"nohup", "time", "env", "exec", "sudo", "timeout"})
_SEGMENTS = re.compile(r"\|\|?|&&|;")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _hands_on(segment: str, name: str) -> bool:
    """Whether ``name`` is an argument of a command that runs another program (not fed
    through ``<``)."""
    words = segment.split()
    while words and (_ASSIGN.match(words[0]) or words[0] in _WRAPPERS or words[0].lstrip("-").isdigit()):
        words = words[1:]
    if not words:
        return False
    command = words[0].rsplit("/", 1)[-1]
    launched = command in LAUNCHERS or command.startswith("python") or command.endswith((".py", ".sh"))
    before = segment[: segment.find(name)] if name in segment else segment
    return launched and "<" not in before


def passed_on(text: str, refs: tuple[tuple[int, str], ...]) -> tuple[tuple[int, str], ...]:
    """The refs of ``refs`` that a shell line hands on to another program."""
    lines = text.split("\n")
    out = []
    for line, name in refs:
        source = lines[line - 1] if 0 < line <= len(lines) else ""
        segment = next((s for s in _SEGMENTS.split(source) if name in s), source)
        if _hands_on(segment, name):
            out.append((line, name))
    return tuple(out)


def script_facts(path: str, text: str, setters) -> ScriptFacts:
    refs = file_refs(text)
    handed = set(passed_on(text, refs))
    return ScriptFacts(path=path, setters=tuple(setters), file_refs=tuple(r for r in refs if r not in handed),
                       greps=grep_patterns(text))
