"""The rules, one module each (``analysis/<rule_id>.py``, next to its entry in
``rules/rules.yaml``): ``RULE`` (its id), ``check(model, rs, out)`` (its findings) and
``message(finding, frequencies)`` (its message), and where §1 names a finding in more than its
``words.phrase``, ``words(finding, others, phrase)``.  This list is the only place they are named together."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from cs_audit.frequency import is_hot
from cs_audit.joins.callgraph import TreeModel
from cs_audit.joins.chains import Chains
from cs_audit.joins.roots import root_process
from cs_audit.model import Finding, Words
from cs_audit.ruleset import RuleSet

RULES: tuple[ModuleType, ...] = (
    env_read_hot, default_on_emitter, eager_format, sync_in_debug, per_call_open, redundant_flush,
    own_timestamp, hardcoded_output_path, duplicate_helper,
)
MESSAGES = {module.RULE: module.message for module in RULES}
#: the rules whose words in §1 say more than their ``words.phrase`` (rules.yaml): ``words(f, others,
#: phrase)``, ``others`` the findings on the same statement
WORDS: dict[str, Callable[[Finding, Sequence[Finding], str], Words]] = {
    module.RULE: module.words for module in RULES if hasattr(module, "words")}


def analyse(model: TreeModel, rs: RuleSet) -> list[Finding]:
    """Every rule's findings over ``model``: sorted, numbered and worded."""
    out = Findings(MESSAGES, rs.frequencies)
    for module in RULES:
        module.check(model, rs, out)
    chains = {True: Chains(model, model.hot_via_default), False: Chains(model, model.hot_via_any)}
    return [_with_hot_path(model, rs, chains, f) for f in out.finish()]


def _with_hot_path(model: TreeModel, rs: RuleSet, chains: dict[bool, Chains], f: Finding) -> Finding:
    """``f`` with the chain its frequency came from (default-on paths for an ungated site),
    as reports show it, and the process side of the root that chain starts at."""
    if f.function is None or not is_hot(f.frequency):
        return f
    key = (f.path, f.function)
    of_switch = chains[f.switch is None]
    shown = of_switch.shown(key)
    if shown is None:
        return f
    root_key = of_switch.root_of(key)
    process = root_process(model, rs, root_key) if root_key is not None and root_key in model.functions else ""
    return replace(f, hot_path=shown.steps, hot_path_elided=shown.elided, process=process)
