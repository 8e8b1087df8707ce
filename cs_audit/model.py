"""Every type cs-audit passes between its steps.

Facts (``FileFacts`` and what it holds) are a pure function of one file's bytes
and the rule set: frozen, picklable, no CST nodes.  Joins and analysis turn
facts into ``Finding``/``Switch`` rows; renderers turn those into text.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

Frequency = Literal["step", "request", "round", "layer", "once", "unknown"]
#: the switch name of a site gated only by a log-level check (`logger.isEnabledFor(DEBUG)`)
LEVEL_GATE = "<log level>"
#: a function this short (lines, `def` to end) that only wraps gated emitters is itself one;
#: the joins read ``FunctionDef.body_lines`` through this comparison alone (see ``reuse``)
SMALL_BODY_LINES = 40
#: hot frequencies, most frequent first (per-layer work runs L times a step ...)
HOT_FREQUENCIES: tuple[Frequency, ...] = ("layer", "request", "round", "step")
#: switch categories that turn on debug output (the others configure the engine)
DEBUG_CATEGORIES = ("log", "trace", "dump", "level", "profile", "output-dir")

GateKind = Literal["env", "call", "name", "level", "flag"]
Resolution = Literal["exact", "heuristic"]
SetterKind = Literal["set", "passthrough", "commented", "off"]
SetterSource = Literal["shell", "dotenv", "docker", "make", "ci", "python"]
ErrorKind = Literal[
    "syntax", "encoding", "binary", "too-large", "io", "symlink",
    "parser-crash", "timeout", "internal",
]


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file found by discovery; ``path`` is POSIX and relative to the root."""

    path: str
    abspath: str
    kind: str  # "python" | "shell" | "dotenv" | "docker" | "make" | "ci"


@dataclass(frozen=True, slots=True)
class FileError:
    path: str
    kind: ErrorKind
    message: str


@dataclass(frozen=True, slots=True)
class GateRef:
    """One operand of a condition that may decide whether code runs.

    ``kind``: ``env`` (a direct env read of ``ref``), ``call`` (a call of ``ref``,
    maybe an env-reading helper; ``args`` holds its literal string arguments),
    ``name`` (a name/attribute, maybe a constant derived from an env read),
    ``level`` (``logger.isEnabledFor``/level compare), ``flag`` (a debug-looking
    config flag that is not an env read).
    ``active_when_set``: the guarded code runs when the operand is truthy/high
    (False for ``if not X:`` bodies, ``else`` branches of ``if X:``, and the rest
    of a block after ``if X: return``).
    """

    kind: GateKind
    ref: str
    args: tuple[str, ...] = ()
    active_when_set: bool = True


@dataclass(frozen=True, slots=True)
class FunctionDef:
    qualname: str
    name: str
    class_name: str | None
    line: int
    end_line: int
    params: tuple[str, ...]
    returns_value: bool
    #: hash of the body with locals/params renamed positionally (duplicate-helper)
    body_hash: str
    body_lines: int
    decorators: tuple[str, ...]
    #: `if <cond>: return` in the top-level body: gates everything after it
    entry_gates: tuple[GateRef, ...] = ()
    #: literal string defaults of parameters (`def enabled(name="RECOMPACT_TRACE")`)
    param_defaults: tuple[tuple[str, str], ...] = ()
    #: the name matches the rules' ``debug_name_pattern`` (`dump_state`, `_trace`): matched once
    #: per distinct name in the worker, not for every function of the tree in the joins
    debug_named: bool = False


@dataclass(frozen=True, slots=True)
class EnvRead:
    #: the env var name; None when it cannot be resolved statically
    var: str | None
    #: when the key is one of the function's parameters: that parameter's name
    var_param: str | None
    via: str  # os.getenv | os.environ.get | os.environ[] | in os.environ | ... | registry
    default: str | None
    function: str | None
    line: int
    end_line: int
    per_call: bool
    #: module constant or `self.x` attribute the value is stored in, if any
    assigned_to: str | None
    gates: tuple[GateRef, ...]
    loop_depth: int
    code: str
    #: the function's result depends on this read (returned, or decides a return)
    returned: bool = False
    #: source of the innermost loop's iterable ("" outside loops, "while" for while loops)
    loop_iter: str = ""


