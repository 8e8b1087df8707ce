"""What a switch is, from what it does: the code it gates and where its value goes.

instrumentation (sub-kinds dump, trace, profile, level, log): the gated code only observes;
test-hook: it injects a fault or runs test-only code; feature: the gated code computes, or
the value is a number the code computes with; output-path / input-path: the value names a
location that is written / only read; config otherwise.  The name decides only when the code
says nothing (no gated call, no use of the value seen), read as ``_``-separated words.
Each decision keeps its evidence as ``file:line`` reasons.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, fields

from cs_audit.joins.callgraph import EMITTER_ROLES, TreeModel
from cs_audit.joins.gates import site_switch
from cs_audit.model import FileFacts, GatedSite, SwitchRead, distinct_levels
from cs_audit.ruleset import RuleSet, SwitchKinds

#: categories whose switches only change what is observed (the ones §2 and REMOVE are about)
OBSERVING = ("instrumentation", "test-hook")
_OBSERVE_ROLES = EMITTER_ROLES | {"sync", "flush", "timestamp", "open"}
_EVIDENCE = 3  # file:line examples kept per kind of evidence
_BY_NAME = "tie-breaker: "


@dataclass
class _Evidence:
    observe: list[str] = field(default_factory=list)
    compute: list[str] = field(default_factory=list)
    inject: list[str] = field(default_factory=list)
    #: observing calls that are more than a log line (a sync, a dump, a timer)
    strong: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    numeric: list[str] = field(default_factory=list)
    #: a log level: the default is a level name, or the value goes to the logging set-up
    logconf: list[str] = field(default_factory=list)
    #: the value itself computes: it picks a value (`x if X else 0`) or is a number in arithmetic
    value: list[str] = field(default_factory=list)


_EVIDENCE_FIELDS = tuple(f.name for f in fields(_Evidence))


def _last(callee: str) -> str:
    return callee.rsplit(".", 1)[-1]


def _words(name: str) -> list[str]:
    return [w for w in name.upper().split("_") if w]


def name_kind(name: str, kinds: SwitchKinds) -> str | None:
    """The instrumentation sub-kind the name's words say, if any."""
    words = _words(name)
    for kind, anywhere, last in kinds.name_kinds:
        if anywhere.intersection(words) or (words and words[-1] in last):
            return kind
    return None


def _uses(model: TreeModel, rs: RuleSet, reads: list[SwitchRead], var: str, ev: _Evidence,
          call_lines: dict[str, list[int]] | None = None) -> None:
    """Where the value of each read goes: the calls around the read, and the calls that name
    the local, ``self.x`` attribute or module constant it is stored in."""
    # a file's rows are a function of its facts, the variable and the rules alone, so they are
    # kept with the site gates (``SiteGates.uses``) and hold while the file's facts do
    kept = model.use_rows
    for path in dict.fromkeys(read.path for read in reads):
        rows = kept.get((path, var))
        if rows is None:
            facts = model.facts.get(path)
            if facts is None:
                continue
            rows = kept[(path, var)] = _file_uses(rs, path, facts, var, call_lines)
        found, unless_written = rows
        for name, items in zip(_EVIDENCE_FIELDS, found):
            if items:
                getattr(ev, name).extend(items)
        if unless_written and not ev.write:
            ev.read.extend(unless_written)


