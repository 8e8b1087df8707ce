"""Which lines of a fork are its own, and which are its upstream's.

A repository of the scanned tree names its upstream in the configuration (``upstream``:
one spec for the tree, or a table of repository path -> spec), or has it detected:

* ``NAME==VERSION``: that released distribution.  Its files are the installed copy when the
  running Python has that version installed, else a wheel ``pip download`` fetched before
  into cs-audit's cache (``<cache root>/upstream/NAME-VERSION``), else one fetched now.
  A file of the tree is compared with the distribution's file of the same path (the
  longest path suffix both have): the lines the fork added or changed are its own; a
  file the distribution does not have is own whole.
* a folder (a path: ``/...``, ``./...``, ``~/...``): an unpacked copy of the upstream, compared the same way.
* anything else, a revision of the repository's own history (``v0.33.0``, a commit): the
  lines changed since it (committed or not, untracked files whole) are the fork's.

When nothing is configured for a repository, a remote named ``upstream`` (its merge base
with HEAD) or a tag ``vX.Y.Z`` / ``X.Y.Z`` naming the version a ``version.py`` or
``_version.py`` of its packages states is used, and the report says which; not when that
commit is HEAD itself (a checkout of the release, or of the upstream: nothing is a fork's).  A repository
with no upstream is own code whole, so a tree without one reads as before.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cs_audit.files import read_regular
from cs_audit.git.changes import ALL, changed_lines, commit_lines
from cs_audit.git.repo import GitError, GitRepo

#: a finding or switch on a line the fork changed, or in a file only the fork has
OWN = "own"
#: on a line of the upstream's, in a file the fork changed elsewhere
MODIFIED = "modified"
#: in a file the fork has not changed
UPSTREAM = "upstream"
#: every line of a file
ALL_LINES = ALL

_DISTRIBUTION = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
_VERSION = re.compile(rb"""^__version__\s*=\s*(?:version\s*=\s*)?["']([0-9][0-9A-Za-z.+_-]*)["']""", re.M)
#: a compared file is read up to this size (larger: own whole, as a file the fork owns)
MAX_COMPARED_BYTES = 8 << 20
PIP_TIMEOUT_S = 600


class UpstreamError(ValueError):
    """The upstream named cannot be used (an unknown revision, a distribution pip cannot fetch)."""


@dataclass(frozen=True)
class UpstreamUse:
    """The upstream of one repository of the tree, as the report states it."""

    repository: str  # path from the scanned root, "." for the root's
    spec: str
    how: str  # "configured" | "detected: ..."
    #: why it could not be used ("" when it was)
    error: str = ""


def is_distribution(spec: str) -> bool:
    return _DISTRIBUTION.match(spec) is not None


def is_folder(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~"))


@dataclass
class _Compared:
    """An upstream's copy: its files by path (POSIX, from the copy's top)."""

    files: dict[str, str]
    #: (path of the tree's file) -> own lines (``ALL_LINES``: every one), filled as asked
    memo: dict[str, frozenset[int]] = field(default_factory=dict)

    def own_lines(self, path: str, abspath: str) -> frozenset[int]:
        if path in self.memo:
            return self.memo[path]
        upstream = self._match(path)
        out = ALL_LINES
        if upstream is not None:
            try:
                mine = read_regular(abspath, MAX_COMPARED_BYTES + 1)
                theirs = read_regular(upstream, MAX_COMPARED_BYTES + 1)
            except OSError:
                mine = theirs = b""
            if mine == theirs and mine:
                out = frozenset()
            elif mine and theirs and len(mine) <= MAX_COMPARED_BYTES and len(theirs) <= MAX_COMPARED_BYTES:
                out = _added_lines(theirs, mine)
        self.memo[path] = out
        return out

    def _match(self, path: str) -> str | None:
        parts = path.split("/")
        for i in range(len(parts)):
            rest = parts[i:]
            if len(rest) < 2 and i > 0:
                return None  # a bare file name matches too much (`__init__.py`)
            found = self.files.get("/".join(rest))
            if found is not None:
                return found
        return None


def _added_lines(theirs: bytes, mine: bytes) -> frozenset[int]:
    """The 1-based lines of ``mine`` that ``theirs`` does not have at that place."""
    a = theirs.decode("utf-8", "replace").splitlines()
    b = mine.decode("utf-8", "replace").splitlines()
    out: set[int] = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            out.update(range(j1 + 1, j2 + 1))
    return frozenset(out)


def _folder_files(top: Path) -> dict[str, str]:
    """Every regular file under ``top`` by its POSIX path from it (symlinks not followed)."""
    out: dict[str, str] = {}
    for directory, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in names:
            full = os.path.join(directory, name)
            if os.path.isfile(full) and not os.path.islink(full):
                out[os.path.relpath(full, top).replace(os.sep, "/")] = full
    return out


def _installed(name: str, version: str) -> dict[str, str] | None:
    """The files of distribution ``name`` when the running Python has ``version`` installed."""
    from importlib import metadata

    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    if dist.version != version or not dist.files:
        return None
    out: dict[str, str] = {}
    for f in dist.files:
        posix = str(f).replace(os.sep, "/")
        if ".dist-info/" in posix or posix.startswith(".."):
            continue
        out[posix] = str(dist.locate_file(f))
    return out


#: the members of a wheel kept in the cache: what a finding or a setter can be on (vLLM's
#: wheel is mostly compiled kernels)
_COMPARED_SUFFIXES = (".py", ".sh", ".bash", ".env", ".yml", ".yaml", ".mk")


def _unpack_wheel(wheel: Path, into: Path) -> None:
    """Unzip the source files of ``wheel`` into ``into``: members with absolute paths or
    ``..`` are left out, and so are compiled ones."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = member.filename
            if member.is_dir() or name.startswith("/") or ".." in name.split("/") or not name.endswith(_COMPARED_SUFFIXES):
                continue
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)


def _downloaded(name: str, version: str, cache_folder: Callable[[], Path | None]) -> dict[str, str]:
    """The files of the wheel of ``name==version``: unpacked before into the cache, or
    fetched now with ``pip download`` (the package registries pip is set up for)."""
    folder = cache_folder()
    where = folder / f"{name}-{version}" if folder is not None else None
    if where is not None and (where / ".complete").is_file():
        return _folder_files(where / "files")
    with tempfile.TemporaryDirectory(prefix="cs-audit-upstream-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
               "--dest", tmp, f"{name}=={version}"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UpstreamError(f"pip download {name}=={version}: {exc}") from None
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise UpstreamError(f"pip download {name}=={version} failed: {last}")
        unpacked = Path(tmp) / "files"
        _unpack_wheel(wheels[0], unpacked)
        if where is None:
            return _folder_files(unpacked)
        if where.exists():
            shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True, exist_ok=True)
        shutil.move(str(unpacked), str(where / "files"))
        (where / ".complete").write_text(f"{name}=={version}\n")
    return _folder_files(where / "files")


def _detect(repo_dir: Path) -> tuple[str, str] | None:
    """(spec, how) of the upstream a repository shows: a remote named ``upstream`` (the
    merge base of HEAD with its branches), or a tag naming the version its packages state."""
    try:
        repo = GitRepo.open(repo_dir)
    except GitError:
        return None
    if repo.bare:
        return None
    try:
        head = repo.verify("HEAD")
    except GitError:
        return None
    return _detect_at(repo, head, repo_dir)


def _detect_at(repo: GitRepo, head: str, repo_dir: Path) -> tuple[str, str] | None:
    """As :func:`_detect`, for commit ``head`` of ``repo`` whose files are in ``repo_dir``
    (its work tree, or a past commit written out)."""
    # an upstream at HEAD itself is no fork's base: the release or the upstream's own checkout
    refs = repo.git("for-each-ref", "--format=%(refname)", "refs/remotes/upstream/", check=False).decode("utf-8", "replace").split()
    if refs:
        base = repo.git("merge-base", head, *refs, check=False).decode("ascii", "replace").strip()
        if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", base) and base != head:
            return base, "detected: the merge base of HEAD with the remote 'upstream'"
    for name in ("version.py", "_version.py"):
        for found in sorted(repo_dir.glob(f"*/{name}"))[:4]:
            try:
                match = _VERSION.search(read_regular(found, 1 << 16))
            except OSError:
                continue
            if match is None:
                continue
            version = match.group(1).decode("ascii")
            for tag in (f"v{version}", version):
                try:
                    if repo.verify(f"refs/tags/{tag}") == head:
                        continue
                except GitError:
                    continue
                return tag, f"detected: the tag {tag} names the version {found.relative_to(repo_dir).as_posix()} states"
    return None


@dataclass
class Origins:
    """The origin of each line of the tree: ``of(path, line, end)``."""

    uses: list[UpstreamUse] = field(default_factory=list)
    #: repository path prefix ("" for the root's) -> own lines by path from the scanned root
    _changed: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)
    #: repository path prefix -> the upstream's copy of its files
    _copies: dict[str, _Compared] = field(default_factory=dict)
    root: Path = Path(".")
    #: the sub-repositories (prefixes with "/"), longest first: a path belongs to the first it starts with
    _prefixes: list[str] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return bool(self._changed or self._copies)

    def _repository_of(self, path: str) -> str | None:
        for prefix in self._prefixes:
            if prefix == "" or path.startswith(prefix):
                return prefix
        return None

    def of(self, path: str, line: int, end_line: int | None = None) -> str:
        prefix = self._repository_of(path)
        if prefix is None:
            return OWN
        if prefix in self._copies:
            lines = self._copies[prefix].own_lines(path[len(prefix):], str(self.root / path))
        elif prefix in self._changed:
            lines = self._changed[prefix].get(path, frozenset())
        else:
            return OWN  # a repository with no upstream is the fork's own
        if lines is ALL_LINES or -1 in lines:
            return OWN
        if not lines:
            return UPSTREAM
        last = max(line, end_line or line)
        return OWN if any(n in lines for n in range(line, last + 1)) else MODIFIED


def _changed_since(repo_dir: Path, rev: str, prefix: str) -> dict[str, frozenset[int]]:
    """Lines of the work tree changed since ``rev`` (added and untracked files whole), by
    path from the scanned root (``prefix`` + the path in the repository); a file changed by
    deletions alone maps to ``{0}``: modified, no line of it own."""
    repo = GitRepo.open(repo_dir)
    if repo.bare:
        raise UpstreamError("a bare repository has no work tree to compare")
    return {prefix + path: (ALL_LINES if lines is ALL else lines or frozenset({0}))
            for path, lines in changed_lines(repo, repo.verify(rev)).items()}


def _changed_between(repo: GitRepo, head: str, rev: str, prefix: str) -> dict[str, frozenset[int]]:
    """As :func:`_changed_since`, for commit ``head`` rather than the work tree."""
    return {prefix + path: lines or frozenset({0}) for path, lines in commit_lines(repo, repo.verify(rev), head).items()}


#: how the upstream of a repository (its path from the scanned root) is found, when none is
#: configured: detected in its work tree, or at a past commit
Detect = Callable[[str], "tuple[str, str] | None"]
#: a repository's own lines since a revision: (repository, spec, prefix) -> lines by path
Since = Callable[[str, str, str], dict[str, frozenset[int]]]


def _specs(root: Path, repositories: list[str], configured: tuple[tuple[str, str], ...],
           detect: Detect | None = None) -> Iterator[tuple[str, str, str]]:
    """(repository, spec, how) of each repository of the tree that names or shows an upstream."""
    specs = dict(configured)
    for repo in repositories if "." in repositories else [".", *repositories]:
        spec, how = specs.get(repo, ""), "configured"
        if not spec:
            found = (detect(repo) if detect is not None else _detect(root / repo)) if repo in repositories else None
            if found is None:
                continue
            spec, how = found
        yield repo, spec, how


def upstream_state(root: Path, repositories: list[str], configured: tuple[tuple[str, str], ...],
                   cache_folder: Callable[[], Path | None]) -> str | None:
    """What decides whose each line of the tree is, besides its files and the commit at HEAD
    of each repository: each upstream as named or detected and what it stands for now (the
    commit a revision or a detected tag names, the files of a distribution or folder), so a
    stored report is not reused once a tag appears or moves, or a remote's branch moves.
    None when it cannot be told without fetching (a distribution neither installed nor in
    the cache): a report is then neither stored nor reused."""
    parts: list[tuple[str, ...]] = []
    for repo, spec, how in _specs(root, repositories, configured):
        if is_distribution(spec):
            match = _DISTRIBUTION.match(spec)
            assert match is not None
            folder = cache_folder()
            cached = folder is not None and (folder / f"{match.group('name')}-{match.group('version')}" / ".complete").is_file()
            installed = _installed(match.group("name"), match.group("version"))
            if installed is None and not cached:
                return None
            parts.append((repo, spec, "installed" if installed is not None else "cached"))
        elif is_folder(spec):
            parts.append((repo, spec, _folder_stamp(Path(os.path.expanduser(spec)))))
        else:
            try:
                sha = GitRepo.open(root / repo).verify(spec)
            except GitError as exc:
                sha = f"error: {exc}"
            parts.append((repo, spec, how, sha))
    return repr(parts)


def _folder_stamp(top: Path) -> str:
    """The size and time of change of every file of an unpacked upstream, as one digest."""
    digest = hashlib.sha256()
    for rel, full in sorted(_folder_files(top).items()):
        try:
            st = os.stat(full)
        except OSError:
            continue
        digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def past_origins(root: Path, commits: dict[str, tuple[GitRepo, str]], configured: tuple[tuple[str, str], ...],
                 cache_folder: Callable[[], Path | None]) -> Origins:
    """:func:`origins` of a past commit written out at ``root``: ``commits`` holds, by path
    from the root, each repository and the commit of it written there; a revision's own lines
    are those that commit changed since it, and an upstream is detected at that commit."""
    return origins(root, list(commits), configured, cache_folder,
                   detect=lambda repo: _detect_at(*commits[repo], root / repo) or _fork_base(*commits[repo]),
                   since=lambda repo, spec, prefix: _changed_between(*commits[repo], spec, prefix))


def _fork_base(repo: GitRepo, commit: str) -> tuple[str, str] | None:
    """The upstream the repository's work tree shows now, when ``commit`` is that upstream
    itself: a fork's past at its base, upstream whole (a checkout of the release stays nobody's
    fork: what it shows now is not HEAD's own upstream, see ``_detect``)."""
    if repo.bare:
        return None
    now = _detect(repo.toplevel / repo.rel if repo.rel else repo.toplevel)
    try:
        if now is None or repo.verify(now[0]) != commit:
            return None
    except GitError:
        return None
    return now[0], f"{now[1]} (the commit audited is that base itself)"


def origins(root: Path, repositories: list[str], configured: tuple[tuple[str, str], ...],
            cache_folder: Callable[[], Path | None], detect: Detect | None = None, since: Since | None = None) -> Origins:
    """The origins of the tree at ``root`` holding ``repositories`` (paths from the root,
    "." for the one holding the root, when in git).  ``configured``: (repository path,
    spec); "." names the scanned tree as a whole.  ``cache_folder``: where a downloaded
    distribution is kept (made only when one is downloaded; None: not kept).  ``detect``
    and ``since``: how an upstream is found and a revision's own lines read (default: in
    each repository's work tree)."""
    out = Origins(root=root)
    for repo, spec, how in _specs(root, repositories, configured, detect):
        prefix = "" if repo == "." else f"{repo}/"
        use = UpstreamUse(repo, spec, how)
        try:
            if is_distribution(spec):
                match = _DISTRIBUTION.match(spec)
                assert match is not None
                name, version = match.group("name"), match.group("version")
                files = _installed(name, version)
                if files is None:
                    files = _downloaded(name, version, cache_folder)
                out._copies[prefix] = _Compared(files)
            elif is_folder(spec):
                folder = Path(os.path.expanduser(spec))
                if not folder.is_dir():
                    raise UpstreamError(f"{spec}: no such folder")
                out._copies[prefix] = _Compared(_folder_files(folder))
            else:
                out._changed[prefix] = since(repo, spec, prefix) if since is not None else _changed_since(root / repo, spec, prefix)
        except (UpstreamError, GitError) as exc:
            use = UpstreamUse(repo, spec, how, error=str(exc))
        out.uses.append(use)
    out._prefixes = sorted((k for k in (*out._changed, *out._copies)), key=len, reverse=True)
    # a sub-repository without an upstream is own, not its enclosing repository's upstream
    for repo in repositories:
        prefix = f"{repo}/"
        if repo != "." and prefix not in out._prefixes and any(prefix.startswith(p) for p in out._prefixes):
            out._prefixes.append(prefix)
    out._prefixes.sort(key=len, reverse=True)
    return out
