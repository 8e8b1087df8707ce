"""What a site's gates stand for: each gate operand resolved to the switch it needs
(``resolve_gate``), through env reads, helpers, options, derived names, parameters and
attributes of other objects; and the per-file table of answers a later build reuses
(``SiteGates``, ``gates_digest``)."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, fields, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from cs_audit.joins.attributes import (
    constructed_field,
    held_attribute_switch,
    held_by_no_own_state,
    receiver_attribute_switch,
)
from cs_audit.joins.components import instance_switch
from cs_audit.joins.defaults import (
    NOT_OPTION,
    feature_member_gate,
    member_comparison,
    member_gate,
    module_switch,
    option_gate,
    predicate_gate,
    registry_env_gate,
    settings_receiver,
    wrapped_option,
)
from cs_audit.joins.env_helpers import helper_switches
from cs_audit.joins.fields import callers_off, field_switch, wrapped_by_default
from cs_audit.joins.kept import SiteGates
from cs_audit.joins.param_gates import CallOff, parameter_gate
from cs_audit.joins.resolver import _class_of
from cs_audit.joins.served import architecture_switch
from cs_audit.model import (
    DEFAULT_ON,
    DEREFERENCED,
    LEVEL_SWITCH,
    PARAM_FRESH,
    PARAM_TESTED,
    SERVED_ARCHITECTURE,
    FileFacts,
    FuncKey,
    FunctionDef,
    GateRef,
    SwitchRef,
    closure_of,
    env_switch,
)
from cs_audit.ruleset import RuleSet

if TYPE_CHECKING:
    from cs_audit.joins.tree import TreeModel


#: not in ``TreeModel.gate_cache`` yet (None is a cached answer: no switch)
_UNRESOLVED = object()
#: in ``TreeModel.gate_cache`` while the gate is being resolved
_RESOLVING = object()


@dataclass(frozen=True, slots=True)
class _Shaped:
    """A ``TreeModel.gate_cache`` answer a gate cycle shaped (``TreeModel.gate_cycles``)."""

    switch: SwitchRef | None


def resolve_gate(model: TreeModel, path: str, function: str | None, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    """The switch a gate operand stands for, when the guarded code runs only with it set."""
    key = (path, function, gate)
    switch = model.gate_cache.get(key, _UNRESOLVED)
    if switch is _UNRESOLVED:
        model.gate_cache[key] = _RESOLVING
        model.gates_resolving.append(key)
        cycles = model.gate_cycles
        switch = _resolve_gate(model, path, function, gate, rs)
        model.gates_resolving.pop()
        model.gate_cache[key] = switch if model.gate_cycles == cycles else _Shaped(switch)
    elif switch is _RESOLVING:
        # a gate that leads back to itself (through a helper's) has no switch; when through
        # other gates, what those resolve to depends on which of them was asked first
        if model.gates_resolving[-1] != key:
            model.gate_cycles += 1
        return None
    elif switch.__class__ is _Shaped:
        model.gate_cycles += 1
        return switch.switch
    return switch  # type: ignore[return-value]


#: most imports a module name is followed through to the module that assigns it
MAX_REEXPORTS = 4


def _exported(model: TreeModel, ref: str) -> list[tuple[str, str]]:
    """(file, name) of a module's name ``ref`` (`pkg.mod.X`) in each file of that module, and
    through the imports that bring it there from another module (`from pkg.base import X`)."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    work = [ref]
    while work and len(seen) < MAX_REEXPORTS:
        dotted = work.pop()
        if dotted in seen or "." not in dotted:
            continue
        seen.add(dotted)
        module, name = dotted.rsplit(".", 1)
        for other in model.resolver.by_module.get(module, ()):
            out.append((other, name))
            origin = next((o for n, o in model.facts[other].aliases if n == name), None) if other in model.facts else None
            if origin is not None and origin != dotted:
                work.append(origin)
    return out


