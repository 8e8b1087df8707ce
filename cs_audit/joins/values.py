"""What a name can hold, across files: the type inference of the call graph.

Per-file facts say where each name's values come from (``model.TypeFacts``: annotations,
constructor calls, other names, elements of containers); this module works them out into
abstract values over the whole tree, on demand from the call sites that ask (as Jarvis does
from its entry functions), context-insensitively (as PyCG's assignment graph):

    ("i", ClassKey)        an instance of a class of the tree
    ("k", ClassKey)        the class itself
    ("f", FuncKey)         a function or method, as a value
    ("b", ClassKey, name)  method ``name`` bound to an instance of the class
    ("m", path)            a module of the tree
    ("l", frozenset)       a container whose elements are those values

Answers are deterministic whatever was asked before: a result is kept for reuse only when
no cycle or cut shaped it, and every lookup is charged the work it took when first made, so
the budget of a query runs out at the same point whether or not parts of it were reused.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache

from cs_audit.model import PROPERTY_DECORATORS, ClassFacts, FileFacts, FuncKey, FunctionDef

ClassKey = tuple[str, str]
Value = tuple
#: most values one name keeps (the first, in a stable order)
MAX_VALUES = 8
#: most subclass overrides a call on a base-class receiver fans out to
MAX_OVERRIDES = 8
#: deepest chain of names a query follows, and most lookups it makes
MAX_DEPTH = 10
MAX_STEPS = 4000
_NONE: frozenset = frozenset()
#: the kinds of events under a tainted answer (``Types._log``)
_DONE, _CUT, _CYCLE, _SPAN = range(4)
#: tests: work every kept answer out again and compare it with its replay
REPLAY_CHECK = False
#: the steps after a callee's name chain: a call, a subscript, an attribute
_OPS = re.compile(r"\(\)|\[\]|\.[^.(\[]+")


#: the qualname, after a class's, under which the keywords its constructor calls pass are kept
#: as parameters (``Types.parameters``): the fields of a record with no `__init__` of the tree
#: (a dataclass, a msgspec struct) hold what they pass
FIELDS = ".<fields>"
#: the field name under which constructions passing arguments by position or from a mapping are
#: kept: what they set is not known, so no field holds only what keywords pass
FIELDS_OPEN = "*"


#: a parameter whose values come from more calling functions than this is shared: the
#: functions handed to it are not merged into it (context-insensitive merging would make
#: every caller run every other caller's function)
MAX_PARAMETER_CALLERS = 2


def shared_parameter(sources: tuple[tuple[str, str | None, str], ...]) -> bool:
    """Whether a parameter's sources (``Types.parameters``) come from several functions."""
    if len(sources) <= MAX_PARAMETER_CALLERS:
        return False
    return len({(where, caller) for where, caller, _ in sources}) > MAX_PARAMETER_CALLERS


#: annotations that say nothing of what a callable parameter runs
_OPEN_ANNOTATIONS = frozenset({"Callable", "Any", "object", "Awaitable", "Coroutine", "Optional"})


def _names_a_type(source: str) -> bool:
    """Whether a source is an annotation that names a type (not `Callable`, `Any`)."""
    while source[:2] in ("l:", "e:"):
        source = source[2:]
    return source[:2] in ("t:", "k:") and source[2:].rpartition(".")[2] not in _OPEN_ANNOTATIONS


