"""The fix of ``duplicate-helper``: keep one copy of a function whose body stands in several
modules (identical up to local renames: the rule's own test) and replace each other copy by
an import of it (``from keeper import _diag``, ``as`` the copy's name when it differs).

The keeper is the copy in the module ``--into`` names, else the copy whose module imports
the fewest of the tree's modules (the one least likely to close an import cycle).  A copy
is kept, with a note, when a name it uses from its module (a constant, an import) is not the
keeper's, when its module is imported by the keeper's (a cycle), when a call in its module
passes a keyword the keeper's parameters do not have, or when it lives under another source
root (a fork beside its upstream: the same package name, so neither can import the other):
one copy per source root stays."""

from __future__ import annotations

import ast
import os
import symtable
from collections.abc import Callable

import libcst as cst

from cs_audit.fix.base import Target
from cs_audit.fix.modules import find_module, import_name, module_index

RULE = "duplicate-helper"

_BODY = ('    raw = os.environ.get({k})\n    if raw is not None:\n        return raw not in ("", "0")\n'
         '    return int(os.environ.get("DIAG_LEVEL", "0")) >= {l}\n')
CASES = [
    ({"pkg/__init__.py": "",
      "pkg/a.py": "import os\n\n\ndef _diag(key, lvl=1):\n" + _BODY.format(k="key", l="lvl"),
      "pkg/b.py": "import os\n\n\ndef _diag(name, level=1):\n" + _BODY.format(k="name", l="level")
                  + '\n\ndef execute_model():\n    return _diag("X")\n'},
     {"pkg/b.py": 'import os\n\nfrom pkg.a import _diag\n\n\ndef execute_model():\n    return _diag("X")\n'}),
]


def plan_groups(result, facts: dict, base: str, into: str | None, kept: set[tuple[str, int]]) -> dict[str, list[Target]]:
    """path -> the copies to replace there (or to keep, with why), for every duplicated group."""
    index = module_index(base, list(facts))
    out: dict[str, list[Target]] = {}
    for group in result.duplicates:
        sites = [s for s in group.sites if (s.path, s.line) in kept and s.function and "." not in s.function]
        by_root: dict[str, list] = {}
        for s in sites:
            by_root.setdefault(import_name(base, s.path)[0], []).append(s)
        for copies in by_root.values():
            if len(copies) < 2:
                continue
            keeper = _keeper(copies, facts, base, index, into)
            keeper_module = import_name(base, keeper.path)[1]
            keeper_params = _params(facts, keeper.path, keeper.function)
            closure = _imported_by(keeper.path, facts, base, index)
            for s in copies:
                if s is keeper:
                    continue
                why = None
                if s.path in closure:
                    why = f"`{keeper_module}` imports this module (an import cycle)"
                else:
                    why = _free_names_differ(base, s.path, s.function, keeper.path, keeper.function)
                data = ("import", keeper_module, keeper.function, s.function, keeper_params, why)
                out.setdefault(s.path, []).append(Target(RULE, s.line, s.line, 0, s.function, data))
    return out


def _keeper(copies: list, facts: dict, base: str, index: dict, into: str | None):
    if into:
        named = [s for s in copies if import_name(base, s.path)[1] == into]
        if named:
            return named[0]
    return min(copies, key=lambda s: (len(_in_tree_imports(s.path, facts, base, index)), s.path))


def _params(facts: dict, path: str, function: str) -> tuple[str, ...]:
    ff = facts.get(path)
    for fn in ff.functions if ff else ():
        if fn.qualname == function:
            return fn.params
    return ()


def _in_tree_imports(path: str, facts: dict, base: str, index: dict) -> set[str]:
    ff = facts.get(path)
    out = set()
    for _, origin in ff.aliases if ff else ():
        found = find_module(index, origin, path, base)
        if found and found != path:
            out.add(found)
    return out


def _imported_by(path: str, facts: dict, base: str, index: dict) -> set[str]:
    """Every file the module at ``path`` imports, directly or not."""
    seen: set[str] = set()
    work = [path]
    while work:
        for dep in _in_tree_imports(work.pop(), facts, base, index):
            if dep not in seen:
                seen.add(dep)
                work.append(dep)
    return seen


def _module_bindings(tree: ast.Module) -> dict[str, str]:
    """Module-level name -> what binds it (an import's origin, or the statement's dump)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = f"import {a.name if a.asname else a.name.split('.')[0]}"
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                out[a.asname or a.name] = f"from {'.' * node.level}{node.module or ''} import {a.name}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = ast.dump(node.value) if node.value is not None else ""
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = ast.dump(node)
    return out


def _free_names_differ(base: str, path: str, function: str, keeper_path: str, keeper_function: str) -> str | None:
    try:
        texts = [open(os.path.join(base, p), encoding="utf-8", errors="replace").read() for p in (path, keeper_path)]
        trees = [ast.parse(t) for t in texts]
        tables = [symtable.symtable(t, p, "exec") for t, p in zip(texts, (path, keeper_path))]
    except (OSError, SyntaxError, ValueError) as exc:
        return f"the copies cannot be compared ({exc})"
    names = []
    for table, fn in zip(tables, (function, keeper_function)):
        child = next((c for c in table.get_children() if c.get_name() == fn and c.get_type() == "function"), None)
        if child is None:
            return f"`{fn}` is not a module-level function"
        names.append(set(child.get_globals()))  # type: ignore[attr-defined]
    bindings = [_module_bindings(t) for t in trees]
    for name in sorted(names[0] | names[1]):
        if name in (function, keeper_function):
            continue
        mine, theirs = bindings[0].get(name), bindings[1].get(name)
        relative = (mine or "").startswith("from .") and os.path.dirname(path) != os.path.dirname(keeper_path)
        if mine != theirs or relative:
            return f"`{name}` is not the same in both modules"
    if function != keeper_function and function in names[0]:
        return "the copy calls itself by its own name"
    return None


def transform(module: cst.Module, targets: list[Target], note: Callable[[int, str], None]) -> tuple[cst.Module, int]:
    from cs_audit.fix.env_read_hot import insert_statements

    drop: dict[str, Target] = {}
    for t in targets:
        _, keeper_module, keeper_fn, copy_fn, keeper_params, why = t.data
        if why:
            note(t.line, f"copy of `{copy_fn}` kept: {why}")
            continue
        bad = _keyword_calls(module, copy_fn, keeper_params)
        if bad:
            note(t.line, f"copy of `{copy_fn}` kept: a call passes `{bad}=`, which `{keeper_module}.{keeper_fn}` does not take")
            continue
        drop[copy_fn] = t
    if not drop:
        return module, 0
    body = [s for s in module.body if not (isinstance(s, cst.FunctionDef) and s.name.value in drop)]
    module = module.with_changes(body=body)
    lines = []
    for copy_fn, t in drop.items():
        _, keeper_module, keeper_fn, *_ = t.data
        alias = f" as {copy_fn}" if copy_fn != keeper_fn else ""
        lines.append(f"from {keeper_module} import {keeper_fn}{alias}")
    return insert_statements(module, lines), len(drop)


def _keyword_calls(module: cst.Module, name: str, params: tuple[str, ...]) -> str | None:
    bad: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == name:
                bad.extend(a.keyword.value for a in node.args if a.keyword is not None and a.keyword.value not in params)

    module.visit(V())
    return bad[0] if bad else None
