"""The libcst walker: env reads, emitters, syncs and their arguments.

The ``ast`` pass (``index.py``) hands over the statements of a file that hold a
relevant token, each with its context (function, gates, loops).  They are joined
into synthetic modules of a bounded size (one for most files), each parsed once
by libcst and walked statement by statement, then dropped; facts take the
statement's lines from the ``ast`` pass, so no position metadata is needed.  Inside a statement, context is kept on stacks:
enclosing calls (is this ``.item()`` inside a log call's arguments?), and gates
of ``A and f()`` / ``f() if A else g()``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import libcst as cst

from cs_audit.extract.calls import may_reach_tree
from cs_audit.extract.index import Snippet
from cs_audit.extract.paths import CONDITIONAL_PROBLEM_REASON, ONCE_REASON, PROBLEM_LEVELS
from cs_audit.extract.values import HOST_BUILDERS as _HOST_BUILDERS
from cs_audit.model import EMITTER_ROLES, CallSite, EnvRead, GateRef, closure_arg
from cs_audit.ruleset import RuleSet

_MAX_CODE = 160
_OUTPUT_VAR = re.compile(r"(?i)(_DIR|_PATH|_ROOT|_FILE|OUT_ROOT|OUTPUT)$")


def _literal_str(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd escapes: not a usable literal
            return None
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = _literal_str(node.left), _literal_str(node.right)
        return None if left is None or right is None else left + right
    return None


def _literal_text(node: cst.BaseExpression | None) -> str | None:
    """A literal as text: strings unquoted, numbers and None/True/False as written."""
    if node is None:
        return None
    text = _literal_str(node)
    if text is not None:
        return text
    if isinstance(node, (cst.Integer, cst.Float)):
        return node.value
    if isinstance(node, cst.Name) and node.value in ("None", "True", "False"):
        return node.value
    return None


def _path_prefix(node: cst.BaseExpression | None) -> str | None:
    """A literal path, or the literal head of an f-string path (`f"/tmp/x/{n}.pt"`)."""
    literal = _literal_str(node)
    if literal is not None:
        return literal
    if isinstance(node, cst.FormattedString) and node.parts and isinstance(node.parts[0], cst.FormattedStringText):
        return node.parts[0].value
    return None


#: calls whose result is the path their arguments join (`os.path.join(".run", name)`, `Path("/tmp", n)`)
_PATH_JOINS = frozenset({"os.path.join", "posixpath.join", "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "Path"})
#: calls and methods whose result starts as their first argument or receiver does
_PATH_SAME = frozenset({"str", "os.fspath", "os.path.abspath", "os.path.normpath", "os.path.realpath", "os.path.expanduser"})
_PATH_SAME_METHODS = frozenset({"resolve", "absolute", "expanduser"})
#: methods that write at the path they are called on (`Path(".run").mkdir()`); `.open` by its mode
_PATH_WRITERS = frozenset({"mkdir", "write_text", "write_bytes", "touch"})
#: how far a path head is followed through nested calls and operators
_MAX_HEAD_DEPTH = 8


def is_output_literal(head: str) -> bool:
    """Whether the literal start of a written path is a hard-coded location: absolute or
    relative to the working directory (`/tmp/...`, `./x`, `.run/...`), naming more than a root."""
    return head.startswith(("/", ".")) and "/" in head and bool(head.strip("./"))


def _base_name(path: str) -> str | None:
    """The last part of a path (`*` for unknown parts), None when nothing of it is known."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return base if base.strip("*") else None


