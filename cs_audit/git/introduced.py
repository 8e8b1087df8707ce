"""When each switch was first read: one pass over the history of a repository's Python files.

``added_in`` answers "which commit introduced this switch".  The blame of a surviving read
line answers "which commit last rewrote it" (a reformat, a rename of the helper, a move),
so the answer here is the earliest commit in which the switch is really read in code:

* One ``git log --reverse --no-merges --no-renames -p -U0`` over the ``*.py`` files under
  the scanned path, HEAD's history, through the project's one runner.  Renames are not
  followed and need not be: a rename or a move shows the name as added again, later than
  where it was added first, so the earliest added line holding the name is unaffected.
* For each switch, the commits whose added lines hold its name (as a whole word), oldest
  first, are its candidates; each is confirmed by parsing the file at that commit with the
  ``reads`` the caller hands in (``cs_audit.extract.reads.names_read``: git is infrastructure
  and imports no extraction step): a comment, a docstring or a log message naming it does
  not count, a shell runner is not looked at.  The first confirmed candidate is the answer.
* No confirmed candidate (the name is built at run time, or only uncommitted files read
  it): no answer here, and the caller falls back to blame.
* A shallow clone's boundary commit shows every file as added: an answer that is such a
  commit carries ``boundary`` (the caller says "shallow clone: may be older").
* Answers are stored on disk by (repository, HEAD, path prefix, names); a later HEAD whose
  history holds a stored HEAD (``report --range``, the next commit of a branch) reads only
  the commits since that one and keeps the stored answers that are still the earliest.
"""

from __future__ import annotations

import hashlib
import os
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cs_audit.files import keep_newest, opened_json, sealed_json, try_write_atomically
from cs_audit.git import runner
from cs_audit.git.repo import BlobReader

#: bump when what is stored or how it is found changes
FORMAT = 2
#: candidates kept per name: a name mentioned in that many commits before any reads it is
#: left to blame
MAX_CANDIDATES = 24
#: stored passes kept on disk
KEEP_FILES = 32
#: bytes of a past version of a file read to confirm a candidate
MAX_BLOB = 8 << 20
_GLOB_CHARS = re.compile(r"([*?\[\]\\])")
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Introduction:
    sha: str
    ctime: int
    subject: str
    #: the file (path in the repository at that commit) that read the name first
    path: str
    #: the commit is a shallow clone's boundary: the name may be older
    boundary: bool = False


class PassError(RuntimeError):
    """git could not give the history (the caller falls back to blame)."""


def _pathspec(prefix: str) -> str:
    """Every ``*.py`` file under ``prefix`` (glob characters of the prefix escaped)."""
    escaped = _GLOB_CHARS.sub(r"\\\1", prefix)
    return f"{escaped}/*.py" if escaped else "*.py"


def _log(toplevel: Path, head: str, prefix: str, since: str | None) -> bytes:
    args = ["log", "--reverse", "--no-merges", "--no-renames", "-p", "-U0", "--no-color", "--no-ext-diff",
            "--no-textconv", "--no-show-signature", "--format=%x00%H %ct %s", head]
    if since:
        args.append(f"^{since}")
    args += ["--", _pathspec(prefix)]
    # the one pathspec is ours (a glob); every other git call keeps pathspecs literal
    code, out, err = runner.run(toplevel, args, env={"GIT_LITERAL_PATHSPECS": "0"})
    if code != 0:
        message = err.decode("utf-8", "replace").strip().splitlines()
        raise PassError(f"git log failed: {message[-1] if message else f'exit {code}'}")
    return out


def _trie(words: Iterable[str]) -> bytes:
    """A regular expression matching any of ``words``, factored by prefix: ``re`` tries the
    alternatives of a flat alternation one by one at every position, a trie one byte each."""
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = "(?:" + "|".join(alts) + ")"
        return body + "?" if "" in node else body

    return emit(root).encode("ascii")


def _candidates(log: bytes, names: set[str]) -> tuple[dict[str, list[tuple[int, int, str]]], dict[int, tuple[str, str]]]:
    """name -> [(committer time, order, path)] of the commits whose added lines hold it as a
    word (in log order, at most ``MAX_CANDIDATES``), and (sha, subject) of each by order."""
    found: dict[str, list[tuple[int, int, str]]] = {}
    commits: dict[int, tuple[str, str]] = {}
    words = sorted(n for n in names if n.isascii())
    if not words or not log:
        return {}, {}
    rx = re.compile(rb"\b" + _trie(words) + rb"\b")  # bytes: an ASCII word boundary
    starts: list[int] = []  # offset of each commit's header
    at = log.find(b"\x00")
    while at != -1:
        starts.append(at + 1)
        at = log.find(b"\x00", at + 1)
    headers: dict[int, tuple[str, int, str]] = {}
    for m in rx.finditer(log):
        pos = m.start()
        line_start = log.rfind(b"\n", 0, pos) + 1
        if log[line_start:line_start + 1] != b"+" or log.startswith(b"+++ ", line_start):
            continue  # not an added line (a removed or context line, a header)
        order = bisect_right(starts, pos) - 1
        if order < 0:
            continue
        file_at = log.rfind(b"\n+++ ", starts[order], line_start)
        if file_at == -1 or not log.startswith(b"\n+++ b/", file_at):
            continue  # a quoted path (a newline or quote in the name) cannot be asked of cat-file
        path = os.fsdecode(log[file_at + 7:log.find(b"\n", file_at + 1)])
        if order not in headers:
            header = log[starts[order]:log.find(b"\n", starts[order])]
            sha, _, rest = header.partition(b" ")
            ctime, _, subject = rest.partition(b" ")
            headers[order] = (sha.decode("ascii", "replace"), int(ctime) if ctime.isdigit() else 0,
                              subject.decode("utf-8", "replace"))
        name = m.group().decode("ascii")
        got = found.setdefault(name, [])
        if len(got) < MAX_CANDIDATES and (not got or got[-1][1:] != (order, path)):
            got.append((headers[order][1], order, path))
            commits[order] = (headers[order][0], headers[order][2])
    return found, commits


