"""Per-file type facts: the classes of a module (with their bases as written) and, for each
name, where its values come from (``model.Binding``).  Statements only, no expression walk
beyond the assigned values and annotations: the cross-file work is ``joins.values``.

Flow-insensitive within a function (every assignment of a name is one of its sources), as
PyCG's assignment graph is; a source that names nothing of the tree resolves to nothing.
"""

from __future__ import annotations

import ast

from cs_audit.extract.scopes import StoredNames, dotted, local_names
from cs_audit.model import PROPERTY_ACCESSORS, ClassFacts

#: generic containers whose (last) type argument is the element type
_CONTAINERS = frozenset({
    "list", "List", "Sequence", "MutableSequence", "Iterable", "Iterator", "Collection", "set", "Set",
    "frozenset", "FrozenSet", "deque", "Deque", "Generator", "AsyncIterator", "AsyncIterable",
    "AsyncGenerator", "tuple", "Tuple", "dict", "Dict", "Mapping", "MutableMapping", "OrderedDict",
    "defaultdict", "DefaultDict", "ValuesView", "KeysView",
})
_MAPPINGS = frozenset({"dict", "Dict", "Mapping", "MutableMapping", "OrderedDict", "defaultdict", "DefaultDict"})
#: wrappers whose first type argument is the type
_WRAPPERS = frozenset({"Optional", "Annotated", "ClassVar", "Final", "InitVar", "Required", "NotRequired", "ReadOnly"})
#: calls whose value is their first argument's (`partial(f, x)()` calls f)
_PASS_THROUGH = frozenset({"functools.partial", "partial", "functools.wraps", "typing.cast", "cast"})
#: builtins that copy their argument's elements into a new container (the call is not typed)
_COPIES = frozenset({"list", "tuple", "set", "frozenset", "sorted", "reversed"})
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
#: methods that add their (last) argument to a container
_ADDERS = frozenset({"append", "appendleft", "add", "insert", "extend", "put", "put_nowait"})
#: most sources a name keeps (a name assigned in many places: the first ones)
MAX_SOURCES = 8
#: most arguments of one call followed into the parameters of what it calls
MAX_ARGUMENTS = 8
#: most keywords of one call followed (a record's constructor names each of its fields)
MAX_KEYWORDS = 16
#: decorators that leave a function a function (`@dec` is otherwise `f = dec(f)`)
_PLAIN_DECORATORS = frozenset({
    "property", "staticmethod", "classmethod", "functools.cached_property", "cached_property",
    "abc.abstractmethod", "abstractmethod", "typing.overload", "overload", "typing.override", "override",
})
_MAX_STRING_ANNOTATION = 200


def type_bindings(tree: ast.Module, aliases: dict[str, str],
                  comprehensions: tuple[tuple[str | None, str, ast.expr], ...] = (),
                  arguments: tuple[tuple[str | None, str, ast.Call], ...] = (),
                  lambdas: tuple[tuple[ast.Lambda, str], ...] = (),
                  stores: StoredNames | None = None,
                  ) -> tuple[tuple[ClassFacts, ...], dict[tuple[str, str, str | None], list[str]]]:
    """The classes of a module and its bindings, grouped: (owner, name, function) -> sources
    (the first ``MAX_SOURCES`` of each are ``Binding``s), in the order they come in.
    ``comprehensions``: (function, target, iterable) of comprehension loops, ``arguments``:
    (function, callee, call) of calls with arguments (the edges pass of ``extract.calls``
    finds both as it walks expressions; this walk does not).  An argument is bound as
    ``arg:<callee>`` / slot (its position, or its keyword) in the calling function.
    ``stores``: the index's ``StoredNames`` (a function's locals, shared with the body hashes)."""
    walker = _Walker(aliases)
    walker.stores = stores
    walker.lambda_names = {id(node): qualname for node, qualname in lambdas}
    for node, qualname in lambdas:
        walker.bind(f"def:{qualname}", "<return>", qualname, walker.sources(node.body))
    walker.body(tree.body, function=None, cls=None, class_body=None, self_name=None)
    for function, name, iterable in comprehensions:
        walker.bind_name(name, [f"e:{s}" for s in walker.sources(iterable)], function, None)
    for function, callee, call in arguments:
        owner = f"arg:{callee}"
        for position, arg in enumerate(call.args[:MAX_ARGUMENTS]):
            if arg.__class__ is ast.Starred:
                break  # later positions are unknown
            walker.bind(owner, str(position), function, walker.sources(arg))
        for keyword in call.keywords[:MAX_KEYWORDS]:
            if keyword.arg is not None:
                walker.bind(owner, keyword.arg, function, walker.sources(keyword.value))
            else:  # (`**kw`: slot `**`, no parameter's; a record's fields may take anything from it)
                walker.bind(owner, "**", function, walker.sources(keyword.value) or ["?"])
    return tuple(walker.classes), walker.bindings


