"""Lint-tool outputs of the findings no comment suppresses, as ruff writes them: ``grouped``
(by file), ``gitlab`` (GitLab Code Quality JSON) and ``junit`` (JUnit XML, one test case per
finding).  Paths are from the repository root (``prefix``: the scanned folder in it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from cs_audit.model import Finding
from cs_audit.render.check import line_col, plain
from cs_audit.ruleset import RuleSet

#: GitLab Code Quality severities of the rules' severities
_GITLAB_SEVERITY = {"high": "major", "medium": "minor", "low": "info"}


def render_grouped(findings: Sequence[Finding], prefix: str = "") -> str:
    """Each file's path, then one indented ``line:col rule message`` per finding, then a blank line."""
    out: list[str] = []
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    for path in sorted(by_path):
        rows = by_path[path]
        width = max(len(line_col(f)) for f in rows)
        out.append(f"{plain(prefix + path)}:")
        out += [f"  {line_col(f):<{width}} {f.rule} {plain(f.message)}" for f in rows]
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def render_gitlab(findings: Sequence[Finding], rs: RuleSet, prefix: str = "") -> str:
    """A GitLab Code Quality report (a JSON list), fingerprints as the baseline's."""
    rows = []
    for f in findings:
        spec = rs.rules.get(f.rule)
        begin = {"line": f.line, **({"column": f.col} if f.col else {})}
        end = {"line": max(f.end_line, f.line), **({"column": f.end_col} if f.end_col else {})}
        rows.append({
            "description": f"{f.rule}: {f.message}",
            "check_name": f.rule,
            "fingerprint": f.fingerprint,
            "severity": _GITLAB_SEVERITY.get(spec.severity if spec else "", "info"),
            "location": {"path": prefix + f.path, "positions": {"begin": begin, "end": end}},
        })
    return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"


def _xml_text(text: str) -> str:
    """XML 1.0 text: the characters it cannot hold at all (control characters) escaped as ``\\xNN``."""
    return plain(text)


def render_junit(findings: Sequence[Finding], prefix: str = "") -> str:
    """JUnit XML: a test suite per file, a failed test case per finding."""
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="cs-audit" tests="{len(findings)}" failures="{len(findings)}">']
    for path in sorted(by_path):
        rows = by_path[path]
        name = _xml_text(prefix + path)
        out.append(f"  <testsuite name={quoteattr(name)} tests=\"{len(rows)}\" failures=\"{len(rows)}\">")
        for f in rows:
            case = _xml_text(f"{f.rule} {prefix}{f.path}:{line_col(f)}")
            message = _xml_text(f.message)
            out.append(f"    <testcase name={quoteattr(case)} classname={quoteattr(name)}>")
            out.append(f"      <failure type={quoteattr(f.rule)} message={quoteattr(message)}>"
                       f"{escape(_xml_text(f'{prefix}{f.path}:{line_col(f)}: {f.code}'))}</failure>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
