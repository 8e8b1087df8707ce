"""Call edges of the ``ast`` index: the calls of a statement the libcst walker does not read
(lambdas, decorators, implicit calls of `raise`, `for` and `with`), the attribute reads that
may run a property, and what each call passes (host data, values a gate judges)."""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import replace
from operator import attrgetter
from typing import Any

from cs_audit.extract.gates import TEST_VALUES, GateReader
from cs_audit.extract.scopes import Scope, raw_dotted
from cs_audit.extract.values import host_value, passed_value
from cs_audit.model import (
    CODE_CHARS,
    HANDED,
    FunctionDef,
    GateRef,
    HostArguments,
    PassedValues,
    PlainCall,
    closure_arg,
    closure_of,
)
from cs_audit.pyast import CHILD_FIELDS as _CHILD_FIELDS
from cs_audit.pyast import child_fields as _child_fields
from cs_audit.ruleset import RuleSet

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def calls_in(root: ast.AST, comprehensions: list[ast.comprehension] | None = None,
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


def protocol_calls(expr: ast.expr, methods: tuple[str, str]) -> list[ast.Call]:
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


def builtins_bound_by(module: ast.Module) -> frozenset[str]:
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


class CallEdges(GateReader):
    """The call sites and attribute reads of the statements being walked."""

    def __init__(self, path: str, text: str, rs: RuleSet) -> None:
        super().__init__(path, text, rs)
        self.calls: list[PlainCall] = []
        #: attribute reads (``_note_reads``), and what each is kept once for
        self.reads: list[PlainCall] = []
        self.read_keys: set[tuple[str | None, str, tuple[GateRef, ...], int, str, str]] = set()
        #: the statement a read is in, when its value may be returned: "<return>", or the name assigned
        self._read_context = ""
        #: the attribute names the file stores (`x.a = v`): plain attributes, no properties
        self.stored_attributes: set[str] = set()
        #: (function, target name, iterable) of each comprehension the edges pass saw
        self.comprehensions: list[tuple[str | None, str, ast.expr]] = []
        self.arguments: list[tuple[str | None, str, ast.Call]] = []
        #: (each ast.Lambda, its qualname), and how many lambdas each scope has so far
        self.lambdas: list[tuple[ast.Lambda, str]] = []
        self.lambda_numbers: dict[str, int] = {}
        #: calls passing host data (``HostArguments``)
        self.host_arguments: list[HostArguments] = []
        self.passed_values: list[PassedValues] = []
        self.keywords_passed: set[str] = set()
        self.keywords_named: list[tuple[int, str, str]] = []
        #: each callee and code text of the plain calls made so far, by itself
        self.shared: dict[str, str] = {}

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
            if cls is Name:  # ``host_value`` of a name, inline: most arguments are names
                if arg.id in host or names is not None and names.search(arg.id) is not None:  # type: ignore[attr-defined]
                    positions.append(index)
            elif host_value(arg, host, aliases, names):
                positions.append(index)
        keywords = tuple(k.arg for k in call.keywords
                         if k.arg is not None and k.value.__class__ is not Constant and host_value(k.value, host, aliases, names))
        if positions or keywords:
            self.host_arguments.append(HostArguments(call.lineno, call.end_lineno or call.lineno, callee.rpartition(".")[2],
                                                     tuple(positions), keywords))

    def _note_keywords(self, call: ast.Call) -> None:
        """The keywords a call passes something other than a falsy literal: a record's field may
        be set by its constructor, or by a `replace(x, field=...)`. A name passed under its own
        name (`Info(has_x=has_x)`) is kept with the call's line (``FileFacts.keywords_named``),
        to be judged as a test of that name there; any other value, by the keyword alone
        (``FileFacts.keywords_passed``)."""
        func = call.func
        last = func.attr if func.__class__ is ast.Attribute else func.id if func.__class__ is ast.Name else ""
        # a class built positionally or from a mapping (`Stats(n, d)`, `Stats(**kw)`) may set any
        # field: its name vetoes the fields of the classes so named (``joins.fields``)
        if last[:1].isupper() and (call.args or any(k.arg is None for k in call.keywords)):
            # (`Name(2` its first two fields; `Name(*` any of them, or with `*args` only those
            # before the first field named as a keyword, `Name(*a,b`: they cannot be given twice)
            if any(k.arg is None for k in call.keywords):
                self.keywords_passed.add(f"{last}(*")
            elif any(a.__class__ is ast.Starred for a in call.args):
                self.keywords_passed.add(f"{last}(*" + ",".join(sorted(k.arg for k in call.keywords if k.arg)))
            else:
                self.keywords_passed.add(f"{last}({len(call.args)}")
        constructor = last[:1].isupper() or last in ("cls", "replace")
        for keyword in call.keywords:
            value = keyword.value
            if keyword.arg is None or value.__class__ is ast.Constant and not value.value:
                continue
            if value.__class__ is ast.Name and value.id == keyword.arg and self.function is not None and constructor:
                self.keywords_named.append((call.lineno, keyword.arg, self.function.qualname))
                self.gate_names.add(keyword.arg)  # judged as a test of the name there: its assignments are kept
            else:
                self.keywords_passed.add(keyword.arg)
                if constructor and self.function is not None and value.__class__ is ast.Attribute and raw_dotted(value) == f"self.{value.attr}":
                    # a record's field handed the object's own state: a test of the field is one
                    # of that state here (``attributes.constructed_field``)
                    self.gate_names.add(f"self.{value.attr}")
        if last in ("setattr", "__setattr__") and len(call.args) >= 2 and call.args[1].__class__ is ast.Constant:
            self.keywords_passed.add(str(call.args[1].value))

    def _note_passed_values(self, callee: str, call: ast.Call) -> None:
        """The arguments of a call a gate on the parameter they land in can be judged by
        (``PassedValues``): a parameter tested for an option is off when every caller hands
        it that option, or a literal, that keeps its code off (``joins.param_gates``)."""
        scope = self.function
        params = scope.params if scope is not None else ()
        bound = scope.with_names if scope is not None else frozenset()
        assigned = scope.assigned if scope is not None else None
        stored = scope.assigned_only if scope is not None else frozenset()
        positions: list[tuple[int, str]] = []
        is_open = False
        for index, arg in enumerate(call.args):
            if arg.__class__ is ast.Starred:
                is_open = True
                break  # the positions after it are not known
            positions.append((index, passed_value(arg, params, bound, assigned, stored)))
        keywords: list[tuple[str, str]] = []
        for keyword in call.keywords:
            if keyword.arg is None:
                is_open = True
                continue
            keywords.append((keyword.arg, passed_value(keyword.value, params, bound, assigned, stored)))
        # a local handed on is judged as a test of it here: its assignments are kept
        self.gate_names.update(value[6:] for _, value in (*positions, *keywords) if value.startswith("local:"))
        if any(value != "?" for _, value in positions) or any(value != "?" for _, value in keywords):
            self.passed_values.append(PassedValues(call.lineno, call.end_lineno or call.lineno, callee.rpartition(".")[2],
                                                   tuple(positions), tuple(keywords), is_open))

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
        calls = calls_in(node, generators, lambdas, reads)
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
        returned_test: tuple[GateRef, ...] = ()
        if not params and not args.vararg and not args.kwarg and node.body.__class__ in TEST_VALUES:
            # a predicate (`lambda: self.require_sync`): its names are the enclosing function's
            refs = self.gate_refs(node.body, True)
            returned_test = tuple(r if outer is None or r.kind != "name" or closure_of(r) else
                                  replace(r, args=(*r.args, closure_arg(outer.qualname))) for r in refs)
        self.lambdas.append((node, qualname))
        self.functions.append(FunctionDef(
            qualname=qualname, name=name, class_name=None, line=node.lineno, end_line=node.end_lineno or node.lineno,
            params=params, returns_value=True, body_hash="", body_lines=(node.end_lineno or node.lineno) - node.lineno + 1,
            decorators=(), entry_gates=(), param_defaults=(), debug_named=False, returned_test=returned_test,
        ))
        self.function = Scope("def", name, qualname, params)
        self._set_gates_aside()
        saved_loops, self.loop_depth = self.loop_depth, 0
        saved_iters, self.loop_iters = self.loop_iters, []
        generators: list[ast.comprehension] = []
        lambdas: list[ast.Lambda] = []
        reads: list[ast.Attribute] = []
        calls = calls_in(node.body, generators, lambdas, reads)
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
            calls.extend(calls_in(expr))
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
            if call.keywords or call.args:
                self._note_keywords(call)
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
        calls_in(node, reads=reads)
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
        calls = calls_in(node, reads=reads)
        self._note_reads(reads)
        for call in calls:
            if call.keywords or call.args:
                self._note_keywords(call)
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
