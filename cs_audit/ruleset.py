"""Load and validate the rule data in ``rules/*.yaml`` (shipped as ``cs_audit.rules``).

Everything the analysis needs to know about APIs, hot roots and costs is data;
this module turns it into one frozen ``RuleSet`` once per scan.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from cs_audit.frequency import STEP, Frequencies, FrequencyError, FrequencyName
from cs_audit.records import record

MAX_RULE_FILE_BYTES = 1 << 20

_EXPECTED_KEYS: dict[str, set[str]] = {
    "rules.yaml": {"rules"},
    "env_apis.yaml": {"calls", "mappings", "registries", "once_decorators", "once_functions", "off_values", "categories"},
    "emitters.yaml": {
        "logging", "levels", "print", "stdwrite", "dumps", "dump_path_args", "eager_calls", "file_handle_names",
        "open_functions", "makedirs_functions", "timestamp_calls", "path_builders", "debug_name_pattern",
        "flag_name_pattern",
    },
    "gpu_syncs.yaml": {"methods", "functions", "to_cpu", "not_tensor_receivers", "host_names", "device_apis"},
    "hot_paths.yaml": {"roots", "loop_raises", "event_loops", "rare_tests", "steady_tests", "replay_tests", "wait_clocks"},
    "call_graph.yaml": {"callback_calls"},
    "costs.yaml": {"source", "events", "sync_added_us_per_step", "sync_baseline_step_us", "frequencies"},
    "dispositions.yaml": {"minimal_set", "level_knob_pattern", "rules"},
    "defaults.yaml": {"option_class_names", "option_class_decorators", "option_class_bases", "option_class_records",
                      "option_module_paths", "option_ignore_paths", "option_receivers", "field_calls", "argument_calls",
                      "unset_predicates", "plain_models", "platform", "platforms", "platform_paths", "graph_platforms", "device_options", "platform_devices", "model_paths", "feature_paths",
                      "feature_tests", "feature_off_tests", "feature_classes", "request_classes"},
    "switch_kinds.yaml": {
        "observe_calls", "inject_calls", "announce_calls", "feature_words", "neutral_calls", "write_calls", "read_calls", "search_path_calls", "numeric_calls",
        "name_kinds", "test_words", "number_words", "path_words", "toggle_words", "output_words",
        "generic_calls", "observing_receivers", "compute_calls", "location_checks", "input_words", "producing_calls",
        "log_level_values", "logging_config_calls", "path_methods", "max_level",
    },
}
_DISPOSITION_KEYS = {"id", "when", "disposition", "merge_into", "reason"}
_WHEN_KEYS = {"readers_min", "readers_max", "setters_min", "setters_max", "category", "level_knob", "level_knobs_min", "gpu_sync",
              "by_name", "foreign", "aside", "name_words"}
_RULE_KEYS = {"id", "severity", "gates_ci", "default_on_cost", "summary", "why", "fix", "example", "ok", "words"}
_WORDS_KEYS = {"phrase", "noun", "rank"}
_ROOT_KEYS = {"name", "class", "path", "frequency", "process", "replayed", "loop"}
_EVENT_LOOP_KEYS = {"step_calls", "stop_flags", "process"}


class RuleDataError(ValueError):
    """The rule data (shipped or user-supplied) is malformed."""


@dataclass(frozen=True, slots=True)
class RuleWords:
    """How the audit's §1 names a finding of a rule (``words`` of its entry in rules.yaml)."""

    #: in a statement's row, with what the rule's module adds from the finding (``words``)
    phrase: str
    #: counted in a folder's row (`log line ×3`), as markdown
    noun: str
    #: a statement's row names its rules the lowest rank first
    rank: int


@dataclass(frozen=True, slots=True)
class RuleSpec:
    id: str
    severity: str
    gates_ci: bool
    summary: str
    why: str
    fix: str
    example: str
    ok: str
    words: RuleWords
    #: its default-on findings on hot paths count in the audit's §1 (default-on cost)
    default_on_cost: bool = False


@dataclass(frozen=True, slots=True)
class HotRoot:
    name: str
    class_glob: str | None
    path_glob: str | None
    frequency: FrequencyName
    #: the side of the deployment the root runs in (engine, worker, API server, ...): the
    #: audit's §1 sums per-step costs per side, never across them ("" for a project root without one)
    process: str = ""
    #: a model's forward, which the engine captures once as a device graph (CUDA graphs) and
    #: then replays in steady decoding without running its Python (``Defaults.replays_graphs``)
    replayed: bool = False
    #: the root drives its steps from a `while` loop (a generation loop): one time round is one
    #: step, and what runs before and after the loop runs once a call
    loop: bool = False

    def matches(self, name: str, class_name: str | None, path: str) -> bool:
        if name != self.name:
            return False
        if self.class_glob is not None and (class_name is None or not fnmatchcase(class_name, self.class_glob)):
            return False
        return self.path_glob is None or fnmatchcase(path, self.path_glob)