class FirstReads:
    """The first reads of switch names in one repository's history (see the module)."""

    def __init__(self, toplevel: Path, head: str, prefix: str, reads: Callable[[bytes], frozenset[str] | None],
                 boundary: frozenset[str] = frozenset(), cache_dir: Path | None = None) -> None:
        self.toplevel = toplevel
        self.reads = reads
        self.head = head
        self.prefix = prefix
        self.boundary = boundary
        self.cache_dir = cache_dir / f"first-reads-v{FORMAT}" if cache_dir is not None else None
        #: how the last answer was found: "stored", "extended" (from a stored ancestor) or "pass"
        self.how = ""
        self._read: dict[tuple[str, str], frozenset[str] | None] = {}
        self._blobs: BlobReader | None = None

    # -- disk ------------------------------------------------------------------

    def _repo_key(self) -> str:
        return hashlib.sha256(f"{FORMAT}\0{os.path.realpath(self.toplevel)}\0{self.prefix}\0"
                              f"{' '.join(sorted(self.boundary))}".encode("utf-8", "surrogateescape")).hexdigest()[:24]

    def _file(self, head: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / f"{self._repo_key()}-{head}.json"

    @staticmethod
    def _load(path: Path | None, head: str) -> dict[str, Introduction | None]:
        if path is None:
            return {}
        try:
            raw: Any = opened_json(path.read_bytes())
            if raw["format"] != FORMAT or raw["head"] != head:
                return {}
            return {str(name): None if row is None else Introduction(str(row[0]), int(row[1]), str(row[2]), str(row[3]),
                                                                      bool(row[4]))
                    for name, row in raw["answers"].items()}
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
            return {}

    def _store(self, answers: dict[str, Introduction | None]) -> None:
        path = self._file(self.head)
        if path is None:
            return
        rows = {n: None if a is None else [a.sha, a.ctime, a.subject, a.path, a.boundary] for n, a in sorted(answers.items())}
        data = sealed_json({"format": FORMAT, "head": self.head, "answers": rows})
        if try_write_atomically(path, data):
            keep_newest(path.parent, KEEP_FILES, lambda e: e.name.endswith(".json"), spare=path)

    def _stored_ancestor(self) -> tuple[str, dict[str, Introduction | None]] | None:
        """The answers stored for the most recently stored HEAD of this repository and prefix
        that HEAD's history holds (a few tried)."""
        if self.cache_dir is None or not self.cache_dir.is_dir():
            return None
        start = f"{self._repo_key()}-"
        stored = []
        with os.scandir(self.cache_dir) as scan:
            for entry in scan:
                if entry.name.startswith(start) and entry.name.endswith(".json"):
                    try:
                        stored.append((entry.stat().st_mtime, entry.name[len(start):-5], entry.path))
                    except OSError:
                        continue
        for _, sha, path in sorted(stored, reverse=True)[:4]:
            if sha == self.head:
                continue
            code, _, _ = runner.run(self.toplevel, ["merge-base", "--is-ancestor", "--end-of-options", sha, self.head])
            answers = self._load(Path(path), sha) if code == 0 else {}
            if answers:
                return sha, answers
        return None

    # -- the pass --------------------------------------------------------------

    def answers(self, names: Iterable[str]) -> dict[str, Introduction | None]:
        """name -> its first confirmed read (None: none found, ask blame)."""
        wanted = {n for n in names if _WORD.match(n)}
        here = self._load(self._file(self.head), self.head)
        if wanted <= set(here):
            self.how = "stored"
            return {n: here[n] for n in wanted}
        try:
            since = self._stored_ancestor()
            answers: dict[str, Introduction | None] = {}
            fresh = wanted
            if since is not None:
                base, before = since
                old = wanted & set(before)
                # an answer stored for an ancestor is older than anything since it
                found = self._confirmed(_log(self.toplevel, self.head, self.prefix, base), old)
                answers = {n: before[n] or found.get(n) for n in old}
                fresh = wanted - old
                self.how = "extended"
            if fresh:
                answers.update(self._confirmed(_log(self.toplevel, self.head, self.prefix, None), fresh))
                self.how = "pass"
        finally:
            self.close()
        self._store({**here, **answers})
        return answers

    def _confirmed(self, log: bytes, names: set[str]) -> dict[str, Introduction | None]:
        found, commits = _candidates(log, names)
        out: dict[str, Introduction | None] = {}
        for name in sorted(names):
            out[name] = None
            for ctime, order, path in sorted(found.get(name, ())):
                sha, subject = commits[order]
                read = self._names_read(sha, path)
                if read is not None and name in read:
                    out[name] = Introduction(sha, ctime, subject, path, sha in self.boundary)
                    break
        return out

    def _names_read(self, sha: str, path: str) -> frozenset[str] | None:
        key = (sha, path)
        if key not in self._read:
            if self._blobs is None:
                self._blobs = BlobReader(self.toplevel)
            try:
                data = self._blobs.read(f"{sha}:{path}", MAX_BLOB)
            except Exception:  # noqa: BLE001 - a missing object: this candidate proves nothing
                self._blobs.close()
                self._blobs = None
                data = None
            self._read[key] = self.reads(data) if data is not None else None
        return self._read[key]

    def close(self) -> None:
        if self._blobs is not None:
            self._blobs.close()
            self._blobs = None
