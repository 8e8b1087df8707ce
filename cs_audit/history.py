"""Audits of past commits, read from git objects: no checkout, work tree and index untouched.

* :class:`GitRepo` runs read-only git commands only, as argument lists, with
  ``core.fsmonitor`` and hooks off, ``GIT_OPTIONAL_LOCKS=0`` (nothing written back to
  the index), ``--`` before paths, and every revision verified with
  ``git rev-parse --verify REV^{commit}`` before use.
* :class:`TreeAuditor` writes the tree of a commit into a private temporary directory
  (``git ls-tree`` + ``git cat-file --batch``; never ``git archive``, whose
  ``export-subst``/``export-ignore`` attributes would change the bytes) and runs
  :func:`cs_audit.api.run_audit` on it, so a past commit is audited by exactly the code
  that audits a work tree.  Across commits the directory is updated in place (only
  changed paths are rewritten) and, with ``reuse=True``, the per-file facts of blobs
  already analysed are reused: each further commit only parses what it changed.  When
  the Python facts of a commit are the same as those of the commit audited before it
  (a commit that changed only docs, CI files or shell scripts), the whole-tree joins
  (the call-graph model, the findings and the duplicate groups, pure functions of those
  facts and the rules) are reused too; setters, readers, switches and dispositions are
  always computed afresh.
* :func:`render_diff` words what changed in the audit between two commits.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cs_audit import api
from cs_audit.config import AuditConfig, load_config
from cs_audit.model import AuditResult, Finding
from cs_audit.ruleset import RuleSet, load_ruleset

SHORT_SHA = 9
#: blobs larger than this are written truncated: nothing cs-audit reads needs more
#: (a file over ``max_file_bytes`` is skipped as too large from its first bytes alone)
MAX_WRITTEN_BLOB = 16 << 20
UNSHALLOW_HINT = (
    "if this is a shallow clone (actions/checkout fetches one commit by default), fetch the "
    "history first: `git fetch --unshallow` (or `fetch-depth: 0` in actions/checkout)"
)

_GIT_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.quotepath=false",
    "diff.external=",
    "core.pager=cat",
    "log.showSignature=false",
)
_GIT_ENV = {
    "GIT_OPTIONAL_LOCKS": "0",  # never write the index back (read-only)
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_LITERAL_PATHSPECS": "1",  # file names are names, not globs
    "GIT_PAGER": "cat",
    "LC_ALL": "C",
}
_FULL_SHA = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")


class GitError(RuntimeError):
    """A git command failed, or the repository or revision is unusable (exit code 2)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True, slots=True)
class CommitInfo:
    sha: str
    date: str  # YYYY-MM-DD, committer date in UTC
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:SHORT_SHA]


@dataclass(frozen=True, slots=True)
class TreeEntry:
    mode: str
    kind: str  # blob | commit (submodule) | tree
    sha: str