@dataclass(frozen=True, slots=True)
class CallSite:
    """Any call in the file, with the context the analyses need."""

    callee: str  # dotted name after import-alias resolution ("os.getenv", "self._diag")
    function: str | None
    line: int
    end_line: int
    gates: tuple[GateRef, ...]
    loop_depth: int
    #: literal string value of each positional argument (None where not literal)
    literal_args: tuple[str | None, ...]
    #: formatting work done in the arguments: f-string, format, percent, concat, json.dumps
    eager: tuple[str, ...]
    #: callees of calls nested inside the arguments (syncs, helpers, expensive work)
    arg_calls: tuple[str, ...]
    role: str | None  # log | print | stdwrite | write | dump | open | flush | sync | timestamp
    level: str | None  # logging level for role=log
    resolution: Resolution
    #: inside the arguments of another call whose role is an emitter
    in_emitter_args: bool
    #: receiver text for methods (`self._fh` of `self._fh.flush()`)
    receiver: str | None
    #: open(): mode and buffering literal; timestamp: whether it builds a path
    mode: str | None
    line_buffered: bool
    builds_path: bool
    #: open()/with target the handle is bound to
    bound_to: str | None
    code: str
    #: the call's result decides the enclosing function's result
    returned: bool = False
    #: source of the innermost loop's iterable ("" outside loops, "while" for while loops)
    loop_iter: str = ""
    #: open()/dump: the base name of the file written, `*` for unknown parts and `{p}`
    #: for the function's parameter p (`{name}.jsonl`)
    path_pattern: str | None = None


def holds_fact(site: CallSite) -> bool:
    """Whether a call site holds a fact beyond being a call: a role (emitter, sync, open ...),
    eager arguments, calls in its arguments or a written path.  The others are plain call
    edges, which only the call graph reads (where they land in the tree)."""
    return site.role is not None or bool(site.eager) or bool(site.arg_calls) or bool(site.path_pattern)


