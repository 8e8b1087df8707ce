"""KEEP / MERGE / REMOVE per switch, the evidence behind it, and the minimal switch set.

The decision table is data (`rules/dispositions.yaml`); a project's
`cs-audit.decisions.yaml` overrides single switches.  Pure functions over `Switch` rows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cs_audit.config import DECISIONS_FILE, Decision
from cs_audit.model import Switch, is_aside
from cs_audit.ruleset import DispositionRule, RuleSet


def is_level_knob(s: Switch, rs: RuleSet) -> bool:
    return s.category == "instrumentation" and (s.kind == "level" or bool(rs.level_knob_re.search(s.name)))


def tree_prefix(names: list[str], fallback: str = "CS_") -> str:
    """The prefix most of a tree's switches share (`SGLANG_`, `VLLM_`), else ``fallback``:
    proposed switch names follow the tree's own spelling."""
    firsts: dict[str, int] = {}
    for name in names:
        head, sep, _ = name.partition("_")
        if sep and head:
            firsts[head] = firsts.get(head, 0) + 1
    if not firsts:
        return fallback
    head, count = max(sorted(firsts.items()), key=lambda kv: kv[1])
    return f"{head}_" if count * 4 >= len(names) and count >= 2 else fallback


def minimal_names(names: list[str], rs: RuleSet) -> dict[str, str]:
    """``minimal_set`` of ``rules/dispositions.yaml`` with ``{prefix}`` filled in for this tree."""
    own = tree_prefix(names, "")
    prefix = own or "CS_"
    return {key: value.replace("{tree_prefix}", own).replace("{prefix}", prefix) for key, value in rs.minimal_set.items()}


#: the disposition rule id of a switch only the upstream's lines read or set
UPSTREAM_RULE = "upstream"


def prefix_names(switches: list[Switch] | tuple[Switch, ...]) -> list[str]:
    """The names the proposed prefix and minimal set follow: the fork's own switches when the
    tree names an upstream (its `VLLM_` majority is not the fork's spelling), else all."""
    own = sorted(s.name for s in switches if s.origin != "upstream")
    return own if any(s.origin == "upstream" for s in switches) else sorted(s.name for s in switches)


def _sibling(s: Switch, names: set[str]) -> str | None:
    """`X_TRACE_LEVEL` -> `X_TRACE` when the tree reads that on/off switch."""
    for suffix in ("_LEVEL", "_VERBOSITY", "_VERBOSE"):
        if s.name.endswith(suffix):
            base = s.name[: -len(suffix)]
            if base in names and base != s.name:
                return base
    return None


def evidence(s: Switch, level_knobs: list[str], rs: RuleSet) -> list[str]:
    kinds = [x.kind for x in s.setters]
    sets = s.real_setters
    lines = [
        f"{sets} setter(s) in runners/launchers"
        + (f", {kinds.count('passthrough')} passthrough" if "passthrough" in kinds else "")
        + (f", {kinds.count('commented')} commented out" if "commented" in kinds else "")
        + (f", {kinds.count('off')} to the off value" if "off" in kinds else ""),
    ]
    if sets == 0 and kinds:
        lines.append("only passthrough or commented-out settings" if "off" not in kinds else "no setting turns it on")
    lines.append(f"{s.reading_scripts} script(s) read its output" if s.readers else "no script reads its output")
    if s.added_in:
        lines.append(f"added in {s.added_in.commit} ({s.added_in.date}) {s.added_in.subject}")
    elif s.added_in_note and not s.added_in_note.startswith("history skipped"):
        lines.append(f"age unknown: {s.added_in_note}")  # an age not asked for is no evidence
    if s.name in level_knobs and len(level_knobs) > 1:
        others = [k for k in level_knobs if k != s.name]
        lines.append(f"one of {len(level_knobs)} level knobs (also {', '.join(others[:4])}{'…' if len(others) > 4 else ''})")
    if s.gpu_sync:
        lines.append("turning it on adds a host-device sync")
    lines.append(f"gates {s.gated_sites} site(s)")
    return lines


