"""Per-file facts cache: one ``FileFacts | ScriptFacts | FileError`` per file (``pack``),
and whole-tree results keyed by every file's key (a warm scan of an unchanged tree
loads one result: no facts, no joins), with a record per root of the last tree stored
(``TreeRecord``: a scan after an edit that left the facts as they were, or only moved
their lines, reuses that tree's result; see ``api._result_of_equal_facts``).

Facts are a pure function of (the file's bytes, its path, the rules, the code of
cs-audit), so an entry is found by

* a directory per *version*: cache format, Python minor version, a digest of
  cs-audit's own source (an edited checkout never reads entries of older code),
  and the rule set's digest (``RuleSet.digest``);
* a file per *key* in it: a hash of the file's kind, its relative path and its
  bytes.  The path is part of the key, not re-stamped on load: the facts of
  identical bytes differ with the path (the module name, and the targets of
  relative imports in ``aliases`` derive from it).

The directory is resolved once per scan, in the main process (``open_cache``:
``AuditConfig.cache_dir``, else ``$XDG_CACHE_HOME/cs-audit``, else
``~/.cache/cs-audit``), and the resolved path is handed to the workers; nothing
here reads the environment per file.  Concurrent scans are safe: an entry is
written to a temp file in the same directory and renamed into place
(``os.replace`` is atomic), and a reader that finds a truncated, foreign or
unreadable entry treats it as a miss and rewrites it.  Size stays bounded by
version: ``open_cache`` keeps the ``KEEP_VERSIONS`` most recently used version
directories and removes the others.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cs_audit import records
from cs_audit.files import ATOMIC_TEMP, keep_newest, remove_stale_temps, try_write_atomically
from cs_audit.records import record
from cs_audit.sources import FileError, SourceFile

if TYPE_CHECKING:
    from cs_audit.model import FileFacts, ScriptFacts

    CachedResult = FileFacts | ScriptFacts | FileError

#: bump when the entry layout changes (an entry of another format is a miss)
CACHE_FORMAT = 7
#: version directories kept (most recently used first); older ones are deleted
KEEP_VERSIONS = 4
#: the whole cache is searched for temp files that killed runs left at most this often, in
#: seconds (on every scan, the search would be a good part of a scan that finds nothing changed)
SWEEP_EVERY_S = 3600
#: in the cache root: its mtime is when the cache was last searched for those files
_SWEPT = ".swept"
#: the name every entry file ends in
ENTRY_SUFFIX = ".entry"
#: errors that are a function of the bytes (others may be transient: internal, timeout, crash)
_CACHEABLE_ERRORS = frozenset({"syntax", "encoding", "binary"})




def default_cache_root() -> Path:
    """``$XDG_CACHE_HOME/cs-audit``, or ``~/.cache/cs-audit`` (read once per scan)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "cs-audit"


def blame_cache_dir(enabled: bool, cache_dir: str | None) -> str | None:
    """Where ``cs_audit.git.blame.open_history`` keeps blame answers for a scan with
    ``AuditConfig.cache`` and ``AuditConfig.cache_dir``: ``<cache root>/blame``, or None
    when caching is off."""
    if not enabled:
        return None
    folder = safe_folder(cache_dir, "blame")
    return str(folder) if folder is not None else None


_CODE_DIGEST: str | None = None
#: the cs_audit package, every module of which the code digest covers
CODE_ROOT = Path(__file__).resolve().parent.parent


