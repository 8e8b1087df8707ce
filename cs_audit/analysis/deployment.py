"""The deployment a report audits, and the defaults that decided its gates: for each option
or platform that keeps hot code from running, how many sites it keeps off and where its
value comes from (the report's assumptions name them, as a hand-written audit names the
defaults it assumed)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from cs_audit.joins.callgraph import TreeModel
from cs_audit.joins.defaults import option_name
from cs_audit.joins.gates import site_switches
from cs_audit.joins.runs import first, reached, run_of
from cs_audit.model import DefaultUsed, Deployment, Finding, Place
from cs_audit.ruleset import EAGER, RuleSet


def deployment(model: TreeModel, rs: RuleSet, findings: Iterable[Finding] = ()) -> Deployment | None:
    """The deployment audited and the defaults that decided gates; ``findings``: the audit's,
    whose sites make the best examples of what a default keeps off."""
    defaults = rs.defaults
    if defaults is None:
        return None
    findings = list(findings)
    reported = {(f.path, f.line) for f in findings if f.switch is not None}
    counts: Counter[str] = Counter()
    # the example a reader checks, the best first: a finding no other setting guards, a site no
    # other setting guards, a finding, any site (a construction reached per step only through
    # the feature's code may run at start-up by default); each after those in code any
    # deployment may load (``loaded_alone``: a feature's package, another platform's or one
    # model's module, kept off by that as well)
    example: dict[str, tuple[int, Place]] = {}
    loaded_alone: dict[str, bool] = {}
    for path, sites in model.fact_sites.items():
        for site in sites:
            if site.function is None or not reached(model, (path, site.function)):
                continue
            switch = run_of(model, path, site.function, site.gates, site, rs).switch
            key = (path, site.function)
            if key not in model.freq_default and switch not in model.entry_switches.get(key, ()):
                # its function is kept off first by the way into it: that setting decides, not the site's own
                switch = first(model.entry_switches.get(key)) or switch
            if switch is not None and switch.kind == "option":
                counts[switch.name] += 1
                found = example.get(switch.name)
                if found is not None and found[0] == 0:
                    continue
                # no other setting guards it: its own gates name only this one, and its function runs by default
                sole = site_switches(model, path, site.function, site.gates, rs) == [switch] and (
                    (path, site.function) in model.freq_default)
                if path not in loaded_alone:
                    loaded_alone[path] = bool(defaults.module_platform(path) or defaults.module_feature(path) or defaults.model_of(path))
                rank = (4 if loaded_alone[path] else 0) + (0 if sole else 2) + (0 if (path, site.line) in reported else 1)
                if found is None or rank < found[0]:
                    example[switch.name] = (rank, Place(path, site.line))
    shown = {name: place for name, (_, place) in example.items()}
    replayed = [(path, site.line) for path, sites in model.fact_sites.items() for site in sites
                if site.function is not None and (path, site.function) in model.replayed]
    stated = dict(defaults.options)
    used = []
    if replayed:
        # a model's forward is replayed as a graph on decoding steps: eager mode runs its Python
        # each step (the example: a finding there, where there is one)
        anywhere = {(f.path, f.line) for f in findings}
        eager = min(replayed, key=lambda place: (place not in anywhere, place))
        used.append(DefaultUsed(f"feature={EAGER}", "off", "", 0, len(replayed), Place(*eager)))
    for option, count in counts.items():
        name = option_name(option)
        if name == "platform":
            used.append(DefaultUsed(option, defaults.platform, "", 0, count, shown[option]))
        elif name == "feature":
            used.append(DefaultUsed(option, "off", "", 0, count, shown[option]))
        elif name == "model":
            # an architecture the deployment does not serve (unstated: a plain model's)
            used.append(DefaultUsed(option, "not served", "", 0, count, shown[option]))
        elif name in stated:
            used.append(DefaultUsed(option, repr(stated[name]), "", 0, count, shown[option]))
        else:
            where = model.options.where(name)
            if where is not None:
                also = sorted(map(repr, model.options.start_up.get(name, ())))
                value = f"{where.value}, or {' or '.join(also)} at start-up" if also else where.value
                used.append(DefaultUsed(option, value, where.path, where.line, count, shown[option]))
    used.sort(key=lambda d: (-d.sites, d.switch))
    return Deployment(defaults.platform, defaults.stated, tuple((k, repr(v)) for k, v in defaults.options),
                      tuple(sorted(defaults.env)), tuple(used), defaults.models,
                      tuple(sorted(defaults.features)))
