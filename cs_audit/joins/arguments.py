"""What a call hands the parameters its callee tests, edge by edge.

`release(req, checkpoint=False)` from an abort path and `release(req, checkpoint=True)` from
the finish path enter one function; only the second runs what `if checkpoint:` guards. So
frequency follows each call's literal arguments down the chain: a function is entered in a
*context* (the literals its tested parameters hold: `checkpoint=False`), and in it a call or
a site under a test those literals keep off does not run (``joins.reach`` propagates the
contexts; ``joins.runs`` asks which contexts open a site). A parameter's own default counts
as passed when a call cannot reach it; a caller's parameter handed on keeps the caller's
literal. ``joins.param_gates`` settles a test by every caller in the tree; this settles it by
the calls a hot root's chains pass through."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

from cs_audit.joins.defaults import NOT_OPTION, value_gate
from cs_audit.joins.host_data import DIRECT_CALLS
from cs_audit.joins.joined import CallEdge
from cs_audit.joins.joined import JoinedModel as TreeModel
from cs_audit.joins.named_calls import is_unresolved
from cs_audit.joins.param_gates import call_value, none_reaches, passed_table
from cs_audit.model import PARAM_FRESH, PARAM_TESTED, FileFacts, FuncKey, GateRef, closure_of

#: the literals a function's tested parameters hold in one way of entering it, by parameter
#: (an empty context: nothing known, every test open)
Context = frozenset[tuple[str, str]]
EMPTY: Context = frozenset()


@dataclass(slots=True)
class ArgumentTests:
    """The parameter tests of the tree's functions, and what each call hands them."""

    model: TreeModel
    #: function -> the parameters its sites' gates test, which a literal can settle
    tested: dict[FuncKey, frozenset[str]]
    #: function -> the gates of each of its sites holding such a test (a call, a read, a message)
    site_gates: dict[FuncKey, list[tuple[GateRef, ...]]]
    #: (path, `function::name`) of the parameters rebound before a test only where they hold
    #: (`checkpoint = checkpoint and ok`; past `if hits is None: return`): false whenever the
    #: argument is
    conjoined: frozenset[tuple[str, str]]
    _closed: dict[tuple[FuncKey, Context], int] = field(default_factory=dict)
    _entered: dict[tuple[int, Context], Context] = field(default_factory=dict)

    def entered(self, edge: CallEdge, callee: FuncKey, caller_context: Context) -> Context:
        """The context ``edge`` enters ``callee`` in: the literal each tested parameter gets."""
        # the joins ask each edge once per context of its caller, and again when a frequency rises
        found = self._entered.get((id(edge), caller_context))
        if found is None:
            found = self._entered[(id(edge), caller_context)] = self._worked_out(edge, callee, caller_context)
        return found

    def _worked_out(self, edge: CallEdge, callee: FuncKey, caller_context: Context) -> Context:
        params = self.tested.get(callee)
        function = self.model.functions.get(callee)
        if not params or function is None or edge.how not in DIRECT_CALLS:
            return EMPTY
        site = edge.site
        values = passed_table(self.model).get((edge.path, site.line, site.end_line, site.callee.rpartition(".")[2]))
        defaults = dict(function.const_defaults)
        bound: list[tuple[str, str]] = []
        for param in sorted(params):
            value = call_value(values, function, param, edge.how, defaults.get(param), site.code)
            kind, _, text = (value or "").partition(":")
            if kind == "lit":
                bound.append((param, text))
            elif kind == "param":
                handed = next((v for p, v in caller_context if p == text), None)
                if handed is not None:
                    bound.append((param, handed))
        return frozenset(bound)

    def closes(self, key: FuncKey, context: Context, gates: Iterable[GateRef]) -> bool:
        """Whether ``context`` keeps code of ``key`` under ``gates`` from running."""
        return self.closing(key, context, gates) is not None

    def closing(self, key: FuncKey, context: Context, gates: Iterable[GateRef]) -> str | None:
        """The parameter whose literal in ``context`` keeps code of ``key`` under ``gates``
        from running; None when none does."""
        if not context:
            return None
        held = dict(context)
        for gate in gates:
            param = _tested_param(gate)
            if param is None or param not in held:
                continue
            value = ast.literal_eval(held[param])
            if PARAM_FRESH not in gate.args and (key[0], f"{key[1]}::{param}") in self.model.derived:
                # rebound before the test: only `x = x and ...` keeps a false value false
                if (key[0], f"{key[1]}::{param}") not in self.conjoined or value or not gate.active_when_set \
                        or any(a.startswith("cmp:") for a in gate.args):
                    continue
                return param
            switch = value_gate(param, value, gate)
            if switch is not None and switch is not NOT_OPTION:
                return param
        return None

    def closed_count(self, key: FuncKey, context: Context) -> int:
        """How many of ``key``'s tested sites ``context`` keeps off (0: it opens them all)."""
        if not context:
            return 0
        found = self._closed.get((key, context))
        if found is None:
            found = self._closed[(key, context)] = sum(self.closes(key, context, gates) for gates in self.site_gates.get(key, ()))
        return found


def _tested_param(gate: GateRef) -> str | None:
    """The parameter ``gate`` tests on its own (not in a disjunction, not a closure's)."""
    if gate.kind != "name" or PARAM_TESTED not in gate.args or gate.any_of or "." in gate.ref or closure_of(gate) is not None:
        return None
    return gate.ref


def argument_tests(model: TreeModel) -> ArgumentTests:
    """The parameter tests of every function of ``model``'s facts."""
    tested: dict[FuncKey, set[str]] = {}
    site_gates: dict[FuncKey, list[tuple[GateRef, ...]]] = {}
    functions = model.functions
    for path, ff in model.facts.items():
        for gates, function in _gated_sites(ff):
            if function is None:
                continue
            params = [p for p in map(_tested_param, gates) if p is not None]
            f = functions.get((path, function))
            params = [p for p in params if f is not None and p in f.params]
            if params:
                tested.setdefault((path, function), set()).update(params)
                site_gates.setdefault((path, function), []).append(gates)
    for key, names in tested.items():
        # a call the graph left unresolved may be this function's and pass anything
        if is_unresolved(model, key[1].rpartition(".")[2]):
            f = functions[key]
            names.difference_update([p for p in names if not none_reaches(model, f, p)])
    conjoined = frozenset(key for key, assignments in model.derived.items() if "::" in key[1]
                          and all(_ands_in(key[1].rpartition("::")[2], gates) for _, gates in assignments))
    return ArgumentTests(model, {k: frozenset(v) for k, v in tested.items() if v}, site_gates, conjoined)


def _ands_in(param: str, gates: tuple[GateRef, ...]) -> bool:
    return any(_tested_param(g) == param and g.active_when_set and not any(a.startswith("cmp:") for a in g.args) for g in gates)


def _gated_sites(ff: FileFacts) -> Iterable[tuple[tuple[GateRef, ...], str | None]]:
    for read in ff.env_reads:
        if read.gates:
            yield read.gates, read.function
    for call in ff.calls:
        if call.gates:
            yield call.gates, call.function
    for message in ff.built_messages:
        if message.gates:
            yield message.gates, message.function

