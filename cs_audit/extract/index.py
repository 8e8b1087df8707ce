"""The stdlib-``ast`` pass over one Python file: structure and context.

Every Python file is indexed here (``ast`` parses much faster than libcst): import
aliases, logger names, string constants, function definitions with a normalised
body hash, call edges, and the context every statement runs in — enclosing
function, the gates around it (``if``/``while`` tests, the rest of a block after
``if C: return``, ``else`` as the negated test), loop depth.  Statements that hold
an env read, emitter, sync or output token become ``Snippet``s: their source is
handed, all at once, to the libcst walker in ``facts.py`` with this context.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import accumulate, count
from operator import add, attrgetter
from typing import Any

from cs_audit.extract.messages import argument_uses, format_kinds
from cs_audit.extract.paths import PathContext, assert_context, branch_context, except_context, function_context, holds, resolve
from cs_audit.extract.scripts import NAMES_FILE
from cs_audit.model import (
    CODE_CHARS,
    DEFAULT_ON,
    HANDED,
    PARAM_FRESH,
    PARAM_TESTED,
    BuiltMessage,
    FunctionDef,
    GateRef,
    HostArguments,
    MessageUse,
    PassedValues,
    PlainCall,
    as_operand,
    closure_arg,
)
from cs_audit.pyast import CHILD_FIELDS as _CHILD_FIELDS
from cs_audit.pyast import SCOPES, dotted_name, scope_nodes
from cs_audit.pyast import child_fields as _child_fields
from cs_audit.pyast import nodes as _nodes
from cs_audit.ruleset import RuleSet, steady_names

#: functions shorter than this are too small to call a duplicated helper
MIN_DUPLICATE_STATEMENTS = 3
_MAX_GATE_REFS = 8
#: statements holding one of these get the libcst walk
SNIPPET_TOKENS = re.compile(
    r"environ|getenv|putenv|envs\.|logg|\blog\.|_log\b|log_|print|\.write\(|dump|save\(|\.item\(|\.cpu\(|tolist\(|\.numpy\(|"
    r"synchroni[sz]e|open\(|flush\(|strftime|datetime|time_ns|makedirs|mkdir|trace|diag|debug|[\"']cpu[\"']|"
    r"path\.join|\.jsonl|\.pt\b"
)
#: literal substrings of SNIPPET_TOKENS: a line matches the pattern only if it holds one; a
#: literal marked True implies a match, the others are confirmed with the pattern on the line.
#: One literal may stand for several alternatives ("env": environ, getenv, putenv, envs.):
#: each literal costs a scan of the whole file, a confirmation only a line.
_TOKEN_LITERALS: tuple[tuple[str, bool], ...] = (
    ("env", False), ("log", False), ("print", True), (".write(", True),
    ("dump", True), ("save(", True), (".item(", True), ("cpu", False), ("tolist(", True), (".numpy(", True),
    ("synchroni", False), ("open(", True), ("flush(", True), ("time", False),
    ("makedirs", True), ("mkdir", True), ("trace", True), ("diag", True), ("debug", True),
    ("path.join", True), (".jsonl", True), (".pt", False),
)


@lru_cache(maxsize=8)
def snippet_literals(api: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, bool], ...]:
    """The extractor's own literals, and for each API of the rule set (``RuleSet.api_literals``)
    whose uses SNIPPET_TOKENS does not already match, its shortest form as a literal that
    matches by itself: an API added to the rules is walked wherever it is used."""
    extra: list[str] = []
    for forms in api:
        if any(SNIPPET_TOKENS.search(form) for form in forms):
            continue
        shortest = min(forms, key=len)
        if shortest and not any(known in shortest for known in extra):
            extra.append(shortest)
    return _TOKEN_LITERALS + tuple((literal, True) for literal in sorted(extra))


#: what a comprehension or an assignment expression writes: without one on its lines, an
#: expression stores no name (``StoredNames``)
_STORING_LITERALS = (("for", True), (":=", True))
_CONVERSIONS = frozenset({"int", "float", "bool", "str", "len", "abs"})
_TERMINAL = (ast.Return, ast.Raise, ast.Continue, ast.Break)


@dataclass(frozen=True, slots=True)
class Snippet:
    """One statement (or compound-statement header) for the libcst walker."""

    text: str
    line: int
    end_line: int
    function: str | None
    params: tuple[str, ...]
    once: bool  # runs once: module level, class body, __init__, cached function
    gates: tuple[GateRef, ...]
    loop_depth: int
    assign_target: str | None
    is_return: bool
    builds_path: bool
    loop_iter: str = ""
    #: 0-based character columns where the statement starts on ``line`` and ends on
    #: ``end_line``, and how many characters ``text`` adds before it (a header's ``(``)
    col: int = 0
    end_col: int = 0
    prefix: int = 0
    #: ``path_kind`` of the statement (``extract.paths``) and why
    path_kind: str = "normal"
    path_reason: str = ""
    #: the contexts they come from, resolved in ``index_module`` once the module's counters are known
    path_contexts: tuple[PathContext, ...] = ()
    #: inside the body of an `if` (or its `else`) of its function: a warning there reports an event
    in_branch: bool = False
    #: locals and `self.` attributes that hold host data at this statement (`device="cpu"`,
    #: `.cpu()`, `torch.tensor([...])` earlier in the function): their `.item()` does not sync
    host: frozenset[str] = frozenset()
    #: (free name, qualname of the enclosing function that binds it) of a nested function
    closure: tuple[tuple[str, str], ...] = ()
    #: parameters assigned before this statement: they no longer hold what the caller passed
    rebound: frozenset[str] = frozenset()
    #: names an enclosing `for` binds to its items (`for logger in self.stat_loggers:`): they
    #: hold those items, not the module's logger
    loop_bound: frozenset[str] = frozenset()


@dataclass
class ModuleIndex:
    aliases: dict[str, str]
    logger_names: frozenset[str]
    string_constants: dict[str, str]
    functions: tuple[FunctionDef, ...]
    calls: tuple[PlainCall, ...]
    #: attribute reads that may run a property getter (``_Indexer._note_reads``), and the
    #: attribute names the file stores
    reads: tuple[PlainCall, ...]
    stored_attributes: frozenset[str]
    snippets: tuple[Snippet, ...]
    #: function -> names its `return` expressions use (the result depends on them)
    returned_names: dict[str | None, frozenset[str]]
    #: functions (None: module level) that write os.environ (launchers)
    env_exporters: frozenset[str | None]
    #: (line of an `if` test snippet) whose body returns a value: reads in it decide the result
    returning_tests: frozenset[int] = frozenset()
    #: first line of each simple statement -> (assignment target, is a return)
    statements: dict[int, tuple[str | None, bool]] = field(default_factory=dict)
    #: builtin names the module binds at top level
    shadowed: frozenset[str] = frozenset()
    #: (qualname, line) -> its ast node (for ``hash_bodies``)
    function_nodes: dict[tuple[str, int], ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    #: the names its functions store (``hash_bodies`` and the type walk ask)
    stores: StoredNames | None = None
    #: (function, target name, iterable) of the comprehensions in call-holding statements
    comprehensions: tuple[tuple[str | None, str, ast.expr], ...] = ()
    #: (function, callee, call) of the calls with arguments that may land in the tree: what
    #: they pass flows into the parameters of what they call (``extract.types``)
    arguments: tuple[tuple[str | None, str, ast.Call], ...] = ()
    #: (ast.Lambda, its qualname) of the lambdas in call-holding statements
    lambdas: tuple[tuple[ast.Lambda, str], ...] = ()
    #: (each `while` of a function, not of a class body in it, the function's qualname): ``extract.loops``
    whiles: tuple[tuple[ast.While, str], ...] = ()
    wrapped: tuple[tuple[str | None, str, str], ...] = ()
    #: (line, function, gates, what) of gated statements that change state (``_effect``)
    effects: tuple[tuple[int, str | None, tuple[GateRef, ...], str], ...] = ()
    #: (function, name, gates of the value) of the assignments to names a gate tests
    derived: tuple[tuple[str | None, str, tuple[GateRef, ...]], ...] = ()
    #: strings formatted into locals that only calls read (``extract.messages``)
    built_messages: tuple[BuiltMessage, ...] = ()
    host_arguments: tuple[HostArguments, ...] = ()
    passed_values: tuple[PassedValues, ...] = ()
    #: (function, name, names it is built from) of the paths built from other names
    path_values: tuple[tuple[str | None, str, tuple[str, ...]], ...] = ()

    def hash_bodies(self, qualnames: set[str]) -> tuple[FunctionDef, ...]:
        """``functions`` with ``body_hash`` set for ``qualnames`` (the functions that hold
        facts: only they can be duplicated helpers, and hashing a body is not free)."""
        return tuple(
            replace(f, body_hash=body_hash(self.function_nodes[(f.qualname, f.line)], self.stores)) if f.qualname in qualnames else f
            for f in self.functions
        )


def module_name(path: str) -> str:
    stem = path[:-3] if path.endswith(".py") else path
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    return stem.replace("/", ".")


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: max(0, len(parts) - (level - 1))]
    base = ".".join(parts)
    if target:
        return f"{base}.{target}" if base else target
    return base


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`a.b.c` with the first name resolved through the import aliases."""
    cls = node.__class__
    if cls is ast.Name:  # the common cases first: `a`, `a.b`
        return aliases.get(node.id, node.id)  # type: ignore[attr-defined]
    if cls is ast.Attribute and node.value.__class__ is ast.Name:  # type: ignore[attr-defined]
        head = node.value.id  # type: ignore[attr-defined]
        return f"{aliases.get(head, head)}.{node.attr}"  # type: ignore[attr-defined]
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(aliases.get(node.id, node.id))
    elif isinstance(node, ast.Call):
        inner = dotted(node.func, aliases)
        if inner is None:
            return None
        parts.append(inner + "()")
    else:
        return None
    return ".".join(reversed(parts))


def raw_dotted(node: ast.AST) -> str | None:
    cls = node.__class__
    if cls is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if cls is ast.Attribute and node.value.__class__ is ast.Name:  # type: ignore[attr-defined]
        return f"{node.value.id}.{node.attr}"  # type: ignore[attr-defined]
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


# ------------------------------------------------------------------ duplicate hashing
#: functions longer than this are not hashed for duplicates (helpers are short)
MAX_DUPLICATE_LINES = 200


def local_names(func: ast.FunctionDef | ast.AsyncFunctionDef, stores: StoredNames | None = None) -> set[str]:
    """Its parameters and the names stored anywhere in it (nested functions included);
    ``stores``: the module's ``StoredNames``, which skips the expressions that store nothing."""
    names = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    for extra in (func.args.vararg, func.args.kwarg):
        if extra:
            names.add(extra.arg)
    names.update(_name_ids(func, stored_only=True) if stores is None else stores.stored_in([func], own_scope=False)[0])
    return names


#: the fields of a statement whose expressions are assigned to (their names are stored)
_TARGET_FIELDS = frozenset({"targets", "target", "optional_vars"})