@record
@dataclass(frozen=True, slots=True)
class Registry:
    id: str
    object: str
    access: str  # "method" | "attribute"
    methods: tuple[str, ...]
    name_pattern: str
    #: a function (dotted) after whose call the engine caches the registry: reads reached
    #: only after it are ``cached``, not per-call reads
    cached_after: str | None = None


@dataclass(frozen=True, slots=True)
class DispositionRule:
    id: str
    when: tuple[tuple[str, object], ...]
    disposition: str
    merge_into: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Defaults:
    """Where a tree declares its options (``rules/defaults.yaml``) and what the audited
    deployment runs with: its platform, and the options and env vars it sets (``[tool.cs-audit]
    deployment``; none: every option at its default)."""

    class_names: re.Pattern[str]
    class_decorators: frozenset[str]
    class_bases: frozenset[str]
    #: decorators and bases of a record class: its fields are options in a settings module
    class_records: frozenset[str]
    module_paths: re.Pattern[str]
    #: declarations there are no options of the engine (tests, benchmarks, examples)
    ignore_paths: re.Pattern[str]
    #: the last name of a receiver that looks like settings (``joins.defaults``: ambiguous names)
    receivers: re.Pattern[str]
    field_calls: frozenset[str]
    argument_calls: frozenset[str]
    #: platform -> the test true on it (matched in full against a call's last name or a tested name)
    platforms: tuple[tuple[str, re.Pattern[str]], ...]
    #: platform -> the paths of the modules written for it alone (searched)
    platform_paths: tuple[tuple[str, re.Pattern[str]], ...]
    platform: str
    #: a model architecture's own modules (group `model` names it); None: no such layout
    model_paths: re.Pattern[str] | None = None
    #: the predicates (`is_none`) that hold on a wrapped option left unset (None: no such rule)
    unset_predicates: re.Pattern[str] | None = None
    #: the architectures the deployment serves (() : not stated)
    models: tuple[str, ...] = ()
    #: the model classes of the plain model an unstated deployment serves (None: no such rule)
    plain_models: re.Pattern[str] | None = None
    #: optional feature -> the paths of the packages written for it alone (searched)
    feature_paths: tuple[tuple[str, re.Pattern[str]], ...] = ()
    #: optional feature -> the tests true only with it, and those true only without it (each
    #: matched in full against the last names of a called function or a tested name:
    #: `contains_mm_inputs()`, `spec_algorithm.is_none()`)
    feature_tests: tuple[tuple[str, re.Pattern[str]], ...] = ()
    feature_off_tests: tuple[tuple[str, re.Pattern[str]], ...] = ()
    #: optional feature -> the names of the classes written for it alone (searched)
    feature_classes: tuple[tuple[str, re.Pattern[str]], ...] = ()
    #: the optional features the deployment turns on
    features: frozenset[str] = frozenset()
    #: option -> the value the deployment gives it (a Python literal)
    options: tuple[tuple[str, object], ...] = ()
    #: env vars the deployment sets
    env: frozenset[str] = frozenset()
    #: whether a project stated the deployment (the report says which it audits)
    stated: bool = False
    #: the platforms whose engines replay a model's forward as a captured device graph
    graph_platforms: frozenset[str] = frozenset()
    #: the options that hold the device (matched in full), and the device of each platform
    #: whose device goes by another name
    device_options: re.Pattern[str] | None = None
    platform_devices: tuple[tuple[str, str], ...] = ()
    #: the classes of requests a handler is handed (matched in full against the annotation's
    #: last name): engine state copied from their fields is set only by such a request
    request_classes: re.Pattern[str] | None = None

    @property
    def replays_graphs(self) -> bool:
        """Whether the deployment's decoding steps replay captured graphs of the model's
        forward (its platform's default), unless it runs the model eagerly (``EAGER``)."""
        return self.platform in self.graph_platforms and EAGER not in self.features

    def model_of(self, path: str) -> str | None:
        """The model architecture whose own module ``path`` is (None: code any model may run)."""
        found = self.model_paths.search(path) if self.model_paths is not None else None
        return found.group("model") if found is not None else None

    def serves_module(self, path: str) -> bool:
        """Whether the deployment loads ``path`` as an architecture's own module: any module
        of no architecture, and those of the architectures it states. Unstated, it serves a
        plain model, and no architecture's own start-up overrides apply."""
        model = self.model_of(path)
        return model is None or model in self.models

    def module_platform(self, path: str) -> str | None:
        """The platform a module is written for alone, by its path; None for any platform or
        the deployment's own."""
        for platform, pattern in self.platform_paths:
            if pattern.search(path):
                return None if platform == self.platform else platform
        return None

    def module_feature(self, path: str, class_name: str | None = None) -> str | None:
        """The optional feature a module (or a class of it) is written for alone, by its path
        or the class's name; None for code any deployment runs or a feature the deployment
        turns on."""
        for feature, pattern in self.feature_paths:
            if pattern.search(path):
                return None if feature in self.features else feature
        for feature, pattern in self.feature_classes if class_name else ():
            if pattern.search(class_name):  # type: ignore[arg-type]
                return None if feature in self.features else feature
        return None

    @property
    def options_named(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.options)

    def feature_test(self, ref: str) -> tuple[str, bool] | None:
        """The optional feature a test is true only with (``(feature, True)``) or only without
        (``(feature, False)``), whether or not the deployment turns it on; ``ref`` is a called
        function or a tested name, whose last names a pattern matches in full."""
        for tests, holds_with_it in ((self.feature_tests, True), (self.feature_off_tests, False)):
            for feature, pattern in tests:
                if pattern.search(ref):
                    return feature, holds_with_it
        return None

    def device_test(self, option: str, device: object) -> tuple[str, bool] | None:
        """(the device compared, whether it is the deployment's) when ``option`` holds the
        device and ``device`` names one (`cfg.device == "npu"`); None for any other test."""
        if self.device_options is None or not isinstance(device, str) or not self.device_options.fullmatch(option):
            return None
        renamed = dict(self.platform_devices)
        if device not in {name for name, _ in self.platforms} | set(renamed.values()):
            return None
        return device, renamed.get(self.platform, self.platform) == device

    def platform_of(self, ref: str, called: bool) -> str | None:
        """The platform a test is true on: ``ref`` a call's callee (its last name is
        matched) or a tested name (matched whole); None when it is no platform test."""
        name = ref.rsplit(".", 1)[-1] if called else ref
        for platform, pattern in self.platforms:
            if pattern.fullmatch(name):
                return platform
        return None


