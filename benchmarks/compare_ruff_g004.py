"""Compare cs-audit's `eager-format` (f-string, direct logging calls) with ruff's G004, site for site.

Run from the project root::

    python benchmarks/compare_ruff_g004.py                 # SGLang 0.5.23
    python benchmarks/compare_ruff_g004.py --tree vllm     # vLLM 0.33.0
    python benchmarks/compare_ruff_g004.py --tree sglang --json /tmp/g004-sglang.json

Steps: ``../shared/corpus/get-real-corpora.sh`` prints the corpus roots; the chosen root is
scanned with ``cs-audit scan ROOT --format json --no-history`` and with
``ruff check --select G004 --output-format json --no-cache --isolated ROOT``.

Matching: a cs-audit site is an ``eager-format`` finding whose ``eager_kinds`` holds
``"f-string"`` and whose ``level`` is not ``"helper"``; a ruff diagnostic matches it when
it is in the same file and its row lies within the finding's ``[line, end_line]``.

The only-ruff sites are then sorted into categories from cs-audit's own facts (the
library is imported read-only and the tree model rebuilt in-process, which costs about
one more scan; ``--no-categorise`` skips it):

  a. level-guard   the call sits under ``if logger.isEnabledFor(...)`` (or another level check)
  b. env-gated     the call sits under an env/flag gate and logs at a level that passes the
                   default logger, so cs-audit treats emission as decided before formatting
                   (split into ``b-env-gated``: an env var, and ``b-flag-gated``: a name that
                   only looks like a debug flag, cs-audit's ``debug_name_pattern``)
  c. receiver      no logging call is recognised at that line (``self.log.info``, ``_LOG``,
                   a logger passed in as a parameter, ...)
  d. other         anything else (with the reason printed; f-strings cs-audit's fact
                   extractor did not see are told apart)

The only-cs-audit sites are sorted the same way, from the source and a second ruff run
with ``--ignore-noqa``: ``noqa`` (ruff suppressed it by a ``# noqa``/``# ruff: noqa``),
``once-method`` (``warning_once`` and the like, unknown to ruff), ``not-msg-arg`` (the
f-string is a later argument, G004 only looks at the message), ``imported-logger`` (a
logger imported from another module: ruff needs ``lint.logger-objects``), ``other``.

Always exits 0.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import subprocess
import sys
import tempfile
import time
import tokenize
from collections import defaultdict
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent
CORPORA_SCRIPT = PROJECT.parent / "shared" / "corpus" / "get-real-corpora.sh"
EXAMPLES = 3
#: logging methods ruff's G004 checks (``warning_once`` and other extensions are not among them)
RUFF_LOG_METHODS = frozenset({"debug", "info", "warn", "warning", "error", "exception", "critical", "log"})

Site = tuple[str, int]  # (relative path, row)


def corpus_roots() -> dict[str, Path]:
    out = subprocess.run(["bash", str(CORPORA_SCRIPT)], check=True, capture_output=True, text=True).stdout
    roots = [Path(line.strip()) for line in out.splitlines() if line.strip()]
    return {root.name: root for root in roots}


def run_cs_audit(root: Path, jobs: int | None) -> tuple[dict[str, Any], float]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = Path(tmp.name)
    cmd = ["cs-audit", "scan", str(root), "--format", "json", "--no-history", "-o", str(out)]
    if jobs:
        cmd += ["-j", str(jobs)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if not out.exists() or out.stat().st_size == 0:
        sys.exit(f"cs-audit failed (rc={proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(out.read_text())
    out.unlink()
    return report, wall


def run_ruff(root: Path, ignore_noqa: bool = False) -> tuple[list[dict[str, Any]], float]:
    cmd = ["ruff", "check", "--select", "G004", "--output-format", "json", "--no-cache", "--isolated", str(root)]
    if ignore_noqa:
        cmd.append("--ignore-noqa")
    start = time.perf_counter()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"ruff failed (rc={proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout or "[]"), wall


def cs_sites(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        f for f in report["findings"]
        if f["rule"] == "eager-format" and "f-string" in f.get("eager_kinds", ()) and f.get("level") != "helper"
    ]


def ruff_sites(diags: list[dict[str, Any]], root: Path) -> list[Site]:
    out = set()
    for d in diags:
        path = Path(d["filename"]).resolve().relative_to(root.resolve()).as_posix()
        out.add((path, int(d["location"]["row"])))
    return sorted(out)


def examples(items: list[Any], path_of: Any) -> list[Any]:
    """Up to EXAMPLES items, from distinct files where there are enough."""
    seen: set[str] = set()
    picked = [i for i in items if not (path_of(i) in seen or seen.add(path_of(i)))][:EXAMPLES]
    return picked + [i for i in items if i not in picked][: EXAMPLES - len(picked)]


def source_line(root: Path, path: str, line: int) -> str:
    try:
        lines = (root / path).read_text(encoding="utf-8", errors="replace").splitlines()
        return lines[line - 1].strip()[:160]
    except (OSError, IndexError):
        return "<unreadable>"


def _call_at(root: Path, path: str, first: int, last: int) -> ast.Call | None:
    """The outermost call starting within [first, last] of a file (ast, for classification)."""
    try:
        tree = ast.parse((root / path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and first <= n.lineno <= last and n.args]
    return min(calls, key=lambda n: (n.lineno, -(n.end_lineno or n.lineno)), default=None)


def _string_parts(root: Path, path: str, node: ast.expr) -> int:
    """How many literals an (implicitly concatenated) string expression is written as."""
    text = ast.get_source_segment((root / path).read_text(encoding="utf-8", errors="replace"), node) or ""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return 1
    return sum(1 for t in toks if t.type == tokenize.STRING or t.type == getattr(tokenize, "FSTRING_START", -1))


def match(cs: list[dict[str, Any]], ruff: list[Site]) -> tuple[list[Site], list[Site], list[dict[str, Any]]]:
    by_path: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in cs:
        by_path[f["path"]].append(f)
    matched_cs: set[int] = set()
    both: list[Site] = []
    only_ruff: list[Site] = []
    for path, row in ruff:
        hits = [f for f in by_path.get(path, ()) if f["line"] <= row <= f["end_line"]]
        if hits:
            both.append((path, row))
            matched_cs.update(id(f) for f in hits)
        else:
            only_ruff.append((path, row))
    only_cs = [f for f in cs if id(f) not in matched_cs]
    return both, only_ruff, only_cs


def categorise(root: Path, sites: list[Site], jobs: int | None) -> dict[Site, tuple[str, str]]:
    """(category, detail) for each only-ruff site, from cs-audit's own facts and gate resolution."""
    from cs_audit.api import _map_files, prepare_ruleset
    from cs_audit.config import load_config
    from cs_audit.extract.discover import discover
    from cs_audit.joins.callgraph import build_model
    from cs_audit.joins.gates import LEVEL_GATE, site_switches
    from cs_audit.model import FileFacts

    overrides: dict[str, Any] = {"history": False}
    if jobs:
        overrides["jobs"] = jobs
    config = load_config(str(root), **overrides)
    rs = prepare_ruleset(config)
    sources, _ = discover(root, config.exclude)
    facts = {r.path: r for r in _map_files(sources, rs, config, None) if isinstance(r, FileFacts)}
    model = build_model(facts, rs)
    out: dict[Site, tuple[str, str]] = {}
    for path, row in sites:
        ff = facts.get(path)
        if ff is None:
            out[(path, row)] = ("d-other", "file not analysed by cs-audit (skipped/parse error)")
            continue
        covering = [c for c in ff.calls if c.line <= row <= c.end_line]
        logs = [c for c in covering if c.role == "log"]
        if not logs:
            near = min(covering, key=lambda c: c.end_line - c.line, default=None)
            calls = sorted({c.callee for c in covering if "." in c.callee and c.callee.rsplit(".", 1)[-1] in rs.log_methods})
            out[(path, row)] = ("c-receiver", f"callee {', '.join(calls) or (near.callee if near else '?')} not a recognised logger")
            continue
        site = min(logs, key=lambda c: c.end_line - c.line)
        switches = site_switches(model, path, site.function, site.gates, rs)
        if LEVEL_GATE in switches:
            out[(path, row)] = ("a-level-guard", f"{site.callee} under a level check")
        elif switches and rs.level_passes(site.level):
            cat = "b-env-gated" if any(not s.startswith("flag:") for s in switches) else "b-flag-gated"
            out[(path, row)] = (cat, f"{site.callee} ({site.level}) gated by {', '.join(switches)}")
        elif "f-string" not in site.eager:
            call = _call_at(root, path, site.line, site.end_line)
            parts = _string_parts(root, path, call.args[0]) if call is not None else 0
            why = (f"f-string inside a {parts}-part implicit concatenation not seen by the extractor"
                   if parts >= 3 else "no f-string seen in the arguments")
            out[(path, row)] = ("d-other", f"{site.callee}: {why} (eager={list(site.eager)})")
        else:
            out[(path, row)] = ("d-other", f"{site.callee} level={site.level} switches={switches} eager={list(site.eager)}")
    return out