class StoredNames:
    """The names a function stores, found through its statements: outside an assignment's
    targets an expression stores a name only in a comprehension (`for`) or an assignment
    expression (`:=`), so the expressions whose lines hold neither are not walked (most of
    a function's nodes).  ``storing_lines``: prefix counts of the lines holding either."""

    def __init__(self, lines: list[str], text: str, line_starts: list[int]) -> None:
        # the file's lines, not the indexer: a reference back to it would make a cycle, and the
        # workers run with the collector off
        self._lines, self._text, self._starts = lines, text, line_starts
        self._prefix: list[int] | None = None
        #: id of a function node -> ``local_names`` of it (the type walk and the body hashes ask again)
        self._local: dict[int, set[str]] = {}

    def local_names(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
        names = self._local.get(id(func))
        if names is None:
            names = self._local[id(func)] = local_names(func, self)
        return names

    def stored_in(self, body: list[ast.stmt], own_scope: bool) -> tuple[set[str], set[str], set[str]]:
        """``_own_scope_names(body)`` when ``own_scope``; else the names ``_name_ids(..., stored_only=True)``
        finds under each of ``body`` (first of the three sets; the others empty)."""
        prefix = self._prefix
        if prefix is None:
            prefix = self._prefix = line_prefix(self._lines, self._text, self._starts, SNIPPET_TOKENS, _STORING_LITERALS)
        walked: list[ast.expr] = []
        global_names: set[str] = set()
        declared: set[str] = set()
        stack: list[ast.AST] = list(body)
        pop, push, keep = stack.pop, stack.append, walked.append
        fields_of, AST, expr, targets = _CHILD_FIELDS, ast.AST, ast.expr, _TARGET_FIELDS
        Global, Nonlocal, stops = ast.Global, ast.Nonlocal, SCOPES
        while stack:
            node = pop()
            cls = node.__class__
            if own_scope:
                if cls is Global:
                    global_names.update(node.names)  # type: ignore[attr-defined]
                    declared.update(node.names)  # type: ignore[attr-defined]
                    continue
                if cls is Nonlocal:
                    declared.update(node.names)  # type: ignore[attr-defined]
                    continue
                if cls in stops:
                    continue
            fields = fields_of.get(cls)
            if fields is None:
                fields = _child_fields(cls)
            for name in fields:
                value = getattr(node, name, None)
                for item in value if value.__class__ is list else (value,):
                    if isinstance(item, expr):
                        if name in targets or prefix[item.end_lineno] > prefix[item.lineno - 1]:  # type: ignore[index]
                            keep(item)
                    elif isinstance(item, AST):
                        push(item)
        if own_scope:
            return _own_scope_names(walked)[0], global_names, declared
        return _name_ids_of(walked, stored_only=True), global_names, declared


def _name_ids(root: ast.AST, stored_only: bool = False) -> set[str]:
    """The ids of the ``ast.Name`` nodes under ``root`` (the nodes ``pyast.nodes`` gives),
    only those stored to when ``stored_only``, collected as the walk goes."""
    return _name_ids_of([root], stored_only)


def _name_ids_of(roots: Sequence[ast.AST], stored_only: bool) -> set[str]:
    """``_name_ids`` of each of ``roots``, together."""
    out: set[str] = set()
    add = out.add
    stack: list[ast.AST] = list(roots)
    pop, push, extend = stack.pop, stack.append, stack.extend
    fields_of, AST, Name, Store = _CHILD_FIELDS, ast.AST, ast.Name, ast.Store
    while stack:
        node = pop()
        cls = node.__class__
        if cls is Name:  # no children
            if not stored_only or node.ctx.__class__ is Store:  # type: ignore[attr-defined]
                add(node.id)  # type: ignore[attr-defined]
            continue
        fields = fields_of.get(cls)
        if fields is None:
            fields = _child_fields(cls)
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                extend([v for v in value if isinstance(v, AST)])
            elif isinstance(value, AST):
                push(value)
    return out


def _walk_count_below(nodes: list[ast.stmt], limit: int) -> bool:
    """Whether ``ast.walk`` of a module holding ``nodes`` yields fewer than ``limit`` nodes."""
    count = 1
    stack: list[ast.AST] = list(nodes)
    while stack:
        node = stack.pop()
        count += 1
        if count >= limit:
            return False
        stack.extend(ast.iter_child_nodes(node))
    return True


def _shape(node: ast.AST, rename: dict[str, str], local_names: set[str], out: list[str]) -> None:
    """Serialise a subtree with params/locals renamed positionally (no copy of the tree)."""
    if isinstance(node, ast.Name):
        name = node.id
        if name in local_names:
            name = rename.setdefault(name, f"_v{len(rename)}")
        out.append(f"N:{name}")
        return
    if isinstance(node, ast.arg):
        out.append(f"A:{rename.setdefault(node.arg, f'_v{len(rename)}')}")
        return
    cls = node.__class__
    out.append(cls.__name__)
    fields = _SHAPE_FIELDS.get(cls)
    if fields is None:
        fields = _SHAPE_FIELDS[cls] = tuple(f for f in cls._fields if f not in ("ctx", "type_comment", "annotation", "returns"))
    for name in fields:
        try:
            value = getattr(node, name)
        except AttributeError:
            continue
        if isinstance(value, ast.AST):
            _shape(value, rename, local_names, out)
        elif isinstance(value, list):
            out.append("[")
            for item in value:
                if isinstance(item, ast.AST):
                    _shape(item, rename, local_names, out)
                else:
                    out.append(repr(item))
            out.append("]")
        else:
            out.append(repr(value))


_SHAPE_FIELDS: dict[type, tuple[str, ...]] = {}


def body_hash(func: ast.FunctionDef | ast.AsyncFunctionDef, stores: StoredNames | None = None) -> str:
    """Hash of the body identical up to renamed params/locals; "" for bodies too small or too large."""
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body or (func.end_lineno or func.lineno) - func.lineno > MAX_DUPLICATE_LINES:
        return ""
    if len(body) < MIN_DUPLICATE_STATEMENTS and _walk_count_below(body, 25):
        return ""
    own_names = local_names(func) if stores is None else stores.local_names(func)
    rename: dict[str, str] = {}
    out: list[str] = []
    _shape(func.args, rename, own_names, out)
    for stmt in body:
        _shape(stmt, rename, own_names, out)
    return hashlib.sha1("\x00".join(out).encode()).hexdigest()[:16]


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _calls_in(root: ast.AST, comprehensions: list[ast.comprehension] | None = None,
              lambdas: list[ast.Lambda] | None = None, reads: list[ast.Attribute] | None = None) -> list[ast.Call]:
    """Every Call under ``root`` (a stack loop over the fields that can hold children; names
    and constants, a large share of all nodes, are never pushed).  Calls, attribute chains and keyword
    arguments, the commonest nodes, are taken apart inline; the order calls are found in (it
    breaks ties of the final sort) is that of the plain stack walk.  ``reads``: gets each
    outermost attribute chain (`x.a.b` read or stored, the receiver `x.a` of a call `x.a.f()`)."""
    out: list[ast.Call] = []
    stack = [root]
    pop, push, append = stack.pop, stack.append, out.append
    fields_of, AST, Call, Attribute, leaves = _CHILD_FIELDS, ast.AST, ast.Call, ast.Attribute, _LEAF_NODES
    while stack:
        node = pop()
        cls = node.__class__
        if cls is Attribute and reads is not None:
            reads.append(node)  # type: ignore[arg-type]
        while cls is Attribute:  # `a.b.c`: only the head can hold a call
            node = node.value  # type: ignore[attr-defined]
            cls = node.__class__
        if cls is Call:
            append(node)  # type: ignore[arg-type]
            func = node.func  # type: ignore[attr-defined]
            if reads is not None and func.__class__ is Attribute:
                func = func.value  # `x.a.f()` reads `x.a`, and calls what `f` holds
            if func.__class__ not in leaves:
                push(func)
            for arg in node.args:  # type: ignore[attr-defined]
                if arg.__class__ not in leaves:
                    push(arg)
            for keyword in node.keywords:  # type: ignore[attr-defined]
                value = keyword.value  # a keyword's only child: pushed in its place
                if value.__class__ not in leaves:
                    push(value)
            continue
        if cls in leaves:
            continue
        if comprehensions is not None and cls in _COMPREHENSIONS:
            comprehensions.extend(node.generators)  # type: ignore[attr-defined]
        if lambdas is not None and cls is ast.Lambda:
            lambdas.append(node)  # type: ignore[arg-type]  # its calls run when it is called
            continue
        fields = fields_of.get(cls)
        if fields is None:
            fields = _child_fields(cls)
        for name in fields:
            value = getattr(node, name, None)
            kind = value.__class__
            if kind is list:
                for item in value:  # type: ignore[union-attr]
                    if item.__class__ not in leaves and isinstance(item, AST):
                        push(item)
            elif kind not in leaves and isinstance(value, AST):
                push(value)
    if len(out) > 1:
        out.sort(key=_POSITION)
    return out


_POSITION = attrgetter("lineno", "col_offset")


#: node classes without children that can hold a call
_LEAF_NODES = frozenset({ast.Name, ast.Constant})
_LOAD = ast.Load


#: statement fields that hold statements (the bodies of compound statements)
_BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _returns_value(body: list[ast.stmt]) -> bool:
    """Whether a block holds a `return <value>` (nested blocks included; nested defs and
    classes, and expressions, are not searched)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        cls = node.__class__
        if cls is ast.Return:
            if node.value is not None:  # type: ignore[attr-defined]
                return True
            continue
        if cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
            continue
        for name in _BODY_FIELDS:
            stack.extend(getattr(node, name, ()))
    return False


def _ANY_NAME(name: str) -> bool:
    """At module level every name is a global."""
    return True


def _ends_in_exit(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], _TERMINAL)


def _leading_false_exits(body: list[ast.stmt], entries: list[ast.If]) -> list[ast.If]:
    """The `if <cond>: return False` statements a call meets before anything else may leave the
    function (another `return`, or an `if`, `with` or loop holding one)."""
    out: list[ast.If] = []
    # past the last entry there is nothing to find: walk no further (most functions have none)
    last = max((i for i, stmt in enumerate(body) if stmt in entries), default=-1)
    for stmt in body[:last + 1]:
        if stmt in entries:
            if not _returns_false(stmt.body[-1]):
                break
            out.append(stmt)
        elif any(node.__class__ in (ast.Return, ast.Raise, ast.Yield) for node in ast.walk(stmt)):
            break
    return out


def _returns_false(stmt: ast.stmt) -> bool:
    """`return`, `return None`, `return False`, `return 0`: what tests false."""
    if stmt.__class__ is not ast.Return:
        return False
    value = stmt.value
    return value is None or value.__class__ is ast.Constant and not value.value


#: methods that move a tensor to a device (what they return is not known to be on the host)
_TO_DEVICE = frozenset({"cuda", "to"})
#: calls that build a tensor from host data (a list, a numpy array) on the host
HOST_BUILDERS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor"})


def _wrapped_read(value: ast.expr) -> str:
    """The attribute read a value wraps: the one argument of a call (`Algo.from_string(
    args.algo)`, `Mode(cfg.mode)`); "" for any other value."""
    if value.__class__ is not ast.Call:
        return ""
    arguments = [*value.args, *(k.value for k in value.keywords)]
    if len(arguments) != 1 or arguments[0].__class__ is not ast.Attribute:
        return ""
    read = arguments[0]
    if read.value.__class__ is ast.Call and not read.value.args and not read.value.keywords:
        getter = _read_chain(read.value.func, 4)
        return f"{getter}().{read.attr}" if getter else ""  # a getter's settings
    return _read_chain(read, 5)


def _compared(gate: GateRef, marker: tuple[str, ...]) -> GateRef:
    """A name gate as the operand of a comparison: with the literal it is compared with
    (``marker``), if any; a parameter compared with anything else is no longer tested for
    what its callers pass alone."""
    args = as_operand(gate).args
    if not marker and PARAM_TESTED in args:
        args = tuple(a for a in args if a not in (PARAM_TESTED, PARAM_FRESH))
    return replace(gate, args=(*args, *marker))


def _read_chain(node: ast.expr, depth: int) -> str:
    """`req.x`, `reqs[0].x` as `reqs[].x`: an attribute chain off a name, items of it taken
    by a subscript; "" for any other shape or a longer chain."""
    if depth == 0:
        return ""
    if node.__class__ is ast.Name:
        return node.id
    if node.__class__ is ast.Attribute:
        base = _read_chain(node.value, depth - 1)
        return f"{base}.{node.attr}" if base else ""
    if node.__class__ is ast.Subscript:
        base = _read_chain(node.value, depth - 1)
        return f"{base}[]" if base else ""
    return ""


def _passed_value(node: ast.expr, params: tuple[str, ...]) -> str:
    """``PassedValues``' text of an argument: `lit:` a True/False/None literal, `ref:` an
    attribute read off a name (`req.interpolate`), `param:` one of the caller's parameters
    handed on; `?` for anything else."""
    if node.__class__ is ast.Constant:
        value = node.value
        return f"lit:{value!r}" if value is None or type(value) is bool else "?"
    if node.__class__ is ast.Name:
        return f"param:{node.id}" if node.id in params else "?"
    if node.__class__ is ast.Attribute:
        text = _read_chain(node, 5)
        return f"ref:{text}" if text else "?"
    return "?"


def _host_value(node: ast.expr, host: frozenset[str], aliases: dict[str, str], names: re.Pattern[str] | None) -> bool:
    """Whether ``node`` is host data where the code says so: a name that holds it, or is named
    for it (``names``: `seq_lens_cpu`), a call with ``device="cpu"``, ``.cpu()``, ``.to("cpu")``,
    ``.numpy()``/``.tolist()``, a tensor built from a list, and views of those
    (`x.cpu().view(-1)`, `x_cpu[:, 5]`)."""
    while True:
        cls = node.__class__
        if cls is ast.Subscript:
            node = node.value  # type: ignore[attr-defined]
        elif cls is ast.Call:
            call: ast.Call = node  # type: ignore[assignment]
            if any(k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value == "cpu" for k in call.keywords):
                return True
            func = call.func
            if isinstance(func, ast.Attribute):
                if func.attr in ("cpu", "numpy", "tolist") and not call.args:
                    return True
                if func.attr == "to" and call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value == "cpu":
                    return True
            # built from Python data with no device: the default device, the host
            if dotted(func, aliases) in HOST_BUILDERS and not any(k.arg == "device" for k in call.keywords):
                return True
            if not isinstance(func, ast.Attribute) or func.attr in _TO_DEVICE:
                return False
            node = func.value
        else:
            raw = raw_dotted(node)
            return raw is not None and (raw in host or names is not None and names.search(raw.rpartition(".")[2]) is not None)


def _target_names(target: ast.expr) -> list[str]:
    """The ids of the ``ast.Name`` nodes in an assignment target (`self.x` holds `self`):
    a name or an attribute chain, the common targets, without a walk."""
    node = target
    while node.__class__ is ast.Attribute:
        node = node.value
    if node.__class__ is ast.Name:
        return [node.id]
    return [n.id for n in _nodes(target) if n.__class__ is ast.Name]


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


def _is_none(node: ast.AST) -> bool:
    return node.__class__ is ast.Constant and node.value is None


def _literal(node: ast.AST | None) -> str | None:
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
    function: _Scope | None
    refs: list[GateRef] | None = None


@dataclass
class _Scope:
    kind: str  # "def" | "class"
    name: str
    qualname: str
    params: tuple[str, ...] = ()
    once: bool = False
    returned: set[str] = field(default_factory=set)
    returns_value: bool = False
    #: local name -> literal default of the env read assigned to it (`m = getenv("M", "block")`)
    env_defaults: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    node: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    #: its locals that are not declared `global`/`nonlocal` (worked out when first needed)
    locals: set[str] | None = None
    #: the names it declares `global` (worked out with ``locals``)
    globals: frozenset[str] = frozenset()
    #: free name -> the enclosing function binding it, for a nested function (``_Indexer.closure``)
    closure: dict[str, _Scope] | None = None
    #: names assigned a value that starts as a path (``_starts_as_path``)
    path_names: set[str] = field(default_factory=set)
    #: the names it declares `global`, as the walk meets them (``FunctionDef.global_names``)
    global_names: set[str] = field(default_factory=set)
    #: its assignments of formatted strings to plain names (``_Indexer._note_message``)
    messages: list[tuple[BuiltMessage, tuple[PathContext, ...]]] | None = None
    #: the module's ``StoredNames`` (``locals`` is worked out through it)
    stores: StoredNames | None = None
    #: locals holding what a lookup in a container gave (`v = C.get(k)`: v -> C)
    lookups: dict[str, str] = field(default_factory=dict)
    #: each parameter's assignment lines and the function's loops' spans (``_rebound_after``)
    rebinds: tuple[dict[str, list[int]], list[tuple[int, int]]] | None = None

    def persistent(self, name: str) -> bool:
        """Whether ``name`` outlives a call of this function: an attribute of `self`/`cls`,
        or a name that is not one of its locals (a global)."""
        root = name.split(".", 1)[0]
        if root in ("self", "cls") and "." in name:
            return True
        return not self.binds(root)

    def binds(self, name: str) -> bool:
        """Whether ``name`` is one of its locals (a parameter or assigned, not declared
        `global`/`nonlocal`)."""
        if self.locals is None:
            if self.node is None:
                return False
            body = self.node.body
            stored, global_names, declared = _own_scope_names(body) if self.stores is None else self.stores.stored_in(body, True)
            self.globals = frozenset(global_names)
            args = self.node.args
            params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
            self.locals = (params | stored) - declared
        return name in self.locals
    #: names that hold host data (``Snippet.host``), as of the statement being walked
    host: frozenset[str] = frozenset()
    #: its parameters assigned a value before the statement being walked (``Snippet.rebound``)
    rebound: frozenset[str] = frozenset()


def _own_scope_names(body: Sequence[ast.AST]) -> tuple[set[str], set[str], set[str]]:
    """The names ``body`` stores, declares `global`, and declares `global` or `nonlocal`, in
    its own scope (the nodes ``pyast.scope_nodes`` gives), collected as the walk goes."""
    stored: set[str] = set()
    global_names: set[str] = set()
    declared: set[str] = set()
    stack: list[ast.AST] = list(body)
    pop, push, extend = stack.pop, stack.append, stack.extend
    fields_of, AST, stops = _CHILD_FIELDS, ast.AST, SCOPES
    Name, Load, Global, Nonlocal = ast.Name, ast.Load, ast.Global, ast.Nonlocal
    while stack:
        node = pop()
        cls = node.__class__
        if cls is Name:  # no children
            if node.ctx.__class__ is not Load:  # type: ignore[attr-defined]
                stored.add(node.id)  # type: ignore[attr-defined]
            continue
        if cls is Global:
            global_names.update(node.names)  # type: ignore[attr-defined]
            declared.update(node.names)  # type: ignore[attr-defined]
            continue
        if cls is Nonlocal:
            declared.update(node.names)  # type: ignore[attr-defined]
            continue
        if cls in stops:
            continue
        fields = fields_of.get(cls)
        if fields is None:
            fields = _child_fields(cls)
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                extend([v for v in value if isinstance(v, AST)])
            elif isinstance(value, AST):
                push(value)
    return stored, global_names, declared


#: last names of the calls and methods a path is built through (``_starts_as_path``)
_PATH_CALLS = frozenset({"join", "Path", "PurePath", "PosixPath", "str", "fspath", "abspath", "normpath", "realpath",
                         "expanduser", "dirname"})
_PATH_METHODS = frozenset({"format", "joinpath", "resolve", "absolute", "expanduser"})


def _starts_as_path(value: ast.expr | None, names: Callable[[str], bool]) -> bool:
    """Whether an assigned value starts with a literal that reads as a path: `"/tmp/x"`,
    `f"./{n}"`, `"/tmp/%d.pt" % r`, `os.path.join(".run", n)`, `Path(".run") / n`, or with
    a name ``names`` knows (assigned such a value before).  A cheap first look: the walker works
    out the path (``StatementFacts.path_head``)."""
    for _ in range(8):
        if value.__class__ is ast.Name:
            return names(value.id)
        if value.__class__ is ast.Constant:
            text = value.value
            return isinstance(text, str) and text.startswith(("/", "."))
        if value.__class__ is ast.JoinedStr:
            value = value.values[0] if value.values else None
        elif value.__class__ is ast.BinOp:
            value = value.left
        elif value.__class__ is ast.Call:
            func = value.func
            name = func.attr if func.__class__ is ast.Attribute else func.id if func.__class__ is ast.Name else ""
            if name in _PATH_METHODS and func.__class__ is ast.Attribute:
                value = func.value
            elif name in _PATH_CALLS and value.args:
                value = value.args[0]
            else:
                return False
        else:
            return False
    return False


_MAX_PATH_DEPTH = 8


def _builds_path(value: ast.expr) -> bool:
    """Whether a value is a path built from parts: a path join or conversion (`os.path.join`,
    `Path(...)`, `str(p)`), `/` of paths, an f-string, or `+` with a string."""
    if value.__class__ is ast.JoinedStr:
        return True
    if value.__class__ is ast.BinOp:
        op = value.op.__class__
        return op is ast.Div or op is ast.Add and any(
            s.__class__ is ast.Constant and isinstance(s.value, str) for s in (value.left, value.right))
    if value.__class__ is ast.Call:
        func = value.func
        name = func.attr if func.__class__ is ast.Attribute else func.id if func.__class__ is ast.Name else ""
        if name == "join" and func.__class__ is ast.Attribute and func.value.__class__ is ast.Constant:
            return False  # `",".join(names)`: a string, not a path
        return name in _PATH_CALLS or name in _PATH_METHODS
    return False


def _head_names(value: ast.AST, depth: int) -> set[str]:
    """The names or `self.x` attributes a path starts from: `d` of `os.path.join(d, f"{rank}.json")`,
    `Path(d) / x`, `f"{d}/x"`, `d or default`; not a name in a later part, which only picks a
    file under the location."""
    if depth > _MAX_PATH_DEPTH:
        return set()
    if value.__class__ is ast.Name:
        return {value.id}
    if value.__class__ is ast.Attribute:
        inner = value.value
        return {"self." + value.attr} if inner.__class__ is ast.Name and inner.id == "self" else set()
    if value.__class__ is ast.JoinedStr:
        first = value.values[0] if value.values else None
        return _head_names(first.value, depth + 1) if first.__class__ is ast.FormattedValue else set()
    if value.__class__ is ast.BinOp:
        return _head_names(value.left, depth + 1)
    if value.__class__ is ast.BoolOp:
        return set().union(*(_head_names(v, depth + 1) for v in value.values))
    if value.__class__ is ast.IfExp:
        return _head_names(value.body, depth + 1) | _head_names(value.orelse, depth + 1)
    if value.__class__ is ast.Call:
        func = value.func
        if func.__class__ is ast.Attribute and func.attr in _PATH_METHODS:
            return _head_names(func.value, depth + 1)
        args = value.args
        name = func.attr if func.__class__ is ast.Attribute else func.id if func.__class__ is ast.Name else ""
        return _head_names(args[0], depth + 1) if name in _PATH_CALLS and args else set()
    return set()


def _names_file(value: ast.expr, constants: dict[str, str]) -> bool:
    """Whether an assigned value holds a file name of the kinds readers are matched by: a
    literal, or a module constant (`Path(out) / _HIST_FILE`)."""
    for n in ast.walk(value):
        text = n.value if n.__class__ is ast.Constant else constants.get(n.id) if n.__class__ is ast.Name else None
        if isinstance(text, str) and NAMES_FILE.search(text):
            return True
    return False


def _effect(node: ast.stmt, module_level: bool) -> str | None:
    """What a statement does beyond its calls, when that changes what the code computes: an
    attribute, item or module name assigned, a loop left.  A local assigned and a return are left
    out (debug code builds its log lines in locals and returns early when it has nothing to say)."""
    if node.__class__ is ast.Continue or node.__class__ is ast.Break:
        return "loop exit"
    if node.__class__ is ast.Assign or node.__class__ is ast.AugAssign or node.__class__ is ast.AnnAssign:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if t.__class__ is ast.Attribute:
                return f"{raw_dotted(t) or 'attribute'} set"
            if t.__class__ is ast.Subscript or (module_level and t.__class__ is ast.Name):
                return f"{t.id} set" if t.__class__ is ast.Name else "item set"
    return None


class _Indexer(ast.NodeVisitor):
    def __init__(self, path: str, text: str, rs: RuleSet) -> None:
        self.path = path
        self.text = text
        self.lines = lines = text.split("\n")
        self.module = module_name(path)
        self.is_package = path.endswith("__init__.py")
        self.rs = rs
        #: names whose test holds in the steady state (``ruleset.steady_names``)
        self.steady_names = steady_names(rs)
        self.aliases: dict[str, str] = {}
        self.logger_names: set[str] = set()
        self.string_constants: dict[str, str] = {}
        #: module names assigned a value that starts as a path (``_starts_as_path``)
        self.module_path_names: set[str] = set()
        self.functions: list[FunctionDef] = []
        self.calls: list[PlainCall] = []
        #: attribute reads (``_note_reads``), and what each is kept once for
        self.reads: list[PlainCall] = []
        self.read_keys: set[tuple[str | None, str, tuple[GateRef, ...], int, str, str]] = set()
        #: the statement a read is in, when its value may be returned: "<return>", or the name assigned
        self._read_context = ""
        #: the attribute names the file stores (`x.a = v`): plain attributes, no properties
        self.stored_attributes: set[str] = set()
        self.snippets: list[Snippet] = []
        self.scopes: list[_Scope] = []
        #: the innermost enclosing def scope (a class body inside a def keeps the def's), None at module level
        self.function: _Scope | None = None
        #: the gates around the current statement, one group per test (see ``_gates_now``)
        self.gate_groups: list[_GateGroup] = []
        #: the gate groups of the enclosing bodies a def or class body set aside
        self._saved_gate_groups: list[list[_GateGroup]] = []
        self._interned_gates: dict[tuple[GateRef, ...], tuple[GateRef, ...]] = {}
        #: the gates as their interned tuple; None when the groups changed since
        self._gates_tuple: tuple[GateRef, ...] | None = ()
        self.loop_depth = 0
        #: how many `if` bodies of the current function hold the current statement
        self.branch_depth = 0
        #: the last disjunction numbered in this file (``GateRef.any_of``)
        self.any_of = 0
        #: names and attributes a gate tests, and the assignments to names and attributes
        #: (scope, name, value), whose gates are worked out at the end for the tested ones
        self.gate_names: set[str] = set()
        #: names a test calls an `is_*` predicate of (``wrapped``)
        self.predicate_receivers: set[str] = set()
        #: (scope, name, holds host data) of the assignment being walked (``_Scope.host``)
        self._host_after: tuple[_Scope, str, bool] | None = None
        #: (scope, name, value, the gate groups around it) of each assignment
        self.assignments: list[tuple[_Scope | None, str, ast.expr, tuple[_GateGroup, ...]]] = []
        self.loop_iters: list[str] = []
        self.returned_names: dict[str | None, frozenset[str]] = {}
        self.env_exporters: set[str | None] = set()
        self.returning_tests: set[int] = set()
        #: line starts (offsets into the text) and, per pattern, prefix counts of matching lines
        # line i starts after the lines before it and their i newlines (all in C: map, accumulate)
        self.line_starts: list[int] = list(map(add, accumulate(map(len, lines), initial=0), count()))
        self.line_starts.pop()
        self.token_prefix = self._line_prefix(SNIPPET_TOKENS, snippet_literals(rs.api_literals))
        self.alias_names: set[str] = set()
        self.function_nodes: dict[tuple[str, int], ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.stores = StoredNames(self.lines, text, self.line_starts)
        #: function name -> whether it matches the rules' debug-name pattern
        self.debug_names: dict[str, bool] = {}
        #: builtin names this module binds itself (calls to them are edges)
        self.shadowed: frozenset[str] = frozenset()
        #: names the enclosing `for` loops bind (``Snippet.loop_bound``)
        self.loop_bound: frozenset[str] = frozenset()
        #: last name of each logger factory (`getLogger`, `init_logger`): a cheap first check
        self.factory_names = {f.rsplit(".", 1)[-1] for f in rs.logger_factories}
        #: literals a compared value is "off" at (`x == "0"`, `x is None`)
        self.off_literals = rs.off_values | {"None", "False"}
        self.alias_tokens: re.Pattern[str] | None = None
        self.alias_prefix: list[int] | None = None
        #: first line of each simple statement -> (assignment target, is a return)
        self.statements: dict[int, tuple[str | None, bool]] = {}
        #: (function, target name, iterable) of each comprehension the edges pass saw
        self.comprehensions: list[tuple[str | None, str, ast.expr]] = []
        self.arguments: list[tuple[str | None, str, ast.Call]] = []
        #: (each ast.Lambda, its qualname), and how many lambdas each scope has so far
        self.lambdas: list[tuple[ast.Lambda, str]] = []
        self.lambda_numbers: dict[str, int] = {}
        #: (each `while` directly in a function's statements, the function's qualname)
        self.whiles: list[tuple[ast.While, str]] = []
        #: the path contexts (``extract.paths``) around the current statement, outermost first
        self.path_contexts: tuple[PathContext, ...] = ()
        #: (function, first line, last line, context) of each block on an error or rare path
        self.path_blocks: list[tuple[str, int, int, PathContext]] = []
        #: names the module increments (`self.n += 1`): counters
        self.incremented: set[str] = set()
        #: (line, function, gates, what) of the gated statements that change state or control flow
        self.effects: list[tuple[int, str | None, tuple[GateRef, ...], str]] = []
        #: calls passing host data (``HostArguments``)
        self.host_arguments: list[HostArguments] = []
        self.passed_values: list[PassedValues] = []
        #: messages formatted into locals only calls read, each with its path contexts
        self.built_messages: list[tuple[BuiltMessage, tuple[PathContext, ...]]] = []
        #: each callee and code text of the plain calls made so far, by itself
        self.shared: dict[str, str] = {}

    # ------------------------------------------------------------ context
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

    def _qualname(self, name: str) -> str:
        if not self.scopes:
            return name
        parent = self.scopes[-1]
        return f"{parent.qualname}.<locals>.{name}" if parent.kind == "def" else f"{parent.qualname}.{name}"

    def _source(self, node: ast.stmt | ast.expr) -> str:
        """Exact source of a node (first line from its column), no re-split of the file."""
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        start = _char_offset(self.lines[first], node.col_offset)
        end = _char_offset(self.lines[last], node.end_col_offset or 0)
        if first == last:
            return self.lines[first][start:end]
        parts = [self.lines[first][start:]]
        parts.extend(self.lines[first + 1:last])
        parts.append(self.lines[last][:end])
        return "\n".join(parts)

    def _snippet(self, text: str, node: ast.stmt | ast.expr, *, assign_target: str | None = None, is_return: bool = False,
                 builds_path: bool = False, prefix: int = 0) -> None:
        scope = self.function
        if "(" in text:
            self._snippet_arguments(node)
        elif "." in text:
            self._reads_only(node)
        self.snippets.append(
            Snippet(
                text=text, line=node.lineno, end_line=node.end_lineno or node.lineno,
                function=scope.qualname if scope else None, params=scope.params if scope else (),
                once=scope is None or scope.once, gates=self._gates_now(), loop_depth=self.loop_depth,
                assign_target=assign_target, is_return=is_return, builds_path=builds_path,
                loop_iter=self.loop_iters[-1] if self.loop_iters else "",
                col=self._column(node.lineno, node.col_offset),
                end_col=self._column(node.end_lineno or node.lineno, node.end_col_offset or 0), prefix=prefix,
                path_contexts=self.path_contexts, in_branch=self.branch_depth > 0,
                host=scope.host if scope else frozenset(),
                rebound=scope.rebound if scope else frozenset(),
                closure=tuple((name, home.qualname) for name, home in self.closure(scope).items()) if scope else (),
                loop_bound=self.loop_bound,
            )
        )

    def closure(self, scope: _Scope) -> dict[str, _Scope]:
        """The free names of a nested function that an enclosing function binds, each with that
        function (worked out on entering it, while the enclosing scopes are known): they hold what the enclosing call put there (`trace_e2e = ...;
        def trace_sync(): if not trace_e2e: return`), so a gate on one is the enclosing local."""
        if scope.closure is not None:
            return scope.closure
        scope.closure = {}
        if scope.node is None or ".<locals>." not in scope.qualname:
            return scope.closure
        enclosing: list[_Scope] = []
        for outer in self.scopes:
            if outer is scope:
                break
            if outer.kind == "def":  # a class body's names are not seen by the functions in it
                enclosing.append(outer)
        scope.binds("")  # works out its globals
        # every name it uses: the ones it assigns are its own unless declared `nonlocal`
        used = _name_ids(scope.node)
        for name in sorted(used):
            if scope.binds(name) or name in scope.globals:
                continue
            for outer in reversed(enclosing):
                if outer.binds(name):
                    scope.closure[name] = outer
                    break
                if outer.node is None or name in outer.globals:
                    break
        return scope.closure

    def _column(self, line: int, byte_offset: int) -> int:
        """The 0-based character column of an ``ast`` offset (UTF-8 bytes) on a 1-based line."""
        return _char_offset(self.lines[line - 1], byte_offset)

    def _line_prefix(self, pattern: re.Pattern[str], literals: tuple[tuple[str, bool], ...]) -> list[int]:
        return line_prefix(self.lines, self.text, self.line_starts, pattern, literals)

    def _has_tokens(self, node: ast.stmt | ast.expr) -> bool:
        first, last = node.lineno - 1, (node.end_lineno or node.lineno)
        if self.token_prefix[last] > self.token_prefix[first]:
            return True
        if self.alias_tokens is None:
            return False
        if self.alias_prefix is None:
            self.alias_prefix = self._line_prefix(self.alias_tokens, tuple((name, False) for name in sorted(self.alias_names)))
        return self.alias_prefix[last] > self.alias_prefix[first]

    def _note_alias(self, name: str, origin: str, token: bool = False) -> None:
        """A local name for an env API, logger or sync (`from os import getenv as ge`) is a token too."""
        self._settle_all()
        self.aliases[name] = origin
        if (token or origin in self.rs.env_calls or origin in self.rs.env_mappings or origin in self.rs.logger_factories
                or any(origin == r.object for r in self.rs.registries)):
            self.alias_names.add(name)
            self.alias_tokens = re.compile(r"\b(" + "|".join(map(re.escape, sorted(self.alias_names))) + r")\b")
            self.alias_prefix = None  # recomputed on first use

    # ------------------------------------------------------------ imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self._note_alias(alias.asname, alias.name)
            else:
                head = alias.name.split(".")[0]
                if head not in self.aliases:
                    self._settle_all()
                    self.aliases[head] = head

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            base = resolve_relative(self.module, self.is_package, node.level, node.module)
        for alias in node.names:
            if alias.name != "*":
                self._note_alias(alias.asname or alias.name, f"{base}.{alias.name}" if base else alias.name)
            elif base:
                self.aliases[f"*{base}"] = base  # a star import: its names are looked up in base

    # ------------------------------------------------------------ scopes
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in node.bases:
            self._edges(expr)
        if node.decorator_list:
            self._decorator_edges(node)
        self.scopes.append(_Scope("class", node.name, self._qualname(node.name), once=True))
        self._set_gates_aside()
        self._block(node.body)
        self._restore_gates()
        self.scopes.pop()

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        qualname = self._qualname(node.name)
        positional = [*node.args.posonlyargs, *node.args.args]
        params = tuple(a.arg for a in (*positional, *node.args.kwonlyargs))
        defaults = list(zip([a.arg for a in positional][len(positional) - len(node.args.defaults):], node.args.defaults))
        defaults += [(a.arg, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
        param_defaults = tuple((name, d.value) for name, d in defaults if isinstance(d, ast.Constant) and isinstance(d.value, str))
        int_defaults = tuple((name, d.value) for name, d in defaults if isinstance(d, ast.Constant) and type(d.value) is int)
        const_defaults = tuple((name, repr(d.value)) for name, d in defaults
                               if isinstance(d, ast.Constant) and (d.value is None or type(d.value) is bool))
        decorators = tuple(
            d for d in (dotted(dec.func if isinstance(dec, ast.Call) else dec, self.aliases) for dec in node.decorator_list) if d
        )
        if node.decorator_list:
            self._decorator_edges(node)
        end = node.end_lineno or node.lineno
        once = node.name in self.rs.once_functions or bool(set(decorators) & self.rs.once_decorators)
        scope = _Scope("def", node.name, qualname, params, once, node=node, stores=self.stores)
        scope.path_names.update(name for name, default in param_defaults if default.startswith(("/", ".")))
        self.scopes.append(scope)
        if ".<locals>." in qualname:
            self.closure(scope)
        saved_function, self.function = self.function, scope
        entries = [stmt for stmt in node.body if isinstance(stmt, ast.If) and not stmt.orelse and _ends_in_exit(stmt.body)]
        entry_gates = tuple(ref for stmt in entries for ref in self.gate_refs(stmt.test, active=False))
        false_entry_gates = tuple(ref for stmt in _leading_false_exits(node.body, entries) for ref in self.gate_refs(stmt.test, active=False))
        # a predicate (`def _eplb_on(self): return self.args.enable_eplb and ...`): what its value tests
        body = [stmt for stmt in node.body if not (stmt.__class__ is ast.Expr and stmt.value.__class__ is ast.Constant)]
        final = body[-1] if body else None
        returned_test = tuple(self.gate_refs(final.value, active=True)) if (
            final is not None and final.__class__ is ast.Return and final.value is not None and final.value.__class__ in _TEST_VALUES
            and all(stmt.__class__ is ast.Assign for stmt in body[:-1])) else ()
        fallback_return, fallback_gates = self._fallback(body)
        self._set_gates_aside()
        saved_loops, self.loop_depth = self.loop_depth, 0
        saved_branches, self.branch_depth = self.branch_depth, 0
        saved_iters, self.loop_iters = self.loop_iters, []
        handler = function_context(node.name, node.lineno)
        saved_paths, self.path_contexts = self.path_contexts, ()
        if handler:
            self._on_path(handler, node.body)
        else:
            self._block(node.body)
        if scope.messages:
            self._message_uses(scope, node)
        self.path_contexts = saved_paths
        self.loop_iters = saved_iters
        self.loop_depth = saved_loops
        self.branch_depth = saved_branches
        self._restore_gates()
        self.function = saved_function
        self.scopes.pop()
        self.returned_names[qualname] = frozenset(scope.returned)
        self.function_nodes[(qualname, node.lineno)] = node
        self.functions.append(
            FunctionDef(
                qualname=qualname, name=node.name, class_name=self.scopes[-1].name if self.scopes and self.scopes[-1].kind == "class" else None,
                line=node.lineno, end_line=end, params=params, returns_value=scope.returns_value,
                # filled in by ``hash_bodies`` for the functions that hold facts (duplicated *helpers*)
                body_hash="",
                body_lines=end - node.lineno + 1, decorators=decorators,
                entry_gates=entry_gates, param_defaults=param_defaults, debug_named=self._debug_named(node.name),
                col=self._column(node.lineno, node.col_offset), global_names=tuple(sorted(scope.global_names)),
                int_defaults=int_defaults, returned_test=returned_test, const_defaults=const_defaults,
                false_entry_gates=false_entry_gates, fallback_return=fallback_return, fallback_gates=fallback_gates,
            )
        )

    def _fallback(self, body: list[ast.stmt]) -> tuple[str, tuple[GateRef, ...]]:
        """``FunctionDef.fallback_return`` and ``fallback_gates`` of a body made of `if <cond>:
        ... return` statements and a last `return <int or dotted name>` (a level helper:
        `if envs.X.is_set(): return Level(...)` ... `return Level.OFF`)."""
        if not body or body[-1].__class__ is not ast.Return or len(body) > _MAX_FALLBACK_EXITS:
            return "", ()
        value = body[-1].value
        if value.__class__ is ast.Constant and type(value.value) is int:
            text = str(value.value)
        elif value.__class__ is ast.Attribute and (name := dotted(value, self.aliases)) is not None:
            text = name
        else:
            return "", ()
        exits = body[:-1]
        if not exits or not all(stmt.__class__ is ast.If and not stmt.orelse and _ends_in_exit(stmt.body)
                                for stmt in exits):
            return "", ()
        return text, tuple(ref for stmt in exits for ref in self.gate_refs(stmt.test, active=True))  # type: ignore[attr-defined]

    def _debug_named(self, name: str) -> bool:
        named = self.debug_names.get(name)
        if named is None:
            named = self.debug_names[name] = self.rs.debug_name_re.search(name) is not None
        return named

    visit_FunctionDef = _visit_def
    visit_AsyncFunctionDef = _visit_def

    # ------------------------------------------------------------ blocks and gates
    def _block(self, body: list[ast.stmt]) -> None:
        pushed = 0
        visitors = _STATEMENT_VISITORS
        saved_paths = self.path_contexts
        scope = self.function
        for i, stmt in enumerate(body):
            if scope is not None and stmt.__class__ is ast.Assign:
                self._note_lookup(scope, stmt)
            visitor = visitors.get(stmt.__class__)
            if visitor is None:
                self._simple(stmt)
            else:
                visitor(self, stmt)
            if isinstance(stmt, ast.If) and not stmt.orelse and _ends_in_exit(stmt.body):
                self._push_gates(stmt.test, active=False)
                pushed += 1
                rest = body[i + 1:]
                # what runs past `if C: return` is the branch of `not C`: a cache miss, a first call
                context = branch_context(stmt.test, False, rest, scope.persistent, stmt.test.lineno, scope.lookups,
                                         self.rs.rare_test_re, rest=True, after_false=_returns_false(stmt.body[-1]),
                                         steady_names=self.steady_names,
                                         precondition=stmt.body[-1].__class__ is ast.Raise) if rest and scope is not None else None
                if context is not None:
                    self._note_block(context, rest)
                    self.path_contexts = (*self.path_contexts, context)
            elif stmt.__class__ is ast.Assert and scope is not None and i + 1 < len(body):
                context = assert_context(stmt.test, self.rs.rare_test_re, stmt.lineno)
                if context is not None:
                    self._note_block(context, body[i + 1:])
                    self.path_contexts = (*self.path_contexts, context)
        self.path_contexts = saved_paths
        self._pop_gates(pushed)

    @staticmethod
    def _note_lookup(scope: _Scope, stmt: ast.Assign) -> None:
        """`v = C.get(k)` / `v = C[k]` / `v = getattr(C, "x", None)`: v holds what C had."""
        if len(stmt.targets) != 1 or stmt.targets[0].__class__ is not ast.Name:
            return
        name, value = stmt.targets[0].id, stmt.value
        owner = None
        if value.__class__ is ast.Call and value.func.__class__ is ast.Attribute and value.func.attr == "get":
            owner = dotted_name(value.func.value)
        elif value.__class__ is ast.Subscript:
            owner = dotted_name(value.value)
        if owner:
            scope.lookups[name] = owner
        else:
            scope.lookups.pop(name, None)

    def _note_block(self, context: PathContext, body: list[ast.stmt]) -> None:
        if self.function is not None and body:
            self.path_blocks.append((self.function.qualname, body[0].lineno, body[-1].end_lineno or body[-1].lineno, context))

    def visit_Module(self, node: ast.Module) -> None:
        self.shadowed = _builtins_bound_by(node)
        self._block(node.body)

    def _gated(self, test: ast.expr, active: bool, body: list[ast.stmt], loop: bool = False) -> None:
        """``body`` under the gates of ``test`` (``active``: the body runs when it is true;
        ``loop``: it is a `while` loop's)."""
        self._push_gates(test, active)
        scope = self.function
        context = branch_context(test, active, body, scope.persistent if scope is not None else _ANY_NAME, test.lineno,
                                 scope.lookups if scope is not None else None, self.rs.rare_test_re, loop,
                                 steady_names=self.steady_names)
        self.branch_depth += not loop
        if context is None:
            self._block(body)
        else:
            self._on_path(context, body)
        self.branch_depth -= not loop
        self._pop_gates(1)

    def _on_path(self, context: PathContext, body: list[ast.stmt]) -> None:
        self._note_block(context, body)
        saved = self.path_contexts
        self.path_contexts = (*saved, context)
        self._block(body)
        self.path_contexts = saved

    def _header(self, expr: ast.expr, builds_path: bool = False, assign_target: str | None = None) -> None:
        """An expression in a compound statement's header: snippet when it holds tokens, else edges."""
        if self._has_tokens(expr):
            text = self._source(expr)
            added = f"{assign_target} = (" if assign_target else "("
            self._snippet(f"{added}{text})", expr, assign_target=assign_target, builds_path=builds_path, prefix=len(added))
        else:
            self._edges(expr)

    def _test_header(self, test: ast.expr) -> None:
        """An `if` test: a call in a later operand of `and`/`or` runs only when the earlier
        ones let it (`if self.connector is not None and self.connector.ready():`). A test the
        libcst walker reads (it holds tokens) is gated there, operand by operand, as well."""
        if test.__class__ is not ast.BoolOp or len(test.values) < 2:
            self._header(test)
            return
        active = test.op.__class__ is ast.And
        values = test.values
        self._header(values[0])
        for i in range(1, len(values)):
            self._push_gates(values[i - 1], active)
            self._header(values[i])
        self._pop_gates(len(values) - 1)

    def visit_If(self, node: ast.If) -> None:
        self._test_header(node.test)
        if self._has_tokens(node.test) and _returns_value(node.body):
            self.returning_tests.add(node.test.lineno)
        scope = self.function
        before = scope.host if scope is not None else frozenset()
        self._gated(node.test, True, node.body)
        if scope is None:
            if node.orelse:
                self._gated(node.test, False, node.orelse)
            return
        after_body, scope.host = scope.host, before
        if node.orelse:
            self._gated(node.test, False, node.orelse)
        # host data after the `if` on every path that goes on past it (a branch that leaves does not)
        if _ends_in_exit(node.orelse):
            scope.host = after_body
        elif not _ends_in_exit(node.body):
            scope.host = after_body & scope.host

    def visit_While(self, node: ast.While) -> None:
        if self.scopes and self.scopes[-1].kind == "def":
            self.whiles.append((node, self.scopes[-1].qualname))
        self._header(node.test)
        self.loop_depth += 1
        self.loop_iters.append("while")
        self._gated(node.test, True, node.body, loop=True)
        self.loop_iters.pop()
        self.loop_depth -= 1
        self._block(node.orelse)

    def _visit_for(self, node: ast.For | ast.AsyncFor) -> None:
        self._header(node.iter)
        if node.__class__ is ast.For:
            self._call_edges(_protocol_calls(node.iter, ("__iter__", "__next__")))
        self.loop_depth += 1
        self.loop_iters.append(" ".join(self._source(node.iter).split())[:80])
        outer_bound = self.loop_bound
        if node.target.__class__ is ast.Name:
            self.loop_bound = outer_bound | {node.target.id}
        scope = self.function
        if scope is not None and scope.host:
            # the loop's target holds its items, and the body may run no time at all
            before = scope.host - {n.id for n in ast.walk(node.target) if n.__class__ is ast.Name}
            scope.host = before
            self._block(node.body)
            scope.host = scope.host & before
        else:
            self._block(node.body)
        self.loop_bound = outer_bound
        self.loop_iters.pop()
        self.loop_depth -= 1
        self._block(node.orelse)

    visit_For = _visit_for
    visit_AsyncFor = _visit_for

    def _visit_with(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            target = raw_dotted(item.optional_vars) if item.optional_vars is not None else None
            self._header(item.context_expr, assign_target=target)
            if node.__class__ is ast.With:
                self._call_edges(_protocol_calls(item.context_expr, ("__enter__", "__exit__")))
        self._block(node.body)

    visit_With = _visit_with
    visit_AsyncWith = _visit_with

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        self._block(node.body)
        for handler in node.handlers:
            self._on_path(except_context(handler.lineno), handler.body)
        self._block(node.orelse)
        self._block(node.finalbody)

    visit_TryStar = visit_Try

    def visit_Match(self, node: ast.Match) -> None:
        self._header(node.subject)
        for case in node.cases:
            self._block(case.body)

    # ------------------------------------------------------------ simple statements
    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self._simple(node)
        else:
            super().generic_visit(node)

    def _simple(self, node: ast.stmt) -> None:
        target = None
        # a read whose value the function may return is kept apart from the same read elsewhere
        # (``_mark_returned`` marks it by its statement)
        cls = node.__class__
        self._read_context = "<return>" if cls is ast.Return else (
            node.targets[0].id if cls is ast.Assign and len(node.targets) == 1 and node.targets[0].__class__ is ast.Name  # type: ignore[attr-defined]
            else "")
        if node.__class__ is ast.Global and self.function is not None:
            self.function.global_names.update(node.names)
        if node.__class__ is ast.AugAssign and node.op.__class__ is ast.Add:
            counter = raw_dotted(node.target)
            if counter:
                self.incremented.add(counter)
        if self.gate_groups:
            effect = _effect(node, self.function is None)
            if effect is not None:
                gates = self._gates_now()
                if gates:
                    self.effects.append((node.lineno, self.function.qualname if self.function else None, gates, effect))
        if isinstance(node, ast.Return) and node.value is not None and _literal(node.value) != "None":
            scope = self.function
            if scope is not None:
                scope.returns_value = True
                returned = node.value
                if returned.__class__ is ast.Name:
                    scope.returned.add(returned.id)
                else:
                    scope.returned.update(_name_ids(returned))
        if node.__class__ is ast.Expr and node.value.__class__ is ast.Constant:
            # a docstring or a bare literal: no call, no read, whatever words it holds
            # (docstrings had been a sizeable part of the statement text given to libcst)
            self.statements[node.lineno] = (None, False)
            return
        # env reads and writes always hold a token (`environ`, `getenv`, `envs.`, an alias)
        has_tokens = self._has_tokens(node)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets: list[ast.expr] = node.targets if isinstance(node, ast.Assign) else [node.target]
            self._note_assign(targets, node.value)
            if self.function is not None and len(targets) == 1 and targets[0].__class__ is ast.Name and node.value is not None:
                self._note_message(node, targets[0].id, node.value)
            if len(targets) == 1:
                target = raw_dotted(targets[0])
                scope = self.function
                if scope is not None and target is not None and (target in scope.host or node.value is not None
                                                                 and _host_value(node.value, scope.host, self.aliases, self.rs.host_name_re)):
                    # after the statement's own snippet: `x = x.cpu()` syncs, then x is on the host
                    self._host_after = (scope, target, node.value is not None and _host_value(node.value, scope.host, self.aliases, self.rs.host_name_re))
                # a module name, a local or a `self.` attribute (not a class body's names)
                if target is not None and node.value is not None and (self.function is not None or not self.scopes) and (
                        "." not in target or self.function is not None and target.startswith("self.") and target.count(".") == 1):
                    # a nested function setting a `nonlocal` name or the enclosing `self.`: the enclosing function's
                    owner = self.closure(self.function).get(target.split(".", 1)[0], self.function) if self.function else None
                    self.assignments.append((owner, target, node.value, tuple(self.gate_groups)))
                value = node.value
                conversion = ""
                while isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _CONVERSIONS and value.args:
                    conversion = conversion or value.func.id
                    value = value.args[0]
                is_env, default = self._env_default(value) if has_tokens and value is not None else (False, None)
                scope = self.function
                if is_env and scope is not None and isinstance(targets[0], ast.Name):
                    self._settle_all()
                    scope.env_defaults[targets[0].id] = (default, conversion)
        if has_tokens and self._exports_env(node):
            scope = self.function
            self.env_exporters.add(scope.qualname if scope else None)
        assigned = node.value if target is not None and isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if target is not None and assigned is not None and _starts_as_path(assigned, self._is_path_name):
            # walked for the output path it hands on (`_DUMP = "/tmp/x"` ... `open(_DUMP, "a")`)
            has_tokens = True
            (self.function.path_names if self.function is not None else self.module_path_names).add(target)
        if not has_tokens and assigned is not None and (
                assigned.__class__ is ast.Constant or _builds_path(assigned)) and _names_file(assigned, self.string_constants):
            # walked for the file name it hands on (`self.accept_path = Path(out) / "accept.csv"`): the readers join
            has_tokens = True
        if has_tokens:
            builds_path = bool(target and re.search(r"(?i)(dir|path|root|run|file|out)", target.rsplit(".", 1)[-1]))
            self._snippet(self._source(node), node, assign_target=target, is_return=isinstance(node, ast.Return),
                          builds_path=builds_path)
        else:
            self._edges(node)
        if self._host_after is not None:
            scope, name, host = self._host_after
            scope.host = scope.host | {name} if host else scope.host - {name}
            self._host_after = None
        if node.__class__ in (ast.Assign, ast.AugAssign, ast.AnnAssign) and self.function is not None and self.function.params:
            scope = self.function
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            params = scope.params
            for t in targets:
                for name in _target_names(t):
                    if name in params and name not in scope.rebound:
                        scope.rebound = scope.rebound | {name}
        self.statements[node.lineno] = (target, isinstance(node, ast.Return))
        self._read_context = ""

    def _note_message(self, node: ast.stmt, name: str, value: ast.expr) -> None:
        """`msg = f"step {i}"`: a formatted string in a local, kept until the function's end
        tells whether only calls read it (``_message_uses``)."""
        kinds = format_kinds(value, self.rs.eager_calls, self._dotted)
        scope = self.function
        if not kinds or scope is None:
            return
        rs = self.rs
        for call in _calls_in(value):  # `f"loss {t.item()}"`: the sync is paid with the message
            func = call.func
            if (func.__class__ is ast.Attribute and func.attr in rs.sync_methods and not call.args
                    and (raw_dotted(func.value) or "").split(".")[0] not in rs.not_tensor_receivers
                    and not _host_value(func.value, scope.host, self.aliases, rs.host_name_re)):
                kinds += (f"call:{func.attr}",)
        end = node.end_lineno or node.lineno
        message = BuiltMessage(
            name=name, function=scope.qualname, line=node.lineno, end_line=end,
            col=self._column(node.lineno, node.col_offset), end_col=self._column(end, node.end_col_offset or 0),
            gates=self._gates_now(), loop_depth=self.loop_depth, loop_iter=self.loop_iters[-1] if self.loop_iters else "",
            eager=tuple(dict.fromkeys(kinds)), code=" ".join(self._source(node).split())[:CODE_CHARS], uses=(),
        )
        if scope.messages is None:
            scope.messages = []
        scope.messages.append((message, self.path_contexts))

    def _message_uses(self, scope: _Scope, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """The calls that read each message local of a function, once it is walked; a
        parameter, a global or a name read otherwise keeps none (and is dropped)."""
        messages = scope.messages or []
        names = {m.name for m, _ in messages if scope.binds(m.name) and m.name not in scope.params}
        found = argument_uses(node, names) if names else {}
        self.built_messages.extend((replace(m, uses=tuple(MessageUse(*use) for use in found[m.name])), contexts)
                                   for m, contexts in messages if m.name in found)

    def _note_host_arguments(self, callee: str, call: ast.Call) -> None:
        """The arguments of a call that hold host data (``HostArguments``): a helper whose every
        caller passes host data in a parameter holds host data there (``joins.host_data``)."""
        scope = self.function
        host, aliases, names = scope.host if scope else frozenset(), self.aliases, self.rs.host_name_re
        positions = []
        Name, Constant = ast.Name, ast.Constant
        for index, arg in enumerate(call.args):
            cls = arg.__class__
            if cls is ast.Starred:
                break  # the positions after it are not known
            if cls is Constant:
                continue
            if cls is Name:  # ``_host_value`` of a name, inline: most arguments are names
                if arg.id in host or names is not None and names.search(arg.id) is not None:  # type: ignore[attr-defined]
                    positions.append(index)
            elif _host_value(arg, host, aliases, names):
                positions.append(index)
        keywords = tuple(k.arg for k in call.keywords
                         if k.arg is not None and k.value.__class__ is not Constant and _host_value(k.value, host, aliases, names))
        if positions or keywords:
            self.host_arguments.append(HostArguments(call.lineno, call.end_lineno or call.lineno, callee.rpartition(".")[2],
                                                     tuple(positions), keywords))

    def _note_passed_values(self, callee: str, call: ast.Call) -> None:
        """The arguments of a call a gate on the parameter they land in can be judged by
        (``PassedValues``): a parameter tested for an option is off when every caller hands
        it that option, or a literal, that keeps its code off (``joins.param_gates``)."""
        scope = self.function
        params = scope.params if scope is not None else ()
        positions: list[tuple[int, str]] = []
        is_open = False
        for index, arg in enumerate(call.args):
            if arg.__class__ is ast.Starred:
                is_open = True
                break  # the positions after it are not known
            positions.append((index, _passed_value(arg, params)))
        keywords: list[tuple[str, str]] = []
        for keyword in call.keywords:
            if keyword.arg is None:
                is_open = True
                continue
            keywords.append((keyword.arg, _passed_value(keyword.value, params)))
        if any(value != "?" for _, value in positions) or any(value != "?" for _, value in keywords):
            self.passed_values.append(PassedValues(call.lineno, call.end_lineno or call.lineno, callee.rpartition(".")[2],
                                                   tuple(positions), tuple(keywords), is_open))

    def _dotted(self, node: ast.AST) -> str | None:
        return dotted(node, self.aliases)

    def _is_path_name(self, name: str) -> bool:
        """Whether a name holds a value that starts as a path (``_starts_as_path``) here: a
        local or module name assigned one before, a parameter with a string default."""
        scope = self.function
        return name in self.module_path_names or scope is not None and name in scope.path_names

    def _note_assign(self, targets: list[ast.expr], value: ast.expr | None) -> None:
        if value is None:
            return
        if isinstance(value, ast.Call):
            func = value.func
            last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if last is None or (last not in self.factory_names and last not in self.alias_names):
                return
            factory = dotted(func, self.aliases)
            if factory in self.rs.logger_factories:
                self.logger_names.update(t for t in (raw_dotted(x) for x in targets) if t)
        elif not self.scopes and isinstance(value, ast.Constant) and isinstance(value.value, str):
            for t in targets:
                if isinstance(t, ast.Name):
                    self._settle_all()
                    self.string_constants[t.id] = value.value
        elif isinstance(value, (ast.Name, ast.Attribute)):
            origin = dotted(value, self.aliases)
            # `synchronize = platform.synchronize`: a call of the name is the sync
            syncs = origin is not None and (origin in self.rs.sync_functions or isinstance(value, ast.Attribute)
                                            and value.attr == "synchronize")
            if origin is not None and (origin in self.rs.env_mappings or origin in self.rs.env_calls or syncs):
                for t in targets:
                    if isinstance(t, ast.Name):
                        self._note_alias(t.id, origin, token=syncs)

    def _exports_env(self, node: ast.stmt) -> bool:
        if isinstance(node, ast.Assign):
            return any(isinstance(t, ast.Subscript) and dotted(t.value, self.aliases) in self.rs.env_mappings for t in node.targets)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            callee = dotted(node.value.func, self.aliases) or ""
            return callee in ("os.environ.update", "os.environ.setdefault", "os.putenv")
        return False

    def _edges(self, node: ast.stmt | ast.expr) -> None:
        """Call-graph edges of a statement the libcst walker does not see."""
        implicit = _implicit_calls(node)
        first, last = node.lineno - 1, (node.end_lineno or node.lineno)
        start, end = self.line_starts[first], self.line_starts[last] if last < len(self.line_starts) else len(self.text)
        if not implicit and self.text.find("(", start, end) == -1 and self.text.find("lambda", start, end) == -1:
            if self.text.find(".", start, end) != -1:
                self._reads_only(node)
            return
        scope = self.function
        function = scope.qualname if scope else None
        generators: list[ast.comprehension] = []
        lambdas: list[ast.Lambda] = []
        reads: list[ast.Attribute] = []
        calls = _calls_in(node, generators, lambdas, reads)
        self._note_reads(reads)
        if implicit:
            calls = sorted([*calls, *implicit], key=_POSITION)
        for generator in generators:  # `sum(r.tokens() for r in batch.reqs)`: r is an element
            if generator.target.__class__ is ast.Name:
                self.comprehensions.append((function, generator.target.id, generator.iter))
        self._with_lambdas(calls, lambdas)

    def _with_lambdas(self, calls: list[ast.Call], lambdas: list[ast.Lambda]) -> None:
        """The edges of ``calls``, then the lambdas among them, each numbered in the current
        scope in source order (`f.<locals>.<lambda1>`, as PyCG names them)."""
        names: dict[int, str] = {}
        outer = self.function
        owner = outer.qualname if outer else ""
        lambdas.sort(key=_POSITION)
        for expr in lambdas:
            number = self.lambda_numbers[owner] = self.lambda_numbers.get(owner, 0) + 1
            names[id(expr)] = f"{owner}.<locals>.<lambda{number}>" if owner else f"<lambda{number}>"
        self._call_edges(calls, names)
        for expr in lambdas:
            self._lambda(expr, names[id(expr)])

    def _lambda(self, node: ast.Lambda, qualname: str) -> None:
        """A lambda is a function of its own: its calls run when it is called, not where it
        is written."""
        outer = self.function
        name = qualname.rpartition(".")[2]
        args = node.args
        params = tuple(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
        self.lambdas.append((node, qualname))
        self.functions.append(FunctionDef(
            qualname=qualname, name=name, class_name=None, line=node.lineno, end_line=node.end_lineno or node.lineno,
            params=params, returns_value=True, body_hash="", body_lines=(node.end_lineno or node.lineno) - node.lineno + 1,
            decorators=(), entry_gates=(), param_defaults=(), debug_named=False,
        ))
        self.function = _Scope("def", name, qualname, params)
        self._set_gates_aside()
        saved_loops, self.loop_depth = self.loop_depth, 0
        saved_iters, self.loop_iters = self.loop_iters, []
        generators: list[ast.comprehension] = []
        lambdas: list[ast.Lambda] = []
        reads: list[ast.Attribute] = []
        calls = _calls_in(node.body, generators, lambdas, reads)
        self._note_reads(reads)
        for generator in generators:
            if generator.target.__class__ is ast.Name:
                self.comprehensions.append((qualname, generator.target.id, generator.iter))
        self._with_lambdas(calls, lambdas)
        self.loop_iters, self.loop_depth = saved_iters, saved_loops
        self._restore_gates()
        self.function = outer

    def _decorator_edges(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        """Decorating is calling: `@dec` calls dec, `@make(x)` calls make and then what it
        gave, each in the scope that holds the definition."""
        calls: list[ast.Call] = []
        for expr in node.decorator_list:
            calls.extend(_calls_in(expr))
            calls.append(ast.Call(func=expr, args=[], keywords=[], lineno=expr.lineno, col_offset=expr.col_offset,
                                  end_lineno=expr.end_lineno, end_col_offset=expr.end_col_offset))
        self._call_edges(sorted(calls, key=_POSITION))

    def _call_edges(self, calls: list[ast.Call], lambda_names: dict[int, str] | None = None) -> None:
        """One plain call site per call that may land in the tree, and one per function the
        call is handed that it may run itself (``_handed``)."""
        scope = self.function
        function = scope.qualname if scope else None
        lines, shared = self.lines, self.shared
        gates = None  # worked out for the first edge: that may settle pending gate groups
        for call in calls:
            callee, lands = self._callee(call)
            if callee is None:
                continue
            handed = self._handed(call, callee, lambda_names) if call.args or call.keywords else ()
            if not lands and not handed:
                continue
            if gates is None:
                gates = self._gates_now()
            line = lines[call.lineno - 1]
            end_line = call.end_lineno or call.lineno
            if end_line == call.lineno and line.isascii():  # ``_source`` and ``_column`` of the common case
                source = line[call.col_offset:call.end_col_offset]
                col, end_col = call.col_offset, call.end_col_offset or 0
            else:
                source = self._source(call)
                col, end_col = self._column(call.lineno, call.col_offset), self._column(end_line, call.end_col_offset or 0)
            # the fields after the callee, the same for the call and each function handed to it
            rest = self._plain_fields(function, call, end_line, gates, source, col, end_col)
            # one object per distinct callee text in the file: a pickle writes it once
            callee = shared.setdefault(callee, callee)
            if lands:
                if call.args or call.keywords:
                    self.arguments.append((function, callee, call))
                    self._note_host_arguments(callee, call)
                    self._note_passed_values(callee, call)
                self.calls.append(PlainCall((callee, *rest)))
            for target in handed:
                handed_callee = f"{callee}{HANDED}{target}"
                self.calls.append(PlainCall((shared.setdefault(handed_callee, handed_callee), *rest)))

    def _reads_only(self, node: ast.AST) -> None:
        """The attribute reads of a statement that makes no call."""
        reads: list[ast.Attribute] = []
        _calls_in(node, reads=reads)
        self._note_reads(reads)

    def _note_reads(self, reads: list[ast.Attribute]) -> None:
        """A read site (``Resolution`` "read") per attribute chain read on a name that is not a
        module's (`req.num_tokens`, `self.batch.size`), once per function, chain, gates, loop and
        returning statement: when the attribute is a property, reading it runs the getter.
        ``extract_parsed`` drops those whose last name the file stores or defines as a plain
        method (``_property_reads``)."""
        if not reads:
            return
        scope = self.function
        function = scope.qualname if scope else None
        aliases, shadowed, shared, seen = self.aliases, self.shadowed, self.shared, self.read_keys
        gates = None
        for node in reads:
            if node.ctx.__class__ is not _LOAD:
                self.stored_attributes.add(node.attr)  # `x.a.b = v` stores `b`, reads `x.a`
                node = node.value  # type: ignore[assignment]
                if node.__class__ is not ast.Attribute:
                    continue
            attr = node.attr
            if attr[:2] == "__" or attr.isupper():
                continue
            chain = raw_dotted(node)
            if chain is None:
                continue  # `f().x`, `a[0].x`: a receiver the types do not name
            head = chain.partition(".")[0]
            if head in aliases or (head in _BUILTINS and head not in shadowed):
                continue  # a module's attribute, or a builtin's
            if gates is None:
                gates = self._gates_now()
            loop_iter = self.loop_iters[-1] if self.loop_iters else ""
            # what decides how often it runs, and whether its value may be returned
            key = (function, chain, gates, self.loop_depth, loop_iter, self._read_context)
            if key in seen:
                continue
            seen.add(key)
            chain = shared.setdefault(chain, chain)  # callee and code: one object in the pickle
            end_line = node.end_lineno or node.lineno
            line = self.lines[node.lineno - 1]
            if end_line == node.lineno and line.isascii():
                col, end_col = node.col_offset, node.end_col_offset or 0
            else:
                col, end_col = self._column(node.lineno, node.col_offset), self._column(end_line, node.end_col_offset or 0)
            self.reads.append(PlainCall((
                chain, function, node.lineno, end_line, gates, self.loop_depth, (), None, "read", False, None, None,
                False, False, None, chain, False, loop_iter, col, end_col, (),
            )))

    def _callee(self, call: ast.Call) -> tuple[str | None, bool]:
        """A call's callee text (its first name through the imports) and whether it may land
        in the tree (not a builtin)."""
        aliases, shadowed = self.aliases, self.shadowed
        raw = raw_dotted(call.func)
        if raw is None:
            raw = special_callee(call.func)
            if raw is None:
                return None, False
            head = CALLEE_HEAD.match(raw).group()  # type: ignore[union-attr]
            # `range(n).__iter__`, `str(x).join`: nothing of the tree
            lands = head == "super" or may_reach_tree(head, aliases, shadowed)
        else:
            head = CALLEE_HEAD.match(raw).group()  # type: ignore[union-attr]
            lands = may_reach_tree(raw, aliases, shadowed)
        return aliases.get(head, head) + raw[len(head):], lands

    def _snippet_arguments(self, node: ast.AST) -> None:
        """The arguments of the calls in a statement the libcst walker reads (it makes their
        call sites): they flow into parameters as those of the other statements do."""
        scope = self.function
        function = scope.qualname if scope else None
        reads: list[ast.Attribute] = []
        calls = _calls_in(node, reads=reads)
        self._note_reads(reads)
        for call in calls:
            if call.args or call.keywords:
                callee, lands = self._callee(call)
                if callee is not None and lands:
                    self.arguments.append((function, callee, call))
                    self._note_host_arguments(callee, call)
                    self._note_passed_values(callee, call)

    def _handed(self, call: ast.Call, callee: str, lambda_names: dict[int, str] | None) -> list[str]:
        """The functions handed to a call that it may run itself, as callee texts: its
        lambdas, and its named functions when the call's last name is a callback API
        (``rules/call_graph.yaml``).  The joins take them only when the call lands outside the tree."""
        out: list[str] = []
        named = callee.rpartition(".")[2] in self.rs.callback_calls
        for arg in (*call.args, *[k.value for k in call.keywords]):
            kind = arg.__class__
            if kind is ast.Lambda:
                qualname = lambda_names.get(id(arg)) if lambda_names else None
                if qualname:
                    out.append(qualname.rpartition(".")[2])
            elif named and (kind is ast.Name or kind is ast.Attribute):
                text = raw_dotted(arg)
                if text:
                    head = CALLEE_HEAD.match(text).group()  # type: ignore[union-attr]
                    out.append(self.aliases.get(head, head) + text[len(head):])
        return out

    def _plain_fields(self, function: str | None, call: ast.Call, end_line: int, gates: tuple[GateRef, ...], source: str,
                      col: int, end_col: int) -> tuple[object, ...]:
        """A plain call edge's fields after its callee, in PLAIN_FIELDS order; its literal
        arguments are the string literals among the first four positional arguments."""
        args = call.args
        shared = self.shared
        code = " ".join(source.split())[:CODE_CHARS]
        literals: tuple[str | None, ...] = ()
        ints: tuple[int | None, ...] = ()
        if args:
            strs: list[str | None] = []
            numbers: list[int | None] = []
            for a in args[:4]:
                value = a.value if a.__class__ is ast.Constant else None
                strs.append(value if value.__class__ is str else None)
                numbers.append(value if value.__class__ is int else None)
            literals = tuple(strs)
            if any(v is not None for v in numbers):  # ``CallSite.int_args``: () when there is none
                ints = tuple(numbers)
        return (
            function, call.lineno, end_line, gates, self.loop_depth, literals,
            None, "exact", False, None, None, False, False, None, shared.setdefault(code, code), False,
            self.loop_iters[-1] if self.loop_iters else "", col, end_col, ints,
        )

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
            self._ifexp_refs(expr, active, out)
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
        out: list[tuple[str | None, str, tuple[GateRef, ...]]] = []
        saved = self.function
        for scope, name, value, groups in self.assignments:
            if _falsy(value):  # a falsy value adds no way to be true
                continue
            tested = name in self.gate_names
            if not tested and (scope is not None or value.__class__ not in _SWITCH_VALUES):
                continue
            self.function = scope
            refs = tuple(self.gate_refs(value, True))
            if not tested and not any(r.kind in ("env", "call") or r == DEFAULT_ON for r in refs):
                continue
            # `global _AGENT; _AGENT = make()` sets the module's name (resolved in the function)
            stored = f"global:{name}" if scope is not None and name in scope.global_names else name
            out.append((scope.qualname if scope else None, stored, refs + self._condition_refs(groups)))
        self.function = saved
        return tuple(out)

    def wrapped(self) -> tuple[tuple[str | None, str, str], ...]:
        """``FileFacts.wrapped``: each assignment to a name a test calls a predicate of."""
        if not self.predicate_receivers:
            return ()
        out = []
        for scope, name, value, _ in self.assignments:
            if name in self.predicate_receivers:
                out.append((scope.qualname if scope else None, name, _wrapped_read(value)))
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
            if not _builds_path(value):
                continue
            used = sorted(n for n in _head_names(value, 0) if n != name)
            if used:
                out.append((scope.qualname if scope else None, name, tuple(used)))
        return tuple(out)

    def _ifexp_refs(self, expr: ast.IfExp, active: bool, out: list[GateRef]) -> None:
        """`X if C else None` is truthy only when C and X are (`Tracer() if env_flag("T") else None`)."""
        if not active:
            return
        if _falsy(expr.orelse):
            self._refs(expr.test, True, out)
            self._refs(expr.body, True, out)
        elif _falsy(expr.body):
            self._refs(expr.test, False, out)
            self._refs(expr.orelse, True, out)

    def _env_default(self, expr: ast.AST) -> tuple[bool, str | None]:
        """(is an env read, its literal default) for `os.getenv("X", "1")`-like calls."""
        if isinstance(expr, ast.Call) and dotted(expr.func, self.aliases) in self.rs.env_calls:
            default = expr.args[1] if len(expr.args) > 1 else next((k.value for k in expr.keywords if k.arg == "default"), None)
            return True, _literal(default)
        return False, None

    def _env_operand(self, node: ast.expr) -> tuple[str, str | None, str] | None:
        """(what to gate on, its default, the conversion around it) when ``node`` is an env
        read with a literal default or a local assigned from one (`int(os.getenv("L", "1"))`).
        What to gate on is the env key, or ``name:<local>`` for a local."""
        conversion = ""
        if isinstance(node, ast.NamedExpr):  # `(n := int(getenv(...))) >= 0`
            node = node.value
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CONVERSIONS and node.args:
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
        if len(expr.ops) == 1 and self._default_decides(expr.left, op, right, active, out):
            return
        if len(expr.ops) == 1 and not isinstance(op, (ast.In, ast.NotIn)) and self._default_decides(
                right, _MIRRORED.get(op.__class__, op.__class__)(), expr.left, active, out):
            return
        literal = _literal(right)
        off = self.off_literals
        low = isinstance(op, (ast.Lt, ast.LtE))
        if isinstance(op, (ast.Eq, ast.Is)) and literal in off:
            low = True
        if isinstance(op, (ast.NotEq, ast.IsNot)) and literal is not None and literal not in off:
            low = True
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            values = {_literal(e) for e in right.elts}
            low = bool(values) and values <= off
            if isinstance(op, ast.NotIn):
                low = not low
        start = len(out)
        self._refs(expr.left, active != low, out)
        single = len(expr.ops) == 1
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
        none_test = single and isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) and _is_none(right)
        if none_test and isinstance(expr.left, (ast.Name, ast.Attribute)):
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
        out[start:] = [_compared(r, marker) if r.kind == "name" else r for r in out[start:]]

    def _params(self) -> tuple[str, ...]:
        return self.function.params if self.function is not None else ()

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
        if callee in _CONVERSIONS:
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
        out.append(GateRef("call", callee, tuple(_arg_text(a) for a in expr.args[:3]), active))

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
            if args and _rebound_after(scope, raw, expr.lineno):  # type: ignore[arg-type]
                args = (*args, PARAM_FRESH)
        out.append(GateRef("name", self.aliases.get(raw, raw), args, active))


def _rebound_after(scope: _Scope, name: str, line: int) -> bool:
    """Whether the function assigns its parameter ``name`` only after ``line`` and in no loop
    around it (`if hits is None: return` ... `hits = {...}`): a test there sees the argument."""
    if scope.rebinds is None:
        stores: dict[str, list[int]] = {}
        loops: list[tuple[int, int]] = []
        for node in scope_nodes(scope.node.body) if scope.node is not None else ():
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                loops.append((node.lineno, node.end_lineno or node.lineno))
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)) else ()
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Name) and part.id in scope.params:
                        stores.setdefault(part.id, []).append(part.lineno)
        scope.rebinds = (stores, loops)
    stores, loops = scope.rebinds
    lines = stores.get(name, [])
    return bool(lines) and all(at > line for at in lines) and not any(
        start <= line <= end and any(start <= at <= end for at in lines) for start, end in loops)


#: statement class -> its ``_Indexer.visit_X`` (``_block`` calls it directly, without
#: ``NodeVisitor.visit``'s name lookup); statements not listed are simple: ``_simple``
_STATEMENT_VISITORS = {
    cls: vars(_Indexer)[f"visit_{cls.__name__}"] for cls in ast.stmt.__subclasses__() if f"visit_{cls.__name__}" in vars(_Indexer)
}


#: most leading exits a function's fallback value is read past (``_Indexer._fallback``)
_MAX_FALLBACK_EXITS = 8
#: the returned values that make a function a predicate (``FunctionDef.returned_test``)
_TEST_VALUES = frozenset({ast.BoolOp, ast.Compare, ast.UnaryOp, ast.Attribute, ast.Name})

#: the values of a module name that may stand for a switch (a call, a test of one)
_SWITCH_VALUES = frozenset({ast.Call, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.IfExp})


def _char_offset(line: str, byte_offset: int) -> int:
    """`ast` columns count UTF-8 bytes; str slicing counts characters."""
    if line.isascii():
        return byte_offset
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


#: names of the builtins module: `len(x)`, `ValueError(...)` never land in the tree
_BUILTINS = frozenset(dir(builtins))


def _implicit_calls(node: ast.AST) -> list[ast.Call]:
    """The calls a statement makes without call syntax, as calls: `raise Error` constructs
    the exception class."""
    if node.__class__ is ast.Raise:
        exc = node.exc
        if exc is not None and exc.__class__ in (ast.Name, ast.Attribute):
            return [ast.Call(func=exc, args=[], keywords=[], lineno=exc.lineno, col_offset=exc.col_offset,
                             end_lineno=exc.end_lineno, end_col_offset=exc.end_col_offset)]
    return []


def _protocol_calls(expr: ast.expr, methods: tuple[str, str]) -> list[ast.Call]:
    """The calls a `for` (`__iter__`, then `__next__` of what it gave) or a `with`
    (`__enter__`, `__exit__`) makes on ``expr`` without call syntax, as calls."""
    if expr.__class__ not in (ast.Name, ast.Attribute, ast.Call, ast.Subscript):
        return []
    where: dict[str, Any] = {"lineno": expr.lineno, "col_offset": expr.col_offset, "end_lineno": expr.end_lineno,
             "end_col_offset": expr.end_col_offset}
    first = ast.Call(func=ast.Attribute(value=expr, attr=methods[0], **where), args=[], keywords=[], **where)
    receiver = first if methods[0] == "__iter__" else expr
    second = ast.Call(func=ast.Attribute(value=receiver, attr=methods[1], **where), args=[], keywords=[], **where)
    return [first, second]


def may_reach_tree(raw_callee: str | None, aliases: dict[str, str], shadowed: frozenset[str] = frozenset()) -> bool:
    """Whether a call may land in the scanned tree (a call-graph edge), from its unresolved
    dotted text: `f()`, `self.f()`, `module.f()` through an import, `batch.filter()` on a
    local; not a builtin (`len()`, `str.join()`) unless the module binds that name itself
    (``shadowed``)."""
    if raw_callee is None:
        return False
    root = raw_callee.partition(".")[0]
    # a dotted call on a local, parameter or module name may land in the tree too: the joins
    # type the name (`batch.filter()`, `req.advance()`)
    return root not in _BUILTINS or root in aliases or root in shadowed


def special_callee(func: ast.AST) -> str | None:
    """The callee text of a call whose callee is more than a name chain, which ``raw_dotted``
    leaves out: `super().m`, a method of what a call returns (`get_runtime().tick`), the result
    of a call (`make()()`), a subscript (`self._handlers[k]()` as `self._handlers[]`), in any
    combination (`ls[0][0]()` as `ls[][]`)."""
    parts: list[str] = []
    node = func
    while True:
        if node.__class__ is ast.Attribute:
            parts.append("." + node.attr)
            node = node.value
        elif node.__class__ is ast.Call:
            parts.append("()")
            node = node.func
        elif node.__class__ is ast.Subscript:
            parts.append("[]")
            node = node.value
        elif node.__class__ is ast.Name:
            parts.append(node.id)
            break
        else:
            return None
        if len(parts) > _MAX_CHAIN:
            return None
    return "".join(reversed(parts))


#: most parts of a callee chain kept (`a.b()[].c()`): longer chains are not resolved
_MAX_CHAIN = 12
#: the first name of a callee text (`get_runtime` in `get_runtime().tick`)
CALLEE_HEAD = re.compile(r"[^.(\[]*")


def _builtins_bound_by(module: ast.Module) -> frozenset[str]:
    """Builtin names the module binds at top level (`def max(...)`, `input = ...`)."""
    bound: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                if target.__class__ is ast.Name:
                    bound.add(target.id)
                else:
                    bound.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return frozenset(bound & _BUILTINS)


def line_prefix(lines: list[str], text: str, starts: list[int], pattern: re.Pattern[str],
                literals: tuple[tuple[str, bool], ...]) -> list[int]:
    """prefix[i]: how many of the first i ``lines`` (of ``text``, starting at ``starts``) hold a
    match of ``pattern``.  Every match holds one of ``literals`` (found with ``str.find``, much
    faster than the pattern's scan); a line holding a literal marked False is confirmed with
    the pattern."""
    n = len(lines)
    flags = bytearray(n)
    checked = bytearray(n)
    search = pattern.search
    for literal, exact in literals:
        find = text.find
        pos = find(literal)
        while pos != -1:
            line = bisect_right(starts, pos) - 1
            if not flags[line]:
                if exact:
                    flags[line] = 1
                elif not checked[line]:
                    checked[line] = 1
                    if search(lines[line]) is not None:
                        flags[line] = 1
            if line + 1 >= n:
                break
            pos = find(literal, starts[line + 1])
    return list(accumulate(flags, initial=0))


def index_module(tree: ast.Module, text: str, path: str, rs: RuleSet) -> ModuleIndex:
    indexer = _Indexer(path, text, rs)
    indexer.visit(tree)
    incremented = frozenset(indexer.incremented)
    blocks: dict[str, list[tuple[int, int, str, str, int]]] = {}
    for qualname, first, last, context in indexer.path_blocks:
        if holds(context, incremented):
            blocks.setdefault(qualname, []).append((first, last, context[0], context[1], context[3]))
    if blocks:
        indexer.functions = [
            replace(f, path_blocks=tuple(b for b in blocks[f.qualname] if f.line <= b[0] <= f.end_line))
            if f.qualname in blocks else f for f in indexer.functions]
    snippets = [_on_resolved_path(s, incremented) if s.path_contexts else s for s in indexer.snippets]
    derived = indexer.derived()
    messages = tuple(replace(m, path_kind=kind, path_reason=reason) if contexts else m
                     for m, contexts in indexer.built_messages
                     for kind, reason in (resolve(contexts, incremented) if contexts else ("normal", ""),))
    path_values = indexer.path_values()
    return ModuleIndex(
        built_messages=messages,
        host_arguments=tuple(indexer.host_arguments),
        passed_values=tuple(indexer.passed_values),
        effects=tuple(indexer.effects),
        aliases=indexer.aliases,
        logger_names=frozenset(indexer.logger_names),
        string_constants=indexer.string_constants,
        functions=tuple(indexer.functions),
        calls=tuple(indexer.calls),
        reads=tuple(indexer.reads),
        stored_attributes=frozenset(indexer.stored_attributes),
        snippets=tuple(snippets),
        returned_names=indexer.returned_names,
        env_exporters=frozenset(indexer.env_exporters),
        returning_tests=frozenset(indexer.returning_tests),
        statements=indexer.statements,
        shadowed=indexer.shadowed,
        function_nodes=indexer.function_nodes,
        stores=indexer.stores,
        comprehensions=tuple(indexer.comprehensions),
        arguments=tuple(indexer.arguments),
        lambdas=tuple(indexer.lambdas),
        whiles=tuple(indexer.whiles),
        wrapped=indexer.wrapped(),
        derived=derived,
        path_values=path_values,
    )


def _on_resolved_path(s: Snippet, incremented: frozenset[str]) -> Snippet:
    kind, reason = resolve(s.path_contexts, incremented)
    return replace(s, path_kind=kind, path_reason=reason)
