"""The stdlib-``ast`` pass over one Python file: structure and context.

Every Python file is indexed here (``ast`` parses much faster than libcst): import
aliases, logger names, string constants, function definitions with a normalised
body hash, call edges, and the context every statement runs in — enclosing
function, the gates around it (``if``/``while`` tests, the rest of a block after
``if C: return``, ``else`` as the negated test), loop depth.  Statements that hold
an env read, emitter, sync or output token become ``Snippet``s: their source is
handed, all at once, to the libcst walker in ``facts.py`` with this context.

The walk is one visitor, ``_Indexer``, built in layers as PyCG's processors are: its state
(``state``: text, aliases, scopes, loops), the gates (``gates``), the call edges (``calls``),
and here the statements themselves; names and scopes (``scopes``), what a value is
(``values``), the token lines (``tokens``) and the body hashes (``bodies``) are plain functions.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace

from cs_audit.extract.bodies import body_hash
from cs_audit.extract.calls import CallEdges, builtins_bound_by, calls_in, protocol_calls
from cs_audit.extract.gates import CONVERSIONS, TEST_VALUES, literal_text
from cs_audit.extract.messages import argument_uses, format_kinds
from cs_audit.extract.method_stores import MethodStores
from cs_audit.extract.paths import (
    PERIODIC_BY,
    PathContext,
    assert_context,
    branch_context,
    except_context,
    function_context,
    holds,
    resolve,
)
from cs_audit.extract.scopes import Scope, StoredNames, dotted, name_ids, raw_dotted, resolve_relative
from cs_audit.extract.tokens import SNIPPET_TOKENS, snippet_literals
from cs_audit.extract.values import host_value, is_built_path, names_file, returned_attr, starts_as_path, stored_value
from cs_audit.model import CODE_CHARS, BuiltMessage, FunctionDef, GateRef, HostArguments, MessageUse, PassedValues, PlainCall
from cs_audit.pyast import dotted_name
from cs_audit.pyast import nodes as _nodes
from cs_audit.ruleset import RuleSet, steady_names

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
    #: those of ``whiles`` in no loop and no branch of their function (`with` and `try` aside)
    top_whiles: tuple[tuple[ast.While, str], ...] = ()
    wrapped: tuple[tuple[str | None, str, str], ...] = ()
    #: (line, function, gates, what) of gated statements that change state (``_effect``)
    effects: tuple[tuple[int, str | None, tuple[GateRef, ...], str], ...] = ()
    record_fields: tuple[tuple[str, bool, str, str], ...] = ()
    required_fields: tuple[str, ...] = ()
    field_stores: tuple[tuple[int, str, str, tuple[GateRef, ...], bool, str], ...] = ()
    keywords_passed: tuple[str, ...] = ()
    keywords_named: tuple[tuple[int, str, str], ...] = ()
    table_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    table_gets: tuple[tuple[str, str, str, str], ...] = ()
    #: (function, name, gates of the value) of the assignments to names a gate tests
    derived: tuple[tuple[str | None, str, tuple[GateRef, ...]], ...] = ()
    #: (line, `option=literal`, gates) of the literals stored into tables handed to an override
    table_resolutions: tuple[tuple[int, str, tuple[GateRef, ...]], ...] = ()
    #: `Class.attr` of the attributes its methods keep as their own state (``own_state``)
    own_state: tuple[str, ...] = ()
    own_optional: tuple[tuple[str, str, str], ...] = ()
    falsy_names: tuple[tuple[str | None, str], ...] = ()
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


def _returns_true(stmt: ast.stmt) -> bool:
    """`return True`: a check's success."""
    return stmt.__class__ is ast.Return and stmt.value.__class__ is ast.Constant and stmt.value.value is True


def _target_names(target: ast.expr) -> list[str]:
    """The ids of the ``ast.Name`` nodes in an assignment target (`self.x` holds `self`):
    a name or an attribute chain, the common targets, without a walk."""
    node = target
    while node.__class__ is ast.Attribute:
        node = node.value
    if node.__class__ is ast.Name:
        return [node.id]
    return [n.id for n in _nodes(target) if n.__class__ is ast.Name]


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


