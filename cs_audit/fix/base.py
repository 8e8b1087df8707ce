"""The types every fix shares: a target, a note, a file's fix and the plan of a run."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from cs_audit.fix.source import Source

#: the rules that have a fix, in the order their transforms run on a file
FIXABLE = ("eager-format", "env-read-hot", "redundant-flush", "per-call-open", "duplicate-helper")
#: what ``fix`` runs without ``--rule`` (replacing copies by imports is asked for by name)
DEFAULT_RULES = ("eager-format", "env-read-hot", "redundant-flush")


@dataclass(frozen=True)
class Target:
    """One site a transform should change: where the scan saw it and what it knows of it."""

    rule: str
    line: int
    end_line: int
    col: int  # 0-based, as the facts give it
    callee: str
    #: rule-specific: the log level, the helper's predicate, the env var...
    data: tuple = ()


@dataclass(frozen=True)
class Note:
    path: str
    line: int
    rule: str
    text: str


@dataclass
class FileFix:
    source: Source
    new: bytes
    notes: list[Note] = field(default_factory=list)
    fixed: int = 0  # sites changed

    @property
    def changed(self) -> bool:
        return self.new != self.source.data

    def diff(self, prefix: str = "") -> str:
        """The unified diff, its headers ``a/`` and ``b/`` then ``prefix`` and the path in the
        scanned tree (``prefix``: where that tree sits in its repository, so that ``git apply``
        from the repository's top takes it)."""
        old = self.source.data.decode("utf-8", "surrogateescape").splitlines(keepends=True)
        new = self.new.decode("utf-8", "surrogateescape").splitlines(keepends=True)
        path = prefix + self.source.path
        return "".join(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}"))

    def changed_lines(self) -> int:
        old = self.source.data.decode("utf-8", "surrogateescape").splitlines()
        new = self.new.decode("utf-8", "surrogateescape").splitlines()
        return sum(1 for line in difflib.unified_diff(old, new, lineterm="", n=0)
                   if line[:1] in "+-" and not line.startswith(("+++", "---")))


@dataclass
class FixPlan:
    files: list[FileFix]
    notes: list[Note]  # notes not tied to a changed file (declines, stale files)
    errors: list[str]
    #: what the run left alone as the upstream's ("" when nothing)
    left_alone: str = ""

    @property
    def changed(self) -> list[FileFix]:
        return [f for f in self.files if f.changed]


#: a transform: the module, its targets, a note sink -> the new module and how many sites it changed
Transform = Callable[[cst.Module, list[Target], Callable[[int, str], None]], tuple[cst.Module, int]]

