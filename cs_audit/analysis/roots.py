"""Which hot roots a tree has: every configured root rule with the functions it matches, and
the event loops found in the code (``extract.loops``), with the rule that already covers
each one's function, if any.  A tree that no rule matches is reported as such
(``HotRoots.warning``): its hot paths are then only what event loops reach, or nothing."""

from __future__ import annotations

from collections import defaultdict

from cs_audit.frequency import is_hot
from cs_audit.joins.callgraph import TreeModel, function_id, hot_chain
from cs_audit.joins.gates import gate_switches
from cs_audit.joins.roots import root_process
from cs_audit.joins.runs import default_functions, runs_by_default
from cs_audit.model import CallSite, CheapPath, EventLoopRoot, HotRoots, PlainCall, RootMatch
from cs_audit.ruleset import RuleSet

#: functions named per matched rule in the report
ROOT_EXAMPLES = 3


def hot_roots(model: TreeModel, rs: RuleSet) -> HotRoots:
    index = {root: i for i, root in reversed(list(enumerate(rs.hot_roots)))}
    matched: dict[int, list[str]] = defaultdict(list)
    for key, rule in model.root_rules.items():  # the rule that decides each root, as for hotness
        matched[index[rule]].append(function_id(model, key))
    rules = tuple(
        RootMatch(root.name, root.class_glob, root.path_glob, root.frequency, len(matched[i]),
                  tuple(sorted(matched[i])[:ROOT_EXAMPLES]))
        for i, root in enumerate(rs.hot_roots)
    )
    loops = []
    for path in sorted(model.facts):
        for loop in model.facts[path].event_loops:
            key = (path, loop.function)
            found = model.functions.get(key)
            if found is None:
                continue
            covering = model.root_rules.get(key)
            loops.append(EventLoopRoot(path, loop.line, loop.function, function_id(model, key), loop.steps,
                                       covering.name if covering is not None else None))
    return HotRoots(len(rs.hot_roots), rules, tuple(loops), cheap_paths(model, rs))


def cheap_paths(model: TreeModel, rs: RuleSet) -> tuple[CheapPath, ...]:
    """The functions that run by default on a hot path and do nothing there but check a
    switch: an entry gate (`if not _ENABLED: return None`) or a `return nullcontext()` under
    a gate. Most called first."""
    out: list[CheapPath] = []
    by_file: dict[str, tuple[set[str | None], dict[str | None, list[CallSite | PlainCall]]]] = {}
    for key, freq in default_functions(model):
        if not is_hot(freq):
            continue
        f = model.functions.get(key)
        ff = model.facts.get(key[0])
        if f is None or ff is None:
            continue
        per_file = by_file.get(key[0])
        if per_file is None:  # each file's reads and `return nullcontext()` sites, by function, once
            per_file = by_file[key[0]] = ({r.function for r in ff.env_reads if r.per_call}, _nullcontext_returns(ff.calls))
        reading, returns = per_file
        if key[1] in reading:
            continue
        how, switches = "", []
        nullcontexts = returns.get(key[1], ())
        # a check that reads the env (or calls a helper that may) is a per-call cost of its own
        if f.entry_gates and all(g.kind in ("name", "flag") for g in f.entry_gates):
            switches = gate_switches(model, key[0], key[1], f.entry_gates, rs)
            how = "returns nullcontext()" if nullcontexts else "returns at entry"
        if not switches:
            for site in nullcontexts:
                if site.gates:
                    gates = tuple(g for g in site.gates if not g.active_when_set and g.kind in ("name", "flag"))
                    switches = gate_switches(model, key[0], key[1], gates, rs) if gates else []
                    how = "returns nullcontext()"
                    if switches:
                        break
        if not switches:
            continue
        calls = sum(1 for e in model.callers.get(key, ()) if runs_by_default(model, e.caller) and e.switch is None)
        chain = hot_chain(model, key)
        process = root_process(model, rs, chain[0]) if chain and chain[0] in model.functions else ""
        out.append(CheapPath(key[0], f.line, key[1], how, switches[0].text, freq, calls, process))
    out.sort(key=lambda c: (-c.calls, c.path, c.line))
    return tuple(out)


def _nullcontext_returns(calls: tuple[CallSite | PlainCall, ...]) -> dict[str | None, list[CallSite | PlainCall]]:
    """The `return nullcontext()` call sites of a file, by function."""
    out: dict[str | None, list[CallSite | PlainCall]] = defaultdict(list)
    for site in calls:
        if site.returned and site.callee.rsplit(".", 1)[-1] == "nullcontext":
            out[site.function].append(site)
    return out
