"""Syncs on host data that only the whole tree shows: `.cpu()`/`.item()`/`.tolist()`/`.numpy()`
calls the extraction took for syncs (``role == "sync"``) that copy no device memory.

- A parameter every resolved call site passes host data in (``FileFacts.host_arguments``):
  `format_map(meta.map_cpu)` makes `.cpu()` on `format_map`'s parameter a host copy.  A
  function with no resolved caller, a call of its name that resolved to nothing, a caller
  through a callback or a dispatch, or one caller passing anything else keeps the sync.
- A package that never touches a device: a top-level package (the outermost folder of a
  chain of folders holding `__init__.py`, per source root) none of whose files names a device
  API (``FileFacts.touches_device``) and that no module outside it imports.  Its tensors are
  made in it, by code that names no device, or come from its own callers, which are in it
  too.  A module outside any package (a script, a loose file) is not one: what calls it is
  not known.

Both rewrite ``TreeModel.fact_sites`` (the sites every rule reads) with the role
``host-sync``, as the extraction does where a function shows it alone."""

from __future__ import annotations

import posixpath
from dataclasses import replace

from cs_audit.joins.joined import CallEdge, CallResolver
from cs_audit.joins.joined import JoinedModel as TreeModel  # callgraph's, which imports this module
from cs_audit.model import FuncKey, FunctionDef, HostArguments

#: how a call found its function when the call's own arguments land in its parameters
DIRECT_CALLS = frozenset({"name", "fallback", "self", "attribute", "local", "module", "super", "constructor", "__call__",
                     "forward", "inherited", "override", "subclass"})
#: of those, the ways a method is called bound (its first parameter is the receiver)
_UNBOUND = frozenset({"name", "module"})


def mark_host_syncs(model: TreeModel) -> None:
    host_files = _host_only_files(model)
    params = _param_syncs(model)
    if not host_files and not params:
        return
    host_params = _host_parameters(model, params)
    for path, sites in model.fact_sites.items():
        whole = path in host_files
        if not whole and path not in params:
            continue
        model.fact_sites[path] = tuple(
            replace(site, role="host-sync")
            if site.role == "sync" and site.function and (whole and site.callee.rpartition(".")[2] in _COPIES
                                                          or site.on_param and ((path, site.function), site.on_param) in host_params)
            else site
            for site in sites
        )


#: the syncing calls that copy a tensor to the host (`synchronize()` names a device: never in such a package)
_COPIES = frozenset({"item", "cpu", "tolist", "numpy", "to"})


# ------------------------------------------------------------------ parameters
def _param_syncs(model: TreeModel) -> dict[str, set[tuple[FuncKey, str]]]:
    """Per file, the (function, parameter) of its syncs on a parameter's data."""
    out: dict[str, set[tuple[FuncKey, str]]] = {}
    for path, sites in model.fact_sites.items():
        for site in sites:
            if site.role == "sync" and site.on_param and site.function:
                out.setdefault(path, set()).add(((path, site.function), site.on_param))
    return out


def _host_parameters(model: TreeModel, params: dict[str, set[tuple[FuncKey, str]]]) -> set[tuple[FuncKey, str]]:
    wanted = {pair for pairs in params.values() for pair in pairs}
    if not wanted:
        return set()
    names = {key[1].rpartition(".")[2] for key, _ in wanted}
    unresolved = _unresolved_names(model, names)
    host_args: dict[tuple[str, int, int, str], HostArguments] = {
        (path, a.line, a.end_line, a.method): a for path, ff in model.facts.items() for a in ff.host_arguments
    }
    out: set[tuple[FuncKey, str]] = set()
    for key, param in sorted(wanted):
        function = model.functions.get(key)
        edges = model.callers.get(key, ())
        if function is None or not edges or key[1].rpartition(".")[2] in unresolved or param not in function.params:
            continue
        if all(_passes_host(edge, function, param, host_args) for edge in edges):
            out.add((key, param))
    return out


def _passes_host(edge: CallEdge, function: FunctionDef, param: str, host_args: dict[tuple[str, int, int, str], HostArguments]) -> bool:
    if edge.how not in DIRECT_CALLS:
        return False
    site = edge.site
    passed = host_args.get((edge.path, site.line, site.end_line, site.callee.rpartition(".")[2]))
    if passed is None:
        return False
    if param in passed.keywords:
        return True
    position = argument_position(function, param, edge.how)
    return position >= 0 and position in passed.positions


def argument_position(function: FunctionDef, param: str, how: str) -> int:
    """The position among a call's arguments that lands in ``param`` (-1 for the receiver):
    a method called bound takes its receiver before them."""
    bound = (function.class_name is not None and function.params[:1] in (("self",), ("cls",))
             and "staticmethod" not in function.decorators and how not in _UNBOUND)
    return function.params.index(param) - (1 if bound else 0)


def _unresolved_names(model: TreeModel, names: set[str]) -> set[str]:
    """Of ``names``, those a call of the tree names that resolved to no function: a caller
    the graph does not see may pass anything."""
    found: set[str] = set()
    for path, ff in model.facts.items():
        for site in ff.calls:
            name = site.callee.rpartition(".")[2]
            if name in names and name not in found and site.resolution != "read" \
                    and (path, site.line, site.end_line, site.callee) not in model.resolved_calls:
                found.add(name)
    return found


# ------------------------------------------------------------------ packages
def _host_only_files(model: TreeModel) -> set[str]:
    """The files of the top-level packages that never touch a device and that no module
    outside them imports."""
    packages = {posixpath.dirname(path) for path in model.facts if posixpath.basename(path) == "__init__.py"}
    unit_of = {path: _unit(path, packages) for path in model.facts}
    touching = {unit_of[path] for path, ff in model.facts.items() if ff.touches_device or unit_of[path] is None}
    candidates = set(unit_of.values()) - touching
    if not candidates:
        return set()
    resolver = model.resolver
    modules: dict[str, list[str]] = {}  # origin -> the files of its longest module prefix
    for path, ff in model.facts.items():
        for _, origin in ff.aliases:
            paths = modules.get(origin)
            if paths is None:
                paths = modules[origin] = module_files(resolver, origin)
            if not any(unit_of.get(p) in candidates for p in paths):
                continue  # the copy closest to this file is one of them
            for target in resolver._closest(paths, path):
                if unit_of.get(target) in candidates and unit_of[target] != unit_of[path]:
                    candidates.discard(unit_of[target])
    return {path for path, unit in unit_of.items() if unit in candidates}


def _unit(path: str, packages: set[str]) -> str | None:
    """The top-level package a file is in (its folder, ending in `/`); None outside any."""
    folder = posixpath.dirname(path)
    if folder not in packages:
        return None
    while folder and posixpath.dirname(folder) in packages:
        folder = posixpath.dirname(folder)
    return folder + "/"


def module_files(resolver: CallResolver, origin: str) -> list[str]:
    """The files of the longest module prefix of ``origin`` (`vllm.compaction.index_map.IndexMap`)
    the tree holds; an import from a file loads the copy closest to it (``Resolver._closest``)."""
    parts = origin.split(".")
    for end in range(len(parts), 0, -1):
        paths = resolver.by_module.get(".".join(parts[:end]))
        if paths:
            return paths
    return []
