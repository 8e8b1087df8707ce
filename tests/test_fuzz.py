"""Fuzzing the whole scan: generated programs and bytes in, never an uncaught exception out.

Three generators, each collected into one tree that is then scanned as a user would
(``run_audit`` + both renderers) and through the engine's file mapper (one result per
file):

* hypothesmith programs (``from_grammar``), each also rewritten so that its statements
  carry the tokens the libcst walker looks at (``os.getenv``, ``logger.debug``, ...);
* engine-like programs from a grammar of the constructs cs-audit analyses (env reads,
  gates, loops, emitters, syncs, helpers, nesting, odd whitespace, non-ASCII names);
* raw and mutated bytes (cookies, BOMs, NULs, truncation, stray CRs).

In CI every generator is derandomised (the same examples on every run).  A larger,
randomised run is opt-in: ``CS_AUDIT_FUZZ_LARGE=1 python -m pytest tests/test_fuzz.py``.
Every crash found becomes a fixture under ``fixtures/hostile/`` (see ``test_robust.py``).
"""

from __future__ import annotations

import ast
import os
import tempfile
import warnings
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs_audit import api
from cs_audit.api import analyse_file, run_audit
from cs_audit.config import AuditConfig
from cs_audit.extract.discover import discover
from cs_audit.model import FileFacts
from cs_audit.pool import map_files
from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset
from cs_audit.sources import FileError

LARGE = bool(os.environ.get("CS_AUDIT_FUZZ_LARGE"))
#: every file parsed for real, never served from a facts cache (where the engine has one)
NO_CACHE = {"cache": False} if "cache" in AuditConfig.__dataclass_fields__ else {}
_HEALTH = list(HealthCheck)


def _settings(ci_examples: int, large_examples: int):
    if LARGE:
        return settings(max_examples=large_examples, deadline=None, suppress_health_check=_HEALTH, database=None)
    return settings(derandomize=True, max_examples=ci_examples, deadline=None, suppress_health_check=_HEALTH,
                    database=None)


def _scan_corpus(programs: list[bytes], jobs: int = 2) -> dict[str, tuple[object, bytes]]:
    """Scan ``programs`` as one tree (``run_audit`` and both renderers); checks that every file is
    accounted for, exactly once, by the engine's file mapper; returns path -> (result, bytes)."""
    rs = load_ruleset()
    recorded: list[tuple[str, object]] = []

    def recording(sources, rs, config, progress, **cache_args):  # the engine's own mapper, watched
        for source, result in zip(sources, original(sources, rs, config, progress, **cache_args), strict=True):
            recorded.append((source.path, result))
            yield result

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        names = {}
        for i, data in enumerate(programs):
            name = f"pkg{i % 7}/m{i:05d}.py"
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
            names[name] = data
        original = api._map_files
        api._map_files = recording
        try:
            audit = run_audit(AuditConfig(root=str(root), jobs=jobs, history=False, **NO_CACHE), rs)
        finally:
            api._map_files = original
        render_json(audit)
        render_markdown(audit, rs)
    assert sorted(path for path, _ in recorded) == sorted(names) and audit.files_scanned == len(names)
    for path, result in recorded:
        assert isinstance(result, (FileFacts, FileError)) and result.path == path, (path, result)
    assert {e.path for e in audit.errors} == {p for p, r in recorded if isinstance(r, FileError)}
    return {path: (result, names[path]) for path, result in recorded}


def _collect(strategy, config) -> list:
    """The examples ``strategy`` yields under ``config`` (generation only; the scan is batched)."""
    out: list = []

    @config
    @given(strategy)
    def record(example) -> None:
        out.append(example)

    record()
    return out


def _failures(results: dict[str, object], allowed: frozenset[str]) -> list[str]:
    bad = []
    for path, (result, data) in results.items():
        if isinstance(result, FileError) and result.kind not in allowed:
            bad.append(f"{path}: {result.kind}: {result.message}\n{data[:2000]!r}")
    return bad


# --------------------------------------------------------------------------- hypothesmith


class _Instrument(ast.NodeTransformer):
    """Route every expression statement, assignment, return and test through a token the
    libcst walker reacts to, so hypothesmith's shapes reach ``facts.py`` as well."""

    @staticmethod
    def _call(dotted: str, args: list[ast.expr]) -> ast.Call:
        parts = dotted.split(".")
        func: ast.expr = ast.Name(parts[0], ast.Load())
        for part in parts[1:]:
            func = ast.Attribute(func, part, ast.Load())
        return ast.Call(func, args, [])

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.value, (ast.Yield, ast.YieldFrom, ast.Await, ast.Starred)):
            node.value = self._call("logger.debug", [ast.Constant("fuzz %s"), node.value])
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.value, (ast.Yield, ast.YieldFrom, ast.Starred)):
            node.value = self._call("os.environ.get", [ast.Constant("CSA_FUZZ"), node.value])
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        self.generic_visit(node)
        if node.value is not None and not isinstance(node.value, ast.Starred):
            node.value = self._call("os.getenv", [node.value])
        return node

    def visit_If(self, node: ast.If) -> ast.AST:
        self.generic_visit(node)
        node.test = ast.BoolOp(ast.Or(), [self._call("os.getenv", [ast.Constant("CSA_FUZZ_DEBUG")]), node.test])
        return node

    def visit_While(self, node: ast.While) -> ast.AST:
        self.generic_visit(node)
        node.test = ast.BoolOp(ast.And(), [node.test, self._call("print", [self._call("x.item", [])])])
        return node