def code_digest() -> str:
    """Digest of cs-audit's own Python source: any edit of the tool invalidates the cache
    (an editable install keeps its version number while its code changes)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        from cs_audit import __version__

        package = CODE_ROOT
        h = hashlib.sha256(__version__.encode())
        for path in sorted(package.rglob("*.py")):
            h.update(path.relative_to(package).as_posix().encode() + b"\0")
            try:
                h.update(path.read_bytes())
            except OSError:
                continue
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


def version_dir_name(rules_digest: str) -> str:
    return f"v{CACHE_FORMAT}-py{sys.version_info[0]}{sys.version_info[1]}-{code_digest()}-{rules_digest}"


def open_cache(enabled: bool, cache_dir: str | None, rules_digest: str) -> str | None:
    """The directory this scan reads and writes entries in, or None when caching is off
    (``--no-cache``) or the directory cannot be created.  Call once per scan, in the main
    process, and pass the result to ``analyse_file(..., cache_dir=...)``."""
    if not enabled:
        return None
    version = safe_folder(cache_dir, "facts", version_dir_name(rules_digest))
    if version is None:
        return None
    try:
        os.utime(version)  # most recently used
    except OSError:
        return None
    _prune(version.parent, keep=version)
    _sweep(version.parent.parent)
    return str(version)


def safe_folder(cache_dir: str | None, *parts: str) -> Path | None:
    """``<cache root>/<parts...>``, made (0700) when missing, or None when it cannot be made
    or when it or a folder above it up to the cache root is unsafe (``_unsafe``: said once
    on stderr; the scan goes on as with ``--no-cache``)."""
    folder = top = Path(cache_dir) if cache_dir else default_cache_root()
    try:
        top.mkdir(mode=0o700, parents=True, exist_ok=True)
        chain = [top]
        for part in parts:
            folder = folder / part
            folder.mkdir(mode=0o700, exist_ok=True)
            chain.append(folder)
        unsafe = next((why for why in map(_unsafe, chain) if why), "")
    except OSError:
        return None
    if unsafe:
        _refuse(unsafe)
        return None
    return folder


def _unsafe(folder: Path) -> str:
    """Why a cache folder must not be used ("" when it may): a symlink, another user's, or
    writable by the group or others. Its entries decide what a scan reports, as git's
    `safe.directory` has it for a repository."""
    info = folder.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a plain directory"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"{folder} is owned by another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"{folder} is writable by its group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return ""


#: the refusals already said in this process (once each)
_REFUSED: set[str] = set()


def _refuse(why: str) -> None:
    if why not in _REFUSED:
        _REFUSED.add(why)
        sys.stderr.write(f"cs-audit: warning: cache not used: {why}; scanning as with --no-cache "
                         "(remove it, or set XDG_CACHE_HOME to a folder only you can write)\n")


def _sweep(top: Path) -> None:
    """Remove the temp files of entries that killed runs left anywhere below the cache root
    ``top``, unless that was done less than ``SWEEP_EVERY_S`` ago."""
    stamp = top / _SWEPT
    try:
        if time.time() - stamp.lstat().st_mtime < SWEEP_EVERY_S:
            return
    except FileNotFoundError:
        pass
    except OSError:
        return
    if try_write_atomically(stamp, b""):
        remove_stale_temps(top, ATOMIC_TEMP, below=True)


def _prune(root: Path, keep: Path) -> None:
    keep_newest(root, KEEP_VERSIONS, lambda e: e.is_dir(follow_symlinks=False) and e.name.startswith("v"), spare=keep)


def entry_key(source: SourceFile, data: bytes) -> str:
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{source.kind}\0{source.path}\0".encode())
    h.update(data)
    return h.hexdigest()


def _entry_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, key[:2], key + ENTRY_SUFFIX)


# Every entry, of every store: a line naming the store and the format (``_head``), the
# BLAKE2b digest of everything else (a flipped or torn entry is a miss; the format in it,
# a format change is a miss), the key the entry was stored under, then its value in the
# plain format of ``cs_audit.records`` (a loader that builds only cs-audit's record classes,
# from plain values: an entry someone else wrote cannot make it call anything).
_DIGEST_BYTES = 32


def _head(kind: bytes) -> bytes:
    return b"cs-audit %s %d\n" % (kind, CACHE_FORMAT)


def _digest(head: bytes, key: bytes, payload: bytes | memoryview) -> bytes:
    h = hashlib.blake2b(head, digest_size=_DIGEST_BYTES)
    h.update(key)
    h.update(b"\n")
    h.update(payload)
    return h.hexdigest().encode("ascii")


def _sealed(kind: bytes, key: str, payload: bytes) -> bytes:
    """The entry of ``key`` holding ``payload`` (``records.dumps`` of its value)."""
    head, name = _head(kind), key.encode("utf-8", "surrogatepass")
    return b"".join((head, _digest(head, name, payload), b"\n", name, b"\n", payload))


def _opened(blob: bytes, kind: bytes, key: str) -> memoryview | None:
    """The payload of ``_sealed`` bytes, or None when they are of another store or format, of
    another key, or their digest does not match."""
    head, name = _head(kind), key.encode("utf-8", "surrogatepass")
    start = len(head) + 2 * _DIGEST_BYTES + 1
    if not (blob.startswith(head) and blob[start:start + len(name) + 1] == name + b"\n"):
        return None
    payload = memoryview(blob)[start + len(name) + 1:]
    return payload if blob[len(head):start] == _digest(head, name, payload) + b"\n" else None


def _value(blob: bytes, kind: bytes, key: str) -> object | None:
    """The value of an entry (``_opened``), or None when it is no entry of ``key``."""
    payload = _opened(blob, kind, key)
    if payload is None:
        return None
    try:
        return records.loads(payload)
    except ValueError:  # a shape no entry of cs-audit has
        return None


_FACTS = b"facts"


def unpack(payload: bytes | memoryview) -> CachedResult | None:
    """The result a facts entry's payload holds; None for anything else."""
    from cs_audit.model import FileFacts, ScriptFacts  # before loading: the records it names

    try:
        result = records.loads(payload)
    except ValueError:
        return None
    return result if isinstance(result, (FileFacts, ScriptFacts, FileError)) else None


