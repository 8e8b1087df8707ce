"""The libcst walker: env reads, emitters, syncs and the gates around them.

One parse and one walk per file.  Context is kept on stacks (function scope,
gates, loops, enclosing calls), never in yes/no flags: an ``else`` branch is the
negated test, the rest of a block after ``if C: return`` is gated by ``not C``,
``C and f()`` gates ``f()`` by ``C``.  Output is plain frozen facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from cs_audit.model import CallSite, EnvRead, GateRef
from cs_audit.ruleset import RuleSet

EMITTER_ROLES = frozenset({"log", "print", "stdwrite", "write", "dump"})
_MAX_GATE_REFS = 8
_MAX_CODE = 160
_CONVERSIONS = frozenset({"int", "float", "bool", "str", "len", "abs", "min", "max"})
_TERMINAL = (cst.Return, cst.Raise, cst.Continue, cst.Break)
_LOW_OPS = (cst.LessThan, cst.LessThanEqual)
_PATH_TARGET = re.compile(r"(?i)(dir|path|root|run|file|out)")
_OUTPUT_VAR = re.compile(r"(?i)(_DIR|_PATH|_ROOT|_FILE|OUT_ROOT|OUTPUT)$")


def _literal_str(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd escapes: treat as not a literal
            return None
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = _literal_str(node.left), _literal_str(node.right)
        return None if left is None or right is None else left + right
    return None


def _literal_text(node: cst.BaseExpression | None) -> str | None:
    """A literal default as text: strings unquoted, numbers and names as written."""
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


def _squash(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_CODE else text[: _MAX_CODE - 1] + "…"


@dataclass
class _PendingCall:
    callee: str
    role: str | None
    arg_calls: list[str] = field(default_factory=list)


class FactCollector(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(
        self,
        module: cst.Module,
        rs: RuleSet,
        aliases: dict[str, str],
        logger_names: frozenset[str],
        string_constants: dict[str, str],
    ) -> None:
        super().__init__()
        self.module = module
        self.rs = rs
        self.aliases = dict(aliases)
        self.logger_names = logger_names
        self.string_constants = string_constants
        self.env_reads: list[EnvRead] = []
        self.calls: list[CallSite] = []
        self.literal_paths: list[tuple[int, str]] = []
        self.scope: list[tuple[str, str]] = []
        self.function_stack: list[tuple[str, str, tuple[str, ...], bool]] = []  # qualname, name, params, once
        self.gates: list[GateRef] = []
        self.loop_depths: list[int] = [0]
        self.pending: list[_PendingCall] = []
        self.assign_targets: list[str | None] = []
        self.with_targets: list[str | None] = []
        self.handles: dict[str, bool] = {}  # handle text -> line buffered
        self.stmt_builds_path: list[bool] = []
        self.stmt_timestamps: list[list[tuple[cst.Call, str]]] = []
        self.skip_nodes: set[int] = set()
        self.registry_attr_objects = {r.object: r for r in rs.registries if r.access == "attribute"}
        self.registry_method_objects = {r.object: r for r in rs.registries if r.access == "method"}

    # helpers ---------------------------------------------------------------
    def _pos(self, node: cst.CSTNode) -> tuple[int, int]:
        pos = self.get_metadata(PositionProvider, node)
        return pos.start.line, pos.end.line

    def _code(self, node: cst.CSTNode) -> str:
        return _squash(self.module.code_for_node(node))

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

    def _raw_dotted(self, node: cst.BaseExpression) -> str | None:
        """Dotted text without alias resolution (`self._fh`, `logger`)."""
        parts: list[str] = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name):
            return None
        parts.append(node.value)
        return ".".join(reversed(parts))

    @property
    def function(self) -> str | None:
        return self.function_stack[-1][0] if self.function_stack else None

    @property
    def per_call(self) -> bool:
        return bool(self.function_stack) and not self.function_stack[-1][3]

    def _qualname(self, name: str) -> str:
        parts: list[str] = []
        for kind, scope_name in self.scope:
            parts.append(scope_name)
            if kind == "def":
                parts.append("<locals>")
        parts.append(name)
        return ".".join(parts)

    def _visit_children(self, nodes) -> None:
        for node in nodes:
            if node is not None:
                node.visit(self)

    # scopes ------------------------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.scope.append(("class", node.name.value))
        self._visit_children(node.bases)
        node.body.visit(self)
        self.scope.pop()
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        qualname = self._qualname(node.name.value)
        params = tuple(
            p.name.value
            for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)
        )
        decorators = {self.dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) for d in node.decorators}
        once = node.name.value in self.rs.once_functions or bool(decorators & self.rs.once_decorators)
        self._visit_children(d.decorator for d in node.decorators)
        self.scope.append(("def", node.name.value))
        self.function_stack.append((qualname, node.name.value, params, once))
        saved_gates, self.gates = self.gates, []
        self.loop_depths.append(0)
        node.body.visit(self)
        self.loop_depths.pop()
        self.gates = saved_gates
        self.function_stack.pop()
        self.scope.pop()
        return False

    # blocks, gates and loops --------------------------------------------------
    def _visit_block(self, statements) -> None:
        pushed = 0
        for stmt in statements:
            stmt.visit(self)
            if isinstance(stmt, cst.If) and stmt.orelse is None and _ends_in_exit(stmt.body):
                refs = self.gate_refs(stmt.test, active_when_set=False)
                self.gates.extend(refs)
                pushed += len(refs)
        if pushed:
            del self.gates[-pushed:]

    def visit_Module(self, node: cst.Module) -> bool:
        self._visit_block(node.body)
        return False

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        self._visit_block(node.body)
        return False

    def _gated(self, refs: list[GateRef], body: cst.CSTNode | None) -> None:
        if body is None:
            return
        self.gates.extend(refs)
        body.visit(self)
        if refs:
            del self.gates[-len(refs):]

    def visit_If(self, node: cst.If) -> bool:
        node.test.visit(self)
        self._gated(self.gate_refs(node.test, True), node.body)
        self._gated(self.gate_refs(node.test, False), node.orelse)
        return False

    def visit_While(self, node: cst.While) -> bool:
        node.test.visit(self)
        self.loop_depths[-1] += 1
        self._gated(self.gate_refs(node.test, True), node.body)
        self.loop_depths[-1] -= 1
        if node.orelse is not None:
            node.orelse.visit(self)
        return False

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        node.test.visit(self)
        self._gated(self.gate_refs(node.test, True), node.body)
        self._gated(self.gate_refs(node.test, False), node.orelse)
        return False

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> bool:
        node.left.visit(self)
        self._gated(self.gate_refs(node.left, isinstance(node.operator, cst.And)), node.right)
        return False

    def _loop(self, iterable: cst.CSTNode | None, body: cst.CSTNode, orelse: cst.CSTNode | None = None) -> None:
        if iterable is not None:
            iterable.visit(self)
        self.loop_depths[-1] += 1
        body.visit(self)
        self.loop_depths[-1] -= 1
        if orelse is not None:
            orelse.visit(self)

    def visit_For(self, node: cst.For) -> bool:
        node.target.visit(self)
        self._loop(node.iter, node.body, node.orelse)
        return False

    def _visit_comp(self, node: cst.BaseComp, *elements: cst.CSTNode) -> bool:
        comp = node.for_in
        comp.iter.visit(self)
        self.loop_depths[-1] += 1
        for element in elements:
            element.visit(self)
        inner = comp.inner_for_in
        if inner is not None:
            inner.visit(self)
        self._visit_children(comp.ifs)
        self.loop_depths[-1] -= 1
        return False

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return self._visit_comp(node, node.elt)

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        return self._visit_comp(node, node.elt)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return self._visit_comp(node, node.elt)

    def visit_DictComp(self, node: cst.DictComp) -> bool:
        return self._visit_comp(node, node.key, node.value)

    # statements carrying context for the calls inside them ---------------------
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.stmt_builds_path.append(False)
        self.stmt_timestamps.append([])

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        builds_path = self.stmt_builds_path.pop()
        timestamps = self.stmt_timestamps.pop()
        if timestamps:  # `datetime.now().strftime(...)`: one timestamp per statement
            call, callee = timestamps[-1]
            self._record_call(call, callee, "timestamp", builds_path=builds_path)

    def _note_target(self, targets: list[cst.BaseExpression]) -> str | None:
        if len(targets) != 1:
            return None
        target = targets[0]
        if isinstance(target, cst.Subscript):
            self.skip_nodes.add(id(target))
        text = self._raw_dotted(target)
        if text and self.stmt_builds_path and _PATH_TARGET.search(text.rsplit(".", 1)[-1]):
            self.stmt_builds_path[-1] = True
        return text

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assign_targets.append(self._note_target([t.target for t in node.targets]))
        for t in node.targets:
            if isinstance(t.target, cst.Subscript):
                self.skip_nodes.add(id(t.target))
        value = self.dotted(node.value) if isinstance(node.value, (cst.Name, cst.Attribute)) else None
        if value in self.rs.env_mappings or value in self.rs.env_calls:
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self.aliases[t.target.value] = value

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self.assign_targets.pop()

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.assign_targets.append(self._raw_dotted(node.target))

    def leave_AnnAssign(self, original_node: cst.AnnAssign) -> None:
        self.assign_targets.pop()

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Subscript):
            self.skip_nodes.add(id(node.target))

    def visit_Del(self, node: cst.Del) -> None:
        if isinstance(node.target, cst.Subscript):
            self.skip_nodes.add(id(node.target))

    def visit_WithItem(self, node: cst.WithItem) -> bool:
        target = self._raw_dotted(node.asname.name) if node.asname and isinstance(node.asname.name, (cst.Name, cst.Attribute)) else None
        self.with_targets.append(target)
        node.item.visit(self)
        self.with_targets.pop()
        return False

    # env reads -----------------------------------------------------------------
    def _env_key(self, node: cst.BaseExpression | None) -> tuple[str | None, str | None]:
        """(var, var_param) of the key expression of an env read."""
        if node is None:
            return None, None
        literal = _literal_str(node)
        if literal is not None:
            return literal, None
        if isinstance(node, cst.Name):
            if node.value in self.string_constants:
                return self.string_constants[node.value], None
            if self.function_stack and node.value in self.function_stack[-1][2]:
                return None, node.value
        return None, None

    def _add_env_read(self, node: cst.CSTNode, var: str | None, var_param: str | None, via: str, default: str | None) -> None:
        line, end = self._pos(node)
        target = self.assign_targets[-1] if self.assign_targets else None
        if target is not None and not (target.startswith("self.") or "." not in target):
            target = None
        if target is not None and "." not in target and self.function_stack:
            target = None  # a local variable, not a constant
        self.env_reads.append(
            EnvRead(
                var=var, var_param=var_param, via=via, default=default, function=self.function,
                line=line, end_line=end, per_call=self.per_call, assigned_to=target,
                gates=tuple(self.gates), loop_depth=self.loop_depths[-1], code=self._code(node),
            )
        )
        if var and default and "/" in default and _OUTPUT_VAR.search(var):
            self.literal_paths.append((line, default))

    def _env_call(self, node: cst.Call, callee: str) -> bool:
        via = self.rs.env_calls.get(callee)
        if via is not None:
            key = node.args[0].value if node.args else None
            default_node = node.args[1].value if len(node.args) > 1 else None
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value in ("default", "value"):
                    default_node = arg.value
                if arg.keyword is not None and arg.keyword.value in ("key", "varname"):
                    key = arg.value
            var, var_param = self._env_key(key)
            self._add_env_read(node, var, var_param, via, _literal_text(default_node))
            return True
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute):
            owner = self.dotted(func.value.value)
            registry = self.registry_method_objects.get(owner or "")
            if registry is not None and func.attr.value in registry.methods:
                self.skip_nodes.add(id(func.value))
                default = _literal_text(node.args[0].value) if node.args else None
                self._add_env_read(node, func.value.attr.value, None, f"registry:{registry.id}", default)
                return True
        return False

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if id(node) in self.skip_nodes or len(node.slice) != 1:
            return
        if self.dotted(node.value) in self.rs.env_mappings:
            index = node.slice[0].slice
            if isinstance(index, cst.Index):
                var, var_param = self._env_key(index.value)
                self._add_env_read(node, var, var_param, "os.environ[]", None)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        left = node.left
        for target in node.comparisons:
            if isinstance(target.operator, (cst.In, cst.NotIn)) and self.dotted(target.comparator) in self.rs.env_mappings:
                var, var_param = self._env_key(left)
                self._add_env_read(node, var, var_param, "in os.environ", None)
            left = target.comparator

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if id(node) in self.skip_nodes or not self.registry_attr_objects:
            return
        owner = self.dotted(node.value)
        registry = self.registry_attr_objects.get(owner or "")
        if registry is not None and re.match(registry.name_pattern, node.attr.value):
            self._add_env_read(node, node.attr.value, None, f"registry:{registry.id}", None)

    # gates -----------------------------------------------------------------------
    def gate_refs(self, expr: cst.BaseExpression, active_when_set: bool) -> list[GateRef]:
        refs: list[GateRef] = []
        self._collect_refs(expr, active_when_set, refs)
        return refs[:_MAX_GATE_REFS]

    def _collect_refs(self, expr: cst.BaseExpression, active: bool, out: list[GateRef]) -> None:
        if len(out) >= _MAX_GATE_REFS:
            return
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            self._collect_refs(expr.expression, not active, out)
        elif isinstance(expr, cst.BooleanOperation):
            self._collect_refs(expr.left, active, out)
            self._collect_refs(expr.right, active, out)
        elif isinstance(expr, cst.Comparison):
            self._comparison_refs(expr, active, out)
        elif isinstance(expr, cst.Call):
            self._call_ref(expr, active, out)
        elif isinstance(expr, cst.Subscript):
            if self.dotted(expr.value) in self.rs.env_mappings and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                var, param = self._env_key(expr.slice[0].slice.value)
                out.append(GateRef("env", var or f"param:{param}" if (var or param) else "?", (), active))
        elif isinstance(expr, (cst.Name, cst.Attribute)):
            self._name_ref(expr, active, out)
        elif isinstance(expr, (cst.NamedExpr,)):
            self._collect_refs(expr.value, active, out)

    def _comparison_refs(self, expr: cst.Comparison, active: bool, out: list[GateRef]) -> None:
        first = expr.comparisons[0]
        op = first.operator
        right = first.comparator
        if isinstance(op, (cst.In, cst.NotIn)) and self.dotted(right) in self.rs.env_mappings:
            var, param = self._env_key(expr.left)
            polarity = active if isinstance(op, cst.In) else not active
            out.append(GateRef("env", var or (f"param:{param}" if param else "?"), (), polarity))
            return
        low = isinstance(op, _LOW_OPS)
        literal = _literal_text(right)
        if isinstance(op, (cst.Equal, cst.Is)) and (literal in self.rs.off_values or literal in ("None", "False")):
            low = True
        if isinstance(op, (cst.NotEqual, cst.IsNot)) and literal is not None and literal not in self.rs.off_values and literal not in ("None", "False"):
            low = True
        if isinstance(op, cst.In) and isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            values = {_literal_text(e.value) for e in right.elements}
            low = bool(values) and values <= set(self.rs.off_values) | {"None", "False"}
        self._collect_refs(expr.left, active != low, out)
        if literal is None and not isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            # `level <= trace_level()`: the right side is high when the left is low
            self._collect_refs(right, active == low if isinstance(op, _LOW_OPS + (cst.GreaterThan, cst.GreaterThanEqual)) else active, out)

    def _call_ref(self, expr: cst.Call, active: bool, out: list[GateRef]) -> None:
        callee = self.dotted(expr.func)
        if callee is None:
            return
        if callee in _CONVERSIONS:
            for arg in expr.args:
                self._collect_refs(arg.value, active, out)
            return
        if callee in self.rs.env_calls:
            var, param = self._env_key(expr.args[0].value if expr.args else None)
            default = _literal_text(expr.args[1].value) if len(expr.args) > 1 else None
            # a switch that defaults on is not a gate for the "set" branch
            on_by_default = default is not None and default not in self.rs.off_values
            out.append(GateRef("env", var or (f"param:{param}" if param else "?"), (), active and not on_by_default))
            return
        method = callee.rsplit(".", 1)[-1]
        if method in self.rs.level_guards:
            out.append(GateRef("level", callee, (), active))
            return
        func = expr.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute):
            owner = self.dotted(func.value.value)
            registry = self.registry_method_objects.get(owner or "")
            if registry is not None and func.attr.value in registry.methods:
                out.append(GateRef("env", func.value.attr.value, (), active))
                return
        args = tuple(_literal_str(a.value) or "" for a in expr.args[:3])
        out.append(GateRef("call", callee, args, active))

    def _name_ref(self, expr: cst.Name | cst.Attribute, active: bool, out: list[GateRef]) -> None:
        owner = self.dotted(expr.value) if isinstance(expr, cst.Attribute) else None
        registry = self.registry_attr_objects.get(owner or "")
        if registry is not None and isinstance(expr, cst.Attribute):
            out.append(GateRef("env", expr.attr.value, (), active))
            return
        raw = self._raw_dotted(expr)
        if raw is None or raw in ("True", "False", "None"):
            return
        out.append(GateRef("name", self.aliases.get(raw, raw), (), active))

    # calls -----------------------------------------------------------------------
    def _role(self, node: cst.Call, callee: str) -> tuple[str | None, str | None, str]:
        """(role, level, resolution) of a call."""
        rs = self.rs
        receiver, _, method = callee.rpartition(".")
        raw_receiver = self._raw_dotted(node.func.value) if isinstance(node.func, cst.Attribute) else None
        if method in rs.log_methods and receiver:
            exact = receiver in rs.logging_modules or raw_receiver in self.logger_names
            if exact or raw_receiver in rs.logger_receivers or (raw_receiver or "").lower().endswith("logger"):
                level = rs.log_methods[method]
                if level == "dynamic":
                    level = self._dynamic_level(node)
                return "log", level, "exact" if exact else "heuristic"
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
        if callee in rs.sync_functions:
            return "sync", None, "exact"
        if method in rs.sync_methods and receiver and isinstance(node.func, cst.Attribute):
            root = receiver.split(".")[0]
            if root not in rs.not_tensor_receivers and not (method == "numpy" and not node.args == ()):
                return "sync", None, "heuristic"
        if method == "to" and rs.sync_to_cpu and any(_literal_str(a.value) == "cpu" for a in node.args):
            return "sync", None, "heuristic"
        if callee in rs.timestamp_calls or (method == "strftime" and "datetime" in receiver) or callee == "time.strftime":
            return "timestamp", None, "exact"
        return None, None, "exact"

    def _dynamic_level(self, node: cst.Call) -> str:
        if node.args:
            level = self.dotted(node.args[0].value) or ""
            name = level.rsplit(".", 1)[-1].lower()
            if name in self.rs.levels:
                return name
        return "dynamic"

    def visit_Call(self, node: cst.Call) -> bool:
        callee = self.dotted(node.func)
        for pending in self.pending:
            if callee:
                pending.arg_calls.append(callee)
        if callee is None:
            self.pending.append(_PendingCall("?", None))
            return True
        if self._env_call(node, callee):
            self.pending.append(_PendingCall(callee, "env"))
            return True
        role, _, _ = self._role(node, callee)
        if self.stmt_builds_path and (callee in self.rs.path_builders or callee.endswith("os.path.join")):
            self.stmt_builds_path[-1] = True
        if callee in self.rs.makedirs_functions or callee in self.rs.open_functions:
            path = _literal_str(node.args[0].value) if node.args else None
            mode = _literal_str(node.args[1].value) if len(node.args) > 1 else None
            if path and "/" in path and (callee in self.rs.makedirs_functions or (mode or "r")[0] in "wax"):
                self.literal_paths.append((self._pos(node)[0], path))
        self.pending.append(_PendingCall(callee, role))
        return True

    def leave_Call(self, original_node: cst.Call) -> None:
        pending = self.pending.pop()
        if pending.role == "env" or pending.callee == "?":
            return
        if pending.role == "timestamp" and self.stmt_timestamps:
            self.stmt_timestamps[-1].append((original_node, pending.callee))
            return
        role, level, resolution = self._role(original_node, pending.callee)
        if role is None and not self._may_reach_tree(original_node.func):
            return
        self._record_call(original_node, pending.callee, role, level=level, resolution=resolution, arg_calls=pending.arg_calls)

    def _may_reach_tree(self, func: cst.BaseExpression) -> bool:
        """Calls that may reach a function of the scanned tree (call-graph edges):
        `f()`, `self.f()`, `cls.f()`, `module.f()` through an import; not `x.append()`."""
        if isinstance(func, cst.Name):
            return True
        if not isinstance(func, cst.Attribute):
            return False
        root = func.value
        while isinstance(root, cst.Attribute):
            root = root.value
        return isinstance(root, cst.Name) and (root.value in ("self", "cls") or root.value in self.aliases)

    def _record_call(
        self, node: cst.Call, callee: str, role: str | None, *, level: str | None = None,
        resolution: str = "exact", arg_calls: list[str] | None = None, builds_path: bool = False,
    ) -> None:
        line, end = self._pos(node)
        raw_receiver = self._raw_dotted(node.func.value) if isinstance(node.func, cst.Attribute) else None
        mode = None
        line_buffered = False
        bound_to = None
        if role == "open":
            mode = _literal_str(node.args[1].value) if len(node.args) > 1 else None
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "mode":
                    mode = _literal_str(arg.value)
                if arg.keyword is not None and arg.keyword.value == "buffering":
                    line_buffered = _literal_text(arg.value) == "1"
            if len(node.args) > 2 and node.args[2].keyword is None:
                line_buffered = _literal_text(node.args[2].value) == "1"
            bound_to = (self.with_targets[-1] if self.with_targets else None) or (self.assign_targets[-1] if self.assign_targets else None)
            if bound_to:
                self.handles[bound_to] = line_buffered
        eager = _eager_kinds(node, role, self.rs, self.dotted)
        self.calls.append(
            CallSite(
                callee=callee, function=self.function, line=line, end_line=end, gates=tuple(self.gates),
                loop_depth=self.loop_depths[-1],
                literal_args=tuple(_literal_str(a.value) for a in node.args[:4] if a.keyword is None),
                eager=eager, arg_calls=tuple(dict.fromkeys(arg_calls or ())), role=role, level=level,
                resolution=resolution,  # type: ignore[arg-type]
                in_emitter_args=any(p.role in EMITTER_ROLES for p in self.pending),
                receiver=raw_receiver, mode=mode, line_buffered=line_buffered, builds_path=builds_path,
                bound_to=bound_to, code=self._code(node),
            )
        )


def _ends_in_exit(body: cst.BaseSuite) -> bool:
    if isinstance(body, cst.IndentedBlock):
        statements = body.body
        if not statements:
            return False
        last = statements[-1]
        if isinstance(last, cst.SimpleStatementLine):
            return bool(last.body) and isinstance(last.body[-1], _TERMINAL)
        return False
    if isinstance(body, cst.SimpleStatementSuite):
        return bool(body.body) and isinstance(body.body[-1], _TERMINAL)
    return False


def _eager_kinds(node: cst.Call, role: str | None, rs: RuleSet, dotted) -> tuple[str, ...]:
    """Formatting done in the arguments before the callee can decide to drop it."""
    kinds: list[str] = []
    for arg in node.args:
        value = arg.value
        if isinstance(value, cst.FormattedString):
            kinds.append("f-string")
        elif isinstance(value, cst.ConcatenatedString) and (
            isinstance(value.left, cst.FormattedString) or isinstance(value.right, cst.FormattedString)
        ):
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
        elif isinstance(value, cst.Call):
            callee = dotted(value.func)
            if callee in rs.eager_calls:
                kinds.append(callee)
    return tuple(dict.fromkeys(kinds))


def _has_string(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return _has_string(node.left) or _has_string(node.right)
    return False


def collect_facts(
    text: str, rs: RuleSet, aliases: dict[str, str], logger_names: frozenset[str], string_constants: dict[str, str]
) -> FactCollector:
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    collector = FactCollector(module, rs, aliases, logger_names, string_constants)
    wrapper.visit(collector)
    return collector
