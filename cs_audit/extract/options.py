"""The options a file declares, with their defaults: the annotated fields of settings classes
(dataclasses, pydantic and attrs models, classes named like `ParallelConfig`/`ServerArgs`) and
command-line arguments (`parser.add_argument("--enable-eplb", action="store_true")`).

Only what the source states is kept: a literal default, an empty `default_factory`, or a
dotted name the default is copied from (`enable_eplb: bool = ParallelConfig.enable_eplb`,
the same option declared again). ``joins.defaults`` decides gates with them."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from cs_audit.model import OptionDefault
from cs_audit.pyast import dotted_name
from cs_audit.ruleset import Defaults

#: a `default_factory` that makes an empty (falsy) value
_EMPTY_FACTORIES = {"list": "[]", "dict": "{}", "set": "set()", "tuple": "()", "str": "''", "int": "0", "float": "0.0", "bool": "False"}
#: the longest default kept as written (a longer literal is a table, not a switch value)
_MAX_VALUE = 80


def declared_options(tree: ast.Module, text: str, path: str,
                     defaults: Defaults | None) -> tuple[OptionDefault, ...]:
    """The options ``tree`` (of source ``text``) declares, in file order."""
    if defaults is None or defaults.ignore_paths.search(path):
        return ()
    out: list[OptionDefault] = []
    settings_module = defaults.module_paths.search(path) is not None
    # settings classes: at module level, under a module-level `if`/`try`, or nested in a class
    statements: list[ast.AST] = list(tree.body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.ClassDef):
            if _settings_class(node, defaults, settings_module):
                out.extend(_fields(node, path, defaults))
            statements.extend(node.body)
        elif isinstance(node, (ast.If, ast.Try)):
            statements.extend(node.body)
            statements.extend(node.orelse)
    if any(name in text for name in defaults.argument_calls):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in defaults.argument_calls:
                option = _argument(node, path)
                if option is not None:
                    out.append(option)
    return tuple(sorted(out, key=lambda o: (o.line, o.name)))


#: an attribute store on another object (`cfg.async_scheduling = False`): the owner's field is
#: worked out at run time, whatever its default
_FOREIGN_STORE = re.compile(r"\b(\w+)\.(\w+)\s*(?:[-+*/|&]?=)(?!=)")


def foreign_stores(text: str) -> tuple[str, ...]:
    """The attribute names ``text`` assigns on an object other than `self`, sorted."""
    return tuple(sorted({m.group(2) for m in _FOREIGN_STORE.finditer(text) if m.group(1) != "self"}))


def worked_out_stores(text: str) -> tuple[str, ...]:
    """``foreign_stores`` less the same-named values read off another object and handed on
    (`kernel_config.backend = self.backend`, settings filled from arguments): a copy of an
    option works nothing out. A local of the same name is a value worked out."""
    out = set()
    for m in _FOREIGN_STORE.finditer(text):
        if m.group(1) == "self":
            continue
        end = text.find("\n", m.end())
        value = text[m.end():end if end >= 0 else len(text)].split("#", 1)[0].strip()
        augmented = m.group(0).rstrip()[-2:-1] in "-+*/|&"
        dotted = "." in value and all(part.isidentifier() for part in value.split("."))
        if augmented or not dotted or value.rpartition(".")[2] != m.group(2):
            out.add(m.group(2))
    return tuple(sorted(out))


def start_up_resolutions(tree: ast.Module, defaults: Defaults, settings_module: bool = False,
                         ) -> tuple[tuple[str, ...], tuple[tuple[int, str], ...]]:
    """The option names a settings module works out at start-up besides attribute stores,
    from one walk: (those made at module level, sorted; (line of the call, name) of those a call
    in a function makes, whose gates say whether it happens by default: `if
    envs.DECREASE_IDLE.get(): declare_resolution(args, ..., enable_x=True)`, or past `if
    cfg.device != "cpu": return`). A resolution is a keyword given a computed value in a call
    handed the settings first (`declare_resolution(server_args, "x", enable_x=enabled)`,
    `replace(cfg, chunk=2048)`; a copy of the same name, `enable_x=self.enable_x`, is the
    option handed on) or a string key stored into settings or overrides (`overrides["enable_x"]
    = ...`; with ``settings_module``, into any table). A literal value is kept with its name
    (`enable_x=False`): one that is the option's default leaves the default what runs."""
    found = list(_resolutions(tree, defaults, False, settings_module))
    return (tuple(sorted({entry for entry, line in found if not line})),
            tuple(sorted({(line, entry) for entry, line in found if line})))


