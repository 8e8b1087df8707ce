"""What discovery finds in a scanned tree: its files, the repositories it holds, and the
files it could not read.  Kept apart from ``cs_audit.model``: a scan served from the cache
needs these and nothing else of the model, whose import is a good part of a warm scan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cs_audit.records import record

ErrorKind = Literal[
    "syntax", "encoding", "binary", "too-large", "io", "symlink",
    "parser-crash", "timeout", "internal", "submodule",
]


@record
@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file found by discovery; ``path`` is POSIX and relative to the root."""

    path: str
    abspath: str
    kind: str  # "python" | "shell" | "dotenv" | "docker" | "make" | "ci"


@record
@dataclass(frozen=True, slots=True)
class FileError:
    path: str
    kind: ErrorKind
    message: str


@record
@dataclass(frozen=True, slots=True)
class Repository:
    """A git repository inside the scanned tree whose files discovery listed with its own
    ``git ls-files``: ``path`` from the scanned root, ``kind`` ``submodule`` or ``nested``."""

    path: str
    kind: str


#: the Python files of an ignored folder are counted up to this many
IGNORED_FILES_COUNTED = 1000


@record
@dataclass(frozen=True, slots=True)
class IgnoredFolder:
    """A folder that the ``.gitignore`` of the repository holding it lists.  ``repository``:
    it is a git repository of its own (or holds one), entered and scanned all the same, with
    its own ``.gitignore``; otherwise it was not scanned, and ``python_files`` counts the
    Python files in it (at most ``IGNORED_FILES_COUNTED``)."""

    path: str
    repository: bool
    python_files: int = 0