class CallSites:
    """``FileFacts.calls``: a file's call sites in file order, a read-only sequence of
    ``CallSite`` (index, slice, iterate; equal to another ``CallSites`` of the same sites).

    Most sites of a tree are plain call edges (``holds_fact`` false: 19 of 20 in SGLang),
    and a scan that reuses stored call resolutions reads only those that land in the tree
    (one in five).  So the plain ones are pickled as columns, one per ``CallSite`` field
    (a column whose values are all equal as its one value), and built as objects only when
    read: loading a tree's facts makes a few tuples per file instead of an object per
    call.  The sites that hold facts (``facts``, what the rules' passes read) are kept
    as objects."""

    __slots__ = ("_all", "_built", "_facts", "_parts", "_plain_row")

    def __init__(self, sites: Iterable[CallSite] = ()) -> None:
        self._all: tuple[CallSite, ...] | None = tuple(sites)
        #: (fact sites, their indices, columns of the plain sites, number of sites)
        self._parts: tuple[tuple[CallSite, ...], tuple[int, ...], tuple[tuple[object, ...], ...], int] | None = None
        self._built: dict[int, CallSite] | None = None  # plain sites built so far (restored form)
        self._facts: tuple[CallSite, ...] | None = None
        #: a plain site's field values with the constant columns filled in, and the other columns
        self._plain_row: tuple[list[object], tuple[tuple[int, tuple[object, ...]], ...]] | None = None

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return _restore_call_sites, self.parts()

    def parts(self) -> tuple[tuple[CallSite, ...], tuple[int, ...], tuple[tuple[object, ...], ...], int]:
        """The pickled form: the sites that hold facts, their indices, the columns of the others
        and the number of sites."""
        if self._parts is None:
            sites = self._all or ()
            facts: list[CallSite] = []
            fact_at: list[int] = []
            rows: list[tuple[object, ...]] = []
            for index, site in enumerate(sites):
                if holds_fact(site):
                    facts.append(site)
                    fact_at.append(index)
                else:
                    rows.append(_call_site_row(site))
            columns = tuple(_column(values) for values in zip(*rows))
            self._parts = (tuple(facts), tuple(fact_at), columns, len(sites))
        return self._parts

    @property
    def facts(self) -> tuple[CallSite, ...]:
        """The sites that hold a fact (``holds_fact``), in file order."""
        if self._facts is None:
            self._facts = self.parts()[0]
        return self._facts

    def edge_sites(self) -> Iterator[tuple[int, str, str | None, str | None]]:
        """(index, callee, function, role) of every site, in order, without building the plain
        ones (whose role is None): what call resolution reads."""
        if self._all is not None:
            for index, site in enumerate(self._all):
                yield index, site.callee, site.function, site.role
            return
        facts, fact_at, columns, count = self._parts  # type: ignore[misc]
        if not columns:
            for index, site in zip(fact_at, facts):
                yield index, site.callee, site.function, site.role
            return
        callees, functions = columns[_CALLEE], columns[_FUNCTION]
        plain = count - len(facts)
        if len(callees) < plain:
            callees = callees * plain
        if len(functions) < plain:
            functions = functions * plain
        fact_index = fact_at[0] if fact_at else count
        k = j = 0
        for index in range(count):
            if index == fact_index:
                site = facts[k]
                yield index, site.callee, site.function, site.role
                k += 1
                fact_index = fact_at[k] if k < len(fact_at) else count
            else:
                yield index, callees[j], functions[j], None
                j += 1

    def __len__(self) -> int:
        return len(self._all) if self._all is not None else self._parts[3]  # type: ignore[index]

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if self._all is not None:
            return self._all[index]
        if index.__class__ is slice:
            return tuple(self[i] for i in range(*index.indices(len(self))))
        facts, fact_at, columns, count = self._parts  # type: ignore[misc]
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("call site index out of range")
        built = self._built
        site = built.get(index)  # type: ignore[union-attr]
        if site is None:
            k = bisect_left(fact_at, index)
            if k < len(fact_at) and fact_at[k] == index:
                return facts[k]
            j = index - k  # the index among the plain sites
            if self._plain_row is None:
                self._plain_row = ([c[0] if len(c) == 1 else None for c in columns],
                                   tuple((n, c) for n, c in enumerate(columns) if len(c) > 1))
            row, varying = self._plain_row
            row = row.copy()
            for n, column in varying:
                row[n] = column[j]
            site = built[index] = _restore_CallSite(*row)  # type: ignore[index]  # noqa: F821
        return site

    def __iter__(self) -> Iterator[CallSite]:
        if self._all is None:
            self._all = tuple(self[i] for i in range(len(self)))
            self._built = None
        return iter(self._all)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not CallSites:
            return NotImplemented
        return self is other or self.parts() == other.parts()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self.parts())

    def __repr__(self) -> str:
        return f"CallSites({tuple(self)!r})"


def _restore_call_sites(facts: tuple[CallSite, ...], fact_at: tuple[int, ...], columns: tuple[tuple[object, ...], ...],
                        count: int) -> CallSites:
    """A ``CallSites`` from its ``parts`` (what pickle calls): no plain site built yet."""
    sites = CallSites.__new__(CallSites)
    sites._all = None
    sites._parts = (facts, fact_at, columns, count)
    sites._built = {}
    sites._facts = facts
    sites._plain_row = None
    return sites


def _column(values: tuple[object, ...]) -> tuple[object, ...]:
    """``values``, or its one value when all are equal and of one type (a column of the plain sites)."""
    first = values[0]
    if values.count(first) == len(values):
        cls = first.__class__
        if all(v.__class__ is cls for v in values):
            return (first,)
    return values


