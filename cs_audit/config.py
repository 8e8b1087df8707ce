"""The scan's configuration: the target's ``[tool.cs-audit]`` (pyproject.toml) or
``cs-audit.yaml``, layered under CLI flags.  Read once per scan, before any file."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cs_audit.files import read_regular
from cs_audit.rule_shapes import HOT_ROOT, ListOf, ShapeError, check_frequencies, check_rule_table
from cs_audit.ruleset import EXTENSIBLE, load_yaml_without_aliases

MAX_CONFIG_BYTES = 1 << 20
#: the largest ``max_file_bytes`` a project may set
MAX_FILE_BYTES_LIMIT = 1 << 30
_KEYS = {"hot_roots", "deployment", "exclude", "aside", "default_level", "max_file_bytes", "select", "extend_select", "ignore", "per_file_ignores",
         "gate", "upstream", "include_upstream", *EXTENSIBLE}
#: the keys that list rule ids (checked against the rule set in ``api.prepare_ruleset``)
RULE_LISTS = ("select", "extend_select", "ignore")


#: ``aside`` when the project names none
ASIDE_DEFAULT = ("test*/", "tests/", "benchmark*/", "examples/")


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
    #: the rules reported (``analysis.selection``): None selects every rule
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    #: (path glob, rule ids) not reported in the files the glob matches
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: (rule id, scope) of the project's ``gate`` table: which findings of a rule gate ``check``
    gate: tuple[tuple[str, str], ...] = ()
    #: folders of tests, benchmarks and examples (`tests/`, `benchmark*/`): their findings are
    #: summarised apart in the report, and a switch read only there is not removed
    aside: tuple[str, ...] = ASIDE_DEFAULT
    #: the deployment audited (``[tool.cs-audit] deployment``): its platform (None: the rules'
    #: default), the options it sets, the env vars it sets, the models it serves and the optional
    #: features it turns on; every gate is decided with them
    deployment: tuple[str | None, tuple[tuple[str, Any], ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = None
    #: (repository path from the scanned root, "." for the tree whole; its upstream: a
    #: revision, ``NAME==VERSION`` or a folder made absolute), see ``cs_audit.git.upstream``
    upstream: tuple[tuple[str, str], ...] = ()
    #: report, fix and gate the upstream's lines too (default: the fork's own alone)
    include_upstream: bool = False


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


def _read_toml(path: Path, shown: str) -> dict[str, Any]:
    raw = read_project_file(path, ConfigError)
    try:
        return tomllib.loads(raw.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{shown}: nested too deeply to read") from None


def _tool_table(data: dict[str, Any], shown: str) -> dict[str, Any] | None:
    """The ``[tool.cs-audit]`` table of a parsed TOML file (None when it has none)."""
    tool = data.get("tool")
    table = tool.get("cs-audit") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{shown}: [tool.cs-audit] must be a table")
    return table


def _search_folders(base: Path) -> list[Path]:
    """Where the configuration of a scan of ``base`` is looked for, nearest first: ``base``
    and its parents up to the root of the git repository holding it (``base`` alone
    outside a repository: a folder above it is nobody's configuration of it)."""
    folders: list[Path] = []
    here = Path(os.path.abspath(base))
    for folder in (here, *here.parents):
        folders.append(folder)
        if os.path.lexists(folder / ".git"):
            return folders
    return folders[:1]


def _shown(path: Path, base: Path) -> str:
    """A configuration file's name in messages: relative to the scanned folder."""
    return os.path.relpath(path, os.path.abspath(base))


def _read_project_table(root: Path, config_file: Path | None = None) -> tuple[dict[str, Any], str | None, Path | None]:
    """The project's table, where it was found (for messages) and the folder it is in:
    ``config_file`` when given, else the nearest ``cs-audit.yaml`` or ``pyproject.toml``
    with a ``[tool.cs-audit]`` table from the scanned folder up to its repository's root
    (in one folder ``cs-audit.yaml`` wins)."""
    base = root if root.is_dir() else root.parent
    if config_file is not None:
        if not os.path.lexists(config_file):
            raise ConfigError(f"{config_file}: no such file")
        shown = str(config_file)
        if config_file.suffix in (".yaml", ".yml"):
            return read_yaml_mapping(config_file, ConfigError, "a mapping"), shown, config_file.parent
        if config_file.suffix != ".toml":
            raise ConfigError(f"{config_file}: expected a .toml or .yaml file")
        data = _read_toml(config_file, shown)
        table = _tool_table(data, shown)
        if table is None and config_file.name != "pyproject.toml":
            return data, shown, config_file.parent  # a cs-audit.toml: the keys at its top level
        return table or {}, f"{shown} [tool.cs-audit]", config_file.parent
    for folder in _search_folders(base):
        yaml_path = folder / "cs-audit.yaml"
        if os.path.lexists(yaml_path):
            shown = _shown(yaml_path, base)
            data = read_yaml_mapping(yaml_path, ConfigError, "a mapping")
            return data, shown, folder
        pyproject = folder / "pyproject.toml"
        if os.path.lexists(pyproject):
            shown = _shown(pyproject, base)
            table = _tool_table(_read_toml(pyproject, shown), shown)
            if table is not None:
                return table, f"{shown} [tool.cs-audit]", folder
    return {}, None, None


def _check_shape(source: str | None, check: Callable[..., None], *args: Any) -> None:
    """``check(*args)``, its ``ShapeError`` a configuration error of ``source``."""
    try:
        check(*args)
    except ShapeError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _rebased(patterns: list[str], config_dir: Path | None, base: Path) -> list[str]:
    """``exclude`` globs of a configuration found above the scanned folder, also as paths
    under it (``sub/third_party/*`` from the repository root is ``third_party/*`` in a
    scan of ``sub``)."""
    if config_dir is None:
        return patterns
    prefix = os.path.relpath(os.path.abspath(base), os.path.abspath(config_dir)).replace(os.sep, "/")
    if prefix == ".":
        return patterns
    return patterns + [p[len(prefix) + 1:] for p in patterns if p.startswith(prefix + "/") and len(p) > len(prefix) + 1]


def _rule_list(table: dict[str, Any], name: str, source: str | None) -> tuple[str, ...] | None:
    if name not in table:
        return None
    ids = table[name]
    if not isinstance(ids, list) or not all(isinstance(r, str) and r for r in ids):
        raise ConfigError(f"{source}: {name} must be a list of rule ids, like [\"env-read-hot\"]")
    return tuple(ids)


def _check_selection(table: dict[str, Any], source: str | None, overrides: dict[str, Any]) -> dict[str, Any]:
    """``select``, ``extend_select``, ``ignore`` and ``per_file_ignores``, type-checked,
    under the command line's (``--select`` replaces, ``--extend-select`` and ``--ignore``
    add, as ruff's).  The ids are checked against the rules by ``api.prepare_ruleset``."""
    select = _rule_list(table, "select", source)
    per_file = table.get("per_file_ignores", {})
    example = '{"tests/*" = ["env-read-hot"]}'
    if not isinstance(per_file, dict):
        raise ConfigError(f"{source}: per_file_ignores must be a table of path glob -> rule ids, like {example}")
    pairs = []
    for glob, ids in per_file.items():
        if not isinstance(glob, str) or not glob or not isinstance(ids, list) or not all(isinstance(r, str) and r for r in ids):
            raise ConfigError(f"{source}: per_file_ignores[{glob!r}] must be a list of rule ids, like {example}")
        pairs.append((glob, tuple(ids)))
    cli_select = overrides.pop("select", None)
    return {
        "select": tuple(cli_select) if cli_select else select,
        "extend_select": (_rule_list(table, "extend_select", source) or ()) + tuple(overrides.pop("extend_select", ()) or ()),
        "ignore": (_rule_list(table, "ignore", source) or ()) + tuple(overrides.pop("ignore", ()) or ()),
        "per_file_ignores": tuple(pairs),
    }


_DEPLOYMENT_KEYS = {"platform", "options", "env", "models", "features"}


def _check_deployment(value: Any, source: str | None) -> tuple[str | None, tuple[tuple[str, Any], ...], tuple[str, ...], tuple[str, ...],
                                                             tuple[str, ...]] | None:
    """``deployment``: a table ``{platform = "rocm", options = {enable_eplb = true}, env =
    ["VLLM_X"]}``: what the audited deployment runs on and sets."""
    if value is None:
        return None
    example = 'deployment = {platform = "cuda", models = ["llama"], features = ["lora"], options = {enable_eplb = true}, env = ["MY_TRACE"]}'
    if not isinstance(value, dict) or set(value) - _DEPLOYMENT_KEYS:
        raise ConfigError(f"{source}: deployment must be a table with keys {sorted(_DEPLOYMENT_KEYS)}, like {example}")
    platform = value.get("platform")
    if platform is not None and not (isinstance(platform, str) and platform.isidentifier()):
        raise ConfigError(f"{source}: deployment.platform must be a platform name, like \"cuda\" or \"rocm\"")
    options = value.get("options", {})
    if not isinstance(options, dict) or not all(
            isinstance(k, str) and k.isidentifier() and (v is None or isinstance(v, (bool, int, float, str))) for k, v in options.items()):
        raise ConfigError(f"{source}: deployment.options must be a table of option name -> true, a number or a string, like {example}")
    env = value.get("env", [])
    if isinstance(env, dict):
        env = [k for k, v in env.items() if v not in (None, "", "0", False)]
    if not isinstance(env, list) or not all(isinstance(e, str) and e for e in env):
        raise ConfigError(f"{source}: deployment.env must be a list of the env vars the deployment sets, like {example}")
    models = value.get("models", [])
    if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
        raise ConfigError(f"{source}: deployment.models must be a list of the model architectures served (their folder under models/), like [\"llama\"]")
    features = value.get("features", [])
    if not isinstance(features, list) or not all(isinstance(f, str) and f for f in features):
        raise ConfigError(f"{source}: deployment.features must be a list of the optional features turned on, like [\"lora\", \"speculative_decoding\"]")
    return platform, tuple(sorted(options.items())), tuple(sorted(set(env))), tuple(sorted(set(models))), tuple(sorted(set(features)))


def _check_upstream(value: Any, source: str | None, config_dir: Path | None, base: Path) -> tuple[tuple[str, str], ...]:
    """``upstream``: one spec for the tree (``"vllm==0.33.0"``, ``"v0.33.0"``, a folder) or a
    table of repository path -> spec (``{vllm = "v0.33.0"}``), paths from the configuration's
    folder; a folder spec is made absolute from there too."""
    if value is None:
        return ()
    example = 'upstream = "vllm==0.33.0" (a release), "v0.33.0" (a revision) or {vllm = "v0.33.0"} (per repository)'
    pairs = [(".", value)] if isinstance(value, str) else list(value.items()) if isinstance(value, dict) else None
    if pairs is None or not all(isinstance(k, str) and k and isinstance(v, str) and v.strip() and "\0" not in v for k, v in pairs):
        raise ConfigError(f"{source}: {example}")
    here = Path(os.path.abspath(config_dir or base))
    out = []
    for repo, spec in pairs:
        spec = spec.strip()
        if spec.startswith(("./", "../")):
            spec = str(here / spec)
        if repo != ".":
            # a repository path from the configuration's folder, as the scan of ``base`` sees it
            rel = os.path.relpath(here / repo, os.path.abspath(base)).replace(os.sep, "/")
            if rel.startswith(".."):
                continue  # a repository outside the scanned folder
            repo = rel
        out.append((repo, spec))
    return tuple(sorted(out))


def load_config(root: str, config_file: Path | None = None, **overrides: Any) -> AuditConfig:
    """The configuration of a scan of ``root``: the project's table (``config_file`` or
    the nearest, see ``_read_project_table``), every key checked, under ``overrides``."""
    table, source, config_dir = _read_project_table(Path(root), config_file)
    unknown = set(table) - _KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown keys {sorted(unknown)} (known: {sorted(_KEYS)})")
    roots = table.get("hot_roots", [])
    _check_shape(source, ListOf(HOT_ROOT).check, roots, "hot_roots")
    exclude_value = table.get("exclude", [])
    if not isinstance(exclude_value, list) or not all(isinstance(e, str) and e for e in exclude_value):
        raise ConfigError(f"{source}: exclude must be a list of glob strings, like [\"third_party/*\"]")
    base = Path(root) if Path(root).is_dir() else Path(root).parent
    exclude = tuple(_rebased(exclude_value, config_dir, base)) + tuple(overrides.pop("exclude", ()) or ())
    aside = table.get("aside", list(ASIDE_DEFAULT))
    if not isinstance(aside, list) or not all(isinstance(e, str) and e for e in aside):
        raise ConfigError(f"{source}: aside must be a list of folder globs, like [\"tests/\", \"benchmark*/\"]")
    level = table.get("default_level")
    if level is not None and not isinstance(level, str):
        raise ConfigError(f"{source}: default_level must be a level name, like \"info\"")
    for key in EXTENSIBLE:
        if key in table:
            _check_shape(source, check_rule_table, key, table[key])
    _check_shape(source, check_frequencies, table)
    selection = _check_selection(table, source, overrides)
    deployment = _check_deployment(table.get("deployment"), source)
    gate = table.get("gate", {})
    if not isinstance(gate, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in gate.items()):
        raise ConfigError(f"{source}: gate must be a table of rule id -> hot, default, any or off, like {{\"eager-format\" = \"any\"}}")
    values: dict[str, Any] = {
        **selection, "root": root, "exclude": exclude, "hot_roots": tuple(roots), "aside": tuple(aside),
        "default_level": table.get("default_level"), "config_source": source,
        "rule_tables": tuple((key, table[key]) for key in EXTENSIBLE if key in table),
        "gate": tuple(sorted(gate.items())), "deployment": deployment,
        "upstream": _check_upstream(table.get("upstream"), source, config_dir, base),
    }
    include = table.get("include_upstream", False)
    if not isinstance(include, bool):
        raise ConfigError(f"{source}: include_upstream must be true or false")
    values["include_upstream"] = include
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
