"""``cs-audit config``: the configuration a scan uses, as TOML a project can paste into its
``pyproject.toml`` (the keys of ``[tool.cs-audit]``, with the hot roots shipped in
``rules/hot_paths.yaml`` listed after the project's and marked as such)."""

from __future__ import annotations

import json
import re
from typing import Any

from cs_audit.config import AuditConfig
from cs_audit.render.check import plain
from cs_audit.ruleset import HotRoot, RuleSet

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def value(v: Any) -> str:
    """A TOML value: JSON's string escapes are TOML's (``\\n``, ``\\"``, ``\\uXXXX``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{key(str(k))} = {value(x)}" for k, x in v.items() if x is not None) + "}"
    return json.dumps(str(v), ensure_ascii=False)


def _root(root: HotRoot) -> dict[str, Any]:
    return {"name": root.name, "class": root.class_glob, "path": root.path_glob, "frequency": root.frequency,
            **({"replayed": True} if root.replayed else {})}


def render_config(config: AuditConfig, rs: RuleSet) -> str:
    project = len(config.hot_roots)
    lines = [
        f"# the configuration of a scan of {plain(config.root)}: "
        + (f"{plain(config.config_source)}, defaults for the keys it does not set" if config.config_source
           else "no project configuration found, the defaults"),
        "# hot_roots: the project's first, then the ones shipped in rules/hot_paths.yaml",
        "[tool.cs-audit]",
        f"default_level = {value(rs.default_level)}",
        f"exclude = {value(list(config.exclude))}",
        f"max_file_bytes = {value(config.max_file_bytes)}",
        f"select = {value(list(config.select) if config.select is not None else ['ALL'])}",
        f"extend_select = {value(list(config.extend_select))}",
        f"ignore = {value(list(config.ignore))}",
        "hot_roots = [",
    ]
    for i, root in enumerate(rs.hot_roots):
        lines.append(f"    {value(_root(root))},  # {'project' if i < project else 'shipped'}")
    lines.append("]")
    if config.per_file_ignores:
        lines += ["", "[tool.cs-audit.per_file_ignores]"]
        lines += [f"{key(glob)} = {value(list(ids))}" for glob, ids in config.per_file_ignores]
    for name, table in config.rule_tables:
        lines += ["", f"[tool.cs-audit.{key(name)}]"]
        lines += [f"{key(str(k))} = {value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"
