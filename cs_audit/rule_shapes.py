"""The shape of every value a project may give the rule tables it extends (``emitters``,
``env_apis``, ``hot_paths``, ...): checked when the configuration is read, so a wrong type is
one error naming its key instead of a value silently ignored or an exception deep in the
rule set."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from cs_audit.frequency import NOT_HOT, STEP
from cs_audit.ruleset import _EXPECTED_KEYS, EXTENSIBLE, read_rule_texts, safe_load_yaml


class ShapeError(ValueError):
    """A value of a project's rule table has the wrong shape; the message names its key."""


def _kind(value: Any) -> str:
    """What a configuration value is, in the words of its file formats."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a table"
    return f"a {type(value).__name__}"


def _wrong(key: str, expected: str, value: Any) -> ShapeError:
    return ShapeError(f"{key} must be {expected}, not {_kind(value)}")


class Shape(Protocol):
    @property
    def one(self) -> str:
        """What a value must be, in messages: "a name"."""

    @property
    def many(self) -> str:
        """What a list's items must be: "names"."""

    def check(self, value: Any, key: str, shipped: Any = None) -> None:
        """Raise ``ShapeError`` naming ``key`` unless ``value`` has this shape; ``shipped`` is
        the value the project's is merged into (it may supply a table's required keys)."""


@dataclass(frozen=True)
class Leaf:
    one: str
    many: str
    accepts: Callable[[Any], bool]

    def check(self, value: Any, key: str, shipped: Any = None) -> None:
        if not self.accepts(value):
            raise _wrong(key, self.one, value)


@dataclass(frozen=True)
class Regex:
    """A regular expression, compiled here so a bad one is named before any file is read."""

    #: named groups the rules read from a match
    groups: tuple[str, ...] = ()
    #: None turns the rule off (the rules test the value before compiling it)
    nullable: bool = False

    @property
    def one(self) -> str:
        named = "".join(f" with a group (?P<{g}>...)" for g in self.groups)
        return f"a regular expression{named}" + (" or empty" if self.nullable else "")

    many = "regular expressions"

    def check(self, value: Any, key: str, shipped: Any = None) -> None:
        if value is None and self.nullable:
            return
        if not isinstance(value, str):
            raise _wrong(key, self.one, value)
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ShapeError(f"{key} is not a regular expression: {exc}") from None
        missing = [g for g in self.groups if g not in compiled.groupindex]
        if missing:
            raise ShapeError(f"{key} must be {self.one}")


@dataclass(frozen=True)
class OneOf:
    values: tuple[str, ...]

    @property
    def one(self) -> str:
        return "one of " + ", ".join(self.values)

    @property
    def many(self) -> str:
        return "values among " + ", ".join(self.values)

    def check(self, value: Any, key: str, shipped: Any = None) -> None:
        if not isinstance(value, str) or value not in self.values:
            raise ShapeError(f"{key} must be {self.one}" + ("" if isinstance(value, str) else f", not {_kind(value)}"))


@dataclass(frozen=True)
class ListOf:
    item: Shape

    @property
    def one(self) -> str:
        return f"a list of {self.item.many}"

    @property
    def many(self) -> str:
        return f"lists of {self.item.many}"

    def check(self, value: Any, key: str, shipped: Any = None) -> None:
        if not isinstance(value, list):
            raise _wrong(key, self.one, value)
        for i, item in enumerate(value):  # appended to the shipped list: each stands alone
            self.item.check(item, f"{key}[{i}]")


@dataclass(frozen=True)
class MapOf:
    """A table whose keys the project chooses (an API's dotted name, a frequency)."""

    value: Shape
    keys: Shape | None = None
    #: how one is written, for messages (TOML)
    example: str = ""

    @property
    def one(self) -> str:
        return f"a table like {self.example}" if self.example else f"a table of {(self.keys or NAME).many} -> {self.value.many}"

    @property
    def many(self) -> str:
        return f"tables like {self.example}" if self.example else f"tables of {(self.keys or NAME).many} -> {self.value.many}"

    def check(self, value: Any, key: str, shipped: Any = None) -> None:
        if not isinstance(value, Mapping):
            raise _wrong(key, self.one, value)
        before = shipped if isinstance(shipped, Mapping) else {}
        for name, item in value.items():
            (self.keys or NAME).check(name, f"{key} key {name!r}")
            self.value.check(item, f"{key}[{name!r}]", before.get(name))


