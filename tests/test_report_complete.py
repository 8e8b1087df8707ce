"""The audit markdown keeps every default-ON hot site and every instrumentation switch, however
it is shortened: ranked rows per process side, the rest by folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cs_audit.analysis.categories import OBSERVING
from cs_audit.api import run_audit
from cs_audit.config import load_config
from cs_audit.render import markdown
from cs_audit.ruleset import load_ruleset

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def audit():
    cwd = os.getcwd()
    os.chdir(FIXTURES)
    try:
        return run_audit(load_config("compressspec", jobs=1, history=False))
    finally:
        os.chdir(cwd)


def _section_1_sites(text: str) -> set[tuple[str, int]]:
    """(path, line) of every statement §1 names: ranked rows spell `path:line`, folder rows
    spell `folder/` and `file: 12, 40-42`."""
    body = text.split("## 1.", 1)[1].split("\n## ", 1)[0]
    sites: set[tuple[str, int]] = set()
    for line in body.splitlines():
        cells = line.split(" | ")
        for path, a, b in re.findall(r"`([\w./-]+\.py):(\d+)(?:-(\d+))?`", line):
            sites.update((path, n) for n in range(int(a), int(b or a) + 1))
        folder = re.match(r"\| `([\w./-]+/)` \|", line)
        if folder and len(cells) > 1:
            for name, lines in re.findall(r"`([\w.-]+\.py): ([\d, -]+)`", cells[1]):
                for part in lines.split(", "):
                    a, _, b = part.partition("-")
                    sites.update((folder.group(1) + name, n) for n in range(int(a), int(b or a) + 1))
    return sites


@pytest.mark.parametrize("ranked", [markdown.RANKED_PER_SIDE, 1, 0])
def test_every_default_on_hot_site_is_in_section_1(audit, ranked: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rs = load_ruleset()
    monkeypatch.setattr(markdown, "RANKED_PER_SIDE", ranked)
    text = markdown.render_markdown(audit, rs)
    rows = markdown.default_on_rows(audit, rs)
    assert rows
    named = _section_1_sites(text)
    missing = [(f.path, f.line) for f in rows if (f.path, f.line) not in named]
    assert not missing


def test_every_instrumentation_switch_is_in_the_report(audit) -> None:
    text = markdown.render_markdown(audit, load_ruleset())
    observing = [s.name for s in audit.switches if s.category in OBSERVING]
    assert observing
    assert [name for name in observing if f"`{name}`" not in text] == []
