"""The gates of the ``ast`` index: each `if`/`while` test and the rest of a block after `if C:
return` becomes ``GateRef``s, worked out when a statement below records them; and the
assignments to names a gate tests (``derived``, ``wrapped``, ``path_values``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from cs_audit.extract.scopes import Scope, dotted, raw_dotted, rebound_after
from cs_audit.extract.state import IndexState
from cs_audit.extract.values import head_names, is_built_path, wrapped_read
from cs_audit.model import (
    CLASS_TESTED,
    DEFAULT_ON,
    DEREFERENCED,
    PARAM_FRESH,
    PARAM_TESTED,
    REQUEST_FIELD,
    SERVED_ARCHITECTURE,
    GateRef,
    as_operand,
    closure_arg,
)
from cs_audit.pyast import is_none
from cs_audit.ruleset import RuleSet

_MAX_GATE_REFS = 8

#: `self.pool: Optional[HostPool] = None`, `self.pool: "P | None" = None` (``GateReader.declared_none``)
_DECLARED_NONE = re.compile(r"\bself\.(\w+)\s*:[^=\n]{1,200}=\s*None\b")
#: statements whose header alone is sure to run (``_dereferenced``)
_HEADERS = {ast.If: "test", ast.While: "test", ast.For: "iter", ast.AsyncFor: "iter"}
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
#: what None itself has (`self.pool.__class__`): reading one raises nothing
_NONE_ATTRIBUTES = frozenset(dir(None))


#: a class's name, and a model class's (`LlamaForCausalLM`, `Qwen2VLForConditionalGeneration`)
_CLASS_NAME = re.compile(r"[A-Z]\w{0,80}")
_MODEL_CLASS = re.compile(r"[A-Za-z0-9]For[A-Z]")
#: longest collection of names a test of the served architecture is judged against
_MAX_STRINGS = 64


def _strings(node: ast.expr, known: dict[str, tuple[str, ...]], fixed: bool = False) -> tuple[str, ...] | None:
    """The strings a literal collection holds (`{"A", "B"}`, `frozenset({...})`, `("A",)`), or
    the module name ``known`` binds to one; None for anything else. ``fixed``: only a collection
    no call can change (a tuple, a frozenset), as a module's name must be."""
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "tuple")
            and len(node.args) == 1 and not node.keywords):
        node = node.args[0]
        fixed = False  # (whatever the literal inside)
    if fixed and not isinstance(node, ast.Tuple):
        return None
    if not isinstance(node, (ast.Set, ast.List, ast.Tuple)) or not 0 < len(node.elts) <= _MAX_STRINGS:
        return None
    values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return tuple(values) if len(values) == len(node.elts) else None


def _dereferenced(stmt: ast.stmt, names: frozenset[str]) -> list[str]:
    """The attributes of ``names`` whose value ``stmt`` reads an attribute or an item of on
    every run (`self.pool.size`, `self.pool[k]`): not in a branch of `a if c else b`, after the
    first operand of `and`/`or`, in a lambda or past a comprehension's first iterable, nor in a
    compound statement's body."""
    if not names:
        return []
    cls = stmt.__class__
    roots: list[ast.AST]
    if cls in (ast.Assign, ast.AnnAssign, ast.AugAssign):
        roots = [stmt.value, *(stmt.targets if cls is ast.Assign else [stmt.target])]  # type: ignore[attr-defined]
    elif cls in (ast.Expr, ast.Return):
        roots = [stmt.value]  # type: ignore[attr-defined]
    elif cls in _HEADERS:
        roots = [getattr(stmt, _HEADERS[cls])]
    elif cls in (ast.With, ast.AsyncWith):
        roots = [item.context_expr for item in stmt.items]  # type: ignore[attr-defined]
    else:
        return []
    found: list[str] = []
    work = [root for root in roots if root is not None]
    while work:
        node = work.pop()
        kind = node.__class__
        if kind is ast.Attribute or kind is ast.Subscript:
            value = node.value  # type: ignore[attr-defined]
            if (value.__class__ is ast.Attribute and value.value.__class__ is ast.Name and value.value.id == "self"
                    and value.attr in names and value.attr not in found
                    and (kind is ast.Subscript or node.attr not in _NONE_ATTRIBUTES)):  # type: ignore[attr-defined]
                found.append(value.attr)
            work.append(value)
            if kind is ast.Subscript:
                work.append(node.slice)  # type: ignore[attr-defined]
        elif kind is ast.IfExp:
            work.append(node.test)  # type: ignore[attr-defined]
        elif kind is ast.BoolOp:
            work.append(node.values[0])  # type: ignore[attr-defined]
        elif kind is ast.Compare:
            # `a < b < c` reads c only when a < b holds
            work.extend((node.left, node.comparators[0]))  # type: ignore[attr-defined]
        elif kind in _COMPREHENSIONS:
            work.append(node.generators[0].iter)  # type: ignore[attr-defined]
        elif kind is not ast.Lambda:
            work.extend(ast.iter_child_nodes(node))
    return found


CONVERSIONS = frozenset({"int", "float", "bool", "str", "len", "abs"})


def _compared(gate: GateRef, marker: tuple[str, ...]) -> GateRef:
    """A name gate as the operand of a comparison: with the literal it is compared with
    (``marker``), if any; a parameter compared with anything else is no longer tested for
    what its callers pass alone."""
    args = as_operand(gate).args
    if not marker and PARAM_TESTED in args:
        args = tuple(a for a in args if a not in (PARAM_TESTED, PARAM_FRESH))
    return replace(gate, args=(*args, *marker))


