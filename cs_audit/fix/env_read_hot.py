"""The fix of ``env-read-hot``: a per-call read of a switch that never changes in a run
(``os.environ.get("X", "0")``, ``os.getenv``, ``os.environ["X"]``, ``"X" in os.environ``, a
registry read such as ``envs.X``) is resolved once, into a module constant at the top of the
file, and the read is replaced by the constant.

Only reads whose key and default are literals (evaluating them once is the same as every
time) and whose module's name is imported at module level are hoisted.  A variable the
program sets itself (``os.environ[...] =``, ``putenv``, ``setdefault``, ``update`` or a
child-process ``env=`` anywhere in the tree: the setters cs-audit extracts) or that a test
monkeypatches (``setenv``, ``patch.dict``, ``delenv``) is left alone with a note: a constant
would miss the change.  A read through a helper (``_diag("X")``) is the helper's to fix."""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from cs_audit.fix.base import Target

RULE = "env-read-hot"

CASES = [
    ('import os\n\n\ndef execute_model():\n    if os.environ.get("KV_DUMP", "0") == "1":\n        dump()\n',
     'import os\n\n_ENV_KV_DUMP = os.environ.get("KV_DUMP", "0")\n\n\ndef execute_model():\n    if _ENV_KV_DUMP == "1":\n        dump()\n'),
    ('import os\n\n\ndef execute_model():\n    return os.getenv("TRACE_DIR")\n',
     'import os\n\n_ENV_TRACE_DIR = os.getenv("TRACE_DIR")\n\n\ndef execute_model():\n    return _ENV_TRACE_DIR\n'),
]
#: left alone, with a note
DECLINED = [
    'import os\n\n\ndef execute_model():\n    if os.environ.get("KV_DUMP", "0") == "1":\n        dump()\n\n\ndef main():\n    os.environ["KV_DUMP"] = "1"\n',
    'import os\n\n\ndef execute_model(d):\n    return os.environ.get("KV_DUMP", d())\n',
]

_LITERALS = (cst.SimpleString, cst.Integer, cst.Float)


def _squash(text: str) -> str:
    return " ".join(text.split())


def transform(module: cst.Module, targets: list[Target], note: Callable[[int, str], None]) -> tuple[cst.Module, int]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    code = wrapper.module.code_for_node
    imported = module_imports(wrapper.module)
    nodes: list[tuple[cst.BaseExpression, int]] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.Call, cst.Subscript, cst.Attribute, cst.Comparison)):
                nodes.append((node, positions[node].start.line))
            return True

    wrapper.module.visit(Collect())
    constants: dict[str, str] = {}  # code -> constant name
    existing = {_assigned_name(s) for s in wrapper.module.body} - {None}
    replace: dict[cst.CSTNode, str] = {}
    for target in targets:
        var, read_code, blocked = target.data
        if blocked:
            note(target.line, f"`{var}` not hoisted: {blocked}")
            continue
        found = [n for n, line in nodes if target.line <= line <= target.end_line and _squash(code(n)) == read_code
                 and n not in replace]
        if not found:
            note(target.line, f"`{var}`: the read `{read_code}` is not found at the line the scan gave")
            continue
        node = found[0]
        why = _not_hoistable(node, imported)
        if why:
            note(target.line, f"`{var}` not hoisted: {why}")
            continue
        text = code(node.with_changes(lpar=(), rpar=()) if getattr(node, "lpar", None) else node)
        name = constants.get(text)
        if name is None:
            base = "_ENV_" + re.sub(r"\W", "_", var).upper()
            name, n = base, 2
            while name in existing or name in constants.values():
                name, n = f"{base}_{n}", n + 1
            constants[text] = name
        replace[node] = name
    if not replace:
        return module, 0
    new = wrapper.module.visit(_Replace(replace))
    return _insert_constants(new, constants), len(replace)


def _assigned_name(stmt: cst.CSTNode) -> str | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        targets = stmt.body[0].targets
        if len(targets) == 1 and isinstance(targets[0].target, cst.Name):
            return targets[0].target.value
    return None


def module_imports(module: cst.Module) -> dict[str, int]:
    """Names bound by module-level imports -> the index of their statement in the body."""
    out: dict[str, int] = {}
    for i, stmt in enumerate(module.body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname else alias.name
                    root: cst.BaseExpression = bound
                    while isinstance(root, cst.Attribute):
                        root = root.value
                    if isinstance(root, cst.Name):
                        out.setdefault(root.value, i)
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname else alias.name
                    if isinstance(bound, cst.Name):
                        out.setdefault(bound.value, i)
    return out


def _root_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Call, cst.Subscript)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def _not_hoistable(node: cst.CSTNode, imported: dict[str, int]) -> str | None:
    if isinstance(node, cst.Call):
        if any(a.star or not isinstance(a.value, (*_LITERALS, cst.Name)) or
               (isinstance(a.value, cst.Name) and a.value.value not in ("None", "True", "False")) for a in node.args):
            return "a key or default that is not a literal (evaluated at each call)"
        root = _root_name(node.func)
    elif isinstance(node, cst.Subscript):
        root = _root_name(node.value)
    elif isinstance(node, cst.Comparison):
        root = _root_name(node.comparisons[0].comparator)
    else:
        root = _root_name(node)  # type: ignore[arg-type]
    if root is None or root not in imported:
        return f"`{root or '?'}` is not imported at module level"
    return None


class _Replace(cst.CSTTransformer):
    def __init__(self, replace: dict[cst.CSTNode, str]) -> None:
        self.replace = replace

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        name = self.replace.get(original)
        if name is None:
            return updated
        lpar, rpar = getattr(original, "lpar", ()), getattr(original, "rpar", ())
        return cst.Name(name, lpar=lpar, rpar=rpar)


def _insert_constants(module: cst.Module, constants: dict[str, str]) -> cst.Module:
    return insert_statements(module, [f"{name} = {text}" for text, name in constants.items()])


def insert_statements(module: cst.Module, lines: list[str]) -> cst.Module:
    """``lines`` after the module's last top-level import before its first def or class."""
    body = list(module.body)
    at = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            at = i + 1
    new = [cst.parse_statement(f"{line}{module.default_newline}", config=module.config_for_parsing) for line in lines]
    new = [s.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]) if isinstance(s, (cst.FunctionDef, cst.ClassDef))
           else s for s in new]
    new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine()])
    after = body[at:]
    if after and not after[0].leading_lines and not isinstance(after[0], (cst.FunctionDef, cst.ClassDef)):
        after[0] = after[0].with_changes(leading_lines=[cst.EmptyLine()])
    return module.with_changes(body=[*body[:at], *new, *after])


def blocked_vars(facts: dict, texts: Callable[[str], str | None]) -> dict[str, str]:
    """var -> why a constant would miss a change of it: set by the program itself, or
    monkeypatched by a test."""
    out: dict[str, str] = {}
    for _path, ff in sorted(facts.items()):
        for s in ff.setters:
            if s.source == "python":
                out.setdefault(s.var, f"the program sets it ({s.path}:{s.line})")
    patch = re.compile(r"""(?:setenv|delenv)\(\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]|patch\.dict\([^)]*?['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s*:""")
    for path in sorted(facts):
        name = path.rsplit("/", 1)[-1]
        if not ("test" in path.split("/")[0] or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
                or "/tests/" in f"/{path}"):
            continue
        text = texts(path)
        if not text:
            continue
        for m in patch.finditer(text):
            var = m.group(1) or m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            out.setdefault(var, f"a test monkeypatches it ({path}:{line})")
    return out
