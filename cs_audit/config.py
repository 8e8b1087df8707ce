"""The scan's configuration: the target's ``[tool.cs-audit]`` (pyproject.toml) or
``cs-audit.yaml``, layered under CLI flags.  Read once per scan, before any file."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cs_audit.files import read_regular
from cs_audit.ruleset import EXTENSIBLE, load_yaml_without_aliases

MAX_CONFIG_BYTES = 1 << 20
#: the largest ``max_file_bytes`` a project may set
MAX_FILE_BYTES_LIMIT = 1 << 30
_KEYS = {"hot_roots", "exclude", "default_level", "max_file_bytes", *EXTENSIBLE}


class ConfigError(ValueError):
    """The project configuration is malformed (exit code 2)."""


@dataclass(frozen=True)
class AuditConfig:
    root: str
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    exclude: tuple[str, ...] = ()
    hot_roots: tuple[dict[str, Any], ...] = ()
    default_level: str | None = None
    max_file_bytes: int = 1 << 20
    history: bool = True
    config_source: str | None = None
    #: per-file facts cache (``cs_audit.incremental.cache``); ``--no-cache`` turns it off
    cache: bool = True
    #: cache root; None: ``$XDG_CACHE_HOME/cs-audit`` or ``~/.cache/cs-audit``
    cache_dir: str | None = None
    #: rule tables the project adds to the shipped ones, keyed like them (``emitters``, ...)
    rule_tables: tuple[tuple[str, Any], ...] = ()
    #: the name the root folder is imported under when it is a package (None: its own
    #: name); a scan of a revision in a temporary folder passes the real one
    root_name: str | None = None


def root_package(config: AuditConfig) -> str | None:
    """The package the scanned folder is (`sglang` for `…/sglang` with an `__init__.py`):
    absolute imports of its modules start with it."""
    root = Path(config.root)
    if not (root / "__init__.py").is_file():
        return None
    name = config.root_name or root.resolve().name
    return name if name.isidentifier() else None


def read_project_file(path: Path, error: type[ValueError], max_bytes: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of a file of the scanned tree that configures the scan: opened without
    following a symlink, a regular file only, size-capped; ``error`` otherwise."""
    try:
        raw = read_regular(path, max_bytes + 1)
    except OSError as exc:
        raise error(f"{path.name}: {exc}") from None
    if len(raw) > max_bytes:
        raise error(f"{path.name}: larger than {max_bytes} bytes")
    return raw


def read_yaml_mapping(path: Path, error: type[ValueError], expected: str, max_bytes: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """A project YAML file (no aliases, size-capped) that must hold a mapping; ``error`` otherwise."""
    raw = read_project_file(path, error, max_bytes)
    try:
        data = load_yaml_without_aliases(raw) or {}
    except yaml.YAMLError as exc:
        raise error(f"{path.name}: {exc}") from None
    if not isinstance(data, dict):
        raise error(f"{path.name}: expected {expected}")
    return data


def _read_project_table(root: Path) -> tuple[dict[str, Any], str | None]:
    base = root if root.is_dir() else root.parent
    yaml_path = base / "cs-audit.yaml"
    if os.path.lexists(yaml_path):
        return read_yaml_mapping(yaml_path, ConfigError, "a mapping"), "cs-audit.yaml"
    pyproject = base / "pyproject.toml"
    if os.path.lexists(pyproject):
        raw = read_project_file(pyproject, ConfigError)
        try:
            data = tomllib.loads(raw.decode("utf-8", errors="replace"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"pyproject.toml: {exc}") from None
        except RecursionError:
            raise ConfigError("pyproject.toml: nested too deeply to read") from None
        tool = data.get("tool")
        table = tool.get("cs-audit") if isinstance(tool, dict) else None
        if table is not None and not isinstance(table, dict):
            raise ConfigError("pyproject.toml: [tool.cs-audit] must be a table")
        if isinstance(table, dict):
            return table, "pyproject.toml [tool.cs-audit]"
    return {}, None


def load_config(root: str, **overrides: Any) -> AuditConfig:
    table, source = _read_project_table(Path(root))
    unknown = set(table) - _KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown keys {sorted(unknown)} (known: {sorted(_KEYS)})")
    roots = table.get("hot_roots", [])
    if not isinstance(roots, list) or not all(isinstance(r, dict) for r in roots):
        raise ConfigError(f"{source}: hot_roots must be a list of tables like {{name = 'step', frequency = 'step'}}")
    exclude_value = table.get("exclude", [])
    if not isinstance(exclude_value, list) or not all(isinstance(e, str) for e in exclude_value):
        raise ConfigError(f"{source}: exclude must be a list of glob strings, like [\"third_party/*\"]")
    exclude = tuple(exclude_value) + tuple(overrides.pop("exclude", ()) or ())
    level = table.get("default_level")
    if level is not None and not isinstance(level, str):
        raise ConfigError(f"{source}: default_level must be a level name, like \"info\"")
    values: dict[str, Any] = {
        "root": root, "exclude": exclude, "hot_roots": tuple(roots),
        "default_level": table.get("default_level"), "config_source": source,
        "rule_tables": tuple((key, table[key]) for key in EXTENSIBLE if key in table),
    }
    if "max_file_bytes" in table:
        size = table["max_file_bytes"]
        if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_FILE_BYTES_LIMIT:
            raise ConfigError(f"{source}: max_file_bytes must be a whole number of bytes from 1 to {MAX_FILE_BYTES_LIMIT}")
        values["max_file_bytes"] = size
    values.update({k: v for k, v in overrides.items() if v is not None})
    return AuditConfig(**values)


# -- the project's decisions file: dispositions decided by people, per switch

DECISIONS_FILE = "cs-audit.decisions.yaml"
MAX_DECISIONS_BYTES = 1 << 20
_DECISION_KEYS = {"disposition", "reason", "merge_into"}


class DecisionsError(ValueError):
    """The project's decisions file is malformed."""


@dataclass(frozen=True, slots=True)
class Decision:
    disposition: str
    reason: str
    merge_into: str | None = None


def load_decisions(root: Path) -> dict[str, Decision]:
    path = (root if root.is_dir() else root.parent) / DECISIONS_FILE
    if not os.path.lexists(path):
        return {}
    data = read_yaml_mapping(path, DecisionsError, "a mapping of switch -> {disposition, reason}", MAX_DECISIONS_BYTES)
    out: dict[str, Decision] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or set(entry) - _DECISION_KEYS or entry.get("disposition") not in ("KEEP", "MERGE", "REMOVE"):
            raise DecisionsError(f"{DECISIONS_FILE}: {name}: expected {{disposition: KEEP|MERGE|REMOVE, reason: ..., merge_into: ...}}")
        out[str(name)] = Decision(entry["disposition"], str(entry.get("reason", "")), entry.get("merge_into"))
    return out