def _holds(rule: DispositionRule, s: Switch, level_knobs: list[str], rs: RuleSet, prefix: str = "",
           aside: tuple[str, ...] = ()) -> bool:
    value: Any  # a number, flag or list as the rule file gives it (checked when the rules load)
    for key, value in rule.when:
        if key == "aside" and (bool(s.reads) and all(is_aside(r.path, aside) for r in s.reads)) != bool(value):
            return False
        if key == "foreign" and (bool(prefix) and not s.name.startswith(prefix)) != bool(value):
            return False
        if key == "readers_min" and s.reading_scripts < int(value):
            return False
        if key == "readers_max" and s.reading_scripts > int(value):
            return False
        if key == "setters_min" and s.real_setters < int(value):
            return False
        if key == "setters_max" and s.real_setters > int(value):
            return False
        if key == "category" and s.category not in value:
            return False
        if key == "level_knob" and is_level_knob(s, rs) != bool(value):
            return False
        if key == "level_knobs_min" and len(level_knobs) < int(value):
            return False
        if key == "gpu_sync" and s.gpu_sync != bool(value):
            return False
        if key == "by_name" and s.category_by_name != bool(value):
            return False
        if key == "name_words" and not {w.upper() for w in value} & set(s.name.upper().split("_")):
            return False
    return True


def proposed_level(s: Switch, rs: RuleSet, ms: dict[str, str] | None = None) -> str:
    """Where a switch lands in the minimal set: the output root (output paths), trace level
    1-3, the dump list, breakdown (instrumentation); "" for the others, which stay."""
    ms = ms or rs.minimal_set
    if s.category == "output-path":
        return ms["output_root"]
    if s.category not in ("instrumentation", "test-hook"):
        return ""
    if s.kind == "profile":
        return ms["breakdown"]
    if s.kind == "dump" or any(site.role == "dump" for site in s.sites):
        return ms["dump_list"]
    if s.gpu_sync:
        return f"{ms['trace_level']}=3"
    if any(rs.frequencies.above_step(site.frequency) for site in s.sites):
        return f"{ms['trace_level']}=2"
    return f"{ms['trace_level']}=1"


def apply_dispositions(switches: list[Switch], rs: RuleSet, decisions: dict[str, Decision],
                       aside: tuple[str, ...] = ()) -> tuple[list[Switch], list[str]]:
    judged = [s for s in switches if s.origin != "upstream"]
    level_knobs = sorted(s.name for s in judged if is_level_knob(s, rs))
    names = {s.name for s in judged}
    ms = minimal_names(prefix_names(switches), rs)
    own = tree_prefix(prefix_names(switches), "")
    out: list[Switch] = []
    overridden: list[str] = []
    for s in switches:
        reasons = evidence(s, level_knobs, rs)
        if s.origin == "upstream" and s.name not in decisions:
            out.append(replace(s, disposition="KEEP", merge_into=None, decided_by=UPSTREAM_RULE,
                               reasons=(f"{UPSTREAM_RULE}: the upstream's switch, left alone: no line of the fork's "
                                        "reads or sets it", *s.category_reasons, *reasons)))
            continue
        decision = decisions.get(s.name)
        if decision is not None:
            overridden.append(s.name)
            out.append(replace(
                s, disposition=decision.disposition, merge_into=decision.merge_into,
                reasons=tuple([f"decided in {DECISIONS_FILE}: {decision.reason}", *s.category_reasons, *reasons]),
                decided_by="decisions-file",
                proposed_level=proposed_level(s, rs, ms),
            ))
            continue
        rule = next(r for r in rs.disposition_rules if _holds(r, s, level_knobs, rs, own, aside))
        merge_into = None
        reason = rule.reason
        if rule.disposition == "MERGE":
            sibling = _sibling(s, names) if rule.merge_into == "sibling-or-level" else None
            if sibling:
                merge_into, reason = sibling, f"the level of its on/off switch {sibling}"
            elif rule.merge_into in ("by-level", "sibling-or-level"):
                merge_into = proposed_level(s, rs, ms)
            else:
                merge_into = ms.get(rule.merge_into or "", rule.merge_into)
        out.append(replace(s, disposition=rule.disposition, merge_into=merge_into,
                           reasons=tuple([f"{rule.id}: {reason}", *s.category_reasons, *reasons]), decided_by=rule.id,
                           proposed_level=proposed_level(s, rs, ms)))
    return out, overridden

