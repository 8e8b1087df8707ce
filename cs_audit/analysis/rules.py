"""The rules, one module each (``analysis/<rule_id>.py``, next to its entry in
``rules/rules.yaml``): ``RULE`` (its id), ``check(model, rs, out)`` (its findings) and
``message(finding)`` (its words).  This list is the only place they are named together."""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType

from cs_audit.analysis import (
    default_on_emitter,
    duplicate_helper,
    eager_format,
    env_read_hot,
    hardcoded_output_path,
    own_timestamp,
    per_call_open,
    redundant_flush,
    sync_in_debug,
)
from cs_audit.analysis.sites import Findings
from cs_audit.joins.callgraph import TreeModel, function_id, hot_chain
from cs_audit.model import Finding
from cs_audit.ruleset import RuleSet

RULES: tuple[ModuleType, ...] = (
    env_read_hot, default_on_emitter, eager_format, sync_in_debug, per_call_open, redundant_flush,
    own_timestamp, hardcoded_output_path, duplicate_helper,
)
MESSAGES = {module.RULE: module.message for module in RULES}


def analyse(model: TreeModel, rs: RuleSet) -> list[Finding]:
    """Every rule's findings over ``model``: sorted, numbered and worded."""
    out = Findings(MESSAGES)
    for module in RULES:
        module.check(model, rs, out)
    return [_with_hot_path(model, rs, f) for f in out.finish()]


def _with_hot_path(model: TreeModel, rs: RuleSet, f: Finding) -> Finding:
    """``f`` with the chain its frequency came from (default-on paths for an ungated site)
    and the process side of the root that chain starts at."""
    if f.function is None or f.frequency in ("once", "unknown"):
        return f
    chain = hot_chain(model, (f.path, f.function), default_only=f.switch is None)
    if not chain:
        return f
    root = model.functions.get(chain[0])
    process = rs.process_of(root.name, root.class_name, chain[0][0]) if root is not None else ""
    return replace(f, hot_path=tuple(function_id(model, key) for key in chain), process=process)
