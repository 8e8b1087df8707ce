"""Each finding's hot path, read from the joins' shortest-chain tree without copying it.

The joins keep, for every function a hot root reaches, the edge it was first reached by
(``TreeModel.hot_via_default`` / ``hot_via_any``): the chains of all functions form one tree,
so together they take memory linear in the number of functions.  A finding names its chain
by its root, its length and its last calls: a chain of N functions is worked out once per
function (not once per finding, and not as N copies of its prefixes), and what a report
shows of it is at most ``SHOWN`` functions long, however deep the call graph is.  The whole
chain of one site is ``cs-audit why FILE:LINE`` (``callgraph.hot_chain_edges``)."""

from __future__ import annotations

from dataclasses import dataclass

from cs_audit.joins.callgraph import FuncKey, TreeModel, function_id
from cs_audit.joins.reach import Edge

#: a chain of at most this many functions is shown whole; a longer one as its root, then
#: the last ``TAIL`` functions down to the site's (what a reader acts on: where the hot
#: loop starts and the calls nearest the site)
SHOWN = 10
TAIL = SHOWN - 2


@dataclass(frozen=True, slots=True)
class ShownPath:
    """What a report shows of one chain: ``steps`` (root first, `module.qualname`) and how
    many functions between ``steps[0]`` and ``steps[1]`` were left out (0: the whole chain)."""

    steps: tuple[str, ...]
    elided: int = 0


class Chains:
    """The shown chain of each function from one shortest-chain tree (``via``), each worked out
    once and shared by every finding in that function."""

    def __init__(self, model: TreeModel, via: dict[FuncKey, Edge]) -> None:
        self._model = model
        self._via = via
        self._root_length: dict[FuncKey, tuple[FuncKey, int]] = {}
        self._shown: dict[FuncKey, ShownPath | None] = {}
        self._names: dict[FuncKey, str] = {}

    def shown(self, key: FuncKey) -> ShownPath | None:
        """The chain from a hot root to ``key`` as a report shows it (None when no root reaches
        it); the first element of ``steps`` is always the root."""
        if key not in self._shown:
            self._shown[key] = self._work_out(key)
        return self._shown[key]

    def root_of(self, key: FuncKey) -> FuncKey | None:
        """The hot root ``key``'s chain starts at (None when no root reaches it)."""
        if key not in self._via:
            return key if key in self._model.roots else None
        return self._root_and_length(key)[0]

    def _work_out(self, key: FuncKey) -> ShownPath | None:
        if key not in self._via:
            return ShownPath((self._name(key),)) if key in self._model.roots else None
        root, length = self._root_and_length(key)
        keep = length if length <= SHOWN else TAIL
        tail = [key]
        while len(tail) < keep and tail[-1] in self._via:
            tail.append(self._via[tail[-1]].caller)  # type: ignore[arg-type]
        if tail[-1] == root:
            tail.pop()
        steps = (self._name(root), *(self._name(k) for k in reversed(tail)))
        return ShownPath(steps, length - len(steps))

    def _root_and_length(self, key: FuncKey) -> tuple[FuncKey, int]:
        """The root of ``key``'s chain and its number of functions, root and ``key`` included:
        walked up only as far as a function already worked out, so all of them cost one step
        per function of the tree."""
        up: list[FuncKey] = []
        at = key
        while at not in self._root_length and at in self._via and len(up) <= len(self._via):
            up.append(at)
            at = self._via[at].caller  # type: ignore[assignment]
        root, length = self._root_length.get(at, (at, 1))
        for k in reversed(up):
            length += 1
            self._root_length[k] = (root, length)
        return self._root_length.get(key, (root, length))

    def _name(self, key: FuncKey) -> str:
        # one string per function, shared by every chain that passes through it
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = function_id(self._model, key)
        return name


def chain_lines(model: TreeModel, start: FuncKey, edges: list[Edge]) -> list[str]:
    """A chain as ``why`` prints it: the root with where it is, then each call with its site
    and how it was resolved (unescaped: the caller makes the text safe for its output)."""
    f = model.functions[start]
    rule = model.roots.get(start)
    lines = [f"{function_id(model, start)}  ({start[0]}:{f.line}{', hot root: ' + rule if rule else ''})"]
    for e in edges:
        gate = f", only with {e.switch.text}" if e.switch else ""
        lines.append(f"-> {function_id(model, e.callee)}  (called at {e.path}:{e.site.line} `{e.site.code}`, {e.how}{gate})")
    return lines