_CALL_SITE_FIELDS = tuple(f for f in CallSite.__dataclass_fields__)  # type: ignore[attr-defined]
_call_site_row = operator.attrgetter(*_CALL_SITE_FIELDS)
_CALLEE, _FUNCTION = _CALL_SITE_FIELDS.index("callee"), _CALL_SITE_FIELDS.index("function")


@dataclass(frozen=True, slots=True)
class EnvSetter:
    var: str
    path: str
    line: int
    value: str | None
    kind: SetterKind
    source: SetterSource


@dataclass(frozen=True, slots=True)
class FileFacts:
    path: str
    module: str  # dotted module name derived from the path
    #: local name -> dotted origin ("np" -> "numpy", "getenv" -> "os.getenv")
    aliases: tuple[tuple[str, str], ...]
    functions: tuple[FunctionDef, ...]
    env_reads: tuple[EnvRead, ...]
    calls: CallSites
    #: (line, path) of the literal output paths the file writes to (`open("/tmp/x/" ...)`, an
    #: output-dir env var's default)
    literal_paths: tuple[tuple[int, str], ...] = ()
    #: functions (None = module level) that write os.environ: launchers
    env_exporters: tuple[str | None, ...] = ()
    #: (line, text) of file names/globs the file mentions (`"sched.jsonl"`, `step_*.jsonl`)
    file_refs: tuple[tuple[int, str], ...] = ()
    #: env vars this module sets for child processes (a Python launcher)
    setters: tuple[EnvSetter, ...] = ()


@dataclass(frozen=True, slots=True)
class ScriptFacts:
    """A shell runner, .env, Makefile, Dockerfile or CI file: what it sets and reads."""

    path: str
    setters: tuple[EnvSetter, ...]
    file_refs: tuple[tuple[int, str], ...]
    #: (line, pattern) of `grep PATTERN` in pipelines
    greps: tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class BlameInfo:
    commit: str  # short sha
    date: str  # YYYY-MM-DD
    subject: str
    author: str = ""


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    path: str
    line: int
    end_line: int
    function: str | None
    switch: str | None
    frequency: Frequency
    gpu_sync: bool
    message: str
    fingerprint: str
    code: str = ""
    cost_us: float = 0.0
    eager_kinds: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = field(default=())


@dataclass(frozen=True, slots=True)
class SwitchRead:
    path: str
    line: int
    function: str | None
    per_call: bool


@dataclass(frozen=True, slots=True)
class GatedSite:
    """An emitter, dump, open or sync that runs only with the switch set."""

    path: str
    line: int
    function: str | None
    role: str
    work: str  # what one event does: "log line (info), f-string", "torch.save", ".item()"
    frequency: Frequency
    gpu_sync: bool
    code: str


@dataclass(frozen=True, slots=True)
class Switch:
    name: str
    category: str
    reads: tuple[SwitchRead, ...]
    setters: tuple[EnvSetter, ...]
    readers: tuple[tuple[str, int, str], ...]  # (path, line, pattern)
    added_in: BlameInfo | None
    added_in_note: str | None
    gated_sites: int
    gpu_sync: bool
    disposition: str  # KEEP | MERGE | REMOVE
    merge_into: str | None
    reasons: tuple[str, ...]
    sites: tuple[GatedSite, ...] = ()
    #: base names of the files its emitters write
    files: tuple[str, ...] = ()
    #: id of the disposition rule that decided, or "decisions-file"
    decided_by: str = ""
    #: where the switch lands in the minimal switch set (a trace level, the dump list, ...)
    proposed_level: str = ""


@dataclass(frozen=True, slots=True)
class DuplicateSite:
    path: str
    line: int
    function: str


@dataclass(frozen=True, slots=True)
class DuplicateGroup:
    name: str
    sites: tuple[DuplicateSite, ...]