def load(cache_dir: str, key: str) -> CachedResult | None:
    """The cached result for ``key``, or None (missing, corrupt, or written by other code)."""
    try:
        with open(_entry_path(cache_dir, key), "rb") as handle:
            blob = handle.read()
    except OSError:
        return None
    payload = _opened(blob, _FACTS, key)
    return unpack(payload) if payload is not None else None


def cacheable(result: CachedResult) -> bool:
    return not isinstance(result, FileError) or result.kind in _CACHEABLE_ERRORS


def _write_entry(target: str, kind: bytes, key: str, value: object) -> bool:
    """Write the entry of ``key`` holding ``value`` atomically; False on failure (a value the
    plain format does not hold is not stored)."""
    try:
        payload = records.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return try_write_atomically(target, _sealed(kind, key, payload))


def _read_entry(path: str, kind: bytes, key: str) -> object | None:
    """The value stored under ``key`` at ``path``; None when missing, corrupt or foreign."""
    try:
        with open(path, "rb") as handle:
            blob = handle.read()
    except OSError:
        return None
    return _value(blob, kind, key)


def store(cache_dir: str, key: str, result: CachedResult) -> None:
    """Write the facts entry of ``key`` atomically when ``result`` is ``cacheable``; any failure
    leaves the cache as it was."""
    if cacheable(result):
        store_error(cache_dir, key, result)


def store_error(cache_dir: str, key: str, error: CachedResult) -> None:
    """Write ``error`` as the entry of ``key`` whatever its kind: for an error the caller
    knows to be a verdict on the bytes that ``cacheable`` cannot tell from its kind alone
    (a timeout of the CPU-time limit, ``api``)."""
    _write_entry(_entry_path(cache_dir, key), _FACTS, key, error)