class _Bindings:
    """(path, owner, name) -> [(function, source)]: each file's table made the first time
    a lookup reaches that file (a one-file scan's queries reach a few hundred files).  A
    module-level name (owner "") is looked up in a table of the file's module-level
    bindings alone: the MROs of every class of the tree (``Types.subclasses``) ask only
    those, of most files, and few of a file's bindings are module-level."""

    def __init__(self, facts: dict[str, FileFacts]) -> None:
        self._facts = facts
        self._tables: dict[str, dict[tuple[str, str], list[tuple[str | None, str]]]] = {}
        self._module_tables: dict[str, dict[str, list[tuple[str | None, str]]]] = {}
        self._names: dict[str, frozenset[str]] = {}

    def _table(self, path: str) -> dict[tuple[str, str], list[tuple[str | None, str]]]:
        table = self._tables.get(path)
        if table is None:
            table = self._tables[path] = defaultdict(list)
            ff = self._facts.get(path)
            for owner, name, function, source in ff.types.bindings if ff is not None else ():
                if owner[:4] != "arg:":  # arguments are read by ``Resolver.flow_arguments``
                    table[(owner, name)].append((function, source))
            table.default_factory = None
        return table

    def _module_table(self, path: str) -> dict[str, list[tuple[str | None, str]]]:
        """``_table``'s entries of owner "" (the same lists, in the same order), by name."""
        table: dict[str, list[tuple[str | None, str]]] = {}
        self._module_tables[path] = table
        ff = self._facts.get(path)
        if ff is not None:
            for _, name, function, source in [b for b in ff.types.bindings if b[0] == ""]:
                found = table.get(name)
                if found is None:
                    table[name] = [(function, source)]
                else:
                    found.append((function, source))
        return table

    def get(self, key: tuple[str, str, str], default=None):
        if key[1] == "":
            module = self._module_tables.get(key[0])
            if module is None:
                module = self._module_table(key[0])
            return module.get(key[2], default)
        table = self._tables.get(key[0])
        if table is None:
            table = self._table(key[0])
        return table.get((key[1], key[2]), default)

    def binds(self, path: str, name: str) -> bool:
        """Whether anything in ``path`` binds ``name`` (without making the file's table)."""
        names = self._names.get(path)
        if names is None:
            ff = self._facts.get(path)
            names = self._names[path] = frozenset(ff.types.names if ff is not None else ())
        return name in names

    def __contains__(self, key: tuple[str, str, str]) -> bool:
        return self.get(key) is not None