def _enum_member(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """`Mode.NULL`, a member of a class named in CapWords spelled in capitals: its dotted
    name; None for any other value."""
    if node.__class__ is not ast.Attribute or node.value.__class__ not in (ast.Name, ast.Attribute):
        return None
    name = dotted(node, aliases)
    if not name or "." not in name:
        return None
    owner, _, member = name.rpartition(".")
    cls = owner.rpartition(".")[2]
    return name if cls[:1].isupper() and not cls.isupper() and member.isupper() else None


def _constants(node: ast.expr) -> tuple[object, ...] | None:
    """The values of a short tuple, list or set written as literals (`("a", "b")`); None for
    any other container."""
    if not isinstance(node, (ast.Tuple, ast.List, ast.Set)) or not 0 < len(node.elts) <= 8:
        return None
    values = []
    for element in node.elts:
        if not isinstance(element, ast.Constant) or not isinstance(element.value, (str, int, float, bool, type(None))):
            return None
        values.append(element.value)
    text = repr(tuple(values))
    return tuple(values) if len(text) <= 120 else None


def _falsy(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not node.value


_MIRRORED: dict[type, type] = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
_COMPARE = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}


def _compare_default(default: str | None, conversion: str, op: ast.cmpop, right: ast.expr) -> bool | None:
    """Whether ``<env value> op right`` holds when the variable is unset (its value is
    ``default``, converted), or None when that cannot be told from the code."""
    if isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        if not all(isinstance(e, ast.Constant) for e in right.elts):
            return None
        other: object = tuple(e.value for e in right.elts)  # type: ignore[attr-defined]
    elif isinstance(right, ast.Constant):
        other = right.value
    elif isinstance(right, ast.UnaryOp) and isinstance(right.op, ast.USub) and isinstance(right.operand, ast.Constant):
        other = -right.operand.value if isinstance(right.operand.value, (int, float)) else None
    else:
        return None
    value: object = default
    if default is not None and conversion in ("int", "float"):
        try:
            value = int(default) if conversion == "int" else float(default)
        except ValueError:
            return None
    elif conversion not in ("", "str"):
        return None
    compare = _COMPARE.get(op.__class__)
    if compare is None:
        return None
    try:
        return bool(compare(value, other))
    except TypeError:
        return None


def _arg_text(node: ast.expr) -> str:
    """A call gate's argument as ``GateRef.args`` keeps it: a string or an int literal (a
    switch name, a level: `_diag("X", 2)`), "" for anything else."""
    if isinstance(node, ast.Constant) and (isinstance(node.value, str) or type(node.value) is int):
        return str(node.value)
    return ""


def _keywords_passed(call: ast.Call) -> tuple[str, ...]:
    """`kw:<name>` of each keyword a call gate passes (`kw:**` for `**kw`, `kw:*` for `*args`),
    after its literal positional arguments in ``GateRef.args``: a default given so is not the
    callee's own."""
    starred = ("kw:*",) if any(a.__class__ is ast.Starred for a in call.args) else ()
    return tuple(sorted((*starred, *(f"kw:{k.arg or '**'}" for k in call.keywords))))


def _classes_text(node: ast.expr) -> str:
    """`C` or `(A, B)` as ``CLASS_TESTED`` and their last names; "" for anything else."""
    elements = node.elts if isinstance(node, ast.Tuple) else [node]
    names = [raw_dotted(e) if isinstance(e, (ast.Name, ast.Attribute)) else None for e in elements]
    if not names or not all(names) or len(names) > 8:
        return ""
    return CLASS_TESTED + "|".join(n.rpartition(".")[2] for n in names if n)


def level_of(op: ast.cmpop, right: ast.expr, active: bool, params: tuple[str, ...],
             aliases: dict[str, str] | None = None) -> str:
    """``GateRef.level`` of an operand compared by ``op`` with ``right``, for the code that
    runs when the comparison is ``active`` (holds) or not: the least value it runs at, when
    it runs for the values from some level up (`>= 2`, `> 1`, `== 2`, or `< 3` failing; a
    class's constant, `>= Level.WARN`, as `name:` its dotted name, for the joins to look up)."""
    if isinstance(right, ast.Constant) and type(right.value) is int:
        base = str(right.value)
    elif isinstance(right, ast.Constant) and isinstance(right.value, str) and right.value.isdigit() and isinstance(op, ast.Eq):
        base = str(int(right.value))  # `getenv("X", "0") == "2"`: the string of a level
    elif isinstance(right, ast.Name) and right.id in params:
        base = f"param:{right.id}"
    elif (aliases is not None and isinstance(right, ast.Attribute) and isinstance(op, (ast.GtE, ast.Gt, ast.Lt, ast.LtE))
          and (name := dotted(right, aliases)) is not None and name.rsplit(".", 2)[-2][:1].isupper()):
        base = f"name:{name}"
    else:
        return ""
    if base == "0" and (active and isinstance(op, ast.NotEq) or not active and isinstance(op, ast.Eq)):
        return "1"  # `if LEVEL == 0: return`: what follows runs from level 1
    if active and isinstance(op, (ast.GtE, ast.Eq)) or not active and isinstance(op, ast.Lt):
        bump = False
    elif active and isinstance(op, ast.Gt) or not active and isinstance(op, ast.LtE):
        bump = True
    else:
        return ""
    if not bump:
        return base
    return f"{base}+1" if base.startswith(("param:", "name:")) else str(int(base) + 1)


#: an ordering comparison as written, and the one that holds when it fails
_ORDER_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_ORDER_NEGATED = {ast.Lt: ">=", ast.LtE: ">", ast.Gt: "<=", ast.GtE: "<"}


def literal_text(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool)) or (
        isinstance(node, ast.Constant) and node.value is None
    ):
        return str(node.value)
    return None


