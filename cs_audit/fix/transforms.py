"""The transform of each fixable rule, set up for one run."""

from __future__ import annotations

from cs_audit.fix.base import Transform


def transforms_for(rules: tuple[str, ...], **context: object) -> dict[str, Transform]:
    from cs_audit.fix import duplicate_helper, eager_format, env_read_hot, per_call_open, redundant_flush

    out: dict[str, Transform] = {}
    if "eager-format" in rules:
        out["eager-format"] = eager_format.transform
    if "env-read-hot" in rules:
        out["env-read-hot"] = env_read_hot.transform
    if "duplicate-helper" in rules:
        out["duplicate-helper"] = duplicate_helper.transform
    if "per-call-open" in rules:
        out["per-call-open"] = per_call_open.transform
    if "redundant-flush" in rules:
        out["redundant-flush"] = redundant_flush.transform
    return out
