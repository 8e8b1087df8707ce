"""Map a profile's frames to the scanned tree's functions, and give each finding what the run
observed of it.

A profile names files by the path they ran from (a checkout, site-packages, another
machine): a file is the tree's file whose path it ends with, and the folder it implies for
the tree's root must be the one most of the profile's files imply (so `utils.py` of another
package does not count as the tree's).  A function is found by its qualname when the profile
has it, else by its name and line: the code's first line (its first decorator when it has
one) or a line it holds, the innermost such function."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from cs_audit.confirm.profiles import Frame, Profile
from cs_audit.frequency import is_hot
from cs_audit.model import Finding, FuncKey

#: observed calls per step from which a function runs per step, and under which it is rare
PER_STEP_MIN = 0.9
RARE_MAX = 0.1
#: ``ran``: a profile with no call rate shows it ran; ``unseen``: in no sample of a sampling
#: profile, which does not show that it never ran
STATUSES = ("per-step", "not-per-step", "ran", "unseen", "never-ran", "not-covered")
STATUS_WORDS = {"per-step": "ran per step", "not-per-step": "ran, not per step", "ran": "ran (no rate)",
                "unseen": "in no sample", "never-ran": "never ran", "not-covered": "not covered"}


@dataclass(frozen=True, slots=True)
class Observed:
    """What the run shows of a finding's function."""

    status: str
    #: None when the profile has no call rate (a sampled profile, or no steps known)
    calls_per_step: float | None = None
    calls: int = 0


def observed_words(o: Observed | None) -> str:
    """A finding's observed column: its calls per step, or what the run shows of it."""
    if o is None:
        return "—"
    if o.status == "per-step":
        return f"{o.calls_per_step:.2f}/step"
    if o.status == "not-per-step":
        return f"{o.calls_per_step:.2f}/step, not per step ({o.calls} call{'s' if o.calls != 1 else ''} in all)"
    return STATUS_WORDS[o.status]


@dataclass(frozen=True, slots=True)
class _Def:
    qualname: str
    name: str
    #: the code's first line: its first decorator's, else its def's
    start: int
    line: int
    end: int


@dataclass
class Run:
    """A profile joined to a tree: calls per function, and what could not be placed."""

    profile: Profile
    #: (path, qualname) -> [calls after the warm-up, calls in all]
    calls: dict[FuncKey, list[int]] = field(default_factory=dict)
    #: the tree's files the run loaded
    loaded: set[str] = field(default_factory=set)
    #: the folder the profile's files imply for the tree's root (None: none is the tree's)
    root: str | None = None
    #: frames in the tree's files that are no function of it (module code, class bodies, comprehensions)
    not_functions: int = 0
    #: the profile's files outside the tree, and the ones under another root than ``root``
    outside: int = 0
    elsewhere: int = 0

    #: the steps rates are per: the profile's, or the calls of the step root placed in the tree
    steps: int | None = None

    @property
    def has_rates(self) -> bool:
        return not self.profile.sampled and bool(self.steps)

    def rate(self, key: FuncKey) -> float | None:
        if not self.has_rates:
            return None
        return self.calls.get(key, (0, 0))[0] / self.steps  # type: ignore[operator]

    def observe(self, path: str, function: str | None) -> Observed:
        if path not in self.loaded:
            return Observed("not-covered")
        if function is None:  # module-level code: it ran once, on import
            return Observed("not-per-step" if self.has_rates else "ran", 0.0 if self.has_rates else None, 1)
        key = (path, function)
        total = self.calls.get(key, (0, 0))[1]
        if not total:
            return Observed("unseen" if self.profile.sampled else "never-ran", 0.0 if self.has_rates else None)
        rate = self.rate(key)
        if rate is None:
            return Observed("ran", None, total)
        return Observed("per-step" if rate >= PER_STEP_MIN else "not-per-step", rate, total)


def _suffixes(path: str) -> tuple[str, ...]:
    return tuple(PurePath(path.replace("\\", "/")).parts)


def place_files(profile_files: Iterable[str], tree_files: Iterable[str]) -> tuple[dict[str, str], str | None, int, int]:
    """(profile file -> tree path, the root the placed files imply, files outside the tree,
    files whose implied root is another)."""
    by_name: dict[str, list[tuple[str, ...]]] = {}
    for tree_path in tree_files:
        parts = _suffixes(tree_path)
        by_name.setdefault(parts[-1], []).append(parts)
    best: dict[str, tuple[str, tuple[str, ...]]] = {}
    roots: Counter = Counter()
    outside = 0
    for file in set(profile_files):
        parts = _suffixes(file)
        fits = [c for c in by_name.get(parts[-1] if parts else "", ()) if parts[-len(c):] == c] if parts else []
        if not fits:
            outside += 1
            continue
        rel = max(fits, key=len)
        root = str(PurePath(*parts[:-len(rel)])) if len(parts) > len(rel) else ""
        best[file] = (root, rel)
        roots[root] += 1
    if not roots:
        return {}, None, outside, 0
    top = max(roots, key=lambda r: (roots[r], len(r)))
    placed = {f: "/".join(rel) for f, (root, rel) in best.items() if root == top}
    return placed, top, outside, len(best) - len(placed)


