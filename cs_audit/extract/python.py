"""Facts for one file: a pure function of its bytes and the rule set.

``extract_python`` decodes (coding cookie, BOM), indexes the module with the stdlib
``ast`` (structure, gates, call edges) and walks the statements that matter with
libcst (env reads, emitters, syncs).  Every failure becomes a ``FileError`` for
that file only.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
from collections import defaultdict
from dataclasses import replace
from typing import TypeVar

from cs_audit.extract.calls import CALLEE_HEAD
from cs_audit.extract.index import ModuleIndex, index_module
from cs_audit.extract.loops import event_loops, step_loops
from cs_audit.extract.options import (
    declared_options,
    foreign_stores,
    own_attributes,
    registry_defaults,
    start_up_resolutions,
    worked_out_stores,
)
from cs_audit.extract.scopes import module_name
from cs_audit.extract.types import MAX_SOURCES, source_head, type_bindings
from cs_audit.model import (
    HANDED,
    PROPERTY_ACCESSORS,
    PROPERTY_DECORATORS,
    Binding,
    CallSite,
    ClassFacts,
    EnvRead,
    FileFacts,
    PlainCall,
    TypeFacts,
    holds_fact,
)
from cs_audit.pyast import parse_quietly
from cs_audit.ruleset import RuleSet
from cs_audit.sources import FileError


def decode_source(data: bytes) -> str:
    """Decode like the interpreter: coding cookie or UTF-8, BOM dropped.
    Raises UnicodeError/SyntaxError (bad cookie)/LookupError for the caller to report."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text.removeprefix("\ufeff")


def _decode_error(data: bytes, exc: Exception) -> str:
    """Where and why ``data`` cannot be decoded: ``line:col`` (1-based) when the codec says where."""
    if isinstance(exc, UnicodeDecodeError):
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        bad = f" (byte 0x{exc.object[exc.start]:02x})" if exc.start < len(exc.object) else ""
        return f"cannot decode at {line}:{col} as {exc.encoding}: {exc.reason}{bad}"
    if isinstance(exc, SyntaxError):  # tokenize: bad or unknown coding cookie, BOM + other cookie
        return f"bad coding declaration: {exc.msg}"
    return f"cannot decode: {type(exc).__name__}: {exc}"


def _syntax_error(exc: SyntaxError) -> str:
    where = f" at {exc.lineno}:{exc.offset}" if exc.lineno and exc.offset else (f" at {exc.lineno}" if exc.lineno else "")
    return f"syntax error{where}: {exc.msg}"


_Fact = TypeVar("_Fact", EnvRead, CallSite, PlainCall)


def _mark_returned(facts: list[_Fact], index: ModuleIndex) -> list[_Fact]:
    """A read or call decides its function's result when it sits in a `return`, in a
    local the returns use, or in the test of an `if` whose body returns a value."""
    out = []
    for fact in facts:
        target, is_return = index.statements.get(fact.line, (None, False))
        returned_names = index.returned_names.get(fact.function, frozenset())
        returned = is_return or (target is not None and target in returned_names) or fact.line in index.returning_tests
        if returned:
            fact = fact.returning() if isinstance(fact, PlainCall) else replace(fact, returned=True)
        out.append(fact)
    return out


def extract_python(path: str, data: bytes, rs: RuleSet) -> FileFacts | FileError:
    parsed = parse_python(path, data)
    return parsed if isinstance(parsed, FileError) else extract_parsed(path, *parsed, rs)


def parse_python(path: str, data: bytes) -> tuple[str, ast.Module] | FileError:
    """The decoded text of a Python file and its ``ast``; a ``FileError`` when it is binary,
    cannot be decoded or does not parse."""
    if b"\0" in data:
        return FileError(path, "binary", "contains NUL bytes: not a text file, skipped")
    try:
        text = decode_source(data)
    except (UnicodeError, SyntaxError, LookupError, ValueError, TypeError) as exc:
        return FileError(path, "encoding", _decode_error(data, exc))
    try:
        # the text as it is: CPython's verdict (a `\` + CRLF at the very end is valid, + LF is not)
        tree = parse_quietly(text, filename=path)
    except SyntaxError as exc:  # IndentationError, TabError too
        return FileError(path, "syntax", _syntax_error(exc))
    except RecursionError:
        return FileError(path, "parser-crash", "nested too deeply for Python's own parser (RecursionError): not analysed")
    except MemoryError:
        # the PEG parser's own stack guard raises MemoryError too ("too complex to parse")
        return FileError(path, "parser-crash", "Python's own parser gave up (MemoryError: too complex, or out of memory): not analysed")
    except (ValueError, OverflowError) as exc:
        return FileError(path, "syntax", f"cannot parse: {type(exc).__name__}: {exc}")
    return text, tree