class Types:
    def __init__(self, facts: dict[str, FileFacts], functions: dict[FuncKey, FunctionDef],
                 module_files: dict[str, list[str]], closest) -> None:
        self.functions = functions
        self.module_files = module_files  # dotted module (every suffix) -> files
        self.closest = closest
        self.modules = {path: ff.module for path, ff in facts.items()}
        self.classes: dict[ClassKey, ClassFacts] = {}
        self.bindings = _Bindings(facts)
        self.aliases: dict[str, dict[str, str]] = {}
        #: the modules each file star-imports (`from pkg.mod import *`)
        self.star_imports: dict[str, tuple[str, ...]] = {}
        #: class -> method name -> its key (methods defined in the class body itself)
        self.methods: dict[ClassKey, dict[str, FuncKey]] = defaultdict(dict)
        for path, ff in facts.items():
            if path == "__init__.py" or path.endswith("/__init__.py"):
                # a package's imports are the names it re-exports (`from pkg import Engine`);
                # other modules' imports are followed only by their own call sites
                self.aliases[path] = dict(ff.aliases)
            stars = tuple(origin for name, origin in ff.aliases if name[:1] == "*")
            if stars:
                self.star_imports[path] = stars
            for c in ff.types.classes:
                self.classes[(path, c.qualname)] = c
            for f in ff.functions:
                head, dot, name = f.qualname.rpartition(".")
                if dot and (path, head) in self.classes:
                    self.methods[(path, head)][name] = (path, f.qualname)
        self._memo: dict[tuple, tuple[frozenset, int, frozenset]] = {}
        #: (path, function, parameter) -> where its arguments come from: (path, function, source)
        #: of each call that passes one (``Resolver.flow_arguments`` fills it)
        self.parameters: dict[tuple[str, str, str], tuple[tuple[str, str | None, str], ...]] = {}
        #: every parameter an answer has read (``Resolver.flow_arguments`` looks at their calls)
        self.demanded: set[tuple[str, str, str]] = set()
        #: parameter -> the memoised answers that read it
        self._readers: dict[tuple[str, str, str], list[tuple]] = defaultdict(list)
        #: the parameters the answer being worked out looked at (its dependencies)
        self._deps: set = set()
        #: the dependencies of the last query ``begin`` started
        self.last_deps: set = set()
        #: the queries being worked out -> the number each entered as
        self._active: dict[tuple, int] = {}
        #: (key, depth) -> (answer, work, parameters read, start, end, number) of an answer
        #: a cut shaped (``_cached``); ``_log[start:end]`` are the cuts under it
        self._kept: dict[tuple, tuple] = {}
        #: what each tainted answer met under it: (_DONE, key) worked out, (_CUT, key) cut by
        #: depth, (_CYCLE, key, number) a cycle on an open query, (_SPAN, start, end, number) a
        #: kept answer replayed
        self._log: list[tuple] = []
        self._serial = 0
        self.replays = 0
        #: cuts by the work budget (those answers are not kept), first-time class tables made
        #: under a query (their work is not done again), and whether one is being made
        self._step_cuts = 0
        self._side = 0
        self._in_mro = 0
        self._mro: dict[ClassKey, tuple[ClassKey, ...]] = {}
        self._subclasses: dict[ClassKey, list[ClassKey]] | None = None
        self.steps = 0
        self.tainted = 0
        self.depth = 0

    # ------------------------------------------------------------ one query
    def begin(self) -> set:
        """Start a query; returns the set that collects the parameters it depends on."""
        self.steps = 0
        self.depth = 0
        self._deps = set()
        return self._deps

    def _hit(self, hit: tuple[frozenset, int, frozenset]) -> frozenset:
        """A memoised answer, charged the work it first took, its parameters read again."""
        self.steps += hit[1]
        if hit[2]:
            self._deps |= hit[2]
        return hit[0]

    def _cached(self, key: tuple, compute) -> frozenset:
        """``compute()`` once per key, unless a cycle or a cut shaped its answer.  An answer a
        cut shaped is kept with the cuts under it (``_log``) and replayed where asked again at
        the same depth when every cut falls the same way (``_replays``): the answer, the work
        charged and the taint are then those working it out again would give."""
        hit = self._memo.get(key)
        if hit is not None:
            return self._hit(hit)
        active, log = self._active, self._log
        if key in active:
            self.tainted += 1
            log.append((_CYCLE, key, active[key]))
            return _NONE
        if self.depth >= MAX_DEPTH or self.steps >= MAX_STEPS:
            self.tainted += 1
            if self.depth < MAX_DEPTH:
                self._step_cuts += 1  # where the budget runs out depends on the work before
            log.append((_CUT, key))
            return _NONE
        depth = self.depth
        kept = self._kept.get((key, depth))
        replayable = False
        if kept is not None and self.steps + kept[1] < MAX_STEPS:
            again: list = []
            replayable = self._replays(kept[3], kept[4], kept[5], again)
            self.replays += replayable
            if replayable and not REPLAY_CHECK:
                self.steps += kept[1]
                if kept[2]:
                    self._deps |= kept[2]
                self.tainted += 1
                log.append((_DONE, key))
                log.append((_SPAN, kept[3], kept[4], kept[5]))
                log.extend(again)
                return kept[0]
        serial = self._serial
        self._serial = serial + 1
        active[key] = serial
        log.append((_DONE, key))
        start = len(log)
        self.depth = depth + 1
        before_steps, before_taint = self.steps, self.tainted
        before_cuts, before_side, before_memo = self._step_cuts, self._side, len(self._memo)
        # the parameters this answer reads (``_parameter`` adds to ``_deps``) are also read by
        # the answer that asked for it
        outer = self._deps
        mine: set = set()
        self._deps = mine
        self.steps += 1
        try:
            found = compute()
        finally:
            self.depth = depth
            del active[key]
            self._deps = outer
            if mine:
                outer |= mine
        if len(found) > MAX_VALUES:
            found = frozenset(sorted(found, key=repr)[:MAX_VALUES])
        deps = frozenset(mine) if mine else _NONE
        if replayable and kept is not None:  # REPLAY_CHECK
            now = (found, self.steps - before_steps, deps, self.tainted != before_taint, self._step_cuts == before_cuts,
                   len(self._memo) == before_memo)
            if now != (*kept[:3], True, True, True):
                raise ReplayMismatch(f"{key!r}: replay {kept[:3]!r} != {now!r}")
        if self.tainted == before_taint:
            del log[start - 1:]  # no cut under it: nothing to replay
            self._memo[key] = (found, self.steps - before_steps, deps)
            for parameter in mine:
                self._readers[parameter].append(key)
        elif self._step_cuts == before_cuts and self._side == before_side and not self._in_mro:
            self._kept[(key, depth)] = (found, self.steps - before_steps, deps, start, len(log), serial)
            for parameter in mine:
                self._readers[parameter].append((key, depth))
        return found

    def _replays(self, start: int, end: int, serial: int, again: list, top: bool = True) -> bool:
        """Whether working out again the answer whose cuts are ``_log[start:end]`` (its query
        entered as number ``serial``) would meet the same cuts now: none of the answers worked
        out under it is memoised or being worked out since, each cycle it met is still open.
        ``again`` gets the cycles on queries open outside it, with their numbers now."""
        memo, active, log = self._memo, self._active, self._log
        for i in range(start, end):
            event = log[i]
            kind = event[0]
            if kind == _DONE:
                if event[1] in memo or event[1] in active:
                    return False
            elif kind == _CUT:
                if event[1] in memo:
                    return False
            elif kind == _CYCLE:
                # a cycle on a query entered under it recurs; one outside it only when that
                # query is open now (the nested spans' outer cycles follow them, renumbered)
                if top and event[2] < serial:
                    number = active.get(event[1])
                    if number is None:
                        return False
                    again.append((_CYCLE, event[1], number))
            elif not self._replays(event[1], event[2], event[3], again, False):
                return False
        return True

    def forget(self, parameters: set) -> None:
        """Drop the answers that depended on ``parameters`` (their arguments changed)."""
        memo, readers, kept = self._memo, self._readers, self._kept
        for parameter in parameters:
            for key in readers.pop(parameter, ()):
                memo.pop(key, None)
                kept.pop(key, None)

    def _parameter(self, path: str, function: str, name: str) -> frozenset:
        """The values the calls of ``function`` pass as parameter ``name``."""
        key = (path, function, name)
        self._deps.add(key)
        self.demanded.add(key)
        sources = self.parameters.get(key, ())
        out: set = set()
        for where, caller, source in sources:
            out |= self.source(where, caller, source)
        if shared_parameter(sources):
            # a helper many places hand their own functions to (`run_in_parallel(fn0, fn1)`,
            # a decorator's `func`): inside it the parameter is no one of them; each call
            # that passes one runs it (``Resolver.passed_functions``)
            out = {v for v in out if v[0] not in ("f", "b")}
        return frozenset(out)

    # ------------------------------------------------------------ names and dotted names
    def dotted(self, path: str, function: str | None, name: str) -> frozenset:
        key = ("d", path, function, name)
        hit = self._memo.get(key)
        if hit is not None:  # the common case, without building the closure
            return self._hit(hit)
        return self._cached(key, lambda: self._dotted(path, function, name))

    def _dotted(self, path: str, function: str | None, name: str) -> frozenset:
        """The values of a callee text: a name chain (`a.b.c`, module paths included), then
        what calls (`()`), subscripts (`[]`) and attributes after it give (`make().run`)."""
        parts, ops, super_attr = _callee_steps(name)
        rest: list[str] | tuple[str, ...]
        if super_attr is not None:  # `super().m...`
            values = self._super(path, function, super_attr)
            rest = ()
        else:
            values = self.name(path, function, parts[0])
            rest = parts[1:]
            if not values:
                for split in range(len(parts), 0, -1):
                    files = self.module_files.get(".".join(parts[:split]))
                    if files:
                        values = frozenset(("m", p) for p in self.closest(files, path))
                        rest = parts[split:]
                        break
        for attr in rest:
            if not values:
                return _NONE
            values = self._each(values, lambda value, attr=attr: self.attribute(value, attr))
        for op in ops:
            if not values:
                return _NONE
            if op == "()":
                values = self._each(values, self.result)
            elif op == "[]":
                values = self._each(values, lambda value: self.elements(value, "__getitem__"))
            else:
                values = self._each(values, lambda value, attr=op[1:]: self.attribute(value, attr))
        return values

    def _each(self, values: frozenset, step) -> frozenset:
        if len(values) == 1:
            for value in values:
                return step(value)
        out: set = set()
        for value in sorted(values, key=repr):  # a fixed order: the budget runs out at the same point
            out |= step(value)
        return frozenset(out)

    def name(self, path: str, function: str | None, name: str) -> frozenset:
        key = ("n", path, function, name)
        hit = self._memo.get(key)
        if hit is not None:
            return self._hit(hit)
        return self._cached(key, lambda: self._name(path, function, name))

    def _name(self, path: str, function: str | None, name: str) -> frozenset:
        while function is not None:
            f = self.functions.get((path, function))
            if f is not None and f.class_name is not None and f.params and name == f.params[0] \
                    and "staticmethod" not in f.decorators:
                cls = (path, function.rpartition(".")[0])
                if cls in self.classes:
                    return frozenset({("k" if "classmethod" in f.decorators else "i", cls)})
            sources = self.bindings.get((path, f"def:{function}", name))
            nested = f"{function}.<locals>.{name}"
            found = self._sources(path, sources) if sources else _NONE
            if f is not None and name in f.params and not any(_names_a_type(s) for _, s in sources or ()):
                # what its callers pass (and its default), unless an annotation says what it
                # is (`x: torch.Tensor`)
                return found | self._parameter(path, function, name)
            if found:
                return found
            if sources and (path, nested) not in self.functions:
                return _NONE  # (a nested def whose decorators give nothing is itself)
            if (path, nested) in self.functions:
                return frozenset({("f", (path, nested))})
            if (path, nested) in self.classes:
                return frozenset({("k", (path, nested))})
            outer, sep, _ = function.rpartition(".<locals>.")
            function = outer if sep else None
        return self.module_name(path, name)

    def module_name(self, path: str, name: str) -> frozenset:
        key = ("g", path, name)
        hit = self._memo.get(key)
        if hit is not None:
            return self._hit(hit)
        return self._cached(key, lambda: self._module_name(path, name))

    def _module_name(self, path: str, name: str) -> frozenset:
        if (path, name) in self.classes:
            return frozenset({("k", (path, name))})
        sources = self.bindings.get((path, "", name))
        if (path, name) in self.functions:
            if sources and self.functions[(path, name)].decorators:
                found = self._sources(path, sources)  # `@dec def f`: f is what dec gave
                if found:
                    return found
            return frozenset({("f", (path, name))})
        if sources:
            return self._sources(path, sources)
        origin = self.aliases.get(path, {}).get(name)
        if origin is not None and origin != name:
            return self.dotted(path, None, origin)
        for module in self.star_imports.get(path, ()):
            for where in self.closest(self.module_files.get(module, []), path):
                found = self.module_name(where, name)
                if found:
                    return found
        return _NONE

    def _sources(self, path: str, sources: list[tuple[str | None, str]]) -> frozenset:
        out: set = set()
        for function, source in sources:
            out |= self.source(path, function, source)
        return frozenset(out)

    def source(self, path: str, function: str | None, source: str) -> frozenset:
        kind, rest = source[:2], source[2:]
        if kind == "r:":
            return self.dotted(path, function, rest)
        if kind == "t:":
            return frozenset(("i", v[1]) for v in self.dotted(path, function, rest) if v[0] == "k")
        if kind == "k:":
            return frozenset(v for v in self.dotted(path, function, rest) if v[0] == "k")
        if kind == "c:":
            out: set = set()
            for value in sorted(self.dotted(path, function, rest), key=repr):
                out |= self.result(value)
            return frozenset(out)
        if kind == "e:":
            return self._each(self.source(path, function, rest), self.elements)
        if kind == "l:":
            inner = self.source(path, function, rest)
            return frozenset({("l", inner)}) if inner else _NONE
        if kind == "f:":
            return frozenset({("f", (path, rest))}) if (path, rest) in self.functions else _NONE
        if kind == "w:":
            return self._decorated(path, function, rest)
        return _NONE

    def _decorated(self, path: str, function: str | None, rest: str) -> frozenset:
        """What `@dec def f` binds f to (``w:<dec callee>|...|<f's qualname>``, the decorators
        outermost first): the wrappers the outermost decorator of the tree defines (its
        nested functions) and the instances it makes, else f itself; a decorator from outside
        the tree (`@torch.inference_mode()` over `@timed`) leaves what the one below it gave.
        Not other functions its result may hold: a decorator that returns its parameter or a
        `partial` of itself would merge every function it decorates."""
        *callees, qualname = rest.split("|")
        out: set = set()
        for callee in callees:
            decorators = self.dotted(path, function, callee.partition("(")[0])
            values = self.dotted(path, function, callee)
            if not decorators and not values:
                continue
            owners = tuple(f"{v[1][1]}.<locals>." for v in decorators if v[0] == "f")
            for value in sorted(values, key=repr):
                # a decorator usable bare or called (`return inner(func)` when handed the
                # function, `return inner` when called with options): bare, it gives what
                # `inner(func)` gives, not `inner`
                both = _called_and_returned(self.bindings.get((value[1][0], f"def:{value[1][1]}", "<return>"), [])) \
                    if value[0] == "f" and "(" not in callee else frozenset()
                for made in self.result(value):
                    if made[0] == "f" and made[1][1].rpartition(".")[2] in both:
                        continue
                    if made[0] == "i" or (made[0] == "f" and made[1][1].startswith(owners)):
                        out.add(made)
            break
        me = ("f", (path, qualname))
        if qualname and (path, qualname) in self.functions:
            out.add(me)  # a wrapper runs it; a decorator that registers it returns it
        return frozenset(out)

    # ------------------------------------------------------------ attributes
    def attribute(self, value: Value, attr: str) -> frozenset:
        key = ("a", value, attr)
        hit = self._memo.get(key)
        if hit is not None:
            return self._hit(hit)
        return self._cached(key, lambda: self._attribute(value, attr))

    def _attribute(self, value: Value, attr: str) -> frozenset:
        kind = value[0]
        if kind == "m":
            path = value[1]
            found = self.module_name(path, attr)
            if found:
                return found
            files = self.module_files.get(f"{self.modules[path]}.{attr}")
            return frozenset(("m", p) for p in self.closest(files, path)) if files else _NONE
        if kind == "i" or kind == "k":
            cls = value[1]
            method = self.find_method(cls, attr)
            if method is not None:
                decorators = self.functions[method].decorators
                if decorators:  # `@timed def step(self)`: step is what timed gave, when known
                    wrapped = self.bindings.get((method[0], f"class:{method[1].rpartition('.')[0]}", attr))
                    found = self._sources(method[0], wrapped) if wrapped else _NONE
                    if found:
                        # the method itself stays a method of the receiver (overrides included)
                        return frozenset(("b", cls, attr) if kind == "i" and v == ("f", method) else v for v in found)
                if kind == "i" and any(d in PROPERTY_DECORATORS or d.endswith(".setter") for d in decorators):
                    return self.returns(method)
                if kind == "k" or "staticmethod" in decorators or "classmethod" in decorators:
                    return frozenset({("f", method)})
                return frozenset({("b", cls, attr)})
            for c in self.mro(cls):
                sources = self.bindings.get((c[0], f"class:{c[1]}", attr))
                if sources:
                    found = self._sources(c[0], sources)
                    if not found and kind == "i":
                        # a record's field (`get_x: Callable[[], bool]`): what its constructor calls pass
                        found = self._record_field(cls, attr)
                    return found
                nested = (c[0], f"{c[1]}.{attr}")
                if nested in self.classes:
                    return frozenset({("k", nested)})
            if kind == "i":
                subs = self.subclasses(cls)
                if any(attr in self.methods.get(sub, ()) for sub in subs):
                    return frozenset({("b", cls, attr)})  # a method only the classes built on it define
                # an attribute only the classes built on it assign (`self.child = self.run` in each)
                out: set = set()
                for sub in subs[:MAX_OVERRIDES]:
                    sources = self.bindings.get((sub[0], f"class:{sub[1]}", attr))
                    if sources:
                        out |= self._sources(sub[0], sources)
                return frozenset(out)
        return _NONE

    def record_field_sources(self, cls: ClassKey, attr: str) -> tuple[tuple[str, str | None, str], ...] | None:
        """(path, calling function, source) of what each construction of ``cls`` passes as its
        field ``attr`` by keyword, as far as the flow has followed them, when ``cls`` is a record
        (no `__init__` of the tree) with no subclass and no construction passes arguments by
        position or from a mapping; None otherwise."""
        if self.find_method(cls, "__init__") is not None or self.subclasses(cls) or \
                self._parameter(cls[0], cls[1] + FIELDS, FIELDS_OPEN) or self.parameters.get((cls[0], cls[1] + FIELDS, FIELDS_OPEN)):
            return None
        return self.parameters.get((cls[0], cls[1] + FIELDS, attr), ())

    def _record_field(self, cls: ClassKey, attr: str) -> frozenset:
        """What the constructions of a record pass as its field ``attr``
        (``record_field_sources``), when the tree gives a value for each; nothing otherwise."""
        sources = self.record_field_sources(cls, attr)
        if sources is None:
            return _NONE
        found = self._parameter(cls[0], cls[1] + FIELDS, attr)
        # (a value from outside the tree, `get_x=os.cpu_count`, may run anything)
        if any(not self.source(where, caller, source) for where, caller, source in sources):
            return _NONE
        return found

    def _super(self, path: str, function: str | None, attr: str) -> frozenset:
        """`super().m` in a method of class C: the next `m` after C in the MRO of C and of
        each class built on it (a mixin's `super()` reaches its sibling in the final class)."""
        if function is None:
            return _NONE
        cls = (path, function.rpartition(".")[0])
        if cls not in self.classes:
            return _NONE
        out: set = set()
        for sub in (cls, *self.subclasses(cls)[:MAX_OVERRIDES]):
            mro = self.mro(sub)
            for c in mro[mro.index(cls) + 1:] if cls in mro else ():
                method = self.methods.get(c, {}).get(attr)
                if method is not None:
                    out.add(("f", method))
                    break
        return frozenset(out)

    def elements(self, value: Value, protocol: str = "__iter__") -> frozenset:
        """What iterating (or, with ``__getitem__``, indexing) ``value`` gives: a container's
        elements, else what the class's own protocol methods return."""
        if value[0] == "l":
            return value[1]
        if value[0] != "i":
            return _NONE
        method = self.find_method(value[1], protocol)
        if method is None:
            return _NONE
        if protocol == "__getitem__":
            return self.returns(method)
        out: set = set()
        for iterator in sorted(self.returns(method), key=repr):
            if iterator[0] == "l":  # `__iter__` as a generator, or annotated `-> Iterator[T]`
                out |= iterator[1]
            elif iterator[0] == "i":
                step = self.find_method(iterator[1], "__next__")
                if step is not None:
                    out |= self.returns(step)
        return frozenset(out)

    # ------------------------------------------------------------ calls
    def result(self, value: Value) -> frozenset:
        """What calling ``value`` gives."""
        kind = value[0]
        if kind == "k":
            return frozenset({("i", value[1])})
        if kind == "f":
            return self.returns(value[1])
        if kind == "b":
            method = self.find_method(value[1], value[2])
            return self.returns(method) if method is not None else _NONE
        if kind == "i":
            for name in ("__call__", "forward"):
                method = self.find_method(value[1], name)
                if method is not None:
                    return self.returns(method)
        return _NONE

    def returns(self, key: FuncKey) -> frozenset:
        return self._cached(("r", key), lambda: self._returned(key))

    def _returned(self, key: FuncKey) -> frozenset:
        """What calling ``key`` gives: what its `return`s give (`return ShmCache(...)` in a
        factory annotated `-> BaseCache | None` builds that class alone), and its return
        annotation too when one of them gives nothing known."""
        owner = f"def:{key[1]}"
        returned = self.bindings.get((key[0], owner, "<return>"), [])
        annotated = self.bindings.get((key[0], owner, "<annotated>"), [])
        found = [self.source(key[0], function, source) for function, source in returned]
        out: set = set().union(*found)
        if not returned or not all(found):
            out |= self._sources(key[0], annotated)
        return frozenset(out)

    def targets(self, value: Value) -> list[tuple[FuncKey, str]]:
        """The functions calling ``value`` runs, each with how it was found."""
        kind = value[0]
        if kind == "f":
            return [(value[1], "")]
        if kind == "k":
            init = self.find_method(value[1], "__init__")
            return [(init, "constructor")] if init is not None else []
        if kind == "i":
            for name, how in (("__call__", "__call__"), ("forward", "forward")):
                method = self.find_method(value[1], name)
                if method is not None:
                    return [(method, how)]
            return []
        if kind == "b":
            # the receiver may be an instance of any class built on ``cls``: each runs the
            # `name` first in its own MRO (an override, or a mixin sibling's method)
            cls, name = value[1], value[2]
            out: list[tuple[FuncKey, str]] = []
            method = self.find_method(cls, name)
            if method is not None:
                out.append((method, "" if method[1].rpartition(".")[0] == cls[1] and method[0] == cls[0] else "inherited"))
            overrides = sorted({m for m in (self.find_method(sub, name) for sub in self.subclasses(cls)) if m is not None and m != method})
            if len(overrides) <= MAX_OVERRIDES:
                how = "override" if method is not None else "subclass"
                out.extend((m, how) for m in overrides)
            return out
        return []

    # ------------------------------------------------------------ classes
    def find_method(self, cls: ClassKey, name: str) -> FuncKey | None:
        for c in self.mro(cls):
            method = self.methods.get(c, {}).get(name)
            if method is not None:
                return method
        return None

    def mro(self, cls: ClassKey) -> tuple[ClassKey, ...]:
        """The class and its tree bases, depth first, each once (C3 on the usual shapes)."""
        known = self._mro.get(cls)
        if known is not None:
            return known
        self._mro[cls] = (cls,)  # a cycle of bases ends here
        self._side += 1
        self._in_mro += 1
        try:
            return self._make_mro(cls)
        finally:
            self._in_mro -= 1

    def _make_mro(self, cls: ClassKey) -> tuple[ClassKey, ...]:
        out = [cls]
        facts = self.classes.get(cls)
        for base in facts.bases if facts else ():
            for value in sorted(self.dotted_in_module(cls[0], base), key=repr):
                if value[0] == "k":
                    for c in self.mro(value[1]):
                        if c not in out:
                            out.append(c)
        # C3 keeps a base shared by several bases after all of them (mixins over one root)
        shared = [c for c in out[1:] if sum(c in self.mro(b) for b in out[1:] if b != c) > 1]
        if shared:
            out = [c for c in out if c not in shared] + shared
        self._mro[cls] = tuple(out)
        return self._mro[cls]

    def dotted_in_module(self, path: str, name: str) -> frozenset:
        saved = (self.steps, self.depth)
        self.steps, self.depth = 0, 0
        try:
            return self.dotted(path, None, name)
        finally:
            self.steps, self.depth = saved

    def subclasses(self, cls: ClassKey) -> list[ClassKey]:
        if self._subclasses is None:
            self._side += 1
            subs: dict[ClassKey, list[ClassKey]] = defaultdict(list)
            for c in sorted(self.classes):
                for base in self.mro(c)[1:]:
                    subs[base].append(c)
            self._subclasses = subs
        return self._subclasses.get(cls, [])



