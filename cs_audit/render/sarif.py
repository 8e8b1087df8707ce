"""SARIF 2.1.0 (OASIS errata01 schema) for code-scanning uploads.

One ``reportingDescriptor`` per rule id (in ``rules/rules.yaml`` order) with its
summary, rationale, fix and examples as help; one ``result`` per finding, its location
a percent-encoded URI relative to the repository root (``uriBaseId`` ``%SRCROOT%``);
suppressed findings carry an ``inSource`` suppression with its reason; suppression
problems and skipped files are ``notifications`` of the invocation, never results.
No timestamps, durations or absolute paths: the same tree gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from cs_audit import __version__
from cs_audit.model import INVALID, NO_ROOT, NOTIFICATION_IDS, OUTSIDE_GIT, SKIPPED, UNUSED, AuditResult, Finding, Notification
from cs_audit.render.json import dumps
from cs_audit.ruleset import RuleSet, RuleSpec

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SARIF_VERSION = "2.1.0"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "csAuditFingerprint/v1"
LEVELS = {"high": "error", "medium": "warning", "low": "note"}
_NOTIFICATION_ORDER = (INVALID, UNUSED, SKIPPED, NO_ROOT, OUTSIDE_GIT)


def artifact_uri(path: str, prefix: str = "") -> str:
    """A relative URI reference for a POSIX path: every byte outside ``[A-Za-z0-9_.~/-]``
    percent-encoded (spaces, ``%``, ``#``, ``?``, ``:``, newlines, non-UTF-8 names)."""
    raw = (prefix + path).encode("utf-8", "surrogateescape")
    return quote(raw, safe="/")


def _camel(rule_id: str) -> str:
    return "".join(part.capitalize() for part in rule_id.split("-"))


def _rule_descriptor(spec: RuleSpec) -> dict[str, Any]:
    text = f"{spec.summary}\n\nWhy: {spec.why}\n\nFix: {spec.fix}\n\nFlagged:\n{spec.example}\nSilent:\n{spec.ok}"
    markdown = (
        f"**{spec.summary}**\n\n{spec.why}\n\n**Fix:** {spec.fix}\n\nFlagged:\n\n```python\n{spec.example.rstrip()}\n```\n\n"
        f"Silent:\n\n```python\n{spec.ok.rstrip()}\n```\n\nSuppress one site with `# cs-audit: ignore[{spec.id}] reason`."
    )
    return {
        "id": spec.id,
        "name": _camel(spec.id),
        "shortDescription": {"text": spec.summary},
        "fullDescription": {"text": spec.why},
        "help": {"text": text, "markdown": markdown},
        "defaultConfiguration": {"level": LEVELS.get(spec.severity, "warning")},
        "properties": {"tags": ["performance", "cs-audit"], "severity": spec.severity, "gatesCi": spec.gates_ci},
    }


def _location(path: str, prefix: str, line: int | None, end_line: int | None = None,
              col: int = 0, end_col: int = 0) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(path, prefix), "uriBaseId": SRCROOT}}
    if line:
        region: dict[str, Any] = {"startLine": line}
        if col:
            region["startColumn"] = col
        if end_line and end_line > line:
            region["endLine"] = end_line
        if end_col and (end_line or line) >= line and (end_col > col or (end_line or line) > line):
            region["endColumn"] = end_col  # SARIF: the column just past the region, as ours
        physical["region"] = region
    return {"physicalLocation": physical}


def _result(f: Finding, rs: RuleSet, index: dict[str, int], prefix: str, suppressed: Mapping[str, str],
            states: Mapping[str, str] | None) -> dict[str, Any]:
    spec = rs.rules.get(f.rule)
    location = _location(f.path, prefix, f.line, f.end_line, f.col, f.end_col)
    if f.function:
        location["logicalLocations"] = [{"fullyQualifiedName": f.function, "kind": "function"}]
    out: dict[str, Any] = {
        "ruleId": f.rule,
        "level": LEVELS.get(spec.severity, "warning") if spec else "warning",
        "message": {"text": f.message + (f" Fix: {spec.fix}." if spec and spec.fix else "")},
        "locations": [location],
        "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint},
        "properties": {
            "switch": f.switch.text if f.switch else None, "frequency": f.frequency, "gpuSync": f.gpu_sync,
            "estimatedCostUsPerStep": f.cost_us, "code": f.code,
        },
    }
    if f.rule in index:
        out["ruleIndex"] = index[f.rule]
    if f.fingerprint in suppressed:
        out["suppressions"] = [{"kind": "inSource", "justification": suppressed[f.fingerprint]}]
    if states is not None:
        out["baselineState"] = states.get(f.fingerprint, "unchanged")
    return out


def _notification(n: Notification, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "descriptor": {"id": n.id, "index": _NOTIFICATION_ORDER.index(n.id)},
        "level": n.level,
        "message": {"text": n.message},
    }
    if n.path:  # a note about the whole tree (no hot root matches) has no location
        out["locations"] = [_location(n.path, prefix, n.line)]
    return out


def render_sarif(
    result: AuditResult,
    rs: RuleSet,
    *,
    prefix: str = "",
    suppressed: Mapping[str, str] | None = None,
    notes: Iterable[Notification] = (),
    states: Mapping[str, str] | None = None,
    successful: bool = True,
) -> str:
    """The SARIF log of one audit.

    ``prefix``: the scanned root's path inside the repository (``"sub/dir/"``), so URIs are
    relative to the repository root.  ``suppressed``: fingerprint -> reason.  ``states``:
    fingerprint -> ``new``/``unchanged`` for ``check`` (omitted by ``scan``).
    """
    suppressed = suppressed or {}
    index = {rule_id: i for i, rule_id in enumerate(rs.rules)}
    notes = list(notes)
    config_notes = [_notification(n, prefix) for n in notes if n.id in (INVALID, UNUSED, NO_ROOT)]
    exec_notes = [_notification(n, prefix) for n in notes if n.id in (SKIPPED, OUTSIDE_GIT)]
    invocation: dict[str, Any] = {"executionSuccessful": successful}
    if config_notes:
        invocation["toolConfigurationNotifications"] = config_notes
    if exec_notes:
        invocation["toolExecutionNotifications"] = exec_notes
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "cs-audit",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_rule_descriptor(spec) for spec in rs.rules.values()],
                "notifications": [
                    {"id": nid, "shortDescription": {"text": NOTIFICATION_IDS[nid]}} for nid in _NOTIFICATION_ORDER
                ],
            }
        },
        "invocations": [invocation],
        "results": [_result(f, rs, index, prefix, suppressed, states) for f in result.findings],
        "columnKind": "unicodeCodePoints",
    }
    if result.commit:
        run["properties"] = {"commit": result.commit}
    doc = {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}
    return dumps(doc) + "\n"