def extract_parsed(path: str, text: str, tree: ast.Module, rs: RuleSet) -> FileFacts | FileError:
    """Facts of a file ``parse_python`` gave ``text`` and ``tree`` for."""
    # lines as an editor (and ast) counts them: \n, \r\n and a lone \r end a line, a form feed does not
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    index = index_module(tree, text, path, rs)
    env_reads: list[EnvRead] = []
    calls: list[CallSite | PlainCall] = []
    calls.extend(_mark_returned(list(index.calls), index))
    literal_paths: list[tuple[int, str, int, int]] = []
    if index.snippets:
        from cs_audit.extract.facts import collect_facts  # libcst: imported by the workers that need it

        try:
            defaults = {f.qualname: dict(f.param_defaults) for f in index.functions if f.param_defaults}
            walker = collect_facts(index.snippets, rs, index.aliases, index.logger_names, index.string_constants,
                                   index.shadowed, defaults)
        except RecursionError:
            return FileError(path, "parser-crash", "expression nesting too deep for the parser")
        env_reads = _mark_returned(walker.env_reads, index)
        calls.extend(_mark_returned(walker.calls, index))
        literal_paths = walker.literal_paths
    with_facts = {r.function for r in env_reads if r.function} | {c.function for c in calls if c.function and c.role is not None}
    classes, grouped = type_bindings(tree, index.aliases, index.comprehensions, index.arguments, index.lambdas, index.stores)
    if index.reads:
        calls.extend(_mark_returned(_property_reads(index, grouped), index))
    return FileFacts(
        path=path,
        module=module_name(path),
        aliases=tuple(sorted(index.aliases.items())),
        functions=index.hash_bodies(with_facts),
        env_reads=tuple(env_reads),
        calls=tuple(site if site.__class__ is PlainCall or holds_fact(site) else PlainCall.of(site)  # type: ignore[arg-type]
                    for site in sorted(calls, key=lambda c: (c.line, c.end_line, c.callee))),
        literal_paths=_first_of_each(literal_paths),
        env_exporters=tuple(sorted(index.env_exporters, key=lambda f: f or "")),
        types=used_bindings(classes, grouped, calls),
        event_loops=event_loops(index.whiles, rs.event_loop_steps, rs.stop_flag_re),
        step_loops=step_loops(index.top_whiles, rs.loop_root_names),
        gated_effects=index.effects,
        derived=index.derived,
        falsy_names=index.falsy_names,
        built_messages=index.built_messages,
        host_arguments=index.host_arguments,
        passed_values=index.passed_values,
        record_fields=index.record_fields if rs.defaults is not None else (),
        required_fields=index.required_fields if rs.defaults is not None else (),
        field_stores=index.field_stores if rs.defaults is not None else (),
        keywords_passed=index.keywords_passed if rs.defaults is not None else (),
        keywords_named=index.keywords_named if rs.defaults is not None else (),
        table_keys=index.table_keys if rs.defaults is not None else (),
        table_gets=index.table_gets if rs.defaults is not None else (),
        wrapped=index.wrapped,
        touches_device=rs.device_re is None or touches_device(text, rs),
        path_values=index.path_values,
        options=(options := declared_options(tree, text, path, rs.defaults) + _registry_defaults(tree, text, path, rs)),
        foreign_stores=(worked_out := _worked_out(tree, text, path, options, rs))[0],
        conditional_resolutions=worked_out[1],
        table_resolutions=index.table_resolutions if rs.defaults is not None else (),
        own_attributes=own_attributes(text) if rs.defaults is not None else (),
        own_state=index.own_state if rs.defaults is not None else (),
        own_optional=index.own_optional if rs.defaults is not None else (),
        foreign_attributes=foreign_stores(text) if rs.defaults is not None else (),
    )