def _resolutions(node: ast.AST, defaults: Defaults, conditional: bool, any_table: bool) -> Iterator[tuple[str, int]]:
    """(entry, line of the call when in a function, else 0) of the resolutions below ``node``."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], (ast.Name, ast.Attribute)) and (
            defaults.receivers.search(_last(dotted_name(node.args[0])))):
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg and not _copied(value, keyword.arg):
                literal = _literal_text(value) if isinstance(value, ast.Constant) else None
                yield (keyword.arg if literal is None else f"{keyword.arg}={literal}"), node.lineno if conditional else 0
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            # into settings or overrides (`overrides["enable_x"] = ...`), or, in a module of
            # settings (``any_table``), any table filled with a worked-out value
            # (`declared["disable_x"] = True`, returned to the code that applies it); not a
            # payload copied from settings (`d["enable_x"] = v.enable_x`) nor, elsewhere, a
            # request's or a report's (`kw["mode"] = ...`, `state["mode"] = mode.value`)
            if (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str) and (_settings_store(target.value, defaults) or (
                        any_table and not _copied(node.value, target.slice.value)))):
                literal = _literal_text(node.value) if isinstance(node.value, ast.Constant) else None
                yield target.slice.value if literal is None else f"{target.slice.value}={literal}", 0
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        conditional = True  # its calls' gates (early returns too) are kept with them
    elif isinstance(node, ast.If):
        yield from _resolutions(node.test, defaults, conditional, any_table)
        for statement in (*node.body, *node.orelse):
            yield from _resolutions(statement, defaults, True, any_table)
        return
    for child in ast.iter_child_nodes(node):
        yield from _resolutions(child, defaults, conditional, any_table)


def _copied(value: ast.expr, key: str) -> bool:
    """Whether ``value`` is the same-named value copied (`v.enable_x`, `enable_x` for the key
    `enable_x`): a payload filled from settings, not a value worked out."""
    return isinstance(value, (ast.Name, ast.Attribute)) and _last(dotted_name(value)) == key


def _settings_store(container: ast.expr, defaults: Defaults) -> bool:
    """Whether a string key stored into ``container`` sets an option: settings (`cfg[...]`)
    or overrides of them (`overrides[...]`, `self.arg_overrides[...]`)."""
    name = _last(dotted_name(container) or "")
    return bool(name) and (bool(defaults.receivers.search(name)) or "override" in name.lower())


#: an attribute a class sets on its own instances (`self.output = ...`)
_SELF_STORE = re.compile(r"\bself\.(\w+)\s*(?::[^=\n]*)?=(?!=)")


def own_attributes(text: str) -> tuple[str, ...]:
    """The attribute names ``text`` assigns on `self`, sorted."""
    return tuple(sorted({m.group(1) for m in _SELF_STORE.finditer(text)}))


#: ``registry_defaults``: what an env read stands for when the variable is unset
_UNSET = object()
_CONVERT = {"int": int, "bool": bool, "float": float, "str": str}
_STRING_METHODS = frozenset({"lower", "upper", "strip", "casefold"})
_ENV_GETTERS = frozenset({"getenv", "get"})


def registry_defaults(tree: ast.Module, path: str) -> tuple[OptionDefault, ...]:
    """The defaults of an env registry's variables, worked out from the source without running
    it: a table of getters (`"VLLM_X": lambda: bool(int(os.getenv("VLLM_X", "0")))`, the
    getter's expression evaluated with the read replaced by its default) and typed fields of a
    registry class (`SGLANG_X = EnvBool(True)`). Owner ``env``; only what evaluates is kept."""
    out: list[OptionDefault] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Lambda):
                    found = _evaluate(value.body, key.value, 0)
                    if found is not _UNSET and len(repr(found)) <= _MAX_VALUE:
                        out.append(OptionDefault(key.value, "env", repr(found), path, key.lineno))
        elif isinstance(node, ast.ClassDef):
            for statement in node.body:
                if (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
                        and isinstance(statement.value, ast.Call) and _last(dotted_name(statement.value.func)).startswith("Env")
                        and statement.value.args):
                    kind = _last(dotted_name(statement.value.func))[3:].lower()
                    text = _literal_text(statement.value.args[0])
                    if text is not None:
                        literal = ast.literal_eval(text)
                        literal = bool(literal) if kind == "bool" else literal
                        out.append(OptionDefault(statement.targets[0].id, "env", repr(literal), path, statement.lineno))
    return tuple(out)


def _evaluate(node: ast.expr, var: str, depth: int) -> object:
    """The value of a getter's expression with the variable unset (``_UNSET`` when it does
    not evaluate with the few operations allowed here: literals, the read's default,
    conversions, string case methods, comparisons, `not`, `and`/`or`, a conditional)."""
    if depth > 12:
        return _UNSET
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_evaluate(e, var, depth + 1) for e in node.elts]
        return _UNSET if _UNSET in items else tuple(items)
    if isinstance(node, ast.Call):
        name = _last(dotted_name(node.func))
        if name in _ENV_GETTERS and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == var:
            if len(node.args) > 1:
                return _evaluate(node.args[1], var, depth + 1)
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            return None if default is None else _evaluate(default, var, depth + 1)
        if name in _CONVERT and len(node.args) == 1 and not node.keywords:
            inner = _evaluate(node.args[0], var, depth + 1)
            try:
                return _UNSET if inner is _UNSET or inner is None else _CONVERT[name](inner)
            except (ValueError, TypeError):
                return _UNSET
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STRING_METHODS and not node.args:
            inner = _evaluate(node.func.value, var, depth + 1)
            return getattr(inner, node.func.attr)() if isinstance(inner, str) else _UNSET
        return _UNSET
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _evaluate(node.operand, var, depth + 1)
        return _UNSET if inner is _UNSET else not inner
    if isinstance(node, ast.BoolOp):
        values = [_evaluate(v, var, depth + 1) for v in node.values]
        if _UNSET in values:
            return _UNSET
        result = values[0]
        for value in values[1:]:
            result = (result and value) if isinstance(node.op, ast.And) else (result or value)
        return result
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _evaluate(node.left, var, depth + 1), _evaluate(node.comparators[0], var, depth + 1)
        if _UNSET in (left, right):
            return _UNSET
        op = node.ops[0]
        try:
            if isinstance(op, (ast.Eq, ast.Is)):
                return left == right
            if isinstance(op, (ast.NotEq, ast.IsNot)):
                return left != right
            if isinstance(op, ast.In):
                return left in right  # type: ignore[operator]
            if isinstance(op, ast.NotIn):
                return left not in right  # type: ignore[operator]
        except TypeError:
            return _UNSET
        return _UNSET
    if isinstance(node, ast.IfExp):
        test = _evaluate(node.test, var, depth + 1)
        return _UNSET if test is _UNSET else _evaluate(node.body if test else node.orelse, var, depth + 1)
    return _UNSET


def _last(name: str | None) -> str:
    return (name or "").rsplit(".", 1)[-1]


def _settings_class(node: ast.ClassDef, defaults: Defaults, settings_module: bool) -> bool:
    if defaults.class_names.search(node.name):
        return True
    decorators = {_last(dotted_name(d.func if isinstance(d, ast.Call) else d)) for d in node.decorator_list}
    bases = {_last(dotted_name(base)) for base in node.bases}
    if decorators & defaults.class_decorators or bases & defaults.class_bases:
        return True
    return settings_module and bool((decorators | bases) & defaults.class_records)


def _fields(node: ast.ClassDef, path: str, defaults: Defaults) -> list[OptionDefault]:
    out = []
    resolved = _assigned_by_methods(node)
    for statement in node.body:
        computed = _computed_by(statement, defaults)
        if computed is not None and computed[0] not in resolved:
            out.append(OptionDefault(computed[0], node.name, "", path, statement.lineno, computed_by=computed[1]))
            continue
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name) or statement.value is None:
            continue
        if statement.target.id in resolved:
            continue  # the class works its value out (`__post_init__`): the default is not what runs
        annotation = statement.annotation
        annotation_name = dotted_name(annotation.value if isinstance(annotation, ast.Subscript) else annotation) or ""
        if _last(annotation_name) == "ClassVar":
            continue
        value, copied = _default(statement.value, defaults)
        if value == "None" and "bool" in ast.unparse(annotation):
            continue  # `bool | None = None`: "auto", worked out at start-up, neither on nor off
        if value is not None:
            out.append(OptionDefault(statement.target.id, node.name, value, path, statement.lineno, copied))
    return out


_DOTTED_FUNCTION = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}")


def _computed_by(statement: ast.stmt, defaults: Defaults) -> tuple[str, str] | None:
    """(the field, the function by its dotted path) of a field a settings class computes with
    a function it names (`attn_dp_enabled = Derived(fn="pkg.context.attn_dp_enabled_of")`);
    None for any other statement."""
    target = statement.targets[0] if isinstance(statement, ast.Assign) and len(statement.targets) == 1 else (
        statement.target if isinstance(statement, ast.AnnAssign) else None)
    value = statement.value if isinstance(statement, (ast.Assign, ast.AnnAssign)) else None
    if not isinstance(target, ast.Name) or not isinstance(value, ast.Call):
        return None
    if _last(dotted_name(value.func)) in defaults.field_calls:
        return None  # `field(default="pkg.hooks.noop")`: a default that is a string
    named = [k.value.value for k in value.keywords if k.arg not in ("default", "default_factory")
             and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str) and _DOTTED_FUNCTION.fullmatch(k.value.value)]
    return (target.id, named[0]) if len(named) == 1 else None


def _assigned_by_methods(node: ast.ClassDef) -> set[str]:
    """The attributes the class's own methods assign (`self.x = ...`, `object.__setattr__(self, "x", ...)`)."""
    out: set[str] = set()
    for statement in node.body:
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(statement):
            targets: list[ast.expr] = []
            if isinstance(inner, ast.Assign):
                targets = inner.targets
            elif isinstance(inner, (ast.AnnAssign, ast.AugAssign)):
                targets = [inner.target]
            elif isinstance(inner, ast.Call) and _last(dotted_name(inner.func)) == "__setattr__" and len(inner.args) >= 2:
                name = inner.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    out.add(name.value)
            for target in targets:
                for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name) and element.value.id == "self":
                        out.add(element.attr)
    return out


