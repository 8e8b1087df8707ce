"""Per-file facts of the files that may read what a scan's writers write: the file
names and globs a file mentions, and the words shell pipelines ``grep`` for.  The join
with the writers is ``cs_audit.joins.readers``."""

from __future__ import annotations

import ast
import re
from collections import deque

from cs_audit.model import EnvSetter, ScriptFacts
from cs_audit.pyast import dotted_name

#: the extensions of the files a reader is matched by (what dumps and traces are written as)
FILE_EXTENSIONS = "jsonl|json|pt|pth|csv|log|txt|npy|npz|pkl|pickle|parquet|tsv"
FILE_REF = re.compile(rf"[A-Za-z0-9_*?{{}}\[\]\-.$]*[A-Za-z0-9_*}}\]]\.(?:{FILE_EXTENSIONS})\b")
#: a string that ends in a file name of those
NAMES_FILE = re.compile(rf"\w\.(?:{FILE_EXTENSIONS})$")
GREP = re.compile(r"\b(?:grep|egrep|fgrep|zgrep|rg)\b((?:\s+-{1,2}[\w-]+(?:=\S+)?)*)\s+(['\"]?)([^'\"\s|;&]+)\2")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


#: the extension part of FILE_REF: every match holds one, and a match never spans lines
_FILE_EXT = re.compile(rf"\.(?:{FILE_EXTENSIONS})\b")


def file_refs(text: str) -> tuple[tuple[int, str], ...]:
    """(line, base name) of every file name or glob the text mentions.

    FILE_REF backtracks over every identifier run, so it only runs on the lines that
    hold an extension (``_FILE_EXT``, a fast scan): the same matches, in the same order."""
    out = []
    line, counted, pos, size = 1, 0, 0, len(text)
    search = _FILE_EXT.search
    while True:
        hit = search(text, pos)
        if hit is None:
            break
        begin = text.rfind("\n", 0, hit.start()) + 1
        end = text.find("\n", hit.end())
        if end == -1:
            end = size
        for match in FILE_REF.finditer(text, begin, end):
            name = match.group().rsplit("/", 1)[-1]
            if name.strip("*.?") and not name.startswith("."):
                start = match.start()
                line += text.count("\n", counted, start)
                counted = start
                out.append((line, name))
        pos = end + 1
        if pos >= size:
            break
    return tuple(dict.fromkeys(out))


def grep_patterns(text: str) -> tuple[tuple[int, str], ...]:
    return tuple((_line_of(text, m.start()), m.group(3)) for m in GREP.finditer(text) if len(m.group(3)) >= 4)


#: commands that start another program: a file named in their arguments is handed on to it
#: (`python analyze.py --in accept_rate.jsonl`), which the script itself does not read
LAUNCHERS = frozenset({
    "python", "python3", "torchrun", "deepspeed", "accelerate", "srun", "mpirun", "bash", "sh", "uv", "exec",
})
_WRAPPERS = frozenset({"nohup", "time", "env", "exec", "sudo", "timeout"})
_SEGMENTS = re.compile(r"\|\|?|&&|;")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _hands_on(segment: str, name: str) -> bool:
    """Whether ``name`` is an argument of a command that runs another program (not fed
    through ``<``)."""
    words = segment.split()
    while words and (_ASSIGN.match(words[0]) or words[0] in _WRAPPERS or words[0].lstrip("-").isdigit()):
        words = words[1:]
    if not words:
        return False
    command = words[0].rsplit("/", 1)[-1]
    launched = command in LAUNCHERS or command.startswith("python") or command.endswith((".py", ".sh"))
    before = segment[: segment.find(name)] if name in segment else segment
    return launched and "<" not in before


def passed_on(text: str, refs: tuple[tuple[int, str], ...]) -> tuple[tuple[int, str], ...]:
    """The refs of ``refs`` that a shell line hands on to another program."""
    lines = text.split("\n")
    out = []
    for line, name in refs:
        source = lines[line - 1] if 0 < line <= len(lines) else ""
        segment = next((s for s in _SEGMENTS.split(source) if name in s), source)
        if _hands_on(segment, name):
            out.append((line, name))
    return tuple(out)


def script_facts(path: str, text: str, setters: list[EnvSetter]) -> ScriptFacts:
    refs = file_refs(text)
    handed = set(passed_on(text, refs))
    return ScriptFacts(path=path, setters=tuple(setters), file_refs=tuple(r for r in refs if r not in handed),
                       greps=grep_patterns(text))