@dataclass(slots=True)
class _GateGroup:
    """The gates of one test (``gate_refs(test, active)``), worked out in ``function`` when
    first needed (``refs`` is None until then)."""

    test: ast.expr
    active: bool
    function: Scope | None
    refs: list[GateRef] | None = None


def _held_request(value: ast.expr, requests: dict[str, str | None]) -> str | None:
    """The annotated class of the parameter ``value`` is, is a field of, or holds in a tuple."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return next((found for item in value.elts if (found := _held_request(item, requests))), None)
    if isinstance(value, ast.Attribute):
        value = value.value
    return requests.get(value.id) if isinstance(value, ast.Name) else None


def _annotated_class(annotation: ast.expr | None) -> str | None:
    """The last name of the class an annotation names (`Req`, `io.Req`, `"Req"`)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.rpartition(".")[2] or None
    name = raw_dotted(annotation) if isinstance(annotation, (ast.Name, ast.Attribute)) else None
    return name.rpartition(".")[2] if name else None


#: deepest chain of locals and conditional expressions ``table_resolutions`` follows
_MAX_LITERAL_DEPTH = 4
#: longest literal it keeps (a long string is no setting's value)
_MAX_LITERAL_CHARS = 80
#: the values of a module name that may stand for a switch (a call, a test of one)
#: the returned values that make a function a predicate (``FunctionDef.returned_test``)
TEST_VALUES = frozenset({ast.BoolOp, ast.Compare, ast.UnaryOp, ast.Attribute, ast.Name})
#: most passes over a file's assignments a name tested through others' values takes (``derived``)
DERIVED_PASSES = 4
_SWITCH_VALUES = frozenset({ast.Call, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.IfExp})


