"""Every call of a name, through the types, for the joins that need all the callers of a function.

A scan types only the calls it needs (``kept.Demand``) and resolves the others by name, which
finds no function for a method called on a local or a parameter (`cache.init_hicache(args)`).
The joins that ask about every caller of a function (which option each construction of a class
is under: ``components``; what each caller passes into a parameter: ``param_gates``) would then
see a caller missing, and take the call for one that may land anywhere.  They ask here instead:
the calls so named outside the demand are typed when a name is first asked, as ``why``'s whole
typing would type them, so a scan and ``why`` answer alike."""

from __future__ import annotations

from collections.abc import Callable

from cs_audit.joins.joined import JoinedModel
from cs_audit.model import HANDED, CallSite, FuncKey, PlainCall

#: a call so named typed on demand: (path, site, the functions it lands in with how)
NamedCall = tuple[str, CallSite | PlainCall, tuple[tuple[FuncKey, str], ...]]


def _site_key(path: str, site: CallSite | PlainCall) -> tuple[str, int, int, str]:
    return path, site.line, site.end_line, site.callee


def typed_on_demand(model: JoinedModel, name: str) -> tuple[NamedCall, ...]:
    """The calls named ``name`` (last name) that the build did not type, each typed now;
    none when every call was typed (``why``, ``callgraph``: a whole build)."""
    table = model.named_calls
    found = table.get(name)
    if found is None:
        demand = model.resolutions.typed if model.resolutions is not None else None
        out: list[NamedCall] = []
        if demand is not None and name not in demand.names:
            resolver = model.resolver
            for path, site in resolver.sites_by_last_name().get(name, ()):
                if site.resolution == "read" or site.role not in (None, "open") or HANDED in site.callee \
                        or (path, site.function) in demand.functions:
                    continue  # a read, an emitter, a callback, or a call typed already
                out.append((path, site, tuple(resolver.resolve_how(path, site.function, site.callee))))
        found = table[name] = tuple(out)
    return found


def callers_on_demand(model: JoinedModel, key: FuncKey) -> list[NamedCall]:
    """The calls typed on demand that land in ``key`` and are no edge of the graph."""
    out = []
    for path, site, found in typed_on_demand(model, key[1].rpartition(".")[2]):
        if any(target == key for target, _ in found) and key not in model.resolved_calls.get(_site_key(path, site), ()):
            out.append((path, site, found))
    return out


def unresolved_sites(model: JoinedModel, name: str) -> list[CallSite | PlainCall]:
    """The calls named ``name`` that land in no function of the tree, typed on demand where
    the build did not type them: a caller the graph does not see may pass anything."""
    left, landed = _left_and_landed(model, name)
    if not landed:
        return [site for _, site in left]
    return [site for path, site in left if _site_key(path, site) not in landed]


def hidden_callers(model: JoinedModel, key: FuncKey, ignored: Callable[[str], object] | None,
                   at_hand: Callable[[str, FuncKey], bool]) -> bool:
    """Whether a call the build left unresolved may land in ``key``, outside the files ``ignored``
    holds (tests, which the deployment does not run): a call of its class's name for `__init__`;
    for a method, a call of its name on some object (`x.build()`; a plain `build()` names no
    method) in a module that has the class's interface at hand (``at_hand``: its own module, or one
    importing the module of the class or of one of its bases); for a module function, any call of
    its name."""
    cls, _, name = key[1].rpartition(".")
    if name == "__init__":
        return is_unresolved(model, cls.rpartition(".")[2], ignored)
    left, landed = _left_and_landed(model, name)
    left = [(path, site) for path, site in left if (ignored is None or not ignored(path)) and _site_key(path, site) not in landed]
    if not cls or ".<locals>." in key[1] or not left:
        return bool(left)
    return any("." in site.callee and at_hand(path, key) for path, site in left)


def is_unresolved(model: JoinedModel, name: str, ignored: Callable[[str], object] | None = None) -> bool:
    """Whether some call named ``name`` lands in no function of the tree (``unresolved_sites``),
    outside the files ``ignored`` holds (tests, which the deployment does not run)."""
    left, landed = _left_and_landed(model, name)
    if ignored is not None:
        left = [(path, site) for path, site in left if not ignored(path)]
    return bool(left) and (not landed or any(_site_key(path, site) not in landed for path, site in left))


def _left_and_landed(model: JoinedModel, name: str) -> tuple[list[tuple[str, CallSite | PlainCall]], set[tuple[str, int, int, str]]]:
    """The calls named ``name`` the build resolved to nothing, and the keys of those of them
    typing on demand lands in a function."""
    calls = model.unresolved_sites
    if calls is None:
        calls = model.unresolved_sites = {}
        resolved = model.resolved_calls
        for path, ff in model.facts.items():
            for site in ff.calls:
                if site.resolution != "read" and _site_key(path, site) not in resolved:
                    calls.setdefault(site.callee.rpartition(".")[2], []).append((path, site))
    left = calls.get(name)
    if not left:
        return [], set()
    return left, {_site_key(path, site) for path, site, found in typed_on_demand(model, name) if found}
