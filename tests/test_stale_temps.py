"""Temp files that killed runs left behind (#44): the next run removes them where it writes,
but only its own user's files of that exact name, written well before it started."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from cs_audit.testing import write_tree

PROJECT = Path(__file__).resolve().parent.parent
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _cs_audit(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(PROJECT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "cs_audit", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": path, **env})


def _plant(folder: Path, stale: list[str], kept: list[str]) -> tuple[list[Path], list[Path]]:
    """Temp-file-like files in ``folder``: ``stale`` names written two hours ago; ``kept`` names
    that must survive: one written now, then ones written two hours ago, the last of them
    another user's when the tests run as root."""
    folder.mkdir(parents=True, exist_ok=True)
    hours_ago = time.time() - 7200
    made = {name: folder / name for name in stale + kept}
    for name, path in made.items():
        path.write_bytes(b"half of an entry")
        if name != kept[0]:
            os.utime(path, (hours_ago, hours_ago))
    if IS_ROOT:
        os.chown(made[kept[-1]], 65534, 65534)
    else:
        kept = kept[:-1]
    return [made[n] for n in stale], [made[n] for n in kept]


def test_a_scan_removes_the_temp_files_a_killed_scan_left_in_the_cache(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", {"mod.py": "import os\nX = os.environ.get('A_DEBUG')\n"})
    cache_root = tmp_path / "xdg" / "cs-audit"
    cache_root.mkdir(parents=True, mode=0o700)
    stale, kept = _plant(cache_root / "registries" / "v0-old" / "roots", [".0123456789abcdef.k1ll3d_0.tmp"],
                         [".0123456789abcdef.wr1t1ng0.tmp", "notes.tmp", ".0123456789abcd.not_m1ne.tmp"])
    top_stale, top_kept = _plant(cache_root, [".x.entry.k1ll3d_1.tmp"], [".x.entry.wr1t1ng1.tmp", ".x.entry.longer_than_8.tmp",
                                                                      ".x.entry.not_m1n1.tmp"])
    proc = _cs_audit("scan", str(tree), "--no-history", "-q", "-f", "json", "-o", str(tmp_path / "r.json"),
                     XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert proc.returncode == 0, proc.stderr
    assert [p for p in stale + top_stale if p.exists()] == []
    assert [p for p in kept + top_kept if not p.exists()] == []


HEADER = "import logging\n\nlogger = logging.getLogger(__name__)\n\n\n"


def test_fix_write_removes_the_temp_files_a_killed_fix_left_next_to_the_files_it_fixes(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", {"pkg/mod.py": HEADER + 'logger.info(f"x {x}")\n'})
    stale, kept = _plant(tree / "pkg", [".cs-audit-fix-k1ll3d_x"],
                         [".cs-audit-fix-wr1t1ng_", ".cs-audit-fix-notes.txt", ".cs-audit-fix-not_m1ne"])
    shown = _cs_audit("fix", str(tree), "--no-cache")
    assert shown.returncode == 1, shown.stderr
    assert [p for p in stale + kept if not p.exists()] == []  # --diff changes nothing in the tree
    written = _cs_audit("fix", str(tree), "--write", "--no-cache")
    assert written.returncode == 0, written.stderr
    assert 'logger.info("x %s", x)' in (tree / "pkg" / "mod.py").read_text()
    assert [p for p in stale if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []
