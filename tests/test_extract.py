"""The extraction shortcuts taken for speed keep the facts they would have given.

* calls of builtins (`len(x)`) are not call-graph edges, unless the module binds the name;
* ``StatementFacts._walk`` (the facts walker's own traversal) finds what libcst's
  ``node.visit`` finds, on every fixture file;
* the statements handed to libcst are parsed in pieces of bounded size: the facts are
  those of one parse of them all;
* body hashes (for duplicated helpers) are computed only for functions that hold facts.
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from cs_audit.extract import facts as facts_module
from cs_audit.extract.calls import may_reach_tree
from cs_audit.extract.index import ModuleIndex, Snippet, index_module
from cs_audit.extract.python import decode_source, extract_python
from cs_audit.model import FileFacts
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import scan_files

PROJECT = Path(__file__).resolve().parent.parent
FIXTURE_FILES = sorted(
    p for tree in ("compressspec", "sglang_trace") for p in (PROJECT / "fixtures" / tree).rglob("*.py")
)

HOT = '''
import os


class Runner:
    def execute_model(self, batch):
        self.widest = max(batch)
'''
SHADOWING = HOT + '''

def max(batch):
    return os.getenv("MAX_DBG")
'''


def test_builtin_calls_are_not_edges() -> None:
    assert not may_reach_tree("len", {})
    assert not may_reach_tree("ValueError", {})
    assert may_reach_tree("helper", {})
    assert may_reach_tree("max", {}, frozenset({"max"}))  # the module defines its own max()
    assert may_reach_tree("max", {"max": "pkg.util.max"})  # or imports one
    assert may_reach_tree("self.len", {})


def test_a_module_that_defines_a_builtin_name_keeps_the_edge() -> None:
    shadowed = scan_files({"mod.py": SHADOWING})
    assert [(f.rule, f.function, f.frequency) for f in shadowed.findings if f.rule == "env-read-hot"] == [
        ("env-read-hot", "Runner.execute_model", "step")
    ]
    # the same call with no module-level max(): the builtin, no edge, nothing hot to report
    plain = scan_files({"mod.py": HOT + '\n\ndef unrelated():\n    return os.getenv("MAX_DBG")\n'})
    assert [f for f in plain.findings if f.rule == "env-read-hot"] == []


DOCSTRINGS = '''"""Module docs: trace dumps go to os.environ["TRACE_DIR"]."""
import logging
import os

logger = logging.getLogger(__name__)


def step(batch):
    """Calls logger.debug(...) and torch.cuda.synchronize() when TRACE is set."""
    b"environ debug dump"
    1
    f"{logger.debug(batch)}"
    return os.getenv("TRACE")
'''


def test_docstrings_and_bare_literals_are_not_handed_to_libcst() -> None:
    rs = load_ruleset()
    index = index_module(ast.parse(DOCSTRINGS), DOCSTRINGS, "mod.py", rs)
    # the module and function docstrings and the bytes literal hold tokens, but no call or read
    assert [(s.line, s.text) for s in index.snippets] == [
        (5, "logger = logging.getLogger(__name__)"),
        (12, 'f"{logger.debug(batch)}"'),  # an f-string statement can call: still walked
        (13, 'return os.getenv("TRACE")'),
    ]
    facts = extract_python("mod.py", DOCSTRINGS.encode(), rs)
    assert isinstance(facts, FileFacts)
    assert [(r.var, r.line) for r in facts.env_reads] == [("TRACE", 13)]
    assert [(c.callee, c.line, c.role) for c in facts.calls if c.role is not None] == [("logger.debug", 12, "log")]


class _LibcstVisit(facts_module.StatementFacts):
    """The same walker driven by libcst's own traversal."""

    def _walk(self, node: cst.CSTNode) -> None:
        node.visit(self)


def test_own_traversal_finds_what_libcst_visit_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    rs = load_ruleset()
    compared = 0
    for path in FIXTURE_FILES:
        text = decode_source(path.read_bytes())
        index = index_module(ast.parse(text), text, path.name, rs)
        if not index.snippets:
            continue
        args = (index.snippets, rs, index.aliases, index.logger_names, index.string_constants, index.shadowed)
        with monkeypatch.context() as patch:
            ours = facts_module.collect_facts(*args)
            patch.setattr(facts_module, "StatementFacts", _LibcstVisit)
            theirs = facts_module.collect_facts(*args)
        assert isinstance(theirs, _LibcstVisit)
        got, expected = (ours.env_reads, ours.calls, ours.literal_paths), (theirs.env_reads, theirs.calls, theirs.literal_paths)
        assert got == expected, path
        compared += bool(ours.env_reads or ours.calls)
    assert compared >= 10  # the fixtures hold that many files with facts


