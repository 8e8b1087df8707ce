"""A real corpus: the running interpreter's own standard library, scanned through the library API.

``sysconfig.get_paths()["stdlib"]`` minus ``site-packages`` (what is installed there varies by
machine): 1,797 files on CPython 3.11.7.  Expected: no worker crash, no timeout, no internal
error, and exactly the pinned set of files that cannot be analysed, per minor version.

The whole library costs ~92 s of CPU (1-3 minutes of wall time on 2 cores), so by default the
test scans a fixed subset: every module outside the test directories (738 files), every 4th
file of the test directories in path order, and every pinned file; the subset is copied to a
temporary directory with its relative paths, and the exact-set check still holds on it.
``CS_AUDIT_CORPUS_FULL=1`` scans the whole library in place.

To pin a new version, run this module on it (full): the skip message of
``test_exactly_the_pinned_files_cannot_be_analysed`` prints the set it saw.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest

from cs_audit.api import run_audit
from cs_audit.config import AuditConfig
from cs_audit.extract.discover import discover
from cs_audit.model import AuditResult

STDLIB = Path(sysconfig.get_paths()["stdlib"])

#: (path relative to the stdlib, with ``test/tokenizedata/`` shortened to ``test/`` because
#: patch releases moved those files, kind) of every file a scan cannot analyse
PINNED: dict[tuple[int, int], frozenset[tuple[str, str]]] = {
    (3, 11): frozenset({
        # Python 2 test data of lib2to3
        ("lib2to3/tests/data/bom.py", "syntax"),
        ("lib2to3/tests/data/crlf.py", "syntax"),
        ("lib2to3/tests/data/different_encoding.py", "syntax"),
        ("lib2to3/tests/data/false_encoding.py", "syntax"),
        ("lib2to3/tests/data/py2_test_grammar.py", "syntax"),
        # tokenizer tests: broken on purpose
        ("test/bad_coding.py", "encoding"),
        ("test/bad_coding2.py", "encoding"),
        ("test/badsyntax_pep3120.py", "encoding"),
        ("test/badsyntax_3131.py", "syntax"),
        # zip test data without an extension but with a shebang line
        ("test/ziptestdata/exe_with_z64", "binary"),
        ("test/ziptestdata/exe_with_zip", "binary"),
        # valid Python: a dict of ~200 implicitly concatenated strings nests libcst's
        # ConcatenatedString deeper than the interpreter's recursion limit in the facts walker
        ("pydoc_data/topics.py", "parser-crash"),
    }),
}
#: failures that must never happen on the stdlib, pinned or not
NEVER = frozenset({"timeout", "internal"})
FULL = bool(os.environ.get("CS_AUDIT_CORPUS_FULL"))
#: every file parsed for real, never served from a facts cache (where the engine has one)
NO_CACHE = {"cache": False} if "cache" in AuditConfig.__dataclass_fields__ else {}
_TEST_DIRS = frozenset({"test", "tests", "idle_test"})


def _key(path: str) -> str:
    return path.replace("test/tokenizedata/", "test/")


def _subset(into: Path) -> Path:
    """Copy the fixed subset of the stdlib (see the module docstring) to ``into``."""
    pinned = {path for paths in PINNED.values() for path, _kind in paths}
    sources, _ = discover(STDLIB, ("site-packages",))
    tests = [s for s in sources if _TEST_DIRS & set(s.path.split("/")[:-1])]
    keep = {s.path for s in sources if s not in tests} | {s.path for s in tests[::4]}
    keep |= {s.path for s in sources if _key(s.path) in pinned}
    for source in sources:
        if source.path in keep:
            target = into / source.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source.abspath, target)
    return into


@pytest.fixture(scope="module")
def stdlib_scan(tmp_path_factory: pytest.TempPathFactory) -> AuditResult:
    if not STDLIB.is_dir():
        pytest.skip(f"no standard library directory at {STDLIB}")
    root = STDLIB if FULL else _subset(tmp_path_factory.mktemp("stdlib"))
    config = AuditConfig(root=str(root), jobs=os.cpu_count() or 1, history=False, exclude=("site-packages",), **NO_CACHE)
    return run_audit(config)


def test_the_stdlib_scans_without_a_crash(stdlib_scan: AuditResult) -> None:
    assert stdlib_scan.files_scanned > (1500 if FULL else 900)
    assert [e for e in stdlib_scan.errors if e.kind in NEVER] == []
    assert [e for e in stdlib_scan.errors if "worker process" in e.message] == []  # no SIGSEGV/abort/kill
    pinned = PINNED.get(sys.version_info[:2], frozenset())
    crashes = {(_key(e.path), e.kind) for e in stdlib_scan.errors if e.kind == "parser-crash"}
    assert crashes <= pinned or not pinned, crashes - pinned


def test_exactly_the_pinned_files_cannot_be_analysed(stdlib_scan: AuditResult) -> None:
    seen = frozenset((_key(e.path), e.kind) for e in stdlib_scan.errors)
    version = sys.version_info[:2]
    if version not in PINNED:
        pytest.skip(f"no pinned set for Python {version[0]}.{version[1]}; this run saw {sorted(seen)}")
    assert seen == PINNED[version]
