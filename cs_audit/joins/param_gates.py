"""A gate on a parameter, judged by what the callers hand it.

`def materialize(frames, interpolate=False): if interpolate: ...` runs its branch only when a
caller passes something true.  When every resolved call passes an option whose default keeps
the branch off (`interpolate=req.interpolate`, declared `interpolate: bool = False`), a literal
that does, the parameter's own default by passing nothing, or its own parameter that is in
turn so handed (`post_process(x, interpolate=interpolate)`), the branch is off in the
deployment and its switch is that option (callers in tests, benchmarks and examples left
out, and calls a switch keeps from running by default).  One caller passing anything else
(an expression, a `**kwargs`, a call the graph could not resolve to a function by the same
name, a call through a callback) leaves the gate to the other rules."""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from cs_audit.joins.defaults import NOT_OPTION, option_gate, value_gate
from cs_audit.joins.host_data import DIRECT_CALLS, argument_position
from cs_audit.joins.joined import JoinedModel as TreeModel  # callgraph's, which imports this module
from cs_audit.joins.named_calls import callers_on_demand, is_unresolved, unresolved_sites
from cs_audit.model import CODE_CHARS, PARAM_TESTED, FuncKey, GateRef, PassedValues, SwitchRef, by_text
from cs_audit.ruleset import RuleSet

#: how many parameters a value may be handed on through
MAX_HANDED = 4


#: the switch a call's gates need to run, None when they let it run by default (path,
#: calling function, gates)
CallOff = Callable[[str, "str | None", "tuple[GateRef, ...]"], "SwitchRef | None"]


def parameter_gate(model: TreeModel, key: FuncKey, gate: GateRef, rs: RuleSet, call_off: CallOff) -> SwitchRef | None:
    """The option switch of ``gate``, a test of one of ``key``'s parameters, from what its
    callers pass; ``NOT_OPTION`` when they do not all settle it. A call a switch keeps from
    running by default (``call_off``) passes nothing in the deployment."""
    if rs.defaults is None or PARAM_TESTED not in gate.args:
        return NOT_OPTION
    return _judged(model, key, gate.ref, gate, rs, 0, {}, call_off)


def _judged(model: TreeModel, key: FuncKey, param: str, gate: GateRef, rs: RuleSet, depth: int,
            seen: dict[tuple[FuncKey, str], SwitchRef | None], call_off: CallOff) -> SwitchRef | None:
    """``parameter_gate`` of ``param``; ``seen``: the answers so far (NOT_OPTION while one is
    worked out: a value handed round a cycle is not known)."""
    if (key, param) in seen:
        return seen[(key, param)]
    seen[(key, param)] = NOT_OPTION
    answer = seen[(key, param)] = _worked_out(model, key, param, gate, rs, depth, seen, call_off)
    return answer


def _worked_out(model: TreeModel, key: FuncKey, param: str, gate: GateRef, rs: RuleSet, depth: int,
                seen: dict[tuple[FuncKey, str], SwitchRef | None], call_off: CallOff) -> SwitchRef | None:
    function = model.functions.get(key)
    if function is None or param not in function.params or depth > MAX_HANDED:
        return NOT_OPTION
    # tests, benchmarks and examples call with what they test: not the deployment's values
    assert rs.defaults is not None  # parameter_gate returns before without them
    ignored = rs.defaults.ignore_paths
    callers = [c for c in callers_of(model, key) if not ignored.search(c[0])]
    if not callers:
        return NOT_OPTION
    # a call only a switch lets run (`if self.connector is not None: stats.record(..., hits)`)
    # hands nothing to the deployment's runs; when every call is such, so is the branch
    needed = [call_off(c[0], c[1], c[2].gates) if c[2].gates else None for c in callers]
    live = [c for c, switch in zip(callers, needed) if switch is None]
    if not live:
        return min((switch for switch in needed if switch is not None), key=by_text)
    callers = live
    passed = passed_table(model)
    default = dict(function.const_defaults).get(param)
    if default is None and param in dict(function.param_defaults):
        default = repr(dict(function.param_defaults)[param])  # a string default (`backend="auto"`)
    off: list[SwitchRef] = []
    kept_off: list[SwitchRef] = []
    if is_unresolved(model, key[1].rpartition(".")[2]):
        # a call the graph could not resolve may be one of this function's: judged as a
        # caller passing nothing when none of them can reach the parameter (`event.record(s)`
        # beside `stats.record(n, hits, preempted)` and a `hits_by_source=None` default)
        if default is None or not none_reaches(model, function, param):
            return NOT_OPTION
        switch = value_gate(param, ast.literal_eval(default), gate)
        if switch is NOT_OPTION or switch is None:
            return switch
        kept_off.append(switch)
    for path, caller, site, how in callers:
        if how not in DIRECT_CALLS:
            return NOT_OPTION
        value = call_value(passed.get((path, site.line, site.end_line, site.callee.rpartition(".")[2])),
                           function, param, how, default, site.code)
        if value is None:
            return NOT_OPTION
        kind, _, text = value.partition(":")
        if kind == "lit":
            switch = value_gate(param, ast.literal_eval(text), gate)
            if switch is not None and switch is not NOT_OPTION:
                kept_off.append(switch)  # names no option: the parameter itself, if none does
                continue
        elif kind == "ref":
            switch = _option_value(model, rs, text, gate)
        elif kind == "either":
            # a local that holds one of two values: kept off only when each is
            answers = [value_gate(param, ast.literal_eval(one[4:]), gate) if one.startswith("lit:")
                       else _option_value(model, rs, one[4:], gate) for one in text.split("\t")]
            switch = NOT_OPTION if NOT_OPTION in answers else None if None in answers else min(answers, key=by_text)
        elif kind == "local":
            # a local of the caller (a `with`'s name, or one it assigns), handed on: tested for
            # truth there as here
            plain = not gate.level and not any(a.startswith("cmp:") for a in gate.args)
            switch = call_off(path, caller, (GateRef("name", text, (), gate.active_when_set),)) if plain else None
            if switch is None:
                return NOT_OPTION
        elif caller is not None:
            switch = _judged(model, (path, caller), text, gate, rs, depth + 1, seen, call_off)
        else:
            return NOT_OPTION
        if switch is NOT_OPTION or switch is None:
            return switch
        off.append(switch)
    if off:
        return min(off, key=by_text)
    if not kept_off:
        return NOT_OPTION
    # every call passes a literal, or nothing, that keeps it off: the branch never runs, and
    # its switch is the argument no call passes (`record(hits)`)
    return SwitchRef("option", f"{function.name}({min(kept_off, key=by_text).name})")