def _file_uses(rs: RuleSet, path: str, facts: FileFacts, var: str, call_lines: dict[str, list[int]] | None,
               ) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """``_uses`` in one file: what each ``_Evidence`` field gets (in field order), and the
    reads that count when no evidence so far writes."""
    kinds = rs.switch_kinds
    assert kinds is not None
    ev = _Evidence()
    env = [r for r in facts.env_reads if r.var == var]
    for r in env:
        if r.default and r.default.strip().upper() in kinds.log_levels:
            ev.logconf.append(f"{path}:{r.line} default {r.default.strip()!r}")
        if r.used_as:
            _value_use(rs, f"{path}:{r.line}", r.used_as, ev)
        for depth, callee in enumerate(r.wrapped_by):
            if _own_method(callee, r.code, rs):
                break  # `envs.X.copy()`: the value's own method, no place it is handed to
            if not _sink(rs, f"{path}:{r.line}", callee, None, None, ev) and depth == 0:
                _handed(rs, f"{path}:{r.line}", callee, ev)
    targets: list[tuple[str, str | None]] = []  # (name, scope: function, class prefix or None)
    wraps: list[tuple[int, int, str]] = []
    for r in env:
        wraps.append((r.line, r.end_line, r.code))
        # the statement's target holds the value only through conversions and path joins:
        # `self.dumper = Dumper(interval=int(getenv(...)))` holds a Dumper, not the value
        if r.assigned_to and all(_transparent(callee, rs) for callee in r.wrapped_by):
            name = r.assigned_to
            if name.startswith("self.") and r.function and "." in r.function:
                targets.append((name, r.function.rsplit(".", 1)[0] + "."))
            elif r.function is None:
                targets.append((name, None))
            else:
                targets.append((name, r.function))
    # a path joined from it further on (`path = os.path.join(table_dir, f)`) counts where the
    # code both writes and reads it back (a store's file), and its reads where nothing under
    # the value is written (a model or config folder).  A write alone there says nothing (a
    # system location such as `TMPDIR` holds stores read back through a function's return),
    # nor a read beside writes (a test reading what the program it ran wrote to its artifacts)
    joined = _joined_further(facts.path_values, targets)
    joined_uses: dict[str, _Evidence] = defaultdict(_Evidence)
    patterns = [(re.compile(rf"(?<![\w.]){re.escape(n)}(?!\w)"), scope, n if further else "")
                for further, names in ((False, targets), (True, joined)) for n, scope in names]
    calls = facts.calls
    first = min((w[0] for w in wraps), default=0)
    last = max((w[1] for w in wraps), default=-1)
    if not patterns:
        # only the calls around a read can hit: a slice of the file's calls (sorted by line)
        lines = call_lines.get(path) if call_lines is not None else None
        if lines is None:
            lines = [c.line for c in calls]
            if call_lines is not None:
                call_lines[path] = lines
        calls = calls[bisect_left(lines, first):bisect_right(lines, last)]
    for call in calls:
        if call.resolution == "read":
            continue  # an attribute read, kept for the call graph (a property's getter)
        code = call.code
        hit = first <= call.line <= last and any(start <= call.line <= end and text and text in code for start, end, text in wraps)
        further = ""
        if not hit:
            for pattern, scope, joined_name in patterns:
                if scope is not None and not (call.function or "").startswith(scope) and call.function != scope:
                    continue
                if pattern.search(code):
                    hit, further = True, joined_name
                    break
        if not hit or _own_method(call.callee, "", rs, [p for p, _, _ in patterns], wraps):
            continue
        _sink(rs, f"{path}:{call.line}", call.callee, call.role, call.mode, joined_uses[further] if further else ev)
    for store in joined_uses.values():
        if store.write and store.read:
            ev.write.extend(store.write)
            ev.read.extend(store.read)
    # the reads of joined names count unless something writes: known once the rows are in
    unless_written = () if any(store.write for store in joined_uses.values()) else tuple(
        read for store in joined_uses.values() for read in store.read)
    return tuple(tuple(getattr(ev, name)) for name in _EVIDENCE_FIELDS), unless_written


