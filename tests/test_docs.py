"""The README links its reference material in docs/: every link must reach a file and a heading."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def test_readme_links_reach_a_file_and_a_heading() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", readme)
    assert links, "the README links no reference file"
    for target, anchor in links:
        path = ROOT / target
        assert path.is_file(), target
        if anchor:
            assert anchor in _anchors(path.read_text()), f"{target}#{anchor}"
