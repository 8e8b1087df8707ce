"""Every type cs-audit passes between its steps.

Facts (``FileFacts`` and what it holds) are a pure function of one file's bytes
and the rule set: frozen, picklable, no CST nodes.  Joins and analysis turn
facts into ``Finding``/``Switch`` rows; renderers turn those into text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from operator import itemgetter
from typing import TYPE_CHECKING, Literal

from cs_audit.frequency import FrequencyName, is_hot
from cs_audit.records import record, tuple_record
from cs_audit.sources import IGNORED_FILES_COUNTED
from cs_audit.switches import (  # noqa: F401  (re-exported)
    CLASS_TESTED,
    DEFAULT_ON,
    DEREFERENCED,
    DYNAMIC_SWITCH,
    LEVEL_SWITCH,
    PARAM_FRESH,
    PARAM_TESTED,
    REQUEST_FIELD,
    SERVED_ARCHITECTURE,
    GateKind,
    GateRef,
    SwitchKind,
    SwitchRef,
    as_operand,
    by_text,
    closure_arg,
    closure_of,
    env_switch,
)

if TYPE_CHECKING:
    from cs_audit.sources import FileError, IgnoredFolder

#: a function of the tree, as the joins key it: (path, qualname)
FuncKey = tuple[str, str]
#: the call-site roles that emit a record or write output (what the emitter rules look at)
EMITTER_ROLES = frozenset({"log", "print", "stdwrite", "write", "dump"})
#: a function this short (lines, `def` to end) that only wraps gated emitters is itself one;
#: the joins read ``FunctionDef.body_lines`` through this comparison alone (see ``reuse``)
SMALL_BODY_LINES = 40
#: an env helper this short that only hands its reads on is an accessor: its reads are
#: reported at its call sites alone (read, like ``SMALL_BODY_LINES``, through a comparison)
ACCESSOR_BODY_LINES = 12

#: what kind of path a site is on: see ``cs_audit.extract.paths``
PathKind = Literal["normal", "error", "rare"]
#: how extraction saw a call site: ``read`` is an attribute read (`req.num_tokens`), kept as
#: a site because reading a property runs its getter; the joins give it an edge only to one
Resolution = Literal["exact", "heuristic", "read"]
#: decorators that make a method a property (a read of the attribute calls it)
PROPERTY_DECORATORS = frozenset({"property", "functools.cached_property", "cached_property"})
#: the endings of a property's other decorators (`@size.setter`)
PROPERTY_ACCESSORS = (".setter", ".getter", ".deleter")
SetterKind = Literal["set", "passthrough", "commented", "off"]
SetterSource = Literal["shell", "dotenv", "docker", "make", "ci", "python"]


#: joins a call's callee and a function handed to it in a plain call site's callee
#: (`sorted-><lambda1>`, `pool.submit->self._run`): the handed function runs at the call
#: when the call lands outside the tree
HANDED = "->"


def is_aside(path: str, globs: tuple[str, ...]) -> bool:
    """Whether ``path`` is under a folder one of ``globs`` (`tests/`, `benchmark*/`) names:
    a glob ending in `/` matches any folder of the path, another the path from its start."""
    folders = path.split("/")[:-1]
    for glob in globs:
        if glob.endswith("/"):
            if any(fnmatchcase(folder, glob[:-1]) for folder in folders):
                return True
        elif fnmatchcase(path, glob):
            return True
    return False


#: most characters of a site's code kept (whitespace runs made one space): a longer call is cut
CODE_CHARS = 160


@record
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
    #: 0-based character column of its `def` (or `lambda`) on ``line``
    col: int = 0
    #: the names it declares `global` (a handle it opens into one outlives the call)
    global_names: tuple[str, ...] = ()
    #: integer defaults of parameters (`def _diag(name, level=1)`): the level a call asks for
    #: when it passes none
    int_defaults: tuple[tuple[str, int], ...] = ()
    #: its blocks on an error or rare path (``extract.paths``), in the order the walk met them:
    #: (first line, last line, path kind, why, the guard's line)
    path_blocks: tuple[tuple[int, int, str, str, int], ...] = ()
    #: (first line, last line, the modulus's name, why, the guard's line) of each block that runs
    #: on every n-th call by a named modulus (`if self.ct % self.log_interval != 0: return`): rare
    #: when the modulus holds a large enough number by default (``joins.runs``)
    periodic_blocks: tuple[tuple[int, int, str, str, int], ...] = ()
    #: a predicate's `return <test>` (after assignments only): the gates of the test (the code
    #: a call of it guards runs only when they hold)
    returned_test: tuple[GateRef, ...] = ()
    #: of a function with several `return`s: (the gates under which it is taken, `false` for a
    #: falsy constant or no value, `true` for a truthy one, `test` for a returned test, `other`,
    #: the gates of the test) of each (``joins.gates``: what a call of it gives by default)
    returns: tuple[tuple[tuple[GateRef, ...], str, tuple[GateRef, ...]], ...] = ()
    #: True, False and None defaults of parameters (`def save(x, interpolate=False)`), as
    #: their repr: what a gate on the parameter sees when a call passes nothing
    const_defaults: tuple[tuple[str, str], ...] = ()
    #: the ``entry_gates`` of its leading `if <cond>: return False` statements (nothing or a
    #: false constant returned): a call of it tests false unless these hold
    false_entry_gates: tuple[GateRef, ...] = ()
    #: what a call returns when none of its leading `if <cond>: return ...` statements is
    #: taken: an int (`0`) or a dotted name (`Level.OFF`), with the conditions' gates (the
    #: value holds in a deployment where none of them does)
    fallback_return: str = ""
    fallback_gates: tuple[GateRef, ...] = ()
    #: the attribute every `return` reads off an object other than `self` (a getter, `return
    #: get_flags().moe.backend`): what a call of it gives is that record field
    returned_field: str = ""


@record
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
    #: 0-based character columns where the read starts on ``line`` and ends on ``end_line``
    #: (the statement's, where the read starts or ends on another line)
    col: int = 0
    end_col: int = 0
    #: callees of the calls the read is an argument of, innermost first (`int`,
    #: `os.path.join`, `open:w` with open()'s mode): where the value goes
    wrapped_by: tuple[str, ...] = ()
    #: the kind of path it is on (``PathKind``) and why (``extract.paths``)
    path_kind: PathKind = "normal"
    path_reason: str = ""
    #: the read compared with an int or a parameter (`int(getenv("L", "0")) >= level` in a
    #: `_diag(name, level)` helper): as ``GateRef.level``, the least value the test holds at
    level: str = ""
    #: how the expression around the read computes with its value (through conversions only):
    #: ``choice`` (the test of `a if X else b`; ``choice:<name>`` when a branch is a call,
    #: `Tracer() if X else None`, or an attribute, `logger.info if X else logger.debug`) or
    #: ``arithmetic`` (`x * X`, `n - X`); "" otherwise, and inside a message's text
    used_as: str = ""


@record
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
    #: 0-based character columns where the call starts on ``line`` and ends on ``end_line``
    #: (the statement's, where the call starts or ends on another line)
    col: int = 0
    end_col: int = 0
    #: the kind of path it is on (``PathKind``) and why (``extract.paths``)
    path_kind: PathKind = "normal"
    path_reason: str = ""
    #: the int literal of each of the first positional arguments (None where not one), () when
    #: none is: the level a call of a level helper asks (`kvtrace(2, ...)`)
    int_args: tuple[int | None, ...] = ()
    #: a sync on what a parameter holds (`x.cpu()`, `x[i].tolist()`, `x` not rebound before):
    #: that parameter, whose callers decide whether it is host data (``joins.host_data``)
    on_param: str = ""


def holds_fact(site: CallSite) -> bool:
    """Whether a call site holds a fact beyond being a call: a role (emitter, sync, open ...),
    eager arguments, calls in its arguments or a written path.  The others are plain call
    edges, which only the call graph reads (where they land in the tree)."""
    return site.role is not None or bool(site.eager) or bool(site.arg_calls) or bool(site.path_pattern)


#: the fields of a ``CallSite`` a plain call edge can hold (the others are empty there)
PLAIN_FIELDS = tuple(name for name in CallSite.__slots__
                     if name not in ("eager", "arg_calls", "role", "path_pattern", "path_kind", "path_reason", "on_param"))


class PlainCall(tuple):
    """A call site that holds no fact (``holds_fact`` false): only the call graph reads it,
    and most call sites are such, so it is a plain tuple of ``PLAIN_FIELDS`` (pickled and
    loaded by the interpreter's own tuple code) that reads like a ``CallSite``."""

    __slots__ = ()
    eager: tuple[str, ...] = ()
    arg_calls: tuple[str, ...] = ()
    role: str | None = None
    path_pattern: str | None = None
    path_kind: PathKind = "normal"
    path_reason: str = ""
    on_param: str = ""
    if TYPE_CHECKING:
        # properties over the items, one per ``PLAIN_FIELDS`` name (set below the class)
        callee: str
        function: str | None
        line: int
        end_line: int
        gates: tuple[GateRef, ...]
        loop_depth: int
        literal_args: tuple[str | None, ...]
        level: str | None
        resolution: Resolution
        in_emitter_args: bool
        receiver: str | None
        mode: str | None
        line_buffered: bool
        builds_path: bool
        bound_to: str | None
        code: str
        returned: bool
        loop_iter: str
        col: int
        end_col: int
        int_args: tuple[int | None, ...]

    @classmethod
    def of(cls, site: CallSite) -> PlainCall:
        return cls(getattr(site, name) for name in PLAIN_FIELDS)

    def returning(self) -> PlainCall:
        """This call with ``returned`` set: its result decides its function's result."""
        at = _RETURNED_AT
        return PlainCall((*self[:at], True, *self[at + 1:]))


_RETURNED_AT = PLAIN_FIELDS.index("returned")
for _index, _name in enumerate(PLAIN_FIELDS):
    setattr(PlainCall, _name, property(itemgetter(_index), doc=f"``CallSite.{_name}``"))
del _index, _name
tuple_record(PlainCall, tuple(str(f.type) for name in PLAIN_FIELDS for f in fields(CallSite) if f.name == name))


@record
@dataclass(frozen=True, slots=True)
class EnvSetter:
    var: str
    path: str
    line: int
    value: str | None
    kind: SetterKind
    source: SetterSource


@record
@dataclass(frozen=True, slots=True)
class ClassFacts:
    qualname: str
    #: the base classes as written, dotted after import-alias resolution
    bases: tuple[str, ...]
    #: the int constants of its body (`OFF = 0`, an enum's members): what a level names
    levels: tuple[tuple[str, int], ...] = ()
    #: the str constants of its body (`NULL = "null"`): what an enum's member holds
    strings: tuple[tuple[str, str], ...] = ()
    #: the bases written subscripted (`Action[int]`), dotted: not followed as bases, so a class
    #: so named has subclasses its family does not show (``components.held_classes``)
    subscripted: tuple[str, ...] = ()


#: where one name's values come from: ``(owner, name, function, source)``.  ``owner`` is
#: ``"def:Q"`` (a local or parameter of function Q; name ``<return>`` for its result),
#: ``"class:Q"`` (an attribute of class Q: `self.x = ...` in a method, or the class body) or
#: ``""`` (a module-level name); ``function`` is the function whose names ``source`` uses.
#: ``source``: ``t:D`` an instance of the annotated type D, ``k:D`` the class D itself,
#: ``c:D`` the result of calling D, ``r:D`` the value of D (D dotted, after import aliases),
#: ``e:S`` an element of what S gives (iteration, subscript), ``l:S`` a container whose
#: elements S gives.
Binding = tuple[str, str, "str | None", str]


@record
@dataclass(frozen=True, slots=True)
class TypeFacts:
    """What the names of a file can hold, as written: the call graph's type inference
    (``joins.values``) works these out across files."""

    classes: tuple[ClassFacts, ...] = ()
    bindings: tuple[Binding, ...] = ()
    #: the names ``bindings`` bind, each once (the joins' first check of a call)
    names: tuple[str, ...] = ()
    #: digest of ``classes`` and ``bindings`` (what the resolutions digest takes of them)
    digest: str = ""
    #: (function, callee, digest of its (slot, source) argument bindings, in order) of each
    #: call with arguments, in the order of the bindings: the resolutions digest takes those
    #: of the calls that may land in the tree, without reading every argument binding
    arguments: tuple[tuple[str | None, str, bytes], ...] = ()


@record
@dataclass(frozen=True, slots=True)
class EventLoop:
    """A `while` loop that never ends on its own and calls a step-like method each time
    round (``extract.loops``): the function it is in becomes a hot root."""

    function: str  # qualname of the function holding the loop
    line: int  # the `while`
    end_line: int
    body_line: int  # the first statement of its body
    #: the step-like calls in it, as written (`self.scheduler.step`), sorted
    steps: tuple[str, ...]


@record
@dataclass(frozen=True, slots=True)
class HostArguments:
    """The arguments of a call that hold host data where the code says so (``Snippet.host``'s
    rules, ``host_names``): positions (up to a `*args`) and keyword names.  The call is picked
    by its lines and its callee's last name."""

    line: int
    end_line: int
    method: str
    positions: tuple[int, ...]
    keywords: tuple[str, ...]


@record
@dataclass(frozen=True, slots=True)
class PassedValues:
    """What a call passes, for a gate on a parameter to be judged by: each argument by
    position and by keyword, as a True/False/None literal (`lit:False`), an attribute read
    (`ref:req.interpolate`), a name of the caller's own parameters (`param:interpolate`) or
    anything else (`?`); kept for the calls passing at least one of the first three.
    ``open`` when a `*args` or `**kwargs` may pass more.  The call is picked by its lines and
    its callee's last name (as ``HostArguments``)."""

    line: int
    end_line: int
    method: str
    positions: tuple[tuple[int, str], ...]
    keywords: tuple[tuple[str, str], ...]
    open: bool


@record
@dataclass(frozen=True, slots=True)
class MessageUse:
    """A call that takes a message local as one of its arguments (``BuiltMessage``): its
    lines and its callee's last name, which pick its call site among the file's calls."""

    line: int
    end_line: int
    method: str


@record
@dataclass(frozen=True, slots=True)
class BuiltMessage:
    """A string formatted into a local that is read nowhere but as an argument of calls
    (`msg = f"step {i}"` ... `logger.debug(msg)`): the formatting is paid where it is built,
    whether or not those calls emit it (``eager-format`` when none does by default)."""

    name: str
    function: str
    line: int
    end_line: int
    col: int
    end_col: int
    gates: tuple[GateRef, ...]
    loop_depth: int
    loop_iter: str
    #: the formatting it does (``CallSite.eager``), and `call:item` for a sync in it
    eager: tuple[str, ...]
    code: str
    uses: tuple[MessageUse, ...]
    path_kind: PathKind = "normal"
    path_reason: str = ""


@record
@dataclass(frozen=True, slots=True)
class FileFacts:
    path: str
    module: str  # dotted module name derived from the path
    #: local name -> dotted origin ("np" -> "numpy", "getenv" -> "os.getenv")
    aliases: tuple[tuple[str, str], ...]
    functions: tuple[FunctionDef, ...]
    env_reads: tuple[EnvRead, ...]
    #: every call in file order: a ``CallSite`` when it holds a fact, else a ``PlainCall``
    calls: tuple[CallSite | PlainCall, ...]
    #: (line, path, col, end_col) of the literal output paths the file writes to
    #: (`open("/tmp/x/" ...)`, an output-dir env var's default); columns as ``CallSite``'s
    literal_paths: tuple[tuple[int, str, int, int], ...] = ()
    #: functions (None = module level) that write os.environ: launchers
    env_exporters: tuple[str | None, ...] = ()
    #: (line, text) of file names/globs the file mentions (`"sched.jsonl"`, `step_*.jsonl`)
    file_refs: tuple[tuple[int, str], ...] = ()
    #: env vars this module sets for child processes (a Python launcher)
    setters: tuple[EnvSetter, ...] = ()
    #: its ``# cs-audit: ignore[...]`` comments
    suppressions: tuple[Suppression, ...] = ()
    #: classes and the values names can hold (the typed call graph)
    types: TypeFacts = TypeFacts()
    #: its event loops (``extract.loops``): hot roots found in the code
    event_loops: tuple[EventLoop, ...] = ()
    #: the outermost `while` loops of functions named like a root marked ``loop``
    #: (``extract.loops.step_loops``): that root's steps
    step_loops: tuple[EventLoop, ...] = ()
    #: (line, function, gates, what) of gated statements that change state or control flow
    #: (`self.x = ...`, `return`): what a switch's code computes beyond its calls
    gated_effects: tuple[tuple[int, str | None, tuple[GateRef, ...], str], ...] = ()
    #: (function, name, gates of the value) of each assignment to a name or `self.` attribute
    #: a gate of the file tests (`self.tracer = Tracer() if env_flag("T") else None`): the
    #: name is truthy only when those gates hold; none for a falsy constant
    derived: tuple[tuple[str | None, str, tuple[GateRef, ...]], ...] = ()
    #: (function, name) of each assignment of a falsy constant to such a name (``derived``
    #: leaves them out): the name is not known to be truthy by default
    falsy_names: tuple[tuple[str | None, str], ...] = ()
    #: strings formatted into locals only calls read (``BuiltMessage``)
    built_messages: tuple[BuiltMessage, ...] = ()
    #: calls passing host data (``HostArguments``)
    host_arguments: tuple[HostArguments, ...] = ()
    #: calls passing values a parameter's gate can be judged by (``PassedValues``)
    passed_values: tuple[PassedValues, ...] = ()
    #: (name, defaults to a falsy literal, class, the class it holds when not None) of the
    #: fields its classes declare (`details: Details | None = None`: "Details";
    #: `has_hooks: bool = False`: "")
    record_fields: tuple[tuple[str, bool, str, str], ...] = ()
    #: `Class.field` of the fields its classes declare with no default (`hook: Any`): every
    #: construction of a record passes them
    required_fields: tuple[str, ...] = ()
    #: (line, attribute, function, gates, stores a falsy literal, what is stored) of the
    #: attribute stores in its functions on another object (`stats.details = d`), and on `self`
    #: of a field declared falsy here; what is stored is `wrap:C:read` for a class or function
    #: wrapping one read (`Backend(cfg.backend)`), `member:C.M` for a class's capitalised
    #: constant, `scoped` in a context manager (set for its `with` block), "" for anything else
    field_stores: tuple[tuple[int, str, str, tuple[GateRef, ...], bool, str], ...] = ()
    #: the keywords its calls pass something other than a falsy literal or a name of the same
    #: name (a record built with a field set), the attributes it sets some other way (unpacked,
    #: augmented, `setattr`), and `Name(` for a class built positionally or from a mapping
    keywords_passed: tuple[str, ...] = ()
    #: (line of the call, keyword, function) of a name passed under its own name (`has_x=has_x`)
    keywords_named: tuple[tuple[int, str, str], ...] = ()
    #: (name, its keys) of the module tables it builds from string keys (`_BACKENDS = {"a": ...}`)
    table_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: (function, local, table, parameter) of a module table looked up by a parameter
    #: (`spec = _BACKENDS.get(backend)`): None unless the parameter is one of its keys
    table_gets: tuple[tuple[str, str, str, str], ...] = ()
    #: it names a device API (``device_apis`` in rules/gpu_syncs.yaml) somewhere
    touches_device: bool = True
    #: (function, name, the names it is built from) of each assignment of a path built from
    #: other names (`path = os.path.join(table_dir, f)`): where a location goes once joined
    path_values: tuple[tuple[str | None, str, tuple[str, ...]], ...] = ()
    #: the options it declares with their defaults (``extract.options``)
    options: tuple[OptionDefault, ...] = ()
    #: in a module that declares options or is a settings module: the attribute names it
    #: assigns on objects other than `self` (`cfg.x = ...`), options worked out at start-up
    foreign_stores: tuple[str, ...] = ()
    #: (line of the call, option) of each start-up resolution by a call in a function or under
    #: an `if` (``extract.options.start_up_resolutions``): it happens only when that call runs
    conditional_resolutions: tuple[tuple[int, str], ...] = ()
    #: (line of the call, `option=literal`, the gates under which that literal is the value) of
    #: each literal a function stores into a table it hands to an override at start-up
    #: (``extract.gates.GateReader.table_resolutions``): the values start-up may give the option
    table_resolutions: tuple[tuple[int, str, tuple[GateRef, ...]], ...] = ()
    #: the attribute names it assigns on `self` (``joins.attributes``)
    own_attributes: tuple[str, ...] = ()
    #: (class, attribute, the class it holds) of each attribute a method declares None with an
    #: optional annotation (`self.pool: Optional[HostPool] = None`): None until a `HostPool` is built
    own_optional: tuple[tuple[str, str, str], ...] = ()
    #: `Class.attr` of those its methods assign other than as a copy of the same-named
    #: attribute of another object (`self.x = cfg.x`): an option name one of them is, is
    #: ambiguous, except on a receiver typed as none of those classes
    own_state: tuple[str, ...] = ()
    #: the attribute names it assigns on objects other than `self` (`pool.window = w`): such
    #: an attribute is not decided by its class's own assignments (``joins.attributes``)
    foreign_attributes: tuple[str, ...] = ()
    #: (function, name, what it wraps) of each assignment to a name a test calls an `is_*`
    #: predicate of: the attribute read when the value wraps one (`Algo.from_string(args.algo)`
    #: wraps `args.algo`), else "" (``joins.defaults.predicate_gate``)
    wrapped: tuple[tuple[str | None, str, str], ...] = ()


@record
@dataclass(frozen=True, slots=True)
class Suppression:
    """A ``# cs-audit: ignore[rule, ...] reason`` comment: it silences the findings of its
    rules on its line and on the lines of the statement that starts there (``covers``)."""

    path: str
    line: int
    rules: tuple[str, ...]
    reason: str
    #: why it is invalid (None: valid)
    problem: str | None = None
    #: the lines whose innermost statement starts on ``line``
    covers: tuple[int, ...] = ()
    #: ``# cs-audit: ignore-file[rule, ...] reason``: every line of the file
    whole_file: bool = False


@record
@dataclass(frozen=True, slots=True)
class ScriptFacts:
    """A shell runner, .env, Makefile, Dockerfile or CI file: what it sets and reads."""

    path: str
    setters: tuple[EnvSetter, ...]
    file_refs: tuple[tuple[int, str], ...]
    #: (line, pattern) of `grep PATTERN` in pipelines
    greps: tuple[tuple[int, str], ...]


@record
@dataclass(frozen=True, slots=True)
class BlameInfo:
    commit: str  # short sha
    date: str  # YYYY-MM-DD
    subject: str
    author: str = ""
    #: the sub-repository (its path from the scanned root) the commit is of; "" for the root's
    repository: str = ""


# -- what each rule says of a site besides the common fields of a finding (JSON: added fields)


@record
@dataclass(frozen=True, slots=True)
class EnvReadDetail:
    """env-read-hot: the variable(s) read (``<dynamic>`` when not known), and how."""

    var: str
    via: str
    #: the call after which the engine caches this read (``cached_after`` of its registry):
    #: a ``cached`` read, low severity, not costed, not gating CI; "" for a per-call read
    cached: str = ""


@record
@dataclass(frozen=True, slots=True)
class EmitterDetail:
    """default-on-emitter, eager-format: the emitter's callee, and the record's level (the
    role for a print or write; ``helper`` for a gated helper's eager arguments; ``local`` for
    a message built in the local ``local`` that only that emitter reads)."""

    emitter: str
    level: str
    local: str = ""


@record
@dataclass(frozen=True, slots=True)
class SyncDetail:
    """sync-in-debug: the syncing call's last name; ``helper``: the function called in an
    emitter's arguments that makes it (`cptrace(1, h=khash(t))`), "" for a sync of its own."""

    call: str
    helper: str = ""


@record
@dataclass(frozen=True, slots=True)
class OpenDetail:
    """per-call-open: the open mode."""

    mode: str


@record
@dataclass(frozen=True, slots=True)
class FlushDetail:
    """redundant-flush: the line-buffered handle."""

    handle: str


@record
@dataclass(frozen=True, slots=True)
class OutputPathDetail:
    """hardcoded-output-path: the literal path."""

    output_path: str


@record
@dataclass(frozen=True, slots=True)
class DuplicateDetail:
    """duplicate-helper: the group's name and how many copies it has."""

    group: str
    copies: str


FindingDetail = (EnvReadDetail | EmitterDetail | SyncDetail | OpenDetail | FlushDetail | OutputPathDetail
                 | DuplicateDetail | None)

#: a rule's words for one finding in a statement of the audit's §1 (``analysis.<rule>.words``):
#: text and names from the scanned tree alternating, text first (a report shows the names as code)
Words = tuple[str, ...]


def spoken(items: Iterable[tuple[str, bool]]) -> Words:
    """The ``Words`` of (text, whether it is a name) items in order."""
    out = [""]
    for text, is_name in items:
        if is_name:
            out += [text, ""]
        else:
            out[-1] += text
    return tuple(out)


@record
@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    path: str
    line: int
    end_line: int
    function: str | None
    #: what gates the site (None: it runs with no debug env set); JSON: ``SwitchRef.text``
    switch: SwitchRef | None
    frequency: FrequencyName
    gpu_sync: bool
    message: str
    fingerprint: str
    code: str = ""
    cost_us: float = 0.0
    eager_kinds: tuple[str, ...] = ()
    #: what the rule says of the site besides the common fields (one type per rule)
    detail: FindingDetail = None
    #: when its frequency comes from the call graph: the shortest chain of functions
    #: (`module.qualname`) from a hot root to the site's function, as reports show it: a chain
    #: longer than ``joins.chains.SHOWN`` is its root, then its last calls (``hot_path_elided``)
    hot_path: tuple[str, ...] = ()
    #: 1-based character columns: where the site starts on ``line``, and just past its end
    #: on ``end_line`` (as ruff's and SARIF's end columns); 0 when not known
    col: int = 0
    end_col: int = 0
    #: ``normal``, ``error`` (an except block, a branch ending in raise or an error return) or
    #: ``rare`` (once-flag, lazy init, cache miss, counter == constant, a constant `*_once`
    #: record): error and rare sites are listed but not costed per step
    path_kind: PathKind = "normal"
    path_reason: str = ""
    #: the process side of the root its ``hot_path`` starts at (``HotRoot.process``)
    process: str = ""
    #: the guard that decided a ``path_kind`` other than normal (``joins.runs``)
    guard: Guard | None = None
    #: what an error or rare site would cost per step if it ran every time its chain does
    #: (the "reachable but not per step" table ranks by it); 0 on a normal path
    cost_if_every_time_us: float = 0.0
    #: how many functions of the chain ``hot_path`` leaves out between its root and its
    #: second step (0: it is the whole chain; ``cs-audit why`` prints the whole chain)
    hot_path_elided: int = 0
    #: whose line it is when the tree names an upstream (``cs_audit.git.upstream``): "own",
    #: "modified" (an upstream line of a file the fork changed) or "upstream"; "" when none is named
    origin: str = ""


@record
@dataclass(frozen=True, slots=True)
class OptionDefault:
    """An option a file declares with its default (``extract.options``): a field of a settings
    class (`enable_eplb: bool = False`) or a command-line argument (`--enable-eplb`,
    `store_true`)."""

    #: the option's attribute name (`enable_eplb`)
    name: str
    #: the class that declares it, or ``--option`` for a command-line argument
    owner: str
    #: the default as Python source (`False`, `None`, `'auto'`); "" when not a literal
    value: str
    path: str
    line: int
    #: a dotted name the default is copied from (`ParallelConfig.enable_eplb`): the same option
    copied: bool = False
    #: the function, by its dotted path, the value is computed with at start-up
    #: (`Derived(fn="pkg.context.attn_dp_enabled_of")`); "" for a declared default
    computed_by: str = ""


@record
@dataclass(frozen=True, slots=True)
class Place:
    path: str
    line: int


@record
@dataclass(frozen=True, slots=True)
class DefaultUsed:
    """A setting of the audited deployment that turned hot code off: an option at its default
    (or as the deployment states it), or the platform."""

    #: the setting that would turn the code on (`enable_eplb`, `platform=rocm`)
    switch: str
    #: the value the deployment runs with (`False`, `None`, `cuda`)
    value: str
    #: where that value comes from: the option's declaration, or "" (the platform, the deployment)
    path: str
    line: int
    #: the sites reached from a hot root that it keeps from running
    sites: int
    #: the first of them
    example: Place | None = None


@record
@dataclass(frozen=True, slots=True)
class Deployment:
    """The deployment a report audits: the platform, what the project stated, and the
    defaults that decided gates (``analysis.deployment``)."""

    platform: str
    #: the project stated it (``[tool.cs-audit] deployment``); else every option at its default
    stated: bool
    options: tuple[tuple[str, str], ...] = ()
    env: tuple[str, ...] = ()
    used: tuple[DefaultUsed, ...] = ()
    #: the model architectures it serves (() : not stated)
    models: tuple[str, ...] = ()
    #: the optional features it turns on (``feature_paths``)
    features: tuple[str, ...] = ()


@record
@dataclass(frozen=True, slots=True)
class Guard:
    """Where the guard that makes a site rare or an error path is: ``depth`` 0 in the site's
    own function, N that many calls up its chain."""

    path: str
    line: int
    depth: int


@record
@dataclass(frozen=True, slots=True)
class SwitchRead:
    path: str
    line: int
    function: str | None
    per_call: bool


@record
@dataclass(frozen=True, slots=True)
class GatedSite:
    """An emitter, dump, open or sync that runs only with the switch set."""

    path: str
    line: int
    function: str | None
    role: str
    work: str  # what one event does: "log line (info), f-string", "torch.save", ".item()"
    frequency: FrequencyName
    gpu_sync: bool
    code: str
    #: estimated µs per step of the site when the switch is on
    cost_us: float = 0.0
    #: the least value of the switch the site runs at, when the code compares it with levels
    #: (`if LEVEL >= 2:`, `_diag("X", 2)` falling back to a level knob); 0: any set value
    level: int = 0
    #: the switch the site's own gate names when it runs here through this level knob's
    #: fallback (`_diag("RECOMPACT_DIAG", 2)` for `DELTA_COMPACTION_LOG`); "" otherwise
    via: str = ""


def distinct_levels(sites: tuple[GatedSite, ...] | list[GatedSite]) -> tuple[int, ...]:
    """The levels gated sites run at (a site with no level runs at any set value: 1), when
    one of them is above 1; () when they tell only on from off."""
    values = sorted({max(site.level, 1) for site in sites})
    return tuple(values) if values and values[-1] > 1 else ()


@record
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
    #: instrumentation's sub-kind: dump, trace, profile, level or log ("" for other categories)
    kind: str = ""
    #: the evidence that decided ``category`` (``file:line`` of the gated calls or value uses)
    category_reasons: tuple[str, ...] = ()
    #: the category came from the name alone (the code showed nothing that decides)
    category_by_name: bool = False
    #: "own" when a line of the fork's reads or sets it, "upstream" when only the upstream's
    #: lines do; "" when the tree names no upstream
    origin: str = ""

    @property
    def levels(self) -> tuple[int, ...]:
        """The values the code tells apart (`X=1`, `X=2`, `X=3`) when it compares the switch
        with levels above on/off; () for an on/off switch."""
        return distinct_levels(self.sites)

    @property
    def real_setters(self) -> int:
        """Setters that turn it on: not passthroughs, comments, nor exports of the off value
        (`X=0`, `X=false`, `X=`), which leave the switch as it is when unset."""
        return sum(1 for x in self.setters if x.kind == "set")

    @property
    def reading_scripts(self) -> int:
        """Scripts that read what it writes, each counted once however many lines name it."""
        return len({path for path, _, _ in self.readers})


@record
@dataclass(frozen=True, slots=True)
class DuplicateSite:
    path: str
    line: int
    function: str


@record
@dataclass(frozen=True, slots=True)
class DuplicateGroup:
    name: str
    sites: tuple[DuplicateSite, ...]


@record
@dataclass(frozen=True, slots=True)
class RootMatch:
    """One hot-root rule as configured, and the functions of the tree it is the first match of."""

    name: str
    class_glob: str | None
    path_glob: str | None
    frequency: FrequencyName
    functions: int
    #: the first few of them (`module.qualname`, sorted)
    examples: tuple[str, ...]


@record
@dataclass(frozen=True, slots=True)
class EventLoopRoot:
    """An event loop found in the tree (``EventLoop``) and what it made a root."""

    path: str
    line: int  # the `while`
    function: str  # qualname
    id: str  # `module.qualname`
    steps: tuple[str, ...]
    #: the configured root rule that already covers its function (None: it is a root
    #: because it is an event loop)
    configured: str | None


@record
@dataclass(frozen=True, slots=True)
class CheapPath:
    """A function on a default-ON hot path that does nothing unless a switch is set: it
    returns at its entry (`if not ENABLED: return`, a disabled logger's shared no-op) or
    hands back `nullcontext()`. What runs by default is the check alone."""

    path: str
    line: int
    function: str  # qualname
    how: str  # "returns at entry" | "returns nullcontext()"
    switch: str  # the switch's report spelling
    frequency: FrequencyName
    #: calls of it from functions that run by default
    calls: int
    process: str = ""


@record
@dataclass(frozen=True, slots=True)
class HotRoots:
    """Which hot roots the tree has: the configured rules that match, and the event loops."""

    configured: int  # rules configured (shipped and project)
    #: every configured rule in the order they are tried, matched or not
    rules: tuple[RootMatch, ...] = ()
    event_loops: tuple[EventLoopRoot, ...] = ()
    #: default-ON hot functions that were checked and cost only their switch check
    cheap: tuple[CheapPath, ...] = ()

    @property
    def matched(self) -> int:
        return sum(1 for rule in self.rules if rule.functions)

    @property
    def summary(self) -> str:
        return f"{self.matched} of {self.configured} hot roots match this tree"

    @property
    def detected(self) -> tuple[EventLoopRoot, ...]:
        """The event loops that are roots because they are event loops (no rule covers them)."""
        return tuple(loop for loop in self.event_loops if loop.configured is None)

    @property
    def warning(self) -> str | None:
        """What to do when no configured root matches the tree (None when one does)."""
        if self.matched or not self.configured:
            return None
        found = len(self.detected)
        loops = f"; only the {found} event loop{'s' if found != 1 else ''} found in the code are roots" if found else ""
        return f"{self.summary}: add hot_roots to pyproject.toml [tool.cs-audit] or cs-audit.yaml{loops}"


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
    #: the suppression comments of the analysed files, by path and line
    suppressions: tuple[Suppression, ...] = ()
    #: the hot roots the tree matched (None: not worked out, as for a result made before)
    roots: HotRoots | None = None
    #: the work this scan did (not part of any report)
    stats: ScanStats | None = None
    #: folder globs of tests, benchmarks and examples (``AuditConfig.aside``)
    aside: tuple[str, ...] = ()
    #: (path from the scanned root, HEAD commit) of each repository holding scanned files:
    #: "." for the one holding the root (when in git), then the sub-repositories
    repositories: tuple[tuple[str, str | None], ...] = ()
    #: the deployment audited, with the defaults that decided gates (None: not worked out)
    deployment: Deployment | None = None
    #: (repository path from the scanned root, where its git directory is from the root) of
    #: each repository whose ``.git`` names a git directory outside the tree: its commit,
    #: history and blame in the report are that repository's
    outside_git: tuple[tuple[str, str], ...] = ()
    #: the folders a ``.gitignore`` of the tree lists that hold a repository (scanned) or
    #: Python files (not scanned)
    ignored: tuple[IgnoredFolder, ...] = ()
    #: the hot env reads the audit knows cost nothing (a registry cached at start-up):
    #: checked, not findings
    cheap_reads: tuple[Finding, ...] = ()
    #: (repository path, spec, how it was found, why it could not be used or "") of each
    #: upstream the tree names or shows (``cs_audit.git.upstream``)
    upstream: tuple[tuple[str, str, str, str], ...] = ()
    #: the findings on the upstream's lines, left out of ``findings`` (``--include-upstream``
    #: keeps them there): counted, not listed
    upstream_findings: tuple[Finding, ...] = ()
    #: (path from the scanned root, what was audited of it) of each repository a past
    #: commit's audit took from its own history (``cs_audit.ci.revisions``)
    sub_repositories: tuple[tuple[str, str], ...] = ()


@record
@dataclass(frozen=True, slots=True)
class ScanStats:
    """What a scan did: the files it found, the files whose facts it computed (the others
    came from the cache or a memo), how it came by the tree's result (``stored``: the result
    of an unchanged tree; ``moved``: that result with a file's lines moved; ``memo``: the
    joins of the commit before, in ``report --range``; ``analysed``: the joins ran), and the
    files whose call sites it resolved (the others took their stored resolutions)."""

    files: int
    analysed: tuple[str, ...]
    result: str
    resolved: tuple[str, ...] = ()


# -- what the CI commands and the SARIF/GitHub renderers need besides the audit

INVALID = "invalid-suppression"
UNUSED = "unused-suppression"
SKIPPED = "file-skipped"
NO_ROOT = "no-hot-root"
SUB_REPO = "sub-repository"
OUTSIDE_GIT = "git-dir-outside"
IGNORED = "ignored-folder"
UPSTREAM_NOTE = "upstream"
NOTIFICATION_IDS = {
    INVALID: "a `# cs-audit: ignore[...]` comment without a reason, without a known rule id, or malformed: it suppresses nothing",
    UNUSED: "a `# cs-audit: ignore[...]` comment that matches no finding on its line or statement",
    SKIPPED: "a file cs-audit could not analyse (syntax, encoding, size, ...): its findings are unknown",
    NO_ROOT: "no configured hot root matches a function of the tree: its hot paths are unknown until hot_roots are configured",
    SUB_REPO: "a submodule or nested repository: what `check --since` or `report` compared its files with",
    UPSTREAM_NOTE: "the upstream a fork's own lines are told from (`upstream` in the configuration, or detected)",
    IGNORED: "a folder a `.gitignore` lists: a repository of its own in it is scanned all the same, other Python files in it are not",
    OUTSIDE_GIT: "a `.git` file or symlink naming a git directory outside the scanned tree: the commit, history and blame shown are that repository's",
}
#: error kinds that mean the scan did not finish its job (exit 2 in ``check``)
INCOMPLETE = frozenset({"parser-crash", "timeout", "internal", "io"})


@record
@dataclass(frozen=True, slots=True)
class Notification:
    """Something about the run that is not a finding: a bad suppression, a skipped file."""

    id: str  # one of NOTIFICATION_IDS
    path: str
    line: int | None
    message: str
    level: str = "warning"  # SARIF notification level: error | warning | note


def root_notes(roots: HotRoots | None) -> tuple[Notification, ...]:
    """The note of a tree that no configured hot root matches (none when one does)."""
    warning = roots.warning if roots is not None else None
    return (Notification(NO_ROOT, "", None, warning),) if warning else ()


def outside_git_notes(result: AuditResult) -> tuple[Notification, ...]:
    """A note per repository of the tree whose git directory lies outside it (the root's has
    no path)."""
    return tuple(
        Notification(OUTSIDE_GIT, "" if path == "." else path, None,
                     f".git of {'the scanned folder' if path == '.' else path} names the git directory {where}, "
                     "outside the scanned tree: the commit, history and blame reported for it are that repository's", "note")
        for path, where in result.outside_git)


def ignored_notes(result: AuditResult) -> tuple[Notification, ...]:
    """A note per folder a ``.gitignore`` of the tree lists: scanned as the repository it
    holds, or not scanned with its Python files."""
    out = []
    for folder in result.ignored:
        if folder.repository:
            message = (f"{folder.path}: listed by a .gitignore of the tree but a git repository of its own (or holding "
                       "them): scanned, with its own .gitignore")
        else:
            many = f"{folder.python_files}+" if folder.python_files >= IGNORED_FILES_COUNTED else str(folder.python_files)
            message = (f"{folder.path}: listed by a .gitignore, not scanned ({many} Python "
                       f"file{'s' if folder.python_files != 1 else ''}; scan the folder itself to audit it)")
        out.append(Notification(IGNORED, folder.path, None, message, "note"))
    return tuple(out)


def upstream_notes(result: AuditResult) -> tuple[Notification, ...]:
    """A note per upstream the tree names or shows: what it was compared with, and how many
    findings on its lines the report leaves out (or why it could not be used)."""
    out = []
    left = len(result.upstream_findings)
    for repo, spec, how, error in result.upstream:
        where = "the tree" if repo == "." else repo
        if error:
            message = f"{where}: upstream {spec} ({how}) not used: {error}; every line counts as own"
        else:
            message = f"{where}: own lines are those that differ from the upstream {spec} ({how})"
            if left:
                message += f"; {left} finding{'s' if left != 1 else ''} on upstream lines left out (--include-upstream lists them)"
                left = 0  # said once
        out.append(Notification(UPSTREAM_NOTE, "" if repo == "." else repo, None, message, "note"))
    return tuple(out)


def tree_notes(result: AuditResult) -> tuple[Notification, ...]:
    """What every report says of the tree's shape: ignored folders, git directories outside
    it, the upstream its own lines are told from, the commit of a repository of its own a
    past commit's audit took."""
    subs = tuple(Notification(SUB_REPO, path, None, f"{path}: {message}", "note") for path, message in result.sub_repositories)
    return ignored_notes(result) + outside_git_notes(result) + upstream_notes(result) + subs


@dataclass(frozen=True)
class Suppressed:
    """The result of applying suppressions to an audit."""

    kept: tuple[Finding, ...]
    #: fingerprint -> the reason of the suppression that silenced it
    suppressed: dict[str, str]
    notes: tuple[Notification, ...]


@dataclass(frozen=True)
class ReportContext:
    #: the scanned base directory inside the repository ("" at the top or outside git)
    prefix: str
    suppressed: Suppressed
    #: suppression problems, then skipped files
    notes: tuple[Notification, ...]


@dataclass(frozen=True)
class Gates:
    """rule id -> which of its findings gate (``GATE_SCOPES``); a rule not listed gates nothing."""

    rules: dict[str, str]

    def gates(self, f: Finding) -> bool:
        scope = self.rules.get(f.rule)
        if scope is None or scope == "off":
            return False
        if scope == "any":
            return True
        if f.switch is not None or getattr(f.detail, "cached", False):
            return False  # a cached env read is not paid per call after start-up
        return scope == "default" or (is_hot(f.frequency) and f.path_kind == "normal")

    def describe(self) -> str:
        return ", ".join(f"{r} ({scope})" for r, scope in self.rules.items() if scope != "off")


#: which findings of a rule gate ``check``: ``hot`` those that run by default on a hot path
#: (no switch, a per-step/request/round/layer frequency, a normal path), ``default`` those
#: with no switch, ``any`` all, ``off`` none
GATE_SCOPES = ("hot", "default", "any", "off")


@record
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
    #: what ``--since`` did with each sub-repository
    notes: list[Notification] = field(default_factory=list)


@dataclass(frozen=True)
class GraphFunction:
    id: str  # `module.qualname`
    path: str
    line: int
    #: how often it runs by default (None: no hot root reaches it through default-on calls)
    frequency: str | None
    #: the hot root it matches, as the rules name it (None: not a root)
    root: str | None = None


@dataclass(frozen=True)
class GraphEdge:
    caller: str  # a function's id, or a module's name for module-level code
    callee: str
    path: str
    line: int
    how: str
    switch: str | None


@dataclass(frozen=True)
class CallGraph:
    """The resolved call graph of a tree, as ``callgraph`` exports it."""

    root: str
    modules: tuple[str, ...]
    functions: tuple[GraphFunction, ...]
    edges: tuple[GraphEdge, ...]
    #: how many hot roots the rules and the project configure
    roots_configured: int
    errors: tuple[FileError, ...] = ()