def _squash(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_CODE else text[: _MAX_CODE - 1] + "…"


class _ValueUse(TypedDict, total=False):
    """``EnvRead.level`` and ``EnvRead.used_as`` of a read (``StatementFacts._value_use``)."""

    level: str
    used_as: str


@dataclass
class _Pending:
    callee: str
    role: str | None
    arg_calls: list[str] = field(default_factory=list)
    #: open()'s literal mode
    mode: str | None = None


class StatementFacts(cst.CSTVisitor):
    """Walks one statement at a time; ``snippet`` is the current statement's context."""

    def __init__(self, module: cst.Module, rs: RuleSet, aliases: dict[str, str],
                 logger_names: frozenset[str], string_constants: dict[str, str],
                 shadowed: frozenset[str] = frozenset(),
                 param_defaults: dict[str, dict[str, str]] | None = None) -> None:
        super().__init__()
        self.shadowed = shadowed
        #: function -> its parameters' literal string defaults
        self.param_defaults = param_defaults or {}
        self.module = module
        self.rs = rs
        self.aliases = aliases
        self.logger_names = logger_names
        self.string_constants = string_constants
        self.env_reads: list[EnvRead] = []
        self.calls: list[CallSite] = []
        self.literal_paths: list[tuple[int, str, int, int]] = []
        self.snippet: Snippet | None = None
        self.discarded: cst.CSTNode | None = None
        #: the expression the current statement ends in, and the nodes before it (see ``_code``)
        self.final_expression: tuple[cst.BaseExpression, Sequence[cst.CSTNode]] | None = None
        self.pending: list[_Pending] = []
        #: the comparisons, conditional-expression tests and arithmetic around the current
        #: node, innermost last: how the expression computes with an env read (``_value_use``)
        self.around: list[cst.CSTNode] = []
        #: f-strings around the current node: a value picked there is text for a message
        self.in_text = 0
        self.local_gates: list[GateRef] = []
        #: the last in-expression disjunction numbered (``GateRef.any_of``, below zero)
        self.any_of = 0
        self.handles: set[str] = set()
        self.skip_nodes: set[int] = set()
        self.timestamp_seen = False
        #: lambdas around the current node
        self.in_lambda = 0
        #: (function, local name) -> base-name pattern of a path assigned to it
        self.local_paths: dict[tuple[str | None, str], str] = {}
        #: (function, local name) -> the literal start of the path assigned to it (``path_head``),
        #: None for a value that is no path (it hides a module constant of the same name)
        self.local_heads: dict[tuple[str | None, str], tuple[str, bool] | None] = {}
        self.attr_registries = {r.object: r for r in rs.registries if r.access == "attribute"}
        #: cheap first check of `<owner>.NAME`: the owner's last name must be one a registry
        #: object ends in (`envs`), or a local alias of a registry object
        self.registry_tails = {o.rsplit(".", 1)[-1] for o in self.attr_registries}
        self.registry_tails.update(n for n, origin in aliases.items() if origin in self.attr_registries)
        self.method_registries = {r.object: r for r in rs.registries if r.access == "method"}

    def walk(self, statement: cst.CSTNode, snippet: Snippet) -> None:
        self.snippet = snippet
        body = statement.body if isinstance(statement, cst.SimpleStatementLine) else ()
        #: the call a statement is made of, its value discarded (`os.environ.pop("X", None)`)
        self.discarded = body[0].value if len(body) == 1 and isinstance(body[0], cst.Expr) else None
        self.final_expression = _final_expression(statement, snippet)
        self.pending.clear()
        self.around.clear()
        # node ids: a freed piece's nodes may share them with the next piece's
        self.skip_nodes.clear()
        self.in_text = 0
        self.local_gates.clear()
        self.timestamp_seen = False
        self.in_lambda = 0
        self._walk(statement)
        target = snippet.assign_target
        if target and ("." not in target or target.startswith("self.")):
            value = _assigned_value(statement)
            pattern = self.path_pattern(value) if value is not None else None
            scope = self._path_scope(target)
            if pattern:
                self.local_paths[(scope, target)] = pattern
            self.local_heads[(scope, target)] = self.path_head(value) if value is not None else None

    def _walk(self, node: cst.CSTNode) -> None:
        """``visit_X``, the children in source order, ``leave_X``: libcst's ``node.visit``
        without its cost (it rebuilds and re-validates every node it passes, even for a
        read-only visitor).  Whitespace, parentheses and punctuation are not entered."""
        cls = node.__class__
        plan = _WALK_PLANS.get(cls)
        if plan is None:
            plan = _WALK_PLANS[cls] = _walk_plan(cls)
        visit, leave, fields = plan
        if visit is None or getattr(self, visit)(node) is not False:
            walk, is_node = self._walk, _IS_NODE
            for name in fields:
                value = getattr(node, name)
                kind = value.__class__
                if is_node[kind]:
                    walk(value)
                elif kind is tuple or kind is list:
                    for item in value:
                        if is_node[item.__class__]:
                            walk(item)
        if leave is not None:
            getattr(self, leave)(node)

    def _path_scope(self, name: str) -> str | None:
        """Locals live in their function; `self.x` in the class (`A.__init__` sets, `A.log` opens)."""
        function = self.snippet.function if self.snippet else None
        if name.startswith("self.") and function and "." in function:
            return "class:" + function.rsplit(".", 1)[0]
        return function

    def path_pattern(self, expr: cst.BaseExpression | None) -> str | None:
        """Base name of the file a path expression names: literals kept, `{p}` for a
        parameter, `*` for anything else (`os.path.join(d, f"{name}.jsonl")` -> `{name}.jsonl`);
        alternatives joined by `|`."""
        assert self.snippet is not None
        text: str | None = None
        literal = _literal_str(expr) if expr is not None else None
        if literal is not None:
            text = literal
        elif isinstance(expr, cst.FormattedString):
            pieces = []
            for part in expr.parts:
                if isinstance(part, cst.FormattedStringText):
                    pieces.append(part.value)
                elif isinstance(part, cst.FormattedStringExpression) and isinstance(part.expression, cst.Name) \
                        and part.expression.value in self.snippet.params:
                    pieces.append("{" + part.expression.value + "}")
                else:
                    pieces.append("*")
            text = "".join(pieces)
        elif isinstance(expr, cst.Call) and (self.dotted(expr.func) or "").endswith(("path.join", "Path")) and expr.args:
            return self.path_pattern(expr.args[-1].value)
        elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
            return self.path_pattern(expr.right)
        elif isinstance(expr, cst.IfExp):  # alternatives: "a.jsonl|b.jsonl"
            both = [p for p in (self.path_pattern(expr.body), self.path_pattern(expr.orelse)) if p]
            return "|".join(both) or None
        elif isinstance(expr, (cst.Name, cst.Attribute)):
            return self._named_pattern(self.raw_dotted(expr))
        return _base_name(text) if text else None

    def _named_pattern(self, name: str | None) -> str | None:
        """A name's file name pattern, looked up as ``_named_head`` looks up its path: a local
        assigned before (or `self.x` in its class), a parameter (`{p}`, filled in at each call
        that passes a literal; its string default is what the others write), a module name."""
        s = self.snippet
        if name is None or s is None:
            return None
        key = (self._path_scope(name), name)
        if key in self.local_paths or key in self.local_heads or "." in name:
            return self.local_paths.get(key)
        if name in s.params:
            default = self.param_defaults.get(s.function or "", {}).get(name)
            base = _base_name(default) if default is not None else None
            return f"{{{name}}}|{base}" if base else f"{{{name}}}"
        if (None, name) in self.local_paths or (None, name) in self.local_heads:
            return self.local_paths.get((None, name))
        constant = self.string_constants.get(name)
        return _base_name(constant) if constant is not None else None

    def path_head(self, expr: cst.BaseExpression, depth: int = 0) -> tuple[str, bool] | None:
        """The literal start of the path an expression evaluates to and whether that is all
        of it: `f"/tmp/dump_{r}.pt"` -> ("/tmp/dump_", False), `os.path.join(".run", "kv")` ->
        (".run/kv", True); `%`/`.format` templates up to their first placeholder, names through
        the locals assigned before, the parameters' string defaults and the module's constants."""
        if depth > _MAX_HEAD_DEPTH:
            return None
        depth += 1
        literal = _literal_str(expr)
        if literal is not None:
            return literal, True
        if isinstance(expr, cst.FormattedString):
            text = ""
            for part in expr.parts:
                if not isinstance(part, cst.FormattedStringText):
                    return (text, False) if text else None
                text += part.value
            return text, True
        if isinstance(expr, cst.BinaryOperation):
            op = expr.operator
            if isinstance(op, cst.Divide):  # `Path(".run") / name`
                return self._joined_head([expr.left, expr.right], depth)
            left = self.path_head(expr.left, depth)
            if left is None:
                return None
            if isinstance(op, cst.Modulo):
                return _template_head(left, "%")
            if isinstance(op, cst.Add):
                if not left[1]:
                    return left
                right = self.path_head(expr.right, depth)
                return (left[0] + right[0], right[1]) if right else (left[0], False)
            return None
        if isinstance(expr, cst.Call):
            callee = self.dotted(expr.func) or ""
            args = [a.value for a in expr.args if a.keyword is None and not a.star]
            if callee in _PATH_JOINS:
                return self._joined_head(args, depth)
            if callee in _PATH_SAME:
                return self.path_head(args[0], depth) if args else None
            if callee == "os.path.dirname" and args:
                head = self.path_head(args[0], depth)
                return (head[0].rsplit("/", 1)[0] if "/" in head[0] else "", head[1]) if head else None
            if isinstance(expr.func, cst.Attribute):
                method, receiver = expr.func.attr.value, expr.func.value
                if method == "format":
                    head = self.path_head(receiver, depth)
                    return _template_head(head, "{") if head else None
                if method == "joinpath":
                    return self._joined_head([receiver, *args], depth)
                if method in _PATH_SAME_METHODS:
                    return self.path_head(receiver, depth)
            return None
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self._named_head(expr)
        return None

    def _joined_head(self, parts: list[cst.BaseExpression], depth: int) -> tuple[str, bool] | None:
        if not parts:
            return None
        head = self.path_head(parts[0], depth)
        if head is None:
            return None
        text, complete = head
        for part in parts[1:]:
            if not complete:
                break
            text = text if text.endswith("/") else text + "/"
            piece = self.path_head(part, depth)
            if piece is None:
                return text, False
            text, complete = text + piece[0].lstrip("/"), piece[1]
        return text, complete

    def _named_head(self, expr: cst.BaseExpression) -> tuple[str, bool] | None:
        """A name's path head: a local assigned before (or `self.x` in its class), a
        parameter's string default (a default is one even where callers pass their own), a
        module name."""
        s = self.snippet
        name = self.raw_dotted(expr)
        if name is None or s is None:
            return None
        key = (self._path_scope(name), name)
        if key in self.local_heads:
            return self.local_heads[key]
        if "." in name:
            return None
        if name in s.params:
            default = self.param_defaults.get(s.function or "", {}).get(name)
            return (default, True) if default is not None else None
        if (None, name) in self.local_heads:
            return self.local_heads[(None, name)]
        constant = self.string_constants.get(name)
        return (constant, True) if constant is not None else None

    # ---------------------------------------------------------------- names
    def dotted(self, node: cst.BaseExpression) -> str | None:
        parts: list[str] = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if isinstance(node, cst.Name):
            parts.append(self.aliases.get(node.value, node.value))
        elif isinstance(node, cst.Call):
            inner = self.dotted(node.func)
            if inner is None:
                return None
            parts.append(inner + "()")
        elif isinstance(node, cst.Subscript):
            inner = self.dotted(node.value)
            if inner is None:
                return None
            parts.append(inner + "[]")
        else:
            return None
        return ".".join(reversed(parts))

    @staticmethod
    def raw_dotted(node: cst.BaseExpression) -> str | None:
        parts: list[str] = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name):
            return None
        parts.append(node.value)
        return ".".join(reversed(parts))

    def _receiver(self, func: cst.BaseExpression) -> str | None:
        """The receiver of a method call as written: `self._fh`, or `_get()` for the result
        of a call of a name with no arguments (a getter)."""
        if not isinstance(func, cst.Attribute):
            return None
        getter = _getter_call(func)
        return f"{getter}()" if getter is not None else self.raw_dotted(func.value)

    def _code(self, node: cst.CSTNode) -> tuple[str, int, int]:
        """The code of ``node`` (squashed) and its 0-based columns (``_columns``)."""
        assert self.snippet is not None
        text = self.snippet.text
        if self.final_expression is not None and node is self.final_expression[0]:
            # what libcst's code generation would give, without its cost: the end of the text
            start = sum(len(self.module.code_for_node(before)) for before in self.final_expression[1])
            return (_squash(text[start:]), *self._columns(start, len(text)))
        if getattr(node, "lpar", None):
            node = node.with_changes(lpar=(), rpar=())  # parentheses added around header snippets
        raw = self.module.code_for_node(node)
        start = text.find(raw, self.snippet.prefix)
        columns = self._columns(start, start + len(raw)) if start >= 0 else (self.snippet.col, self.snippet.end_col)
        return (_squash(raw), *columns)

    def _own_span(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        """The lines and 0-based columns of ``node`` itself inside the current statement."""
        s = self.snippet
        assert s is not None
        text = s.text
        start = text.find(self.module.code_for_node(node), s.prefix)
        if start < 0:
            return s.line, s.end_line, s.col, s.end_col
        end = start + len(self.module.code_for_node(node))

        def at(offset: int) -> tuple[int, int]:
            before = text.rfind("\n", 0, offset)
            return s.line + text.count("\n", 0, offset), s.col + offset - s.prefix if before < 0 else offset - before - 1

        (line, col), (end_line, end_col) = at(start), at(end)
        return line, end_line, col, end_col

    def _columns(self, start: int, end: int) -> tuple[int, int]:
        """The columns of ``text[start:end]`` of the current statement: where it starts on the
        statement's first line and ends on its last (the statement's own column where the
        piece starts or ends on another line), so the finding's span holds the piece."""
        s = self.snippet
        assert s is not None
        text = s.text
        first_break, last_break = text.find("\n"), text.rfind("\n")
        col = s.col + start - s.prefix if first_break < 0 or start <= first_break else s.col
        if end <= last_break:
            end_col = s.end_col
        else:
            end_col = s.col + end - s.prefix if last_break < 0 else end - last_break - 1
        return col, end_col

    @property
    def gates(self) -> tuple[GateRef, ...]:
        assert self.snippet is not None
        return self.snippet.gates + tuple(self.local_gates) if self.local_gates else self.snippet.gates

    def _host(self, func: cst.BaseExpression) -> bool:
        """Whether the receiver of a method call is host data where the code says so (the
        names of ``Snippet.host``; `.cpu()`, `.to("cpu")`, ``device="cpu"``, a tensor built
        from Python data, in the receiver itself): its `.item()` copies no device memory."""
        return isinstance(func, cst.Attribute) and self._host_expr(func.value)

    def _host_expr(self, node: cst.BaseExpression) -> bool:
        while True:
            if isinstance(node, cst.Subscript):
                node = node.value
            elif isinstance(node, cst.Call):
                if any(a.keyword is not None and a.keyword.value == "device" and _literal_str(a.value) == "cpu" for a in node.args):
                    return True
                inner = node.func
                callee = self.dotted(inner)
                if callee in _HOST_BUILDERS and not any(a.keyword is not None and a.keyword.value == "device" for a in node.args):
                    return True
                if callee and callee.startswith("torch.") and node.args and self._host_expr(node.args[0].value):
                    return True  # `torch.quantile(host, q=0.5)`: an op on host data runs on the host
                if not isinstance(inner, cst.Attribute):
                    return False
                method = inner.attr.value
                if method in ("cpu", "numpy", "tolist") and not node.args:
                    return True
                if method == "to" and node.args and _literal_str(node.args[0].value) == "cpu":
                    return True
                if method in ("cuda", "to"):
                    return False
                node = inner.value
            else:
                raw = self.raw_dotted(node)
                if raw is None or self.snippet is None:
                    return False
                names = self.rs.host_name_re
                return raw in self.snippet.host or names is not None and names.search(raw.rpartition(".")[2]) is not None

    def _param_root(self, func: cst.BaseExpression) -> str:
        """The parameter a method call's receiver is what it holds, or a view of that (`x.cpu()`,
        `x[i].float().tolist()`), when the function has not assigned it before: "" otherwise."""
        if not isinstance(func, cst.Attribute) or self.snippet is None:
            return ""
        node = func.value
        while True:
            if isinstance(node, cst.Subscript):
                node = node.value
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value not in ("cuda", "to"):
                node = node.func.value
            else:
                break
        s = self.snippet
        if isinstance(node, cst.Name) and node.value in s.params and node.value not in s.rebound:
            return node.value
        return ""

    # ---------------------------------------------------------------- in-expression gates
    def _simple_refs(self, expr: cst.BaseExpression, active: bool) -> list[GateRef]:
        """Operands of `A and f()` / `x if A else y` (names and calls; comparisons by their left side)."""
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return self._simple_refs(expr.expression, not active)
        if isinstance(expr, cst.Comparison):
            refs = self._simple_refs(expr.left, active)
            level = self._level(expr.comparisons[0], active) if len(expr.comparisons) == 1 else ""
            return [dataclasses.replace(r, level=level) for r in refs] if level else refs
        if isinstance(expr, cst.BooleanOperation):
            left, right = self._simple_refs(expr.left, active), self._simple_refs(expr.right, active)
            if isinstance(expr.operator, cst.And) == active:
                return left + right
            if not (left and right):  # one operand suffices, and one stands for nothing
                return []
            # they gate only together (numbered below zero, apart from the statement's gates)
            self.any_of -= 1
            return [r if r.any_of else dataclasses.replace(r, any_of=self.any_of) for r in left + right]
        if isinstance(expr, cst.Call):
            callee = self.dotted(expr.func)
            if callee and callee.rsplit(".", 1)[-1] in self.rs.level_guards:
                return [GateRef("level", callee, (), active)]
            if callee:
                return [GateRef("call", callee, tuple(_arg_text(a.value) for a in expr.args[:3]), active)]
        if isinstance(expr, (cst.Name, cst.Attribute)):
            raw = self.raw_dotted(expr)
            if raw and raw not in ("True", "False", "None"):
                home = next((q for name, q in self.snippet.closure if name == raw.split(".", 1)[0]), None) if self.snippet else None
                return [GateRef("name", self.aliases.get(raw, raw), (closure_arg(home),) if home else (), active)]
        return []

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> bool:
        self._walk(node.left)
        refs = self._simple_refs(node.left, isinstance(node.operator, cst.And))
        self.local_gates.extend(refs)
        self._walk(node.right)
        if refs:
            del self.local_gates[-len(refs):]
        return False

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        self.around.append(node)
        self._walk(node.test)
        self.around.pop()
        for branch, active in ((node.body, True), (node.orelse, False)):
            refs = self._simple_refs(node.test, active)
            self.local_gates.extend(refs)
            self._walk(branch)
            if refs:
                del self.local_gates[-len(refs):]
        return False

    # ---------------------------------------------------------------- env reads
    def _env_key(self, node: cst.BaseExpression | None) -> tuple[str | None, str | None]:
        if node is None:
            return None, None
        literal = _literal_str(node)
        if literal is not None:
            return literal, None
        if isinstance(node, cst.Name):
            if node.value in self.string_constants:
                return self.string_constants[node.value], None
            assert self.snippet is not None
            if node.value in self.snippet.params:
                return None, node.value
        return None, None

    def _add_env_read(self, node: cst.CSTNode, var: str | None, var_param: str | None, via: str, default: str | None) -> None:
        s = self.snippet
        assert s is not None
        target = s.assign_target
        if target is not None and "." in target and not target.startswith("self."):
            target = None
        code, col, end_col = self._code(node)
        line, end_line = s.line, s.end_line
        if self.in_lambda and s.function is None and line != end_line:
            # an entry of a module's table of getters (`{"X": lambda: os.getenv("X"), ...}`) is
            # where its switch is read, not the table's first line
            line, end_line, col, end_col = self._own_span(node)
        self.env_reads.append(
            EnvRead(
                var=var, var_param=var_param, via=via, default=default, function=s.function,
                line=line, end_line=end_line, per_call=not s.once, assigned_to=target,
                gates=self.gates, loop_depth=s.loop_depth, code=code, loop_iter=s.loop_iter, col=col, end_col=end_col,
                wrapped_by=tuple(f"{p.callee}:{p.mode or 'r'}" if p.role == "open" else p.callee
                                 for p in reversed(self.pending) if p.role != "env" and p.callee != "?"),
                path_kind=s.path_kind, path_reason=s.path_reason,  # type: ignore[arg-type]
                **self._value_use(node),
            )
        )
        if var and default and "/" in default and _OUTPUT_VAR.search(var):
            self.literal_paths.append((s.line, default, col, end_col))

    def _env_call(self, node: cst.Call, callee: str) -> bool:
        via = self.rs.env_calls.get(callee)
        if via is not None and callee.endswith(".pop") and node is self.discarded:
            return True  # removes the variable: a write whose value no one reads
        if via is not None:
            key = node.args[0].value if node.args and node.args[0].keyword is None else None
            default = node.args[1].value if len(node.args) > 1 and node.args[1].keyword is None else None
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value in ("default", "value"):
                    default = arg.value
                if arg.keyword is not None and arg.keyword.value in ("key", "varname"):
                    key = arg.value
            var, var_param = self._env_key(key)
            self._add_env_read(node, var, var_param, via, _literal_text(default))
            return True
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute):
            registry = self.method_registries.get(self.dotted(func.value.value) or "")
            if registry is not None and func.attr.value in registry.methods:
                self.skip_nodes.add(id(func.value))
                registry_default = _literal_text(node.args[0].value) if node.args else None
                self._add_env_read(node, func.value.attr.value, None, f"registry:{registry.id}", registry_default)
                return True
        return False

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if id(node) in self.skip_nodes or len(node.slice) != 1 or self.dotted(node.value) not in self.rs.env_mappings:
            return
        index = node.slice[0].slice
        if isinstance(index, cst.Index):
            var, var_param = self._env_key(index.value)
            self._add_env_read(node, var, var_param, "os.environ[]", None)

    def visit_Del(self, node: cst.Del) -> None:
        targets = [e.value for e in node.target.elements] if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
        for target in targets:
            if isinstance(target, cst.Subscript):
                self.skip_nodes.add(id(target))  # del os.environ["X"] removes, not reads

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, cst.Subscript):
            self.skip_nodes.add(id(node.target))  # os.environ["X"] = ... sets, not reads

    def _level(self, target: cst.ComparisonTarget, active: bool, mirrored: bool = False) -> str:
        """``GateRef.level`` of the left side of a comparison with one operator (of its right
        side, ``mirrored``): the least int it holds (or fails, not ``active``) from."""
        other = target.comparator
        if isinstance(other, cst.Integer):
            try:
                base = str(int(other.value, 0))
            except ValueError:
                return ""
        elif isinstance(other, cst.Name) and self.snippet is not None and other.value in self.snippet.params:
            base = f"param:{other.value}"
        elif isinstance(target.operator, cst.Equal) and (_literal_str(other) or "").isdigit():
            base = str(int(_literal_str(other) or "0"))  # `getenv("X", "0") == "2"`: the string of a level
        else:
            return ""
        op = target.operator.__class__
        if mirrored:
            op = _MIRRORED_CST.get(op, op)
        if base == "0" and (active and op is cst.NotEqual or not active and op is cst.Equal):
            return "1"  # `X != 0`: from level 1
        if active and op in (cst.GreaterThanEqual, cst.Equal) or not active and op is cst.LessThan:
            return base
        if active and op is cst.GreaterThan or not active and op is cst.LessThanEqual:
            return f"{base}+1" if base.startswith("param:") else str(int(base) + 1)
        return ""

    def _value_use(self, node: cst.CSTNode) -> _ValueUse:
        """``EnvRead.level`` and ``EnvRead.used_as`` of a read: what the comparison, the
        conditional expression or the arithmetic it is an operand of (through conversions
        and `not`) does with its value."""
        out: _ValueUse = {}
        inner = node
        for around in reversed(self.around):
            if isinstance(around, cst.Comparison):
                if len(around.comparisons) != 1:
                    break
                target = around.comparisons[0]
                if _unwrap(around.left) is inner:
                    out["level"] = self._level(target, True)
                elif _unwrap(target.comparator) is inner:
                    left = cst.ComparisonTarget(operator=target.operator, comparator=around.left)
                    out["level"] = self._level(left, True, mirrored=True)
                else:
                    break
                inner = around  # `x if X > 0 else y` still chooses by the value
            elif isinstance(around, cst.IfExp):
                if _unwrap(around.test) is inner and not self._in_message():
                    # a branch that is a call or a method picks what runs (`Tracer()`, `logger.info`)
                    picked = [self.dotted(b.func if isinstance(b, cst.Call) else b) or "?"
                              for b in (around.body, around.orelse) if isinstance(b, (cst.Call, cst.Attribute))]
                    out["used_as"] = f"choice:{picked[0]}" if picked else "choice"
                break
            elif isinstance(around, cst.BinaryOperation):
                if _unwrap(around.left) is inner:
                    other = around.right
                elif _unwrap(around.right) is inner:
                    other = around.left
                else:
                    break
                if _arithmetic(around.operator, other, _converted(around, node)) and not self._in_message():
                    out["used_as"] = "arithmetic"
                break
        if not out.get("level"):
            out.pop("level", None)
        return out

    def _in_message(self) -> bool:
        """Whether the current node builds the text of a message: inside an f-string or the
        arguments of an emitter or a formatting call (`"ROCm: {}".format("on" if X else "off")`)."""
        return bool(self.in_text) or any(
            p.role in EMITTER_ROLES or p.callee.rsplit(".", 1)[-1] in _TEXT_CALLS for p in self.pending)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.in_lambda += 1

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.in_lambda -= 1

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.in_text += 1

    def leave_FormattedString(self, original_node: cst.FormattedString) -> None:
        self.in_text -= 1

    def leave_Comparison(self, original_node: cst.Comparison) -> None:
        self.around.pop()

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self.around.append(node)

    def leave_BinaryOperation(self, original_node: cst.BinaryOperation) -> None:
        self.around.pop()

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self.around.append(node)
        left = node.left
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)) and self.dotted(target.comparator) in self.rs.env_mappings:
                var, var_param = self._env_key(left)
                self._add_env_read(node, var, var_param, "in os.environ", None)
            left = target.comparator

    def visit_Attribute(self, node: cst.Attribute) -> None:
        owner = node.value
        tail = owner.attr.value if isinstance(owner, cst.Attribute) else owner.value if isinstance(owner, cst.Name) else None
        if tail not in self.registry_tails or id(node) in self.skip_nodes:
            return
        registry = self.attr_registries.get(self.dotted(node.value) or "")
        if registry is not None and re.match(registry.name_pattern, node.attr.value):
            self._add_env_read(node, node.attr.value, None, f"registry:{registry.id}", None)

    # ---------------------------------------------------------------- calls
    def _role(self, node: cst.Call, callee: str) -> tuple[str | None, str | None, str]:
        """(role, level, resolution) of a call."""
        rs = self.rs
        receiver, _, method = callee.rpartition(".")
        raw_receiver = self.raw_dotted(node.func.value) if isinstance(node.func, cst.Attribute) else None
        if method in rs.log_methods and receiver and not (self.snippet is not None and raw_receiver in self.snippet.loop_bound):
            exact = (receiver in rs.logging_modules or raw_receiver in self.logger_names
                     or receiver.removesuffix("()") in rs.logger_factories and receiver.endswith("()"))
            if exact or raw_receiver in rs.logger_receivers or (raw_receiver or "").lower().endswith("logger"):
                level = rs.log_methods[method]
                return "log", self._dynamic_level(node) if level == "dynamic" else level, "exact" if exact else "heuristic"
        if callee in rs.print_calls:
            return "print", None, "exact"
        if callee in rs.stdwrite_calls:
            return "stdwrite", None, "exact"
        if callee in rs.dump_calls:
            return rs.dump_calls[callee], None, "exact"
        if callee in rs.open_functions:
            return "open", None, "exact"
        if method == "write" and raw_receiver is not None:
            if raw_receiver in self.handles:
                return "write", None, "exact"
            if raw_receiver in rs.file_handle_names:
                return "write", None, "heuristic"
        if method == "flush" and raw_receiver is not None and raw_receiver not in ("sys.stdout", "sys.stderr"):
            return "flush", None, "exact" if raw_receiver in self.handles else "heuristic"
        if method == "flush" and _getter_call(node.func) is not None:
            return "flush", None, "heuristic"  # `_get().flush()`: the handle a getter returns
        if callee in rs.sync_functions:
            return "sync", None, "exact"
        # on host data the call copies no device memory: a call of its own, no sync (it
        # still marks its function as holding a fact, for duplicated helpers)
        if method in rs.sync_methods and receiver and not node.args:
            if receiver.split(".")[0] not in rs.not_tensor_receivers:
                return ("host-sync" if self._host(node.func) else "sync"), None, "heuristic"
        if method == "to" and rs.sync_to_cpu and any(_literal_str(a.value) == "cpu" for a in node.args):
            return ("host-sync" if self._host(node.func) else "sync"), None, "heuristic"
        if callee in rs.timestamp_calls or (method == "strftime" and ("datetime" in receiver or "now" in receiver)):
            return "timestamp", None, "exact"
        return None, None, "exact"

    def _dynamic_level(self, node: cst.Call) -> str:
        if node.args:
            name = (self.dotted(node.args[0].value) or "").rsplit(".", 1)[-1].lower()
            if name in self.rs.levels:
                return name
        return "dynamic"

    def visit_Call(self, node: cst.Call) -> None:
        callee = self.dotted(node.func)
        if callee is None and isinstance(node.func, cst.Attribute):
            callee = f"<expr>.{node.func.attr.value}"  # `(a * b).sum().item()`
        if callee:
            for pending in self.pending:
                pending.arg_calls.append(callee)
        if callee is None:
            self.pending.append(_Pending("?", None))
            return
        if self._env_call(node, callee):
            self.pending.append(_Pending(callee, "env"))
            return
        role, _, _ = self._role(node, callee)
        mode = _open_mode(node) if role == "open" else None
        self._output_path(node, callee, role, mode)
        self.pending.append(_Pending(callee, role, mode=mode))

    def _output_path(self, node: cst.Call, callee: str, role: str | None, mode: str | None) -> None:
        """A literal output location written by an open for writing, a dump, a makedirs or a
        writing method of a path (`Path(".run").mkdir()`), where the call is."""
        path_arg: cst.BaseExpression | None = None
        if callee in self.rs.makedirs_functions or role == "dump" or role == "open" and (mode or "r")[:1] in "wax":
            path_arg = _path_argument(node, callee, role, self.rs)
        elif isinstance(node.func, cst.Attribute) and role is None:
            method = node.func.attr.value
            if method in _PATH_WRITERS or method == "open" and (_open_mode(node, 0) or "r")[:1] in "wax":
                path_arg = node.func.value
        head = self.path_head(path_arg) if path_arg is not None else None
        if head is not None and is_output_literal(head[0]):
            assert self.snippet is not None and path_arg is not None
            _, col, end_col = self._code(path_arg)
            self.literal_paths.append((self.snippet.line, head[0], col, end_col))

    def leave_Call(self, original_node: cst.Call) -> None:
        pending = self.pending.pop()
        if pending.role == "env" or pending.callee == "?":
            return
        if pending.role == "timestamp":
            if self.timestamp_seen:
                return  # `datetime.now().strftime(...)`: one timestamp per statement
            self.timestamp_seen = True
        role, level, resolution = self._role(original_node, pending.callee)
        if role is None and not may_reach_tree(self.raw_dotted(original_node.func), self.aliases, self.shadowed):
            return
        self._record(original_node, pending.callee, role, level, resolution, pending.arg_calls)

    def _record(self, node: cst.Call, callee: str, role: str | None, level: str | None,
                resolution: str, arg_calls: list[str]) -> None:
        s = self.snippet
        assert s is not None
        mode, line_buffered, bound_to = None, False, None
        if role == "open":
            mode = _literal_str(node.args[1].value) if len(node.args) > 1 and node.args[1].keyword is None else None
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "mode":
                    mode = _literal_str(arg.value)
                if arg.keyword is not None and arg.keyword.value == "buffering":
                    line_buffered = _literal_text(arg.value) == "1"
            if len(node.args) > 2 and node.args[2].keyword is None:
                line_buffered = _literal_text(node.args[2].value) == "1"
            bound_to = s.assign_target
            if bound_to:
                self.handles.add(bound_to)
        path_pattern = None
        if role == "open" and (mode or "r")[:1] in "wax" and node.args:
            path_pattern = self.path_pattern(node.args[0].value)
        elif role == "dump" and node.args:
            path_arg = _path_argument(node, callee, role, self.rs)
            if path_arg is not None:
                path_pattern = self.path_pattern(path_arg)
        code, col, end_col = self._code(node)
        path_kind, path_reason = s.path_kind, s.path_reason
        if path_kind == "normal" and role == "log" and level == "once" and _constant_message(node):
            path_kind, path_reason = "rare", ONCE_REASON
        elif path_kind == "normal" and role == "log" and level in PROBLEM_LEVELS and s.in_branch:
            path_kind, path_reason = "rare", CONDITIONAL_PROBLEM_REASON.format(level)
        self.calls.append(
            CallSite(
                callee=callee, function=s.function, line=s.line, end_line=s.end_line, gates=self.gates,
                loop_depth=s.loop_depth, loop_iter=s.loop_iter,
                literal_args=tuple(_literal_str(a.value) for a in node.args[:4] if a.keyword is None),
                int_args=_int_args([a.value for a in node.args[:4] if a.keyword is None]),
                eager=_eager_kinds(node, self.rs, self.dotted, role == "log"), arg_calls=tuple(dict.fromkeys(arg_calls)),
                role=role, level=level, resolution=resolution,  # type: ignore[arg-type]
                in_emitter_args=any(p.role in EMITTER_ROLES for p in self.pending),
                receiver=self._receiver(node.func),
                mode=mode, line_buffered=line_buffered,
                builds_path=s.builds_path or any(p.callee in self.rs.path_builders or p.callee.endswith("os.path.join") for p in self.pending),
                bound_to=bound_to, code=code, path_pattern=path_pattern, col=col, end_col=end_col,
                path_kind=path_kind, path_reason=path_reason,  # type: ignore[arg-type]
                on_param=self._param_root(node.func) if role == "sync" else "",
            )
        )