def _registry_defaults(tree: ast.Module, text: str, path: str, rs: RuleSet) -> tuple:
    """An env registry's defaults (``extract.options.registry_defaults``), in a file that may hold one."""
    if rs.defaults is None or not ("getenv" in text or "environ" in text) or not ("lambda" in text or "Env" in text):
        return ()
    return registry_defaults(tree, path)


def _worked_out(tree: ast.Module, text: str, path: str, options: tuple, rs: RuleSet,
                ) -> tuple[tuple[str, ...], tuple[tuple[int, str], ...]]:
    """In a module that declares options or is a settings module: the names it works out at
    start-up (stores on another object, computed keywords, string keys), and the resolutions
    by calls in its functions, with their lines (``FileFacts.conditional_resolutions``)."""
    if rs.defaults is None or not _settings_module(path, options, rs):
        return (), ()
    resolved, conditional = start_up_resolutions(tree, rs.defaults, rs.defaults.module_paths.search(path) is not None)
    return tuple(sorted({*worked_out_stores(text), *resolved})), conditional


def _settings_module(path: str, options: tuple, rs: RuleSet) -> bool:
    """Whether a module may work out options at start-up: it declares some, or is a settings module."""
    return rs.defaults is not None and bool(options or rs.defaults.module_paths.search(path))


#: ``RuleSet.device_apis`` -> (each pattern, and the same without a leading `\b` or None)
_DEVICE_SEARCHES: dict[tuple[str, ...], tuple[tuple[re.Pattern[str], re.Pattern[str] | None], ...]] = {}


def touches_device(text: str, rs: RuleSet) -> bool:
    """Whether ``rs.device_re`` matches somewhere in ``text``, found one pattern at a time:
    a pattern starting with `\\b` defeats the regex engine's literal-prefix scan, so its
    rest is searched (fast) and `\\b` checked only where the rest matches."""
    searches = _DEVICE_SEARCHES.get(rs.device_apis)
    if searches is None:
        searches = _DEVICE_SEARCHES[rs.device_apis] = tuple(_device_search(p) for p in rs.device_apis)
    if not searches:  # a rule set made without the patterns
        return rs.device_re is not None and rs.device_re.search(text) is not None
    for exact, rest in searches:
        if rest is None:
            if exact.search(text) is not None:
                return True
            continue
        # every match of `\bR` at i is a match of R at i: try the matches of R in order
        found = rest.search(text)
        while found is not None:
            start = found.start()
            if exact.match(text, start) is not None:
                return True
            found = rest.search(text, start + 1)
    return False


def _device_search(pattern: str) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    exact = re.compile(pattern)
    if pattern.startswith("\\b"):
        try:
            return exact, re.compile(pattern[2:])
        except re.error:
            pass
    return exact, None


def _property_reads(index: ModuleIndex, grouped: dict[tuple[str, str, str | None], list[str]]) -> list[PlainCall]:
    """The attribute reads that may be of a property: not of a name the file stores
    (`self.x = ...`, a class-level field) or defines as a method that is no property, unless
    the file defines a property so named.  Most reads are of such plain attributes; the few
    kept keep the facts small."""
    plain = {name for owner, name, _ in grouped if owner[:6] == "class:"} | index.stored_attributes
    properties: set[str] = set()
    for f in index.functions:
        if f.class_name is not None:
            if any(d in PROPERTY_DECORATORS or d.endswith(PROPERTY_ACCESSORS) for d in f.decorators):
                properties.add(f.name)  # stored or not, a property of the file (`x.load = v` runs its setter)
            else:
                plain.add(f.name)
    plain -= properties
    return [site for site in index.reads if site.callee.rpartition(".")[2] not in plain]


def _need(needed: dict[str, set[str]], function: str, head: str) -> None:
    """Note that calls of ``function`` read the local ``head``, as do those of each function
    it is nested in (a free name of a nested function is the enclosing one's local)."""
    while True:
        needed[function].add(head)
        outer, sep, _ = function.rpartition(".<locals>.")
        if not sep:
            return
        function = outer


