"""The extraction shortcuts taken for speed keep the facts they would have given.

* calls of builtins (`len(x)`) are not call-graph edges, unless the module binds the name;
* ``StatementFacts._walk`` (the facts walker's own traversal) finds what libcst's
  ``node.visit`` finds, on every fixture file;
* body hashes (for duplicated helpers) are computed only for functions that hold facts.
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from cs_audit.extract import decode_source, extract_python
from cs_audit.extract import facts as facts_module
from cs_audit.extract.index import index_module, may_reach_tree
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
