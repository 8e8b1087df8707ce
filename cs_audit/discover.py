"""The only filesystem walk: which files a scan reads, and what kind each is.

Inside a git work tree the file list comes from ``git ls-files`` (tracked and
untracked-but-not-ignored); elsewhere from a walk that never follows symlinks.
"""

from __future__ import annotations

import os
import subprocess
from fnmatch import fnmatchcase
from pathlib import Path

from cs_audit.joins.setters import setter_file_kind
from cs_audit.model import FileError, SourceFile

SKIP_DIRS = frozenset({".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".venv", "node_modules", ".hg", ".svn"})
_GIT_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.quotepath=false")


def _git_files(root: Path) -> list[str] | None:
    try:
        proc = subprocess.run(
            ["git", *_GIT_SAFE, "-C", str(root), "ls-files", "-z", "-co", "--exclude-standard", "--", "."],
            capture_output=True, timeout=120, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    out = []
    for raw in proc.stdout.split(b"\0"):
        if raw:
            out.append(os.fsdecode(raw))
    return out


def _walk(root: Path, errors: list[FileError]) -> list[str]:
    out: list[str] = []
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            errors.append(FileError(_rel(root, Path(directory)), "io", f"cannot list directory: {exc.strerror}"))
            continue
        for entry in entries:
            if entry.is_symlink():
                errors.append(FileError(_rel(root, Path(entry.path)), "symlink", "symbolic link: not followed"))
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIP_DIRS:
                    stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                out.append(_rel(root, Path(entry.path)))
    return out


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path != root else "."


def file_kind(relpath: str, head: bytes) -> str | None:
    if relpath.endswith(".py"):
        return "python"
    return setter_file_kind(relpath, head)


def discover(root: Path, excludes: tuple[str, ...] = ()) -> tuple[list[SourceFile], list[FileError]]:
    """Files under ``root`` worth reading, sorted by path, plus what was skipped."""
    errors: list[FileError] = []
    if root.is_file():
        kind = file_kind(root.name, _head(root))
        return ([SourceFile(root.name, str(root), kind)] if kind else []), errors
    listed = _git_files(root)
    relpaths = listed if listed is not None else _walk(root, errors)
    files: list[SourceFile] = []
    for rel in sorted(set(relpaths)):
        if any(part in SKIP_DIRS for part in rel.split("/")[:-1]):
            continue
        if any(fnmatchcase(rel, pattern) or fnmatchcase(rel, pattern.rstrip("/") + "/*") for pattern in excludes):
            continue
        full = root / rel
        if listed is not None and full.is_symlink():
            errors.append(FileError(rel, "symlink", "symbolic link: not followed"))
            continue
        if rel.endswith(".py"):
            files.append(SourceFile(rel, str(full), "python"))
            continue
        name = rel.rsplit("/", 1)[-1]
        if "." in name and not name.startswith(".") and not name.endswith((".sh", ".bash", ".env", ".mk", ".yml", ".yaml", ".dockerfile")):
            continue  # a data or source file of another language: no setters in it
        kind = file_kind(rel, _head(full))
        if kind:
            files.append(SourceFile(rel, str(full), kind))
    return files, errors


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(256)
    except OSError:
        return b""
