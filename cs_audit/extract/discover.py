"""The only filesystem walk: which files a scan reads, and what kind each is.

Inside a git work tree the file list comes from ``git ls-files`` (tracked and
untracked-but-not-ignored); elsewhere (and when the root itself is ignored by an
enclosing repository) from a walk.  A submodule (a gitlink that is checked out) and a
nested repository (a directory with its own ``.git``, file or directory) are entered and
listed with their own ``git ls-files``, so their own ``.gitignore`` applies, also when the
``.gitignore`` of the repository holding them lists them (a fork's outer repository that
ignores its engine's checkout): what an enclosing repository ignores is not ignored by the
inner one.  A listed folder holding no repository is not scanned, and is named with its
Python files counted (``Discovered.ignored``, a note of the report).  A submodule
that is not checked out is an error entry (kind ``submodule``), never skipped silently.  Neither follows symlinks: a link met on the
way is listed as a skipped ``symlink`` (so ``a -> .`` cannot loop and nothing
outside the root is read).  Discovery only reads: ``git`` runs with optional
locks off (no index refresh), through ``cs_audit.git.runner``.

Paths are POSIX and relative to the root.  A name that is not valid UTF-8 keeps
its real bytes in ``SourceFile.abspath`` (``os.fsdecode``, surrogateescape) for
reading, and is shown in ``SourceFile.path`` (and so in every report) with each
undecodable byte written as ``\\xNN``: ``caf\\xe9.py`` for the latin-1 name
``café.py``, so reports are always valid UTF-8.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from cs_audit.extract.excludes import ExcludeMatcher, exclude_matcher
from cs_audit.files import read_regular
from cs_audit.git import runner
from cs_audit.sources import IGNORED_FILES_COUNTED, FileError, IgnoredFolder, Repository, SourceFile

SKIP_DIRS = frozenset({".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".venv", "node_modules", ".hg", ".svn"})


def _git(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, bytes] | None:
    code, out, _ = runner.run(root, args, env=env, timeout=120)
    return None if code in (124, 127) else (code, out)


def git_head(root: Path) -> str | None:
    """The commit HEAD names in the git work tree holding directory ``root``; None outside
    a work tree (or in a bare repository), before the first commit, or without git.  One
    ``git rev-parse``: a scan with history off needs no more of git than this."""
    if not root.is_dir():
        return None
    proc = _git(root, "rev-parse", "--is-inside-work-tree", "HEAD^{commit}")
    if proc is None or proc[0] != 0:
        return None
    lines = proc[1].decode("ascii", "replace").split()
    if len(lines) != 2 or lines[0] != "true" or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", lines[1]):
        return None
    return lines[1]


#: sub-repositories entered below sub-repositories at most this deep (a loop of gitdir files)
MAX_REPO_DEPTH = 8
#: a ``.git`` file holds one line, ``gitdir: PATH``
MAX_GITFILE_BYTES = 4096


def outside_git_dir(top: Path, root: Path) -> str | None:
    """Where the git directory of the work tree at ``top`` is, relative to the scanned
    ``root``, when it lies outside ``root``: ``.git`` a file naming it (``gitdir: PATH``, as
    a worktree's or a submodule's is) or a symlink to it.  Git reads that repository's
    commits for this tree.  None for a ``.git`` directory, or a target inside ``root``.
    Read here, not asked of git: nothing of that repository runs to find it."""
    dot_git = os.path.join(os.fspath(top), ".git")
    try:
        mode = os.lstat(dot_git).st_mode
        if stat.S_ISREG(mode):
            # git strips trailing whitespace and reads a relative path from the file's folder
            text = read_regular(dot_git, MAX_GITFILE_BYTES).decode("utf-8", "surrogateescape").rstrip()
            if not text.startswith("gitdir: "):
                return None
            target = os.path.join(os.fspath(top), text[len("gitdir: "):])
        elif stat.S_ISLNK(mode):
            target = dot_git
        else:
            return None
    except OSError:
        return None
    real_target, real_root = os.path.realpath(target), os.path.realpath(root)
    if os.path.commonpath([real_target, real_root]) == real_root:
        return None
    return display_path(os.path.relpath(real_target, real_root))



def _git_files(root: Path) -> list[str] | None:
    proc = _git(root, "ls-files", "-z", "-co", "--exclude-standard", "--", ".")
    if proc is None or proc[0] != 0:
        return None
    # a nested repository is listed as ``dir/``, a gitlink (submodule) as ``dir``: both kept
    out = [os.fsdecode(raw) for raw in proc[1].split(b"\0") if raw]
    if not out:
        # check-ignore refuses literal pathspecs ("." is no file name to escape here)
        ignored = _git(root, "check-ignore", "-q", "--", ".", env={"GIT_LITERAL_PATHSPECS": "0"})
        if ignored is not None and ignored[0] == 0:
            return None  # the root is ignored by an enclosing repository: the user asked for it, walk it
    return out


def display_path(rel: str) -> str:
    """``rel`` as reports show it: valid UTF-8, undecodable bytes as ``\\xNN``."""
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:
        return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _walk(root: Path, errors: list[FileError]) -> list[str]:
    """Every non-directory entry under ``root`` (regular or not); symlinks are listed as skipped."""
    out: list[str] = []
    top = os.fspath(root)
    prefix = len(top.rstrip(os.sep)) + 1  # relative paths are the entry paths past this
    stack = [top]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError as exc:
            errors.append(FileError(display_path(_rel(directory, top, prefix)), "io", f"cannot list directory: {exc.strerror or exc}"))
            continue
        for entry in entries:
            try:
                if entry.is_symlink():
                    errors.append(FileError(display_path(_rel(entry.path, top, prefix)), "symlink", "symbolic link: not followed"))
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError as exc:
                errors.append(FileError(display_path(_rel(entry.path, top, prefix)), "io", f"cannot stat: {exc.strerror or exc}"))
                continue
            if is_dir:
                if os.path.lexists(os.path.join(entry.path, ".git")):
                    out.append(_rel(entry.path, top, prefix) + "/")  # a repository of its own
                elif entry.name not in SKIP_DIRS:
                    stack.append(entry.path)
            else:
                out.append(_rel(entry.path, top, prefix))
    return out


def _rel(path: str, top: str, prefix: int) -> str:
    """``path`` (``top`` or below it, as ``os.scandir`` spells it) relative to ``top``, POSIX."""
    if path == top:
        return "."
    rel = path[prefix:]
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def _symlinked_parent(root: Path, rel: str, cache: dict[str, bool]) -> str | None:
    """The first directory of ``rel`` that is a symlink now (git lists paths from its index)."""
    parts = rel.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        if prefix not in cache:
            cache[prefix] = os.path.islink(root / prefix)
        if cache[prefix]:
            return prefix
    return None


def _candidate_name(rel: str) -> bool:
    return rel.endswith(".py") or setter_file_kind(rel, b"") is not None


_SPECIAL = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


# which setter parser reads a file that is not Python
_SHEBANG_RE = re.compile(r"^#!\s*(?P<interp>\S+)(?P<args>.*)$")
_SHELL_INTERPRETERS = frozenset({"sh", "bash", "zsh"})
_YAML_SUFFIXES = (".yml", ".yaml")


def _shebang_is_shell(head: bytes) -> bool:
    first_line = head.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", errors="replace")
    match = _SHEBANG_RE.match(first_line)
    if match is None:
        return False
    interpreter = match.group("interp").rsplit("/", 1)[-1]
    if interpreter == "env":
        arguments = [
            arg for arg in match.group("args").split() if not arg.startswith("-")
        ]
        if not arguments:
            return False
        interpreter = arguments[0].rsplit("/", 1)[-1]
    return interpreter in _SHELL_INTERPRETERS


def setter_file_kind(relpath: str, head: bytes) -> str | None:
    """Which setter parser reads ``relpath`` ("shell", "dotenv", "docker", "make", "ci"), or None.

    ``head`` is the first bytes of the file (only its first line is used, for the
    shebang of extension-less scripts).  Python launchers are not classified here.
    """
    parts = [
        part for part in relpath.replace("\\", "/").split("/") if part not in ("", ".")
    ]
    if not parts:
        return None
    basename = parts[-1]
    lower = basename.lower()
    parent = parts[-2] if len(parts) >= 2 else ""
    grandparent = parts[-3] if len(parts) >= 3 else ""

    if lower.endswith((".sh", ".bash")):
        return "shell"
    if basename == ".env" or basename.endswith(".env") or basename.startswith(".env."):
        return "dotenv"
    if (
        lower == "dockerfile"
        or lower.startswith("dockerfile.")
        or lower.endswith(".dockerfile")
    ):
        return "docker"
    if basename in ("Makefile", "makefile", "GNUmakefile") or lower.endswith(".mk"):
        return "make"
    if lower.endswith(_YAML_SUFFIXES):
        if parent == "workflows" and grandparent == ".github":
            return "ci"
        if lower in (
            ".gitlab-ci.yml",
            ".gitlab-ci.yaml",
            "azure-pipelines.yml",
            "azure-pipelines.yaml",
        ):
            return "ci"
        if parent in (".circleci", ".buildkite"):
            return "ci"
    if "." not in basename and _shebang_is_shell(head):
        return "shell"
    return None


def file_kind(relpath: str, head: bytes) -> str | None:
    if relpath.endswith(".py"):
        return "python"
    return setter_file_kind(relpath, head)


def discover(root: Path, excludes: tuple[str, ...] = ()) -> tuple[list[SourceFile], list[FileError]]:
    """Files under ``root`` worth reading, sorted by path, plus what was skipped."""
    found = discover_tree(root, excludes)
    return found.files, found.errors


@dataclass
class Discovered:
    """What :func:`discover_tree` found: the files to read, what was skipped, the
    sub-repositories entered and the folders a ``.gitignore`` lists (by path from the root)."""

    files: list[SourceFile] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    repos: list[Repository] = field(default_factory=list)
    ignored: list[IgnoredFolder] = field(default_factory=list)
    #: the ``lstat`` of each file found, by its ``abspath``
    stats: dict[str, os.stat_result] = field(default_factory=dict)


def discover_tree(root: Path, excludes: tuple[str, ...] = (), stats: dict[str, os.stat_result] | None = None) -> Discovered:
    """As :func:`discover`, with the sub-repositories entered and the ignored folders.
    ``stats``: filled with the ``lstat`` of each file found, by its ``abspath`` (a regular
    file's: what ``stat`` gives), so that the scan does not ask again."""
    found = Discovered(stats={} if stats is None else stats)
    if root.is_file():
        kind = file_kind(root.name, _head(root))
        if kind:
            found.files.append(SourceFile(display_path(root.name), str(root), kind))
        return found
    matcher = exclude_matcher(tuple(excludes)) if excludes else None
    _discover_into(root, "", matcher, found, 0)
    found.files.sort(key=lambda f: f.path)
    found.repos.sort(key=lambda r: r.path)
    found.ignored.sort(key=lambda i: i.path)
    return found


def _is_repository(path: str) -> bool:
    """Whether directory ``path`` is the top of a git work tree of its own (``.git`` a
    directory, or a file naming one, as a submodule's is)."""
    return os.path.isdir(os.path.join(path, ".git")) or os.path.isfile(os.path.join(path, ".git"))


def _is_gitlink(root: Path, rel: str) -> bool:
    """Whether the index of the repository at ``root`` holds ``rel`` as a submodule (not a
    file that a directory replaced in the work tree)."""
    proc = _git(root, "ls-files", "-s", "-z", "--", rel)
    return proc is not None and proc[0] == 0 and proc[1].startswith(b"160000 ")


#: how deep below a folder a ``.gitignore`` lists discovery looks for repositories, and how
#: many of its folders it opens (a build or data folder can be large)
IGNORED_SEARCH_DEPTH = 3
IGNORED_SEARCH_DIRS = 2000


def _ignored_folders(root: Path) -> list[str]:
    """The folders the ``.gitignore`` files (and ``info/exclude``) of the repository at
    ``root`` list, relative to ``root``: ``git ls-files`` shows none of their files, and a
    repository of its own among them (a fork's checkout of its engine) is still the tree's."""
    proc = _git(root, "ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory", "--", ".")
    if proc is None or proc[0] != 0:
        return []
    return [os.fsdecode(raw)[:-1] for raw in proc[1].split(b"\0") if raw.endswith(b"/")]


def _search_ignored(folder: str) -> tuple[list[str], int]:
    """The repositories inside ignored ``folder`` (absolute paths; the folder itself when it
    is one), at most ``IGNORED_SEARCH_DEPTH`` folders down, and how many Python files the
    rest holds (up to ``IGNORED_FILES_COUNTED``).  Symlinks are not followed."""
    if _is_repository(folder):
        return [folder], 0
    repos: list[str] = []
    python = 0
    opened = 0
    level = [folder]
    for _ in range(IGNORED_SEARCH_DEPTH + 1):
        below: list[str] = []
        for directory in level:
            if opened >= IGNORED_SEARCH_DIRS:
                return repos, python
            opened += 1
            try:
                with os.scandir(directory) as scan:
                    entries = list(scan)
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name in SKIP_DIRS:
                            continue
                        if _is_repository(entry.path):
                            repos.append(entry.path)
                        else:
                            below.append(entry.path)
                    elif entry.name.endswith(".py") and python < IGNORED_FILES_COUNTED:
                        python += 1
                except OSError:
                    continue
        level = sorted(below)
    return repos, python


def _discover_into(root: Path, base: str, excluded: ExcludeMatcher | None, found: Discovered, depth: int) -> None:
    """List the files of ``root`` (shown as ``base`` + their path) into ``found``; recurse
    into the sub-repositories it holds, those its ``.gitignore`` lists included."""
    files, errors, stats = found.files, found.errors, found.stats
    top = os.path.join(os.fspath(root), "")  # a file's path is ``top + rel``
    listed = _git_files(root)
    relpaths = listed if listed is not None else _walk(root, errors)
    linked: dict[str, bool] = {}
    links: set[str] = set()  # symlinks reported so far (git lists a link and the paths it shadows)
    entered: list[tuple[str, str, str]] = []  # (absolute path, shown path, kind) of the repositories to enter
    for rel in sorted(set(relpaths)):
        directory = rel.endswith("/")
        rel = rel.rstrip("/")
        shown = display_path(base + rel)
        if "/" in rel and not SKIP_DIRS.isdisjoint(rel.split("/")[:-1]):
            continue
        if excluded is not None and excluded.excludes(shown):
            continue
        full = top + rel
        if listed is not None:
            link = _symlinked_parent(root, rel, linked)
            if link is not None:
                if link not in links:
                    links.add(link)
                    errors.append(FileError(display_path(base + link), "symlink", "symbolic link: not followed"))
                continue
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            continue  # listed by git's index but gone from the work tree: nothing to scan
        except OSError as exc:
            errors.append(FileError(shown, "io", f"cannot stat: {exc.strerror or exc}"))
            continue
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            if rel not in links:
                links.add(rel)
                errors.append(FileError(shown, "symlink", "symbolic link: not followed"))
            continue
        if stat.S_ISDIR(mode) and (listed is not None or directory):
            # git lists a gitlink or a nested repository as the directory, never its files
            kind = "nested" if directory else "submodule"
            if not _is_repository(full):
                if kind == "submodule" and _is_gitlink(root, rel):
                    errors.append(FileError(shown, "submodule", "submodule not checked out: its files are not scanned "
                                            "(`git submodule update --init` first)"))
                elif _candidate_name(rel):
                    errors.append(FileError(shown, "io", "a directory, not a regular file: skipped"))
                continue
            entered.append((full, shown, kind))
            continue
        if not stat.S_ISREG(mode):
            if _candidate_name(rel):
                what = next((name for test, name in _SPECIAL if test(mode)), "not a regular file")
                errors.append(FileError(shown, "io", f"{what}, not a regular file: skipped"))
            continue
        stats[full] = st
        if rel.endswith(".py"):
            files.append(SourceFile(shown, full, "python"))
            continue
        name = rel.rsplit("/", 1)[-1]
        if "." in name and not name.startswith(".") and not name.endswith((".sh", ".bash", ".env", ".mk", ".yml", ".yaml", ".dockerfile")):
            continue  # a data or source file of another language: no setters in it
        script_kind = file_kind(rel, _head(full))
        if script_kind:
            files.append(SourceFile(shown, full, script_kind))
    if listed is not None:
        for rel in _ignored_folders(root):
            shown = display_path(base + rel)
            if rel.rsplit("/", 1)[-1] in SKIP_DIRS or (excluded is not None and excluded.excludes(shown)):
                continue
            inner, python = _search_ignored(top + rel)
            if inner:
                found.ignored.append(IgnoredFolder(shown, repository=True))
                for full in inner:
                    inner_shown = display_path(base + os.path.relpath(full, top).replace(os.sep, "/"))
                    if excluded is None or not excluded.excludes(inner_shown):
                        entered.append((full, inner_shown, "nested"))
            elif python:
                found.ignored.append(IgnoredFolder(shown, repository=False, python_files=python))
    for full, shown, kind in entered:
        if depth >= MAX_REPO_DEPTH:
            errors.append(FileError(shown, "io", "repository nested too deep: not entered"))
            continue
        found.repos.append(Repository(shown, kind))
        _discover_into(Path(full), shown + "/", excluded, found, depth + 1)


def _head(path: str | Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(256)
    except OSError:
        return b""
