"""The machine-readable report (``../shared/report-contract.md``, schema_version 1)."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any

from cs_audit.model import AuditResult, Deployment, Finding, HotRoots, Notification, Switch, root_notes, tree_notes

SCHEMA_VERSION = 1


class _NotPlain(Exception):
    """A value ``dumps`` leaves to ``json.dumps`` whole (a non-string key, a dict or list subclass)."""


def dumps(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, the same text, faster:
    the stdlib indents with its pure-Python encoder (generators, a type test chain per
    value); this joins each container's items in one go and escapes strings in C.  Values
    it has no fast path for (a dict with non-string keys, a dict or list subclass) go to
    ``json.dumps`` whole."""
    try:
        return _indented(value, "\n")
    except _NotPlain:
        return json.dumps(value, indent=2, ensure_ascii=False)


def _indented(value: Any, newline: str) -> str:
    """``value`` as JSON, its nested lines starting with ``newline`` + two spaces a level."""
    cls = value.__class__
    if cls is str:
        return encode_basestring(value)
    if cls is dict:
        if not value:
            return "{}"
        inner = newline + "  "
        parts = []
        for key, item in value.items():
            if key.__class__ is not str:
                raise _NotPlain
            parts.append(encode_basestring(key) + ": " + _indented(item, inner))
        return "{" + inner + ("," + inner).join(parts) + newline + "}"
    if cls is list or cls is tuple:
        if not value:
            return "[]"
        inner = newline + "  "
        return "[" + inner + ("," + inner).join([_indented(item, inner) for item in value]) + newline + "]"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if cls is int:
        return int.__repr__(value)
    if cls is float and math.isfinite(value):
        return float.__repr__(value)
    if isinstance(value, (dict, list, tuple)):  # subclasses: json.dumps indents them as well
        raise _NotPlain
    return json.dumps(value, ensure_ascii=False)  # NaN, Infinity, int/float/str subclasses; TypeError as json's


@functools.cache
def _severities() -> dict[str, str]:
    """Rule id -> severity, from the shipped rules (a project cannot change severities)."""
    from cs_audit.ruleset import load_ruleset

    return {rule_id: spec.severity for rule_id, spec in load_ruleset().rules.items()}


def finding_dict(f: Finding) -> dict[str, Any]:
    data: dict[str, Any] = {
        "rule": f.rule, "path": f.path, "line": f.line, "end_line": f.end_line, "function": f.function,
        "switch": f.switch.text if f.switch else None, "frequency": f.frequency, "gpu_sync": f.gpu_sync, "message": f.message,
        "fingerprint": f.fingerprint,
        # additions (allowed by the contract): what the site is and what it costs
        "code": f.code, "estimated_cost_us_per_step": f.cost_us, "severity": "low" if getattr(f.detail, "cached", "") else _severities().get(f.rule),
        # 1-based; end_col just past the site on end_line
        "col": f.col, "end_col": f.end_col,
        # normal | error | rare: error and rare sites are not costed per step
        "path_kind": f.path_kind,
    }
    if f.path_reason:
        data["path_reason"] = f.path_reason
    if f.guard is not None:
        data["guard"] = {"path": f.guard.path, "line": f.guard.line, "depth": f.guard.depth}
        data["cost_if_every_time_us"] = f.cost_if_every_time_us
    if f.eager_kinds:
        data["eager_kinds"] = list(f.eager_kinds)
    if f.hot_path:
        data["hot_path"] = list(f.hot_path)
    if f.hot_path_elided:
        # a long chain is its root and its last calls: this many functions between the two
        # are left out (the whole chain: `cs-audit why PATH:LINE`), so the report stays small
        data["hot_path_elided"] = f.hot_path_elided
    if f.process:
        data["process"] = f.process
    if f.origin:
        # own | modified | upstream: set when the tree names or shows an upstream
        data["origin"] = f.origin
    data.update(detail_fields(f))
    return data


def detail_fields(f: Finding) -> dict[str, str]:
    """The rule's own fields of a finding, by name (``EnvReadDetail`` -> ``var``, ``via``)."""
    if f.detail is None:
        return {}
    fields = {name: getattr(f.detail, name) for name in sorted(f.detail.__slots__)}
    if fields.get("cached") == "":
        del fields["cached"]  # a per-call env read: the field says only when a read is cached
    if fields.get("local") == "":
        del fields["local"]  # an emitter's own message: the field names only a message local
    return fields


def _setters_dict(s: Switch) -> dict[str, Any]:
    kinds = [x.kind for x in s.setters]
    return {
        "count": s.real_setters,
        "passthrough": kinds.count("passthrough"),
        "commented": kinds.count("commented"),
        "off": kinds.count("off"),
        "sites": [{"path": x.path, "line": x.line, "value": x.value, "kind": x.kind, "source": x.source} for x in s.setters],
    }