def source_key(source: SourceFile, max_bytes: int) -> str | None:
    """The entry key of one source file from its bytes (read in the main process for a warm
    check before any worker starts); None when it cannot be read or is over ``max_bytes``."""
    try:
        with open(source.abspath, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError:
        return None
    if len(data) > max_bytes:
        return None
    return entry_key(source, data)


# --------------------------------------------------------------------------- stat memo
_STATS = b"stats"
#: a file modified less than this before it was hashed is hashed again next time: its
#: mtime may not change if it is written again within the file system's timestamp tick
#: (git's "racily clean" entries)
RACY_NS = 3_000_000_000

#: stat records kept per version directory (one per scanned root, most recently used first)
KEEP_STAT_MEMOS = 16
#: (stat signature, entry key) per (kind, path); one record per root (its absolute path)
StatMemo = dict[tuple[str, str], tuple[tuple[int, int, int, int], str]]


def _root_record_path(cache_dir: str, kind: str, root: str) -> str:
    """Where the record of ``kind`` (``stats``, ``trees``) for the scanned ``root`` lives."""
    name = hashlib.blake2b(root.encode("utf-8", "surrogateescape"), digest_size=10).hexdigest()
    return os.path.join(cache_dir, kind, name + ENTRY_SUFFIX)


def source_keys(sources: list[SourceFile], max_bytes: int, cache_dir: str, root: str,
                stats: dict[str, os.stat_result] | None = None) -> list[str | None]:
    """``source_key`` of every source, without reading the files whose size, mtime, ctime
    and inode are those recorded when they were last hashed (git's index does the same).
    The record is one file per scanned ``root`` (its absolute path: a relative and an absolute
    spelling share it) in the cache directory; a file changed within ``RACY_NS`` of being
    hashed is not trusted from the record.  ``stats``: each file's stat by ``abspath``,
    when the caller has it (``discover_tree``)."""
    path = _root_record_path(cache_dir, "stats", root)
    stored = _read_entry(path, _STATS, root)
    memo: StatMemo = stored if isinstance(stored, dict) else {}
    fresh: StatMemo = {}
    keys: list[str | None] = []
    for source in sources:
        ident = (source.kind, source.path)
        st = stats.get(source.abspath) if stats else None
        if st is None:
            try:
                st = os.stat(source.abspath)
            except OSError:
                keys.append(None)
                continue
        if st.st_size > max_bytes:
            keys.append(None)  # what ``source_key`` says of it, whatever the record holds
            continue
        signature = _signature(st)
        known = memo.get(ident)
        if known is not None and known[0] == signature:
            fresh[ident] = known
            keys.append(known[1])
            continue
        hashed_at = time.time_ns()
        key = source_key(source, max_bytes)
        keys.append(key)
        if key is not None and _settled(signature, hashed_at):
            fresh[ident] = (signature, key)
    if fresh != memo:
        _write_stat_memo(path, root, fresh)
    return keys


def _signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """What the stat record compares: size, mtime, ctime and inode."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _settled(signature: tuple[int, int, int, int], hashed_at_ns: int) -> bool:
    """Whether a file of this signature, hashed at ``hashed_at_ns``, was last changed more than
    ``RACY_NS`` before (else the record does not vouch for it)."""
    return hashed_at_ns - max(signature[1], signature[2]) > RACY_NS


def _write_stat_memo(path: str, root: str, memo: StatMemo) -> None:
    _store_recent(path, _STATS, root, memo, KEEP_STAT_MEMOS)


# --------------------------------------------------------------------------- whole-tree results and reports
#: whole-tree results, and rendered reports, kept per version directory (most recently used first)
KEEP_RESULTS = 16
KEEP_REPORTS = 16


def tree_key(file_keys: list[tuple[str, str]], context: str) -> str:
    """Key of a whole-tree result: every file's (path, entry key) and ``context`` (whatever
    else the result depends on: discovery errors, extra hot roots, default level)."""
    h = hashlib.blake2b(digest_size=20)
    h.update(context.encode("utf-8", "surrogateescape") + b"\0")
    for path, key in sorted(file_keys):
        h.update(f"{path}\0{key}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def report_key(file_keys: list[tuple[str, str]], context: str) -> str:
    """Key of a rendered report: every file's (path, entry key) and ``context`` (the rest
    of what the report depends on, ``api.audit_report``)."""
    return tree_key(file_keys, "report\0" + context)


@dataclass(frozen=True)
class _Shelf:
    """Values stored whole by key in one folder of a version directory, of which the
    ``keep`` most recently used are kept."""

    folder: str
    kind: bytes
    keep: int
    #: its values hold the model's records (a stored report holds none: a warm scan imports no model)
    holds_model: bool

    def load(self, cache_dir: str, key: str) -> object | None:
        """The value stored for ``key``, or None (missing, corrupt, foreign)."""
        path = os.path.join(cache_dir, self.folder, key + ENTRY_SUFFIX)
        if self.holds_model:
            import cs_audit.model  # noqa: F401 - the records it names
        value = _read_entry(path, self.kind, key)
        if value is not None:
            with contextlib.suppress(OSError):
                os.utime(path)  # most recently used
        return value

    def store(self, cache_dir: str, key: str, value: object) -> None:
        """Write the value of ``key`` atomically."""
        _store_recent(os.path.join(cache_dir, self.folder, key + ENTRY_SUFFIX), self.kind, key, value, self.keep)


_RESULTS = _Shelf("results", b"result", KEEP_RESULTS, holds_model=True)
_REPORTS = _Shelf("reports", b"report", KEEP_REPORTS, holds_model=False)
load_result, store_result = _RESULTS.load, _RESULTS.store
load_report, store_report = _REPORTS.load, _REPORTS.store


def _store_recent(path: str, kind: bytes, key: str, value: object, keep: int) -> None:
    """Write an entry atomically; its directory keeps the ``keep`` most recently used."""
    if _write_entry(path, kind, key, value):
        _keep_newest(os.path.dirname(path), keep)


# --------------------------------------------------------------------------- last tree per root
_TREE = b"tree"


@record
@dataclass(frozen=True)
class TreeRecord:
    """The last whole-tree result stored for a root: its key, the context it was computed
    in, and the entry key of each file (by path) it was computed from.  A scan whose changed
    files all give the results they gave then derives the same whole-tree result."""

    result_key: str
    context: str
    files: dict[str, str]


def load_tree_record(cache_dir: str, root: str) -> TreeRecord | None:
    value = _read_entry(_root_record_path(cache_dir, "trees", root), _TREE, root)
    return value if isinstance(value, TreeRecord) else None


def store_tree_record(cache_dir: str, root: str, record: TreeRecord) -> None:
    _store_recent(_root_record_path(cache_dir, "trees", root), _TREE, root, record, KEEP_STAT_MEMOS)


# --------------------------------------------------------------------------- call resolutions per root
_RESOLUTIONS = b"resolutions"


def load_resolutions(cache_dir: str, root: str) -> tuple[object, dict[str, str]] | None:
    """The call resolutions last stored for ``root`` (``joins.kept.Resolutions``) and the
    entry key of each file they were worked out from (by path); None when there are none."""
    return _load_with_keys(cache_dir, "resolutions", _RESOLUTIONS, root)


def store_resolutions(cache_dir: str, root: str, resolutions: object, keys: dict[str, str]) -> None:
    _store_with_keys(cache_dir, "resolutions", _RESOLUTIONS, root, resolutions, keys)


def _load_with_keys(cache_dir: str, folder: str, kind: bytes, root: str) -> tuple[object, dict[str, str]] | None:
    """(value, keys) stored for ``root``; the caller has imported the module of its records."""
    import cs_audit.model  # noqa: F401 - the records they name

    value = _read_entry(_root_record_path(cache_dir, folder, root), kind, root)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        return value
    return None


def _store_with_keys(cache_dir: str, folder: str, kind: bytes, root: str, value: object, keys: dict[str, str]) -> None:
    _store_recent(_root_record_path(cache_dir, folder, root), kind, root, (value, keys), KEEP_STAT_MEMOS)


# --------------------------------------------------------------------------- site gates per root
_GATES = b"gates"


def load_site_gates(cache_dir: str, root: str) -> tuple[object, dict[str, str]] | None:
    """The site gates last stored for ``root`` (``joins.kept.SiteGates``) and the entry key
    of each file they were worked out from (by path); None when there are none."""
    return _load_with_keys(cache_dir, "gates", _GATES, root)


def store_site_gates(cache_dir: str, root: str, gates: object, keys: dict[str, str]) -> None:
    _store_with_keys(cache_dir, "gates", _GATES, root, gates, keys)


def _keep_newest(directory: str, keep: int) -> None:
    """Delete all but the ``keep`` most recently modified entries of ``directory``."""
    keep_newest(directory, keep, lambda e: e.name.endswith(ENTRY_SUFFIX))


# --------------------------------------------------------------------------- env registries per root
_REGISTRIES = b"registries"


def registries_dir(enabled: bool, cache_dir: str | None) -> str | None:
    """Where the registries each file of a tree defines are kept between scans (they decide
    the rule set, so they live outside the facts directories, which the rule set names)."""
    if not enabled:
        return None
    path = safe_folder(cache_dir, "registries", f"v{CACHE_FORMAT}-{code_digest()}")
    return str(path) if path is not None else None


def load_registry_memo(directory: str, root: str) -> dict[str, tuple[tuple[int, int, int, int], int, tuple]] | None:
    """path -> (stat signature, when it was read, registries it defines) of the last scan of ``root``."""
    import cs_audit.ruleset  # noqa: F401 - the records it names

    value = _read_entry(_root_record_path(directory, "roots", root), _REGISTRIES, root)
    return value if isinstance(value, dict) else None


def store_registry_memo(directory: str, root: str, memo: dict[str, tuple[tuple[int, int, int, int], int, tuple]]) -> None:
    _store_recent(_root_record_path(directory, "roots", root), _REGISTRIES, root, memo, KEEP_STAT_MEMOS)


def stat_signature(path: str, stats: dict[str, os.stat_result] | None = None) -> tuple[int, int, int, int] | None:
    """The (size, mtime, ctime, inode) a file is recognised by between scans, or None
    (``stats``: the stat of files by path, when the caller has it)."""
    known = stats.get(path) if stats else None
    if known is not None:
        return _signature(known)
    try:
        return _signature(os.stat(path))
    except OSError:
        return None


def vouches(signature: tuple[int, int, int, int], read_at_ns: int) -> bool:
    """Whether what was read of a file of this signature at ``read_at_ns`` still holds for it."""
    return _settled(signature, read_at_ns)