def _joined_further(path_values: tuple[tuple[str | None, str, tuple[str, ...]], ...], targets: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """The names a location is joined into (`path = os.path.join(table_dir, f)` after
    `table_dir = getenv(...)`), each with its scope as ``_uses`` keeps them, to a fixed point."""
    held = set(targets)
    found: list[tuple[str, str | None]] = []
    grown = True
    while grown:
        grown = False
        for function, name, used in path_values:
            scope = (function.rsplit(".", 1)[0] + ".") if name.startswith("self.") and function and "." in function else function
            if (name, scope) in held:
                continue
            if any(u == n and (s is None or s == function or s.endswith(".") and (function or "").startswith(s))
                   for u in used for n, s in held):
                held.add((name, scope))
                found.append((name, scope))
                grown = True
    return found


def _value_use(rs: RuleSet, where: str, used_as: str, ev: _Evidence) -> None:
    """File what the expression around a read does with the value (``EnvRead.used_as``):
    picking a value or computing with it is feature evidence, picking an observer to build
    (`Tracer() if X else None`) observes."""
    kinds = rs.switch_kinds
    assert kinds is not None
    kind, _, callee = used_as.partition(":")
    last = _last(callee) if callee else ""
    if kind == "choice" and last and (kinds.observe.search(last) or rs.debug_name_re.search(last)):
        ev.observe.append(f"{where} {last}()")
        return
    why = f"{where} its value picks a value (`a if X else b`)" if kind == "choice" else f"{where} its value is a number in arithmetic"
    ev.value.append(why)
    ev.compute.append(why)


def _transparent(callee: str, rs: RuleSet) -> bool:
    """A call whose result is still the value (a conversion, a string method, a path join)."""
    kinds = rs.switch_kinds
    assert kinds is not None
    last = _last(callee)
    return bool(kinds.neutral.search(last) or kinds.numeric.search(last) or kinds.location_check.search(last)
                or callee in rs.path_builders or callee.startswith("os.path.") or last in ("Path", "PurePath"))


def _own_method(callee: str, code: str, rs: RuleSet, patterns: Sequence[re.Pattern[str]] = (),
                wraps: Collection[tuple[int, int, str]] = ()) -> bool:
    """Whether the call is a method of the value itself (`CFG.copy()`, `getenv(...).copy()`,
    `envs.X.get().copy()`): the value is its receiver, not an argument naming a place."""
    kinds = rs.switch_kinds
    assert kinds is not None
    if "." not in callee or kinds.path_method.search(_last(callee)):
        return False
    receiver = callee.rsplit(".", 1)[0]
    if receiver.endswith("()"):
        inner = receiver[:-2]
        return inner in rs.env_calls or _last(inner) in ("get", "getenv", "environ") or bool(code and code in receiver)
    value = code.rstrip("()") if code else ""
    if value and (value.endswith(receiver) or receiver.endswith(value)):
        return True  # the callee may be spelled through an import alias (`vllm.envs.X` for `envs.X`)
    return any(p.fullmatch(receiver) for p in patterns) or any(text and text.rstrip("()") == receiver for _, _, text in wraps)


def _handed(rs: RuleSet, where: str, callee: str, ev: _Evidence) -> None:
    """The value is an argument of a call that is no path sink: logged, or used."""
    kinds = rs.switch_kinds
    assert kinds is not None
    last = _last(callee)
    if (kinds.neutral.search(last) or kinds.location_check.search(last) or callee in rs.path_builders
            or callee.startswith("os.path.")):
        return
    if kinds.compute.search(last):
        ev.compute.append(f"{where} its value is handed to {last}()")
        return
    if kinds.logging_config.search(last):
        ev.logconf.append(f"{where} {last}()")
        return
    if kinds.observe.search(last) or rs.debug_name_re.search(last) or callee in rs.log_methods:
        ev.observe.append(f"{where} {last}()")
    else:
        ev.compute.append(f"{where} its value is handed to {last}()")


def _sink(rs: RuleSet, where: str, callee: str, role: str | None, mode: str | None, ev: _Evidence) -> bool:
    """File a call the value flows into: a writer, a reader, a number; False for none."""
    kinds = rs.switch_kinds
    assert kinds is not None
    if callee.startswith("open:"):
        callee, role, mode = "open", "open", callee.split(":", 1)[1]
    last = _last(callee)
    if kinds.location_check.search(last):
        return True  # whether it is there: neither written nor read
    if role == "open" or (role is None and callee in rs.open_functions):
        (ev.write if any(m in (mode or "r") for m in "wax+") else ev.read).append(f"{where} open({mode or 'r'})")
    elif kinds.write.search(last) or callee in rs.makedirs_functions:
        ev.write.append(f"{where} {last}()")
    elif kinds.read.search(last) or kinds.search_path.search(callee):
        ev.read.append(f"{where} {last}()")
    elif kinds.numeric.search(last):
        ev.numeric.append(f"{where} {last}()")
    else:
        return False
    return True


def _gated(model: TreeModel, rs: RuleSet) -> dict[str, _Evidence]:
    """switch -> what the calls it gates directly do (an emitter's own arguments left out)."""
    out: dict[str, _Evidence] = defaultdict(_Evidence)
    # a file's rows are a function of its facts, the rules and its sites' answers, so they are
    # kept with those answers (``SiteGates.rows``) and hold while they do
    kept = model.gate_rows
    for path in sorted(model.facts):
        rows = kept.get(path)
        if rows is None:
            rows = kept[path] = _gated_rows(model, rs, path)
        for text, kind, where in rows:
            getattr(out[text], kind).append(where)
    return out


def _gated_rows(model: TreeModel, rs: RuleSet, path: str) -> tuple[tuple[str, str, str], ...]:
    """(switch, ``_Evidence`` field, file:line and what) of what one file's gated calls do, in order."""
    kinds = rs.switch_kinds
    assert kinds is not None
    rows: list[tuple[str, str, str]] = []
    for call in model.facts[path].calls:
        if not call.gates or call.in_emitter_args or call.resolution == "read":
            continue
        switch = site_switch(model, path, call.function, call.gates, rs)
        if switch is None or switch.kind != "env":
            continue
        last = _last(call.callee)
        where = f"{path}:{call.line} {last}()"
        if kinds.inject.search(last):
            rows.append((switch.text, "inject", where))
        elif kinds.compute.search(last):
            rows.append((switch.text, "compute", where))
        elif call.role not in _OBSERVE_ROLES and (
                kinds.location_check.search(last)
                or (kinds.generic.search(last) and not _observing_receiver(call.callee, rs))):
            continue
        elif call.role in _OBSERVE_ROLES or kinds.observe.search(last) or rs.debug_name_re.search(last):
            rows.append((switch.text, "observe", where))
            if call.role not in ("log", "print") and not kinds.announce.search(last):
                rows.append((switch.text, "strong", where))
        elif not kinds.neutral.search(last):
            rows.append((switch.text, "compute", where))
    for line, function, gates, what in model.facts[path].gated_effects:
        switch = site_switch(model, path, function, gates, rs)
        if switch is not None and switch.kind == "env":
            rows.append((switch.text, "compute", f"{path}:{line} {what}"))
    return tuple(rows)


def _observing_receiver(callee: str, rs: RuleSet) -> bool:
    """Whether a generic call's receiver observes: `self.timer.start()`, `prof.step()`."""
    kinds = rs.switch_kinds
    assert kinds is not None
    receiver = callee.rsplit(".", 1)[0] if "." in callee else ""
    return bool(receiver) and bool(kinds.observing_receiver.search(receiver) or rs.debug_name_re.search(receiver))


def _writes_output(strong: list[str], kinds: SwitchKinds) -> bool:
    """Whether some observing call is one that produces output (a dump, a recorder, a trace),
    not a sync or a check."""
    for row in strong:
        last = row.rsplit(" ", 1)[-1].rstrip("()")
        if kinds.write.search(last) or kinds.producing.search(last):
            return True
    return False


def _cite(label: str, rows: list[str]) -> str:
    rows = list(dict.fromkeys(rows))
    more = f" (+{len(rows) - _EVIDENCE} more)" if len(rows) > _EVIDENCE else ""
    return f"{label}: {', '.join(rows[:_EVIDENCE])}{more}"


def _sub_kind(name: str, sites: tuple[GatedSite, ...], kinds: SwitchKinds) -> str:
    if any(s.role == "dump" for s in sites):
        return "dump"
    if distinct_levels(sites):
        return "level"  # the code compares it with levels: whatever its name says
    return name_kind(name, kinds) or "log"


def categorize(
    model: TreeModel, rs: RuleSet, reads: dict[str, list[SwitchRead]], sites: dict[str, list[GatedSite]],
) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """switch -> (category, instrumentation sub-kind or "", the evidence that decided)."""
    kinds = rs.switch_kinds
    assert kinds is not None
    gated = _gated(model, rs)
    out: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    call_lines: dict[str, list[int]] = {}  # path -> the line of each of its calls, made once
    for var, var_reads in reads.items():
        ev = gated.get(var) or _Evidence()
        _uses(model, rs, var_reads, var, ev, call_lines)
        gated_sites = tuple(sites.get(var, ()))
        # sites in functions reached only under the switch observe too (emitters, dumps, syncs)
        seen = {o.rsplit(" ", 1)[0] for o in ev.observe}
        for site in gated_sites:
            if f"{site.path}:{site.line}" not in seen:
                ev.observe.append(f"{site.path}:{site.line} {site.work}")
            # a sync in a log line's arguments (`info("%f", x.norm().item())`) is more than the line
            if site.role not in ("log", "print") or site.gpu_sync:
                ev.strong.append(f"{site.path}:{site.line} {site.work}")
        words = set(_words(var))
        named = name_kind(var, kinds)
        test_named = bool(words & kinds.test_words)
        out[var] = _decide(var, ev, gated_sites, words, named, test_named, kinds)
    return out


def written_location(model: TreeModel, rs: RuleSet, var: str, paths: list[str]) -> bool:
    """Whether the value of ``var`` (read in ``paths``) names a location the code writes, as
    ``categorize`` would see it: a writer it reaches, not a cache or library it names, or with
    no use seen, a name that says output."""
    kinds = rs.switch_kinds
    assert kinds is not None
    ev = _Evidence()
    _uses(model, rs, [SwitchRead(p, 0, None, False) for p in dict.fromkeys(paths)], var, ev)
    words = set(_words(var))
    output_named = bool(words & kinds.output_words)
    if words & kinds.input_words and not output_named:
        return False
    if ev.write:
        return not ev.read or output_named
    return not ev.read and not ev.compute and not ev.numeric and output_named


def by_name(reasons: tuple[str, ...]) -> bool:
    """Whether the name decided (the reasons of ``categorize`` say so in their last words)."""
    return bool(reasons) and reasons[-1].startswith(_BY_NAME)


def _decide(var: str, ev: _Evidence, sites: tuple[GatedSite, ...], words: set[str], named: str | None,
            test_named: bool, kinds: SwitchKinds) -> tuple[str, str, tuple[str, ...]]:
    parts = _words(var)
    location = bool(parts) and parts[-1] in kinds.path_words and not words & kinds.toggle_words
    number = bool(words & kinds.number_words)
    output_named = bool(words & kinds.output_words)
    # a cache, configuration or library location: the engine keeps or reads what is there
    kept = bool(words & kinds.input_words) and not output_named
    if not test_named:
        ev.compute.extend(ev.inject)
        ev.inject = []
    if ev.write:
        written = _cite("its value names a location that is written", ev.write)
        if kept:
            return "input-path", "", (written, "its name says a cache, configuration or library: state the engine keeps")
        if ev.read and not output_named:
            return "input-path", "", (written, _cite("and read back", ev.read), "a cache or store the engine keeps")
        return "output-path", "", (written,)
    if ev.read:
        return "input-path", "", (_cite("its value names a location that is only read", ev.read),)
    if ev.logconf:
        return "config", "", (_cite("its value is a log level", ev.logconf),
                              "the logging set-up a user chooses, not instrumentation")
    if ev.inject:
        return "test-hook", "", (_cite("it gates fault injection", ev.inject),)
    if test_named and (ev.compute or ev.observe):
        return "test-hook", "", (_cite("it gates test-only code", ev.compute or ev.observe), "its name says test")
    if location and ev.observe:
        # a location whose code only logs or checks it names what is read; output is what a
        # dump, a recorder or a profiler under it writes, or a name that says output
        if not kept and (output_named or _writes_output(ev.strong, kinds)):
            return "output-path", "", (_cite("it gates observing code", ev.observe),
                                       "its name says a location: where that output goes")
        return "input-path", "", (_cite("it gates only log lines or checks", ev.observe),
                                  "its name says a location that nothing under it writes")
    if ev.value and not ev.strong:
        # the value computes, and what it gates only logs: a feature, whatever its name says
        return "feature", "", (_cite("the code computes with its value", ev.value),
                               *((_cite("what it gates only logs", ev.observe),) if ev.observe else ()))
    if (ev.numeric or number) and not named:
        why = _cite("the code computes with its value", ev.numeric) if ev.numeric else "its name says a number the code uses"
        return "feature", "", (why, *((_cite("what it gates only logs", ev.observe),) if ev.observe and not ev.compute else ()))
    if ev.observe and not ev.compute:
        if not ev.strong and not named:
            return "config", "", (_cite("what it gates is only a log line", ev.observe),
                                  "its name names no instrumentation: the line announces a setting")
        return "instrumentation", _sub_kind(var, sites, kinds), (_cite("it gates only observing code", ev.observe),)
    if ev.compute:
        if ev.observe and named and not words & kinds.feature_words:
            return "instrumentation", _sub_kind(var, sites, kinds), (
                _cite("it gates observing code", ev.observe), _cite("and other work", ev.compute),
                f"its name says {named}")
        return "feature", "", (_cite("the code under it computes differently", ev.compute),)
    if ev.numeric and not named:
        return "feature", "", (_cite("the code computes with its value", ev.numeric),)
    seen = (_cite("a number", ev.numeric),) if ev.numeric else ("nothing gated or fed seen",)
    if location:
        if words & kinds.output_words:
            return "output-path", "", (*seen, f"{_BY_NAME}its name says an output location")
        return "input-path", "", (*seen, f"{_BY_NAME}its name says a location")
    if test_named:
        return "test-hook", "", (*seen, f"{_BY_NAME}its name says test")
    if named:
        return "instrumentation", named, (*seen, f"{_BY_NAME}its name says {named}")
    return "config", "", ("nothing it gates or feeds says more",)