@dataclass(frozen=True, slots=True)
class SwitchKinds:
    """``rules/switch_kinds.yaml``: what gated calls and value uses say a switch is."""

    observe: re.Pattern[str]
    inject: re.Pattern[str]
    announce: re.Pattern[str]
    feature_words: frozenset[str]
    neutral: re.Pattern[str]
    write: re.Pattern[str]
    read: re.Pattern[str]
    search_path: re.Pattern[str]
    numeric: re.Pattern[str]
    #: (sub-kind, words anywhere in the name, words that count only as the name's last)
    name_kinds: tuple[tuple[str, frozenset[str], frozenset[str]], ...]
    test_words: frozenset[str]
    number_words: frozenset[str]
    path_words: frozenset[str]
    toggle_words: frozenset[str]
    output_words: frozenset[str]
    generic: re.Pattern[str]
    observing_receiver: re.Pattern[str]
    compute: re.Pattern[str]
    location_check: re.Pattern[str]
    input_words: frozenset[str]
    producing: re.Pattern[str]
    log_levels: frozenset[str]
    logging_config: re.Pattern[str]
    path_method: re.Pattern[str]
    #: the largest int a switch is compared with as a level (`>= 3`); larger ones are sizes
    max_level: int = 10


@dataclass(frozen=True)
class RuleSet:
    rules: dict[str, RuleSpec]
    env_calls: dict[str, str]
    env_mappings: frozenset[str]
    registries: tuple[Registry, ...]
    once_decorators: frozenset[str]
    once_functions: frozenset[str]
    off_values: frozenset[str]
    categories: tuple[tuple[str, re.Pattern[str]], ...]
    logger_factories: frozenset[str]
    logging_modules: frozenset[str]
    logger_receivers: frozenset[str]
    log_methods: dict[str, str]
    level_guards: frozenset[str]
    default_level: str
    default_on_levels: frozenset[str]
    levels: tuple[str, ...]
    print_calls: frozenset[str]
    stdwrite_calls: frozenset[str]
    dump_calls: dict[str, str]
    #: dump function -> the positional argument that is its path (0 when not listed)
    dump_path_args: dict[str, int]
    eager_calls: frozenset[str]
    file_handle_names: frozenset[str]
    open_functions: frozenset[str]
    makedirs_functions: frozenset[str]
    timestamp_calls: frozenset[str]
    path_builders: frozenset[str]
    debug_name_re: re.Pattern[str]
    flag_name_re: re.Pattern[str]
    sync_methods: frozenset[str]
    sync_functions: frozenset[str]
    sync_to_cpu: bool
    not_tensor_receivers: frozenset[str]
    hot_roots: tuple[HotRoot, ...]
    loop_raises: tuple[tuple[re.Pattern[str], str, str], ...]
    #: names whose test makes a branch an event (``hot_paths.yaml`` ``rare_tests``)
    rare_test_re: re.Pattern[str] | None
    #: names whose test is true in the steady state: a branch that needs it false is an event
    #: (``hot_paths.yaml`` ``steady_tests``)
    steady_test_re: re.Pattern[str] | None
    #: names whose test holds when a captured graph replays: steady too where the deployment
    #: replays graphs (``hot_paths.yaml`` ``replay_tests``; ``steady_names``)
    replay_test_re: re.Pattern[str] | None
    #: event loops (``extract.loops``): the method names that run a step (leading
    #: underscores dropped), and the names of stop/run flags a loop's test may check
    event_loop_steps: frozenset[str]
    stop_flag_re: re.Pattern[str]
    #: the process side of an event loop that no configured root matches
    event_loop_process: str
    cost_source: str
    costs_us: dict[str, float]
    sync_added_us: dict[str, float]
    #: how often sites run: each frequency's rank, multiplier and words (``costs.yaml``)
    frequencies: Frequencies
    minimal_set: dict[str, str]
    level_knob_re: re.Pattern[str]
    disposition_rules: tuple[DispositionRule, ...]
    #: last names of calls that call the functions handed to them (``rules/call_graph.yaml``)
    callback_calls: frozenset[str]
    digest: str
    #: how a use of each API of the tables reads in source (``api_literals``): the per-file
    #: pre-filter walks the statements that hold one, so an API added to the YAML is seen
    api_literals: tuple[tuple[str, ...], ...] = ()
    switch_kinds: SwitchKinds | None = None
    defaults: Defaults | None = None
    #: the last part of a name that holds host data (`seq_lens_cpu`); None: no such names
    host_name_re: re.Pattern[str] | None = None
    #: what a file handling device memory names (``device_apis``); None: every file may
    device_re: re.Pattern[str] | None = None
    #: the patterns ``device_re`` joins, each on its own (``extract.python.touches_device``)
    device_apis: tuple[str, ...] = ()
    #: clock calls a wait measures its time with (``hot_paths.yaml`` ``wait_clocks``): a branch
    #: that runs once that time passes a bound is an event
    wait_clock_re: re.Pattern[str] | None = None

    def __getitem__(self, rule_id: str) -> RuleSpec:
        return self.rules[rule_id]

    def level_passes(self, level: str | None, threshold: str | None = None) -> bool:
        """Whether a record at ``level`` passes a logger set to ``threshold``."""
        if level is None or level == "dynamic":
            return True
        if level == "once":
            return False
        threshold = threshold or self.default_level
        order = {name: i for i, name in enumerate(self.levels)}
        return order.get(level, len(order)) >= order.get(threshold, 1)

    def in_loop(self, frequency: FrequencyName, loop_iter: str) -> FrequencyName:
        """The frequency of code inside a loop over ``loop_iter`` in a ``frequency`` function."""
        for pattern, source, target in self.loop_raises:
            if source == frequency and pattern.search(loop_iter):
                return target
        return frequency

    def category_of(self, var: str) -> str:
        for category, pattern in self.categories:
            if pattern.search(var):
                return category
        return "config"

    @property
    def loop_root_names(self) -> frozenset[str]:
        """The names of the hot roots that drive their steps from a `while` loop (``loop``)."""
        return frozenset(r.name for r in self.hot_roots if r.loop)

    def hot_root_for(self, name: str, class_name: str | None, path: str) -> HotRoot | None:
        for root in self.hot_roots:
            if root.matches(name, class_name, path):
                return root
        return None

    def with_registries(self, found: tuple[Registry, ...]) -> RuleSet:
        """With the registries a tree defines (``extract.registries``); the digest covers them,
        so facts extracted without them are not reused."""
        from dataclasses import replace

        if not found:
            return self
        digest = hashlib.sha256(f"{self.digest}\0{found!r}".encode()).hexdigest()[:16]
        return replace(self, registries=self.registries + found, digest=digest)

    def with_deployment(self, platform: str | None, options: dict[str, object], env: tuple[str, ...],
                        models: tuple[str, ...] = (), features: tuple[str, ...] = ()) -> RuleSet:
        """With the deployment a project states: the platform, the options it sets, the env
        vars it sets and the model architectures it serves (checked by ``config``); the digest
        covers it."""
        from dataclasses import replace

        assert self.defaults is not None
        defaults = replace(self.defaults, platform=platform or self.defaults.platform, options=tuple(sorted(options.items())),
                           env=frozenset(env), stated=True, models=tuple(sorted(models)), features=frozenset(features))
        if defaults == self.defaults:
            return self
        digest = hashlib.sha256(f"{self.digest}\0{defaults.platform}\0{defaults.options!r}\0{sorted(defaults.env)!r}\0{defaults.models!r}"
                                f"\0{sorted(defaults.features)!r}".encode()).hexdigest()[:16]
        return replace(self, defaults=defaults, digest=digest)

    def with_extra_roots(self, roots: list[dict[str, Any]]) -> RuleSet:
        from dataclasses import replace

        extra = tuple(_parse_root(r, f"hot_roots[{i}]", self.frequencies) for i, r in enumerate(roots))
        # idempotent: the command line and ``run_audit`` both prepare the rule set of a scan
        merged = replace(self, hot_roots=extra + tuple(r for r in self.hot_roots if r not in extra))
        if merged.loop_root_names == self.loop_root_names:
            return merged
        # a root driving its steps from a loop changes what each file's facts hold (``step_loops``)
        digest = hashlib.sha256(f"{self.digest}\0loops\0{sorted(merged.loop_root_names)!r}".encode()).hexdigest()[:16]
        return replace(merged, digest=digest)