@dataclass(frozen=True)
class Record:
    """A table with known keys, some of them required."""

    keys: Mapping[str, Shape]
    required: frozenset[str] = frozenset()
    #: how one is written, for messages (TOML)
    example: str = ""
    #: what it is, for messages, when no example says it
    what: str = "a table"

    @property
    def one(self) -> str:
        return f"a table like {self.example}" if self.example else self.what

    @property
    def many(self) -> str:
        return f"tables like {self.example}" if self.example else "tables"

    def check(self, value: Any, key: str, shipped: Any = None) -> None:
        if not isinstance(value, Mapping):
            raise _wrong(key, self.one, value)
        unknown = [k for k in value if k not in self.keys]
        if unknown:
            raise ShapeError(f"{key}: unknown keys {sorted(map(str, unknown))} (known: {sorted(self.keys)})")
        before = shipped if isinstance(shipped, Mapping) else {}
        missing = sorted(self.required - set(value) - set(before))
        if missing:
            raise ShapeError(f"{key} is missing {', '.join(missing)}: it must be {self.one}")
        for name, item in value.items():
            self.keys[name].check(item, f"{key}.{name}", before.get(name))


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


NAME = Leaf("a name (a non-empty string)", "names (non-empty strings)", _is_name)
TEXT = Leaf("a string", "strings", lambda v: isinstance(v, str))
FUNCTION = Leaf('a function name, like "execute_model"', "function names", lambda v: isinstance(v, str) and v.isidentifier())
GLOB = Leaf('a glob string, like "*Runner"', "glob strings", _is_name)
NUMBER = Leaf("a number", "numbers", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
INDEX = Leaf("a whole number from 0", "whole numbers from 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0)
FLAG = Leaf("true or false", "true or false", lambda v: isinstance(v, bool))
NAMES = ListOf(NAME)
#: a frequency's name; which are declared is checked with the tables together (``check_frequencies``)
FREQUENCY = Leaf('a frequency name, like "step"', "frequency names", _is_name)

#: a hot root, in ``hot_paths.roots`` and in the configuration's own ``hot_roots``
HOT_ROOT = Record(
    {"name": FUNCTION, "class": GLOB, "path": GLOB, "frequency": FREQUENCY, "process": TEXT, "replayed": FLAG, "loop": FLAG},
    frozenset({"name"}), "{name = 'step', frequency = 'step'}",
)

#: the keys of each extensible rule file (``rules/<stem>.yaml``) and the shape of their values
TABLES: dict[str, dict[str, Shape]] = {
    "emitters": {
        "logging": Record({
            "factories": NAMES, "modules": NAMES, "receiver_names": NAMES,
            "methods": MapOf(NAME), "level_guards": NAMES, "default_level": NAME, "default_on_levels": NAMES,
        }),
        "levels": NAMES, "print": NAMES, "stdwrite": NAMES,
        # the roles facts.py gives an emitter call that needs no level
        "dumps": MapOf(OneOf(("dump", "print", "stdwrite", "write")), example="{'mylib.store' = 'dump'}"),
        "dump_path_args": MapOf(INDEX, example="{'mylib.store' = 1}"),
        "eager_calls": NAMES, "file_handle_names": NAMES, "open_functions": NAMES, "makedirs_functions": NAMES,
        "timestamp_calls": NAMES, "path_builders": NAMES,
        "debug_name_pattern": Regex(), "flag_name_pattern": Regex(),
    },
    "env_apis": {
        "calls": MapOf(Record({"via": NAME}, frozenset({"via"}), "{via = 'os.getenv'}"), example="{'mylib.getenv' = {via = 'os.getenv'}}"),
        "mappings": NAMES,
        "registries": ListOf(Record(
            {"id": NAME, "object": NAME, "access": OneOf(("attribute", "method")), "methods": NAMES,
             "name_pattern": Regex(), "cached_after": NAME},
            frozenset({"id", "object", "access"}), "{id = 'my-envs', object = 'mylib.envs', access = 'attribute'}",
        )),
        "once_decorators": NAMES, "once_functions": NAMES, "off_values": ListOf(TEXT),
        "categories": ListOf(Record({"category": NAME, "pattern": Regex()}, frozenset({"category", "pattern"}),
                                    "{category = 'dump', pattern = 'DUMP'}")),
    },
    "gpu_syncs": {
        "methods": NAMES, "functions": NAMES, "to_cpu": FLAG, "not_tensor_receivers": NAMES,
        "host_names": Regex(nullable=True), "device_apis": ListOf(Regex()),
    },
    "hot_paths": {
        "roots": ListOf(HOT_ROOT),
        "loop_raises": ListOf(Record({"iter": Regex(), "from": FREQUENCY, "to": FREQUENCY}, frozenset({"iter", "from", "to"}),
                                     "{iter = '(?i)layer', from = 'step', to = 'layer'}")),
        "event_loops": Record({"step_calls": NAMES, "stop_flags": Regex(), "process": TEXT}),
        "rare_tests": Regex(nullable=True),
        "steady_tests": Regex(nullable=True),
        "replay_tests": Regex(nullable=True),
        "wait_clocks": Regex(nullable=True),
    },
    "costs": {
        "source": TEXT,
        "events": MapOf(Record({"h200_host": NUMBER, "dev": NUMBER, "measured": TEXT}, frozenset({"h200_host"}),
                               "{h200_host = 1.5, measured = 'what was timed'}")),
        "sync_added_us_per_step": MapOf(NUMBER, FREQUENCY), "sync_baseline_step_us": NUMBER,
        "frequencies": MapOf(Record(
            {"rank": NUMBER, "multiplier": NUMBER, "words": NAME, "legend": NAME, "symbol": TEXT},
            frozenset({"rank", "multiplier", "words"}), "{rank = 2, multiplier = 4, words = 'every scheduler tick'}",
        ), FREQUENCY),
    },
    "call_graph": {"callback_calls": NAMES},
    "defaults": {
        "option_class_names": Regex(), "option_class_decorators": NAMES, "option_class_bases": NAMES,
        "option_class_records": NAMES, "option_module_paths": Regex(), "option_ignore_paths": Regex(),
        "option_receivers": Regex(), "field_calls": NAMES, "argument_calls": NAMES, "unset_predicates": Regex(nullable=True), "plain_models": Regex(nullable=True),
        "platform": Leaf('a platform name, like "rocm"', "platform names", _is_name), "platforms": MapOf(Regex()), "platform_paths": MapOf(Regex()),
        "graph_platforms": NAMES, "model_paths": Regex(groups=("model",), nullable=True), "feature_paths": MapOf(Regex()),
        "feature_tests": MapOf(Regex()), "feature_off_tests": MapOf(Regex()), "feature_classes": MapOf(Regex()),
        "device_options": Regex(nullable=True), "platform_devices": MapOf(NAME), "request_classes": Regex(nullable=True),
    },
}
assert set(TABLES) == set(EXTENSIBLE) and all(set(TABLES[s]) == _EXPECTED_KEYS[f"{s}.yaml"] for s in TABLES)


@lru_cache(maxsize=1)
def _shipped_tables() -> dict[str, Any]:
    """The shipped extensible tables, parsed once per process (``history`` reads a
    configuration per commit)."""
    texts = read_rule_texts()
    return {stem: safe_load_yaml(texts[f"{stem}.yaml"]) for stem in EXTENSIBLE}


def check_rule_table(stem: str, table: Any) -> None:
    """Raise ``ShapeError`` naming the key unless ``table`` is a valid addition to
    ``rules/<stem>.yaml``: each value checked against the shipped one it is merged into."""
    shipped = _shipped_tables()[stem]
    Record(TABLES[stem], what=f"a table keyed like rules/{stem}.yaml").check(table, stem, shipped)
    # the one value that names another key of its table
    if stem == "defaults" and "platform" in table:
        known = sorted({**shipped["platforms"], **table.get("platforms", {})})
        if table["platform"] not in known:
            raise ShapeError(f"defaults.platform must be one of {', '.join(known)} (defaults.platforms)")


def check_frequencies(config: Mapping[str, Any]) -> None:
    """Raise ``ShapeError`` naming the key unless every frequency a project's configuration
    (``[tool.cs-audit]``, its shapes checked) gives names one the shipped ``costs.yaml`` or its own
    ``costs.frequencies`` declares."""
    declared = [*_shipped_tables()["costs"]["frequencies"], *(config.get("costs") or {}).get("frequencies", {})]
    hot = config.get("hot_paths") or {}
    named = [(f"hot_roots[{i}].frequency", r.get("frequency", STEP)) for i, r in enumerate(config.get("hot_roots") or ())]
    named += [(f"hot_paths.roots[{i}].frequency", r.get("frequency", STEP)) for i, r in enumerate(hot.get("roots") or ())]
    named += [(f"hot_paths.loop_raises[{i}].{end}", r[end]) for i, r in enumerate(hot.get("loop_raises") or ()) for end in ("from", "to")]
    named += [(f"costs.sync_added_us_per_step key {name!r}", name) for name in (config.get("costs") or {}).get("sync_added_us_per_step", {})]
    for name, entry in ((config.get("costs") or {}).get("frequencies") or {}).items():
        for field in ("rank", "multiplier"):
            if entry.get(field, 1) < 0:
                raise ShapeError(f"costs.frequencies[{name!r}].{field} must be a number from 0")
        if "rank" in entry and (entry["rank"] == 0) != (name in NOT_HOT):
            raise ShapeError(f"costs.frequencies[{name!r}].rank must be {'0' if name in NOT_HOT else 'above 0'} "
                             f"(only {' and '.join(sorted(NOT_HOT))} are off the hot paths)")
    for key, name in named:
        if name not in declared:
            raise ShapeError(f"{key} must be one of {', '.join(dict.fromkeys(declared))} (costs.frequencies), not {name!r}")
