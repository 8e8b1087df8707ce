"""Which model architectures' own modules a stated deployment never loads.

A deployment that names the architectures it serves (`deployment = {models = ["llama"]}`)
runs no other architecture's forward. The own modules of an architecture (``Defaults.model_of``:
`models/bark/...`) run only when it is served, or when a module that runs imports them: the
served architectures import shared helpers that live among the models (`models/utils.py`), and
one architecture builds on another (`mistral` importing `llama`). So the modules kept are those
the served architectures' modules and the code any model may run import, through imports of
imports; every other architecture's modules run nothing, as a module written for another
platform does, and their switch names the architecture (`model=bark`)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping

from cs_audit.joins.components import tested_classes
from cs_audit.joins.host_data import module_files
from cs_audit.joins.joined import JoinedModel
from cs_audit.model import FileFacts, GateRef, SwitchRef
from cs_audit.ruleset import Defaults


def unserved_modules(model: JoinedModel, defaults: Defaults | None) -> tuple[dict[str, SwitchRef], dict[str, SwitchRef]]:
    """(path -> the switch of each module of an architecture the stated deployment does not
    load; path -> that of each module of an architecture only code shared by every model
    imports, a pipeline or a data helper, whose model forwards are no roots of the deployment
    though its helpers may run), both empty when the deployment names no architecture."""
    if defaults is None or not defaults.models:
        return {}, {}
    arch_of = {path: defaults.model_of(path) for path in model.facts}
    resolver = model.resolver
    imports: dict[str, set[str]] = defaultdict(set)
    found: dict[str, list[str]] = {}
    for path, ff in model.facts.items():
        for _, origin in ff.aliases:
            paths = found.get(origin)
            if paths is None:
                paths = found[origin] = module_files(resolver, origin)
            imports[path].update(resolver._closest(paths, path) if paths else ())
    served = set(defaults.models)
    # what the served architectures load, then what every model's shared code loads besides
    served_archs = _archs_loaded([path for path, arch in arch_of.items() if arch in served], imports, arch_of)
    kept_archs = _archs_loaded([path for path, arch in arch_of.items() if arch is None or arch in served], imports, arch_of)
    return ({path: SwitchRef("option", f"model={arch}") for path, arch in sorted(arch_of.items())
             if arch is not None and arch not in kept_archs},
            {path: SwitchRef("option", f"model={arch}") for path, arch in sorted(arch_of.items())
             if arch is not None and arch in kept_archs and arch not in served_archs})


def _archs_loaded(loaded: list[str], imports: dict[str, set[str]], arch_of: dict[str, str | None]) -> set[str]:
    """The architectures of the modules ``loaded`` imports, through imports of imports."""
    seen = set(loaded)
    while loaded:
        for target in imports.get(loaded.pop(), ()):
            if target not in seen:
                seen.add(target)
                loaded.append(target)
    return {arch for path in seen if (arch := arch_of.get(path)) is not None}


#: a model class by its name (`LlamaForCausalLM`, `Qwen2VLForConditionalGeneration`)
_MODEL_CLASS = re.compile(r"[a-z0-9]For[A-Z]")


def unserved_overrides(facts: dict[str, FileFacts], defaults: Defaults | None) -> frozenset[str]:
    """The architectures' own modules whose start-up overrides (`model_overrides/deepseek_v2.py`)
    set nothing in the deployment: those of an architecture it does not serve, unstated ones
    included (a plain model). An architecture's name is one some module of it defines a model
    class under (`models/llama.py`: `LlamaForCausalLM`); a shared module among them
    (`models/config.py`) is no architecture's."""
    if defaults is None:
        return frozenset()
    arch_of = {path: arch for path in facts if (arch := defaults.model_of(path))}
    architectures = {arch for path, arch in arch_of.items() if any(_MODEL_CLASS.search(c.qualname) for c in facts[path].types.classes)}
    return frozenset(path for path, arch in arch_of.items() if arch in architectures and not defaults.serves_module(path))


def architecture_switch(types_classes: Iterable[tuple[str, str]], defaults: Defaults | None, gate: GateRef,
                        unserved: Mapping[str, SwitchRef]) -> SwitchRef | None:
    """The switch of a test of the served architecture (``SERVED_ARCHITECTURE``: `arch in
    HYBRID_ARCHS`): a test that holds only for the classes it names is off unless the
    deployment serves an architecture one of them is defined in. Stated, the deployment loads
    every module ``unserved`` (``unserved_modules``) leaves out, shared ones included; a class
    the tree does not define may be what it serves. Unstated, it serves a plain model
    (``Defaults.plain_models``), which a test naming none of its classes does not hold for. A
    test that holds for every other architecture holds by default (None)."""
    if defaults is None or not gate.active_when_set:
        return None
    named = [name for name in tested_classes(gate) if name]
    if not named:
        return None
    if not defaults.models and defaults.plain_models is not None and any(defaults.plain_models.fullmatch(n) for n in named):
        return None  # (the plain model an unstated deployment serves may be one of them)
    wanted = set(named)
    homes: dict[str, list[str]] = {}
    for path, qualname in types_classes:
        last = qualname.rpartition(".")[2]
        if last in wanted:
            homes.setdefault(last, []).append(path)
    if defaults.models and any(not homes.get(name) or any(path not in unserved for path in homes[name]) for name in named):
        return None
    first = min(named)
    arch = min((a for path in homes.get(first, ()) if (a := defaults.model_of(path)) is not None), default=None)
    return SwitchRef("option", f"model={arch or first}")
