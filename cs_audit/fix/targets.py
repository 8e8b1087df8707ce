"""From an audit to the sites each fix should change: the scan's findings of the chosen
rules that no comment suppresses, and for eager-format every eager log call the extraction
saw (a record behind a gate is not reported, yet is made lazy as well: the lazy form is never
slower), unless ``--hot-only`` keeps to the findings on a hot path."""

from __future__ import annotations

from cs_audit.fix.base import HOT, Target
from cs_audit.model import AuditResult, CallSite, EmitterDetail, EnvReadDetail, FileFacts, Finding


def _suppressed(facts: FileFacts | None, rule: str, line: int) -> bool:
    if facts is None:
        return False
    return any(rule in s.rules and s.problem is None and (s.whole_file or line == s.line or line in s.covers)
               for s in facts.suppressions)


def targets_by_file(result: AuditResult, facts: dict[str, FileFacts], rules: tuple[str, ...],
                    hot_only: bool, root: str = ".", into: str | None = None) -> dict[str, dict[str, list[Target]]]:
    from cs_audit.ci.suppress import apply_suppressions

    kept = apply_suppressions(result).kept
    out: dict[str, dict[str, list[Target]]] = {}

    def add(path: str, target: Target) -> None:
        out.setdefault(path, {}).setdefault(target.rule, []).append(target)

    findings = [f for f in kept if f.rule in rules and (not hot_only or f.frequency in HOT)]
    if "eager-format" in rules:
        seen: set[tuple[str, int, int]] = set()
        for f in findings:
            if f.rule == "eager-format":
                detail = f.detail if isinstance(f.detail, EmitterDetail) else None
                col = max(f.col - 1, 0)
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
    if "env-read-hot" in rules:
        _env_targets(findings, facts, root, add)
    if "duplicate-helper" in rules:
        from cs_audit.fix.duplicate_helper import plan_groups

        kept_sites = {(f.path, f.line) for f in findings if f.rule == "duplicate-helper"}
        for path, targets in plan_groups(result, facts, root, into, kept_sites).items():
            for t in targets:
                add(path, t)
    for f in findings:
        if f.rule == "redundant-flush":
            add(f.path, Target(f.rule, f.line, f.end_line, max(f.col - 1, 0), "flush"))
    return out


def _callee(f: Finding) -> str:
    detail = f.detail
    return detail.emitter if isinstance(detail, EmitterDetail) else ""


def _env_targets(findings: list[Finding], facts: dict[str, FileFacts], root: str, add) -> None:
    """Direct reads of one known variable; a read through a helper is the helper's to fix."""
    import os

    from cs_audit.fix.env_read_hot import blocked_vars

    def text(path: str) -> str | None:
        try:
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return None

    blocked: dict[str, str] | None = None
    for f in findings:
        if f.rule != "env-read-hot" or not isinstance(f.detail, EnvReadDetail) or f.detail.via.startswith("helper:"):
            continue
        var = f.detail.var
        if not var or var == "<dynamic>" or "," in var:
            continue
        if blocked is None:
            blocked = blocked_vars(facts, text)
        add(f.path, Target(f.rule, f.line, f.end_line, max(f.col - 1, 0), f.detail.via, (var, f.code, blocked.get(var))))


def _helper_target(f: Finding, col: int, facts: dict[str, FileFacts], root: str) -> Target:
    """A call of a self-gating helper, with the helper's predicate (or why it has none)."""
    import os

    from cs_audit.fix.gate_helpers import predicate_of
    from cs_audit.fix.modules import find_module, module_index

    ff = facts.get(f.path)
    site = next((c for c in (ff.calls if ff else ()) if isinstance(c, CallSite) and c.line == f.line and c.col == col
                 and c.role is None), None)
    callee = site.callee if site is not None else _callee(f)
    qualname = _callee(f)
    where, how = f.path, "local"
    index = module_index(root, list(facts))
    if site is not None and "." in callee and not callee.startswith("self."):
        found = find_module(index, callee.rsplit(".", 1)[0], f.path, root)
        if found:
            where, how = found, "attribute"
    elif site is not None and ff is not None and not any(fn.qualname == qualname for fn in ff.functions):
        origin = dict(ff.aliases).get(callee, "")
        found = find_module(index, origin.rsplit(".", 1)[0], f.path, root) if "." in origin else None
        where, how = (found, "imported") if found else ("", how)
    if not where:
        pred: object = f"the helper `{callee}` is not found in the tree"
    else:
        try:
            with open(os.path.join(root, where), encoding="utf-8", errors="replace") as handle:
                pred = predicate_of(handle.read(), qualname)
        except OSError as exc:
            pred = f"the helper's file cannot be read ({exc.strerror})"
    return Target(f.rule, f.line, f.end_line, col, callee, ("helper", pred, how))