def categorise_only_cs(root: Path, only_cs: list[dict[str, Any]], noqa_sites: list[Site]) -> list[tuple[str, str]]:
    """(category, detail) for each only-cs-audit finding."""
    out: list[tuple[str, str]] = []
    for f in only_cs:
        emitter = str(f.get("emitter") or "")
        receiver, _, method = emitter.rpartition(".")
        if any(p == f["path"] and f["line"] <= r <= f["end_line"] for p, r in noqa_sites):
            out.append(("noqa", "ruff reports it with --ignore-noqa: suppressed by a noqa comment"))
            continue
        if method not in RUFF_LOG_METHODS:
            out.append(("once-method", f"{emitter}: method unknown to ruff's G004"))
            continue
        call = _call_at(root, f["path"], f["line"], f["end_line"])
        if call is not None and not isinstance(call.args[0], ast.JoinedStr):
            out.append(("not-msg-arg", "the f-string is not the message argument"))
        elif "." in receiver and not receiver.startswith(("self.", "cls.", "logging")):
            out.append(("imported-logger", f"{receiver} is imported: ruff needs lint.logger-objects"))
        else:
            out.append(("other", f"emitter={emitter} level={f.get('level')}"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", choices=("sglang", "vllm"), default="sglang")
    ap.add_argument("-j", "--jobs", type=int, default=None, help="cs-audit workers (default: its own)")
    ap.add_argument("--json", dest="json_out", type=Path, default=None, help="save the comparison summary here")
    ap.add_argument("--no-categorise", action="store_true", help="skip the in-process categorisation pass")
    args = ap.parse_args()

    root = corpus_roots()[args.tree]
    report, cs_wall = run_cs_audit(root, args.jobs)
    diags, ruff_wall = run_ruff(root)
    cs = cs_sites(report)
    ruff = ruff_sites(diags, root)
    both, only_ruff, only_cs = match(cs, ruff)

    print(f"tree: {args.tree}  root: {root}")
    print(f"timing (wall s): cs-audit {cs_wall:.1f}   ruff G004 {ruff_wall:.2f}")
    print(f"cs-audit eager-format f-string direct-log findings: {len(cs)}   ruff G004 sites: {len(ruff)}")
    print(f"both: {len(both)}   only-ruff: {len(only_ruff)}   only-cs-audit: {len(only_cs)}")

    summary: dict[str, Any] = {
        "tree": args.tree, "root": str(root), "cs_audit_wall_s": round(cs_wall, 2), "ruff_wall_s": round(ruff_wall, 2),
        "cs_audit_sites": len(cs), "ruff_sites": len(ruff),
        "both": len(both), "only_ruff": len(only_ruff), "only_cs_audit": len(only_cs), "categories": {},
    }

    cats: dict[Site, tuple[str, str]] = {}
    if only_ruff and not args.no_categorise:
        start = time.perf_counter()
        cats = categorise(root, only_ruff, args.jobs)
        print(f"(categorisation pass: {time.perf_counter() - start:.1f} s)")
    groups: dict[str, list[tuple[Site, str]]] = defaultdict(list)
    for site in only_ruff:
        cat, detail = cats.get(site, ("uncategorised", ""))
        groups[cat].append((site, detail))
    print("\nonly-ruff by category:")
    for cat in sorted(groups):
        items = groups[cat]
        print(f"  {cat}: {len(items)}")
        for (path, row), detail in examples(items, lambda i: i[0][0]):
            print(f"    {path}:{row}  {source_line(root, path, row)}")
            if detail:
                print(f"        -> {detail}")
        summary["categories"][cat] = {
            "count": len(items),
            "sites": [{"path": p, "line": r, "detail": d, "source": source_line(root, p, r)} for (p, r), d in items],
        }

    noqa_sites: list[Site] = []
    if only_cs:
        noqa_sites = ruff_sites(run_ruff(root, ignore_noqa=True)[0], root)
    cs_groups: dict[str, list[tuple[dict[str, Any], str]]] = defaultdict(list)
    for f, (cat, detail) in zip(only_cs, categorise_only_cs(root, only_cs, noqa_sites)):
        cs_groups[cat].append((f, detail))
    print(f"\nonly-cs-audit by category: {len(only_cs)}")
    summary["only_cs_audit_categories"] = {}
    for cat in sorted(cs_groups):
        items = cs_groups[cat]
        print(f"  {cat}: {len(items)}")
        for f, detail in examples(items, lambda i: i[0]["path"]):
            print(f"    {f['path']}:{f['line']}  {source_line(root, f['path'], f['line'])}")
            print(f"        -> {detail}")
        summary["only_cs_audit_categories"][cat] = {
            "count": len(items),
            "sites": [{"path": f["path"], "line": f["line"], "end_line": f["end_line"], "emitter": f.get("emitter"),
                       "level": f.get("level"), "detail": d, "source": source_line(root, f["path"], f["line"])}
                      for f, d in items],
        }

    if args.json_out:
        args.json_out.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"\nsummary written to {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