def _option_value(model: TreeModel, rs: RuleSet, read: str, gate: GateRef) -> SwitchRef | None:
    """The switch ``gate`` on a parameter needs when a caller hands it the attribute ``read``
    (`cfg.backend`): the option's, judged with the gate's comparison."""
    compared = tuple(a for a in gate.args if a.startswith("cmp:"))
    return option_gate(model.options, rs.defaults, GateRef("name", read, compared, gate.active_when_set, level=gate.level))


def call_value(values: PassedValues | None, function: Any, param: str, how: str, default: str | None, code: str) -> str | None:
    """What one call (``code``, its recorded ``values``) passes into ``param``, as
    ``PassedValues``' text: the default's when it passes nothing that can reach it; None when
    that is not known."""
    if values is None and default is not None and not _reaches(code, argument_position(function, param, how), param):
        return f"lit:{default}"  # passes only values not known, none of them into it
    return _value_for(values, function, param, how, default)


def _value_for(values: PassedValues | None, function: Any, param: str, how: str, default: str | None) -> str | None:
    """What one call passes into ``param`` (``PassedValues``' text); the default's when it
    passes nothing; None when that is not known."""
    if values is None:
        return None  # a call that passes nothing known: what it passes is not recorded
    found = next((value for name, value in values.keywords if name == param), None)
    if found is None:
        position = argument_position(function, param, how)
        found = next((value for index, value in values.positions if index == position), None)
    if found is None:
        return None if values.open or default is None else f"lit:{default}"
    return None if found == "?" else found


def callers_of(model: TreeModel, key: FuncKey) -> list[tuple[str, str | None, Any, str]]:
    """(path, calling function, site, how) of each resolved call of ``key``: the graph's, and
    those a scan did not type, typed now (``named_calls``)."""
    pending = model.pending_callers
    if pending is None:
        found = [(e.path, e.site.function, e.site, e.how) for e in model.callers.get(key, ())]
    else:
        found = list(pending.get(key, []))
    for path, site, targets in callers_on_demand(model, key):
        found += [(path, site.function, site, how) for target, how in targets if target == key]
    return found


def passed_table(model: TreeModel) -> dict[tuple[str, int, int, str], PassedValues]:
    table = model.passed_by_call
    if table is None:
        table = model.passed_by_call = {(path, v.line, v.end_line, v.method): v
                                       for path, ff in model.facts.items() for v in ff.passed_values}
    return table


def none_reaches(model: TreeModel, function: Any, param: str) -> bool:
    """Whether no unresolved call named as ``function`` can pass ``param``: each passes fewer
    positional arguments than come before it, not it by keyword, and no `*args`/`**kwargs`
    (a call whose code was cut short, or does not parse, may)."""
    # bound, the first argument lands after `self`: the fewest arguments that may reach it
    index = argument_position(function, param, "attribute")
    return not any(_reaches(site.code, index, param) for site in unresolved_sites(model, function.name))


def _reaches_parsed(call: ast.Call | None, position: int, param: str) -> bool:
    """Whether ``call`` may pass ``param``, at ``position`` or by keyword (not known: it may)."""
    return call is None or len(call.args) > position or any(a.__class__ is ast.Starred for a in call.args) or any(
        k.arg in (None, param) for k in call.keywords)


def _reaches(code: str, position: int, param: str) -> bool:
    """Whether the call a call site's ``code`` holds may pass ``param`` (``_reaches_parsed``)."""
    return _reaches_parsed(_parsed_call(code), position, param)


@lru_cache(maxsize=4096)  # a callee's calls are asked of by each gate on its parameters
def _parsed_call(code: str) -> ast.Call | None:
    """The call a call site's code holds; None when cut short or not one call (shared: read only)."""
    if len(code) >= CODE_CHARS:
        return None
    try:
        node = ast.parse(code, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return node if node.__class__ is ast.Call else None


def callers_by_target(raw_edges: list[tuple[str, Any, FuncKey, str]]) -> dict[FuncKey, list[tuple[str, str | None, Any, str]]]:
    """The callers of each function as ``_callers`` gives them, from the edges a model is
    built from (before their switches, which may ask a parameter's gate)."""
    out: dict[FuncKey, list[tuple[str, str | None, Any, str]]] = {}
    for path, site, target, how in raw_edges:
        out.setdefault(target, []).append((path, site.function, site, how))
    return out
