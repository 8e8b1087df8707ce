"""Per-file facts cache: one pickled ``FileFacts | ScriptFacts | FileError`` per file.

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

import copyreg
import dataclasses
import hashlib
import io
import operator
import os
import pickle
import shutil
import sys
import tempfile
from pathlib import Path

from cs_audit import model
from cs_audit.model import FileError, FileFacts, ScriptFacts, SourceFile

#: bump when the entry layout changes
CACHE_FORMAT = 2
#: version directories kept (most recently used first); older ones are deleted
KEEP_VERSIONS = 4
_MAGIC = b"csa-facts"
#: errors that are a function of the bytes (others may be transient: internal, timeout, crash)
_CACHEABLE_ERRORS = frozenset({"syntax", "encoding", "binary"})

CachedResult = FileFacts | ScriptFacts | FileError


def _dispatch_table() -> dict:
    """Pickle the model's dataclasses as ``cls(*field values)``: the default for slotted
    dataclasses calls ``dataclasses.fields()`` per object on load, 5x slower."""
    table = copyreg.dispatch_table.copy()
    for cls in vars(model).values():
        if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == model.__name__:
            names = [f.name for f in dataclasses.fields(cls) if f.init]
            if len(names) < 2 or len(names) != len(dataclasses.fields(cls)):
                continue
            getter = operator.attrgetter(*names)
            table[cls] = lambda obj, cls=cls, getter=getter: (cls, getter(obj))
    return table


_DISPATCH = _dispatch_table()


def _dumps(value: object) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(value)
    return buffer.getvalue()


def default_cache_root() -> Path:
    """``$XDG_CACHE_HOME/cs-audit``, or ``~/.cache/cs-audit`` (read once per scan)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "cs-audit"


_CODE_DIGEST: str | None = None


def code_digest() -> str:
    """Digest of cs-audit's own Python source: any edit of the tool invalidates the cache
    (an editable install keeps its version number while its code changes)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        from cs_audit import __version__

        package = Path(__file__).resolve().parent
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
    root = (Path(cache_dir) if cache_dir else default_cache_root()) / "facts"
    version = root / version_dir_name(rules_digest)
    try:
        version.mkdir(parents=True, exist_ok=True)
        os.utime(version)  # most recently used
    except OSError:
        return None
    _prune(root, keep=version)
    return str(version)


def _prune(root: Path, keep: Path) -> None:
    try:
        dirs = [d for d in root.iterdir() if d.is_dir() and d.name.startswith("v")]
        dirs.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in dirs[KEEP_VERSIONS:]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


def entry_key(source: SourceFile, data: bytes) -> str:
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{source.kind}\0{source.path}\0".encode())
    h.update(data)
    return h.hexdigest()


def _entry_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, key[:2], key + ".pkl")


def load(cache_dir: str, key: str) -> CachedResult | None:
    """The cached result for ``key``, or None (missing, corrupt, or written by other code)."""
    try:
        with open(_entry_path(cache_dir, key), "rb") as handle:
            blob = handle.read()
    except OSError:
        return None
    if not blob.startswith(_MAGIC):
        return None
    try:
        stored_key, result = pickle.loads(blob[len(_MAGIC):])
    except Exception:  # noqa: BLE001 - a corrupt entry is a miss (it gets rewritten)
        return None
    if stored_key != key or not isinstance(result, (FileFacts, ScriptFacts, FileError)):
        return None
    return result


def cacheable(result: CachedResult) -> bool:
    return not isinstance(result, FileError) or result.kind in _CACHEABLE_ERRORS


def store(cache_dir: str, key: str, result: CachedResult) -> None:
    """Write an entry atomically (temp file + rename); any failure leaves the cache as it was."""
    if not cacheable(result):
        return
    target = _entry_path(cache_dir, key)
    directory = os.path.dirname(target)
    try:
        blob = _MAGIC + _dumps((key, result))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key[:8]}.", suffix=".tmp")
    except (OSError, pickle.PicklingError):
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
        os.replace(tmp, target)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def lookup(source: SourceFile, cache_dir: str, max_bytes: int) -> CachedResult | None:
    """The cached result of one source file, reading its bytes (for a warm check in the
    main process before any worker starts); None on a miss."""
    try:
        with open(source.abspath, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError:
        return None
    if len(data) > max_bytes:
        return None
    return load(cache_dir, entry_key(source, data))