#: a Python file that may start another program (the cheap first look of ``passed_on_python``)
_MAY_LAUNCH = re.compile(r"\b(subprocess|system|popen|spawn\w*|exec[lv]\w*|create_subprocess_\w+)\b")
#: os functions that start another program
_OS_LAUNCHES = re.compile(r"^(system|popen|exec[lv]p?e?|spawn[lv]p?e?|posix_spawnp?)$")
#: calls whose result is still the path or command they are given: a name in their arguments
#: goes where their result goes (`os.path.join(d, "a.jsonl")`, `shlex.quote(p)`, `" ".join(cmd)`)
_PASSING = frozenset({
    "join", "Path", "PurePath", "PosixPath", "str", "fspath", "abspath", "realpath", "normpath", "expanduser",
    "format", "quote", "joinpath", "resolve", "split",
})


def passed_on_python(text: str, tree: ast.Module, refs: tuple[tuple[int, str], ...]) -> tuple[tuple[int, str], ...]:
    """The refs of ``refs`` a Python file only hands on to another program: the string that
    names the file is an argument of ``subprocess.*``/``os.system``/``os.exec*`` (maybe
    through path joins, f-strings and lists), or is stored in a name whose every use is."""
    if not refs or not _MAY_LAUNCH.search(text):
        return ()
    launchers = _launchers(tree)
    if not launchers:
        return ()
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    strings: dict[int, list[ast.AST]] = {}
    for node in parents:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) or isinstance(node, ast.JoinedStr):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                strings.setdefault(line, []).append(node)
    out = []
    for line, name in refs:
        holding = [n for n in strings.get(line, ()) if name in _string_text(n) and parents.get(n).__class__ is not ast.JoinedStr]
        if holding and all(_handed(n, parents, launchers, tree, 0) for n in holding):
            out.append((line, name))
    return tuple(out)


def _string_text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)  # only string constants are asked
    return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))  # type: ignore[attr-defined]


def _launchers(tree: ast.Module) -> dict[str, str]:
    """The names that start another program here: module name as imported -> module
    (`import subprocess as sp`), and `=name` -> module for a function imported by name."""
    names: dict[str, str] = {}
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ("subprocess", "os", "asyncio"):
                    names[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "os", "asyncio"):
            for alias in node.names:
                if _launches(node.module, alias.name):
                    names["=" + (alias.asname or alias.name)] = node.module
    return names


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.Module) -> list[ast.AST]:
    """The statements of ``tree`` (with the handlers and cases holding some) in the order
    ``ast.walk`` yields them: breadth first, fields in order; no expression holds a
    statement, so leaving expressions out keeps their order (and an import is a statement)."""
    out: list[ast.AST] = []
    todo = deque([tree])
    blocks = _BLOCKS
    while todo:
        node = todo.popleft()
        out.append(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if value.__class__ is list and value and isinstance(value[0], blocks):
                todo.extend(value)
    return out


def _launches(module: str, function: str) -> bool:
    return (module == "subprocess" or module == "os" and bool(_OS_LAUNCHES.match(function))
            or module == "asyncio" and function.startswith("create_subprocess_"))


def _is_launch(call: ast.Call, launchers: dict[str, str]) -> bool:
    callee = dotted_name(call.func) or ""
    if "=" + callee in launchers:
        return True
    head, _, last = callee.rpartition(".")
    return head in launchers and _launches(launchers[head], last)


def _handed(node: ast.AST, parents: dict, launchers: dict[str, str], tree: ast.Module, depth: int) -> bool:
    """Whether the value of ``node`` only reaches other programs' command lines."""
    while True:
        parent = parents.get(node)
        if parent is None or depth > 4:
            return False
        if isinstance(parent, ast.Call):
            if node is not parent.func and _is_launch(parent, launchers):
                return True
            callee = parent.func
            last = callee.attr if isinstance(callee, ast.Attribute) else callee.id if isinstance(callee, ast.Name) else ""
            if last not in _PASSING:
                return False  # another call uses it (`open(p)`, `Path(p).read_text()`, `json.load(...)`)
        elif isinstance(parent, ast.Assign | ast.AnnAssign):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name) or node is targets[0]:
                return False
            uses = _uses_of(targets[0].id, _scope_of(parent, parents, tree))
            return bool(uses) and all(_handed(u, parents, launchers, tree, depth + 1) for u in uses)
        elif isinstance(parent, ast.stmt | ast.Lambda | ast.comprehension):
            return False  # a statement of its own (`return p`), or a value made per item
        node = parent


def _scope_of(node: ast.AST | None, parents: dict, tree: ast.Module) -> ast.AST:
    while node is not None and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        node = parents.get(node)
    return node if node is not None else tree


def _uses_of(name: str, scope: ast.AST) -> list[ast.Name]:
    return [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