#: the bindings of a function's result: its returns, and its annotation
_RESULTS = frozenset({"<return>", "<annotated>"})


def used_bindings(classes: tuple[ClassFacts, ...], grouped: dict[tuple[str, str, str | None], list[str]],
                  calls: list[CallSite | PlainCall]) -> TypeFacts:
    """The type facts of the bindings ``types.type_bindings`` gives (grouped by owner, name
    and function), without the locals no call of the file can depend on: a local is kept when
    a call of its function (or of a function nested in it) starts with it, or a kept
    binding's source does (`x = self.a` then `y = x.b` then `y.run()`).  Whether a binding is
    kept depends on its key only, so a key is kept whole."""
    needed: dict[str, set[str]] = defaultdict(set)
    head_of = CALLEE_HEAD.match
    seen: set[tuple[str, str]] = set()
    seen_gates: set[tuple[str, int]] = set()
    for site in calls:
        function = site.function
        if function is None:
            continue
        gates = site.gates
        if gates and (function, id(gates)) not in seen_gates:
            # the receiver of an attribute a gate tests (`if runner.kv.window:`) is typed
            # for the gate to be judged by the class (``joins.attributes``)
            seen_gates.add((function, id(gates)))
            for gate in gates:
                if gate.kind == "name" and "." in gate.ref:
                    _need(needed, function, head_of(gate.ref).group())  # type: ignore[union-attr]
        if (function, site.callee) in seen:
            continue
        seen.add((function, site.callee))
        matched = head_of(site.callee.rpartition(HANDED)[2])
        assert matched is not None  # the pattern matches any text, the empty head included
        _need(needed, function, matched.group())
    keys = list(grouped)
    kept = [False] * len(keys)
    #: (function, local) -> the index of its key when not kept yet (a `def:` owner's function is its own)
    pending: dict[tuple[str, str], int] = {}
    work: list[int] = []
    no_names: frozenset[str] = frozenset()
    for i, (owner, name, _) in enumerate(keys):
        if owner[:4] == "def:" and name not in _RESULTS and name not in needed.get(owner[4:], no_names):
            pending[(owner[4:], name)] = i
        else:
            work.append(i)
    heads: dict[str, str] = {}
    while work:
        i = work.pop()
        kept[i] = True
        key = keys[i]
        function = key[2]
        if function is None or not pending:
            continue
        for source in grouped[key][:MAX_SOURCES]:
            head = heads.get(source)
            if head is None:
                head = heads[source] = source_head(source)
            if head:
                j = pending.pop((function, head), None)
                if j is not None:
                    work.append(j)
    bindings: list[Binding] = []
    #: the bindings of names (the arguments are left out: whether one matters depends on the tree, ``Resolver.tables_digest``)
    named: list[Binding] = []
    groups: dict[tuple[str | None, str], list[tuple[str, str]]] = {}
    for key, keep in zip(keys, kept):
        if keep:
            owner, name, function = key
            sources = grouped[key][:MAX_SOURCES]
            made = [(owner, name, function, s) for s in sources]
            bindings.extend(made)
            if owner[:4] == "arg:":
                groups.setdefault((function, owner[4:]), []).extend([(name, s) for s in sources])
            else:
                named.extend(made)
    digest = hashlib.blake2b(repr((classes, named)).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    arguments = tuple((function, callee, hashlib.blake2b(repr(passed).encode("utf-8", "surrogateescape"), digest_size=8).digest())
                      for (function, callee), passed in groups.items())
    return TypeFacts(classes, tuple(bindings), tuple(sorted({b[1] for b in bindings})), digest, arguments)


def _first_of_each(paths: list[tuple[int, str, int, int]]) -> tuple[tuple[int, str, int, int], ...]:
    """One entry per (line, path), the leftmost, sorted: a path written twice on a line is one finding."""
    first: dict[tuple[int, str], tuple[int, str, int, int]] = {}
    for entry in sorted(paths):
        first.setdefault(entry[:2], entry)
    return tuple(first.values())
