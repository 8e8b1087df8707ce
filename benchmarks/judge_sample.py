"""Draw a blind judging sample from a cs-audit JSON report (issue #40's protocol).

Prints, as markdown, the first rows of §1 (by process side: 15 worker, 10 engine, 5 API
server, the costliest first, one row per statement) and N seeded random other costed sites,
each with its claim (frequency, estimated cost, chain from the hot root) and nothing that
says how the tool decided it: a judge reads the source and answers
right / rare / not-default / wrong-claim with file:line evidence.

    python benchmarks/judge_sample.py REPORT.json --seed 7 [--random 40] [--demoted 15]

``--demoted`` adds sites the report demoted, each with the guard it names: a judge says
whether the guard really keeps the site from running every step.

``--off`` adds N seeded settings the report says keep hot code off in the default deployment
(issue #41's ground truth), each with the default it read and a site it gates: a judge says
whether the code really does not run with the engine's defaults.
"""

from __future__ import annotations

import argparse
import json
import random

HOT = ("step", "request", "round", "layer")
SIDES = (("worker", 15), ("engine", 10), ("API server", 5))
SECTION_1_RULES = {"env-read-hot", "default-on-emitter", "eager-format", "sync-in-debug", "per-call-open", "redundant-flush"}


def costed(findings: list[dict]) -> list[dict]:
    return [f for f in findings if f["switch"] is None and f["frequency"] in HOT and f.get("path_kind", "normal") == "normal"
            and f["rule"] in SECTION_1_RULES and f.get("estimated_cost_us_per_step", 0) > 0]


def statements(rows: list[dict]) -> list[dict]:
    """One row per (path, line), the findings on it summed, costliest first."""
    merged: dict[tuple[str, int], dict] = {}
    for f in rows:
        key = (f["path"], f["line"])
        row = merged.setdefault(key, {**f, "rules": [], "cost": 0.0})
        row["rules"].append(f["rule"])
        row["cost"] += f.get("estimated_cost_us_per_step", 0)
    return sorted(merged.values(), key=lambda r: (-r["cost"], r["path"], r["line"]))


def claim(r: dict) -> str:
    chain = r.get("hot_path") or []
    via = " -> ".join(chain[-4:]) if chain else "?"
    if len(chain) > 4:
        via = f"{chain[0]} -> ... -> {via}"
    return (f"`{r['path']}:{r['line']}` in `{r.get('function')}`: {'+'.join(sorted(set(r['rules'])))} "
            f"`{' '.join(r.get('code', '').split())[:100]}`; claimed to run **{r['frequency']}** with no debug env set, "
            f"≈ {r['cost']:.2f} µs/step; chain: {via}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--random", type=int, default=40)
    ap.add_argument("--demoted", type=int, default=0, help="also N seeded sites the report says do not run every step")
    ap.add_argument("--demoted-reason", default="", help="only demoted sites whose reason says this")
    ap.add_argument("--off", type=int, default=0, help="also N seeded settings the report says keep hot code off")
    args = ap.parse_args()
    report = json.load(open(args.report))
    findings = report["findings"]
    rows = statements(costed(findings))
    picked: list[dict] = []
    print("## First rows of §1, by process side\n")
    for side, n in SIDES:
        side_rows = [r for r in rows if r.get("process") == side][:n]
        picked += side_rows
        for i, r in enumerate(side_rows, 1):
            print(f"- S-{side.split()[0]}-{i}: {claim(r)}")
    rest = [r for r in rows if r not in picked]
    sample = random.Random(args.seed).sample(rest, min(args.random, len(rest)))
    print(f"\n## {len(sample)} random costed sites (seed {args.seed})\n")
    for i, r in enumerate(sample, 1):
        print(f"- R-{i}: {claim(r)}")
    if args.demoted:
        demoted = [f for f in findings if f["switch"] is None and f["frequency"] in HOT and f.get("path_kind", "normal") != "normal"
                   and f["rule"] in SECTION_1_RULES and args.demoted_reason in (f.get("path_reason") or "")]
        picked_demoted = random.Random(args.seed + 1).sample(demoted, min(args.demoted, len(demoted)))
        print(f"\n## {len(picked_demoted)} sites reported as reachable but not every step (seed {args.seed + 1})\n")
        for i, f in enumerate(picked_demoted, 1):
            print(f"- D-{i}: `{f['path']}:{f['line']}` in `{f.get('function')}`: {f['rule']} "
                  f"`{' '.join(f.get('code', '').split())[:100]}`; said to be {f['path_kind']}: {f.get('path_reason', '')}")
    if args.off:
        used = (report.get("deployment") or {}).get("defaults_used") or []
        picked_off = random.Random(args.seed + 2).sample(used, min(args.off, len(used)))
        print(f"\n## {len(picked_off)} settings said to keep hot code off with the engine's defaults (seed {args.seed + 2})\n")
        for i, u in enumerate(picked_off, 1):
            if u.get("path"):
                source = f"declared at `{u['path']}:{u['line']}` with default `{u['value']}`"
            elif u["switch"].startswith("feature="):
                source = "an optional feature the default deployment leaves off (its classes have no instance, its tests are false)"
            else:
                source = f"platform `{u['value']}`"
            example = u.get("example") or {}
            print(f"- O-{i}: `{u['switch']}` turns the code on; {source}; it gates {u['sites']} hot site(s), e.g. "
                  f"`{example.get('path')}:{example.get('line')}`")


if __name__ == "__main__":
    main()
