"""Renderers: an ``AuditResult`` in, text out.  ``FORMATS`` maps a ``--format`` name to
the function that renders it (``text`` is the terminal summary, handled by the CLI)."""

from __future__ import annotations

from typing import Callable

from cs_audit.model import AuditResult
from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import RuleSet

Renderer = Callable[[AuditResult, RuleSet], str]


def _sarif(result: AuditResult, rs: RuleSet) -> str:
    from cs_audit.gate import context_for
    from cs_audit.render.sarif import render_sarif

    ctx = context_for(result, rs)
    return render_sarif(result, rs, prefix=ctx.prefix, suppressed=ctx.suppressed.suppressed, notes=ctx.notes)


def _github(result: AuditResult, rs: RuleSet) -> str:
    from cs_audit.gate import context_for
    from cs_audit.render.github import render_github

    ctx = context_for(result, rs)
    return render_github(result, rs, prefix=ctx.prefix, suppressed=ctx.suppressed.suppressed, notes=ctx.notes)


FORMATS: dict[str, Renderer] = {
    "json": lambda result, rs: render_json(result),
    "markdown": render_markdown,
    "sarif": _sarif,  # SARIF 2.1.0; in-source suppressions marked, suppression problems as notifications
    "github": _github,  # workflow-command annotations
}
