"""Where a call lands: the tree's names, imports and types joined into one resolver
(``Resolver``), as PyCG resolves through its assignment graph; and the arguments flowed into
parameters."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cs_audit.joins.kept import Resolutions
from cs_audit.joins.values import FIELDS, FIELDS_OPEN, Types, shared_parameter
from cs_audit.model import (
    HANDED,
    PROPERTY_DECORATORS,
    CallSite,
    FileFacts,
    FuncKey,
    FunctionDef,
)

if TYPE_CHECKING:
    from cs_audit.model import PlainCall


# ---------------------------------------------------------------- resolution
@dataclass(slots=True)
class _FlowState:
    """Where ``Resolver.flow_arguments`` stopped: the argument groups and what they pass."""

    groups: dict[tuple[str, str | None, str], list[tuple[str, str]]]
    order: list[tuple[str, str | None, str]]
    lasts: list[str]
    table: dict[tuple[str, str, str], tuple[tuple[str, str | None, str], ...]]
    passed: dict[tuple[str, str, str], dict[int, list[tuple[str, str | None, str]]]]
    keys_of: dict[int, list[tuple[str, str, str]]]
    taken: set[int]
    asked: set[str]
    #: last name -> the numbers of the groups so named; the groups looked at whatever was asked
    by_last: dict[str, list[int]] = field(default_factory=dict)
    always: list[int] = field(default_factory=list)
    #: the asked names whose groups are taken
    expanded: set[str] = field(default_factory=set)
    #: group key -> its number
    number_of: dict[tuple[str, str | None, str], int] = field(default_factory=dict)
    seen_demands: int = 0
    #: groups forgotten in the last round of the last call, not worked out again yet
    pending: set[int] = field(default_factory=set)


class _Memo(dict):
    """key -> ``compute(key)``, worked out on the first lookup (a hit costs a dict lookup)."""

    __slots__ = ("compute",)

    def __init__(self, compute: Callable[[Any], Any]) -> None:
        super().__init__()
        self.compute = compute

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.compute(key)
        return value


class Resolver:
    def __init__(self, facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef] | None = None,
                 package: str | None = None) -> None:
        self.by_module: dict[str, list[str]] = defaultdict(list)
        self.qualnames: dict[str, dict[str, FunctionDef]] = {}
        self.methods_by_name: dict[str, list[FuncKey]] = defaultdict(list)
        #: the getters of properties (a read of the attribute runs one), and their names
        self.properties: set[FuncKey] = set()
        self.property_names: set[str] = set()
        self.modules: dict[str, str] = {path: ff.module for path, ff in facts.items()}
        self.types_digests = {path: ff.types.digest for path, ff in facts.items()}
        self._memo: dict[tuple[str, str | None, str], list[FuncKey]] = {}
        self._module_calls: dict[str, bool] = {}
        self._defining: dict[tuple[str, str], list[str]] = {}  # (module, qualname) -> files defining it
        self._methods_by_path: dict[str, dict[str, str]] = {}
        #: every part of every qualname in the tree: a callee whose last part is none of them
        #: resolves to nothing (every answer below ends in the callee's last name, or in
        #: `.__init__` after it), except `cls()` / `self.__class__()`
        self.names: set[str] = set()
        names = self.names
        #: every parameter name: a bare call of one may run what its callers pass
        self.param_names: set[str] = set()
        #: every part of every function and class qualname
        self.defined_names: set[str] = set()
        #: the scanned folder's own name when it is a package (`sglang`): its modules are
        #: imported under it (`from sglang.srt.x import f`)
        self.package = package
        for path, ff in facts.items():
            parts = ff.module.split(".")
            for i in range(len(parts)):
                self.by_module[".".join(parts[i:])].append(path)
            if package:
                self.by_module[f"{package}.{ff.module}" if ff.module != "__init__" else package].append(path)
            table = {f.qualname: f for f in ff.functions}
            self.qualnames[path] = table
            for qualname in table:
                names.update(qualname.split("."))
                self.defined_names.update(qualname.split("."))
            for f in ff.functions:  # a parameter holds what the calls pass (`cb()`)
                self.param_names.update(f.params)
            for f in ff.functions:
                if f.class_name is not None and "<locals>" not in f.qualname:
                    self.methods_by_name[f.name].append((path, f.qualname))
                    if f.decorators and not PROPERTY_DECORATORS.isdisjoint(f.decorators):
                        self.properties.add((path, f.qualname))
                        self.property_names.add(f.name)
            # a call of a name that holds an object may run its `__call__`/`forward`; a class
            # without methods of its own may inherit its `__init__`
            names.update(ff.types.names)
            for c in ff.types.classes:
                names.update(c.qualname.split("."))
                self.defined_names.update(c.qualname.split("."))
        if functions is None:
            functions = {(p, f.qualname): f for p, ff in facts.items() for f in ff.functions}
        self.types = Types(facts, functions, self.by_module, self._closest)
        self._how_memo: dict[tuple[str, str | None, str], list[tuple[FuncKey, str]]] = {}
        #: the parameters each answer of ``resolve_how`` depended on (when any)
        self._how_deps: dict[tuple[str, str | None, str], frozenset] = {}
        self._targets_memo: dict[tuple[str, str | None, str], list[tuple[FuncKey, int]]] = {}
        #: callee -> whether it may land (``_may_land``)
        self._lands = _Memo(self._may_land)
        #: owner of a binding -> whether it is an argument of a call that may land
        self._landing_owners: dict[str, bool] = {}
        self._groups: dict[tuple[str, str | None, str], list[tuple[str, str]]] | None = None
        self._passed_memo: dict[tuple[str, str | None, str], list[tuple[FuncKey, str]]] = {}
        self._passed_deps: dict[tuple[str, str | None, str], frozenset] = {}
        self._file_arguments: dict[str, dict[tuple[str | None, str], list[tuple[str, str]]]] = {}
        self._landing_args: dict[str, list[tuple]] = {}
        self._shared_count = 0
        self._by_last_name: dict[str, list[tuple[str, CallSite | PlainCall]]] | None = None
        self._flow: _FlowState | None = None
        self._by_function: dict[str, dict[str | None, list[CallSite | PlainCall]]] = {}
        #: function -> the targets of its calls through the types, in call order (``_reach``)
        self.reached: dict[tuple[str, str | None], list[FuncKey]] = {}
        #: call sites whose ``call_targets`` were dropped since ``flow_arguments`` last looked
        self._dropped_targets: set[tuple[str, str | None, str]] = set()
        self._facts = facts

    def tables_digest(self) -> str:
        """``tables_digests``' digest."""
        return self.tables_digests()[0]

    def tables_digests(self, earlier: Resolutions | None = None,
                       unchanged: AbstractSet[str] = frozenset()) -> tuple[str, dict[str, str], str]:
        """Digest of everything an answer of ``resolve_how`` depends on besides the call site
        itself: each file's path, module, function qualnames (a function's name and whether
        it is a method follow from its qualname) and decorators, type facts, and a
        package's imports; with each file's part of it, and the digest of the names that
        decide which calls may land.  A file's part is taken from ``earlier`` for the files in
        ``unchanged`` while those names are the same as then (its part reads them)."""
        lands_digest = hashlib.blake2b(repr((sorted(self.names), sorted(self.param_names))).encode("utf-8", "surrogateescape"),
                                       digest_size=16).hexdigest()
        known = earlier.file_digests if earlier is not None and earlier.lands_digest == lands_digest else {}
        h = hashlib.blake2b(digest_size=16)
        h.update(repr(self.package).encode("utf-8", "surrogateescape"))
        files: dict[str, str] = {}
        for path in sorted(self.qualnames):
            digest = known.get(path) if path in unchanged else None
            if digest is None:
                digest = self._file_tables_digest(path)
            files[path] = digest
            h.update(f"{path}\0{digest}\0".encode("utf-8", "surrogateescape"))
        return h.hexdigest(), files, lands_digest

    def _file_tables_digest(self, path: str) -> str:
        """One file's part of ``tables_digests``."""
        h = hashlib.blake2b(digest_size=16)
        h.update(f"{path}\0{self.modules[path]}\0".encode("utf-8", "surrogateescape"))
        h.update("\0".join(self.qualnames[path]).encode("utf-8", "surrogateescape") + b"\n")
        # the typed resolution reads every file's classes, bindings and decorators, and a
        # package's imports (the names it re-exports, ``Types.module_name``)
        exports = sorted(self.types.aliases.get(path, {}).items()) if path.endswith("__init__.py") else None
        h.update(repr((self.types_digests[path], exports, self.types.star_imports.get(path))).encode("utf-8", "surrogateescape"))
        h.update(repr([(f.decorators, f.params) for f in self.qualnames[path].values()]).encode("utf-8", "surrogateescape"))
        # the arguments of calls that may land in the tree (the others flow nowhere)
        lands = self._lands
        h.update(repr([g for g in self._facts[path].types.arguments if lands[g[1]]]).encode("utf-8", "surrogateescape"))
        return h.hexdigest()

    # ------------------------------------------------------------ arguments into parameters
    def flow_arguments(self) -> None:
        """Work out what calls pass into the parameters the answers so far read (PyCG's
        argument edges, on demand as Jarvis does), to a fixed point: a parameter's values can
        decide where another call with arguments lands (`run(cb)` then `cb(x)`).  Answers
        that read a parameter whose values changed are forgotten (and asked again: that may
        read more parameters); a later call goes on from where this one stopped.

        The calls looked at are those whose callee's last name is that of a function with a
        parameter some answer read (a constructor: its class's name), and every call through
        a name no function or class has (`cb(x)`, `self.handler(x)`)."""
        state = self._flow
        if state is None:  # a later call goes on from where the last one stopped
            state = self._flow = self._start_flow()
        table, taken, asked = state.table, state.taken, state.asked
        functions = self.types.functions
        demanded = self.types.demanded
        seen_demands = state.seen_demands
        # the groups the last call forgot and did not work out again (other calls may have
        # made their targets again since: the memo alone does not say so); a taken group is
        # out of the memo only when ``use_parameters`` dropped its targets since
        dirty = sorted(state.pending | self._forgotten_groups(state))
        for _ in range(MAX_FLOW_ROUNDS):
            if len(demanded) != seen_demands:
                seen_demands = len(demanded)
                for path, qualname, _param in list(demanded):
                    f = functions.get((path, qualname))
                    if f is not None:
                        asked.add(f.class_name if f.name == "__init__" and f.class_name else f.name)
                    elif qualname.endswith(FIELDS):  # a record's field: its class's constructor calls
                        asked.add(qualname[:-len(FIELDS)].rpartition(".")[2])
            fresh = [n for n in state.always if n not in taken]
            for name in asked - state.expanded:
                fresh.extend(n for n in state.by_last.get(name, ()) if n not in taken)
            state.expanded |= asked
            taken.update(fresh)
            work = sorted(set(dirty) | set(fresh))
            if not work:
                break
            changed = self._settle(state, self._pass_groups(state, work))
            if changed:
                again = self.use_parameters(table, changed)
                for question in sorted(again, key=repr):  # asked again now: that may read more parameters
                    self.resolve_how(*question)
            dirty = sorted(self._forgotten_groups(state))
            if not changed and len(demanded) == seen_demands:
                break
        state.seen_demands = seen_demands
        state.pending = set(dirty)
        self.types.parameters = table

    def _start_flow(self) -> _FlowState:
        """The argument groups of the tree, numbered, each filed under the last name of its
        callee (looked at when a function of that name has a parameter asked) or always."""
        groups = self._argument_groups()
        order = list(groups)
        # a call through what a call or subscript gives (`retry(3)(f)`, `table[k](x)`)
        # may land anywhere: looked at whatever was asked
        lasts = ["" if "(" in callee or "[" in callee else _last_name(callee) for _, _, callee in order]
        #: parameter -> group number -> what that group passes into it; a round works out
        #: again only the groups whose resolution an earlier round's change made it forget
        passed: dict[tuple[str, str, str], dict[int, list[tuple[str, str | None, str]]]] = defaultdict(dict)
        state = _FlowState(groups, order, lasts, {}, passed, {}, set(), set())
        for number, last in enumerate(lasts):
            if last in self.defined_names:
                state.by_last.setdefault(last, []).append(number)
            else:
                state.always.append(number)
        state.number_of = {key: number for number, key in enumerate(order)}
        return state

    def _pass_groups(self, state: _FlowState, work: list[int]) -> set[tuple[str, str, str]]:
        """File what each group in ``work`` passes into the parameters of where its call lands
        (what it passed before dropped); the parameters so touched."""
        functions, groups, order, passed, keys_of = self.types.functions, state.groups, state.order, state.passed, state.keys_of
        touched: set[tuple[str, str, str]] = set()
        for number in work:
            for key in keys_of.pop(number, ()):
                passed[key].pop(number, None)
                touched.add(key)
            path, function, callee = group = order[number]
            mine: list[tuple[str, str, str]] = []
            for target, offset in self.call_targets(path, function, callee):
                params = functions[target].params
                for slot, source in groups[group]:
                    if slot.isdigit():
                        at = offset + int(slot)
                        if at >= len(params):
                            continue
                        param = params[at]
                    elif slot in params:
                        param = slot
                    else:
                        continue
                    key = (target[0], target[1], param)
                    passed[key].setdefault(number, []).append((path, function, source))
                    mine.append(key)
                    touched.add(key)
            for cls in self._records_built(path, function, callee):
                for slot, source in groups[group]:
                    # by position or from a mapping: any field may take it (``FIELDS_OPEN``)
                    key = (cls[0], cls[1] + FIELDS, FIELDS_OPEN if slot.isdigit() or slot == "**" else slot)
                    passed[key].setdefault(number, []).append((path, function, source))
                    mine.append(key)
                    touched.add(key)
            if mine:
                keys_of[number] = mine
        return touched

    def _records_built(self, path: str, caller: str | None, callee: str) -> list[tuple[str, str]]:
        """The classes with no `__init__` of the tree (records) a call constructs."""
        if "(" in callee or "[" in callee:
            return []
        types = self.types
        types.begin()
        return [value[1] for value in sorted(types.dotted(path, caller, callee), key=repr)
                if value[0] == "k" and types.find_method(value[1], "__init__") is None]

    @staticmethod
    def _settle(state: _FlowState, touched: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
        """The table's entry of each touched parameter, from what the groups pass (the first
        ``MAX_ARGUMENT_SOURCES`` in group order); the parameters whose entry changed."""
        table, passed = state.table, state.passed
        changed: set[tuple[str, str, str]] = set()
        for key in touched:
            items: list[tuple[str, str | None, str]] = []
            for number in sorted(passed[key]):  # in group order: the cap keeps the same first ones
                for item in passed[key][number]:
                    if item not in items and len(items) < MAX_ARGUMENT_SOURCES:
                        items.append(item)
            value = tuple(items)
            if table.get(key, ()) != value:
                changed.add(key)
                if value:
                    table[key] = value
                else:
                    del table[key]
        return changed

    def _forgotten_groups(self, state: _FlowState) -> set[int]:
        """The taken groups whose targets are out of the memo (dropped since last asked)."""
        memo, number_of, taken = self._targets_memo, state.number_of, state.taken
        out = set()
        for key in self._dropped_targets:
            number = number_of.get(key)
            if number is not None and number in taken and key not in memo:
                out.add(number)
        self._dropped_targets = set()
        return out

    def passed_functions(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, str]]:
        """The functions a call hands to shared parameters (``values.shared_parameter``) of
        what it calls: they run at this call (how `callback`), not at every caller of the helper."""
        key = (path, caller, callee)
        out = self._passed_memo.get(key)
        if out is not None:
            return out
        out = []
        args = self._arguments_of(path).get((caller, callee))
        deps: set = set()  # the parameters this answer read: it is forgotten when one changes
        if args:
            types, functions = self.types, self.types.functions
            for target, offset in self.call_targets(path, caller, callee):
                params = functions[target].params
                for slot, source in args:
                    at = offset + int(slot) if slot.isdigit() else (params.index(slot) if slot in params else len(params))
                    if at >= len(params):
                        continue
                    param = (target[0], target[1], params[at])
                    deps.add(param)
                    if not shared_parameter(types.parameters.get(param, ())):
                        continue
                    read = types.begin()
                    for value in sorted(types.source(path, caller, source), key=repr):
                        if value[0] in ("f", "b"):
                            for function, _ in types.targets(value):
                                if (function, "callback") not in out:
                                    out.append((function, "callback"))
                    deps |= read
        self._passed_memo[key] = out
        if deps:
            self._passed_deps[key] = frozenset(deps)
        return out

    def sites_by_last_name(self) -> dict[str, list[tuple[str, CallSite | PlainCall]]]:
        """Last name of the callee (``_last_name``) -> (path, site) of the calls so named, in
        file order, for the calls that may land."""
        if self._by_last_name is None:
            out: dict[str, list[tuple[str, CallSite | PlainCall]]] = defaultdict(list)
            lands = self._lands
            for path in sorted(self._facts):
                for site in self._facts[path].calls:
                    if lands[site.callee]:
                        out[_last_name(site.callee)].append((path, site))
            self._by_last_name = dict(out)
        return self._by_last_name

    def sites_by_function(self, path: str) -> dict[str | None, list[CallSite | PlainCall]]:
        """Function qualname (None: module level) -> its call sites in ``path``, in file order."""
        table = self._by_function.get(path)
        if table is None:
            table = self._by_function[path] = defaultdict(list)
            for site in self._facts[path].calls:
                table[site.function].append(site)
            table.default_factory = None
        return table

    @property
    def has_shared_parameters(self) -> bool:
        return self._shared_count > 0

    def _arguments_of(self, path: str) -> dict[tuple[str | None, str], list[tuple[str, str]]]:
        """(function, callee) -> (slot, source) of one file's calls with arguments that may land."""
        table = self._file_arguments.get(path)
        if table is None:
            table = self._file_arguments[path] = {}
            for owner, slot, function, source in self._landing_arguments(path):
                table.setdefault((function, owner[4:]), []).append((slot, source))
        return table

    def _landing_arguments(self, path: str) -> list[tuple]:
        """The argument bindings (``arg:<callee>``) of one file's calls that may land, in order."""
        found = self._landing_args.get(path)
        if found is None:
            lands, owners = self._lands, self._landing_owners
            found = self._landing_args[path] = []
            for b in self._facts[path].types.bindings:
                landing = owners.get(b[0])
                if landing is None:
                    owner = b[0]
                    landing = owners[owner] = owner[:4] == "arg:" and lands[owner[4:]]
                if landing:
                    found.append(b)
        return found

    def _argument_groups(self) -> dict[tuple[str, str | None, str], list[tuple[str, str]]]:
        """(path, function, callee) -> (slot, source) of each call with arguments that may land."""
        if self._groups is None:
            self._groups = {(path, function, callee): args for path in sorted(self._facts)
                            for (function, callee), args in self._arguments_of(path).items()}
        return self._groups

    def use_parameters(self, table: dict, changed: set | None = None) -> set[tuple[str, str | None, str]]:
        """Take ``table`` as what flows into parameters; forget the answers that depended on
        the ``changed`` ones (all, when not given).  Returns the call sites (path, caller,
        callee) whose answers were forgotten."""
        self.types.parameters = table
        changed = set(table) if changed is None else changed
        self.types.forget(changed)
        shared = self._shared_count > 0
        self._shared_count = sum(1 for sources in table.values() if shared_parameter(sources))
        if shared != (self._shared_count > 0):
            self.reached.clear()  # every call's answer now does (or no longer does) include passed functions
        reached = self.reached
        keys = [k for k, deps in self._how_deps.items() if deps & changed]
        for key in keys:
            del self._how_deps[key]
            self._how_memo.pop(key, None)
            if self._targets_memo.pop(key, None) is not None:
                self._dropped_targets.add(key)
            self._passed_memo.pop(key, None)
            self._passed_deps.pop(key, None)
            reached.pop(key[:2], None)
        for key in [k for k, deps in self._passed_deps.items() if deps & changed]:
            del self._passed_deps[key]
            self._passed_memo.pop(key, None)
            reached.pop(key[:2], None)
        return set(keys)

    def call_targets(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, int]]:
        """The functions a call runs, each with the number of leading parameters the call
        does not fill (the receiver of a bound method or constructor)."""
        key = (path, caller, callee)
        out = self._targets_memo.get(key)
        if out is None:
            out = []
            for target, how in self.resolve_how(path, caller, callee):
                f = self.types.functions.get(target)
                if f is not None:
                    out.append((target, self._receiver_slots(path, caller, callee, f, how)))
            self._targets_memo[key] = out
        return out

    def _receiver_slots(self, path: str, caller: str | None, callee: str, f: FunctionDef, how: str) -> int:
        if f.class_name is None or "staticmethod" in f.decorators:
            return 0
        if "classmethod" in f.decorators or how in ("constructor", "__call__", "forward", "super", "self"):
            return 1
        receiver = callee.rpartition(".")[0]
        if receiver and "(" not in receiver and "[" not in receiver:
            self.types.begin()
            if any(v[0] == "k" for v in self.types.dotted(path, caller, receiver)):
                return 0  # `Base.method(obj, x)`: called through the class
        return 1

    def _may_land(self, callee: str) -> bool:
        if HANDED in callee:
            return self._may_land(callee.rpartition(HANDED)[2])
        last = _last_name(callee)
        if last in self.names or callee == "cls" or callee == "self.__class__" or callee.startswith("super()."):
            return True
        return last == callee and last in self.param_names  # `cb()`, not `x.view()`

    def resolve_how(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, str]]:
        """The tree functions a call runs, each with how it was found: through the types of
        the names on the way (``joins.values``), else by name as the plain resolver does."""
        key = (path, caller, callee)
        found = self._how_memo.get(key)
        if found is None:
            if callee.endswith(READ):  # a read's answer, asked again (``flow_arguments``)
                return self.resolve_read(path, caller, callee[:-len(READ)])
            found = self._typed(path, caller, callee)
            if self.types.last_deps:
                self._how_deps[key] = frozenset(self.types.last_deps)
            if not found and not self._holds_data(path, caller, callee):
                found = self._named(path, caller, callee)
            self._how_memo[key] = found
        return found

    def resolve_read(self, path: str, caller: str | None, chain: str) -> list[tuple[FuncKey, str]]:
        """The property getters reading the attribute chain ``chain`` runs: the attribute of
        each instance the receiver may hold, found through its MRO and the classes built on
        it (as a method call's overrides are).  Memoised with ``resolve_how``'s answers (under
        the chain with ``READ`` after it), so what flows into parameters forgets both alike."""
        key = (path, caller, chain + READ)
        found = self._how_memo.get(key)
        if found is None:
            types = self.types
            types.last_deps = types.begin()
            receiver, _, attr = chain.rpartition(".")
            found = []
            values = types.dotted(path, caller, receiver)
            for value in sorted(values, key=repr) if len(values) > 1 else values:
                if value[0] == "i":
                    for target, _ in types.targets(("b", value[1], attr)):
                        if target in self.properties and (target, "property") not in found:
                            found.append((target, "property"))
            if types.last_deps:
                self._how_deps[key] = frozenset(types.last_deps)
            self._how_memo[key] = found
        return found

    def _holds_data(self, path: str, caller: str | None, callee: str) -> bool:
        """Whether `self.x` is an attribute the class assigns (`self.x = shared_experts`):
        calling it runs what it holds, never a method found by name alone."""
        head, _, attr = callee.partition(".")
        if head != "self" or not attr or "." in attr or caller is None:
            return False
        cls = (path, caller.rpartition(".")[0])
        types = self.types
        return cls in types.classes and any((c[0], f"class:{c[1]}", attr) in types.bindings for c in types.mro(cls))

    def _typed(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, str]]:
        types = self.types
        types.last_deps = types.begin()
        head, dot, rest = callee.partition(".")
        values = types.dotted(path, caller, callee)
        if "[]" in callee:
            base = "dispatch"
        elif "()" in callee and head != "super()":
            base = "result"
        elif head == "super()":
            base = "super"
        elif not dot:
            base = "name"
        elif head in ("self", "cls"):
            base = "self" if "." not in rest else "attribute"
        elif caller is not None and (head in self._params(path, caller) or (path, f"def:{caller}", head) in types.bindings):
            base = "local"
        else:
            base = "module"
        out: list[tuple[FuncKey, str]] = []
        for value in sorted(values, key=repr) if len(values) > 1 else values:
            for target, how in types.targets(value):
                item = (target, how or base)
                if item not in out:
                    out.append(item)
        return out

    def _params(self, path: str, caller: str) -> tuple[str, ...]:
        f = self.qualnames.get(path, {}).get(caller)
        return f.params if f is not None else ()

    def _named(self, path: str, caller: str | None, callee: str) -> list[tuple[FuncKey, str]]:
        found = self.resolve(path, caller, callee)
        if not found:
            return _NOTHING_HOW
        how = "fallback" if callee.partition(".")[0] in ("self", "cls") else "name"
        return [(target, how) for target in found]

    def _closest(self, paths: list[str], near: str) -> list[str]:
        if len(paths) <= 1:
            return paths
        def shared(p: str) -> int:
            n = 0
            for a, b in zip(p.split("/"), near.split("/")):
                if a != b:
                    break
                n += 1
            return n
        best = max(shared(p) for p in paths)
        return sorted(p for p in paths if shared(p) == best)[:1]

    def _in_module(self, module: str, qualname: str, near: str) -> list[FuncKey]:
        paths = self._defining.get((module, qualname))
        if paths is None:
            init = f"{qualname}.__init__"
            paths = self._defining[(module, qualname)] = [
                p for p in self.by_module.get(module, ()) if qualname in self.qualnames[p] or init in self.qualnames[p]
            ]
        out: list[FuncKey] = []
        for p in self._closest(paths, near):
            table = self.qualnames[p]
            out.append((p, qualname if qualname in table else f"{qualname}.__init__"))
        return out

    def resolve(self, path: str, caller: str | None, callee: str) -> list[FuncKey]:
        # answers are kept per (path, what of the caller the callee depends on, callee): the
        # caller's class for `self.f`/`cls.f`/`cls()`, nothing for bare names (after the
        # caller's own nested functions) and for dotted names
        if callee.rpartition(".")[2] not in self.names and callee != "cls" and callee != "self.__class__":
            return _NOTHING
        head, dot, rest = callee.partition(".")
        context: str | None = None
        module_call = False
        if callee == "cls" or callee == "self.__class__" or (head in ("self", "cls") and dot and "." not in rest):
            context = _class_of(caller)
        elif not dot:
            if caller:
                local = f"{caller}.<locals>.{callee}"
                if local in self.qualnames.get(path, ()):
                    return [(path, local)]
            caller = None  # nothing else of the caller matters
        else:  # dotted: `module.f`, `module.Class.f`, or nothing of the tree (`torch.cat`)
            caller = None
            module_call = True
        key = (path, context, callee)
        found = self._memo.get(key)
        if found is None:
            if module_call and not self._may_be_module_call(callee):
                found = self._memo[key] = []
            else:
                found = self._memo[key] = self._resolve(path, caller, callee)
        return found  # shared with the memo: callers only read it

    def _methods_in(self, path: str) -> dict[str, str]:
        """Method name -> the first (sorted) qualname of a method so named in ``path``."""
        methods = self._methods_by_path.get(path)
        if methods is None:
            methods = {}
            for q in sorted(self.qualnames.get(path, {})):
                f = self.qualnames[path][q]
                if f.class_name is not None and "<locals>" not in q:
                    methods.setdefault(f.name, q)
            self._methods_by_path[path] = methods
        return methods

    def _may_be_module_call(self, callee: str) -> bool:
        """Whether some leading part of dotted ``callee`` names a module of the tree (else
        it resolves to nothing from any file: `torch.cat`, `np.zeros`)."""
        known = self._module_calls.get(callee)
        if known is None:
            parts = callee.split(".")
            known = self._module_calls[callee] = any(".".join(parts[:split]) in self.by_module for split in range(len(parts) - 1, 0, -1))
        return known

    def _resolve(self, path: str, caller: str | None, callee: str) -> list[FuncKey]:
        table = self.qualnames.get(path, {})
        if callee == "cls" or callee == "self.__class__":
            cls = _class_of(caller)
            return [(path, f"{cls}.__init__")] if cls and f"{cls}.__init__" in table else []
        parts = callee.split(".")
        if parts[0] in ("self", "cls") and len(parts) == 2:
            name = parts[1]
            cls = _class_of(caller)
            if cls and f"{cls}.{name}" in table:
                return [(path, f"{cls}.{name}")]
            local = self._methods_in(path).get(name)
            if local:
                return [(path, local)]
            candidates = self.methods_by_name.get(name, [])
            return list(candidates) if len(candidates) == 1 else []
        if len(parts) == 1:
            name = parts[0]
            if caller and f"{caller}.<locals>.{name}" in table:
                return [(path, f"{caller}.<locals>.{name}")]
            if name in table:
                return [(path, name)]
            if f"{name}.__init__" in table:
                return [(path, f"{name}.__init__")]
            return []
        # dotted: module.function, module.Class.method, module.Class
        for split in range(len(parts) - 1, 0, -1):
            module, qual = ".".join(parts[:split]), ".".join(parts[split:])
            if module in self.by_module:
                found = self._in_module(module, qual, path) or self._reexported(module, qual, path, 0)
                if found:
                    return found
        return []

    def _reexported(self, module: str, qualname: str, near: str, depth: int) -> list[FuncKey]:
        """What a module imports and so re-exports under ``qualname`` (a package's `__init__`:
        `from .common import *`, `from .network import is_port_available`), followed through
        ``MAX_REEXPORTS`` modules at most."""
        if depth >= MAX_REEXPORTS:
            return []
        head, dot, rest = qualname.partition(".")
        for p in self.by_module.get(module, ()):
            for name, origin in self._facts[p].aliases:
                if name == head:
                    origin_module, _, origin_name = origin.rpartition(".")
                    target = origin_name + dot + rest
                elif name.startswith("*"):
                    origin_module, target = origin, qualname
                else:
                    continue
                if origin_module in self.by_module and origin_module != module:
                    found = self._in_module(origin_module, target, near) or self._reexported(origin_module, target, near, depth + 1)
                    if found:
                        return found
        return []