class _Indexer(CallEdges, ast.NodeVisitor):
    """The statements of a module: imports, definitions, blocks and simple statements."""

    def __init__(self, path: str, text: str, rs: RuleSet) -> None:
        super().__init__(path, text, rs)
        #: names whose test holds in the steady state (``ruleset.steady_names``)
        self.steady_names = steady_names(rs)
        self.logger_names: set[str] = set()
        #: module names assigned a value that starts as a path (``starts_as_path``)
        self.module_path_names: set[str] = set()
        self.snippets: list[Snippet] = []
        #: how many `if` bodies of the current function hold the current statement
        self.branch_depth = 0
        #: (scope, name, holds host data) of the assignment being walked (``Scope.host``)
        self._host_after: tuple[Scope, str, bool] | None = None
        self.returned_names: dict[str | None, frozenset[str]] = {}
        self.env_exporters: set[str | None] = set()
        self.returning_tests: set[int] = set()
        self.token_prefix = self._line_prefix(SNIPPET_TOKENS, snippet_literals(rs.api_literals))
        self.alias_names: set[str] = set()
        self.function_nodes: dict[tuple[str, int], ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.stores = StoredNames(self.lines, text, self.line_starts)
        #: function name -> whether it matches the rules' debug-name pattern
        self.debug_names: dict[str, bool] = {}
        #: names the enclosing `for` loops bind (``Snippet.loop_bound``)
        self.loop_bound: frozenset[str] = frozenset()
        #: last name of each logger factory (`getLogger`, `init_logger`): a cheap first check
        self.factory_names = {f.rsplit(".", 1)[-1] for f in rs.logger_factories}
        self.alias_tokens: re.Pattern[str] | None = None
        self.alias_prefix: list[int] | None = None
        #: first line of each simple statement -> (assignment target, is a return)
        self.statements: dict[int, tuple[str | None, bool]] = {}
        #: (each `while` directly in a function's statements, the function's qualname)
        self.whiles: list[tuple[ast.While, str]] = []
        self.top_whiles: list[tuple[ast.While, str]] = []
        #: the path contexts (``extract.paths``) around the current statement, outermost first
        self.path_contexts: tuple[PathContext, ...] = ()
        #: (function, first line, last line, context) of each block on an error or rare path
        self.path_blocks: list[tuple[str, int, int, PathContext]] = []
        #: names the module increments (`self.n += 1`): counters
        self.incremented: set[str] = set()
        #: (line, function, gates, what) of the gated statements that change state or control flow
        self.effects: list[tuple[int, str | None, tuple[GateRef, ...], str]] = []
        #: field name -> whether every class-body declaration of it here defaults to None
        self.record_fields: dict[str, bool] = {}
        self.record_decls: list[tuple[str, bool, str, str]] = []
        #: (class, attribute, class held) of `self.x: Optional[C] = None` in a method
        self.own_optional: list[tuple[str, str, str]] = []
        self.required_fields: list[str] = []
        self.table_keys: dict[str, tuple[str, ...]] = {}
        self.table_gets: list[tuple[str, str, str, str]] = []
        self.field_stores: list[tuple[int, str, str, tuple[GateRef, ...], bool, str]] = []
        #: messages formatted into locals only calls read, each with its path contexts
        self.built_messages: list[tuple[BuiltMessage, tuple[PathContext, ...]]] = []
        #: what the module's methods set on `self` (``index_module`` gives it the tree)
        self.method_stores: MethodStores | None = None

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
        self.scopes.append(Scope("class", node.name, self._qualname(node.name), once=True))
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
        scope = Scope("def", node.name, qualname, params, once, node=node, stores=self.stores)
        scope.store_counts, yields, scope.assigned_only = _bindings(node)
        # a context manager binds what it yields, when each yield is a statement of its own
        scope.managed = yields == "plain" and any(d.rpartition(".")[2] in _CONTEXT_MANAGERS for d in decorators)
        scope.generator = bool(yields) and not scope.managed
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
            final is not None and final.__class__ is ast.Return and final.value is not None and final.value.__class__ in TEST_VALUES
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
                returns=tuple(scope.return_facts) if (0 if scope.managed else 1) < len(scope.return_facts) <= _MAX_RETURNS
                and not returned_test else (),
                returned_field=scope.returned_attrs[0] if len(set(scope.returned_attrs)) == 1
                and len(scope.returned_attrs) <= _MAX_RETURNS else "",
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
                self._note_table_get(scope, stmt)
                self._note_waited(scope, stmt)
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
                                         after_true=_returns_true(stmt.body[-1]),
                                         steady_names=self.steady_names,
                                         precondition=stmt.body[-1].__class__ is ast.Raise,
                                         elapsed=self._elapsed, called_stores=self._called_stores) if rest and scope is not None else None
                if context is not None:
                    self._note_block(context, rest)
                    self.path_contexts = (*self.path_contexts, context)
            elif stmt.__class__ is ast.Assert and scope is not None and i + 1 < len(body):
                context = assert_context(stmt.test, self.rs.rare_test_re, stmt.lineno)
                if context is not None:
                    self._note_block(context, body[i + 1:])
                    self.path_contexts = (*self.path_contexts, context)
            if self.declared_none and scope is not None and i + 1 < len(body):
                pushed += self.deref_gates(stmt)
        self.path_contexts = saved_paths
        self._pop_gates(pushed)

    def _note_table_get(self, scope: Scope, stmt: ast.Assign) -> None:
        """`spec = TABLE.get(backend)`, a module table looked up by a parameter: what the local
        holds is None unless the parameter is one of the table's keys (``FileFacts.table_gets``)."""
        value = stmt.value
        if (len(stmt.targets) == 1 and stmt.targets[0].__class__ is ast.Name and value.__class__ is ast.Call
                and value.func.__class__ is ast.Attribute and value.func.attr == "get"
                and value.func.value.__class__ is ast.Name and len(value.args) == 1
                and not value.keywords and value.args[0].__class__ is ast.Name
                and value.args[0].id in scope.params and value.args[0].id not in scope.store_counts
                and scope.store_counts.get(stmt.targets[0].id) == 1):
            self.table_gets.append((scope.qualname, stmt.targets[0].id, value.func.value.id, value.args[0].id))

    def _note_waited(self, scope: Scope, stmt: ast.Assign) -> None:
        """`start = time.monotonic()`: the local holds when a wait started; `elapsed =
        time.monotonic() - start`: the time it has taken."""
        if len(stmt.targets) != 1 or stmt.targets[0].__class__ is not ast.Name:
            return
        name = stmt.targets[0].id
        scope.waited.discard(name)
        scope.wait_starts.discard(name)
        if self._clock_read(stmt.value):
            scope.wait_starts.add(name)
        elif self._elapsed(stmt.value):
            scope.waited.add(name)

    def _clock_read(self, node: ast.expr) -> bool:
        clock = self.rs.wait_clock_re
        return (clock is not None and node.__class__ is ast.Call and not node.args
                and clock.match(dotted_name(node.func) or "") is not None)

    def _called_stores(self, body: list[ast.stmt]) -> frozenset[str]:
        """The `self.` attributes the methods ``body`` calls on `self` or `super()` set."""
        scope = self.function
        if scope is None or self.method_stores is None:
            return frozenset()
        return self.method_stores.stores_of_calls(scope.qualname, body)

    def _elapsed(self, node: ast.expr) -> bool:
        """Whether ``node`` is the time a wait of this call has taken: a clock reading
        (``RuleSet.wait_clock_re``) less a local the function set from one, or a local holding
        that (a time since an attribute was set, an uptime, is no wait)."""
        scope = self.function
        if scope is None:
            return False
        if node.__class__ is ast.Name:
            return node.id in scope.waited
        return (node.__class__ is ast.BinOp and node.op.__class__ is ast.Sub and self._clock_read(node.left)
                and node.right.__class__ is ast.Name and node.right.id in scope.wait_starts)

    @staticmethod
    def _note_lookup(scope: Scope, stmt: ast.Assign) -> None:
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
        self.shadowed = builtins_bound_by(node)
        self._block(node.body)

    def _gated(self, test: ast.expr, active: bool, body: list[ast.stmt], loop: bool = False) -> None:
        """``body`` under the gates of ``test`` (``active``: the body runs when it is true;
        ``loop``: it is a `while` loop's)."""
        self._push_gates(test, active)
        scope = self.function
        context = branch_context(test, active, body, scope.persistent if scope is not None else _ANY_NAME, test.lineno,
                                 scope.lookups if scope is not None else None, self.rs.rare_test_re, loop,
                                 steady_names=self.steady_names, elapsed=self._elapsed, called_stores=self._called_stores)
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
            if self.loop_depth == 0 and self.branch_depth == 0:
                self.top_whiles.append((node, self.scopes[-1].qualname))
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
            self._call_edges(protocol_calls(node.iter, ("__iter__", "__next__")))
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
            if self.function is not None and item.optional_vars.__class__ is ast.Name:
                self.function.with_names.add(item.optional_vars.id)
            self._header(item.context_expr, assign_target=target)
            if node.__class__ is ast.With:
                self._call_edges(protocol_calls(item.context_expr, ("__enter__", "__exit__")))
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
        if node.__class__ is ast.AugAssign and node.target.__class__ is ast.Attribute:
            self.keywords_passed.add(node.target.attr)  # `s.details |= d`: set somehow
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
        # one past the most kept on purpose: a function with more keeps none (``FunctionDef.returns``)
        if self.function is not None and len(self.function.return_facts) <= _MAX_RETURNS:
            if cls is ast.Return and not self.function.managed and not self.function.generator:
                self.function.return_facts.append(self._return_fact(node.value))  # type: ignore[attr-defined]
                self.function.returned_attrs.append(returned_attr(node.value))  # type: ignore[attr-defined]
            elif cls is ast.Expr and node.value.__class__ is ast.Yield and self.function.managed:  # type: ignore[attr-defined]
                self.function.return_facts.append(self._return_fact(node.value.value))  # type: ignore[attr-defined]
        if isinstance(node, ast.Return) and node.value is not None and literal_text(node.value) != "None":
            scope = self.function
            if scope is not None:
                scope.returns_value = True
                returned = node.value
                if returned.__class__ is ast.Name:
                    scope.returned.add(returned.id)
                else:
                    scope.returned.update(name_ids(returned))
        if node.__class__ is ast.Expr and node.value.__class__ is ast.Constant:
            # a docstring or a bare literal: no call, no read, whatever words it holds
            # (docstrings had been a sizeable part of the statement text given to libcst)
            self.statements[node.lineno] = (None, False)
            return
        # env reads and writes always hold a token (`environ`, `getenv`, `envs.`, an alias)
        has_tokens = self._has_tokens(node)
        if self.function is not None:
            self._note_table(node)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets: list[ast.expr] = node.targets if isinstance(node, ast.Assign) else [node.target]
            self._note_assign(targets, node.value)
            self._note_field(node, targets)
            if self.function is not None and len(targets) == 1 and targets[0].__class__ is ast.Name and node.value is not None:
                self._note_message(node, targets[0].id, node.value)
            if len(targets) == 1:
                target = raw_dotted(targets[0])
                scope = self.function
                if scope is not None and target is not None and (target in scope.host or node.value is not None
                                                                 and host_value(node.value, scope.host, self.aliases, self.rs.host_name_re)):
                    # after the statement's own snippet: `x = x.cpu()` syncs, then x is on the host
                    self._host_after = (scope, target, node.value is not None and host_value(node.value, scope.host, self.aliases, self.rs.host_name_re))
                # a module name, a local or a `self.` attribute (not a class body's names)
                if target is not None and node.value is not None and (self.function is not None or not self.scopes) and (
                        "." not in target or self.function is not None and target.startswith("self.") and target.count(".") == 1):
                    # a nested function setting a `nonlocal` name or the enclosing `self.`: the enclosing function's
                    owner = self.closure(self.function).get(target.split(".", 1)[0], self.function) if self.function else None
                    self.assignments.append((owner, target, node.value, tuple(self.gate_groups)))
                    if owner is self.function and owner is not None and "." not in target and owner.store_counts.get(target) == 1:
                        owner.assigned.setdefault(target, []).append(node.value)  # (bound once: this value)
                value = node.value
                conversion = ""
                while isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in CONVERSIONS and value.args:
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
        if target is not None and assigned is not None and starts_as_path(assigned, self._is_path_name):
            # walked for the output path it hands on (`_DUMP = "/tmp/x"` ... `open(_DUMP, "a")`)
            has_tokens = True
            (self.function.path_names if self.function is not None else self.module_path_names).add(target)
        if not has_tokens and assigned is not None and (
                assigned.__class__ is ast.Constant or is_built_path(assigned)) and names_file(assigned, self.string_constants):
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

    def _note_field(self, node: ast.Assign | ast.AnnAssign, targets: list[ast.expr]) -> None:
        """A record's field declared in a class body (`details: X | None = None`), or stored
        on an object (`stats.details = d`, and `self.details = ...` of a field declared None
        here): ``FileFacts.record_fields`` and ``field_stores``."""
        value = node.value
        # (None, False, 0, "": a field the code tests for truth is off until something sets it)
        none = value is not None and value.__class__ is ast.Constant and not value.value
        if self.function is None:
            if node.__class__ is ast.AnnAssign and self.scopes and self.scopes[-1].kind == "class" and targets[0].__class__ is ast.Name:
                self.record_fields[targets[0].id] = self.record_fields.get(targets[0].id, True) and none
                held = _optional_class(node.annotation) if none and value.value is None else ""  # type: ignore[union-attr]
                self.record_decls.append((targets[0].id, none, self.scopes[-1].name, held))
                if value is None:  # (no default: every construction passes it)
                    self.required_fields.append(f"{self.scopes[-1].qualname}.{targets[0].id}")
            return
        target = targets[0]
        if (isinstance(node, ast.AnnAssign) and none and value.value is None  # type: ignore[union-attr]
                and isinstance(target, ast.Attribute) and raw_dotted(target.value) == "self"):
            # `self.pool: Optional[HostPool] = None`: the attribute holds a HostPool or nothing
            owner = self.function.qualname.rpartition(".")[0]
            held = _optional_class(node.annotation)
            if held and owner and "<locals>" not in owner:
                self.own_optional.append((owner, target.attr, held))
        for target in targets:
            if target.__class__ in (ast.Tuple, ast.List):
                # unpacked (`s.details, s.n = d, 1`): set to what is not known
                self.keywords_passed.update(e.attr for e in target.elts if e.__class__ is ast.Attribute)
                continue
            if target.__class__ is not ast.Attribute:
                continue
            receiver = raw_dotted(target.value)
            if receiver == "self" and not self.record_fields.get(target.attr):
                continue  # an object's own state: a field only when declared None here
            # (a context manager's store holds for its `with` block, which it restores after)
            stored = "scoped" if self.function.managed else stored_value(value) if value is not None else ""
            self.field_stores.append((node.lineno, target.attr, self.function.qualname, self._gates_now(), none, stored))

    def _return_fact(self, value: ast.expr | None) -> tuple[tuple[GateRef, ...], str, tuple[GateRef, ...]]:
        """(gates, what it returns, the gates of a returned test) of a `return` of ``value``, or
        a context manager's `yield` (``FunctionDef.returns``)."""
        if value is None or isinstance(value, ast.Constant):
            return self._gates_now(), "true" if value is not None and value.value else "false", ()
        if value.__class__ in TEST_VALUES or isinstance(value, ast.Call):
            refs = tuple(self.gate_refs(value, True))
            return self._gates_now(), "test" if refs else "other", refs
        return self._gates_now(), "other", ()

    def _note_table(self, node: ast.stmt) -> None:
        """A string-key store into a local table (`fields["x"] = v`), or a call handing a
        local table to an override (`ctx.override(source, **fields)`): ``table_resolutions``."""
        scope = self.function
        cls = node.__class__
        if cls is ast.Assign:
            for unpacked in node.targets:  # type: ignore[attr-defined]
                if unpacked.__class__ in (ast.Tuple, ast.List):
                    self.unpacked_self_stores.extend(
                        (scope, item.attr) for item in unpacked.elts  # type: ignore[misc]
                        if item.__class__ is ast.Attribute and raw_dotted(item.value) == "self")
        if cls is ast.Assign and len(node.targets) == 1:  # type: ignore[attr-defined]
            target = node.targets[0]  # type: ignore[attr-defined]
            if (target.__class__ is ast.Subscript and target.value.__class__ is ast.Name
                    and target.slice.__class__ is ast.Constant and isinstance(target.slice.value, str)):
                self.table_stores.append((scope, target.value.id, target.slice.value, node.value,  # type: ignore[arg-type, attr-defined]
                                          tuple(self.gate_groups)))
        elif cls is ast.Expr and node.value.__class__ is ast.Call:  # type: ignore[attr-defined]
            call = node.value  # type: ignore[attr-defined]
            func = call.func
            last = func.attr if func.__class__ is ast.Attribute else func.id if func.__class__ is ast.Name else ""
            if "override" in last.lower():
                for keyword in call.keywords:
                    if keyword.arg is None and keyword.value.__class__ is ast.Name:
                        self.override_calls.append((scope, keyword.value.id, call.lineno))  # type: ignore[arg-type]

    def _note_message(self, node: ast.stmt, name: str, value: ast.expr) -> None:
        """`msg = f"step {i}"`: a formatted string in a local, kept until the function's end
        tells whether only calls read it (``_message_uses``)."""
        kinds = format_kinds(value, self.rs.eager_calls, self._dotted)
        scope = self.function
        if not kinds or scope is None:
            return
        rs = self.rs
        for call in calls_in(value):  # `f"loss {t.item()}"`: the sync is paid with the message
            func = call.func
            if (func.__class__ is ast.Attribute and func.attr in rs.sync_methods and not call.args
                    and (raw_dotted(func.value) or "").split(".")[0] not in rs.not_tensor_receivers
                    and not host_value(func.value, scope.host, self.aliases, rs.host_name_re)):
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

    def _message_uses(self, scope: Scope, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """The calls that read each message local of a function, once it is walked; a
        parameter, a global or a name read otherwise keeps none (and is dropped)."""
        messages = scope.messages or []
        names = {m.name for m, _ in messages if scope.binds(m.name) and m.name not in scope.params}
        found = argument_uses(node, names) if names else {}
        self.built_messages.extend((replace(m, uses=tuple(MessageUse(*use) for use in found[m.name])), contexts)
                                   for m, contexts in messages if m.name in found)

    def _dotted(self, node: ast.AST) -> str | None:
        return dotted(node, self.aliases)

    def _is_path_name(self, name: str) -> bool:
        """Whether a name holds a value that starts as a path (``starts_as_path``) here: a
        local or module name assigned one before, a parameter with a string default."""
        scope = self.function
        return name in self.module_path_names or scope is not None and name in scope.path_names

    def _note_assign(self, targets: list[ast.expr], value: ast.expr | None) -> None:
        if value is None:
            return
        if len(targets) == 1 and targets[0].__class__ is ast.Name:
            self._note_architecture(targets[0].id, value)
        if isinstance(value, ast.Call):
            func = value.func
            last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if last is None or (last not in self.factory_names and last not in self.alias_names):
                return
            factory = dotted(func, self.aliases)
            if factory in self.rs.logger_factories:
                self.logger_names.update(t for t in (raw_dotted(x) for x in targets) if t)
        elif not self.scopes and value.__class__ is ast.Dict and len(targets) == 1 and targets[0].__class__ is ast.Name:
            keys = [k.value for k in value.keys if k.__class__ is ast.Constant and isinstance(k.value, str)]
            name = targets[0].id
            if 0 < len(keys) == len(value.keys) <= 16 and name not in self.table_keys:
                # a module table by literal keys (``FileFacts.table_keys``); assigned twice, it may hold either
                self.table_keys[name] = tuple(keys)
            else:
                self.table_keys[name] = ()
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


#: statement class -> its ``_Indexer.visit_X`` (``_block`` calls it directly, without
#: ``NodeVisitor.visit``'s name lookup); statements not listed are simple: ``_simple``
_STATEMENT_VISITORS = {
    cls: vars(_Indexer)[f"visit_{cls.__name__}"] for cls in ast.stmt.__subclasses__() if f"visit_{cls.__name__}" in vars(_Indexer)
}


#: most leading exits a function's fallback value is read past (``_Indexer._fallback``)
_MAX_FALLBACK_EXITS = 8
#: most `return`s of a function ``FunctionDef.returns`` keeps (more: none, and the value is not known)
def _mutated(text: str, name: str) -> bool:
    """Whether the module changes a table after building it (`T["k"] = v`, `T.update(...)`,
    `global T`): its keys are then not the literal ones."""
    pattern = rf"\b{re.escape(name)}\s*(\[[^\]\n]*\]\s*=(?!=)|\.\s*(update|setdefault|pop|popitem|clear|__setitem__)\s*\()|\bglobal\b[^\n]*\b{re.escape(name)}\b"
    return re.search(pattern, text) is not None


def _bindings(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[dict[str, int], str, frozenset[str]]:
    """(name -> how many times the function binds it, what it yields: "" none, "plain" only
    `yield` statements, "other" a `yield` used as a value or a `yield from`, the names it
    binds only by plain assignments)."""
    counts: dict[str, int] = {}
    plain: dict[str, int] = {}
    yields = statements = from_yields = 0
    for inner in ast.walk(node):
        cls = inner.__class__
        if cls is ast.Assign and len(inner.targets) == 1 and inner.targets[0].__class__ is ast.Name:  # type: ignore[attr-defined]
            name = inner.targets[0].id  # type: ignore[attr-defined]
            plain[name] = plain.get(name, 0) + 1
        if cls is ast.Name and inner.ctx.__class__ is ast.Store:  # type: ignore[attr-defined]
            counts[inner.id] = counts.get(inner.id, 0) + 1  # type: ignore[attr-defined]
        elif cls is ast.ExceptHandler and inner.name or cls in _DEFINES and inner is not node:  # type: ignore[attr-defined]
            counts[inner.name] = counts.get(inner.name, 0) + 1  # type: ignore[attr-defined]
        elif cls is ast.Import or cls is ast.ImportFrom:
            for alias in inner.names:  # type: ignore[attr-defined]
                bound = alias.asname or alias.name.partition(".")[0]
                counts[bound] = counts.get(bound, 0) + 1
        elif cls is ast.Global or cls is ast.Nonlocal:
            for name in inner.names:  # type: ignore[attr-defined]
                counts[name] = counts.get(name, 0) + 2
        elif cls is ast.Yield:
            yields += 1
        elif cls is ast.YieldFrom:
            from_yields += 1
        elif cls is ast.Expr and inner.value.__class__ is ast.Yield:  # type: ignore[attr-defined]
            statements += 1
    kind = "" if not (yields or from_yields) else "plain" if yields == statements and not from_yields else "other"
    return counts, kind, frozenset(name for name, n in plain.items() if counts.get(name) == n)


#: statements that bind their name (besides assignments)
_DEFINES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_MAX_RETURNS = 16
#: the decorators that make a generator a context manager
_CONTEXT_MANAGERS = frozenset({"contextmanager", "asynccontextmanager"})


def index_module(tree: ast.Module, text: str, path: str, rs: RuleSet) -> ModuleIndex:
    indexer = _Indexer(path, text, rs)
    indexer.method_stores = MethodStores(tree)
    indexer.visit(tree)
    incremented = frozenset(indexer.incremented)
    blocks: dict[str, list[tuple[int, int, str, str, int]]] = {}
    periodic: dict[str, list[tuple[int, int, str, str, int]]] = {}
    for qualname, first, last, context in indexer.path_blocks:
        if holds(context, incremented):
            blocks.setdefault(qualname, []).append((first, last, context[0], context[1], context[3]))
        elif context[2].startswith(PERIODIC_BY):
            periodic.setdefault(qualname, []).append((first, last, context[2][len(PERIODIC_BY):], context[1], context[3]))
    if blocks or periodic:
        indexer.functions = [
            replace(f, path_blocks=tuple(b for b in blocks.get(f.qualname, ()) if f.line <= b[0] <= f.end_line),
                    periodic_blocks=tuple(b for b in periodic.get(f.qualname, ()) if f.line <= b[0] <= f.end_line))
            if f.qualname in blocks or f.qualname in periodic else f for f in indexer.functions]
    snippets = [_on_resolved_path(s, incremented) if s.path_contexts else s for s in indexer.snippets]
    derived = indexer.derived()
    table_resolutions = indexer.table_resolutions() if indexer.override_calls else ()
    own_state = indexer.own_state()
    messages = tuple(replace(m, path_kind=kind, path_reason=reason) if contexts else m
                     for m, contexts in indexer.built_messages
                     for kind, reason in (resolve(contexts, incremented) if contexts else ("normal", ""),))
    path_values = indexer.path_values()
    return ModuleIndex(
        built_messages=messages,
        host_arguments=tuple(indexer.host_arguments),
        passed_values=tuple(indexer.passed_values),
        effects=tuple(indexer.effects),
        record_fields=tuple(indexer.record_decls),  # in the order the classes declare them
        required_fields=tuple(indexer.required_fields),
        field_stores=tuple(indexer.field_stores),
        keywords_passed=tuple(sorted(indexer.keywords_passed)),
        keywords_named=tuple(indexer.keywords_named),
        table_keys=tuple(sorted((name, keys) for name, keys in indexer.table_keys.items() if keys and not _mutated(text, name))),
        table_gets=tuple(indexer.table_gets),
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
        top_whiles=tuple(indexer.top_whiles),
        wrapped=indexer.wrapped(),
        derived=derived,
        table_resolutions=table_resolutions,
        own_state=own_state,
        own_optional=tuple(dict.fromkeys(indexer.own_optional)),
        falsy_names=indexer.falsy_names(),
        path_values=path_values,
    )


def _on_resolved_path(s: Snippet, incremented: frozenset[str]) -> Snippet:
    kind, reason = resolve(s.path_contexts, incremented)
    return replace(s, path_kind=kind, path_reason=reason)


#: a string annotation worth parsing (`"Recorder | None"`, `"Optional[pkg.Metrics]"`)
_ANNOTATION_TEXT = re.compile(r"[\w.\[\], |]{1,200}")


def _optional_class(annotation: ast.expr) -> str:
    """The class a field annotated `Optional[C]`, `C | None` or `Union[C, None]` holds when it
    is not None (its last name); "" for any other annotation."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        if not _ANNOTATION_TEXT.fullmatch(annotation.value):
            return ""
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return ""
    held: list[ast.expr] = []
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        held = [annotation.left, annotation.right]
    elif isinstance(annotation, ast.Subscript):
        wrapper = (raw_dotted(annotation.value) or "").rpartition(".")[2]
        inner = annotation.slice
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str) and _ANNOTATION_TEXT.fullmatch(inner.value):
            try:  # `Optional["Recorder"]`
                inner = ast.parse(inner.value, mode="eval").body
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                return ""
        if wrapper == "Optional":
            held = [inner, ast.Constant(None)]
        elif wrapper == "Union" and isinstance(inner, ast.Tuple):
            held = list(inner.elts)
    classes = [e for e in held if not (isinstance(e, ast.Constant) and e.value is None)]
    if len(classes) == 1 and isinstance(classes[0], ast.Constant) and isinstance(classes[0].value, str):
        return _optional_class(ast.Subscript(ast.Name("Optional"), ast.Constant(classes[0].value)))  # `"C" | None`
    # a bare name only: `torch.cuda.Stream` is no class of the tree's, whatever its last name
    if len(classes) != 1 or len(held) != 2 or not isinstance(classes[0], ast.Name):
        return ""
    return classes[0].id
