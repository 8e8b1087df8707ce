"""The HTML report (#22): one self-contained page, parsed here with the standard library's
``html.parser``; the scanned tree is hostile, so its names and code must stay text."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
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
    assert page.having("table", **{"class": "sortable stacks", "id": "findings-table"})
    assert {a.get("data-key") for t, a in page.tags if t in ("select", "input")} >= {"rule", "switch", "freq", "path"}
    # the picture: bars per file and per function, drawn inline
    svgs = page.having("svg")
    assert len(svgs) == 2 and len(page.having("rect")) >= 4


# -- §1 and the findings table as a reader sees them (#45 item 10)

COSTED = {
    "engine/__init__.py": "",
    "engine/runner.py": """
        import logging
        import os

        logger = logging.getLogger(__name__)


        class ModelRunner:
            def execute_model(self, batch):
                logger.info(f"batch {batch} tag={os.environ.get('MY_TAG')}")
                logger.info("step %d", len(batch))
                os.environ.get("MY_LEVEL")
                if os.environ.get("MY_DBG"):
                    with open("/tmp/x", "a") as fh:
                        fh.write(str(batch))
                return batch
    """,
}


def _scan(root: Path, out: Path, fmt: str) -> str:
    result = runner.invoke(app, ["scan", str(root), "-f", fmt, "-o", str(out), "-j", "1", "--no-history", "--no-cache"])
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def test_section_1_rows_and_costs_are_the_markdowns(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", COSTED)
    markdown = _scan(root, tmp_path / "audit.md", "markdown")
    page = _scan(root, tmp_path / "audit.html", "html")
    # markdown: | n | words: `code` | `path:line` | freq | via | sync | ≈ 18.59 µs/step *estimate* |
    section_1 = markdown.split("## 1.")[1].split("\n## ")[0]
    md_rows = [(cells[2].strip("`"), cells[6].split("≈ ")[1].split(" µs")[0])
               for cells in (line.split(" | ") for line in section_1.splitlines() if re.match(r"\| \d+ \| ", line))]
    section = page.split('<section id="default-on">')[1].split("</section>")[0]
    html_rows = [(loc.replace("<wbr>", ""), cost)
                 for loc, cost in re.findall(r'<td class="at"><a [^>]*><code>(.*?)</code>.*?data-v="[^"]*">([^<]*)</td>', section)]
    # one row per statement: line 9's log line, its f-string and the env read in its message are one row,
    # costed as their sum (16.47 + 0.79 + 1.33), the figure the markdown prints
    assert html_rows == md_rows and len(md_rows) == 4
    assert md_rows[0] == ("engine/runner.py:9", "18.59")
    assert "f-string + per-step info line + env read of <code>MY_TAG</code> in the message" in section


def test_the_findings_table_is_costliest_first(tmp_path: Path) -> None:
    page = _scan(write_tree(tmp_path / "tree", COSTED), tmp_path / "audit.html", "html")
    rows = re.findall(r'<tr id="f-[^"]*" data-rule="([^"]*)" data-switch="([^"]*)".*?<td class="at"><code>engine/<wbr>runner\.py:(\d+):',
                      page.split('id="findings-table"')[1])
    # what runs with no debug env, costliest first; the open MY_DBG gates (19.47 µs/step when on) after them
    assert [(rule, int(line)) for rule, _, line in rows] == [
        ("default-on-emitter", 9), ("default-on-emitter", 10), ("env-read-hot", 9), ("env-read-hot", 11),
        ("env-read-hot", 12), ("eager-format", 9), ("hardcoded-output-path", 13), ("per-call-open", 13)]
    assert rows[-1][1] == "MY_DBG" and ">19.47 when on</td>" in page


#: a long log line under a deep path, as a real tree has them
LONG = {
    "engine/__init__.py": "",
    "engine/model_executor/layers/fused_moe/fused_moe_kernel_launcher.py": """
        import logging

        logger = logging.getLogger(__name__)


        class ModelRunner:
            def execute_model(self, batch):
                logger.info("Disabling the fused kernel for this launch: K=%d is not a multiple of BLOCK_SIZE_K=%d, which "
                            "triggers a known Triton bug", batch.k, batch.block_k)
                return batch
    """,
}

#: measured after the page loads and written where --dump-dom prints it
PROBE = """<script>window.addEventListener('load',function(){
var code=document.querySelector('#default-on tbody code'),page=document.documentElement;
document.body.setAttribute('data-probe',[innerWidth,page.scrollWidth,Math.round(code.getBoundingClientRect().width)].join(' '));
});</script></body>"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs chromium (apt-get install -y chromium)")
@pytest.mark.parametrize("width", [1400, 820])
def test_section_1_code_reads_as_lines_and_fits_the_window(tmp_path: Path, width: int) -> None:
    page = tmp_path / "probe.html"
    page.write_text(_scan(write_tree(tmp_path / "tree", LONG), tmp_path / "audit.html", "html").replace("</body>", PROBE),
                    encoding="utf-8")
    dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          "--proxy-server=127.0.0.1:9", f"--window-size={width},1000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    inner, scroll, code = map(int, re.search(r'data-probe="(\d+) (\d+) (\d+)"', dom).groups())
    assert scroll <= inner  # nothing runs past the window's right edge
    # the code has room for a line of it (it had ~8 characters, ~60 px, and wrapped letter by letter)
    assert code >= min(inner * 0.35, 400), (inner, code)