@lru_cache(maxsize=1 << 18)  # asked of every call site several times per scan
def _last_name(callee: str) -> str:
    """The name a callee text ends in (`run` in `self.pool.run()[]`, the handed function's)."""
    last = callee.rpartition(HANDED)[2].rpartition(".")[2]
    while last.endswith("()") or last.endswith("[]"):
        last = last[:-2]
    return last



#: most modules a name a package re-exports is followed through (``Resolver._reexported``)
MAX_REEXPORTS = 4
#: rounds of ``Resolver.flow_arguments`` at most (each follows arguments one call further)
MAX_FLOW_ROUNDS = 4
#: most places one parameter's values are taken from
MAX_ARGUMENT_SOURCES = 8
#: the answer for callees no function of the tree is named after (shared: callers only read it)
_NOTHING: list[FuncKey] = []
_NOTHING_HOW: list[tuple[FuncKey, str]] = []


def _class_of(qualname: str | None) -> str | None:
    if not qualname or "." not in qualname:
        return None
    head = qualname.rsplit(".", 1)[0]
    return None if head.endswith("<locals>") else head



#: how an edge was found (``Edge.how``), in the order of their codes in ``FileResolutions``
HOWS = ("name", "fallback", "self", "attribute", "local", "module", "super", "dispatch", "constructor",
        "__call__", "forward", "inherited", "override", "subclass", "result", "callback", "property")
#: after an attribute chain, the key of its read's answer among the calls' (``resolve_read``)
READ = "\0read"
HOW_CODES = {how: code for code, how in enumerate(HOWS)}