def _called_and_returned(sources: list[tuple[str | None, str]]) -> frozenset[str]:
    """The names a function both returns as they are and returns a call of (``Binding`` sources)."""
    called = {source[2:] for _, source in sources if source.startswith("c:")}
    return frozenset(source[2:] for _, source in sources if source.startswith("r:") and source[2:] in called)


@lru_cache(maxsize=1 << 16)  # the same callee texts are asked of from many functions
def _callee_steps(name: str) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """A callee text taken apart: its name chain's parts, the steps after it (`()`, `[]`,
    `.attr`), and for `super().m...` the attribute looked up through the MRO (the parts
    are then unused)."""
    cut = len(name)
    for mark in ("(", "["):
        at = name.find(mark)
        if at != -1 and at < cut:
            cut = at
    chain, tail = name[:cut], name[cut:]
    parts = tuple(chain.split("."))
    if parts[0] == "super" and tail.startswith("()."):
        attr, _, tail = tail[3:].partition(".")
        cut = min((i for i in (attr.find("("), attr.find("[")) if i != -1), default=len(attr))
        tail = attr[cut:] + ("." + tail if tail else "")
        return parts, tuple(_OPS.findall(tail)), attr[:cut]
    return parts, tuple(_OPS.findall(tail)), None


class ReplayMismatch(AssertionError):
    """``REPLAY_CHECK``: a kept answer's replay differs from working it out again."""
