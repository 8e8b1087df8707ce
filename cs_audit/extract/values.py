"""What an assigned or passed value is, read off its ``ast`` shape: a path built from
parts or starting as one, a file name, host data, an attribute read a call wraps, the
text a gate on a parameter judges an argument by."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet

from cs_audit.extract.scopes import dotted, raw_dotted
from cs_audit.extract.scripts import NAMES_FILE

#: methods that move a tensor to a device (what they return is not known to be on the host)
_TO_DEVICE = frozenset({"cuda", "to"})
#: calls that build a tensor from host data (a list, a numpy array) on the host
HOST_BUILDERS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor"})


def wrapped_read(value: ast.expr) -> str:
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


def returned_attr(value: ast.expr | None) -> str:
    """The attribute a `return` reads off an object other than `self` or `cls` (`return
    moe.backend`, `return get_flags().moe.backend`): a getter of that field; "" for any other
    value."""
    if not isinstance(value, ast.Attribute):
        return ""
    base = value.value
    while isinstance(base, (ast.Attribute, ast.Call, ast.Subscript)):
        base = base.func if isinstance(base, ast.Call) else base.value
    return value.attr if isinstance(base, ast.Name) and base.id not in ("self", "cls") else ""


def stored_value(value: ast.expr) -> str:
    """What a store into a record's field holds (``FileFacts.field_stores``): `wrap:C:read` for
    a class or function called on one attribute read (`Backend(cfg.backend)`), `member:C.M`
    for a capitalised constant of a class (`Backend.NONE`), "" for anything else."""
    if isinstance(value, ast.Call):
        callee = raw_dotted(value.func)
        read = wrapped_read(value)
        return f"wrap:{callee}:{read}" if callee and read else ""
    if isinstance(value, ast.Attribute) and value.attr.isupper():
        owner = raw_dotted(value.value)
        return f"member:{owner}.{value.attr}" if owner else ""
    return ""


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


def passed_value(node: ast.expr, params: tuple[str, ...], bound: AbstractSet[str] = frozenset(),
                 assigned: Mapping[str, list[ast.expr]] | None = None, stored: AbstractSet[str] = frozenset()) -> str:
    """``PassedValues``' text of an argument: `lit:` a True/False/None literal, `ref:` an
    attribute read off a name (`req.interpolate`), `param:` one of the caller's parameters
    handed on, `local:` a name a `with` of the caller binds (``bound``) or it binds only by
    plain assignments (``stored``: tested for truth there as here), `either:` a local the
    caller assigned once, a conditional expression of an attribute read and a short literal
    (`backend = cfg.backend if cfg is not None else "auto"`; ``assigned``: the caller's locals'
    values so far), its two values tab-separated; `?` for anything else."""
    if node.__class__ is ast.Constant:
        value = node.value
        return f"lit:{value!r}" if value is None or type(value) is bool else "?"
    if node.__class__ is ast.Name:
        if node.id in params:
            return f"param:{node.id}"
        if node.id in bound:
            return f"local:{node.id}"
        values = assigned.get(node.id) if assigned is not None else None
        if values is not None and len(values) == 1 and values[0].__class__ is ast.IfExp:
            either = [_either_value(values[0].body), _either_value(values[0].orelse)]
            if "?" not in either:
                return "either:" + "\t".join(either)
        # a local the caller assigns (``stored``): judged as a test of it there
        return f"local:{node.id}" if node.id in stored else "?"
    if node.__class__ is ast.Attribute:
        text = _read_chain(node, 5)
        return f"ref:{text}" if text else "?"
    return "?"


def _either_value(node: ast.expr) -> str:
    """One value of an `either:` (``passed_value``): a short literal or an attribute read."""
    if node.__class__ is ast.Constant:
        value = node.value
        if value is None or type(value) in (bool, int) or type(value) is str and len(value) <= 40 and "\t" not in value:
            return f"lit:{value!r}"
        return "?"
    if node.__class__ is ast.Attribute:
        text = _read_chain(node, 5)
        return f"ref:{text}" if text else "?"
    return "?"


def host_value(node: ast.expr, host: frozenset[str], aliases: dict[str, str], names: re.Pattern[str] | None) -> bool:
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


#: last names of the calls and methods a path is built through (``starts_as_path``)
_PATH_CALLS = frozenset({"join", "Path", "PurePath", "PosixPath", "str", "fspath", "abspath", "normpath", "realpath",
                         "expanduser", "dirname"})
_PATH_METHODS = frozenset({"format", "joinpath", "resolve", "absolute", "expanduser"})


def starts_as_path(value: ast.expr | None, names: Callable[[str], bool]) -> bool:
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


def is_built_path(value: ast.expr) -> bool:
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


def head_names(value: ast.AST, depth: int) -> set[str]:
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
        return head_names(first.value, depth + 1) if first.__class__ is ast.FormattedValue else set()
    if value.__class__ is ast.BinOp:
        return head_names(value.left, depth + 1)
    if value.__class__ is ast.BoolOp:
        return set().union(*(head_names(v, depth + 1) for v in value.values))
    if value.__class__ is ast.IfExp:
        return head_names(value.body, depth + 1) | head_names(value.orelse, depth + 1)
    if value.__class__ is ast.Call:
        func = value.func
        if func.__class__ is ast.Attribute and func.attr in _PATH_METHODS:
            return head_names(func.value, depth + 1)
        args = value.args
        name = func.attr if func.__class__ is ast.Attribute else func.id if func.__class__ is ast.Name else ""
        return head_names(args[0], depth + 1) if name in _PATH_CALLS and args else set()
    return set()


def names_file(value: ast.expr, constants: dict[str, str]) -> bool:
    """Whether an assigned value holds a file name of the kinds readers are matched by: a
    literal, or a module constant (`Path(out) / _HIST_FILE`)."""
    for n in ast.walk(value):
        text = n.value if n.__class__ is ast.Constant else constants.get(n.id) if n.__class__ is ast.Name else None
        if isinstance(text, str) and NAMES_FILE.search(text):
            return True
    return False