#: libyaml's safe loader when PyYAML has it (the rule files are parsed on every run, much
#: faster by libyaml than in pure Python), the pure-Python one when not
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load_yaml(text: str | bytes) -> Any:
    """``yaml.safe_load`` through the fastest safe loader available."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a SafeLoader


class YamlAliasError(yaml.YAMLError):
    """A YAML file of the project uses an anchor or alias, which its files never need."""


def load_yaml_without_aliases(text: str | bytes) -> Any:
    """``safe_load_yaml`` for a file from the scanned tree: anchors and aliases are refused
    (read as events first, which never expand them), so a few hundred bytes of aliases
    cannot grow into gigabytes of nested lists."""
    for event in yaml.parse(text, Loader=_SAFE_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            mark = event.start_mark
            where = f"line {mark.line + 1}: " if mark is not None else ""
            raise YamlAliasError(f"{where}anchors and aliases are not allowed here")
    return safe_load_yaml(text)


def _load_yaml(name: str, text: str) -> dict[str, Any]:
    if len(text) > MAX_RULE_FILE_BYTES:
        raise RuleDataError(f"{name}: larger than {MAX_RULE_FILE_BYTES} bytes")
    data = safe_load_yaml(text)
    if not isinstance(data, dict):
        raise RuleDataError(f"{name}: expected a mapping at top level")
    unknown = set(data) - _EXPECTED_KEYS.get(name, set(data))
    if unknown:
        raise RuleDataError(f"{name}: unknown keys {sorted(unknown)}")
    return data


def _parse_root(entry: Any, where: str, frequencies: Frequencies) -> HotRoot:
    if not isinstance(entry, dict) or "name" not in entry:
        raise RuleDataError(f"{where}: hot root needs a name: {entry!r}")
    unknown = set(entry) - _ROOT_KEYS
    if unknown:
        raise RuleDataError(f"{where}: hot root has unknown keys {sorted(unknown)}")
    try:
        frequency = frequencies.check(entry.get("frequency", STEP), f"{where}: {entry['name']}")
    except FrequencyError as exc:
        raise RuleDataError(str(exc)) from None
    return HotRoot(str(entry["name"]), entry.get("class"), entry.get("path"), frequency, str(entry.get("process", "")),
                   entry.get("replayed") is True, entry.get("loop") is True)


def _rule_words(entry: dict[str, Any]) -> RuleWords:
    """A rule's ``words``: a table of a phrase and a noun (non-empty strings) and a rank (a whole number)."""
    words = entry.get("words")
    shape = "a table of phrase, noun (non-empty strings) and rank (a whole number)"
    if words is None:
        raise RuleDataError(f"rules.yaml: {entry.get('id')}: no words ({shape}, as the shipped rules have)")
    if not isinstance(words, dict) or set(words) != _WORDS_KEYS:
        raise RuleDataError(f"rules.yaml: {entry.get('id')}: words must be {shape}, not {words!r}")
    phrase, noun, rank = words["phrase"], words["noun"], words["rank"]
    if not (isinstance(phrase, str) and phrase.strip() and isinstance(noun, str) and noun.strip()
            and isinstance(rank, int) and not isinstance(rank, bool)):
        raise RuleDataError(f"rules.yaml: {entry.get('id')}: words must be {shape}, not {words!r}")
    return RuleWords(phrase, noun, rank)