@dataclass(frozen=True)
class AuditResult:
    root: str
    commit: str | None
    findings: tuple[Finding, ...]
    switches: tuple[Switch, ...]
    duplicates: tuple[DuplicateGroup, ...]
    errors: tuple[FileError, ...]
    files_scanned: int
    history_note: str | None = None
    timings: tuple[tuple[str, float], ...] = ()
    #: switches whose disposition came from the project's cs-audit.decisions.yaml
    overridden: tuple[str, ...] = ()


# -- what the CI commands and the SARIF/GitHub renderers need besides the audit

INVALID = "invalid-suppression"
UNUSED = "unused-suppression"
SKIPPED = "file-skipped"
NOTIFICATION_IDS = {
    INVALID: "a `# cs-audit: ignore[...]` comment without a reason, without a known rule id, or malformed: it suppresses nothing",
    UNUSED: "a `# cs-audit: ignore[...]` comment that matches no finding on its line or statement",
    SKIPPED: "a file cs-audit could not analyse (syntax, encoding, size, ...): its findings are unknown",
}
#: error kinds that mean the scan did not finish its job (exit 2 in ``check``)
INCOMPLETE = frozenset({"parser-crash", "timeout", "internal", "io"})


@dataclass(frozen=True, slots=True)
class Notification:
    """Something about the run that is not a finding: a bad suppression, a skipped file."""

    id: str  # one of NOTIFICATION_IDS
    path: str
    line: int | None
    message: str
    level: str = "warning"  # SARIF notification level: error | warning | note


@dataclass(frozen=True)
class Suppressed:
    """The result of applying suppressions to an audit."""

    kept: tuple[Finding, ...]
    #: fingerprint -> the reason of the suppression that silenced it
    suppressed: dict[str, str]
    notes: tuple[Notification, ...]

    @property
    def suppressed_findings(self) -> int:
        return len(self.suppressed)


@dataclass(frozen=True)
class ReportContext:
    #: the scanned base directory inside the repository ("" at the top or outside git)
    prefix: str
    suppressed: Suppressed
    #: suppression problems, then skipped files
    notes: tuple[Notification, ...]


@dataclass(frozen=True)
class Gates:
    """rule id -> True when only default-on sites (``switch`` null) of it gate."""

    rules: dict[str, bool]

    def gates(self, f: Finding) -> bool:
        if f.rule not in self.rules:
            return False
        return f.switch is None or not self.rules[f.rule]

    def describe(self) -> str:
        return ", ".join(f"{r} (no switch)" if only else r for r, only in self.rules.items())


@dataclass(frozen=True, slots=True)
class BaselineEntry:
    fingerprint: str
    rule: str
    path: str
    line: int
    function: str | None
    code: str


@dataclass
class CheckOutcome:
    gates: Gates
    new: list[Finding] = field(default_factory=list)
    fixed: list[BaselineEntry] = field(default_factory=list)
    gating: int = 0  # gating findings before baseline/--since filtering
    moved: int = 0
    since: str | None = None  # full sha
    baseline: str | None = None  # path as given
    incomplete: list[str] = field(default_factory=list)  # why the check could not complete


def _slot_filler(cls: type) -> type | None:
    """A plain class with ``cls``'s slots (same names, same order, so the same layout) and no
    ``__setattr__`` of its own: ``obj.x = v`` on it is a plain slot store, which the
    interpreter specialises (``STORE_ATTR_SLOT``), ~4x faster than calling a slot
    descriptor's ``__set__``.  An object is filled as one of these and then given its
    class (``obj.__class__ = cls``: allowed between classes of the same layout).  None when
    this interpreter refuses the class switch (then the descriptors fill the slots)."""
    filler = type(f"_{cls.__name__}Slots", (), {"__slots__": cls.__slots__, "__module__": __name__})  # type: ignore[attr-defined]
    try:
        probe = object.__new__(filler)
        probe.__class__ = cls
    except TypeError:
        return None
    return filler if type(probe) is cls else None