class _Walker:
    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self.classes: list[ClassFacts] = []
        #: (owner, name, function) -> sources, in order, each once
        self.bindings: dict[tuple[str, str, str | None], list[str]] = {}
        self.globals: set[str] = set()
        self.function_nodes: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        #: id of an ast.Lambda -> its qualname (``extract.calls`` numbers them)
        self.lambda_names: dict[int, str] = {}
        self._locals: dict[str, set[str]] = {}
        self.stores: StoredNames | None = None
        #: each owner and source string made so far, by itself
        self.shared: dict[str, str] = {}

    def local_names(self, function: str) -> set[str]:
        """The names a function binds itself (parameters and stored names), on first use."""
        names = self._locals.get(function)
        if names is None:
            node = self.function_nodes.get(function)
            names = self._locals[function] = (set() if node is None else local_names(node) if self.stores is None
                                              else self.stores.local_names(node))
        return names

    def bind(self, owner: str, name: str, function: str | None, sources: list[str]) -> None:
        if not sources:
            return
        # one object per distinct string: a pickle writes it once, then refers to it
        shared = self.shared
        have = self.bindings.setdefault((shared.setdefault(owner, owner), name, function), [])
        for s in sources:
            if s not in have:
                have.append(shared.setdefault(s, s))

    # ------------------------------------------------------------ statements
    def body(self, stmts: list[ast.stmt], function: str | None, cls: str | None, class_body: str | None,
             self_name: str | None) -> None:
        for stmt in stmts:
            if stmt.__class__ is ast.ClassDef:
                self.class_def(stmt, function, class_body)
            elif stmt.__class__ is ast.FunctionDef or stmt.__class__ is ast.AsyncFunctionDef:
                self.function_def(stmt, function, class_body)
            elif stmt.__class__ is ast.Assign or stmt.__class__ is ast.AnnAssign:
                self.assign(stmt, function, cls, class_body, self_name)
            elif stmt.__class__ is ast.Return:
                if function is not None and stmt.value is not None:
                    self.bind(f"def:{function}", "<return>", function, self.sources(stmt.value))
            elif stmt.__class__ is ast.For or stmt.__class__ is ast.AsyncFor:
                if stmt.target.__class__ is ast.Name:
                    self.bind_name(stmt.target.id, [f"e:{s}" for s in self.sources(stmt.iter)],
                                   function, class_body)
                elif stmt.target.__class__ is ast.Tuple and stmt.iter.__class__ is ast.Call:
                    self.paired(stmt.target.elts, stmt.iter, function, class_body)
                self.body(stmt.body, function, cls, class_body, self_name)
                self.body(stmt.orelse, function, cls, class_body, self_name)
            elif stmt.__class__ is ast.With or stmt.__class__ is ast.AsyncWith:
                for item in stmt.items:
                    if item.optional_vars is not None and item.optional_vars.__class__ is ast.Name:
                        self.bind_name(item.optional_vars.id, self.sources(item.context_expr), function, class_body)
                self.body(stmt.body, function, cls, class_body, self_name)
            elif stmt.__class__ is ast.Expr and stmt.value.__class__ is ast.Call and stmt.value.func.__class__ is ast.Attribute \
                    and stmt.value.func.attr in _ADDERS and stmt.value.args:
                # `self.callbacks.append(cb)`: the container holds what is added
                call, method = stmt.value, stmt.value.func
                added = self.sources(call.args[-1])
                if method.attr == "extend":
                    added = [f"e:{s}" for s in added]
                self.target(method.value, None, [f"l:{s}" for s in added], function, cls, class_body, self_name)
            elif stmt.__class__ is ast.Expr and stmt.value.__class__ in (ast.Yield, ast.YieldFrom):
                value = stmt.value
                if function is not None and value.value is not None:
                    # a generator's result is an iterator over what it yields
                    inner = self.sources(value.value)
                    if value.__class__ is ast.YieldFrom:
                        inner = [f"e:{s}" for s in inner]
                    self.bind(f"def:{function}", "<return>", function, [f"l:{s}" for s in inner])
            elif stmt.__class__ is ast.Global:
                self.globals.update(stmt.names)
            else:
                for name in ("body", "orelse", "finalbody"):
                    block = getattr(stmt, name, None)
                    if block:
                        self.body(block, function, cls, class_body, self_name)
                for handler in getattr(stmt, "handlers", ()):
                    self.body(handler.body, function, cls, class_body, self_name)
                for case in getattr(stmt, "cases", ()):
                    self.body(case.body, function, cls, class_body, self_name)

    def class_def(self, node: ast.ClassDef, function: str | None, class_body: str | None) -> None:
        qualname = _qualname(node.name, function, class_body)
        bases = tuple(b for b in (dotted(base, self.aliases) for base in node.bases) if b)
        constants = [(stmt.targets[0].id, stmt.value.value) for stmt in node.body
                     if stmt.__class__ is ast.Assign and len(stmt.targets) == 1
                     and stmt.targets[0].__class__ is ast.Name and stmt.value.__class__ is ast.Constant]
        levels = tuple((name, value) for name, value in constants if type(value) is int)
        strings = tuple((name, value) for name, value in constants if type(value) is str and len(value) <= 80)
        subscripted = tuple(b for b in (dotted(base.value, self.aliases) for base in node.bases
                                        if base.__class__ is ast.Subscript) if b)
        self.classes.append(ClassFacts(qualname, bases, levels, strings, subscripted))
        self.body(node.body, function=None, cls=qualname, class_body=qualname, self_name=None)

    def function_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef, function: str | None, class_body: str | None) -> None:
        qualname = _qualname(node.name, function, class_body)
        owner = f"def:{qualname}"
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        decorators = {dotted(d, self.aliases) for d in node.decorator_list}
        self_name = None  # the receiver: the joins know its class from the function's
        if class_body is not None and positional and "staticmethod" not in decorators:
            self_name = positional[0].arg
            positional = positional[1:]
        for arg in (*positional, *args.kwonlyargs):
            if arg.annotation is not None:
                self.bind(owner, arg.arg, qualname, self.annotation(arg.annotation))
        # a default is one of the values a parameter holds (`def run(cb=on_done)`)
        every = [*args.posonlyargs, *args.args]
        defaults = list(zip(every[len(every) - len(args.defaults):], args.defaults))
        defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in defaults:
            if default.__class__ in (ast.Name, ast.Attribute, ast.Lambda) and arg.annotation is None:
                self.bind(owner, arg.arg, qualname, self.sources(default))
        if args.vararg is not None and args.vararg.annotation is not None:
            self.bind(owner, args.vararg.arg, qualname, [f"l:{s}" for s in self.annotation(args.vararg.annotation)])
        self.decorated(node, qualname, function, class_body)
        if node.returns is not None:
            returns = self.annotation(node.returns)
            if node.__class__ is ast.AsyncFunctionDef or any(d and d.endswith("contextmanager") for d in decorators):
                pass  # the result is a coroutine or a context manager, not the annotated value
            else:
                # what the returns give decides; the annotation only where they give nothing known
                self.bind(owner, "<annotated>", qualname, returns)
        self.function_nodes[qualname] = node
        saved, self.globals = self.globals, set()
        self.body(node.body, function=qualname, cls=class_body if self_name else None, class_body=None, self_name=self_name)
        self.globals = saved

    def decorated(self, node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str, function: str | None,
                  class_body: str | None) -> None:
        """`@outer @inner def f` binds f to `outer(inner(f))`: each decorator is called with
        what the one below it gave (``arg:<decorator>`` slot 0), the function itself first."""
        value = f"f:{qualname}"
        applied: list[str] = []  # the decorators' callees, innermost first
        for expr in reversed(node.decorator_list):
            if expr.__class__ is ast.Call:
                inner = self.name_of(expr.func)
                callee = f"{inner}()" if inner else None
            else:
                callee = self.name_of(expr)
                if callee in _PLAIN_DECORATORS or (callee or "").endswith(PROPERTY_ACCESSORS):
                    continue
            if callee is None:
                return  # a decorator this walk cannot name: f stays the function it defines
            self.bind(f"arg:{callee}", "0", function, [value])
            value = f"c:{callee}"
            applied.append(callee)
        if applied:
            # the outermost decorator's result, as ``joins.values`` narrows it (every callee,
            # outermost first: one from outside the tree leaves what the one below gave)
            self.bind_name(node.name, [f"w:{'|'.join(reversed(applied))}|{qualname}"], function, class_body)

    def assign(self, node: ast.Assign | ast.AnnAssign, function: str | None, cls: str | None,
               class_body: str | None, self_name: str | None) -> None:
        sources: list[str] = []
        targets: list[ast.expr]
        if node.__class__ is ast.AnnAssign:
            sources.extend(self.annotation(node.annotation))
            targets = [node.target]
        else:
            targets = node.targets  # type: ignore[union-attr]
        if node.value is not None:
            sources.extend(self.sources(node.value))
        if not sources:
            return
        for target in targets:
            self.target(target, node.value, sources, function, cls, class_body, self_name)

    def target(self, target: ast.expr, value: ast.expr | None, sources: list[str], function: str | None,
               cls: str | None, class_body: str | None, self_name: str | None, depth: int = 0) -> None:
        """Bind what ``target`` is assigned: ``sources`` (the values of ``value``, when known)."""
        if target.__class__ is ast.Name:
            self.bind_name(target.id, sources, function, class_body)
        elif target.__class__ is ast.Attribute:
            if cls is not None and target.value.__class__ is ast.Name and target.value.id == self_name:
                self.bind(f"class:{cls}", target.attr, function, sources)
        elif target.__class__ is ast.Subscript:
            # `handlers[key] = f`: the container holds f among its elements
            head = target.value
            while head.__class__ is ast.Subscript:
                head = head.value
                sources = [f"l:{s}" for s in sources]
            sources = [f"l:{s}" for s in sources]
            if head.__class__ is ast.Name and function is not None and head.id not in self.local_names(function):
                self.bind("", head.id, None, sources)  # a module's table filled in a function
            else:
                self.target(head, None, sources, function, cls, class_body, self_name, depth + 1)
        elif (target.__class__ is ast.Tuple or target.__class__ is ast.List) and depth < 4:
            elts = target.elts
            starred = [i for i, e in enumerate(elts) if e.__class__ is ast.Starred]
            if value is not None and value.__class__ in (ast.Tuple, ast.List) and len(starred) <= 1 \
                    and not any(v.__class__ is ast.Starred for v in value.elts):
                values = value.elts
                after = len(elts) - 1 - starred[0] if starred else 0
                for i, element in enumerate(elts):
                    if starred and i == starred[0] and isinstance(element, ast.Starred):  # `a, *rest, z = ...`: rest is a list of the middle
                        middle = values[i:len(values) - after]
                        inner = [f"l:{s}" for v in middle[:MAX_SOURCES] for s in self.sources(v)]
                        self.target(element.value, None, inner, function, cls, class_body, self_name, depth + 1)
                        continue
                    j = i if not starred or i < starred[0] else len(values) - (len(elts) - i)
                    if 0 <= j < len(values):
                        self.target(element, values[j], self.sources(values[j]), function, cls, class_body, self_name, depth + 1)
                return
            each = [f"e:{s}" for s in sources]  # unpacking a value: each name is one of its elements
            for element in elts:
                if element.__class__ is ast.Starred:
                    self.target(element.value, None, sources, function, cls, class_body, self_name, depth + 1)
                else:
                    self.target(element, None, each, function, cls, class_body, self_name, depth + 1)

    def paired(self, names: list[ast.expr], pairs: ast.Call, function: str | None, class_body: str | None) -> None:
        """`for i, m in enumerate(ms)`, `for a, b in zip(xs, ys)`, `for k, v in d.items()`:
        each name bound to the elements of the iterable it walks."""
        func, args = pairs.func, pairs.args
        walked: list[ast.expr | None] = []
        if func.__class__ is ast.Attribute and func.attr == "items" and not args:
            walked = [None, func.value]  # a mapping's elements are its values
        elif func.__class__ is ast.Name and func.id == "enumerate" and args:
            walked = [None, args[0]]
        elif func.__class__ is ast.Name and func.id == "zip":
            walked = [None if a.__class__ is ast.Starred else a for a in args]
        if len(walked) != len(names):
            return
        for name, iterable in zip(names, walked):
            if iterable is not None and name.__class__ is ast.Name:
                self.bind_name(name.id, [f"e:{s}" for s in self.sources(iterable)], function, class_body)

    def bind_name(self, name: str, sources: list[str], function: str | None, class_body: str | None) -> None:
        if function is not None and name not in self.globals:
            self.bind(f"def:{function}", name, function, sources)
        elif class_body is not None:
            self.bind(f"class:{class_body}", name, None, sources)
        else:
            self.bind("", name, function, sources)

    # ------------------------------------------------------------ values
    def sources(self, expr: ast.expr, depth: int = 0) -> list[str]:
        if depth > 4:
            return []
        if expr.__class__ is ast.Call:
            func = expr.func
            if isinstance(func, ast.BoolOp) or isinstance(func, ast.IfExp):
                # `(cache_class or RadixCache)(params)`: a call of whichever class the operand gives
                operands = func.values if isinstance(func, ast.BoolOp) else [func.body, func.orelse]
                return [f"c:{name}" for name in map(self.name_of, operands) if name]
            name = self.name_of(func)
            if name is None:
                return []
            if name in _PASS_THROUGH and expr.args:
                return self.sources(expr.args[0], depth + 1)
            if name in _COPIES and expr.args:
                # `tuple(make(i) for i in ...)`: a container of what the argument's elements are
                return [f"l:e:{s}" for s in self.sources(expr.args[0], depth + 1)]
            return [f"c:{name}"]
        if expr.__class__ is ast.Name or expr.__class__ is ast.Attribute:
            name = self.name_of(expr)
            return [f"r:{name}"] if name else []
        if expr.__class__ is ast.Subscript:
            return [f"e:{s}" for s in self.sources(expr.value, depth + 1)]
        if expr.__class__ is ast.Lambda:
            qualname = self.lambda_names.get(id(expr))
            return [f"f:{qualname}"] if qualname else []
        if expr.__class__ is ast.IfExp:
            return self.sources(expr.body, depth + 1) + self.sources(expr.orelse, depth + 1)
        if expr.__class__ is ast.BoolOp:
            return [s for v in expr.values for s in self.sources(v, depth + 1)]
        if expr.__class__ is ast.Await or expr.__class__ is ast.NamedExpr:
            return self.sources(expr.value, depth + 1)
        if expr.__class__ is ast.Dict:
            return [f"l:{s}" for v in expr.values[:MAX_SOURCES] for s in self.sources(v, depth + 1)]
        if expr.__class__ is ast.List or expr.__class__ is ast.Tuple or expr.__class__ is ast.Set:
            return [f"l:{s}" for v in expr.elts[:MAX_SOURCES] for s in self.sources(v, depth + 1)]
        if isinstance(expr, _COMPREHENSIONS):  # `[Worker(i) for i in ...]`: a container of what its element is
            element = expr.value if isinstance(expr, ast.DictComp) else expr.elt
            return [f"l:{s}" for s in self.sources(element, depth + 1)]
        return []

    def name_of(self, node: ast.expr) -> str | None:
        """`a.b.c` after import aliases; `super().m` as written."""
        if node.__class__ is ast.Attribute:
            value = node.value
            if value.__class__ is ast.Call and value.func.__class__ is ast.Name and value.func.id == "super":
                return f"super().{node.attr}"
        name = dotted(node, self.aliases)
        return None if name is None or "()" in name else name

    def annotation(self, expr: ast.expr, depth: int = 0) -> list[str]:
        if depth > 4:
            return []
        if expr.__class__ is ast.Constant:
            text = expr.value
            if not isinstance(text, str) or len(text) > _MAX_STRING_ANNOTATION:
                return []
            try:
                parsed = ast.parse(text.strip(), mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return []
            return self.annotation(parsed, depth + 1)
        if expr.__class__ is ast.Name or expr.__class__ is ast.Attribute:
            name = dotted(expr, self.aliases)
            if not name or name == "None" or "()" in name:
                return []
            return [f"t:{name}"]
        if expr.__class__ is ast.BinOp and expr.op.__class__ is ast.BitOr:
            return self.annotation(expr.left, depth + 1) + self.annotation(expr.right, depth + 1)
        if expr.__class__ is ast.Subscript:
            head = dotted(expr.value, self.aliases) or ""
            last = head.rpartition(".")[2]
            inner = expr.slice
            args = list(inner.elts) if inner.__class__ is ast.Tuple else [inner]
            if last == "Union":
                return [s for a in args for s in self.annotation(a, depth + 1)]
            if last in _WRAPPERS:
                return self.annotation(args[0], depth + 1)
            if last in ("type", "Type"):
                return [f"k:{s[2:]}" for s in self.annotation(args[0], depth + 1) if s.startswith("t:")]
            if last in _CONTAINERS:
                element = args[-1] if last in _MAPPINGS else args[0]
                return [f"l:{s}" for s in self.annotation(element, depth + 1)]
            return self.annotation(expr.value, depth + 1)  # `Box[T]`: a Box
        return []


def source_head(source: str) -> str:
    """The first name a source's dotted part starts with (`e:r:batch.reqs` -> `batch`)."""
    while source[:2] in ("e:", "l:"):
        source = source[2:]
    return source[2:].partition(".")[0]


def _qualname(name: str, function: str | None, class_body: str | None) -> str:
    if class_body is not None:
        return f"{class_body}.{name}"
    if function is not None:
        return f"{function}.<locals>.{name}"
    return name
