"""``env-read-hot``: an env var read evaluated per call inside a hot function, where it is
read, or, for a small accessor that hands the read on, at its hot call sites (``via`` names
the accessor): each read is reported once."""

from __future__ import annotations

from collections.abc import Sequence

from cs_audit.analysis import default_on_emitter
from cs_audit.analysis.sites import Findings, per_step_cost, when_words
from cs_audit.frequency import Frequencies
from cs_audit.joins.callgraph import TreeModel
from cs_audit.joins.env_helpers import helper_switches
from cs_audit.joins.runs import call_run, outside_event_loop, reached, run_of, through_memo
from cs_audit.model import EnvReadDetail, Finding, Words, spoken
from cs_audit.ruleset import RuleSet

RULE = "env-read-hot"


def cached_registries(model: TreeModel, rs: RuleSet) -> dict[str, str]:
    """registry id -> its ``cached_after`` call, for the registries whose cache the tree turns
    on: the function is defined in the tree and called from code that runs once (start-up).
    Hot code is taken to run after that call (a stated limit: the order is not traced)."""
    out: dict[str, str] = {}
    for registry in rs.registries:
        if not registry.cached_after or "." not in registry.cached_after:
            continue
        module, name = registry.cached_after.rsplit(".", 1)
        for path in model.resolver.by_module.get(module, ()):
            callers = model.callers.get((path, name), ())
            if any(not reached(model, e.caller) for e in callers):
                out[registry.id] = registry.cached_after
    return out


def check(model: TreeModel, rs: RuleSet, out: Findings) -> None:
    cached = cached_registries(model, rs)
    # the vars read through a cached registry: a helper that reads only those is cached too
    cached_vars = {
        read.var: cached[read.via.partition(":")[2]] for ff in model.facts.values() for read in ff.env_reads
        if read.var and read.via.partition(":")[2] in cached and read.via.startswith("registry:")
    }
    for path in sorted(model.facts):
        for read in model.facts[path].env_reads:
            if not read.per_call or read.function is None:
                continue
            key = (path, read.function)
            if _at_callers(model, key):
                continue  # an accessor's reads are reported at its call sites
            if not reached(model, key) or outside_event_loop(model, key, read):
                continue
            run = run_of(model, path, read.function, read.gates, read, rs)
            switch, freq = run.switch, run.frequency
            event = "env_registry_get" if read.via.startswith("registry") else "env_read"
            after = cached.get(read.via.partition(":")[2], "") if read.via.startswith("registry") else ""
            cost = 0.0 if after else per_step_cost(rs, event, freq)
            out.add(RULE, path, read.line, read.end_line, read.function, switch, freq, False, read.code, cost,
                    detail=EnvReadDetail(var=read.var or "<dynamic>", via=read.via, cached=after),
                    cols=(read.col, read.end_col), run=run)
        for site in model.edge_sites.get(path, ()):  # a site that lands nowhere reads no helper
            if site.role is not None or site.function is None:
                continue
            key = (path, site.function)
            if not reached(model, key) or _at_callers(model, key) or outside_event_loop(model, key, site):
                continue
            for target in model.resolved_calls.get((path, site.line, site.end_line, site.callee), ()):
                # a helper that is no accessor keeps its reads where they are, reported there:
                # its call sites would count each read once more per level of the chain
                if target not in model.accessors:
                    continue
                # a memoised helper reads once per distinct arguments, not at each call
                run = through_memo(model, path, site, call_run(model, path, site, (target,), rs), rs)
                switch, freq = run.switch, run.frequency
                reads = helper_switches(model, target, site.literal_args)
                after = cached_vars[reads[0]] if all(v in cached_vars for v in reads) else ""
                cost = 0.0 if after else per_step_cost(rs, "env_read_int", freq) * len(reads)
                out.add(RULE, path, site.line, site.end_line, site.function, switch, freq, False,
                        site.code or site.callee, cost,
                        detail=EnvReadDetail(var=",".join(reads), via=f"helper:{target[1]}", cached=after),
                        cols=(site.col, site.end_col), run=run)
                break


def known_cheap(f: Finding) -> bool:
    """Whether ``f`` is a read the audit knows costs nothing per call: through a registry the
    engine caches at start-up.  Such a read is checked, not a finding: no default-on count,
    no SARIF result, no ``fix`` target (the report lists it under "checked, cheap")."""
    return f.rule == RULE and isinstance(f.detail, EnvReadDetail) and bool(f.detail.cached)


def split_cheap(findings: tuple[Finding, ...]) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """(the findings, the reads known cheap) of ``findings``."""
    return tuple(f for f in findings if not known_cheap(f)), tuple(f for f in findings if known_cheap(f))


def _at_callers(model: TreeModel, key: tuple[str, str]) -> bool:
    """Whether the reads of function ``key`` are reported at its call sites instead (an accessor
    that is called; a root has no call sites to carry them)."""
    return key in model.accessors and key not in model.roots and bool(model.callers.get(key))


def message(f: Finding, frequencies: Frequencies) -> str:
    detail = f.detail if isinstance(f.detail, EnvReadDetail) else EnvReadDetail("?", "")
    how = f"through `{detail.via.split(':', 1)[1]}()`" if detail.via.startswith("helper:") else f"via `{detail.via}`"
    if detail.cached:
        return (f"`{detail.var}` is read {how} {when_words(f, frequencies)}, but the registry is cached once "
                f"`{detail.cached}()` has run at start-up: not a per-call read after it (low).")
    return (f"`{detail.var}` is read from the environment {how} {when_words(f, frequencies)}; "
            "resolve it once at import and test the constant.")


def words(f: Finding, others: Sequence[Finding], phrase: str) -> Words:
    """§1's words for ``f``: its phrase, the switches read (those named), and whether the read
    is in the message of a log line on the same statement (``others``)."""
    var = f.detail.var if isinstance(f.detail, EnvReadDetail) else ""
    items = [(phrase, False)]
    for i, name in enumerate(v for v in var.split(",") if v and not v.startswith("<")):
        items += [(" / " if i else " of ", False), (name, True)]
    if any(o.rule == default_on_emitter.RULE and o.line <= f.line <= o.end_line for o in others):
        items.append((" in the message", False))
    return spoken(items)