def _fast_init(cls: type, fields: tuple, scope: dict[str, object], filler: type | None) -> None:
    """Give ``cls`` an ``__init__`` with the dataclass's signature (same parameters, order and
    defaults) that fills the slots as ``_restore_<Class>`` does (the object is a ``filler``
    while it is filled): the frozen dataclass's own sets each field with
    ``object.__setattr__`` by name, and the index builds call sites by the hundred thousand.
    Left as it is for a class with a default factory or a keyword-only field."""
    import dataclasses

    if any(f.default_factory is not dataclasses.MISSING or f.kw_only for f in fields):
        return
    params = []
    for f in fields:
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
    scope.update({f"_set_{f.name}": getattr(cls, f.name).__set__ for f in fields})
    def by_descriptors(indent: str) -> str:
        return "".join(f"{indent}_set_{f.name}(self, {f.name})\n" for f in fields)

    if filler is not None:  # (a subclass, with a layout of its own, is filled through the descriptors)
        body = ("    if self.__class__ is _cls:\n        _set_class(self, _filler)\n"
                + "".join(f"        self.{f.name} = {f.name}\n" for f in fields)
                + "        self.__class__ = _cls\n    else:\n" + by_descriptors(" " * 8))
    else:
        body = by_descriptors(" " * 4)
    exec(f"def __init__(self, {', '.join(params)}):\n{body}", scope)  # noqa: S102 - our own field names
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__name__}.__init__"  # type: ignore[attr-defined]
    init.__module__ = __name__  # type: ignore[attr-defined]
    cls.__init__ = init  # type: ignore[misc]


def _pickle_by_slots() -> None:
    """Facts cross process boundaries (worker -> parent) and land in the cache by the
    hundred thousand: pickle each slotted dataclass as ``_restore_<Class>(*field values)``,
    a generated function that fills the slots of a ``_slot_filler`` object and then gives it
    its class (3x faster than calling each slot descriptor, which is itself ~1.6x faster
    than the frozen class's ``__init__``; the default for slotted dataclasses calls
    ``dataclasses.fields()`` per object on load, 5x slower still).  No class here has a
    ``__post_init__`` to skip."""
    import dataclasses
    import operator

    for cls in list(globals().values()):
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == __name__):
            continue
        fields = dataclasses.fields(cls)
        names = [f.name for f in fields]
        if not getattr(cls, "__slots__", None) or hasattr(cls, "__post_init__") or not all(f.init for f in fields):
            continue
        filler = _slot_filler(cls)
        scope: dict[str, object] = {"_new": object.__new__, "_cls": cls, "_filler": filler,
                                    "_set_class": object.__dict__["__class__"].__set__}
        if filler is not None:
            body = "".join(f"    obj.{name} = {name}\n" for name in names)
            exec(f"def restore({', '.join(names)}):\n    obj = _new(_filler)\n{body}    obj.__class__ = _cls\n    return obj\n", scope)  # noqa: S102
        else:
            setters = {f"_set_{name}": getattr(cls, name).__set__ for name in names}
            scope.update(setters)
            body = "".join(f"    _set_{name}(obj, {name})\n" for name in names)
            exec(f"def restore({', '.join(names)}):\n    obj = _new(_cls)\n{body}    return obj\n", scope)  # noqa: S102
        restore = scope["restore"]
        restore.__name__ = restore.__qualname__ = f"_restore_{cls.__name__}"  # type: ignore[attr-defined]
        restore.__module__ = __name__  # type: ignore[attr-defined]
        globals()[restore.__name__] = restore  # type: ignore[attr-defined]
        _fast_init(cls, fields, scope, filler)
        getter = operator.attrgetter(*names) if len(names) > 1 else (lambda obj, name=names[0]: (getattr(obj, name),))

        def reduce(obj: object, restore: object = restore, getter=getter) -> tuple[object, tuple[object, ...]]:
            return restore, getter(obj)

        cls.__reduce__ = reduce  # type: ignore[method-assign, assignment]


_pickle_by_slots()