def _many_statements(count: int) -> str:
    """A module of ``count`` functions, each holding facts of every kind the walker keeps
    state for across statements (a path bound to a local, an assignment to os.environ)."""
    parts = ["import logging", "import os", "", "logger = logging.getLogger(__name__)", "OUT = '/tmp/dump'", ""]
    for i in range(count):
        parts += [
            f"def step{i}(x, name='n{i}'):",
            f'    """Reads DBG_{i} (a docstring: never handed over)."""',
            f'    path = os.path.join(OUT, f"{{name}}_{i}.pt")',
            f'    if os.getenv("DBG_{i}", "0") == "1":',
            f'        logger.info("step {i} %s", x.item())',
            f'    os.environ["SET_{i}"] = "1"',
            f'    del os.environ["GONE_{i}"]',
            f'    level = int(os.environ["LEVEL_{i}"])',
            "    with open(path, 'w') as f:",
            "        f.write(str(level))",
            f"    return step{i + 1}(x) if level else None",
            "",
        ]
    return "\n".join(parts) + "\n"


def test_statements_parsed_in_pieces_give_the_facts_of_one_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    rs = load_ruleset()
    sources = {"many.py": _many_statements(120).encode()}
    sources.update((str(p), p.read_bytes()) for p in FIXTURE_FILES)
    pieces = 0
    for name, data in sources.items():
        with monkeypatch.context() as patch:
            patch.setattr(facts_module, "_PIECE_CHARS", 10**9)
            whole = extract_python(name, data, rs)
        with monkeypatch.context() as patch:
            patch.setattr(facts_module, "_PIECE_CHARS", 200)
            pieced = extract_python(name, data, rs)
            text = decode_source(data)
            pieces += len(facts_module._pieces(index_module(ast.parse(text), text, name, rs).snippets))
        assert isinstance(whole, FileFacts) and pieced == whole, name
    many = extract_python("many.py", sources["many.py"], rs)
    assert isinstance(many, FileFacts)
    # every function's facts are there, on their own lines: none lost or shifted at a boundary
    assert [(r.var, r.line) for r in many.env_reads] == [
        (var, 10 + 12 * i + offset) for i in range(120) for var, offset in ((f"DBG_{i}", 0), (f"LEVEL_{i}", 4))
    ]
    assert [c.line for c in many.calls if c.role == "log"] == [11 + 12 * i for i in range(120)]
    assert pieces > 200  # the small budget did cut the files into many pieces


def test_body_hashes_only_for_functions_with_facts() -> None:
    source = b'''
import logging
logger = logging.getLogger(__name__)


def emits(x):
    y = x + 1
    z = y * 2
    logger.info("z=%s", z)


def quiet(x):
    y = x + 1
    z = y * 2
    return z
'''
    facts = extract_python("mod.py", source, load_ruleset())
    assert isinstance(facts, FileFacts)
    hashes = {f.qualname: f.body_hash for f in facts.functions}
    assert hashes["emits"] != "" and hashes["quiet"] == ""


def test_functions_named_like_debug_code_are_marked_by_the_rules_pattern() -> None:
    source = b'''
def dump_state(x):
    return x


class Engine:
    def _Trace(self):
        return 0

    def step(self):
        def dump_state():
            return 1
        return dump_state()


def catalog():
    return 2
'''
    rs = load_ruleset()
    facts = extract_python("mod.py", source, rs)
    assert isinstance(facts, FileFacts)
    named = {f.qualname: f.debug_named for f in facts.functions}
    assert named == {"dump_state": True, "Engine._Trace": True, "Engine.step": False,
                     "Engine.step.<locals>.dump_state": True, "catalog": False}
    assert named == {f.qualname: rs.debug_name_re.search(f.name) is not None for f in facts.functions}


# ---------------------------------------------------------------- index.py shortcuts

TRICKY = '''
import os
import logging as lg

NAME = "BASE"
if os.getenv(NAME) == "1":
    NAME = "OTHER"  # a module-level string constant changes under a pending gate
    helper(NAME)
if flag == "on":
    from pkg import flag  # an import changes the aliases under a pending gate
    run()


def f(mode=None):
    if mode == "block":
        mode = os.getenv("MODE", "block")  # an env default changes under a pending gate
        if mode == "block":
            work()
    if not os.environ.get("X"):
        return
    if not mode:  # a parameter: an operand of f's gates, worked out in f
        return
    def inner():
        import numpy as np  # an import in a nested def, with the outer gates pending
        np.zeros(3)
    while verbose > 1:
        self.step()
    else:
        self.done()
    x = (a.b(1)
         .c("s", 2)(3))
    lg.getLogger(__name__).info("%s", x)
'''


