"""The fraction of a hand-labelled hot path that cs-audit treats as hot.

    python benchmarks/hot_fraction.py LABELS.md TREE [--missing]

LABELS.md: a table of ``benchmarks/labels/`` (its second column is the qualname of a
function that runs every step, relative to TREE; a nested function as `outer.inner`).  Runs
the cs-audit on the import path (point PYTHONPATH at another checkout to measure that one)
and counts the labelled functions the call graph reaches from a hot root through default-on
calls (``freq_default``), and through any call (``freq_any``).  ``--missing`` lists the
labelled functions not reached.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def labelled(path: Path) -> list[str]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows.append(cells[1].strip("`"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labels", type=Path)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--missing", action="store_true")
    args = parser.parse_args()

    from cs_audit.api import analyse_file, prepare_ruleset
    from cs_audit.config import AuditConfig
    from cs_audit.extract.discover import discover
    from cs_audit.joins.callgraph import build_model
    from cs_audit.model import FileFacts

    config = AuditConfig(root=str(args.tree))
    rs = prepare_ruleset(config)
    sources, _ = discover(args.tree)
    facts = {}
    for source in sources:
        result = analyse_file(source, rs, config.max_file_bytes)
        if isinstance(result, FileFacts):
            facts[result.path] = result
    package = args.tree.resolve().name if (args.tree / "__init__.py").is_file() else None
    try:  # as a scan joins: types on demand from the roots
        model = build_model(facts, rs, package=package, whole=False)
    except TypeError:  # a checkout from before the on-demand (or the package) parameter
        try:
            model = build_model(facts, rs, package=package)
        except TypeError:
            model = build_model(facts, rs)

    def name(key: tuple[str, str]) -> str:
        module = facts[key[0]].module
        qualname = key[1].replace(".<locals>.", ".")  # the labels write nested functions `outer.inner`
        return f"{module}.{qualname}" if module != "__init__" else qualname

    default = {name(k) for k in model.freq_default}
    reached = {name(k) for k in model.freq_any}
    known = {name(k) for k in model.functions}
    rows = labelled(args.labels)
    unknown = [r for r in rows if r not in known]
    hot = [r for r in rows if r in default]
    any_hot = [r for r in rows if r in reached]
    print(f"{args.labels.name}: {len(rows)} labelled functions, {len(unknown)} not found in the tree")
    print(f"  hot by default: {len(hot)} ({len(hot) / len(rows):.0%}); reached through any call: {len(any_hot)} "
          f"({len(any_hot) / len(rows):.0%})")
    if args.missing:
        for r in rows:
            if r not in default:
                print(f"  not hot: {r}{' (not in the tree)' if r in unknown else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