def _default(node: ast.expr, defaults: Defaults) -> tuple[str | None, bool]:
    """(the default as source, copied from another declaration) of a field's value; (None,
    False) when the source does not state it."""
    if isinstance(node, ast.Call) and _last(dotted_name(node.func)) in defaults.field_calls:
        for keyword in node.keywords:
            if keyword.arg == "default":
                return _default(keyword.value, defaults)
            if keyword.arg == "default_factory":
                factory = _last(dotted_name(keyword.value))
                return _EMPTY_FACTORIES.get(factory), False
        first = node.args[0] if node.args else None
        if first is None or isinstance(first, ast.Constant) and first.value is Ellipsis:
            return None, False  # required
        return _default(first, defaults)  # pydantic `Field(False, ...)`
    text = _literal_text(node)
    if text is not None:
        return text, False
    if isinstance(node, ast.Attribute) and dotted_name(node) is not None:
        return "", True
    return None, False


def _literal_text(node: ast.expr) -> str | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    text = repr(value)
    return text if len(text) <= _MAX_VALUE else None


def _argument(node: ast.Call, path: str) -> OptionDefault | None:
    """A command-line option: its `dest` (or first long flag, dashes as underscores) and
    default (argparse's: False for `store_true`, True for `store_false`, else None)."""
    flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    longs = [f for f in flags if f.startswith("--")]
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    dest = keywords.get("dest")
    if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
        name = dest.value
    elif longs:
        name = longs[0][2:].replace("-", "_")
    else:
        return None
    if not name.isidentifier():
        return None
    if any(k.arg is None for k in node.keywords):
        # `**kwargs`: the default is the settings class field it is built from
        return OptionDefault(name, f"--{name}", "", path, node.lineno, True)
    action = keywords.get("action")
    action_name = action.value if isinstance(action, ast.Constant) else None
    if "default" in keywords:
        text = _literal_text(keywords["default"])
        if text is None:
            copied = isinstance(keywords["default"], ast.Attribute)
            return OptionDefault(name, f"--{name}", "", path, node.lineno, True) if copied else None
    elif action_name == "store_true":
        text = "False"
    elif action_name == "store_false":
        text = "True"
    elif action is None or action_name in ("store", "append", "extend", "count"):
        text = "None"
    else:
        return None
    return OptionDefault(name, f"--{name}", text, path, node.lineno)