def _parse_disposition(entry: dict[str, Any]) -> DispositionRule:
    unknown = set(entry) - _DISPOSITION_KEYS
    when = entry.get("when") or {}
    unknown |= {f"when.{k}" for k in set(when) - _WHEN_KEYS}
    if unknown:
        raise RuleDataError(f"dispositions.yaml: {entry.get('id')}: unknown keys {sorted(unknown)}")
    if entry.get("disposition") not in ("KEEP", "MERGE", "REMOVE"):
        raise RuleDataError(f"dispositions.yaml: {entry.get('id')}: disposition must be KEEP, MERGE or REMOVE")
    return DispositionRule(entry["id"], tuple(sorted(when.items())), entry["disposition"], entry.get("merge_into"), entry["reason"])


#: the rule files a project's configuration may extend, by the key it uses (the file's stem)
EXTENSIBLE = ("emitters", "env_apis", "gpu_syncs", "hot_paths", "costs", "call_graph", "defaults")


def extend_rule_texts(texts: dict[str, str], tables: Mapping[str, Any], source: str) -> dict[str, str]:
    """The rule files with a project's tables merged in, keyed like the shipped files
    (``{"emitters": {"dumps": {"mylib.store": "dump"}}}``): a mapping adds to a mapping
    (its keys win), a list is appended to a list, any other value replaces the shipped one."""
    out = dict(texts)
    for stem, table in tables.items():
        name = f"{stem}.yaml"
        if stem not in EXTENSIBLE or name not in texts:
            raise RuleDataError(f"{source}: {stem}: not a rule table (extensible: {', '.join(EXTENSIBLE)})")
        if not isinstance(table, Mapping):
            raise RuleDataError(f"{source}: {stem}: expected a table keyed like rules/{name}")
        shipped = _load_yaml(name, texts[name])
        unknown = set(table) - _EXPECTED_KEYS[name]
        if unknown:
            raise RuleDataError(f"{source}: {stem}: unknown keys {sorted(unknown)} (known: {sorted(_EXPECTED_KEYS[name])})")
        out[name] = yaml.safe_dump(_merged(shipped, table, f"{source}: {stem}"), sort_keys=True, allow_unicode=True)
    return out