#: node fields that never hold an expression or statement: layout, punctuation, operators
_TRIVIA_FIELDS = frozenset({
    "lpar", "rpar", "comma", "equal", "semicolon", "dot", "colon", "star", "operator", "newline", "leading_lines",
    "trailing_whitespace", "lines_after_decorators", "header", "footer", "lbracket", "rbracket", "lbrace", "rbrace",
    "whitespace_before_colon", "whitespace_after_colon", "asynchronous", "await_",
})


class _NodeClasses(dict):
    """class -> whether it is a libcst node class (``isinstance`` against the abstract
    ``CSTNode`` runs Python code per check; this is a dict lookup)."""

    def __missing__(self, cls: type) -> bool:
        self[cls] = is_node = issubclass(cls, cst.CSTNode)
        return is_node


_IS_NODE = _NodeClasses()

#: node class -> (its visit_ method name or None, its leave_ method name or None, the fields to enter)
_WALK_PLANS: dict[type, tuple[str | None, str | None, tuple[str, ...]]] = {}

_MIRRORED_CST: dict[type, type] = {
    cst.LessThan: cst.GreaterThan, cst.GreaterThan: cst.LessThan,
    cst.LessThanEqual: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.LessThanEqual,
}
#: calls that build text: a value picked or computed in their arguments is part of a message
_TEXT_CALLS = frozenset({"format", "join", "print", "write", "repr"})
#: calls whose result is still the value they are given, as a number, a flag or a string
_CONVERSIONS = frozenset({"int", "float", "bool", "str"})
#: operators that compute only with numbers (`+`, `%` and `/` also join strings and paths)
_NUMBER_ONLY_OPERATORS = (cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Power, cst.LeftShift, cst.RightShift)
_STRINGS = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)


