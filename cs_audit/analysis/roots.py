"""Which hot roots a tree has: every configured root rule with the functions it matches, and
the event loops found in the code (``extract.loops``), with the rule that already covers
each one's function, if any.  A tree that no rule matches is reported as such
(``HotRoots.warning``): its hot paths are then only what event loops reach, or nothing."""

from __future__ import annotations

from collections import defaultdict

from cs_audit.joins.callgraph import TreeModel, function_id
from cs_audit.model import EventLoopRoot, HotRoots, RootMatch
from cs_audit.ruleset import RuleSet

#: functions named per matched rule in the report
ROOT_EXAMPLES = 3


def hot_roots(model: TreeModel, rs: RuleSet) -> HotRoots:
    names = {root.name for root in rs.hot_roots}
    matched: dict[int, list[str]] = defaultdict(list)
    for key, f in model.functions.items():
        if f.name not in names:
            continue
        for i, root in enumerate(rs.hot_roots):
            if root.matches(f.name, f.class_name, key[0]):  # the first match decides, as for hotness
                matched[i].append(function_id(model, key))
                break
    rules = tuple(
        RootMatch(root.name, root.class_glob, root.path_glob, root.frequency, len(matched[i]),
                  tuple(sorted(matched[i])[:ROOT_EXAMPLES]))
        for i, root in enumerate(rs.hot_roots)
    )
    loops = []
    for path in sorted(model.facts):
        for loop in model.facts[path].event_loops:
            key = (path, loop.function)
            f = model.functions.get(key)
            if f is None:
                continue
            covering = rs.hot_root_for(f.name, f.class_name, path)
            loops.append(EventLoopRoot(path, loop.line, loop.function, function_id(model, key), loop.steps,
                                       covering.name if covering is not None else None))
    return HotRoots(len(rs.hot_roots), rules, tuple(loops))