def switch_dict(s: Switch) -> dict[str, Any]:
    return {
        "name": s.name,
        "category": s.category,
        "kind": s.kind,
        "reads": [{"path": r.path, "line": r.line, "function": r.function, "per_call": r.per_call} for r in s.reads],
        "setters": _setters_dict(s),
        "readers": [{"path": p, "line": line, "pattern": pattern} for p, line, pattern in s.readers],
        "added_in": _added_in_dict(s),
        "added_in_note": s.added_in_note,
        "gated_sites": s.gated_sites,
        "gpu_sync": s.gpu_sync,
        "disposition": s.disposition,
        "merge_into": s.merge_into,
        "reasons": list(s.reasons),
        "levels": _levels_list(s),
        **({"origin": s.origin} if s.origin else {}),
    }


def _levels_list(s: Switch) -> list[dict[str, Any]]:
    """Per value the code compares the switch with (empty for an on/off switch): the sites that
    start to run at it, each with ``via``, the switch its own gate names when it runs here
    through a helper's fallback to this level knob."""
    out = []
    for value in s.levels:
        rows = [x for x in s.sites if max(x.level, 1) == value]
        out.append({
            "level": value, "gated_sites": len(rows), "gpu_sync": any(x.gpu_sync for x in rows),
            "sites": [{"path": x.path, "line": x.line, "via": x.via or None} for x in rows],
        })
    return out


def _added_in_dict(s: Switch) -> dict[str, Any] | None:
    if s.added_in is None:
        return None
    out = {"commit": s.added_in.commit, "date": s.added_in.date, "subject": s.added_in.subject}
    if s.added_in.repository:
        out["repository"] = s.added_in.repository  # a sub-repository's commit, not the root's
    return out


def roots_dict(roots: HotRoots) -> dict[str, Any]:
    """The hot roots of the tree: the configured rules that match (in the order they are tried)
    with the functions they match, and the event loops found in the code."""
    return {
        "configured": roots.configured,
        "matched": roots.matched,
        "summary": roots.summary,
        "rules": [
            {"name": r.name, "class": r.class_glob, "path": r.path_glob, "frequency": r.frequency,
             "functions": r.functions, "examples": list(r.examples)}
            for r in roots.rules if r.functions
        ],
        "event_loops": [
            {"path": e.path, "line": e.line, "function": e.function, "id": e.id, "steps": list(e.steps),
             "root": "configured" if e.configured is not None else "event loop", "configured_root": e.configured}
            for e in roots.event_loops
        ],
        "cheap": [
            {"path": c.path, "line": c.line, "function": c.function, "how": c.how, "switch": c.switch,
             "frequency": c.frequency, "calls": c.calls, "process": c.process}
            for c in roots.cheap
        ],
    }


def note_dict(n: Notification) -> dict[str, Any]:
    return {"id": n.id, "path": n.path, "line": n.line, "level": n.level, "message": n.message}


def report_dict(result: AuditResult, observed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``observed``: fingerprint -> what a run showed of the finding (``confirm.join.Observed``),
    from ``scan --profile``; without it the report is as it always was."""
    roots: dict[str, Any] = {}
    notes = root_notes(result.roots) + tree_notes(result)
    if result.roots is not None:
        roots["hot_roots"] = roots_dict(result.roots)
    if result.roots is not None or notes:
        roots["notes"] = [note_dict(n) for n in notes]
    return {
        "tool": "cs-audit",
        "schema_version": SCHEMA_VERSION,
        "root": result.root,
        "commit": result.commit,
        "findings": [finding_dict(f) for f in result.findings] if observed is None else [
            {**finding_dict(f), "observed": observed_dict(observed[f.fingerprint])} for f in result.findings],
        "switches": [switch_dict(s) for s in result.switches],
        "duplicates": [
            {"name": g.name, "sites": [{"path": s.path, "line": s.line, "function": s.function} for s in g.sites]}
            for g in result.duplicates
        ],
        "errors": [{"path": e.path, "message": e.message, "kind": e.kind} for e in result.errors],
        "repositories": [{"path": path, "commit": commit} for path, commit in result.repositories],
        # reads known to cost nothing (a registry cached at start-up): checked, not findings
        **({"checked_cheap": [finding_dict(f) for f in result.cheap_reads]} if result.cheap_reads else {}),
        # the upstream each repository's own lines are told from, and the findings on its lines left out
        **({"upstream": [{"repository": r, "spec": spec, "how": how, "error": error or None} for r, spec, how, error in result.upstream],
            "upstream_findings": len(result.upstream_findings)} if result.upstream else {}),
        **roots,
        **({"deployment": deployment_dict(result.deployment)} if result.deployment is not None else {}),
    }


def deployment_dict(d: Deployment) -> dict[str, Any]:
    return {
        "platform": d.platform, "stated": d.stated, "models": list(d.models), "features": list(d.features), "options": dict(d.options), "env": list(d.env),
        "defaults_used": [{"switch": u.switch, "value": u.value, "path": u.path or None, "line": u.line or None, "sites": u.sites,
                           "example": {"path": u.example.path, "line": u.example.line} if u.example else None}
                          for u in d.used],
    }


def observed_dict(o: Any) -> dict[str, Any]:
    """``{calls_per_step, status}`` of a ``confirm.join.Observed``."""
    return {"calls_per_step": None if o.calls_per_step is None else round(o.calls_per_step, 4), "status": o.status}


def render_json(result: AuditResult, observed: Mapping[str, Any] | None = None) -> str:
    return dumps(report_dict(result, observed)) + "\n"
