"""Level switches: the value of a switch a gated site starts to run at.

A gate that compares a switch with an int carries the least value the code under it runs at
(``GateRef.level``: `if LEVEL >= 2:`, `int(getenv("X", "0")) > 1`, the rest of a block after
`if trace_level() < 3: return`). A helper that falls back to a level knob (`_diag(name,
level)` returning `int(getenv("DELTA_LOG", "0")) >= level` when `name` is unset) carries it
on that read (``EnvRead.level``), and each call fills it in from its arguments or the
parameter's default: `_diag("RECOMPACT_DIAG", 2)` runs at `DELTA_LOG=2`. Code reached only
through gated calls runs at the least level of the calls into it.
"""

from __future__ import annotations

from collections import defaultdict

from cs_audit.joins.callgraph import Edge, FuncKey, TreeModel
from cs_audit.joins.env_helpers import helper_switches
from cs_audit.joins.gates import resolve_gate
from cs_audit.model import GateRef
from cs_audit.ruleset import RuleSet

#: switch name -> (the least level a site runs at, the switch its own gate names when the level
#: comes from a helper's fallback to the level knob, else "")
Levels = dict[str, tuple[int, str]]


def site_levels(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], rs: RuleSet) -> Levels:
    """The levels of the switches a site's gates compare with ints (each gate must hold: an
    operand of a disjunction says nothing)."""
    out: Levels = {}
    for gate in gates:
        if not gate.active_when_set or gate.any_of:
            continue
        if gate.kind == "call":
            for var, level, named in _helper_levels(model, path, function, gate):
                _keep(out, var, level, named if named != var else "")
        if gate.level.isdigit():
            switch = resolve_gate(model, path, function, gate, rs)
            if switch is not None and switch.kind == "env":
                _keep(out, switch.name, int(gate.level), "")
    return out


def _keep(out: Levels, var: str, level: int, via: str) -> None:
    """Nested gates on one switch: the site runs at the highest level they ask."""
    if level > out.get(var, (0, ""))[0]:
        out[var] = (level, via)


def _helper_levels(model: TreeModel, path: str, function: str | None, gate: GateRef) -> list[tuple[str, int, str]]:
    """(level knob, level, the switch the call names first) of a call of an env helper whose
    result compares a read with an int or a parameter."""
    for target in model.resolver.resolve(path, function, gate.ref):
        if target not in model.env_helpers:
            continue
        f = model.functions.get(target)
        facts = model.facts.get(target[0])
        if f is None or facts is None:
            return []
        params = [p for p in f.params if p not in ("self", "cls")]
        named = helper_switches(model, target, gate.args)[0]
        out = []
        for read in facts.env_reads:
            if read.function != target[1] or not read.returned or not read.level:
                continue
            var = read.var or _argument(read.var_param, params, gate.args)
            level = _level_value(read.level, params, gate.args, dict(f.int_defaults))
            if var and level:
                out.append((var, level, named))
        return out
    return []


def _argument(param: str | None, params: list[str], args: tuple[str, ...]) -> str | None:
    if param is None or param not in params:
        return None
    index = params.index(param)
    return args[index] if index < len(args) and args[index] and not args[index].startswith("kw:") else None


def _level_value(level: str, params: list[str], args: tuple[str, ...], defaults: dict[str, int]) -> int:
    """A ``level`` text as a number: itself, or the call's int argument for its parameter (the
    parameter's default when the call passes none); 0 when not known."""
    if level.isdigit():
        return int(level)
    name, _, bump = level[len("param:"):].partition("+")
    given = _argument(name, params, args)
    value = int(given) if given and given.lstrip("-").isdigit() else defaults.get(name)
    if value is None:
        return 0
    return value + (int(bump) if bump else 0)


def entry_levels(model: TreeModel, rs: RuleSet) -> dict[FuncKey, Levels]:
    """Per function reached only through gated calls (``TreeModel.entry_switches``): the
    level each switch must reach for it to run, the least over the calls into it (a call
    that compares no level lets it run at any value)."""
    into: dict[FuncKey, list] = defaultdict(list)
    for edge in model.edges:
        if edge.callee in model.entry_switches and edge.caller is not None:
            into[edge.callee].append(edge)
    out: dict[FuncKey, Levels] = {}
    for key in sorted(into):
        _entry(model, rs, key, into, out, set())
    return out


def _entry(model: TreeModel, rs: RuleSet, key: FuncKey, into: dict, out: dict[FuncKey, Levels], seen: set[FuncKey]) -> Levels:
    if key in out:
        return out[key]
    if key in seen:
        return {}  # a cycle: its calls say nothing more
    seen.add(key)
    switches = {s.name for s in model.entry_switches.get(key, ()) if s.kind == "env"}
    least: dict[str, tuple[int, str]] = {}
    for edge in into.get(key, ()):
        caller = edge.caller
        if edge.switch is not None:
            carried = {edge.switch.name} & switches
            levels = site_levels(model, edge.path, caller[1] if caller else None, edge.site.gates, rs) if carried else {}
        elif caller in model.entry_switches and caller not in model.freq_default:
            carried = {s.name for s in model.entry_switches[caller]} & switches
            levels = _entry(model, rs, caller, into, out, seen) if carried else {}
        else:
            continue
        for var in carried:
            level = levels.get(var, (0, ""))
            if var not in least or level[0] < least[var][0]:
                least[var] = level
    out[key] = {var: level for var, level in least.items() if level[0] > 0}
    return out[key]


#: how many helpers up a level handed on as an argument is followed (`layer_hash(level=3)`
#: calling `kvtrace(level, ...)`)
_MAX_HANDED = 3


def called_levels(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], switch: str,
                  rs: RuleSet, depth: int = _MAX_HANDED) -> list[tuple[Edge, int]]:
    """A site in a level helper whose gate compares ``switch`` with a parameter (`def
    kvtrace(level, ...): if trace_level() < level: return`): each call of the helper and the
    level it passes (its int argument, the parameter's default when it passes none, or the
    level the call's own gates compare the switch with: `kvtrace(level, ...)` under `if
    trace_level() < level: return` in `layer_hash(..., level=3)`). Empty for any other site."""
    if function is None:
        return []
    for gate in gates:
        if gate.level.startswith("param:") and gate.active_when_set and not gate.any_of:
            found = resolve_gate(model, path, function, gate, rs)
            if found is not None and found.name == switch:
                return _calls_at(model, rs, (path, function), gate.level, switch, depth)
    return []


def _calls_at(model: TreeModel, rs: RuleSet, key: FuncKey, level: str, switch: str, depth: int) -> list[tuple[Edge, int]]:
    f = model.functions.get(key)
    if f is None:
        return []
    name, _, bump = level[len("param:"):].partition("+")
    params = [p for p in f.params if p not in ("self", "cls")]
    if name not in params:
        return []
    index, default, extra = params.index(name), dict(f.int_defaults).get(name), int(bump) if bump else 0
    out: list[tuple[Edge, int]] = []
    for edge in sorted(model.callers.get(key, ()), key=lambda e: (e.path, e.site.line)):
        site = edge.site
        given = site.int_args[index] if index < len(site.int_args) else None
        if given is None and index >= len(site.literal_args):
            given = default  # not passed (positionally): the default
        if given is None and depth:
            # handed on from the caller's own level: the least its callers run it at
            caller = edge.caller[1] if edge.caller else None
            handed = called_levels(model, edge.path, caller, site.gates, switch, rs, depth - 1)
            given = min((value for _, value in handed), default=None)
        out.append((edge, given + extra if given is not None else 0))
    return out