def _merged(shipped: Any, extra: Any, where: str) -> Any:
    if isinstance(shipped, Mapping):
        if not isinstance(extra, Mapping):
            raise RuleDataError(f"{where}: expected a table, like the shipped value")
        merged = dict(shipped)
        for key, value in extra.items():
            merged[key] = _merged(shipped[key], value, f"{where}.{key}") if key in shipped else value
        return merged
    if isinstance(shipped, list):
        if not isinstance(extra, list):
            raise RuleDataError(f"{where}: expected a list, like the shipped value")
        return shipped + [item for item in extra if item not in shipped]
    if isinstance(extra, (Mapping, list)):
        raise RuleDataError(f"{where}: expected a single value, like the shipped value")
    return extra


def read_rule_texts() -> dict[str, str]:
    """The shipped YAML files by name (works from a checkout and from a wheel)."""
    # a checkout reads its own rules/: an editable install maps cs_audit.rules to the installed
    # checkout's, which another worktree of the same repository must not read
    local = Path(__file__).resolve().parent.parent / "rules"
    package: Any = local if (local / "rules.yaml").is_file() else resources.files("cs_audit.rules")
    return {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(package.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".yaml")
    }


def load_ruleset(texts: dict[str, str] | None = None) -> RuleSet:
    texts = read_rule_texts() if texts is None else texts
    key = tuple(sorted(texts.items()))
    known = _LOADED.get(key)
    if known is not None:  # the same texts parse to the same (frozen) rule set
        return known
    try:
        rs = _load_ruleset(texts)
    except RuleDataError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError, re.error) as exc:
        raise RuleDataError(f"malformed rule data: {type(exc).__name__}: {exc}") from None
    if len(_LOADED) >= 8:
        _LOADED.clear()
    _LOADED[key] = rs
    return rs


#: rule sets loaded in this process, by their texts (a command loads the shipped ones more than once)
_LOADED: dict[tuple[tuple[str, str], ...], RuleSet] = {}


def _load_ruleset(texts: dict[str, str]) -> RuleSet:
    missing = set(_EXPECTED_KEYS) - set(texts)
    if missing:
        raise RuleDataError(f"rule files missing: {sorted(missing)}")
    data = {name: _load_yaml(name, text) for name, text in texts.items()}
    digest = hashlib.sha256("".join(f"{n}\0{texts[n]}" for n in sorted(texts)).encode()).hexdigest()[:16]

    rules: dict[str, RuleSpec] = {}
    for entry in data["rules.yaml"]["rules"]:
        unknown = set(entry) - _RULE_KEYS
        if unknown:
            raise RuleDataError(f"rules.yaml: {entry.get('id')}: unknown keys {sorted(unknown)}")
        if entry["id"] in rules:
            raise RuleDataError(f"rules.yaml: duplicate id {entry['id']}")
        rules[entry["id"]] = RuleSpec(
            id=entry["id"], severity=entry["severity"], gates_ci=bool(entry.get("gates_ci", False)),
            summary=entry["summary"], why=entry["why"].strip(), fix=entry.get("fix", ""),
            example=entry["example"], ok=entry["ok"], words=_rule_words(entry),
            default_on_cost=bool(entry.get("default_on_cost", False)),
        )

    env = data["env_apis.yaml"]
    emit = data["emitters.yaml"]
    log = emit["logging"]
    sync = data["gpu_syncs.yaml"]
    hot = data["hot_paths.yaml"]
    unknown = set(hot["event_loops"]) - _EVENT_LOOP_KEYS
    if unknown:
        raise RuleDataError(f"hot_paths.yaml: event_loops: unknown keys {sorted(unknown)}")
    costs = data["costs.yaml"]
    frequencies = _frequencies(costs, hot)
    registries = tuple(
        Registry(
            id=r["id"], object=r["object"], access=r["access"],
            methods=tuple(r.get("methods", ())), name_pattern=r.get("name_pattern", r"^[A-Za-z_]\w*$"),
            cached_after=r.get("cached_after"),
        )
        for r in env.get("registries", ())
    )
    rs = RuleSet(
        rules=rules,
        env_calls={name: spec["via"] for name, spec in env["calls"].items()},
        env_mappings=frozenset(env["mappings"]),
        registries=registries,
        once_decorators=frozenset(env["once_decorators"]),
        once_functions=frozenset(env["once_functions"]),
        off_values=frozenset(env["off_values"]),
        categories=tuple((c["category"], re.compile(c["pattern"])) for c in env["categories"]),
        logger_factories=frozenset(log["factories"]),
        logging_modules=frozenset(log["modules"]),
        logger_receivers=frozenset(log["receiver_names"]),
        log_methods=dict(log["methods"]),
        level_guards=frozenset(log["level_guards"]),
        default_level=log["default_level"],
        default_on_levels=frozenset(log["default_on_levels"]),
        levels=tuple(emit["levels"]),
        print_calls=frozenset(emit["print"]),
        stdwrite_calls=frozenset(emit["stdwrite"]),
        dump_calls=dict(emit["dumps"]),
        dump_path_args={name: int(index) for name, index in emit.get("dump_path_args", {}).items()},
        eager_calls=frozenset(emit["eager_calls"]),
        file_handle_names=frozenset(emit["file_handle_names"]),
        open_functions=frozenset(emit["open_functions"]),
        makedirs_functions=frozenset(emit["makedirs_functions"]),
        timestamp_calls=frozenset(emit["timestamp_calls"]),
        path_builders=frozenset(emit["path_builders"]),
        debug_name_re=re.compile(emit["debug_name_pattern"]),
        flag_name_re=re.compile(emit["flag_name_pattern"]),
        sync_methods=frozenset(sync["methods"]),
        sync_functions=frozenset(sync["functions"]),
        sync_to_cpu=bool(sync["to_cpu"]),
        not_tensor_receivers=frozenset(sync["not_tensor_receivers"]),
        host_name_re=re.compile(sync["host_names"]) if sync.get("host_names") else None,
        device_re=re.compile("|".join(f"(?:{p})" for p in sync["device_apis"])) if sync.get("device_apis") else None,
        device_apis=tuple(str(p) for p in sync.get("device_apis") or ()),
        wait_clock_re=re.compile(hot["wait_clocks"]) if hot.get("wait_clocks") else None,
        hot_roots=tuple(_parse_root(r, "hot_paths.yaml", frequencies) for r in hot["roots"]),
        loop_raises=tuple((re.compile(r["iter"]), r["from"], r["to"]) for r in hot["loop_raises"]),
        rare_test_re=re.compile(hot["rare_tests"]) if hot.get("rare_tests") else None,
        steady_test_re=re.compile(hot["steady_tests"]) if hot.get("steady_tests") else None,
        replay_test_re=re.compile(hot["replay_tests"]) if hot.get("replay_tests") else None,
        event_loop_steps=frozenset(str(name).lstrip("_") for name in hot["event_loops"]["step_calls"]),
        stop_flag_re=re.compile(hot["event_loops"]["stop_flags"]),
        event_loop_process=str(hot["event_loops"].get("process", "")),
        cost_source=costs["source"],
        costs_us={name: float(v["h200_host"]) for name, v in costs["events"].items()},
        sync_added_us={k: float(v) for k, v in costs["sync_added_us_per_step"].items()},
        frequencies=frequencies,
        minimal_set=dict(data["dispositions.yaml"]["minimal_set"]),
        level_knob_re=re.compile(data["dispositions.yaml"]["level_knob_pattern"]),
        disposition_rules=tuple(_parse_disposition(r) for r in data["dispositions.yaml"]["rules"]),
        callback_calls=frozenset(str(name) for name in data["call_graph.yaml"]["callback_calls"]),
        digest=digest,
        switch_kinds=_switch_kinds(data["switch_kinds.yaml"]),
        defaults=_defaults(data["defaults.yaml"]),
    )
    return replace(rs, api_literals=api_literals(rs))