def _unwrap(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` without the conversions and `not` around it (`int(getenv(...))`, `not X`)."""
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _CONVERSIONS and len(node.args) == 1:
            node = node.args[0].value
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            node = node.expression
        else:
            return node


def _converted(around: cst.BinaryOperation, node: cst.CSTNode) -> bool:
    """Whether the read is made a number before the operator takes it (`int(getenv(...)) + 1`)."""
    for side in (around.left, around.right):
        if isinstance(side, cst.Call) and isinstance(side.func, cst.Name) and side.func.value in ("int", "float") and _unwrap(side) is node:
            return True
    return False


def _arithmetic(operator: cst.BaseBinaryOp, other: cst.BaseExpression, number: bool) -> bool:
    """Whether a binary operation computes with numbers: an operator that only numbers
    have, or one that strings and paths share (`+`, `%`, `/`) with a number on either side."""
    if isinstance(other, _STRINGS):
        return False
    if isinstance(operator, _NUMBER_ONLY_OPERATORS):
        return True
    return number or isinstance(other, (cst.Integer, cst.Float))


def _int_args(args: list[cst.BaseExpression]) -> tuple[int | None, ...]:
    """``CallSite.int_args``: int literals among the arguments, () when there is none."""
    values = tuple(int(t) if (t := _arg_text(a)) and isinstance(a, cst.Integer) else None for a in args)
    return values if any(v is not None for v in values) else ()


def _arg_text(node: cst.BaseExpression) -> str:
    """A call gate's argument as ``GateRef.args`` keeps it: a string or an int literal (a
    switch name, a level: `_diag("X", 2)`), "" for anything else."""
    if isinstance(node, cst.Integer):
        try:
            return str(int(node.value, 0))
        except ValueError:
            return ""
    return _literal_str(node) or ""


def _walk_plan(cls: type) -> tuple[str | None, str | None, tuple[str, ...]]:
    visit, leave = f"visit_{cls.__name__}", f"leave_{cls.__name__}"
    fields = tuple(
        f.name for f in dataclasses.fields(cls)
        if f.name not in _TRIVIA_FIELDS and not f.name.startswith("whitespace")
    )
    return (visit if visit in vars(StatementFacts) else None, leave if leave in vars(StatementFacts) else None, fields)


def _open_mode(node: cst.Call, position: int = 1) -> str | None:
    """open()'s literal mode, positional (``position``: 0 for `Path.open`) or ``mode=``."""
    for index, arg in enumerate(node.args):
        if (arg.keyword is None and index == position) or (arg.keyword is not None and arg.keyword.value == "mode"):
            return _literal_str(arg.value)
    return None


def _getter_call(func: cst.BaseExpression) -> str | None:
    """`_get` of a method called on `_get()` (a call of a dotted name with no arguments)."""
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call) and not func.value.args:
        return StatementFacts.raw_dotted(func.value.func)
    return None


def _template_head(head: tuple[str, bool], placeholder: str) -> tuple[str, bool]:
    """A `%` or `.format` template's head: its text up to the first placeholder."""
    text = head[0]
    cut = text.find(placeholder)
    return (text[:cut], False) if cut >= 0 else (text, head[1])


def _final_expression(statement: cst.CSTNode, snippet: Snippet) -> tuple[cst.BaseExpression, Sequence[cst.CSTNode]] | None:
    """The expression a statement ends in, and the nodes before it: `logger.info(...)` (none),
    `x = f(...)` (the `x = ` target).  The module was parsed from the snippets' texts and
    libcst gives back its source exactly, so the expression's code is the snippet's text
    after the code of those nodes.  None when the expression is parenthesized, or there is
    a semicolon, comment or blank line around the statement, or the text holds a carriage
    return (the code libcst generates here may write such line breaks differently)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1 or statement.leading_lines:
        return None
    small, trailing = statement.body[0], statement.trailing_whitespace
    if isinstance(small, cst.Expr):
        before: Sequence[cst.CSTNode] = ()
    elif isinstance(small, cst.Assign):
        before = small.targets
    else:
        return None
    if (small.value.lpar or small.semicolon is not cst.MaybeSentinel.DEFAULT or trailing.whitespace.value
            or trailing.comment is not None or "\r" in snippet.text):
        return None
    return small.value, before


def _assigned_value(statement: cst.CSTNode) -> cst.BaseExpression | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            return small.value
    return None


def _path_argument(node: cst.Call, callee: str, role: str | None, rs: RuleSet) -> cst.BaseExpression | None:
    """The argument a call writes to: a dump's own (``dump_path_args`` in rules/emitters.yaml;
    for a dump not listed there, its first argument that starts with a literal path), else the first."""
    positional = [arg.value for arg in node.args if arg.keyword is None]
    if role == "dump":
        index = rs.dump_path_args.get(callee)
        if index is None:
            return next((value for value in positional if _path_prefix(value)), positional[0] if positional else None)
        return positional[index] if len(positional) > index else None
    return positional[0] if positional else None


def _eager_kinds(node: cst.Call, rs: RuleSet, dotted, log: bool = False) -> tuple[str, ...]:
    """Formatting done in the arguments before the callee can decide to drop it; in a log
    record's message, ``+`` of names (``prefix + detail``) joins strings too."""
    kinds: list[str] = []
    for index, arg in enumerate(node.args):
        value = arg.value
        if log and index == 0 and arg.keyword is None and _joins_names(value):
            kinds.append("concat")
            continue
        if _has_fstring(value):
            kinds.append("f-string")
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "format" and isinstance(
            value.func.value, (cst.SimpleString, cst.ConcatenatedString)
        ):
            kinds.append("format")
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Modulo) and isinstance(
            value.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
        ):
            kinds.append("percent")
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add) and _has_string(value):
            kinds.append("concat")
        elif isinstance(value, cst.Call) and dotted(value.func) in rs.eager_calls:
            kinds.append(dotted(value.func))
    return tuple(dict.fromkeys(kinds))


def _constant_message(node: cst.Call) -> bool:
    """A record whose every positional argument has the same value each time the line runs:
    `*_once` methods deduplicate by message and arguments (an lru_cache over both), so such a
    record is emitted once per process, while one whose arguments change per call is emitted
    again for each new value."""
    return bool(node.args) and all(_site_constant(a.value) for a in node.args if a.keyword is None)


#: a module constant by its name (PEP 8): bound once at import
_CONSTANT_NAME = re.compile(r"^_*[A-Z][A-Z0-9_]*$")
#: calls that give the same value for the same argument
_PURE_CALLS = frozenset({"str", "repr", "type", "len", "int", "float", "bool"})


def _site_constant(node: cst.BaseExpression) -> bool:
    """The same value every time this line runs: a literal, a module constant (UPPER_CASE), a
    configuration attribute (`self.model_config.dtype`: a segment named like `config`, set up
    before serving), a class or function name (`type(self).__name__`), or a pure builtin of one."""
    if _literal_text(node) is not None:
        return True
    if isinstance(node, cst.Name):
        return _CONSTANT_NAME.match(node.value) is not None
    if isinstance(node, cst.Attribute):
        if node.attr.value in ("__name__", "__qualname__"):
            return True
        parts: list[str] = [node.attr.value]
        value: cst.BaseExpression = node.value
        while isinstance(value, cst.Attribute):
            parts.append(value.attr.value)
            value = value.value
        if isinstance(value, cst.Name):
            parts.append(value.value)
        return any("config" in part.lower() for part in parts[1:]) or _site_constant(value) and isinstance(value, cst.Name)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _PURE_CALLS:
        return bool(node.args) and all(_site_constant(a.value) for a in node.args)
    if isinstance(node, cst.FormattedString):  # `f"deprecated"`, `f"model {MODEL}"`
        return all(_site_constant(p.expression) for p in node.parts if isinstance(p, cst.FormattedStringExpression))
    if isinstance(node, cst.ConcatenatedString):
        return _site_constant(node.left) and _site_constant(node.right)
    return False


def _has_fstring(node: cst.BaseExpression) -> bool:
    """An f-string, alone or among adjacent literals (`"a " f"{x}" f"{y}"` nests to the right)."""
    if isinstance(node, cst.FormattedString):
        return True
    if isinstance(node, cst.ConcatenatedString):
        return _has_fstring(node.left) or _has_fstring(node.right)
    return False


def _joins_names(node: cst.BaseExpression) -> bool:
    """``a + b`` (+ ...) over names, attributes, subscripts and calls: a log message is a string."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)):
        return False
    leaves = (node.left, node.right)
    return all(_joins_names(leaf) or isinstance(leaf, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) for leaf in leaves)


def _has_string(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return _has_string(node.left) or _has_string(node.right)
    return False


#: how much statement text one libcst parse takes: its working set (the native parser's and
#: the tree's) grows with the text, so a file's statements are parsed and walked in pieces
_PIECE_CHARS = 1 << 16


def _pieces(snippets: tuple[Snippet, ...]) -> list[tuple[Snippet, ...]]:
    """Runs of consecutive snippets whose text stays within ``_PIECE_CHARS`` (a longer
    snippet is a piece of its own)."""
    pieces: list[tuple[Snippet, ...]] = []
    start, size = 0, 0
    for i, s in enumerate(snippets):
        if size and size + len(s.text) > _PIECE_CHARS:
            pieces.append(snippets[start:i])
            start, size = i, 0
        size += len(s.text) + 1
    if start < len(snippets):
        pieces.append(snippets[start:])
    return pieces


def _parse_snippets(snippets: tuple[Snippet, ...]) -> list[tuple[cst.CSTNode, Snippet]]:
    """One libcst parse for the snippets of a piece; a snippet libcst cannot parse is parsed (and dropped) alone."""
    source = "\n".join(s.text for s in snippets) + "\n"
    try:
        module = cst.parse_module(source)
        if len(module.body) == len(snippets):
            return [(stmt, s) for stmt, s in zip(module.body, snippets)]
    except cst.ParserSyntaxError:
        pass
    pairs: list[tuple[cst.CSTNode, Snippet]] = []
    for s in snippets:
        try:
            body = cst.parse_module(s.text + "\n").body
        except cst.ParserSyntaxError:
            continue
        if len(body) == 1:
            pairs.append((body[0], s))
    return pairs


def collect_facts(snippets: tuple[Snippet, ...], rs: RuleSet, aliases: dict[str, str],
                  logger_names: frozenset[str], string_constants: dict[str, str],
                  shadowed: frozenset[str] = frozenset(),
                  param_defaults: dict[str, dict[str, str]] | None = None) -> StatementFacts:
    module = cst.Module(body=[])
    walker = StatementFacts(module, rs, aliases, logger_names, string_constants, shadowed, param_defaults)
    for piece in _pieces(snippets):
        # a piece's tree is dropped once walked: the facts hold text, never nodes
        for statement, snippet in _parse_snippets(piece):
            walker.walk(statement, snippet)
    return walker
