"""A seeded sample of the hot sites an optional feature keeps off, for a blind check (run by hand).

    python benchmarks/feature_sample.py TREE --seed N [--count 15]

Prints markdown items `F-1 ...` to append to a `judge_sample.py` sample: each names a site the
tree model reaches from a hot root and `joins.runs.run_of` gates by a `feature=NAME` switch
(`rules/defaults.yaml` `feature_paths`, `feature_tests`, `feature_classes`). The report lists
only the first such site per feature, so the sample is drawn from the model itself.
"""

from __future__ import annotations

import argparse
import random

from cs_audit.api import prepare_ruleset, tree_model
from cs_audit.config import load_config
from cs_audit.joins.runs import run_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, default=15)
    args = parser.parse_args()
    config = load_config(args.tree)
    rs = prepare_ruleset(config)
    model, _ = tree_model(config)
    rows = []
    for path, sites in sorted(model.fact_sites.items()):  # type: ignore[attr-defined]
        for site in sites:
            if site.function is None or (path, site.function) not in model.freq_any:  # type: ignore[attr-defined]
                continue
            switch = run_of(model, path, site.function, site.gates, site, rs).switch  # type: ignore[arg-type]
            if switch is not None and switch.name.startswith("feature="):
                rows.append((path, site.line, site.function, switch.name, site.code[:90]))
    random.Random(args.seed).shuffle(rows)
    print(f"## {len(rows)} hot sites kept off by an optional feature; {min(args.count, len(rows))} seeded (seed {args.seed})\n")
    for i, (path, line, function, switch, code) in enumerate(rows[:args.count], 1):
        print(f"- F-{i}: `{path}:{line}` in `{function}`: `{code}`; the tool says it runs only with `{switch}` on (off by default)")


if __name__ == "__main__":
    main()