def _frequencies(costs: dict[str, Any], hot: dict[str, Any]) -> Frequencies:
    """``costs.yaml`` ``frequencies``, and every frequency the other tables name among them."""
    try:
        frequencies = Frequencies.parse(costs["frequencies"])
        for name in costs["sync_added_us_per_step"]:
            frequencies.check(name, "costs.yaml: sync_added_us_per_step")
        for i, r in enumerate(hot["loop_raises"]):
            for end in ("from", "to"):
                frequencies.check(r[end], f"hot_paths.yaml: loop_raises[{i}].{end}")
    except FrequencyError as exc:
        raise RuleDataError(str(exc)) from None
    return frequencies


#: the feature a deployment states to run its model eagerly: no captured graphs
#: (`--enforce-eager`, `--disable-cuda-graph`)
EAGER = "eager"
#: the feature that counts control requests in (``Defaults.request_classes``): the default
#: deployment sends none
CONTROL_REQUESTS = "control_requests"


def _named_patterns(table: dict[str, Any] | None, form: str = "{}") -> tuple[tuple[str, re.Pattern[str]], ...]:
    """A table's name -> pattern entries, compiled (each pattern put in ``form``)."""
    return tuple((str(name), re.compile(form.format(pattern))) for name, pattern in (table or {}).items())


def _tail_patterns(table: dict[str, Any] | None) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Name -> a pattern matched in full against a dotted name's last names (`(^|.)P$`)."""
    return _named_patterns(table, r"(?:^|\.)(?:{})$")


