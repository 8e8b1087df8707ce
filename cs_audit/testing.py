"""Test kit: scan small in-memory trees and compare reports with snapshots."""

from __future__ import annotations

import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path

from cs_audit.api import run_audit
from cs_audit.config import AuditConfig
from cs_audit.model import AuditResult


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


def scan_files(files: dict[str, str | bytes], **config: object) -> AuditResult:
    """Scan a throwaway tree built from ``files`` (dedented), one process, no history."""
    with tempfile.TemporaryDirectory() as tmp:
        root = write_tree(Path(tmp), files)
        options = {"jobs": 1, "history": False, **config}
        result = run_audit(AuditConfig(root=str(root), **options))  # type: ignore[arg-type]
    return replace(result, root="<tmp>")


def findings_of(source: str, rule: str | None = None, path: str = "mod.py") -> list[tuple[int, str, str | None]]:
    """(line, rule, switch) of every finding in one module, optionally of one rule."""
    result = scan_files({path: source})
    return [(f.line, f.rule, f.switch) for f in result.findings if rule is None or f.rule == rule]