def _utc_day(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d")


class GitRepo:
    """A git work tree holding a scanned path; read-only queries only.

    ``rel`` is the scanned path relative to the top level (POSIX, ``""`` for the top);
    ``base`` is the directory the findings' paths are relative to (``rel`` itself, or
    its parent when ``rel`` names a file), with a trailing ``/`` unless empty.
    """

    def __init__(self, toplevel: Path, rel: str, is_file: bool) -> None:
        self.toplevel = toplevel
        self.rel = rel
        self.is_file = is_file
        parent = rel.rsplit("/", 1)[0] if is_file and "/" in rel else ("" if is_file else rel)
        self.base = f"{parent}/" if parent else ""
        #: a bare repository: commits can be audited, there is no work tree to check
        self.bare = False

    @classmethod
    def open(cls, path: Path) -> GitRepo:
        """The repository holding ``path``; :class:`GitError` outside git."""
        path = Path(path)
        if not path.exists():
            raise GitError(f"{path}: no such file or directory")
        is_file = not path.is_dir()
        where = path.parent if is_file else path
        try:
            out = _run_git(where, ["rev-parse", "--show-toplevel", "--show-prefix"])
        except GitError as exc:
            bare = _run_git(where, ["rev-parse", "--is-bare-repository"], check=False).strip() == b"true"
            if bare and not is_file:
                repo = cls(Path(path), "", False)  # a bare repository (a mirror): history only
                repo.bare = True
                return repo
            raise GitError(f"{path}: not inside a git work tree ({exc})") from None
        lines = out.decode("utf-8", "surrogateescape").split("\n")
        if len(lines) < 2 or not lines[0]:
            raise GitError(f"{path}: not inside a git work tree")
        toplevel, prefix = Path(lines[0]), lines[1].rstrip("/")
        if is_file:
            prefix = f"{prefix}/{path.name}" if prefix else path.name
        return cls(toplevel, prefix, is_file)

    # -- plumbing -------------------------------------------------------------

    def git(self, *args: str, check: bool = True) -> bytes:
        return _run_git(self.toplevel, list(args), check=check)

    def pathspec(self) -> list[str]:
        return ["--", self.rel] if self.rel else ["--"]

    # -- queries --------------------------------------------------------------

    def verify(self, rev: str) -> str:
        """Full sha of commit ``rev``; :class:`GitError` (with a hint) when unreachable."""
        if not rev or rev.startswith("-") or "\0" in rev or "\n" in rev:
            raise GitError(f"not a revision: {rev!r}")
        out = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
        sha = out.decode("ascii", "replace").strip()
        if not _FULL_SHA.match(sha):
            shallow = self.is_shallow()
            note = " (this is a shallow clone)" if shallow else ""
            raise GitError(f"revision {rev!r} is not a commit reachable in {self.toplevel}{note}", UNSHALLOW_HINT)
        return sha

    def is_shallow(self) -> bool:
        out = self.git("rev-parse", "--is-shallow-repository", check=False)
        return out.strip() == b"true"

    def head(self) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).decode("ascii", "replace").strip()
        return out if _FULL_SHA.match(out) else None

    def commit_info(self, sha: str) -> CommitInfo:
        out = self.git("show", "-s", "--no-show-signature", "--format=%H%x00%ct%x00%s", sha, "--")
        full, ctime, subject = out.decode("utf-8", "replace").rstrip("\n").split("\0", 2)
        return CommitInfo(full, _utc_day(int(ctime)), subject)

    def rev_range(self, spec: str) -> list[str]:
        """Commits of ``A..B`` oldest first (first-parent line of B, excluding A's history)."""
        if spec.count("..") != 1 or "..." in spec:
            raise GitError(f"--range wants A..B, got {spec!r}")
        left, right = spec.split("..")
        a = self.verify(left or "HEAD")
        b = self.verify(right or "HEAD")
        out = self.git("rev-list", "--reverse", "--first-parent", b, f"^{a}", "--")
        return out.decode("ascii").split()

    def tree(self, sha: str) -> dict[str, TreeEntry]:
        """Repo-relative path -> entry, for every file under the scanned path at ``sha``."""
        out = self.git("ls-tree", "-r", "-z", "--full-tree", sha, *self.pathspec())
        entries: dict[str, TreeEntry] = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, name = record.partition(b"\t")
            parts = meta.split()
            if len(parts) != 3:
                continue
            mode, kind, obj = (p.decode("ascii") for p in parts)
            entries[os.fsdecode(name)] = TreeEntry(mode, kind, obj)
        return entries

    def changes(self, old: str, new: str) -> dict[str, TreeEntry | None]:
        """Repo-relative path -> its entry at ``new`` (None: not there), for every file under
        the scanned path whose entry differs between commits ``old`` and ``new``."""
        out = self.git("diff-tree", "-r", "-z", "--no-renames", old, new, *self.pathspec())
        fields = out.split(b"\0")
        changed: dict[str, TreeEntry | None] = {}
        i = 0
        while i + 1 < len(fields):
            meta = fields[i]
            if not meta.startswith(b":"):
                i += 1
                continue
            parts = meta[1:].split()
            name = os.fsdecode(fields[i + 1])
            i += 2
            if len(parts) != 5:
                raise GitError(f"git diff-tree: cannot read {meta!r}")
            mode, sha = parts[1].decode("ascii"), parts[3].decode("ascii")
            if parts[4][:1] == b"D" or mode == "000000":
                changed[name] = None
            else:
                kind = {"160000": "commit", "040000": "tree"}.get(mode, "blob")
                changed[name] = TreeEntry(mode, kind, sha)
        return changed

    def renames(self, old: str, new: str) -> dict[str, str]:
        """Repo-relative old path -> new path for files renamed between two commits."""
        out = self.git("diff", "--raw", "-z", "--no-ext-diff", "--find-renames", "--no-color", old, new, *self.pathspec())
        fields = out.split(b"\0")
        moved: dict[str, str] = {}
        i = 0
        while i < len(fields):
            meta = fields[i]
            if not meta.startswith(b":"):
                i += 1
                continue
            status = meta.split()[-1]
            if status[:1] in (b"R", b"C"):
                if status[:1] == b"R" and i + 2 < len(fields):
                    moved[os.fsdecode(fields[i + 1])] = os.fsdecode(fields[i + 2])
                i += 3
            else:
                i += 2
        return moved


def _git_argv(args: list[str]) -> list[str]:
    argv = ["git"]
    for kv in _GIT_CONFIG:
        argv += ["-c", kv]
    return argv + args


def _run_git(cwd: Path, args: list[str], check: bool = True, timeout: float = 600) -> bytes:
    try:
        proc = subprocess.run(
            _git_argv(args), cwd=cwd, capture_output=True, timeout=timeout,
            env={**os.environ, **_GIT_ENV}, stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise GitError("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} timed out after {timeout:.0f}s") from None
    if check and proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {message[-1] if message else f'exit {proc.returncode}'}")
    return proc.stdout


class _BlobReader:
    """One ``git cat-file --batch`` process for the lifetime of a :class:`TreeAuditor`."""

    def __init__(self, toplevel: Path) -> None:
        self._proc = subprocess.Popen(
            _git_argv(["cat-file", "--batch"]), cwd=toplevel, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env={**os.environ, **_GIT_ENV},
        )

    def read(self, sha: str, keep: int) -> bytes:
        """The first ``keep`` bytes of blob ``sha`` (the rest is read and dropped)."""
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(sha.encode("ascii") + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) != 3:
            raise GitError(f"git cat-file: cannot read object {sha}")
        size = int(header[2])
        data = proc.stdout.read(min(size, keep))
        left = size - len(data)
        while left > 0:
            chunk = proc.stdout.read(min(left, 1 << 20))
            if not chunk:
                raise GitError(f"git cat-file: object {sha} cut short")
            left -= len(chunk)
        proc.stdout.read(1)  # the newline after the contents
        return data

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self._proc.stdin is not None
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def _safe_parts(path: str) -> list[str] | None:
    """Components of a tree path, or None when writing it could leave the directory."""
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", "..") or "\0" in part or part.casefold() == ".git":
            return None
    return parts


@dataclass
class AuditStats:
    """How much work the audits of a :class:`TreeAuditor` did (for progress and tests)."""

    commits: int = 0
    analysed: int = 0  # files parsed
    reused: int = 0  # files whose facts came from an earlier commit's identical blob
    joins_reused: int = 0  # commits whose whole-tree joins came from the commit before
    seconds: list[float] = field(default_factory=list)


class TreeAuditor:
    """Audit commits of ``repo`` at its scanned path, from git objects only.

    Use as a context manager; the temporary tree is removed on exit.
    ``overrides`` are :func:`cs_audit.config.load_config` overrides (``jobs``,
    ``exclude``); the project configuration is read from each commit's own tree.
    """

    def __init__(self, repo: GitRepo, display_root: str, reuse: bool = True, **overrides: Any) -> None:
        self.repo = repo
        self.display_root = display_root
        self.reuse = reuse
        self.overrides = {"history": False, **overrides}
        self.stats = AuditStats()
        self._workdir = Path(tempfile.mkdtemp(prefix="cs-audit-rev-"))
        self._current: dict[str, TreeEntry] = {}
        self._current_sha: str | None = None  # the commit the directory holds
        self._blobs: _BlobReader | None = None
        #: per-file results and joins reused across the commits (None: audit each from scratch)
        self._memo: api.ScanMemo | None = api.ScanMemo() if reuse else None
        self._shipped_rs: RuleSet | None = None
        self.last_rs: RuleSet | None = None

    def __enter__(self) -> TreeAuditor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._blobs is not None:
            self._blobs.close()
            self._blobs = None
        shutil.rmtree(self._workdir, ignore_errors=True)

    @property
    def root(self) -> Path:
        """The scanned path inside the temporary tree."""
        return self._workdir / self.repo.rel if self.repo.rel else self._workdir

    # -- the tree on disk -------------------------------------------------------

    def _listing(self, sha: str) -> dict[str, TreeEntry]:
        """The files to write for ``sha``: the full listing for the first commit, then the
        previous commit's listing updated with ``git diff-tree`` (only what changed)."""
        if self._current_sha is None:
            return {p: e for p, e in self.repo.tree(sha).items() if e.kind == "blob" and _safe_parts(p)}
        new = dict(self._current)
        for path, entry in self.repo.changes(self._current_sha, sha).items():
            if entry is not None and entry.kind == "blob" and _safe_parts(path):
                new[path] = entry
            else:
                new.pop(path, None)
        return new

    def _write_tree(self, sha: str) -> dict[str, TreeEntry]:
        """Make the temporary directory hold exactly the tree of ``sha`` (changed paths only)."""
        new = self._listing(sha)
        old = self._current
        self._current_sha = None  # until the directory holds ``new``
        gone = [p for p in old if p not in new or old[p] != new[p]]
        for path in sorted(gone, reverse=True):
            target = self._workdir / path
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            parent = target.parent
            while parent != self._workdir:
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent
        if self._blobs is None:
            self._blobs = _BlobReader(self.repo.toplevel)
        keep = MAX_WRITTEN_BLOB
        for path in sorted(p for p in new if p not in old or old[p] != new[p]):
            entry = new[path]
            target = self._workdir / path
            target.parent.mkdir(parents=True, exist_ok=True)
            workdir = os.path.realpath(self._workdir)
            if os.path.commonpath([os.path.realpath(target.parent), workdir]) != workdir:
                continue  # a parent that is a link out of the tree: never write through it
            data = self._blobs.read(entry.sha, keep)
            if entry.mode == "120000":
                os.symlink(os.fsdecode(data), target)
                continue
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        if not self.repo.is_file:
            self.root.mkdir(parents=True, exist_ok=True)
        self._current = new
        self._current_sha = sha
        return new

    # -- audits -----------------------------------------------------------------

    def config(self) -> AuditConfig:
        """The configuration of the commit last written (raises ``ConfigError``)."""
        return load_config(str(self.root), **self.overrides)

    def audit(self, sha: str, rs: RuleSet | None = None, progress: api.Progress | None = None) -> AuditResult:
        """The audit of commit ``sha`` as ``cs-audit scan`` would report a checkout of it.

        ``rs`` is the unprepared rule set (default: the shipped one); the commit's project
        configuration is layered on it, and the result kept in ``last_rs`` for rendering.
        Raises ``ConfigError`` when the commit's project configuration is malformed.
        """
        started = time.perf_counter()
        self._write_tree(sha)
        config = self.config()
        if rs is None:
            if self._shipped_rs is None:
                self._shipped_rs = load_ruleset()  # parsed once, not per commit
            rs = self._shipped_rs
        base_rs = rs
        self.last_rs = api.prepare_ruleset(config, base_rs)
        memo = self._memo
        before = (memo.analysed, memo.reused, memo.joins_reused) if memo is not None else None
        result = api.run_audit(config, base_rs, progress, memo=memo)
        if memo is not None and before is not None:
            self.stats.analysed += memo.analysed - before[0]
            self.stats.reused += memo.reused - before[1]
            self.stats.joins_reused += memo.joins_reused - before[2]
        else:
            self.stats.analysed += result.files_scanned
        self.stats.commits += 1
        self.stats.seconds.append(time.perf_counter() - started)
        return replace(result, root=self.display_root, commit=sha, history_note=None)


# ---------------------------------------------------------------------------
# what changed between two audits


def render_diff(before: AuditResult, after: AuditResult, info_before: CommitInfo, info_after: CommitInfo) -> str:
    """Markdown: switches added/removed, findings new/fixed, dispositions changed."""
    from cs_audit.gate import match_findings
    from cs_audit.render.markdown import cell, code

    new, fixed, moved = match_findings(list(after.findings), list(before.findings))
    s_before = {s.name: s for s in before.switches}
    s_after = {s.name: s for s in after.switches}
    added = [s_after[n] for n in sorted(set(s_after) - set(s_before))]
    removed = [s_before[n] for n in sorted(set(s_before) - set(s_after))]
    changed = [
        (s_before[n], s_after[n]) for n in sorted(set(s_before) & set(s_after))
        if (s_before[n].disposition, s_before[n].merge_into) != (s_after[n].disposition, s_after[n].merge_into)
    ]

    def disposition(s: Any) -> str:
        return f"{s.disposition} → {code(s.merge_into)}" if s.merge_into else s.disposition

    def loc(f: Finding) -> str:
        span = f"{f.line}" if f.end_line == f.line else f"{f.line}-{f.end_line}"
        return code(f"{f.path}:{span}")

    name = cell(Path(after.root).name or after.root)
    lines = [
        f"# cs-audit diff: {name} {code(info_before.sha[:12])} → {code(info_after.sha[:12])}",
        "",
        f"- Before: {code(info_before.sha[:12])} {info_before.date} {cell(info_before.subject)}",
        f"- After: {code(info_after.sha[:12])} {info_after.date} {cell(info_after.subject)}",
        f"- Switches: {len(added)} added, {len(removed)} removed, {len(changed)} with a changed disposition",
        f"- Findings: {len(new)} new, {len(fixed)} fixed, {moved} moved (same rule, function and code elsewhere)",
        "",
        "## Switches added",
        "",
    ]
    if added:
        lines += ["| switch | category | disposition | first read |", "|---|---|---|---|"]
        for s in added:
            first = code(f"{s.reads[0].path}:{s.reads[0].line}") if s.reads else ""
            lines.append(f"| {code(s.name)} | {cell(s.category)} | {disposition(s)} | {first} |")
    else:
        lines.append("None.")
    lines += ["", "## Switches removed", ""]
    if removed:
        lines += ["| switch | category | disposition before |", "|---|---|---|"]
        lines += [f"| {code(s.name)} | {cell(s.category)} | {disposition(s)} |" for s in removed]
    else:
        lines.append("None.")
    lines += ["", "## Dispositions changed", ""]
    if changed:
        lines += ["| switch | before | after | why (after) |", "|---|---|---|---|"]
        for b, a in changed:
            lines.append(f"| {code(a.name)} | {disposition(b)} | {disposition(a)} | {cell('; '.join(a.reasons))} |")
    else:
        lines.append("None.")
    for title, rows in (("New findings", new), ("Fixed findings", fixed)):
        lines += ["", f"## {title}", ""]
        if not rows:
            lines.append("None.")
            continue
        lines += ["| rule | file:line | function | switch | code |", "|---|---|---|---|---|"]
        for f in sorted(rows, key=lambda f: (f.path, f.line, f.rule)):
            switch = code(f.switch) if f.switch else "default"
            lines.append(f"| {code(f.rule)} | {loc(f)} | {code(f.function or '<module>')} | {switch} | {code(f.code)} |")
    return "\n".join(lines) + "\n"