def _defaults(data: dict[str, Any]) -> Defaults:
    platforms = _named_patterns(data.get("platforms"))
    platform = str(data.get("platform", "cuda"))
    if platform not in dict(platforms):
        raise RuleDataError(f"defaults.yaml: platform {platform!r} is none of platforms ({', '.join(dict(platforms))})")
    unknown = sorted(set(map(str, data.get("graph_platforms") or ())) - dict(platforms).keys())
    if unknown:
        raise RuleDataError(f"defaults.yaml: graph_platforms {', '.join(map(repr, unknown))} not among platforms ({', '.join(dict(platforms))})")
    return Defaults(
        class_names=re.compile(data["option_class_names"]),
        class_decorators=frozenset(map(str, data.get("option_class_decorators") or ())),
        class_bases=frozenset(map(str, data.get("option_class_bases") or ())),
        class_records=frozenset(map(str, data.get("option_class_records") or ())),
        module_paths=re.compile(data["option_module_paths"]),
        ignore_paths=re.compile(data["option_ignore_paths"]),
        receivers=re.compile(data["option_receivers"]),
        field_calls=frozenset(map(str, data.get("field_calls") or ())),
        argument_calls=frozenset(map(str, data.get("argument_calls") or ())),
        platforms=platforms, platform=platform,
        platform_paths=_named_patterns(data.get("platform_paths")),
        graph_platforms=frozenset(map(str, data.get("graph_platforms") or ())),
        model_paths=re.compile(data["model_paths"]) if data.get("model_paths") else None,
        feature_paths=_named_patterns(data.get("feature_paths")),
        feature_tests=_tail_patterns(data.get("feature_tests")), feature_off_tests=_tail_patterns(data.get("feature_off_tests")),
        feature_classes=_named_patterns(data.get("feature_classes")),
        unset_predicates=re.compile(data["unset_predicates"]) if data.get("unset_predicates") else None,
        plain_models=re.compile(data["plain_models"]) if data.get("plain_models") else None,
        device_options=re.compile(data["device_options"]) if data.get("device_options") else None,
        platform_devices=tuple((str(k), str(v)) for k, v in (data.get("platform_devices") or {}).items()),
        request_classes=re.compile(data["request_classes"]) if data.get("request_classes") else None,
    )


def _switch_kinds(data: dict[str, Any]) -> SwitchKinds:
    def words(items: Any) -> frozenset[str]:
        return frozenset(str(w).upper() for w in items or ())

    unknown = {k for entry in data["name_kinds"] for k in entry} - {"kind", "words", "last"}
    if unknown:
        raise RuleDataError(f"switch_kinds.yaml: name_kinds: unknown keys {sorted(unknown)}")
    return SwitchKinds(
        observe=re.compile(data["observe_calls"]), inject=re.compile(data["inject_calls"]),
        announce=re.compile(data["announce_calls"]), feature_words=words(data["feature_words"]), neutral=re.compile(data["neutral_calls"]),
        write=re.compile(data["write_calls"]), read=re.compile(data["read_calls"]),
        search_path=re.compile(data["search_path_calls"]), numeric=re.compile(data["numeric_calls"]),
        name_kinds=tuple((str(e["kind"]), words(e.get("words")), words(e.get("last"))) for e in data["name_kinds"]),
        test_words=words(data["test_words"]), number_words=words(data["number_words"]), path_words=words(data["path_words"]),
        toggle_words=words(data["toggle_words"]),
        output_words=words(data["output_words"]),
        generic=re.compile(data["generic_calls"]), observing_receiver=re.compile(data["observing_receivers"]),
        compute=re.compile(data["compute_calls"]), location_check=re.compile(data["location_checks"]),
        input_words=words(data["input_words"]), producing=re.compile(data["producing_calls"]),
        log_levels=words(data["log_level_values"]), logging_config=re.compile(data["logging_config_calls"]),
        path_method=re.compile(data["path_methods"]), max_level=int(data["max_level"]),
    )


def api_literals(rs: RuleSet) -> tuple[tuple[str, ...], ...]:
    """How the source text of a use of each API the tables name may read, per API: a call
    of ``mylib.store`` as ``mylib.store(`` or, imported, ``store(``; a sync method as
    ``.item(``; a logger receiver as ``LOGGER.``; a registry object as ``envs.``.  Formatting
    helpers (``eager_calls``) are left out: they matter only inside an emitter's arguments."""
    called = [*rs.env_calls, *rs.logger_factories, *rs.print_calls, *rs.stdwrite_calls, *rs.dump_calls,
              *rs.open_functions, *rs.makedirs_functions, *rs.timestamp_calls, *rs.sync_functions]
    out: set[tuple[str, ...]] = {(f"{name}(", name.rsplit(".", 1)[-1] + "(") for name in called}
    out.update((f".{method}(",) for method in rs.sync_methods)
    out.update((f"{name}.",) for name in (*rs.logger_receivers, *rs.logging_modules))
    out.update((f"{r.object}.", f"{r.object.rsplit('.', 1)[-1]}.") for r in rs.registries)
    out.update((name, name.rsplit(".", 1)[-1]) for name in rs.env_mappings)
    return tuple(sorted(out))


def steady_names(rs: RuleSet) -> re.Pattern[str] | None:
    """The names whose test holds in the deployment's steady state: ``steady_tests``, and
    ``replay_tests`` where its decoding steps replay captured graphs."""
    replays = rs.replay_test_re is not None and rs.defaults is not None and rs.defaults.replays_graphs
    return _steady_pattern(rs.steady_test_re, rs.replay_test_re if replays else None)


@lru_cache(maxsize=8)
def _steady_pattern(steady: re.Pattern[str] | None, replay: re.Pattern[str] | None) -> re.Pattern[str] | None:
    if replay is None:
        return steady
    if steady is None:
        return replay
    return re.compile(f"(?:{steady.pattern})|(?:{replay.pattern})")
