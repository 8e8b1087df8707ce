"""The HTML report (#22): one self-contained page, parsed here with the standard library's
``html.parser``; the scanned tree is hostile, so its names and code must stay text."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from typer.testing import CliRunner

from cs_audit.cli import app
from cs_audit.testing import write_tree

runner = CliRunner()
EVIL = "<script>alert(1)</script>"
TREE = {
    "engine/__init__.py": "",
    f"engine/{EVIL}.py": """
        import logging, os
        logger = logging.getLogger(__name__)


        class Runner:
            def execute_model(self, batch):
                logger.info(f"<script>alert('x')</script> {batch}")
                if os.environ.get("A<img src=x onerror=alert(2)>"):
                    print(batch.item())
                return os.environ.get("MY_DBG")
    """,
    "engine/worker.py": """
        import logging
        logger = logging.getLogger(__name__)


        class TinyDecoderLayer:
            def forward(self, x):
                logger.info("layer %s", x)
    """,
}


class Page(HTMLParser):
    """Every start tag with its attributes, the text of each ``<script>``, all text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)

    def ids(self) -> set[str]:
        return {a["id"] for _, a in self.tags if a.get("id")}

    def having(self, tag: str, **wanted: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in wanted.items())]


def _page(tmp_path: Path) -> tuple[Page, str]:
    root = write_tree(tmp_path / "tree", TREE)
    out = tmp_path / "audit.html"
    result = runner.invoke(app, ["scan", str(root), "-f", "html", "-o", str(out), "-j", "1", "--no-history"])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    page.close()
    return page, text


def test_hostile_names_and_code_stay_text(tmp_path: Path) -> None:
    page, text = _page(tmp_path)
    assert [t for t, _ in page.tags].count("script") == 1  # the page's own, nothing from the tree
    assert not any(name.startswith("on") for _, attrs in page.tags for name in attrs)  # no event handler attribute
    assert not page.having("img")
    all_text = "".join(page.text)
    assert f"engine/{EVIL}.py" in all_text and "<script>alert('x')</script>" in all_text
    assert "A<img src=x onerror=alert(2)>" in all_text
    assert "alert" not in page.scripts[0]


def test_self_contained_sections_tables_and_switch_anchors(tmp_path: Path) -> None:
    page, text = _page(tmp_path)
    # nothing is fetched: no external source, stylesheet or link
    for tag, attrs in page.tags:
        assert not (attrs.get("src") or "").strip(), tag
        assert not (tag == "link" and attrs.get("rel") == "stylesheet")
        href = attrs.get("href") or ""
        assert href == "" or href.startswith("#"), href
    assert {"pictures", "default-on", "findings", "switches", "duplicates", "hot-roots", "skipped"} <= page.ids()
    rows = [a for t, a in page.tags if t == "tr" and a.get("data-rule")]
    assert {(a["data-rule"], a["data-freq"]) for a in rows} >= {("default-on-emitter", "step"), ("env-read-hot", "step"),
                                                                 ("default-on-emitter", "layer")}
    assert all(a.get("data-path") and a.get("data-switch") for a in rows)
    # each finding opens to its source line and hot path
    assert len(page.having("details")) >= len(rows) and "hot path" in "".join(page.text)
    assert '<span class="ln">7</span>         logger.info(f&quot;&lt;script&gt;' in text
    # every in-page link lands on an id; each switch has its anchor with its disposition and why
    targets = {a["href"][1:] for _, a in page.tags if (a.get("href") or "").startswith("#")}
    assert targets <= page.ids()
    switch_ids = {a["id"] for a in page.having("article")}
    assert len(switch_ids) == 2 and any(i.startswith("switch-MY_DBG-") for i in switch_ids)
    assert "why" in "".join(page.text) and "added in" in "".join(page.text)
    # sortable, filterable tables
    assert page.having("table", **{"class": "sortable", "id": "findings-table"})
    assert {a.get("data-key") for t, a in page.tags if t in ("select", "input")} >= {"rule", "switch", "freq", "path"}
    # the picture: bars per file and per function, drawn inline
    svgs = page.having("svg")
    assert len(svgs) == 2 and len(page.having("rect")) >= 4
