"""Renderers: an ``AuditResult`` in, text out.  ``FORMATS`` maps a ``--format`` name to
the function that renders it (``text`` is the terminal summary, handled by the CLI)."""

from __future__ import annotations

from typing import Callable

from cs_audit.model import AuditResult
from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import RuleSet

Renderer = Callable[[AuditResult, RuleSet], str]

FORMATS: dict[str, Renderer] = {
    "json": lambda result, rs: render_json(result),
    "markdown": render_markdown,
}