def _instrumented(source: str) -> str | None:
    try:
        tree = _Instrument().visit(ast.parse(source))
        text = "import os, logging\nlogger = logging.getLogger(__name__)\n" + ast.unparse(ast.fix_missing_locations(tree))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<fuzz>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return text


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
def test_hypothesmith_programs_are_all_analysed() -> None:
    programs = _collect(hypothesmith.from_grammar(), _settings(200, 3000))
    programs += _collect(hypothesmith.from_node(), _settings(20, 500))
    corpus = []
    for source in programs:
        corpus.append(source.encode("utf-8", "surrogatepass"))
        rewritten = _instrumented(source)
        if rewritten is not None:
            corpus.append(rewritten.encode("utf-8"))
    results = _scan_corpus(corpus)
    # valid programs (hypothesmith only yields code that compiles): analysed, or at worst too deep to parse
    failures = _failures(results, frozenset({"parser-crash"}))
    assert failures == [], "\n\n".join(failures)


# --------------------------------------------------------------------------- engine-like programs

_NAMES = st.sampled_from(["x", "batch", "layer", "self.cfg", "tensor", "é", "ŝtep", "_diag", "out", "fh"])
_VARS = st.sampled_from(["CSA_DEBUG", "CSA_TRACE", "VLLM_LOG", "SGLANG_DUMP_DIR", "", "X" * 80, "dyn" + "\u202e"])
_LEVELS = st.sampled_from(["debug", "info", "warning", "error", "exception", "critical", "log"])


def _quote(text: str) -> str:
    return repr(text)


def _expr_strategy() -> st.SearchStrategy[str]:
    leaf = st.one_of(
        _NAMES,
        st.integers(-5, 10**6).map(str),
        st.text(max_size=8).map(_quote),
        _VARS.map(lambda v: f"os.getenv({v!r})"),
        _VARS.map(lambda v: f"os.environ.get({v!r}, '0')"),
        _VARS.map(lambda v: f"os.environ[{v!r}]"),
        _VARS.filter(str.isidentifier).map(lambda v: f"envs.{v}"),
        st.just("tensor.item()"), st.just("x.cpu().tolist()"), st.just("time.time_ns()"),
        _NAMES.map(lambda n: f'f"{{{n}!r}} {{{n}:>10}} {{tensor.item()}}"'),
    )

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "%", "and", "or", "==", "if x else", "*"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, inner).map(lambda t: f"'%s %s' % ({t[0]}, {t[1]})"),
            st.tuples(inner, inner).map(lambda t: f"'{{}} {{}}'.format({t[0]}, {t[1]})"),
            inner.map(lambda e: f"json.dumps({e})"),
            inner.map(lambda e: f"[{e} for _ in range(3)]"),
            inner.map(lambda e: f"(lambda q: {e})(1)"),
            inner.map(lambda e: f"(not {e})"),
            inner.map(lambda e: f"{e}[0]"),
            st.tuples(_NAMES, inner).map(lambda t: f"_diag({t[1]})"),
        )

    return st.recursive(leaf, extend, max_leaves=5)


_EXPR = _expr_strategy()


def _block(statements: list[str], indent: int) -> str:
    return "".join(" " * indent + line + "\n" for stmt in statements for line in stmt.split("\n"))


