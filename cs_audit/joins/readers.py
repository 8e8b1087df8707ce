"""Who reads what a switch's emitters write.

Writers are open()/dump sites whose file base name the libcst walker recovered
(`accept_rate.jsonl`, `step_{role}.jsonl`, `{name}.jsonl`); a `{param}` is filled
in from the literal arguments at each call of the writing function
(`emit("recompact_trace", ...)` -> `recompact_trace.jsonl`).  Readers are other
files that name such a file (a literal, a glob) and shell pipelines that grep a
word of a gated log line.  Matching is by base name, globs on either side.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from cs_audit.joins.callgraph import TreeModel, gating_switches
from cs_audit.joins.gates import site_switch, site_switches
from cs_audit.model import ScriptFacts, by_text
from cs_audit.ruleset import RuleSet

_PLACEHOLDER = re.compile(r"\{[^}]*\}")
#: the kinds of switch a writer is filed under: those with a name (a level check or an
#: unknown env name is no switch anyone sets)
_NAMED = ("env", "flag")


def _regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]*\}|\*|\?)", pattern)
    body = "".join(".*" if p in ("*",) or _PLACEHOLDER.fullmatch(p or "") else "." if p == "?" else re.escape(p) for p in parts)
    return re.compile(body)


def _example(pattern: str) -> str:
    return _PLACEHOLDER.sub("x1", pattern).replace("*", "x1").replace("?", "x")


def names_match(writer: str, ref: str) -> bool:
    return bool(_regex(writer).fullmatch(_example(ref)) or _regex(ref).fullmatch(_example(writer)))


@dataclass(frozen=True, slots=True)
class Writer:
    switch: str
    path: str
    line: int
    pattern: str


def writers(model: TreeModel, rs: RuleSet) -> list[Writer]:
    """Files written under a switch, with `{param}` filled in at each literal call site."""
    out: list[Writer] = []
    for path in sorted(model.facts):
        for site in model.fact_sites[path]:
            if not site.path_pattern:
                continue
            key = (path, site.function) if site.function else None
            inner = [sw.text for sw in site_switches(model, path, site.function, site.gates, rs) if sw.kind in _NAMED]
            if key is not None and key not in model.freq_default:
                entered = sorted(model.entry_switches.get(key, ()), key=by_text)
                inner += [sw.text for sw in entered] or gating_switches(model, key)
            for pattern in site.path_pattern.split("|"):
                if "{" in pattern and key is not None and key in model.functions:
                    out.extend(_at_call_sites(model, rs, key, pattern, inner))
                if _stem(pattern):  # not `{req_id}.jsonl`, `*.pt`: too generic to tie a reader to
                    out.extend(Writer(sw, path, site.line, pattern) for sw in dict.fromkeys(inner))
    return sorted(set(out), key=lambda w: (w.switch, w.path, w.line, w.pattern))


def _stem(pattern: str) -> str:
    """The literal part of a file name pattern, without placeholders, globs and extension."""
    return _PLACEHOLDER.sub("", pattern).replace("*", "").replace("?", "").rsplit(".", 1)[0].strip("_-.")


def _at_call_sites(model: TreeModel, rs: RuleSet, key: tuple[str, str], pattern: str, inner: list[str]) -> list[Writer]:
    function = model.functions[key]
    params = [p for p in function.params if p not in ("self", "cls")]
    found = []
    for edge in model.callers.get(key, ()):
        filled = pattern
        for name in _PLACEHOLDER.findall(pattern):
            param = name[1:-1]
            index = params.index(param) if param in params else -1
            value = edge.site.literal_args[index] if 0 <= index < len(edge.site.literal_args) else None
            filled = filled.replace(name, value if value else "*")
        filled = filled.rsplit("/", 1)[-1]  # a parameter that holds a whole path (`dump(x, "/tmp/a.jsonl")`)
        switches = [edge.switch.text] if edge.switch and edge.switch.kind in _NAMED else []
        for switch in dict.fromkeys(switches + inner):
            if _stem(filled):
                found.append(Writer(switch, edge.path, edge.site.line, filled))
    return found


def readers(
    model: TreeModel,
    rs: RuleSet,
    written: list[Writer],
    scripts: dict[str, ScriptFacts],
) -> dict[str, list[tuple[str, int, str]]]:
    """switch -> (path, line, pattern) of the scripts that read what it writes."""
    refs: list[tuple[str, int, str]] = []
    for path, ff in model.facts.items():
        refs.extend((path, line, name) for line, name in ff.file_refs)
    for path, sf in scripts.items():
        refs.extend((path, line, name) for line, name in sf.file_refs)
    writing_lines = {(path, site.line) for path, sites in model.fact_sites.items() for site in sites if site.path_pattern}
    out: dict[str, set[tuple[str, int, str]]] = {}
    for w in written:
        for path, line, name in refs:
            if path == w.path or (path, line) in writing_lines or not _stem(name):
                continue  # the writing module naming its own file; a bare `*.jsonl`
            if names_match(w.pattern, name):
                out.setdefault(w.switch, set()).add((path, line, name))
    for switch, path, line, pattern in _grep_readers(model, rs, scripts):
        out.setdefault(switch, set()).add((path, line, f"grep {pattern}"))
    return {switch: sorted(rows) for switch, rows in out.items()}


def _grep_readers(model: TreeModel, rs: RuleSet, scripts: dict[str, ScriptFacts]) -> Iterator[tuple[str, str, int, str]]:
    greps = [(path, line, pattern) for path, sf in scripts.items() for line, pattern in sf.greps]
    if not greps:
        return
    for path in sorted(model.facts):
        for site in model.fact_sites[path]:
            if site.role != "log":
                continue
            switch = site_switch(model, path, site.function, site.gates, rs)
            if switch is None or switch.kind not in _NAMED:
                continue
            for script, line, pattern in greps:
                if pattern in site.code:
                    yield switch.text, script, line, pattern
