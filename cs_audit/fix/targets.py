"""From an audit to the sites each fix should change: the scan's findings of the chosen
rules that no comment suppresses, and for eager-format every eager log call the extraction
saw (a record behind a gate is not reported, yet is made lazy as well: the lazy form is never
slower), unless ``--hot-only`` keeps to the findings on a hot path."""

from __future__ import annotations

from collections.abc import Callable

from cs_audit.fix.base import Target
from cs_audit.frequency import is_hot
from cs_audit.model import AuditResult, CallSite, EmitterDetail, EnvReadDetail, FileFacts, Finding


def _suppressed(facts: FileFacts | None, rule: str, line: int) -> bool:
    if facts is None:
        return False
    return any(rule in s.rules and s.problem is None and (s.whole_file or line == s.line or line in s.covers)
               for s in facts.suppressions)


def targets_by_file(result: AuditResult, facts: dict[str, FileFacts], rules: tuple[str, ...],
                    hot_only: bool, root: str = ".", into: str | None = None,
                    unsafe: bool = False, own: Callable[[str, int, int], bool] | None = None,
                    ) -> dict[str, dict[str, list[Target]]]:
    """``own``: whether lines of a file are the fork's own (None: every line is); a target on
    the upstream's lines is left alone, so a rebase meets no edit of ours there."""
    from cs_audit.ci.suppress import apply_suppressions

    kept = apply_suppressions(result).kept
    out: dict[str, dict[str, list[Target]]] = {}

    def add(path: str, target: Target) -> None:
        if own is None or own(path, target.line, target.end_line):
            out.setdefault(path, {}).setdefault(target.rule, []).append(target)

    findings = [f for f in kept if f.rule in rules and (not hot_only or is_hot(f.frequency))]
    if "eager-format" in rules:
        seen: set[tuple[str, int, int]] = set()
        for f in findings:
            if f.rule == "eager-format":
                detail = f.detail if isinstance(f.detail, EmitterDetail) else None
                col = max(f.col - 1, 0)
                if detail is not None and detail.level == "local":
                    continue  # a message built in a local: where to move it is the author's call
                if detail is not None and detail.level == "helper":
                    add(f.path, _helper_target(f, col, facts, root))
                else:
                    add(f.path, Target(f.rule, f.line, f.end_line, col, _callee(f), ("log",)))
                seen.add((f.path, f.line, col))
        if not hot_only:
            for path, ff in facts.items():
                for site in ff.calls:
                    if isinstance(site, CallSite) and site.role == "log" and site.eager and \
                            (path, site.line, site.col) not in seen and not _suppressed(ff, "eager-format", site.line):
                        add(path, Target("eager-format", site.line, site.end_line, site.col, site.callee, ("log",)))
    replaced: set[tuple[str, str]] = set()  # copies duplicate-helper replaces: nothing else to fix in them
    if "duplicate-helper" in rules:
        from cs_audit.fix.duplicate_helper import plan_groups

        kept_sites = {(f.path, f.line) for f in findings if f.rule == "duplicate-helper"}
        for path, targets in plan_groups(result, facts, root, into, kept_sites).items():
            for t in targets:
                add(path, t)
                if not t.data[-1]:
                    replaced.add((path, t.data[3]))
    if "env-read-hot" in rules:
        _env_targets(findings, facts, root, add, replaced)
    for f in findings:
        if f.rule == "redundant-flush":
            add(f.path, Target(f.rule, f.line, f.end_line, max(f.col - 1, 0), "flush"))
        elif f.rule == "per-call-open":
            add(f.path, Target(f.rule, f.line, f.end_line, max(f.col - 1, 0), "open", (unsafe,)))
    return out


def _callee(f: Finding) -> str:
    detail = f.detail
    return detail.emitter if isinstance(detail, EmitterDetail) else ""


