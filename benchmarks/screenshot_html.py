"""Render a tree's HTML report and photograph it in headless Chromium (run by hand).

    python benchmarks/screenshot_html.py [TREE] [-o DIR]

Writes DIR/report.html and DIR/report-<width>x<height>.png for a desktop and a narrow
window, and DIR/<section>-<width>.png of §1, the findings and the switch pages alone, at both
widths (a copy of the page that hides the other sections and opens the first findings;
headless Chromium photographs the top of a page only) (default DIR: /tmp/cs-audit-screenshots; TREE: fixtures/compressspec).  Needs
``chromium`` (Debian: ``apt-get install -y chromium``).  The page fetches nothing, so the
browser runs with networking off.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = ((1400, 2400), (820, 1600))
#: sections photographed alone, and how many of their <details> are opened
SECTIONS = (("default-on", 0), ("findings", 3), ("switch-pages", 6))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", nargs="?", default=str(ROOT / "fixtures" / "compressspec"))
    parser.add_argument("-o", "--out", default="/tmp/cs-audit-screenshots")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        print("screenshot_html: no chromium on PATH (apt-get install -y chromium)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    page = out / "report.html"
    subprocess.run([sys.executable, "-m", "cs_audit", "scan", args.tree, "-f", "html", "-o", str(page), "-q", "--no-history"],
                   check=True, cwd=ROOT)
    shots = [(page, out / f"report-{width}x{height}.png", width, height) for width, height in SIZES]
    text = page.read_text(encoding="utf-8")
    for section, opened in SECTIONS:
        alone = out / f"{section}.html"
        extra = (f"<style>header,main>section:not(#{section}){{display:none}}</style>"
                 f"<script>document.addEventListener('DOMContentLoaded',function(){{"
                 f"Array.prototype.slice.call(document.querySelectorAll('#{section} details'),0,{opened})"
                 ".forEach(function(d){d.open=true;});});</script></head>")
        alone.write_text(text.replace("</head>", extra, 1), encoding="utf-8")
        shots += [(alone, out / f"{section}-{width}.png", width, 1600) for width, _ in SIZES]
    for source, shot, width, height in shots:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",  # nothing leaves the machine
                        f"--window-size={width},{height}", f"--screenshot={shot}", source.as_uri()],
                       check=True, capture_output=True, timeout=120)
        print(shot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