class GateReader(IndexState):
    """The gates around the statement being walked, and the gates of a test or value."""

    def __init__(self, path: str, text: str, rs: RuleSet) -> None:
        super().__init__(path, text, rs)
        #: the gates around the current statement, one group per test (see ``_gates_now``)
        self.gate_groups: list[_GateGroup] = []
        #: the gate groups of the enclosing bodies a def or class body set aside
        self._saved_gate_groups: list[list[_GateGroup]] = []
        self._interned_gates: dict[tuple[GateRef, ...], tuple[GateRef, ...]] = {}
        #: the gates as their interned tuple; None when the groups changed since
        self._gates_tuple: tuple[GateRef, ...] | None = ()
        #: the last disjunction numbered in this file (``GateRef.any_of``)
        self.any_of = 0
        #: names and attributes a gate tests, and the assignments to names and attributes
        #: (scope, name, value), whose gates are worked out at the end for the tested ones
        self.gate_names: set[str] = set()
        #: names a test calls an `is_*` predicate of (``wrapped``)
        self.predicate_receivers: set[str] = set()
        #: (scope, name, value, the gate groups around it) of each assignment
        self.assignments: list[tuple[Scope | None, str, ast.expr, tuple[_GateGroup, ...]]] = []
        #: literals a compared value is "off" at (`x == "0"`, `x is None`)
        self.off_literals = rs.off_values | {"None", "False"}
        #: (scope, table, key, value, the gate groups around it) of each string-key store into
        #: a local table (`fields["x"] = v`), and (scope, table, line) of each call handing a
        #: local table to an override (`ctx.override(source, **fields)`): ``table_resolutions``
        self.table_stores: list[tuple[Scope, str, str, ast.expr, tuple[_GateGroup, ...]]] = []
        self.override_calls: list[tuple[Scope, str, int]] = []
        #: the attributes a method here declares None with an annotation (`self.pool: Optional[P]
        #: = None`): what runs past an unguarded `self.pool.size` needs a pool (``deref_gates``)
        self.declared_none = frozenset(_DECLARED_NONE.findall(text)) if rs.defaults is not None else frozenset()
        #: module names bound to a collection of strings (`HYBRID_ARCHS = frozenset({"A", ...})`)
        self.string_sets: dict[str, tuple[str, ...]] = {}
        #: (scope, attribute) of each `self.` attribute a tuple assignment unpacks into
        #: (`self.a, self.b = f()`): the class's own state (``own_state``)
        self.unpacked_self_stores: list[tuple[Scope, str]] = []

    # ------------------------------------------------------------ the gates around the statement
    def _gates_now(self) -> tuple[GateRef, ...]:
        """The gates around the current statement as one tuple shared by every site under the
        same gates (the joins cache gate resolution by the tuple's identity).  Kept until the
        gates change (``_push_gates``, ``_pop_gates``, ``_set_gates_aside``, ``_restore_gates``)."""
        gates = self._gates_tuple
        if gates is None:
            refs: list[GateRef] = []
            for group in self.gate_groups:
                if group.refs is None:
                    self._settle(group)
                refs.extend(group.refs)  # type: ignore[arg-type]
            gates = tuple(refs)
            if gates:
                gates = self._interned_gates.setdefault(gates, gates)
            self._gates_tuple = gates
        return gates

    def _push_gates(self, test: ast.expr, active: bool) -> None:
        """The gates of ``test`` hold from here on; their refs are worked out only when a
        statement below records its gates (most blocks record none)."""
        self.gate_groups.append(_GateGroup(test, active, self.function))
        self._gates_tuple = None

    def deref_gates(self, stmt: ast.stmt) -> int:
        """Gate the rest of the block on each attribute ``declared_none`` that ``stmt`` reads
        through unguarded (`anchor = self.pool.anchor`: past it, `self.pool` is no None);
        returns the number of gate groups pushed."""
        pushed = 0
        for attr in _dereferenced(stmt, self.declared_none):
            ref = GateRef("name", f"self.{attr}", (DEREFERENCED,), True)
            if not any(group.refs == [ref] for group in self.gate_groups):
                self.gate_groups.append(_GateGroup(stmt, True, self.function, [ref]))  # type: ignore[arg-type]
                self._gates_tuple = None
                pushed += 1
        return pushed

    def _pop_gates(self, count: int) -> None:
        if count:
            del self.gate_groups[-count:]
            self._gates_tuple = None

    def _set_gates_aside(self) -> None:
        """A def or class body starts with no gates; ``_restore_gates`` after it."""
        self._saved_gate_groups.append(self.gate_groups)
        self.gate_groups = []
        self._gates_tuple = None

    def _restore_gates(self) -> None:
        self.gate_groups = self._saved_gate_groups.pop()
        self._gates_tuple = None

    def _settle(self, group: _GateGroup) -> None:
        """Work out a group's refs as ``gate_refs`` would have when it was pushed: in its own
        function, and before any change of what refs depend on (see ``_settle_all``)."""
        current, self.function = self.function, group.function
        group.refs = self.gate_refs(group.test, group.active)
        self.function = current

    def _settle_all(self) -> None:
        """Work out every pending group: called before aliases, string constants or a
        function's env defaults change (``gate_refs`` reads them)."""
        for groups in (*self._saved_gate_groups, self.gate_groups):
            for group in groups:
                if group.refs is None:
                    self._settle(group)

    # ------------------------------------------------------------ gate operands
    def gate_refs(self, expr: ast.AST, active: bool) -> list[GateRef]:
        out: list[GateRef] = []
        self._refs(expr, active, out)
        if len(out) > _MAX_GATE_REFS:
            # a disjunction cut short could gate by the operands kept: keep none of it
            cut = {r.any_of for r in out[_MAX_GATE_REFS:] if r.any_of}
            out = [r for r in out[:_MAX_GATE_REFS] if r.any_of not in cut]
        return out

    def _env_key(self, node: ast.AST | None) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.string_constants:
                return self.string_constants[node.id]
            scope = self.function
            if scope and node.id in scope.params:
                return f"param:{node.id}"
        return "?"

    def _refs(self, expr: ast.AST, active: bool, out: list[GateRef], group: int = 0) -> None:
        if len(out) > _MAX_GATE_REFS:
            return
        start = len(out)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            self._refs(expr.operand, not active, out, group)
        elif isinstance(expr, ast.BoolOp):
            # `A and B` holding (or `A or B` failing) needs each operand: each gates alone;
            # otherwise one operand suffices, and they gate only together (``any_of``)
            if isinstance(expr.op, ast.And) != active and not group:
                self.any_of += 1
                group = self.any_of
            for value in expr.values:
                self._refs(value, active, out, group)
        elif isinstance(expr, ast.Compare):
            self._compare_refs(expr, active, out)
        elif isinstance(expr, ast.Call):
            self._call_ref(expr, active, out)
        elif isinstance(expr, ast.Subscript):
            if dotted(expr.value, self.aliases) in self.rs.env_mappings:
                out.append(GateRef("env", self._env_key(expr.slice), (), active))
        elif isinstance(expr, (ast.Name, ast.Attribute)):
            self._name_ref(expr, active, out)
        elif isinstance(expr, ast.NamedExpr):
            self._refs(expr.value, active, out)
        elif isinstance(expr, ast.IfExp):
            self._ifexp_refs(expr, active, out, group)
        if group:
            if len(out) == start:  # an operand that stands for no switch: the group never gates
                out.append(GateRef("name", "", ("operand",), active, group))
            else:
                out[start:] = [r if r.any_of else replace(r, any_of=group) for r in out[start:]]

    def derived(self) -> tuple[tuple[str | None, str, tuple[GateRef, ...]], ...]:
        """(function, name, gates of the value) of the assignments to names that a gate tests
        (after the walk: every gate that guards a site has been worked out by then), and of
        module names set from a switch, which other modules may import and test
        (`TRACE_ON = env_flag("X")` in flags.py, `from .flags import TRACE_ON`)."""
        out: dict[int, tuple[str | None, str, tuple[GateRef, ...]]] = {}
        saved = self.function
        # a name tested only through another name assigned from it (`need = self.on` ... `if
        # need:`) becomes tested when that one's value is read, maybe after its own assignment
        tested_before = -1
        for _ in range(DERIVED_PASSES):
            if tested_before == len(self.gate_names):
                break
            tested_before = len(self.gate_names)
            for i, (scope, name, value, groups) in enumerate(self.assignments):
                if i in out or _falsy(value):  # a falsy value adds no way to be true
                    continue
                tested = name in self.gate_names
                if not tested and (scope is not None or value.__class__ not in _SWITCH_VALUES):
                    continue
                self.function = scope
                refs = tuple(self.gate_refs(value, True))
                if not tested and not any(r.kind in ("env", "call") or r == DEFAULT_ON for r in refs):
                    continue
                request = self._request_field(scope, value) if tested and scope is not None and name.startswith("self.") else None
                if request is not None:
                    # engine state a handler copies from a request: only a request of that kind sets it
                    refs += (GateRef("name", f"request:{request}", (REQUEST_FIELD,)),)
                # `global _AGENT; _AGENT = make()` sets the module's name (resolved in the function)
                stored = f"global:{name}" if scope is not None and name in scope.global_names else name
                out[i] = (scope.qualname if scope else None, stored, refs + self._condition_refs(groups))
        self.function = saved
        return tuple(out[i] for i in sorted(out))

    def table_resolutions(self) -> tuple[tuple[int, str, tuple[GateRef, ...]], ...]:
        """(line of the override call, `option=literal`, the gates under which that value is the
        one stored) of each literal a function stores by key into a table it hands to an override
        at start-up (`backend = "a" if cfg.mode == "x" else "b"`; `fields["backend"] = backend`;
        `get_context().override(source, **fields)`). A key any store of which is not such a
        literal (nor the same-named value handed on) gives the bare option name, under the
        override's gates: start-up works out a value not known."""
        out: list[tuple[int, str, tuple[GateRef, ...]]] = []
        saved = self.function
        for scope, table, line in self.override_calls:
            self.function = scope
            by_key: dict[str, list[tuple[str, tuple[GateRef, ...]]] | None] = {}
            for key, value, groups in self._table_entries(scope, table):
                known = by_key.get(key, [])
                if known is not None:
                    found = self._literals(scope, key, value, self._condition_refs(groups), 0)
                    by_key[key] = None if found is None else known + found
            for key, found in by_key.items():
                if found is None:
                    out.append((line, key, ()))
                else:
                    out.extend((line, f"{key}={literal}", gates) for literal, gates in found)
        self.function = saved
        return tuple(dict.fromkeys(out))

    def _table_entries(self, scope: Scope, table: str) -> Iterator[tuple[str, ast.expr, tuple[_GateGroup, ...]]]:
        """(key, value, the gate groups around the store) of each string-key store into ``table``."""
        for owner, name, key, value, groups in self.table_stores:
            if owner is scope and name == table:
                yield key, value, groups
        for assigned_in, name, value, groups in self.assignments:
            if assigned_in is scope and name == table and isinstance(value, ast.Dict):
                for item_key, item in zip(value.keys, value.values):
                    if isinstance(item_key, ast.Constant) and isinstance(item_key.value, str):
                        yield item_key.value, item, groups

    def _literals(self, scope: Scope, key: str, value: ast.expr, gates: tuple[GateRef, ...], depth: int,
                  ) -> list[tuple[str, tuple[GateRef, ...]]] | None:
        """The literals ``value`` may be, each with the gates under which it is; None when it may
        be something else. A local is what its assignments in the function are."""
        if depth > _MAX_LITERAL_DEPTH:
            return None
        if isinstance(value, ast.Constant):
            text = repr(value.value)
            return [(text, gates)] if len(text) <= _MAX_LITERAL_CHARS else None
        if isinstance(value, ast.IfExp):
            body = self._literals(scope, key, value.body, (*gates, *self.gate_refs(value.test, True)), depth + 1)
            orelse = self._literals(scope, key, value.orelse, (*gates, *self.gate_refs(value.test, False)), depth + 1)
            return None if body is None or orelse is None else body + orelse
        if isinstance(value, ast.Attribute) and value.attr == key:
            return []  # the option's own value handed on: no other value
        if not isinstance(value, ast.Name) or value.id in scope.params:
            return None
        assigned = [(v, groups) for owner, target, v, groups in self.assignments if owner is scope and target == value.id]
        found: list[tuple[str, tuple[GateRef, ...]]] = []
        for v, groups in assigned:
            values = self._literals(scope, key, v, (*gates, *self._condition_refs(groups)), depth + 1)
            if values is None:
                return None
            found.extend(values)
        return found if assigned else None

    def _request_field(self, scope: Scope, value: ast.expr) -> str | None:
        """The request class ``value`` holds a request of, or a field of one (`obj.dump_folder`,
        `(req, deadline)`, or a local every truthy assignment of which is such), in a method handed
        that request (`def configure(self, obj: ConfigureLoggingReq)`; not `__init__`: an object
        built from a request holds its data); None otherwise."""
        pattern = self.rs.defaults.request_classes if self.rs.defaults is not None else None
        node = scope.node
        if pattern is None or node is None or scope.name == "__init__" or "." not in scope.qualname:
            return None
        requests = {p.arg: _annotated_class(p.annotation) for p in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        reads = [value]
        if isinstance(value, ast.Name) and value.id not in requests:
            reads = [v for owner, target, v, _ in self.assignments if owner is scope and target == value.id and not _falsy(v)]
        found = {_held_request(read, requests) for read in reads}
        if not reads or None in found or len(found) != 1:
            return None
        request = found.pop()
        return request if request and pattern.fullmatch(request) else None

    def own_state(self) -> tuple[str, ...]:
        """`Class.attr` of each attribute a method assigns on `self` other than as a copy of the
        same-named attribute of another object (`self.enable_x = cfg.enable_x` keeps an option's
        value; `self.output = output` is whatever the caller hands), sorted."""
        out = set()
        for scope, name, value, _ in self.assignments:
            if scope is None or not name.startswith("self.") or "." not in scope.qualname:
                continue
            attr = name[5:]
            if isinstance(value, ast.Attribute) and value.attr == attr and raw_dotted(value.value) != "self":
                continue
            out.add(f"{scope.qualname.rsplit('.', 1)[0]}.{attr}")
        out.update(f"{scope.qualname.rsplit('.', 1)[0]}.{attr}" for scope, attr in self.unpacked_self_stores if "." in scope.qualname)
        return tuple(sorted(out))

    def falsy_names(self) -> tuple[tuple[str | None, str], ...]:
        """(function, name as ``derived`` stores it) of each assignment of a falsy constant
        (`self.x = None`, `False`, `0`) to a name a gate tests: ``derived`` leaves them out,
        and a name so assigned is not known to be truthy by default."""
        out: list[tuple[str | None, str]] = []
        for scope, name, value, _ in self.assignments:
            if _falsy(value) and name in self.gate_names:
                stored = f"global:{name}" if scope is not None and name in scope.global_names else name
                out.append((scope.qualname if scope else None, stored))
        return tuple(dict.fromkeys(out))

    def wrapped(self) -> tuple[tuple[str | None, str, str], ...]:
        """``FileFacts.wrapped``: each assignment to a name a test calls a predicate of, with the
        read it wraps (``wrapped_read``) or the getter it calls."""
        if not self.predicate_receivers:
            return ()
        out = []
        for scope, name, value, _ in self.assignments:
            if name in self.predicate_receivers:
                # a getter's value (`backend = get_backend()`) as the call, `pkg.get_backend()`
                getter = dotted(value.func, self.aliases) if (
                    isinstance(value, ast.Call) and not value.args and not value.keywords) else None
                out.append((scope.qualname if scope else None, name, f"{getter}()" if getter else wrapped_read(value)))
        return tuple(out)

    def _condition_refs(self, groups: tuple[_GateGroup, ...]) -> tuple[GateRef, ...]:
        """The gates around an assignment: a value set only under a condition holds only when
        it does (`if cfg.enable_x: self.tracer = Tracer()`), an optional component."""
        refs: list[GateRef] = []
        for group in groups:
            if group.refs is None:
                self._settle(group)
            refs.extend(r for r in group.refs or () if r != DEFAULT_ON)
        return tuple(refs)

    def path_values(self) -> tuple[tuple[str | None, str, tuple[str, ...]], ...]:
        """(function, name, the names it is built from) of the assignments of a path built
        from other names (`path = os.path.join(table_dir, f)`, `p = Path(d) / "x"`,
        `f"{d}/x.jsonl"`): where a location's value goes once joined further."""
        out = []
        for scope, name, value, _ in self.assignments:
            if not is_built_path(value):
                continue
            used = sorted(n for n in head_names(value, 0) if n != name)
            if used:
                out.append((scope.qualname if scope else None, name, tuple(used)))
        return tuple(out)

    def _ifexp_refs(self, expr: ast.IfExp, active: bool, out: list[GateRef], group: int = 0) -> None:
        """`X if C else None` is truthy only when C and X are (`Tracer() if env_flag("T") else None`);
        `X if C else Y` only when X or Y is (which one C picks is left open)."""
        if not active:
            return
        if _falsy(expr.orelse):
            self._refs(expr.test, True, out)
            self._refs(expr.body, True, out)
        elif _falsy(expr.body):
            self._refs(expr.test, False, out)
            self._refs(expr.orelse, True, out)
        elif not isinstance(expr.body, ast.Constant) and not isinstance(expr.orelse, ast.Constant):
            start = len(out)
            self._refs(expr.body, True, out)
            middle = len(out)
            self._refs(expr.orelse, True, out)
            if middle == start or len(out) == middle or any(r.any_of for r in out[start:]):
                # (a side that stands for no switch, or a disjunction inside one: not known)
                del out[start:]
            else:
                # one disjunction with the enclosing one's operands, if any (`(X if C else Y) or Z`)
                if not group:
                    self.any_of += 1
                    group = self.any_of
                out[start:] = [replace(r, any_of=group) for r in out[start:]]

    def _env_default(self, expr: ast.AST) -> tuple[bool, str | None]:
        """(is an env read, its literal default) for `os.getenv("X", "1")`-like calls."""
        if isinstance(expr, ast.Call) and dotted(expr.func, self.aliases) in self.rs.env_calls:
            default = expr.args[1] if len(expr.args) > 1 else next((k.value for k in expr.keywords if k.arg == "default"), None)
            return True, literal_text(default)
        return False, None

    def _env_operand(self, node: ast.expr) -> tuple[str, str | None, str] | None:
        """(what to gate on, its default, the conversion around it) when ``node`` is an env
        read with a literal default or a local assigned from one (`int(os.getenv("L", "1"))`).
        What to gate on is the env key, or ``name:<local>`` for a local."""
        conversion = ""
        if isinstance(node, ast.NamedExpr):  # `(n := int(getenv(...))) >= 0`
            node = node.value
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CONVERSIONS and node.args:
            conversion = conversion or node.func.id
            node = node.args[0]
        is_env, default = self._env_default(node)
        if is_env:
            return self._env_key(node.args[0] if node.args else None), default, conversion  # type: ignore[attr-defined]
        scope = self.function
        if isinstance(node, ast.Name) and scope is not None and node.id in self.closure(scope):
            scope = self.closure(scope)[node.id]
        if isinstance(node, ast.Name) and scope is not None and node.id in scope.env_defaults:
            default, assigned_conversion = scope.env_defaults[node.id]
            return f"name:{node.id}", default, conversion or assigned_conversion
        return None

    def _compare_refs(self, expr: ast.Compare, active: bool, out: list[GateRef]) -> None:
        op, right = expr.ops[0], expr.comparators[0]
        if isinstance(op, (ast.In, ast.NotIn)) and dotted(right, self.aliases) in self.rs.env_mappings:
            out.append(GateRef("env", self._env_key(expr.left), (), active if isinstance(op, ast.In) else not active))
            return
        architecture = self._architecture_test(expr) if len(expr.ops) == 1 else None
        if architecture is not None:
            names, holds = architecture
            out.append(GateRef("name", SERVED_ARCHITECTURE, ("operand", CLASS_TESTED + "|".join(names)), active == holds))
            return
        if len(expr.ops) == 1 and self._default_decides(expr.left, op, right, active, out):
            return
        if len(expr.ops) == 1 and not isinstance(op, (ast.In, ast.NotIn)) and self._default_decides(
                right, _MIRRORED.get(op.__class__, op.__class__)(), expr.left, active, out):
            return
        literal = literal_text(right)
        off = self.off_literals
        low = isinstance(op, (ast.Lt, ast.LtE))
        if isinstance(op, (ast.Eq, ast.Is)) and literal in off:
            low = True
        if isinstance(op, (ast.NotEq, ast.IsNot)) and literal is not None and literal not in off:
            low = True
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            values = {literal_text(e) for e in right.elts}
            low = bool(values) and values <= off
            if isinstance(op, ast.NotIn):
                low = not low
        single = len(expr.ops) == 1
        member = _enum_member(right, self.aliases) if single and isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)) else None
        if member is not None and isinstance(expr.left, (ast.Name, ast.Attribute)):
            # `self.mode != Mode.NULL`: judged by the option the name's assignments wrap
            # (`self.mode = Mode(cfg.mode)`) against the member's value (``FileFacts.wrapped``)
            start = len(out)
            self._refs(expr.left, active, out)
            held = isinstance(op, (ast.Eq, ast.Is)) == active
            compared = (f"cmp:{'==' if held else '!='}:member:{member}",)
            out[start:] = [_compared(r, compared) if r.kind == "name" else r for r in out[start:]]
            receiver = dotted(expr.left, self.aliases) or ""
            if "." not in receiver and receiver or receiver.startswith("self.") and receiver.count(".") == 1:
                self.predicate_receivers.add(receiver)
            return
        start = len(out)
        self._refs(expr.left, active != low, out)
        level = level_of(op, right, active, self._params(), self.aliases) if single else ""
        if level:
            out[start:] = [replace(r, level=level) for r in out[start:]]
        if literal is None and not isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            flips = isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))
            middle = len(out)
            self._refs(right, (active == low) if flips else active, out)
            mirrored = _MIRRORED.get(op.__class__)
            level = level_of(mirrored(), expr.left, active, self._params(), self.aliases) if single and mirrored else ""
            if level:  # `2 <= LEVEL`
                out[middle:] = [replace(r, level=level) for r in out[middle:]]
        none_test = single and isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) and is_none(right)
        tested = expr.left.value if isinstance(expr.left, ast.NamedExpr) else expr.left
        if none_test and isinstance(tested, (ast.Name, ast.Attribute)):
            # `x is not None` tests what `x` holds for truth: an object or None (its polarity
            # is already in the ref, as for `not x`)
            return
        # a name compared with something is an operand (`x not in seen`), never a bare flag; a
        # comparison with a literal keeps what it holds for (`cmp:==:'fp8'`), for an option's default
        marker: tuple[str, ...] = ()
        if single and isinstance(right, ast.Constant) and isinstance(expr.left, (ast.Name, ast.Attribute)) and len(repr(right.value)) <= 80:
            if isinstance(op, (ast.Eq, ast.NotEq)):
                marker = (f"cmp:{'==' if isinstance(op, ast.Eq) == active else '!='}:{right.value!r}",)
            elif op.__class__ in _ORDER_TEXT and type(right.value) in (int, float):
                # `if cfg.tp_size > 1:` runs when it holds; its else, when the opposite does
                text = _ORDER_TEXT[op.__class__] if active else _ORDER_NEGATED[op.__class__]
                marker = (f"cmp:{text}:{right.value!r}",)
        elif single and isinstance(op, (ast.In, ast.NotIn)) and isinstance(expr.left, (ast.Name, ast.Attribute)):
            # `if cfg.mode in ("a", "b"):` holds for the values listed, its else for the others
            members = _constants(right)
            if members is not None:
                held = isinstance(op, ast.In) == active
                marker = (f"cmp:{'in' if held else 'not in'}:{members!r}",)
        out[start:] = [_compared(r, marker) if r.kind == "name" else r for r in out[start:]]

    def _params(self) -> tuple[str, ...]:
        return self.function.params if self.function is not None else ()

    # ------------------------------------------------------------ the served architecture
    def _note_architecture(self, name: str, value: ast.expr) -> None:
        """`arch = hf_config.architectures[0]` in a function, its only store of the name;
        `HYBRID_ARCHS = frozenset({...})` at module level, the module's only binding of the name,
        which nothing changes (``string_sets``)."""
        scope = self.function
        if scope is not None:
            reads = self._reads_architecture(value, listed=False) and scope.store_counts.get(name) == 1 \
                and name not in scope.params
            if reads != (name in scope.architecture_names):
                self._settle_all()  # (a pending test reads the name as it was)
                (scope.architecture_names.add if reads else scope.architecture_names.discard)(name)
        elif not self.scopes:
            names = _strings(value, {}, fixed=True)
            if names is not None and not self._bound_once(name):
                names = None
            if names != self.string_sets.get(name):
                self._settle_all()
                if names is not None:
                    self.string_sets[name] = names
                else:
                    self.string_sets.pop(name, None)

    def _bound_once(self, name: str) -> bool:
        """Whether the module binds ``name`` once, at its top level, and rebinds it nowhere (no
        second assignment or unpacking into it, `global`, augmented assignment, import, loop or
        `with` over it)."""
        text = self.text
        word = re.escape(name)
        stores = re.findall(rf"^([ \t]*)[\w \t,()\[\]]*\b{word}\b[\w \t,()\[\]]*(?::[^=\n]*)?=(?!=)", text, re.M)
        if stores != [""]:
            return False
        return re.search(rf"\bglobal\s[^\n]*\b{word}\b|\b{word}\s*[-+|&*]=|\bimport\s[^\n]*\b{word}\b|\bas\s+{word}\b"
                         rf"|\bfor\s[^\n]*\b{word}\b[^\n]*\sin\s", text, re.M) is None

    def _reads_architecture(self, node: ast.expr, listed: bool) -> bool:
        """Whether ``node`` is the served model's architecture (`cfg.architectures[0]`,
        `model_config.architecture`, a local assigned either) or, ``listed``, the list of them
        (`cfg.architectures`): read off a config (`hf_config`, `model_config`, `self.config`)."""
        if isinstance(node, ast.Name):
            return not listed and self.function is not None and node.id in self.function.architecture_names
        if isinstance(node, ast.Subscript) and not listed:
            node = node.value
            wanted = "architectures"
        else:
            wanted = "architectures" if listed else "architecture"
        if not isinstance(node, ast.Attribute) or node.attr != wanted:
            return False
        owner = node.value
        last = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
        return last.lower().endswith("config")

    def _architecture_test(self, expr: ast.Compare) -> tuple[tuple[str, ...], bool] | None:
        """(the model classes named, whether the test holds when the served architecture is one
        of them) of `arch == "LlamaForCausalLM"`, `arch in HYBRID_ARCHS`, `"X" in
        cfg.architectures`; None for any other comparison."""
        op, left, right = expr.ops[0], expr.left, expr.comparators[0]
        names: tuple[str, ...] | None = None
        if isinstance(op, (ast.Eq, ast.NotEq)):
            for read, other in ((left, right), (right, left)):
                if self._reads_architecture(read, listed=False) and isinstance(other, ast.Constant) and isinstance(other.value, str):
                    names = (other.value,)
        elif isinstance(op, (ast.In, ast.NotIn)):
            if self._reads_architecture(left, listed=False):
                scope = self.function
                shadowed = isinstance(right, ast.Name) and scope is not None and (
                    right.id in scope.store_counts or right.id in scope.params)
                names = None if shadowed else _strings(right, self.string_sets)
            elif isinstance(left, ast.Constant) and isinstance(left.value, str) and self._reads_architecture(right, listed=True):
                names = (left.value,)
        if not names or not all(_CLASS_NAME.fullmatch(n) for n in names) or not any(_MODEL_CLASS.search(n) for n in names):
            return None
        return tuple(sorted(set(names))), isinstance(op, (ast.Eq, ast.In))

    def _default_decides(self, left: ast.expr, op: ast.cmpop, right: ast.expr, active: bool, out: list[GateRef]) -> bool:
        """A comparison of an env value with literals, judged with the value it has when the
        variable is unset: the guarded code is gated by it only if it does not run then
        (`int(getenv("L", "1")) >= 2` gates, `getenv("M", "block") == "block"` does not)."""
        operand = self._env_operand(left)
        if operand is None:
            return False
        key, default, conversion = operand
        holds = _compare_default(default, conversion, op, right)
        if holds is None:
            return False
        if holds != active:  # off by default: gated by the variable
            level = level_of(op, right, active, self._params())
            if key.startswith("name:"):
                self._refs(ast.Name(id=key[5:], ctx=ast.Load()), True, out)
                out[-1:] = [replace(as_operand(r), level=level) for r in out[-1:]]
            else:
                out.append(GateRef("env", key, (), True, level=level))
        else:
            out.append(DEFAULT_ON)
        return True

    def _call_ref(self, expr: ast.Call, active: bool, out: list[GateRef]) -> None:
        callee = dotted(expr.func, self.aliases)
        if callee is None:
            return
        receiver, _, method = callee.rpartition(".")
        if method.startswith("is_") and not expr.args and (
                "." not in receiver and receiver or receiver.startswith("self.") and receiver.count(".") == 1):
            self.predicate_receivers.add(receiver)
        if callee in CONVERSIONS:
            for arg in expr.args:
                self._refs(arg, active, out)
            return
        is_env, default = self._env_default(expr)
        if is_env:
            on_by_default = default is not None and default not in self.rs.off_values
            if not (on_by_default and active):
                out.append(GateRef("env", self._env_key(expr.args[0] if expr.args else None), (), active))
            else:
                out.append(DEFAULT_ON)
            return
        method = callee.rsplit(".", 1)[-1]
        if method in self.rs.level_guards:
            out.append(GateRef("level", callee, (), active))
            return
        func = expr.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute):
            owner = dotted(func.value.value, self.aliases)
            for registry in self.rs.registries:
                if registry.access == "method" and owner == registry.object and func.attr in registry.methods:
                    out.append(GateRef("env", func.value.attr, ("registry",), active))
                    return
        if callee == "isinstance" and len(expr.args) == 2:
            # `isinstance(x, C)` holds only where a C exists: the joins know which classes do
            out.append(GateRef("call", callee, ("", _classes_text(expr.args[1])), active))
            return
        out.append(GateRef("call", callee, (*(_arg_text(a) for a in expr.args[:3]), *_keywords_passed(expr)), active))

    def _name_ref(self, expr: ast.Name | ast.Attribute, active: bool, out: list[GateRef]) -> None:
        if isinstance(expr, ast.Attribute):
            owner = dotted(expr.value, self.aliases)
            for registry in self.rs.registries:
                if registry.access == "attribute" and owner == registry.object and re.match(registry.name_pattern, expr.attr):
                    out.append(GateRef("env", expr.attr, ("registry",), active))
                    return
        raw = raw_dotted(expr)
        if raw is None and isinstance(expr, ast.Attribute):
            # an attribute of what a call returns (`get_server_args().enable_x`): an option, maybe
            called = dotted(expr, self.aliases)
            if called is not None:
                out.append(GateRef("name", called, (), active))
            return
        if raw is None or raw in ("True", "False", "None"):
            return
        self.gate_names.add(raw)
        scope = self.function
        home = self.closure(scope).get(raw.split(".", 1)[0]) if scope is not None else None
        if home is not None:
            # a parameter's value comes from the caller (`log_adjustment=True`): an operand, not a flag
            args: tuple[str, ...] = (closure_arg(home.qualname),)
            if raw in home.params:
                args = ("operand", PARAM_TESTED, *args)
        else:
            args = ("operand", PARAM_TESTED) if scope is not None and raw in scope.params else ()
            # a name built by the walk (no line of its own) is no test the source holds
            line = getattr(expr, "lineno", None)
            if args and line is not None and rebound_after(scope, raw, line):  # type: ignore[arg-type]
                args = (*args, PARAM_FRESH)
        out.append(GateRef("name", self.aliases.get(raw, raw), args, active))
