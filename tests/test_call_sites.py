"""``FileFacts.calls`` (``model.CallSites``): pickled with the plain call edges as columns and
read back lazily; every way of reading it gives the sites that were stored."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from cs_audit.api import analyse_file, prepare_ruleset
from cs_audit.config import AuditConfig
from cs_audit.extract.discover import discover
from cs_audit.model import CallSite, CallSites, FileFacts, GateRef, _column, holds_fact

PROJECT = Path(__file__).resolve().parent.parent
FIXTURES = PROJECT / "fixtures" / "compressspec"


def _site(callee: str, line: int, **fields: object) -> CallSite:
    plain = CallSite(callee=callee, function="f", line=line, end_line=line, gates=(), loop_depth=0, literal_args=(),
                     eager=(), arg_calls=(), role=None, level=None, resolution="exact", in_emitter_args=False,
                     receiver=None, mode=None, line_buffered=False, builds_path=False, bound_to=None, code=f"{callee}()")
    return replace(plain, **fields)  # type: ignore[arg-type]


def _round_trip(sites: CallSites) -> CallSites:
    back = pickle.loads(pickle.dumps(sites, protocol=pickle.HIGHEST_PROTOCOL))
    assert isinstance(back, CallSites)
    return back


GATE = GateRef("env", "TRACE")
MIXED = [
    _site("helper", 1, gates=(GATE,), literal_args=("X", None)),
    _site("logger.info", 2, role="log", level="info", eager=("f-string",)),
    _site("self._step", 3, function="A.run", loop_depth=1, loop_iter="self.layers", returned=True),
    _site("json.dumps", 4, arg_calls=("x.item",)),
    _site("open", 5, role="open", mode="w", path_pattern="trace.jsonl", bound_to="fh"),
    _site("helper", 6, function=None, gates=(GATE, GateRef("level", "DEBUG", active_when_set=False))),
    _site("torch.cuda.synchronize", 7, role="sync"),
]
SHAPES = {
    "empty": [],
    "one plain": MIXED[:1],
    "only facts": [s for s in MIXED if holds_fact(s)],
    "only plain": [s for s in MIXED if not holds_fact(s)],
    "mixed": MIXED,
    "plain first and last": [MIXED[0], MIXED[1], MIXED[2]],
}


@pytest.mark.parametrize("name", SHAPES)
def test_restored_sites_read_as_the_stored_ones(name: str) -> None:
    stored = SHAPES[name]
    built = CallSites(stored)
    back = _round_trip(built)
    assert len(back) == len(stored)
    assert [back[i] for i in range(len(stored))] == stored
    assert [back[-i] for i in range(1, len(stored) + 1)] == [stored[-i] for i in range(1, len(stored) + 1)]
    assert _round_trip(built)[1:-1] == tuple(stored[1:-1]) and _round_trip(built)[::2] == tuple(stored[::2])
    assert list(_round_trip(built).edge_sites()) == list(built.edge_sites()) == [
        (i, s.callee, s.function, s.role) for i, s in enumerate(stored)
    ]
    assert back.facts == built.facts == tuple(s for s in stored if holds_fact(s))
    assert back == built and hash(back) == hash(built) and tuple(back) == tuple(built) == tuple(stored)
    assert back != tuple(stored)  # a sequence of its own, as a list is not a tuple
    assert list(back) == stored and list(back) == stored  # iterated twice
    for wrong in (len(stored), -len(stored) - 1):
        with pytest.raises(IndexError):
            _round_trip(built)[wrong]


def test_sites_that_differ_are_unequal() -> None:
    built = CallSites(MIXED)
    moved = CallSites([replace(MIXED[0], line=9)] + MIXED[1:])
    ungated = CallSites([replace(MIXED[5], gates=())] + MIXED[1:])
    for other in (moved, ungated, CallSites(MIXED[:-1])):
        assert built != other and _round_trip(built) != _round_trip(other)


def test_plain_sites_are_built_only_when_read() -> None:
    back = _round_trip(CallSites(MIXED))
    assert back.facts and list(back.edge_sites())
    assert back._built == {}  # neither the facts nor the edges built a plain site
    third = back[2]
    assert back._built == {2: third} and back[2] is third  # built once, then the same object
    assert back[1] is back.facts[0]


def test_a_column_of_equal_values_is_stored_once_but_not_across_types() -> None:
    assert _column(("a", "a", "a")) == ("a",)
    assert _column((GATE, GateRef("env", "TRACE"))) == (GATE,)
    assert _column((1, True, 1)) == (1, True, 1)  # equal, but a bool is not an int here
    assert _column((0, 0.0)) == (0, 0.0)
    assert _column((None, "x")) == (None, "x")


def test_facts_of_the_fixture_trees_read_back_site_for_site() -> None:
    rs = prepare_ruleset(AuditConfig(root=str(FIXTURES)))
    sources, _ = discover(FIXTURES, ())
    facts = [r for r in (analyse_file(s, rs, 1 << 20) for s in sources if s.kind == "python") if isinstance(r, FileFacts)]
    plain = sum(len(ff.calls) - len(ff.calls.facts) for ff in facts)
    assert plain > 100 and sum(len(ff.calls.facts) for ff in facts) > 20
    for ff in facts:
        back = pickle.loads(pickle.dumps(ff, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == ff and list(back.calls.edge_sites()) == list(ff.calls.edge_sites())
        assert [back.calls[i] for i in range(len(ff.calls))] == list(ff.calls), ff.path