def _stmt_strategy() -> st.SearchStrategy[str]:
    simple = st.one_of(
        st.tuples(_NAMES, _EXPR).map(lambda t: f"{t[0]} = {t[1]}"),
        st.tuples(_LEVELS, _EXPR, _EXPR).map(
            lambda t: f"logger.{t[0]}({'logging.DEBUG, ' if t[0] == 'log' else ''}'m %s', {t[1]}, {t[2]})"),
        _EXPR.map(lambda e: f"print({e}, flush=True)"),
        _EXPR.map(lambda e: f"sys.stderr.write(str({e}))"),
        st.just("torch.cuda.synchronize()"),
        _EXPR.map(lambda e: f"torch.save({e}, os.path.join(os.getenv('SGLANG_DUMP_DIR', '/tmp'), 'x.pt'))"),
        _EXPR.map(lambda e: f"with open('/tmp/trace.jsonl', 'a') as fh:\n    fh.write(json.dumps({e}))\n    fh.flush()"),
        _EXPR.map(lambda e: f"return {e}"),
        _VARS.map(lambda v: f"os.environ[{v!r}] = '1'"),
        st.just("pass"),
        _EXPR.map(lambda e: f"assert {e}, 'msg'"),
        st.just("stamp = datetime.now().strftime('%Y%m%d')"),
    )

    def compound(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        body = st.lists(inner, min_size=1, max_size=3)
        return st.one_of(
            st.tuples(_EXPR, body, st.one_of(st.none(), body)).map(
                lambda t: f"if {t[0]}:\n{_block(t[1], 4)}" + (f"else:\n{_block(t[2], 4)}" if t[2] else "").rstrip("\n")),
            st.tuples(_EXPR, body).map(lambda t: f"if {t[0]}:\n    return\n" + _block(t[1], 0).rstrip("\n")),
            body.map(lambda b: f"for layer in self.layers:\n{_block(b, 4)}    continue".rstrip("\n")),
            st.tuples(_EXPR, body).map(lambda t: f"while {t[0]}:\n{_block(t[1], 4)}".rstrip("\n")),
            st.tuples(body, body).map(lambda t: f"try:\n{_block(t[0], 4)}except Exception:\n{_block(t[1], 4)}".rstrip("\n")),
        )

    return st.recursive(simple, compound, max_leaves=6)


_STMT = _stmt_strategy()
_HEADER = "import os, sys, json, time, logging, torch\nfrom datetime import datetime\nfrom vllm import envs\nlogger = logging.getLogger(__name__)\n"


@st.composite
def _engine_module(draw: st.DrawFn) -> bytes:
    parts = [_HEADER]
    for i in range(draw(st.integers(1, 3))):
        decorator = draw(st.sampled_from(["", "@functools.cache\n", "@staticmethod\n"]))
        name = draw(st.sampled_from(["execute_model", "forward", "_diag", "step", "__init__", f"helper{i}", "trace_level"]))
        body = draw(st.lists(_STMT, min_size=1, max_size=4))
        if draw(st.booleans()):
            parts.append(f"class Runner{i}:\n    {decorator.strip() or '# plain'}\n    def {name}(self, batch, name='X'):\n{_block(body, 8)}")
        else:
            parts.append(f"{decorator}def {name}(name='CSA_DEBUG', *args, **kw):\n{_block(body, 4)}")
    parts.append(_block(draw(st.lists(_STMT, max_size=3)), 0).replace("return", "pass  #"))
    text = "\n".join(parts)
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = text.replace("\n", newline)
    if draw(st.booleans()):
        text = text.replace("logger", "\x0clogger", 1)  # form feed before a statement
    data = text.encode("utf-8")
    return (b"\xef\xbb\xbf" + data) if draw(st.booleans()) else data


def _compiles(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data, "<fuzz>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def test_engine_like_programs_are_all_analysed() -> None:
    modules = _collect(_engine_module(), _settings(100, 3000))
    valid = [m for m in modules if _compiles(m)]
    assert len(valid) >= len(modules) // 2, "the generator mostly produces invalid code; fix it"
    results = _scan_corpus(modules)
    # anything that compiles must be analysed; the rest (`break` outside a loop ...) at worst is a syntax error
    bad = []
    for path, (result, data) in results.items():
        expected = set() if _compiles(data) else {"syntax"}
        if isinstance(result, FileError) and result.kind not in expected:
            bad.append(f"{path}: {result.kind}: {result.message}\n{data.decode('utf-8', 'replace')}")
    assert bad == [], "\n\n".join(bad)


# --------------------------------------------------------------------------- bytes


_SEED = (b"# -*- coding: latin-1 -*-\nimport os\nA = os.getenv('A')\nprint('caf\xe9', A)\n",
         b"import os\nif os.environ.get('X'):\n    print('ok')\n")
_INSERTS = st.sampled_from([b"\0", b"\r", b"\xff", b"\xef\xbb\xbf", b"# coding: utf-16\n", b"# coding: nope\n",
                            b"\x0c", b"\\", b"'''", b"(" * 300, b"\t", b"\xc3", b"\n    ", b"# coding: rot13\n"])


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    data = bytearray(draw(st.sampled_from(_SEED)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        if draw(st.booleans()):
            data[at:at] = draw(_INSERTS)
        else:
            del data[at: at + draw(st.integers(1, 10))]
    return bytes(data)


def test_arbitrary_bytes_are_accounted_for() -> None:
    blobs = _collect(_mutated(), _settings(200, 5000))
    results = _scan_corpus(blobs)
    # bytes may be anything but never an internal error, a crash or a timeout
    failures = _failures(results, frozenset({"syntax", "encoding", "binary", "parser-crash"}))
    assert failures == [], "\n\n".join(failures)


@pytest.mark.skipif(not LARGE, reason="opt-in: CS_AUDIT_FUZZ_LARGE=1 (randomised, thousands of programs)")
@settings(max_examples=500, deadline=None, suppress_health_check=_HEALTH)
@given(_engine_module())
def test_engine_like_programs_one_by_one_with_shrinking(module: bytes) -> None:
    """Per-example checking (slower) so hypothesis can shrink a failure to a minimal program."""
    rs = load_ruleset()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.py"
        path.write_bytes(module)
        (source,), _ = discover(Path(tmp))
        (result,) = map_files(analyse_file, [source], (rs, 1 << 20))  # in a worker: a crash is a result
    assert isinstance(result, FileFacts) or (isinstance(result, FileError) and result.kind == "syntax"
                                             and not _compiles(module)), result
