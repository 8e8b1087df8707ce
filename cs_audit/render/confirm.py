"""``confirm``'s text and JSON: the run, the agreement of the graph with it, each finding's
observed status and the worst disagreements with their chains."""

from __future__ import annotations

from collections import Counter
from typing import Any

from cs_audit.confirm.join import PER_STEP_MIN, RARE_MAX, STATUS_WORDS, STATUSES, Agreement, claimed_per_step
from cs_audit.confirm.report import Confirmation
from cs_audit.model import FuncKey
from cs_audit.render.check import plain
from cs_audit.render.json import dumps, observed_dict


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "0/0"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def run_lines(c: Confirmation) -> list[str]:
    """What the profile is, and how much of it is the tree's."""
    p, run = c.profile, c.run
    if p.sampled:
        what = (f"{p.format}, {p.samples} samples: a sampling profile gives time shares, not calls, so a function "
                "seen in a sample only counts as having run")
    elif run.steps:
        what = f"{p.format}, {run.steps} steps counted after {p.warmup} warm-up" + (
            f"; step = {', '.join(p.step_functions)}" if p.step_functions else "")
    else:
        what = f"{p.format}, no step count (pass --root QUALNAME or --steps N for calls per step)"
    lines = [f"profile: {what}",
             f"placed: {len(run.loaded)} files of {c.tree} loaded, ran from {run.root or '?'}; {run.outside} profile "
             f"files outside the tree" + (f", {run.elsewhere} under another root" if run.elsewhere else "")
             + (f"; {run.not_functions} frames in its files are no function of it (module code, class bodies, comprehensions)"
                if run.not_functions else "")]
    if p.command:
        lines.append("command: " + " ".join(p.command))
    return lines


def render_confirm_text(c: Confirmation, limit: int) -> str:
    out = run_lines(c)
    counts = Counter(o.status for o in c.observed.values())
    out += ["", f"findings: {len(c.findings)}; " + ", ".join(f"{STATUS_WORDS[s]} {counts[s]}" for s in STATUSES if counts[s])
            + (" (not covered: its module was not loaded)" if counts["not-covered"] else "")]
    claimed = [f for f in c.findings if claimed_per_step(f)]
    claimed_counts = Counter(c.observed[f.fingerprint].status for f in claimed)
    out.append(f"claimed per step by default: {len(claimed)}; "
               + ", ".join(f"{STATUS_WORDS[s]} {claimed_counts[s]}" for s in STATUSES if claimed_counts[s]))
    a = c.agreement
    if a is not None:
        out += ["", f"agreement (functions of loaded modules; per step = at least {PER_STEP_MIN} calls a step):",
                f"  the graph calls per step {len(a.claimed)}: ran per step {_pct(len(a.claimed_ran_per_step), len(a.claimed))}; "
                f"of the {len(a.claimed_ran)} that ran at all, ran per step {_pct(len(a.claimed_ran_per_step), len(a.claimed_ran))}",
                f"  ran per step {len(a.ran_per_step)}: the graph calls per step {_pct(len(a.ran_claimed), len(a.ran_per_step))}"]
    rows = sorted(claimed, key=lambda f: (STATUSES.index(c.observed[f.fingerprint].status), -f.cost_us, f.path, f.line))
    if rows:
        out += ["", "claimed per step (status, observed calls/step, claimed frequency, site, rule, function):"]
        for f in rows[:limit]:
            o = c.observed[f.fingerprint]
            out.append(f"  {STATUS_WORDS[o.status]:<17} {_rate(o.calls_per_step):>8}  {f.frequency:<8} {f.path}:{f.line}  {f.rule}  {f.function or '<module>'}")
        if len(rows) > limit:
            out.append(f"  ... and {len(rows) - limit} more (--limit, or --format json)")
    if c.worst:
        out += ["", f"worst disagreements (claimed per step, ran under {RARE_MAX} calls a step), costliest first:"]
        for d in c.worst:
            f = d.finding
            out.append(f"  {f.path}:{f.line} {f.rule} in {f.function}: {_rate(d.observed.calls_per_step)} calls/step, "
                       f"{d.observed.calls} in all; claimed {f.frequency}, ≈ {f.cost_us:g} µs/step")
            out += [f"      {line}" for line in d.chain] or ["      (no chain in the graph)"]
    if c.misses:
        out += ["", "ran per step, not called per step by the graph (functions holding findings):"]
        for m in c.misses:
            freq = m.frequency or "no hot root reaches it"
            out.append(f"  {m.key[0]}:{m.key[1]}  {m.calls_per_step:.2f} calls/step; graph: {freq}; "
                       f"{len(m.findings)} finding(s), first {m.findings[0].rule} at line {m.findings[0].line}")
    return "\n".join(plain(line) for line in out) + "\n"


def _functions(a: Agreement, keys: list[FuncKey]) -> list[dict[str, Any]]:
    return [{"path": k[0], "function": k[1], "calls_per_step": round(a.rates[k], 4), "frequency": a.frequency[k] or None}
            for k in keys]


def render_confirm_json(c: Confirmation) -> str:
    p, run, a = c.profile, c.run, c.agreement
    data: dict[str, Any] = {
        "profile": {"format": p.format, "sampled": p.sampled, "steps": run.steps, "warmup": p.warmup,
                    "step_functions": list(p.step_functions), "samples": p.samples, "command": list(p.command)},
        "tree": c.tree, "ran_from": run.root, "files_loaded": len(run.loaded), "files_outside": run.outside,
        "files_elsewhere": run.elsewhere, "frames_not_functions": run.not_functions,
        "agreement": None if a is None else {
            "claimed_per_step": len(a.claimed), "claimed_ran": len(a.claimed_ran),
            "claimed_ran_per_step": len(a.claimed_ran_per_step),
            "ran_per_step": len(a.ran_per_step), "ran_per_step_claimed": len(a.ran_claimed),
            "functions_claimed_ran_not_per_step": _functions(a, a.claimed_ran_rarely),
            "functions_ran_per_step_not_claimed": _functions(a, a.ran_not_claimed)},
        "findings": [{"path": f.path, "line": f.line, "rule": f.rule, "function": f.function, "frequency": f.frequency,
                      "switch": f.switch.text if f.switch else None, "path_kind": f.path_kind,
                      "fingerprint": f.fingerprint, "observed": observed_dict(c.observed[f.fingerprint])}
                     for f in c.findings],
        "worst": [{"path": d.finding.path, "line": d.finding.line, "rule": d.finding.rule, "function": d.finding.function,
                   "observed": observed_dict(d.observed), "chain": list(d.chain)} for d in c.worst],
        "ran_per_step_not_claimed": [{"path": m.key[0], "function": m.key[1], "calls_per_step": round(m.calls_per_step, 4),
                                      "frequency": m.frequency or None} for m in c.misses],
    }
    return dumps(data) + "\n"