def _env_targets(findings: list[Finding], facts: dict[str, FileFacts], root: str, add: Callable[[str, Target], None],
                 replaced: set[tuple[str, str]]) -> None:
    """Reads of one known variable: where the finding is, or inside the helper it reads through
    (the helper's reads whose key is a literal, not a parameter)."""
    import os

    from cs_audit.fix.env_read_hot import blocked_vars

    def text(path: str) -> str | None:
        try:
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return None

    from cs_audit.fix.modules import module_index

    blocked: dict[str, str] | None = None
    index: dict | None = None
    done: set[tuple[str, int, str]] = set()
    for f in findings:
        if f.rule != "env-read-hot" or not isinstance(f.detail, EnvReadDetail):
            continue
        if blocked is None:
            blocked = blocked_vars(facts, text)
        if f.detail.via.startswith("helper:"):
            # a helper's own reads of fixed names are hoisted in the helper, once for all its callers
            index = index if index is not None else module_index(root, list(facts))
            qualname = f.detail.via.split(":", 1)[1]
            where = _helper_file(f.path, f.line, max(f.col - 1, 0), qualname, facts, root, index)[0]
            reads = facts[where].env_reads if where in facts else ()
            for r in reads:
                if r.function == qualname and r.var and r.var_param is None and r.per_call and \
                        (where, r.line, r.code) not in done and (where, qualname) not in replaced:
                    done.add((where, r.line, r.code))
                    add(where, Target(f.rule, r.line, r.end_line, r.col, r.via, (r.var, r.code, blocked.get(r.var))))
            continue
        var = f.detail.var
        if not var or var == "<dynamic>" or "," in var or (f.path, f.line, f.code) in done or \
                (f.path, f.function or "") in replaced:
            continue
        done.add((f.path, f.line, f.code))
        add(f.path, Target(f.rule, f.line, f.end_line, max(f.col - 1, 0), f.detail.via, (var, f.code, blocked.get(var))))


def _helper_file(path: str, line: int, col: int, qualname: str, facts: dict[str, FileFacts], root: str,
                 index: dict) -> tuple[str, str, str]:
    """(file of the helper called at path:line:col, how the call names it, the callee as
    written): ``local``, ``attribute`` (`mod.helper`) or ``imported``; the file is "" when
    the helper is not in the tree."""
    from cs_audit.fix.modules import find_module

    ff = facts.get(path)
    site = next((c for c in (ff.calls if ff else ()) if isinstance(c, CallSite) and c.line == line and c.col == col
                 and c.role is None), None)
    callee = site.callee if site is not None else qualname
    where, how = path, "local"
    if site is not None and "." in callee and not callee.startswith("self."):
        found = find_module(index, callee.rsplit(".", 1)[0], path, root)
        if found:
            where, how = found, "attribute"
    elif site is not None and ff is not None and not any(fn.qualname == qualname for fn in ff.functions):
        origin = dict(ff.aliases).get(callee, "")
        found = find_module(index, origin.rsplit(".", 1)[0], path, root) if "." in origin else None
        where, how = (found, "imported") if found else ("", how)
    return where, how, callee


def _helper_target(f: Finding, col: int, facts: dict[str, FileFacts], root: str) -> Target:
    """A call of a self-gating helper, with the helper's predicate (or why it has none)."""
    import os

    from cs_audit.fix.gate_helpers import predicate_of
    from cs_audit.fix.modules import module_index

    qualname = _callee(f)
    where, how, callee = _helper_file(f.path, f.line, col, qualname, facts, root, module_index(root, list(facts)))
    if not where:
        pred: object = f"the helper `{callee}` is not found in the tree"
    else:
        try:
            with open(os.path.join(root, where), encoding="utf-8", errors="replace") as handle:
                pred = predicate_of(handle.read(), qualname)
        except OSError as exc:
            pred = f"the helper's file cannot be read ({exc.strerror})"
    return Target(f.rule, f.line, f.end_line, col, callee, ("helper", pred, how))
