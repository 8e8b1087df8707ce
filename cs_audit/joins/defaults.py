"""What a test decides with the engine's defaults: the options the tree declares
(``extract.options``) and the deployment audited (``rules/defaults.yaml`` and the project's
``deployment``: its platform, the options it sets).

A gate on an option whose value in the deployment turns the guarded code off stands for a
switch of kind ``option`` named by the setting that turns it on (`enable_eplb`,
`platform=rocm`, `kv_cache_dtype=='fp8'`); a gate the deployment's values keep open stands for
no switch; anything else is no option, and the other gate rules decide it."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from cs_audit.model import REQUEST_FIELD, GateRef, OptionDefault, SwitchRef
from cs_audit.ruleset import CONTROL_REQUESTS, Defaults

#: ``option_gate``'s answer for a gate that tests no option or platform
NOT_OPTION = SwitchRef("dynamic", "<not an option>")
_UNKNOWN = object()


@dataclass
class OptionTable:
    """The options of a tree by name, with the default every declaration agrees on."""

    #: name -> its literal declarations (copies of another declaration left out)
    declared: dict[str, list[OptionDefault]] = field(default_factory=dict)
    #: the option names some class also sets on its own instances: tested only on settings
    ambiguous: frozenset[str] = frozenset()
    #: env var -> the value its registry's getter gives when it is unset (``registry_defaults``)
    env: dict[str, object] = field(default_factory=dict)
    #: option -> the literals start-up may set it to instead of its default (every value it is
    #: worked out to at start-up is such a literal)
    start_up: dict[str, frozenset] = field(default_factory=dict)
    #: option -> the function, by its dotted path, every declaration computes it with
    computed: dict[str, str] = field(default_factory=dict)
    _values: dict[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, options: Iterable[OptionDefault], stored: Iterable[str] = (), own: Iterable[str] = ()) -> OptionTable:
        """The table of ``options``, less those some code assigns on their owner (``stored``:
        `self.scheduler_config.async_scheduling = False`): their value is worked out at run
        time; an option some class sets on itself (``own``) is ambiguous."""
        stored = tuple(stored)
        worked_out = {name for name in stored if "=" not in name}
        # set to a literal at start-up (`declare_resolution(args, ..., enable_x=False)`): the
        # default still runs when every such literal is the default
        set_to: dict[str, set[str]] = defaultdict(set)
        for entry in stored:
            if "=" in entry:
                name, _, literal = entry.partition("=")
                set_to[name].add(literal)
        declared: dict[str, list[OptionDefault]] = defaultdict(list)
        for option in options:
            if not option.copied and option.name not in worked_out:
                declared[option.name].append(option)
        start_up: dict[str, frozenset] = {}
        for name, literals in set_to.items():
            if name not in declared:
                continue
            default = _agreed(declared[name])
            if _all_the_default(literals, default):
                continue
            # (an env var start-up sets is no longer what the registry gives when it is unset)
            env_var = any(o.owner == "env" for o in declared[name])
            values = _literal_values(literals, default) if default is not _UNKNOWN and (
                default is None or not env_var) else None
            if values is None:
                del declared[name]
            else:
                # the default until start-up sets one of these: each may be the value
                start_up[name] = values
        owned = set(own)
        env = {name: _agreed(found) for name, found in declared.items() if any(o.owner == "env" for o in found)}
        computed = {name: found[0].computed_by for name, found in declared.items()
                    if found[0].computed_by and all(o.computed_by == found[0].computed_by for o in found)}
        return cls({name: sorted(found, key=lambda o: (o.path, o.line)) for name, found in declared.items()
                    if not any(o.owner == "env" for o in found)},
                   frozenset(name for name in declared if name in owned), {k: v for k, v in env.items() if v is not _UNKNOWN},
                   start_up, computed)

    def default(self, name: str) -> object:
        """The default of ``name`` when every declaration states the same one; ``_UNKNOWN``
        when none does, one is not a literal, or two disagree (two classes' `enabled`)."""
        value = self._values.get(name, _UNKNOWN)
        if value is _UNKNOWN and name not in self._values:
            value = self._values[name] = _agreed(self.declared.get(name, ()))
        return value

    def where(self, name: str) -> OptionDefault | None:
        """The first declaration of ``name`` (what a report cites)."""
        found = self.declared.get(name)
        return found[0] if found else None


def _literal_values(literals: set[str], default: object) -> frozenset | None:
    """The values of ``literals`` other than ``default``; None when one is no hashable literal."""
    values = set()
    for literal in literals:
        try:
            value = ast.literal_eval(literal)
            hash(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
        if value != default or type(value) is not type(default):
            values.add(value)
    return frozenset(values)


def _all_the_default(literals: set[str], default: object) -> bool:
    """Whether every literal an option is set to at start-up is its default (``_UNKNOWN``: no)."""
    if default is _UNKNOWN:
        return False
    for literal in literals:
        try:
            value = ast.literal_eval(literal)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        if value != default or type(value) is not type(default):
            return False
    return True


def _agreed(declarations: Iterable[OptionDefault]) -> object:
    values = set()
    for option in declarations:
        if not option.value:
            return _UNKNOWN
        values.add(option.value)
    if len(values) != 1:
        return _UNKNOWN
    try:
        return ast.literal_eval(values.pop())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


def _comparison(gate: GateRef) -> tuple[str, object] | None:
    """(the operator, the literal) under which a compared gate's code runs: ``==``, ``!=``,
    or an ordering with a number."""
    for arg in gate.args:
        if arg.startswith("cmp:"):
            op, _, text = arg[4:].partition(":")
            try:
                return op, ast.literal_eval(text)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
    return None


_ORDERINGS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _platform_gate(platform: str, active: bool, defaults: Defaults) -> SwitchRef | None:
    on = platform == defaults.platform
    if on == active:
        return None
    return SwitchRef("option", f"platform={platform}" if active else f"platform!={platform}")


def _feature_gate(table: OptionTable, defaults: Defaults, gate: GateRef) -> SwitchRef | None:
    """A test named for an optional feature (`if batch.contains_mm_inputs():` holds only with
    it, `if not self.is_generation:` only without it): the feature's switch when the guarded
    code needs the feature on and the deployment leaves it off; ``NOT_OPTION`` for any other
    test, and for a declared option, whose value decides."""
    found = defaults.feature_test(gate.ref) if "operand" not in gate.args else None
    name = gate.ref.rsplit(".", 1)[-1]
    if found is None or gate.kind == "name" and (name in defaults.options_named or table.default(name) is not _UNKNOWN):
        return NOT_OPTION
    feature, holds_with_it = found
    needs_it = gate.active_when_set == holds_with_it
    return SwitchRef("option", f"feature={feature}") if needs_it and feature not in defaults.features else None


def option_gate(table: OptionTable, defaults: Defaults | None, gate: GateRef, typed: bool = False) -> SwitchRef | None:
    """The option switch ``gate`` stands for in the deployment; None when the deployment's
    values let the guarded code run; ``NOT_OPTION`` when the gate tests no option.
    ``typed``: the receiver is known to be none of the classes that make the name ambiguous."""
    if defaults is None or gate.kind not in ("name", "call") or not gate.ref:
        return NOT_OPTION
    if REQUEST_FIELD in gate.args:
        # a request's field copied into engine state: set only when such a request comes
        return None if CONTROL_REQUESTS in defaults.features else SwitchRef("option", f"feature={CONTROL_REQUESTS}")
    compared = _comparison(gate)
    if gate.kind == "call":
        platform = defaults.platform_of(gate.ref, called=True)
        if platform is not None and "operand" not in gate.args:
            return _platform_gate(platform, gate.active_when_set, defaults)
        return _feature_gate(table, defaults, gate)
    platform = defaults.platform_of(gate.ref, called=False)
    if platform is not None and "operand" not in gate.args:
        return _platform_gate(platform, gate.active_when_set, defaults)
    feature = _feature_gate(table, defaults, gate)
    if feature is not NOT_OPTION:
        return feature
    if "." not in gate.ref:
        return NOT_OPTION  # a local or module name: what is assigned to it decides
    receiver, name = gate.ref.rsplit(".", 1)
    if receiver == "self" or "operand" in gate.args and compared is None:
        return NOT_OPTION  # an attribute of the object itself: its assignments decide
    settings = settings_receiver(defaults, receiver)
    if name in table.ambiguous and not settings and not typed:
        return NOT_OPTION  # a name other classes use for their own state, on a receiver that is no settings
    stated = dict(defaults.options)
    if compared is not None and compared[0] in ("==", "!=") and name not in stated and settings:
        # (a tensor's or a module's `.device` is where its data is, not the platform)
        device = defaults.device_test(name, compared[1])
        if device is not None:
            # the device the engine runs on: the deployment's platform decides
            op = compared[0]
            runs = device[1] == (op == "==")
            return None if runs else SwitchRef("option", f"platform{'!=' if op == '!=' else '='}{device[0]}")
    value = stated[name] if name in stated else table.default(name)
    if value is _UNKNOWN:
        return NOT_OPTION
    also = table.start_up.get(name) if name not in stated else None
    if also:
        # unset, or one of the literals start-up sets: judged when every value agrees
        answers = {value_gate(name, v, gate, start_up=True) for v in (value, *also)}
        return answers.pop() if len(answers) == 1 else NOT_OPTION
    return value_gate(name, value, gate)


def option_number(table: OptionTable, defaults: Defaults | None, ref: str) -> int | None:
    """The number an option holds in the deployment, read as ``ref`` (`cfg.log_interval`, or
    `self.log_interval` copied from it: a class that keeps no state of its own under the name);
    None when ``ref`` names no option with a known number."""
    receiver, _, name = ref.rpartition(".")
    if defaults is None or not receiver:
        return None  # a local or a parameter: what it is assigned decides
    if name in table.ambiguous and not settings_receiver(defaults, receiver) or name in table.start_up:
        return None
    stated = dict(defaults.options)
    value = stated[name] if name in stated else table.default(name)
    return value if type(value) is int else None


def settings_receiver(defaults: Defaults, receiver: str) -> bool:
    """Whether ``receiver`` looks like settings: its last name says so (`cfg`, `server_args`),
    or it holds what a getter returns (`get_exec().moe`)."""
    return bool(defaults.receivers.search(receiver.rsplit(".", 1)[-1])) or "()" in receiver


def value_gate(name: str, value: object, gate: GateRef, start_up: bool = False) -> SwitchRef | None:
    """The switch named ``name`` when ``value`` keeps the code ``gate`` guards off; None when
    it lets it run; ``NOT_OPTION`` when the test cannot be judged on it. ``start_up``: the
    values start-up sets the option to are known, so None is one value among them."""
    compared = _comparison(gate)
    if compared is not None:
        op, literal = compared
        if value is None and literal is not None and not start_up:
            return NOT_OPTION  # unset until start-up fills it in (`tp_rank == 0`): no default to judge by
        if op in _ORDERINGS:
            if type(value) not in (int, float) or type(value) is bool:
                return NOT_OPTION
            holds = _ORDERINGS[op](value, literal)
            spelled = f"{name}{op}{literal!r}"
        elif op in ("in", "not in") and type(literal) is tuple:
            holds = (value in literal) == (op == "in")
            spelled = f"{name} {op} {literal!r}"
        else:
            holds = (value == literal) == (op == "==")
            spelled = f"{name}{op}{literal!r}"
    else:
        holds = bool(value) == gate.active_when_set
        spelled = name if gate.active_when_set else f"{name}=False"
    return None if holds else SwitchRef("option", spelled)


def wrapped_option(table: OptionTable, defaults: Defaults | None, reads: list[str]) -> tuple[str, object] | None:
    """(the option, its value in the deployment) when every assignment of a name wraps the
    same read of one option (``reads``: `Mode(cfg.mode)` gives `cfg.mode`); None otherwise."""
    if defaults is None or not reads or len(set(reads)) != 1 or not reads[0] or "." not in reads[0] or reads[0].endswith("()"):
        return None  # (`pkg.get_backend()`: a getter's value, ``gates._field_predicate``)
    receiver, name = reads[0].rsplit(".", 1)
    if receiver == "self" or name in table.ambiguous and not settings_receiver(defaults, receiver) or name in table.start_up:
        return None
    stated = dict(defaults.options)
    return name, stated[name] if name in stated else table.default(name)


def predicate_gate(table: OptionTable, defaults: Defaults | None, reads: list[str], method: str,
                   active: bool) -> SwitchRef | None:
    """A test of `x.<method>()` where every assignment to `x` wraps one of ``reads``
    (`Algorithm.from_string(args.algorithm)`): when they all wrap one option left unset by
    default, the unset predicates (`is_none`) hold and every other `is_*` does not; the switch
    is that option when that keeps the code off.  ``NOT_OPTION`` otherwise."""
    pattern = defaults.unset_predicates if defaults is not None else None
    found = wrapped_option(table, defaults, reads) if pattern is not None else None
    if pattern is None or found is None:
        return NOT_OPTION
    name, value = found
    if value is not None:
        return NOT_OPTION  # set, or unknown: which predicate holds depends on the value
    holds = bool(pattern.search(method)) == active
    return None if holds else SwitchRef("option", name)


def member_comparison(gate: GateRef) -> tuple[str, str] | None:
    """(`==` or `!=`, the member's dotted name) under which a name compared with an enum's
    member (`self.mode != Mode.NULL`) lets the guarded code run."""
    for arg in gate.args:
        if arg.startswith("cmp:") and ":member:" in arg:
            op, _, member = arg[4:].partition(":member:")
            return op, member
    return None


def feature_member_gate(defaults: Defaults, op: str, member: str) -> SwitchRef | None:
    """A comparison (``op``, `==` or `!=` as the guarded code needs it) with an enum member
    named for an optional feature (`ForwardMode.TARGET_VERIFY`, whose predicate
    `is_target_verify` is a feature test): the feature's switch when the code needs the
    comparison to hold only with it, and the deployment leaves it off; None when it holds;
    ``NOT_OPTION`` for a member no feature names."""
    found = defaults.feature_test("is_" + member.rpartition(".")[2].lower())
    if found is None:
        return NOT_OPTION
    feature, holds_with_it = found
    needs_it = (op == "==") == holds_with_it
    return SwitchRef("option", f"feature={feature}") if needs_it and feature not in defaults.features else None


def member_gate(table: OptionTable, defaults: Defaults | None, reads: list[str], op: str, member_value: str) -> SwitchRef | None:
    """A name every assignment of which wraps one option (`self.mode = Mode(cfg.mode)`),
    compared (``op``) with a member holding ``member_value``: as the enum is looked up by the
    option's value, the switch of that option when its value keeps the code off, None when it
    lets it run; ``NOT_OPTION`` when the option or its value is not known."""
    found = wrapped_option(table, defaults, reads)
    if found is None or not isinstance(found[1], str):
        return NOT_OPTION
    name, value = found
    holds = (value == member_value) == (op == "==")
    return None if holds else SwitchRef("option", f"{name}{op}{member_value!r}")


def option_name(setting: str) -> str:
    """The option the name of a switch of kind ``option`` sets (`enable_eplb` of `enable_eplb=False`)."""
    name = setting
    for sep in ("!=", "==", "="):
        name = name.split(sep, 1)[0]
    return name


def module_switch(defaults: Defaults | None, path: str) -> SwitchRef | None:
    """The platform switch of a module written for another platform than the deployment's."""
    platform = defaults.module_platform(path) if defaults is not None else None
    return SwitchRef("option", f"platform={platform}") if platform is not None else None


def feature_switch(defaults: Defaults | None, path: str, class_name: str | None = None) -> SwitchRef | None:
    """The feature switch of a module (or a class of it) written for an optional feature the
    deployment leaves off."""
    feature = defaults.module_feature(path, class_name) if defaults is not None else None
    return SwitchRef("option", f"feature={feature}") if feature is not None else None


def registry_env_gate(table: OptionTable, gate: GateRef) -> SwitchRef | None:
    """A test of a registry read (`if envs.X:`, `if envs.X.get():`) with the value the
    registry gives the unset variable: no switch when that lets the code run, the env switch
    when it keeps it off; ``NOT_OPTION`` when the default is not known or a level decides."""
    if gate.kind != "env" or "registry" not in gate.args or gate.level or gate.ref not in table.env:
        return NOT_OPTION
    runs = bool(table.env[gate.ref]) == gate.active_when_set
    return None if runs else SwitchRef("env", gate.ref)