def _resolve_gate(model: TreeModel, path: str, function: str | None, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    if gate.ref == SERVED_ARCHITECTURE:
        # `arch in HYBRID_ARCHS`: only the architectures the deployment serves
        return architecture_switch(model.resolver.types.classes, rs.defaults, gate, model.unserved)
    if DEREFERENCED in gate.args:
        # past `self.pool.size` read unguarded the attribute holds an object, not None: only
        # the class it is declared to hold decides (a falsy default, `""` or `0`, may be read)
        return held_attribute_switch(model, model.resolver.types, path, closure_of(gate) or function, gate.ref)
    option = option_gate(model.options, rs.defaults, gate)
    if option is NOT_OPTION and gate.kind == "name" and gate.ref.rpartition(".")[2] in model.options.ambiguous and (
            held_by_no_own_state(model, model.resolver.types, path, closure_of(gate) or function, gate.ref)):
        # an option's name on an object typed as none of the classes that keep their own state
        # under it (`ctx.enable_x` on a build context handed the option)
        option = option_gate(model.options, rs.defaults, gate, typed=True)
    if option is NOT_OPTION and gate.kind == "name" and model.options.computed:
        option = _computed_option(model, gate, rs)
    if option is not NOT_OPTION:
        return option
    if gate.kind == "name" and rs.defaults is not None and (compared := member_comparison(gate)) is not None:
        # a comparison with a member named for a feature (`mode == ForwardMode.TARGET_VERIFY`)
        # is the test of its predicate (`mode.is_target_verify()`)
        feature = feature_member_gate(rs.defaults, *compared)
        if feature is not NOT_OPTION:
            return feature
    if gate.kind == "name" and model.wrapped:
        # a name compared with an enum's member (`self.mode != Mode.NULL`)
        option = _member_gate(model, path, function, gate, rs)
        if option is not NOT_OPTION:
            return option
    if gate.kind == "env" and not (rs.defaults is not None and gate.ref in rs.defaults.env):
        registry = registry_env_gate(model.options, gate)
        if registry is not NOT_OPTION:
            return registry
    if gate.kind == "call" and model.wrapped:
        # a predicate of a wrapped option (`self.algo.is_none()`), negated or not
        option = _wrapped_predicate(model, path, function, gate, rs)
        if option is not NOT_OPTION:
            return option
    if gate.kind == "call" and rs.defaults is not None and gate.ref.rpartition(".")[2].startswith("is_"):
        # an enum's predicate of a record field set from an option (`get_backend().is_deepep()`)
        option = _field_predicate(model, path, function, gate, rs)
        if option is not NOT_OPTION:
            return option
    if not gate.active_when_set:
        # `if not self.use_overlap:` where the name holds by default: what turns it off
        return _negated_name_gate(model, path, function, gate, rs) if gate.kind == "name" else None
    if gate.kind == "env":
        if gate.ref.startswith("param:") or gate.ref == "?" or rs.defaults is not None and gate.ref in rs.defaults.env:
            return None  # (an env var the deployment sets: its code runs)
        return env_switch(gate.ref)
    if gate.kind == "level":
        return LEVEL_SWITCH
    if gate.kind == "call":
        if gate.ref == "isinstance":
            return instance_switch(model, gate)
        if gate.level:
            # `resolve_level() >= Level.WARN`: the value it returns when no exit is taken
            switch = _fallback_gate(model, path, function, gate.ref, gate.level, rs)
            if switch is not NOT_OPTION:
                return switch
        # false by default when every function the call may run is (the first one's switch)
        falsy = [_falsy_call(model, target, rs) for target, _ in model.resolver.resolve_how(path, function, gate.ref)]
        if falsy and all(falsy):
            return falsy[0]
        for target in model.resolver.resolve(path, function, gate.ref):
            if target in model.env_helpers and target not in model.void_helpers:
                switches = helper_switches(model, target, gate.args)
                debug_like = rs.debug_name_re.search(target[1].rsplit(".", 1)[-1]) or any(
                    rs.category_of(v) != "config" for v in switches if v != "<dynamic>"
                )
                # a helper over config switches (`_should_compact()`) decides work, not debug output:
                # off by default only when the default it reads with is (`get_bool_env_var(name,
                # default="false")` called with the name alone)
                return env_switch(switches[0]) if debug_like or _read_default_off(model, target, gate, rs) else None
        return None
    if gate.kind == "name":
        ref = gate.ref
        # a nested function's free name is the enclosing function's local
        function = closure_of(gate) or function
        if function is not None and "." not in ref and (
                (path, f"{function}::{ref}") not in model.derived or PARAM_FRESH in gate.args):
            # a parameter the function does not rebind: what its callers hand it
            option = parameter_gate(model, (path, function), gate, rs, _call_off(model, rs))
            if option is not NOT_OPTION:
                return option
        if function is not None and "." not in ref:
            option = _table_get_gate(model, path, function, gate, rs)
            if option is not NOT_OPTION:
                return option
        if "." in ref and "operand" not in gate.args:
            # `self.pool is not None` where the class declares `self.pool: Optional[HostPool] = None`
            switch = held_attribute_switch(model, model.resolver.types, path, function, ref)
            if switch is not None:
                return switch
        for key in _name_keys(path, function, ref):
            # a name a gate tests for truth holds when its assignments' gates do (compared
            # with something, an operand, it stands for the env value it holds)
            if key in model.derived and "operand" not in gate.args:
                switch, known = _derived_switch(model, path, key, rs)
                if switch is not None or known:
                    return switch
            if key in model.constants:
                return env_switch(model.constants[key])
            if key in model.derived and gate.level and not gate.level.startswith("param:"):
                # `level = resolve_level()` ... `if level >= Level.WARN:`
                switch = _fallback_name_gate(model, path, key, gate.level, rs)
                if switch is not NOT_OPTION:
                    return switch
            if key in model.derived and gate.level.isdigit() and int(gate.level) > 1:
                # compared with a level above on/off (`< 0`, `== 0` are sanity checks of sizes
                # as often): the value a helper of the tree returned
                var = _helper_value(model, path, key)
                if var is not None:
                    return env_switch(var)
        if "." in ref and not ref.startswith("self."):
            for other, name in _exported(model, ref):
                # a module name set from a switch there (`from .flags import TRACE_ON`)
                if (other, name) in model.derived and "operand" not in gate.args:
                    switch, known = _derived_switch(model, other, (other, name), rs)
                    if switch is not None or known:
                        return switch
                if (other, name) in model.constants:
                    return env_switch(model.constants[(other, name)])
        if "." in ref and "operand" not in gate.args:
            # `self.pool.window is not None`: judged by the assignments of the pool's class
            ignored = rs.defaults.ignore_paths.search if rs.defaults is not None else None
            switch, known = receiver_attribute_switch(
                model, model.resolver.types, path, function, ref,
                lambda where, key: _derived_switch(model, where, key, rs), ignored)
            if switch is not None or known:
                return switch
        if "." in ref and "operand" not in gate.args:
            # `self.hook is not None` of a record: what every construction of it hands the field
            passed = constructed_field(model, model.resolver.types, path, function, ref)
            handed = [resolve_gate(model, where, caller, GateRef("name", name, (), gate.active_when_set), rs)
                      for where, caller, name in passed or ()]
            if handed and all(handed):
                return handed[0]
        if "." in ref and "operand" not in gate.args:
            # `stats.details is not None`: a record's field only code a switch keeps off sets
            switch = field_switch(model, ref.rpartition(".")[2], rs, _call_off(model, rs))
            if switch is not None:
                return switch
        switch = _switch_of_result(model, path, function, ref, rs)
        if switch is not None:
            return switch
        leaf = ref.rsplit(".", 1)[-1]
        if "operand" not in gate.args and rs.flag_name_re.fullmatch(leaf):
            return SwitchRef("flag", ref)
    return None


def _falsy_call(model: TreeModel, target: FuncKey, rs: RuleSet) -> SwitchRef | None:
    """The switch a call of ``target`` needs to give a truthy value; None when it may give one
    by default, or what it gives is not known."""
    predicate = model.functions.get(target)
    if predicate is None:
        return None
    if predicate.returned_test and not all(g.ref in ("self", "cls") for g in predicate.returned_test):
        # a predicate over options (`self.runner._elastic_enabled()`), or over registry reads
        # whose defaults keep it false: the setting its test needs (a test of the receiver
        # alone, `return self == Mode.X`, is judged by what the receiver holds)
        option = next((s for s in gate_switches(model, target[0], target[1], predicate.returned_test, rs)
                       if s.kind == "option" or s.kind == "env" and s.name in model.options.env), None)
        if option is not None:
            return option
    if predicate.false_entry_gates:
        # false unless its first entry gates hold (`if not envs.X.get(): return False`): what they need
        needed = gate_switches(model, target[0], target[1], predicate.false_entry_gates, rs)
        if needed:
            return needed[0]
    if predicate.returns:
        return _false_by_default(model, target, predicate, rs)
    return None


def _read_default_off(model: TreeModel, helper: FuncKey, gate: GateRef, rs: RuleSet) -> bool:
    """Whether a call of a boolean env helper taking the var's name and then a default (`def
    get_bool_env_var(name, default="false")`: named for a bool, it gives its default when the var
    is unset) reads with an off default: the literal it passes, or the helper's own when it passes
    none (by position, keyword or `*args`)."""
    if "bool" not in helper[1].rpartition(".")[2].lower() or "kw:*" in gate.args:
        return False
    f = model.functions.get(helper)
    names = model.env_helpers.get(helper, ((), ()))[1]
    params = [p for p in f.params if p not in ("self", "cls")] if f is not None else []
    if f is None or len(names) != 1 or names[0] not in params or params.index(names[0]) + 1 >= len(params):
        return False
    at = params.index(names[0]) + 1
    positional = [a for a in gate.args if not a.startswith("kw:")]
    if at < len(positional):
        passed: str | None = positional[at] or None  # ("": not a literal)
    elif f"kw:{params[at]}" in gate.args or "kw:**" in gate.args:
        return False
    else:
        passed = dict(f.param_defaults).get(params[at], dict(f.const_defaults).get(params[at]))
    return passed is not None and passed.strip("'\"") in rs.off_values


def _table_get_gate(model: TreeModel, path: str, function: str, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    """A local holding what a module table gave for a parameter (`spec = _BACKENDS.get(backend)`
    ... `if spec is None: return`), tested for truth: it holds only when the parameter is one of
    the table's keys, judged by what the callers pass (``parameter_gate``). ``NOT_OPTION`` for
    any other gate."""
    if not gate.active_when_set or "operand" in gate.args or gate.level:
        return NOT_OPTION
    ff = model.facts.get(path)
    found = next(((table, param) for where, local, table, param in ff.table_gets if where == function and local == gate.ref),
                 None) if ff is not None and ff.table_gets else None
    keys = dict(ff.table_keys).get(found[0]) if found is not None and ff is not None else None
    if found is None or not keys:
        return NOT_OPTION
    tested = GateRef("name", found[1], ("operand", PARAM_TESTED, f"cmp:in:{tuple(keys)!r}"), True)
    return parameter_gate(model, (path, function), tested, rs, _call_off(model, rs))


def _computed_option(model: TreeModel, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    """An option a settings class computes with a function it names (`attn_dp_enabled =
    Derived(fn="pkg.context.attn_dp_enabled_of")`), tested for truth on settings: judged like
    a call of that function (its returns, on the defaults). ``NOT_OPTION`` for any other gate,
    and for one the deployment states, whose value decides."""
    receiver, _, name = gate.ref.rpartition(".")
    dotted = model.options.computed.get(name)
    if dotted is None or not receiver or "operand" in gate.args or gate.level or rs.defaults is None:
        return NOT_OPTION
    if name in dict(rs.defaults.options) or name in model.options.ambiguous and not settings_receiver(rs.defaults, receiver):
        return NOT_OPTION
    module, _, function = dotted.rpartition(".")
    for path in model.resolver.by_module.get(module, ()):
        if (path, function) in model.functions:
            switch = resolve_gate(model, path, None, GateRef("call", function, (), gate.active_when_set), rs)
            return NOT_OPTION if switch is None else switch
    return NOT_OPTION


def _false_by_default(model: TreeModel, key: FuncKey, function: FunctionDef, rs: RuleSet) -> SwitchRef | None:
    """The switch a call of ``function`` needs to give a truthy value, when every `return` the
    defaults let it take gives a falsy one (`if get_parallel().attn_dp_enabled: ... return True
    ... else: return False`); None when one may give a truthy value. The switch is the first
    that keeps a truthy `return` from being taken, or a taken one's test false. (A call of the
    function in its own tests leads back through the gate cache, which answers no switch.)"""
    found: list[SwitchRef] = []
    for gates, what, test in function.returns:
        kept_off = gate_switches(model, key[0], key[1], gates, rs) if gates else []
        if kept_off:
            if what != "false":
                found.append(kept_off[0])
            continue
        if what == "false":
            continue
        failing = gate_switches(model, key[0], key[1], test, rs) if what == "test" else []
        if not failing:
            return None  # taken by default, and may give a truthy value
        found.append(failing[0])
    return found[0] if found else None


def _negated_name_gate(model: TreeModel, path: str, function: str | None, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    """The switch the code under `not name` needs when the name holds by default: each of its
    assignments is a conjunction of tests that hold with the deployment's values
    (`self.enable_overlap = not cfg.disable_overlap and not use_mlx()`), and none gives it a
    falsy constant. The switch is what breaks the first test (`disable_overlap`)."""
    if "operand" in gate.args or gate.level or rs.defaults is None:
        return None
    function = closure_of(gate) or function
    for key in _name_keys(path, function, gate.ref):
        if key in model.derived:
            return _negated_switch(model, key[0], key, rs)[0]
    if "." in gate.ref:
        ignored = rs.defaults.ignore_paths.search
        return receiver_attribute_switch(
            model, model.resolver.types, path, function, gate.ref,
            lambda where, key: _negated_switch(model, where, key, rs), ignored)[0]
    return None


def _negated_switch(model: TreeModel, path: str, key: tuple[str, str], rs: RuleSet) -> tuple[SwitchRef | None, bool]:
    """(the switch that makes a name falsy when every assignment of it holds by default, whether
    that is known); see ``_negated_name_gate``."""
    if key in model.falsy:
        return None, False
    found: SwitchRef | None = None
    for function, refs in model.derived[key]:
        tests = [r for r in refs if r != DEFAULT_ON]
        # a plain conjunction of truth tests (a comparison's opposite is another comparison)
        if not tests or any(r.any_of or "operand" in r.args or r.level for r in tests):
            return None, False
        for ref in tests:
            # a test holds by default when its opposite needs a switch
            switch = resolve_gate(model, path, function, replace(ref, active_when_set=not ref.active_when_set), rs)
            if switch is None:
                return None, False
            found = found or switch
    return found, found is not None


def _name_keys(path: str, function: str | None, name: str) -> tuple[tuple[str, str], ...]:
    """Where a name a gate reads of ``function`` may be kept, as ``_name_key`` keys them: a
    local of the function, a module name, an attribute of its class."""
    return (path, f"{function}::{name}"), (path, name), (path, f"{_class_of(function)}.{name}")


def _wrapped_predicate(model: TreeModel, path: str, function: str | None, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    receiver, _, method = gate.ref.rpartition(".")
    reads = _wrapped_reads(model, path, function, receiver) if method.startswith("is_") and receiver else None
    if reads is None:
        return NOT_OPTION
    if len(set(reads)) == 1 and reads[0].endswith("()"):
        # a name holding a getter's value (`backend = get_backend()` ... `backend.is_deepep()`)
        return _field_predicate(model, path, None, gate, rs, reads[0])
    return predicate_gate(model.options, rs.defaults, reads, method, gate.active_when_set)


def _wrapped_reads(model: TreeModel, path: str, function: str | None, name: str) -> list[str] | None:
    """What each assignment of ``name`` wraps (``FileFacts.wrapped``); None when it is kept nowhere."""
    return next((model.wrapped[key] for key in _name_keys(path, function, name) if key in model.wrapped), None)


def _field_predicate(model: TreeModel, path: str, function: str | None, gate: GateRef, rs: RuleSet,
                     receiver: str = "") -> SwitchRef | None:
    """A predicate of an enum called on a record field (`get_backend().is_deepep()` of a getter
    returning `moe.backend`, or `cfg.moe.backend.is_deepep()`) whose body compares `self` with
    one member (`return self == Backend.DEEPEP`), where every store of the field that can run by
    default builds that enum from one option (``fields.wrapped_by_default``): it holds by
    default when the option's default is the member's value. None when the code it guards runs
    by default, the option's setting that lets it run otherwise; ``NOT_OPTION`` when any step
    is not known. ``receiver``: the getter call a name the gate tests holds, if not the gate's own."""
    own, _, method = gate.ref.rpartition(".")
    field = _field_of(model, path, function, receiver or own)
    wrapped = wrapped_by_default(model, field, rs, _call_off(model, rs)) if field else None
    if wrapped is None or rs.defaults is None:
        return NOT_OPTION
    where, callee, read, members = wrapped
    types = model.resolver.types
    classes = [value[1] for value in types.dotted_in_module(where, callee) if value[0] == "k"]
    key = types.find_method(classes[0], method) if len(classes) == 1 else None
    test = model.functions[key].returned_test if key in model.functions else ()
    compared = member_comparison(test[0]) if len(test) == 1 and test[0].ref == "self" else None
    found = wrapped_option(model.options, rs.defaults, [read])
    if compared is None or found is None or not isinstance(found[1], str):
        return NOT_OPTION
    op, member = compared
    class_name = classes[0][1].rpartition(".")[2]
    strings = _class_strings(model).get(class_name, {})
    member_value = strings.get(member.rpartition(".")[2]) if member.rpartition(".")[0].endswith(class_name) else None
    name, value = found
    if member_value is None or any(m.rpartition(".")[0].rpartition(".")[2] != class_name or strings.get(m.rpartition(".")[2]) != value
                                   for m in members):
        return NOT_OPTION  # (another store gives a member other than the default's)
    if ((value == member_value) == (op == "==")) == gate.active_when_set:
        return None
    return SwitchRef("option", f"{name}{'==' if (op == '==') == gate.active_when_set else '!='}{member_value!r}")


def _field_of(model: TreeModel, path: str, function: str | None, receiver: str) -> str:
    """The record field a predicate's receiver reads: the one every function a getter call
    (`get_backend()`) resolves to returns, or the last attribute of a chain off another object
    (`cfg.moe.backend`); "" for any other receiver."""
    if receiver.endswith("()") and "(" not in receiver[:-2]:
        returned = {model.functions[t].returned_field if t in model.functions else ""
                    for t, _ in model.resolver.resolve_how(path, function, receiver[:-2])}
        return returned.pop() if len(returned) == 1 else ""
    owner, _, attr = receiver.rpartition(".")
    return attr if owner and owner not in ("self", "cls") and "(" not in receiver else ""


def _member_gate(model: TreeModel, path: str, function: str | None, gate: GateRef, rs: RuleSet) -> SwitchRef | None:
    compared = member_comparison(gate)
    if compared is None:
        return NOT_OPTION
    op, member = compared
    owner, _, name = member.rpartition(".")
    value = _class_strings(model).get(owner.rpartition(".")[2], {}).get(name)
    reads = _wrapped_reads(model, path, function, gate.ref)
    if value is None or reads is None:
        return NOT_OPTION
    return member_gate(model.options, rs.defaults, reads, op, value)


def _class_strings(model: TreeModel) -> dict[str, dict[str, str | None]]:
    if model.class_strings is None:
        model.class_strings = _class_constants(model, "strings")
    return model.class_strings


def _class_constants(model: TreeModel, kind: str) -> dict:
    """A class's last name -> its constants of one ``kind`` (``ClassFacts.levels``: ints,
    ``strings``: strs), those its namesakes agree on (None where they do not)."""
    table: dict[str, dict] = {}
    for ff in model.facts.values():
        for c in ff.types.classes:
            members = table.setdefault(c.qualname.rsplit(".", 1)[-1], {})
            for name, value in getattr(c, kind):
                members[name] = value if members.get(name, value) == value else None
    return table


def _helper_value(model: TreeModel, path: str, key: tuple[str, str]) -> str | None:
    """The env var a name compared with a level holds when every assignment to it is the
    value of an env helper of the tree (`_LEVEL = _get_env("X_LEVEL", int, 0)` then `if
    _LEVEL >= 3:`), as a module constant holds the value of a read. Only for levels: a value
    a helper builds around the read (`(ptr, envs.X)`) tested against None stands for no switch."""
    found: str | None = None
    for function, refs in model.derived[key]:
        if len(refs) != 1 or refs[0].kind != "call" or not refs[0].active_when_set:
            return None
        targets = [t for t in model.resolver.resolve(path, function, refs[0].ref)
                   if t in model.env_helpers and t not in model.void_helpers]
        if not targets:
            return None
        var = helper_switches(model, targets[0], refs[0].args)[0]
        if var == "<dynamic>" or found not in (None, var):
            return None
        found = var
    return found


def _level_number(model: TreeModel, text: str) -> int | None:
    """The int a level names: a literal, a class's constant (`name:pkg.Level.WARN`, looked up by
    the class's last name), and `+1` past one; None when unknown or namesakes disagree."""
    bump = text.endswith("+1")
    text = text[:-2] if bump else text
    text = text.removeprefix("name:")
    if text.lstrip("-").isdigit():
        return int(text) + bump
    if model.class_levels is None:
        model.class_levels = _class_constants(model, "levels")
    owner, _, member = text.rpartition(".")
    found = model.class_levels.get(owner.rsplit(".", 1)[-1], {}).get(member) if owner else None
    return None if found is None else found + bump


def _fallback_gate(model: TreeModel, path: str, function: str | None, callee: str, level: str,
                   rs: RuleSet) -> SwitchRef | None:
    """A call compared with a level (`resolve_level() >= Level.WARN`), decided by the value the
    function returns when none of its exits is taken (``FunctionDef.fallback_return``), when
    each exit's condition stands for a switch that keeps it off: that switch when the value is
    below the level, None when it reaches it; ``NOT_OPTION`` when that cannot be told."""
    needed = _level_number(model, level)
    if needed is None:
        return NOT_OPTION
    for target in model.resolver.resolve(path, function, callee):
        f = model.functions.get(target)
        if f is None or not f.fallback_return:
            continue
        value = _level_number(model, f.fallback_return)
        exits = [gate_switches(model, target[0], target[1], (ref,), rs) for ref in f.fallback_gates]
        if value is None or not all(exits):
            return NOT_OPTION
        return None if value >= needed else exits[0][0]
    return NOT_OPTION


def _fallback_name_gate(model: TreeModel, path: str, key: tuple[str, str], level: str, rs: RuleSet) -> SwitchRef | None:
    """A name compared with a level, every assignment of which is such a call's value below it
    or stands under a switch off by default (`level = resolve_level()`; `if flag: level =
    Level.STRICT`): the first switch; None when one reaches it; ``NOT_OPTION`` otherwise."""
    found: list[SwitchRef] = []
    decided = False
    for function, refs in model.derived[key]:
        if len(refs) == 1 and refs[0].kind == "call" and refs[0].active_when_set:
            switch = _fallback_gate(model, path, function, refs[0].ref, level, rs)
            if switch is None:
                return None
            if switch is not NOT_OPTION:
                found.append(switch)
                decided = True
                continue
        switches = gate_switches(model, path, function, refs, rs)
        if not switches:
            return NOT_OPTION
        found.append(switches[0])
    return found[0] if decided else NOT_OPTION


def _derived_switch(model: TreeModel, path: str, key: tuple[str, str], rs: RuleSet) -> tuple[SwitchRef | None, bool]:
    """(the switch a name is truthy only under, whether that is known): the switch of the
    first of its assignments when each assignment's value is gated by one (`self.tracer =
    Tracer() if env_flag("T") else None`); known to be none when an assignment is truthy with
    no env set (`MODE_ON = getenv("M", "block") == "block"`)."""
    found: list[SwitchRef] = []
    for function, refs in model.derived[key]:
        on = bool(refs) and all(r == DEFAULT_ON for r in refs)
        if not on and any(r.kind == "name" and r.active_when_set and not r.any_of and "operand" not in r.args
                          and key in _name_keys(path, function, r.ref) for r in refs):
            continue  # made only while the name already holds (a reset): no new way to be true
        switches = [] if on else gate_switches(model, path, function, refs, rs)
        if not switches:
            # truthy where it is made: unless every call of the method making it needs a switch
            # (`def enable_x(self): self.x = True`, called only under an option a few calls up)
            setter = _setter_switch(model, path, function, rs)
            if setter is None:
                return None, on
            switches = [setter]
        found.append(switches[0])
    return (found[0] if found else None), bool(found)


def _setter_switch(model: TreeModel, path: str, function: str | None, rs: RuleSet) -> SwitchRef | None:
    """The switch every call of a method other than `__init__` needs (``fields.callers_off``)."""
    if function is None or function.endswith("__init__") or "<locals>" in function or "." not in function:
        return None
    known = model.setter_switches
    key = (path, function)
    if key not in known:
        known[key] = None  # (a cycle back here needs no switch)
        known[key] = callers_off(model, key, _call_off(model, rs))
    return known[key]


def _switch_of_result(model: TreeModel, path: str, function: str | None, name: str, rs: RuleSet) -> SwitchRef | None:
    """The switch of a local that holds what a call returns, when the function called
    returns early unless a switch is set (`bd = BreakdownLogger.get()` ... `if bd is not
    None:`, where `get` starts with `if not _ENABLED: return None`), or gives a falsy value
    at every `return` the defaults let it take; a context manager's yields are what `with
    ... as name` binds (`with self.capture_details(out) as details:`)."""
    if function is None or "." in name:
        return None
    if model.entry_gated_names is None:
        model.entry_gated_names = {f.name for f in model.functions.values() if f.entry_gates or f.returns}
    bindings = model.resolver.types.bindings
    if not bindings.binds(path, name):
        return None
    sources = bindings.get((path, f"def:{function}", name), ())
    for _, source in sources:
        if not source.startswith("c:") or source.rpartition(".")[2].rpartition(":")[2] not in model.entry_gated_names:
            continue
        for target, _ in model.resolver.resolve_how(path, function, source[2:]):
            f = model.functions.get(target)
            if f is None:
                continue
            switches = gate_switches(model, target[0], target[1], f.entry_gates, rs) if f.entry_gates else ()
            if switches:
                return switches[0]
            # (bound once: another binding may hold anything)
            switch = _false_by_default(model, target, f, rs) if f.returns and len(sources) == 1 else None
            if switch is not None:
                return switch
    return None


def resolutions_by_default(model: TreeModel, rs: RuleSet, overridden: AbstractSet[str] = frozenset()) -> list[str] | None:
    """The start-up resolutions by a call in a function that happen with the defaults: all but those
    whose call a switch keeps from running (`if envs.DECREASE_IDLE.get():
    declare_resolution(args, ..., enable_x=True)` leaves `enable_x` its declared default);
    None when that is every one (``model.options`` already counts them all). A call the
    facts do not hold is kept: whether it runs is not known."""
    kept: list[str] = []
    dropped = False
    for path, ff in model.facts.items():
        if not ff.conditional_resolutions and not ff.table_resolutions or path in overridden:
            continue  # (an architecture's own overrides the deployment does not apply: ``served``)
        calls = {site.line: site for site in ff.calls}
        # a literal stored into a table for an override is the value under its own gates too
        for line, entry, gates in (*((line, entry, ()) for line, entry in ff.conditional_resolutions), *ff.table_resolutions):
            site = calls.get(line)
            function = site.function if site is not None else None
            gates = (*(site.gates if site is not None else ()), *gates)
            if gates and gate_switches(model, path, function, gates, rs):
                dropped = True
            else:
                kept.append(entry)
    return kept if dropped else None


def first_switch(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], rs: RuleSet) -> SwitchRef | None:
    """The first switch ``gates`` stand for (``gate_switches``); None when they let the code run."""
    return next(iter(gate_switches(model, path, function, gates, rs)), None)


def _call_off(model: TreeModel, rs: RuleSet) -> CallOff:
    """``first_switch`` as the helpers that judge a call's gates in its caller ask it."""
    return lambda where, caller, gates: first_switch(model, where, caller, gates, rs)


def gate_switches(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], rs: RuleSet) -> list[SwitchRef]:
    """The switches gates stand for, each once, in order: an operand of a disjunction
    (``GateRef.any_of``) only when every operand of it stands for a switch."""
    resolved = [(gate, resolve_gate(model, path, function, gate, rs)) for gate in gates]
    failed = {gate.any_of for gate, switch in resolved if gate.any_of and switch is None}
    out: list[SwitchRef] = []
    seen: set[int] = set()
    for gate, switch in resolved:
        if switch is None or gate.any_of in failed or gate.any_of in seen:
            continue
        if gate.any_of:
            seen.add(gate.any_of)  # a disjunction stands for its first operand's switch
        if switch not in out:
            out.append(switch)
    return out


def _site_gates(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...],
                rs: RuleSet) -> tuple[tuple[SwitchRef, ...], SwitchRef | None]:
    """(switches, innermost switch) of a site's gates, computed once per gates."""
    if path in model.call_answers:
        # a call's own gates object, in a file whose answers were taken: found by identity
        # (no hash of its gates; the facts hold every such object, so no other has its id)
        calls = model.call_numbers.get(path)
        if calls is None:
            calls = model.call_numbers[path] = _call_numbers(model, path)
        n = calls.get((function, id(gates)), -1)
        if n >= 0:
            return model.taken_gates.answers[n]  # type: ignore[union-attr]
    key = (path, function, gates)
    hit = model.switch_cache.get(key)
    if hit is not None:
        return hit
    if path in model.pending_gates:
        _fill_site_gates(model, path)
        hit = model.switch_cache.get(key)
        if hit is not None:
            return hit
    cycles = model.gate_cycles
    out = gate_switches(model, path, function, gates, rs)
    if model.gate_cycles != cycles:
        model.shaped_sites.add(key)
    inner: SwitchRef | None = None
    if out:
        env = [s for s in out if s.kind in ("env", "dynamic")]
        inner = (env or out)[-1]
    model.switch_cache[key] = (tuple(out), inner)
    return tuple(out), inner


def site_switches(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], rs: RuleSet) -> list[SwitchRef]:
    """The switches gating a site: its gates', else its module's platform when that is not
    the deployment's."""
    found = list(_site_gates(model, path, function, gates, rs)[0]) if gates else []
    if not found:
        elsewhere = _module_switch(model, path, rs)
        if elsewhere is not None:
            found.append(elsewhere)
    return found


def site_switch(model: TreeModel, path: str, function: str | None, gates: tuple[GateRef, ...], rs: RuleSet) -> SwitchRef | None:
    """The innermost env switch gating a site (a level gate or flag when no env var does; the
    module's platform when nothing does)."""
    inner = _site_gates(model, path, function, gates, rs)[1] if gates else None
    return inner if inner is not None else _module_switch(model, path, rs)


def _module_switch(model: TreeModel, path: str, rs: RuleSet) -> SwitchRef | None:
    known = model.module_switches
    if path not in known:
        known[path] = module_switch(rs.defaults, path) or model.unserved.get(path)
    return known[path]


_SITE_GATES = attrgetter("function", "gates")
#: a gate's fields as a plain tuple, whose repr is the interpreter's own code
_GATE_FIELDS = attrgetter(*(f.name for f in fields(GateRef)))


def _plain(gates: tuple[GateRef, ...]) -> tuple[tuple, ...]:
    return tuple(map(_GATE_FIELDS, gates))


def gates_digest(model: TreeModel, earlier: SiteGates | None = None,
                 unchanged: AbstractSet[str] = frozenset()) -> tuple[str, dict[str, str]]:
    """Digest of everything a gate's switch depends on besides the gate and where it is
    (``_resolve_gate`` and what it calls): the resolution tables and what flows into
    parameters, the env helpers with their parameters and defaults, the names that hold an
    env value, and each file's part (``_file_gates_digest``), taken from ``earlier`` for the
    files in ``unchanged``; with the digest of each file's part.  The rules are the cache's
    own key."""
    h = hashlib.blake2b(digest_size=16)
    resolutions = model.resolutions
    assert resolutions is not None
    functions = model.functions
    helpers = sorted(model.env_helpers.items())
    for part in (
        resolutions.digest, resolutions.parameters, helpers, sorted(model.void_helpers),
        [(functions[key].params, functions[key].param_defaults) for key, _ in helpers],
        sorted(model.constants.items()),
        sorted((name, [o.value for o in found]) for name, found in model.options.declared.items()), sorted(model.options.ambiguous),
        sorted((name, sorted(map(repr, values))) for name, values in model.options.start_up.items()),
        sorted((k, repr(v)) for k, v in model.options.env.items()),
    ):
        h.update(repr(part).encode("utf-8", "surrogateescape") + b"\0")
    known = earlier.file_digests if earlier is not None else {}
    files: dict[str, str] = {}
    for path in sorted(model.facts):
        digest = known.get(path) if path in unchanged else None
        if digest is None:
            digest = _file_gates_digest(model.facts[path])
        files[path] = digest
        h.update(f"{path}\0{digest}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest(), files


def _file_gates_digest(ff: FileFacts) -> str:
    """Digest of what of one file any gate's switch may read: the gates of the values of the
    names it assigns (``FileFacts.derived``), the entry gates, returned tests and returns of its
    functions, the fields its getters return, the options it declares and stores, the state its classes keep under option
    names, its calls with their gates, and the names it imports (a gate on a name another
    module imports from it is followed through them: ``_exported``)."""
    part = ([(function, name, _plain(gates)) for function, name, gates in ff.derived], ff.falsy_names, ff.aliases,
            [(f.qualname, _plain(f.entry_gates)) for f in ff.functions if f.entry_gates],
            [(f.qualname, _plain(f.returned_test)) for f in ff.functions if f.returned_test],
            [(f.qualname, _plain(f.false_entry_gates), f.fallback_return, _plain(f.fallback_gates))
             for f in ff.functions if f.false_entry_gates or f.fallback_return],
            [(f.qualname, [(_plain(gates), what, _plain(test)) for gates, what, test in f.returns]) for f in ff.functions if f.returns],
            [(f.qualname, f.returned_field) for f in ff.functions if f.returned_field],
            # (no line: a file whose lines only moved keeps its digest)
            ff.own_state, ff.record_fields, ff.required_fields, [(a, f, _plain(g), none, value) for _, a, f, g, none, value in ff.field_stores],
            ff.keywords_passed, [(k, f) for _, k, f in ff.keywords_named], ff.table_keys, ff.table_gets,
            sorted((o.name, o.value, o.copied, o.computed_by) for o in ff.options), ff.foreign_stores,
            # what a gate on a parameter reads of the callers (``param_gates``)
            ff.passed_values, [(f.qualname, f.const_defaults, f.param_defaults) for f in ff.functions
                               if f.const_defaults or f.param_defaults], ff.wrapped,
            # the calls and their gates: which classes are built by default, and what every call
            # of a function needs (``components``, ``fields``), follow from them
            [(c.function, c.callee, _plain(c.gates)) for c in ff.calls])
    return hashlib.blake2b(repr(part).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def site_gate_keys(path: str, ff: FileFacts,
                   positions: dict[tuple[str | None, int], int] | None = None,
                   ) -> dict[tuple[str, str | None, tuple[GateRef, ...]], int]:
    """The ``TreeModel.switch_cache`` keys of a file's sites, each once and numbered, in an
    order that depends on its facts alone: calls, env reads, messages built into locals, gated
    effects.  ``positions``: filled with the number of each (function, id of gates) of them."""
    # sites share gate tuples: those seen are skipped by identity before the keys hash them
    by_identity = {(function, id(gates)): gates for rows in (ff.calls, ff.env_reads, ff.built_messages)
                   for function, gates in map(_SITE_GATES, rows) if gates}
    keys: dict[tuple[str, str | None, tuple[GateRef, ...]], int] = {}
    for (function, ident), gates in by_identity.items():
        n = keys.setdefault((path, function, gates), len(keys))
        if positions is not None:
            positions[(function, ident)] = n
    for _, function, gates, _ in ff.gated_effects:
        if gates:
            keys.setdefault((path, function, gates), len(keys))
    return keys


def _take_site_gates(model: TreeModel, gates: SiteGates, unchanged: AbstractSet[str]) -> None:
    """Take the answers of ``gates`` for the files in ``unchanged``: each file's go into
    ``switch_cache`` when one of its sites is first asked (``_fill_site_gates``); the answers
    of its calls and its ``gate_rows`` are taken as they are."""
    model.taken_gates = gates
    pending = model.pending_gates
    for path in unchanged:
        row = gates.files.get(path)
        if row is None or path not in model.facts:
            continue
        pending[path] = row
        calls = gates.calls.get(path)
        if calls is not None:
            answers = array("i")
            answers.frombytes(calls)
            if len(answers) == len(model.facts[path].calls):
                model.call_answers[path] = answers
        rows = gates.rows.get(path)
        if rows is not None:
            model.gate_rows[path] = rows


def _call_numbers(model: TreeModel, path: str) -> dict[tuple[str | None, int], int]:
    """(function, id of gates) -> the taken answer's number, of each call of ``path`` with gates."""
    return {(function, id(gates)): n for (function, gates), n in zip(map(_SITE_GATES, model.facts[path].calls),
                                                                      model.call_answers[path]) if gates}


def _fill_site_gates(model: TreeModel, path: str) -> None:
    """Put the taken answers of ``path``'s sites into ``switch_cache``."""
    row = model.pending_gates.pop(path)
    keys = site_gate_keys(path, model.facts[path])
    if len(keys) != len(row):
        return
    cache = model.switch_cache
    answers = model.taken_gates.answers  # type: ignore[union-attr]
    for key, n in zip(keys, row):
        if n >= 0:
            cache[key] = answers[n]


def site_gates(model: TreeModel, earlier: SiteGates | None = None,
               unchanged: AbstractSet[str] = frozenset()) -> SiteGates:
    """The ``SiteGates`` of ``model`` as asked so far (the rows of ``earlier`` for the files
    in ``unchanged`` when its digest is this model's), but for the answers a gate cycle
    shaped (``TreeModel.shaped_sites``: they may depend on the order gates were asked in);
    a file's ``gate_rows`` only when none of its answers was shaped."""
    carried = earlier is not None and earlier.digest == model.gates_digest
    table: list[tuple[tuple[SwitchRef, ...], SwitchRef | None]] = list(earlier.answers) if carried else []  # type: ignore[union-attr]
    number = {answer: n for n, answer in enumerate(table)}
    cache = model.switch_cache
    shaped = model.shaped_sites
    files: dict[str, tuple[int, ...]] = {}
    calls: dict[str, bytes] = {}
    rows: dict[str, tuple] = {}
    for path, ff in model.facts.items():
        if carried and path in unchanged and path in earlier.files:  # type: ignore[union-attr]
            files[path] = earlier.files[path]  # type: ignore[union-attr]
            tables: tuple[tuple[dict[str, Any], dict[str, Any]], ...] = ((calls, earlier.calls), (rows, earlier.rows))  # type: ignore[union-attr]
            for kept, theirs in tables:
                if path in theirs:
                    kept[path] = theirs[path]
            continue
        numbers = []
        positions: dict[tuple[str | None, int], int] = {}
        none_shaped = True
        for key in site_gate_keys(path, ff, positions):
            answer = cache.get(key)
            if answer is None or key in shaped:
                none_shaped = none_shaped and key not in shaped
                numbers.append(-1)
                continue
            n = number.get(answer)
            if n is None:
                n = number[answer] = len(table)
                table.append(answer)
            numbers.append(n)
        files[path] = tuple(numbers)
        calls[path] = array("i", [numbers[positions[(function, id(gates))]] if gates else -1
                                  for function, gates in map(_SITE_GATES, ff.calls)]).tobytes()
        if none_shaped and path in model.gate_rows:
            rows[path] = model.gate_rows[path]
    uses: dict[str, dict[str, tuple]] = {}
    for (path, var), found in model.use_rows.items():
        uses.setdefault(path, {})[var] = found
    return SiteGates(model.gates_digest, tuple(table), files, model.file_gates_digests, calls, rows, uses)