def _index_sources() -> list[tuple[str, str]]:
    return [("tricky.py", TRICKY)] + [(p.name, decode_source(p.read_bytes())) for p in FIXTURE_FILES]


def test_token_literals_find_the_lines_the_pattern_matches() -> None:
    from cs_audit.extract import index as index_module_
    rs = load_ruleset()
    extra = "\n".join(["os.environ['X']", "self.env = 1", "t = time.time()", "x = 'cpu'", "y.cpu()", "datetime.now()",
                       "s.strftime('%Y')", "time_ns()", "a.pt", "a.ptx", "nothing here", "synchronize()", "log.x", "catalog"])
    for name, text in [("extra.py", extra)] + _index_sources():
        indexer = index_module_._Indexer(name, text, rs)
        expected = [0]
        for line in text.split("\n"):
            expected.append(expected[-1] + (index_module_.SNIPPET_TOKENS.search(line) is not None))
        assert indexer.token_prefix == expected, name


def test_lazy_gates_equal_gates_worked_out_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gate refs are worked out when a statement below records them; the result (and the
    sharing of equal gate tuples) is that of working them out when the test is reached."""
    from cs_audit.extract import index as index_module_

    class EagerGates(index_module_._Indexer):
        def _push_gates(self, test: ast.expr, active: bool) -> None:
            super()._push_gates(test, active)
            self._settle(self.gate_groups[-1])

    rs = load_ruleset()
    for name, text in _index_sources():
        tree = ast.parse(text)
        lazy = index_module(tree, text, name, rs)
        with monkeypatch.context() as patch:
            patch.setattr(index_module_, "_Indexer", EagerGates)
            eager = index_module(tree, text, name, rs)
        assert (lazy.calls, lazy.snippets, lazy.functions) == (eager.calls, eager.snippets, eager.functions), name
        assert _gate_sharing(lazy) == _gate_sharing(eager), name
    tricky = index_module(ast.parse(TRICKY), TRICKY, "tricky.py", rs)
    assert any(site.gates for site in tricky.calls)


def _gate_sharing(index: ModuleIndex) -> list[int]:
    """For each site, the first site with the very same gates tuple."""
    ids = [id(site.gates) for site in (*index.calls, *index.snippets)]
    return [ids.index(i) for i in ids]


def test_calls_in_source_order() -> None:
    from cs_audit.extract.calls import calls_in
    for name, text in _index_sources():
        for stmt in ast.walk(ast.parse(text)):
            if isinstance(stmt, ast.stmt):
                expected = sorted((n for n in ast.walk(stmt) if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
                assert calls_in(stmt) == expected, (name, stmt.lineno)


def test_code_from_the_snippet_text_equals_generated_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_code`` of a statement's final expression slices the snippet's text instead of
    asking libcst to generate the code: the same strings."""
    rs = load_ruleset()
    sources = _index_sources() + [("crlf.py", "import logging\nlogger = logging.getLogger()\nlogger.info(\r\n  'x')\n")]
    final_expression = facts_module._final_expression
    shortcuts = 0

    def counted(statement: cst.CSTNode, snippet: Snippet) -> object:
        nonlocal shortcuts
        found = final_expression(statement, snippet)
        shortcuts += found is not None
        return found

    for name, text in sources:
        index = index_module(ast.parse(text), text, name, rs)
        if not index.snippets:
            continue
        args = (index.snippets, rs, index.aliases, index.logger_names, index.string_constants, index.shadowed)
        with monkeypatch.context() as patch:
            patch.setattr(facts_module, "_final_expression", counted)
            sliced = facts_module.collect_facts(*args)
        with monkeypatch.context() as patch:
            patch.setattr(facts_module, "_final_expression", lambda statement, snippet: None)
            generated = facts_module.collect_facts(*args)
        assert (sliced.env_reads, sliced.calls) == (generated.env_reads, generated.calls), name
    assert shortcuts >= 20


def test_indexing_a_module_leaves_nothing_for_the_collector() -> None:
    """The workers extract with the garbage collector off: what indexing a module makes must
    be freed when its result is dropped, so it must hold no reference cycle (an index that
    kept its tree alive would keep every file's tree of the scan)."""
    import gc

    text = "def run(batch, cache=None):\n    if cache is None:\n        cache = {}\n    return [r.step() for r in batch]\n"
    rs = load_ruleset()
    gc.collect()
    gc.disable()
    try:
        index = index_module(ast.parse(text), text, "m.py", rs)
        assert index.functions and index.stores is not None
        del index
        assert gc.collect() == 0
    finally:
        gc.enable()