def function_index(text: str) -> list[_Def]:
    """The functions of a module's source, with the qualnames Python gives them."""
    tree = ast.parse(text)
    out: list[_Def] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = prefix + child.name
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                out.append(_Def(qualname, child.name, start, child.lineno, child.end_lineno or child.lineno))
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            elif not isinstance(child, ast.Lambda):
                visit(child, prefix)

    visit(tree, "")
    return out


def _find(defs: list[_Def], frame: Frame) -> _Def | None:
    if frame.qualified:
        return next((d for d in defs if d.qualname == frame.name), None)
    named = [d for d in defs if frame.name in (d.name, d.qualname) or d.qualname.endswith("." + frame.name)]
    if frame.line_kind == "def":
        exact = [d for d in named if frame.line in (d.start, d.line)]
        if exact:
            return exact[-1]
    if frame.line:
        holding = [d for d in named if d.start <= frame.line <= d.end]
        return max(holding, key=lambda d: d.start) if holding else None
    return named[0] if len(named) == 1 else None


def join(profile: Profile, root: Path, tree_files: Iterable[str]) -> Run:
    """``profile``'s frames placed in the tree at ``root`` (``tree_files``: its Python files,
    by path from the root)."""
    files = {f.file for f in profile.counts} | set(profile.modules or ())
    placed, implied, outside, elsewhere = place_files(files, tree_files)
    run = Run(profile, root=implied, steps=profile.steps)
    run.outside, run.elsewhere = outside, elsewhere
    run.loaded = {placed[f] for f in profile.modules or () if f in placed} | {placed[f.file] for f in profile.counts if f.file in placed}
    indexes: dict[str, list[_Def]] = {}
    for frame, (counted, total) in profile.counts.items():
        rel = placed.get(frame.file)
        if rel is None:
            continue
        if rel not in indexes:
            try:
                indexes[rel] = function_index((root / rel).read_text(encoding="utf-8", errors="replace"))
            except (OSError, SyntaxError, ValueError):
                indexes[rel] = []
        found = _find(indexes[rel], frame)
        if found is None:
            run.not_functions += 1
            continue
        row = run.calls.setdefault((rel, found.qualname), [0, 0])
        row[0] += counted
        row[1] += total
    if profile.step_roots:
        # a root counted by its name alone (`step`) also counted every other `step`: the
        # calls of the functions of the tree the root names, when it names some
        placed_steps = sum(total for (_, qualname), (_, total) in run.calls.items()
                           if any(qualname == r or qualname.endswith("." + r) for r in profile.step_roots))
        run.steps = placed_steps or run.steps
    return run


def claimed_per_step(f: Finding) -> bool:
    """The audit says the finding runs every step with no debug env set."""
    return f.switch is None and is_hot(f.frequency) and f.path_kind == "normal"


def observe_findings(run: Run, findings: Iterable[Finding]) -> dict[str, Observed]:
    """Fingerprint -> what the run observed of each finding."""
    return {f.fingerprint: run.observe(f.path, f.function) for f in findings}


@dataclass
class Agreement:
    """How the static graph and the run agree, over the functions of loaded modules."""

    #: functions the graph calls per step (by default), of those the ones that ran at all, and
    #: of those the ones that ran per step
    claimed: list[FuncKey]
    claimed_ran: list[FuncKey]
    claimed_ran_per_step: list[FuncKey]
    #: functions that ran per step, and of those the ones the graph calls per step
    ran_per_step: list[FuncKey]
    ran_claimed: list[FuncKey]
    #: calls a step and the graph's default frequency of each function above that disagrees
    rates: dict[FuncKey, float] = field(default_factory=dict)
    frequency: dict[FuncKey, str] = field(default_factory=dict)

    @property
    def claimed_ran_rarely(self) -> list[FuncKey]:
        """Called per step by the graph, ran, but not every step."""
        per_step = set(self.claimed_ran_per_step)
        return [k for k in self.claimed_ran if k not in per_step]

    @property
    def ran_not_claimed(self) -> list[FuncKey]:
        claimed = set(self.ran_claimed)
        return [k for k in self.ran_per_step if k not in claimed]


def agreement(run: Run, per_step: Mapping[FuncKey, str], frequency: Callable[[FuncKey], str]) -> Agreement | None:
    """None when the profile gives no call rate."""
    if not run.has_rates:
        return None
    claimed = sorted(k for k in per_step if k[0] in run.loaded)
    hot = sorted(k for k in run.calls if (run.rate(k) or 0) >= PER_STEP_MIN)
    out = Agreement(claimed, [k for k in claimed if run.calls.get(k, (0, 0))[1]],
                    [k for k in claimed if (run.rate(k) or 0) >= PER_STEP_MIN], hot,
                    [k for k in hot if k in per_step])
    for k in out.claimed_ran_rarely + out.ran_not_claimed:
        out.rates[k], out.frequency[k] = run.rate(k) or 0.0, frequency(k)
    return out
