"""``run_audit(config) -> AuditResult``: the order of the steps, and nothing else.

discover → per-file facts (process pool) → joins → analysis → result.  Never prints;
progress is reported through an optional callback.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cs_audit.analysis.selection import RuleSelection, rule_selection, selected, unknown_rules
from cs_audit.config import (
    DECISIONS_FILE,
    RULE_LISTS,
    AuditConfig,
    ConfigError,
    Decision,
    DecisionsError,
    load_decisions,
    root_package,
)
from cs_audit.extract.discover import discover, discover_tree, display_path, git_head, outside_git_dir
from cs_audit.incremental import cache
from cs_audit.records import record
from cs_audit.ruleset import CONTROL_REQUESTS, EAGER, RuleDataError, RuleSet, extend_rule_texts, load_ruleset, read_rule_texts
from cs_audit.sources import FileError, IgnoredFolder, Repository, SourceFile

if TYPE_CHECKING:
    from cs_audit.git.upstream import Origins
    from cs_audit.joins.callgraph import Resolutions, SiteGates, TreeModel
    from cs_audit.model import (
        AuditResult,
        BlameInfo,
        Deployment,
        DuplicateGroup,
        EnvSetter,
        FileFacts,
        Finding,
        HotRoots,
        ScriptFacts,
        Suppression,
        Switch,
    )

    FileResult = FileFacts | FileError | ScriptFacts

# The model, parser, joins, analysis, pool and git modules are imported where they are
# used: a scan served from a stored report needs none of them, and their import is a good
# part of its time.

Progress = Callable[[int, int], None]
#: below this many files the pool costs more than it saves
POOL_MIN_FILES = 64

def analyse_file(source: SourceFile, rs: RuleSet, max_bytes: int, cache_dir: str | None = None) -> FileResult:
    """Facts for one file; any failure is a ``FileError`` for this file only.

    ``cache_dir``: the facts-cache directory of this scan (``cs_audit.incremental.cache.open_cache``,
    resolved once in the main process), or None for no cache.  In a worker, the facts go into
    the cache here and back to the parent through the pool's pipe (pickled: it carries objects
    from a process this one forked, never bytes from disk, and the parent loads pickles faster
    than the cache's plain format, a serial cost; benchmarks/RESULTS.md)."""
    from cs_audit.extract.python import extract_parsed, parse_python
    from cs_audit.extract.scripts import file_refs, passed_on_python, script_facts
    from cs_audit.extract.setters import may_set_env, setters_in_file, setters_in_python
    from cs_audit.extract.suppressions import MARKER, suppressions_in

    try:
        with open(source.abspath, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return FileError(source.path, "io", f"cannot read: {exc.strerror or exc}")
    if len(data) > max_bytes:
        return FileError(source.path, "too-large", f"larger than {max_bytes} bytes: skipped")
    key = None
    if cache_dir is not None:
        key = cache.entry_key(source, data)
        hit = cache.load(cache_dir, key)
        if hit is not None and _holds(hit):
            return hit
    result: FileResult
    try:
        if source.kind == "python":
            parsed = parse_python(source.path, data)
            facts = parsed if isinstance(parsed, FileError) else extract_parsed(source.path, *parsed, rs)
            if isinstance(facts, FileError):
                result = facts
            else:
                text = data.decode("utf-8", errors="replace")
                # the setter and suppression passes take the tree already made when it was made of this text
                tree = parsed[1] if parsed[0] == text else None  # type: ignore[index]
                setters: tuple[EnvSetter, ...] = ()
                if may_set_env(data):
                    setters = tuple(setters_in_python(source.path, text, tree))
                suppressions: tuple[Suppression, ...] = ()
                if MARKER in data:
                    suppressions = tuple(suppressions_in(source.path, data, rs.rules, tree))
                refs = file_refs(text)
                if refs and tree is not None:  # a file name only handed to another program is not read here
                    handed = set(passed_on_python(text, tree, refs))
                    refs = tuple(r for r in refs if r not in handed)
                result = replace(facts, file_refs=refs, setters=setters, suppressions=suppressions)
        elif b"\0" in data:
            result = FileError(source.path, "binary", "contains NUL bytes: not a text file, skipped")
        else:
            text = data.decode("utf-8", errors="replace")
            result = script_facts(source.path, text, setters_in_file(source.path, text, source.kind))
    except RecursionError:
        result = FileError(source.path, "parser-crash", "nesting too deep for the parser")
    except Exception as exc:  # noqa: BLE001 - one file's internal error must not stop the scan
        result = FileError(source.path, "internal", f"internal error: {type(exc).__name__}: {exc}")
    if key is not None:
        cache.store(cache_dir, key, result)  # type: ignore[arg-type]
    return result


def _map_files(sources: list[SourceFile], rs: RuleSet, config: AuditConfig, progress: Progress | None, *,
               cache_dir: str | None, keys: list[str | None], memo: ScanMemo | None = None,
               known: dict[str, FileResult] | None = None, run: _Run | None = None) -> Iterable[FileResult]:
    """One result per source, in input order, each computed in a worker process (``cs_audit.pool``):
    a file that crashes, hangs or exhausts its worker is a ``FileError`` and the scan goes on.
    ``cache_dir``/``keys``: the facts cache of this scan (None: off) and each source's key in
    it (``cache.source_keys``, computed once per scan by ``run_audit``).  ``memo``: results of
    earlier scans in this process, served first (and updated).  ``known``: results already
    computed in this scan, by path (never computed twice: a file that timed out once is not
    given a second timeout)."""
    from cs_audit.pool import map_files

    total = len(sources)
    hits: dict[int, FileResult] = {}
    remembered: set[int] = set()  # hits served by the memo
    scope = _memo_scope(rs, config) if memo is not None else ""
    for i, key in enumerate(keys):
        if known and sources[i].path in known:
            hits[i] = known[sources[i].path]
            continue
        if key is None:
            continue
        hit = memo.files.get((scope, key)) if memo is not None else None
        if hit is not None:
            remembered.add(i)
        elif cache_dir is not None:  # warm path: no worker starts when every file hits
            hit = cache.load(cache_dir, key)
        if hit is not None and _holds(hit):
            hits[i] = hit
    misses = [s for i, s in enumerate(sources) if i not in hits]
    if run is not None:
        run.analysed.extend(s.path for s in misses)
    if misses:
        _import_worker_modules()
    jobs = config.jobs if len(misses) >= POOL_MIN_FILES else 1
    computed = iter(map_files(analyse_file, misses, (rs, config.max_file_bytes, cache_dir), jobs=jobs))
    for done, i in enumerate(range(total), 1):
        if i in hits:
            result = hits[i]
        else:
            result = next(computed)
            if cache_dir is not None and keys[i] is not None:
                _store_timeout(cache_dir, keys[i], result)  # type: ignore[arg-type]
        if memo is not None:
            memo.note_file(scope, keys[i], result, reused=i in remembered)
        yield result
        if progress:
            progress(done, total)


def _cpu_verdict(result: FileResult) -> bool:
    """A ``timeout`` the CPU-time limit in force gave: a verdict on the file's bytes under
    that limit (a wall-clock stop depends on the machine's state too)."""
    if not (isinstance(result, FileError) and result.kind == "timeout"):
        return False
    from cs_audit import pool  # only when a file timed out: a warm scan imports no pool

    return result.message == pool.cpu_time_exceeded(pool.TIMEOUT_S)


def _keeps(result: FileResult) -> bool:
    """Whether ``result`` is a function of the file (bytes, path, kind) and may be kept."""
    return cache.cacheable(result) or _cpu_verdict(result)


def _holds(result: FileResult) -> bool:
    """Whether a kept result still holds: a timeout only under the limit that gave it."""
    return not (isinstance(result, FileError) and result.kind == "timeout") or _cpu_verdict(result)


def _store_timeout(cache_dir: str, key: str, result: FileResult) -> None:
    """A file whose worker the CPU-time limit stopped is stored as that error here: the
    worker died on it and stored nothing, and the next scan must not pay the limit again."""
    if _cpu_verdict(result):
        cache.store_error(cache_dir, key, result)


def _import_worker_modules() -> None:
    """Import what ``analyse_file`` needs (libcst above all, a slow import) here, before the pool forks
    its workers: they inherit it instead of each importing it again (once per worker, and
    once per ``run_audit`` call, which ``report --range`` makes per commit)."""
    import cs_audit.extract.facts  # noqa: F401
    import cs_audit.extract.index  # noqa: F401
    import cs_audit.extract.scripts  # noqa: F401
    import cs_audit.extract.setters  # noqa: F401


def _memo_scope(rs: RuleSet, config: AuditConfig) -> str:
    """What a file's result depends on besides its key (kind, path, bytes) and cs-audit's code."""
    return repr((rs.digest, rs.default_level, rs.hot_roots, config.max_file_bytes))


@dataclass
class ScanMemo:
    """What one process reuses between ``run_audit`` calls on trees that share most files
    (``report --range`` audits consecutive commits): each file's result by its key, and the
    joins of the last call when its Python facts and rules were the same.  Only the files
    of the last call are kept (memory stays one tree's worth)."""

    files: dict[tuple[str, str], FileResult] = field(default_factory=dict)
    joins: Joins | None = None
    #: files computed or loaded from the disk cache / served by the memo; calls whose joins were reused
    analysed: int = 0
    reused: int = 0
    joins_reused: int = 0
    _seen: dict[tuple[str, str], FileResult] = field(default_factory=dict, repr=False)  # this scan's files

    def note_file(self, scope: str, key: str | None, result: FileResult, reused: bool) -> None:
        if reused:
            self.reused += 1
        else:
            self.analysed += 1
        if key is not None and _keeps(result):
            self._seen[(scope, key)] = result

    def end_scan(self) -> None:
        """Keep the files of the scan that just ended, drop the others."""
        self.files, self._seen = self._seen, {}


@dataclass
class Joins:
    """The whole-tree joins of a set of Python facts under a rule set."""

    facts: tuple[tuple[str, FileFacts], ...]
    rs: RuleSet
    model: TreeModel
    findings: tuple[Finding, ...]
    duplicates: tuple[DuplicateGroup, ...]
    package: str | None = None
    roots: HotRoots | None = None
    deployment: Deployment | None = None


def _joins(facts: dict[str, FileFacts], rs: RuleSet, memo: ScanMemo | None, run: _Run,
           earlier: Resolutions | None = None, unchanged: set[str] | None = None, package: str | None = None,
           gates: tuple[SiteGates, set[str]] | None = None) -> Joins:
    """The call-graph model, findings and duplicate groups of ``facts`` (pure functions of the
    facts and the rules): the memo's when both are equal to those it holds.  ``earlier``:
    call resolutions of an earlier model, valid for the files in ``unchanged`` (else the
    memo's, for the files whose facts are the objects it holds).  ``gates``: the site gates
    of an earlier model, and the files whose facts are those they were worked out from."""
    from cs_audit.analysis.deployment import deployment
    from cs_audit.analysis.duplicate_helper import duplicate_groups
    from cs_audit.analysis.roots import hot_roots
    from cs_audit.analysis.rules import analyse
    from cs_audit.joins.callgraph import build_model
    from cs_audit.model import DuplicateGroup, DuplicateSite

    items = tuple(facts.items())
    last = memo.joins if memo is not None else None
    if last is not None and last.rs == rs and last.package == package and last.facts == items:  # the same objects: cheap
        memo.joins_reused += 1  # type: ignore[union-attr]
        run.result = "memo"
        run.lap("joins")
        return last
    if earlier is None and last is not None:
        earlier = last.model.resolutions
        before = dict(last.facts)
        unchanged = {path for path, ff in items if before.get(path) is ff}
    gates_earlier, gates_unchanged = gates or (None, frozenset())
    model = build_model(facts, rs, earlier, unchanged, package, whole=False, gates=gates_earlier, gates_unchanged=gates_unchanged)
    run.resolved = model.resolved_files
    run.lap("joins")
    findings = tuple(analyse(model, rs))
    duplicates = tuple(
        DuplicateGroup(name, tuple(DuplicateSite(path, f.line, f.qualname) for path, f in members))
        for name, members in duplicate_groups(model)
    )
    joins = Joins(items, rs, model, findings, duplicates, package, hot_roots(model, rs), deployment(model, rs, findings))
    if memo is not None:
        memo.joins = joins
    return joins


class _Run:
    """What one ``run_audit`` call records as it goes: the time of each phase and the work
    it did (``ScanStats``)."""

    def __init__(self) -> None:
        self.timings: list[tuple[str, float]] = []
        self._clock = time.perf_counter()
        self.analysed: list[str] = []
        self.result = "analysed"
        self.resolved: tuple[str, ...] = ()
        #: nothing transient shaped the result (a timeout, a failed blame): it may be stored
        self.settled = True

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings.append((name, now - self._clock))
        self._clock = now


def prepare_ruleset(config: AuditConfig, rs: RuleSet | None = None) -> RuleSet:
    """The rule set of a scan: the shipped one (or ``rs``), with the project's rule tables,
    hot roots and default level."""
    if config.rule_tables:
        source = config.config_source or "configuration"
        texts = extend_rule_texts(read_rule_texts(), dict(config.rule_tables), source)  # its errors name the source
        try:
            rs = load_ruleset(texts)
        except RuleDataError as exc:  # what each value's shape allows and the rules together refuse
            raise ConfigError(f"{source}: {exc}") from None
    rs = rs or load_ruleset()
    if config.hot_roots:
        rs = rs.with_extra_roots(list(config.hot_roots))
    if config.deployment is not None:
        platform, options, env, models, features = config.deployment
        assert rs.defaults is not None
        known = dict(rs.defaults.platforms)
        if platform is not None and platform not in known:
            raise ConfigError(f"{config.config_source}: deployment.platform {platform!r} is none of {', '.join(known)}")
        named = (dict(rs.defaults.feature_paths) | dict(rs.defaults.feature_tests) | dict(rs.defaults.feature_off_tests)
                 | dict(rs.defaults.feature_classes) | {EAGER: None}
                 | ({CONTROL_REQUESTS: None} if rs.defaults.request_classes is not None else {}))
        unknown = [f for f in features if f not in named]
        if unknown:
            raise ConfigError(f"{config.config_source}: deployment.features: {', '.join(map(repr, unknown))} is no feature of the rules "
                              f"(known: {', '.join(named)})")
        rs = rs.with_deployment(platform, dict(options), env, models, features)
    if config.default_level:
        if config.default_level not in rs.levels:
            raise ConfigError(f"{config.config_source}: default_level {config.default_level!r} is none of {', '.join(rs.levels)}")
        rs = replace(rs, default_level=config.default_level)
    selection_of(config, rs)  # the rule ids it names are checked before the scan
    return rs


def tree_ruleset(rs: RuleSet, sources: list[SourceFile], config: AuditConfig,
                 stats: dict[str, os.stat_result] | None = None) -> RuleSet:
    """``rs`` with the env registries the tree's own files define (``extract.registries``):
    found by shape, under any module name; idempotent.  What each file defines is kept
    between scans by its stat signature, so a warm scan reads only the files that changed."""
    from cs_audit.extract.registries import registries_in, tree_registries

    directory = cache.registries_dir(config.cache, config.cache_dir)
    root = os.path.abspath(config.root)
    memo = (cache.load_registry_memo(directory, root) if directory else None) or {}
    fresh: dict[str, tuple[tuple[int, int, int, int], int, tuple]] = {}
    per_file = []
    for source in sources:
        if source.kind != "python":
            continue
        signature = cache.stat_signature(source.abspath, stats)
        old = memo.get(source.path)
        if signature is not None and old is not None and old[0] == signature and cache.vouches(signature, old[1]):
            found = old[2]
        else:
            read_at = time.time_ns()
            try:
                with open(source.abspath, "rb") as handle:
                    data = handle.read(config.max_file_bytes + 1)
            except OSError:
                continue  # the scan reports it
            found = tuple(registries_in(source.path, data)) if len(data) <= config.max_file_bytes else ()
            old = (signature, read_at, found) if signature is not None else None
        if old is not None:
            fresh[source.path] = old
        per_file.append(found)
    if directory and fresh != memo:
        cache.store_registry_memo(directory, root, fresh)
    return rs.with_registries(tree_registries(per_file, root_package(config), rs.registries))


def selection_of(config: AuditConfig, rs: RuleSet) -> RuleSelection:
    """The rules a scan under ``config`` reports; an unknown rule id is a ``ConfigError``
    naming the key."""
    lists = [(name, getattr(config, name) or ()) for name in RULE_LISTS]
    lists += [(f"per_file_ignores[{glob!r}]", ids) for glob, ids in config.per_file_ignores]
    for name, ids in lists:
        unknown = unknown_rules(ids, rs.rules)
        if unknown:
            raise ConfigError(f"{config.config_source or 'command line'}: {name}: unknown rule id {', '.join(map(repr, unknown))} "
                              f"(known: {', '.join(rs.rules)}, ALL)")
    return rule_selection(rs.rules, config.select, config.extend_select, config.ignore, config.per_file_ignores)


@contextlib.contextmanager
def _collector_paused(ending: bool = False) -> Iterator[None]:
    """The cyclic garbage collector off for the scan: facts are acyclic and freed by reference
    counting, and each full collection would traverse every fact held so far.  ``ending``
    (the process ends soon after, holding the scan's objects): they are moved out of the
    collector's sight before it is on again, else its next collection traverses them all."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if ending:
                gc.freeze()
            gc.enable()


def run_audit(config: AuditConfig, rs: RuleSet | None = None, progress: Progress | None = None,
              memo: ScanMemo | None = None, keep: list[object] | None = None,
              origins: Callable[[], Origins] | None = None) -> AuditResult:
    """Audit ``config.root``.  ``memo``: reuse between calls of one process (see ``ScanMemo``).
    ``keep``: the scan's facts and joined model are appended to it instead of being freed
    when it returns (a process that exits without freeing memory, the CLI, saves the time
    freeing a tree's worth of objects takes, a good part of a warm scan).  ``origins``:
    whose each line is, for a tree that is no work tree of its repositories (a past commit
    written out); by default read from the repositories the tree holds."""
    with _collector_paused(ending=keep is not None):
        try:
            return _run_audit(config, rs, progress, memo, keep, origins)
        finally:
            if memo is not None:
                memo.end_scan()


@dataclass
class _Tree:
    """What a scan knows of its tree before analysing it: the files and repositories found,
    the rule set with the tree's registries, each file's cache key, the decisions file."""

    rs: RuleSet
    root: Path
    sources: list[SourceFile]
    errors: list[FileError]
    repos: list[Repository]
    ignored: list[IgnoredFolder]
    cache_dir: str | None
    keys: list[str | None]
    decisions: dict[str, Decision]
    decisions_error: FileError | None


def _discovered(config: AuditConfig, rs: RuleSet | None, memo: ScanMemo | None, run: _Run) -> _Tree:
    rs = prepare_ruleset(config, rs)
    root = Path(config.root)
    stats: dict[str, os.stat_result] = {}  # each file's, taken once for the memos below
    found = discover_tree(root, config.exclude, stats)
    sources, errors = found.files, found.errors
    rs = tree_ruleset(rs, sources, config, stats)
    run.lap("discover")
    cache_dir = cache.open_cache(config.cache, config.cache_dir, rs.digest)  # once per scan, main process
    keys = _source_keys(sources, config, cache_dir, memo, stats)
    decisions_error = None
    try:
        decisions = load_decisions(root)
    except DecisionsError as exc:
        decisions, decisions_error = {}, FileError(DECISIONS_FILE, "io", str(exc))
    return _Tree(rs, root, sources, errors, found.repos, found.ignored, cache_dir, keys, decisions, decisions_error)


def _run_audit(config: AuditConfig, rs: RuleSet | None, progress: Progress | None, memo: ScanMemo | None,
               keep: list[object] | None = None, origins: Callable[[], Origins] | None = None) -> AuditResult:
    run = _Run()
    return _audit(_discovered(config, rs, memo, run), config, progress, memo, run, keep, origins=origins)


def _heads(tree: _Tree) -> tuple[str | None, tuple[tuple[str, str | None], ...]]:
    """The commit at HEAD of the tree's work tree, and of each repository inside it."""
    return git_head(tree.root), tuple((r.path, git_head(tree.root / r.path)) for r in tree.repos)


def upstream_origins(root: Path, repositories: Iterable[tuple[str, str | None]], config: AuditConfig) -> Origins:
    """Whose each line of the tree is (``cs_audit.git.upstream``): the upstream the
    configuration names or each repository shows; a downloaded distribution is kept in the cache."""
    from cs_audit.git.upstream import origins

    return origins(root, [path for path, _ in repositories], config.upstream, upstream_cache(config))


def upstream_cache(config: AuditConfig) -> Callable[[], Path | None]:
    """Where a downloaded distribution is kept: made when asked, None without a cache."""
    return lambda: cache.safe_folder(config.cache_dir, "upstream") if config.cache else None


def _upstream_state(root: Path, repositories: Iterable[tuple[str, str | None]], config: AuditConfig) -> str | None:
    """What decides the tree's origins besides its files and heads (``upstream_state``)."""
    from cs_audit.git.upstream import upstream_state

    return upstream_state(root, [path for path, _ in repositories], config.upstream, upstream_cache(config))


def _with_origins(root: Path, repositories: tuple[tuple[str, str | None], ...], config: AuditConfig,
                  findings: list[Finding], switches: list[Switch], origins: Callable[[], Origins] | None = None,
                  ) -> tuple[list[Finding], list[Switch], tuple[tuple[str, str, str, str], ...]]:
    """The findings and switches tagged own, modified or upstream when the tree names or shows
    an upstream (``cs_audit.git.upstream``), and what each upstream was; as given otherwise."""
    from cs_audit.git.upstream import OWN, UPSTREAM

    found = origins() if origins is not None else upstream_origins(root, repositories, config)
    uses = tuple((u.repository, u.spec, u.how, u.error) for u in found.uses)
    if not found.known:
        return findings, switches, uses
    tagged = [replace(f, origin=found.of(f.path, f.line, f.end_line)) for f in findings]
    own_switches = []
    for s in switches:
        lines = [(r.path, r.line) for r in s.reads] + [(x.path, x.line) for x in s.setters if x.kind == "set"]
        own = any(found.of(path, line) == OWN for path, line in lines)
        own_switches.append(replace(s, origin=OWN if own or not lines else UPSTREAM))
    return tagged, own_switches, uses


def outside_git(root: Path, repositories: Iterable[tuple[str, str | None]]) -> tuple[tuple[str, str], ...]:
    """(path, git directory) of each repository whose ``.git`` names a git directory outside
    the scanned tree (a worktree's, a submodule scanned alone, or one planted to borrow
    another repository's history), among those git read (a commit at HEAD)."""
    found = ((path, outside_git_dir(root / path, root) if commit else None) for path, commit in repositories)
    return tuple((path, where) for path, where in found if where is not None)


def _audit(tree: _Tree, config: AuditConfig, progress: Progress | None, memo: ScanMemo | None, run: _Run,
           keep: list[object] | None = None, heads: tuple[str | None, tuple[tuple[str, str | None], ...]] | None = None,
           origins: Callable[[], Origins] | None = None) -> AuditResult:
    """The audit of a discovered tree.  ``heads``: ``_heads(tree)`` when the caller has it;
    ``origins``: as ``run_audit`` takes it."""
    rs, root, sources, repos = tree.rs, tree.root, tree.sources, tree.repos
    analysis = _tree_analysis(sources, tree.errors, rs, config, progress, tree.cache_dir, tree.keys, memo, run, keep)
    findings, switches, duplicates, errors = list(analysis.findings), list(analysis.switches), analysis.duplicates, list(analysis.errors)
    run.settled = analysis.cacheable
    commit: str | None = None
    history_note: str | None = HISTORY_SKIPPED
    if config.history:
        switches, commit, history_note = _with_history(root, repos, switches, config, run)
    else:
        commit = heads[0] if heads is not None else git_head(root)
        switches = [replace(s, added_in=None, added_in_note=HISTORY_SKIPPED) for s in switches]
    repositories: tuple[tuple[str, str | None], ...] = ((".", commit),) if commit else ()
    repositories += heads[1] if heads is not None else tuple((r.path, git_head(root / r.path)) for r in repos)
    outside = outside_git(root, repositories)
    run.lap("history")
    findings, switches, upstream = _with_origins(root, repositories, config, findings, switches, origins)
    if tree.decisions_error is not None:
        errors.append(tree.decisions_error)
    from cs_audit.analysis.disposition import apply_dispositions
    from cs_audit.model import AuditResult, ScanStats

    switches, overridden = apply_dispositions(switches, rs, tree.decisions, config.aside)
    reported, suppressions = selected(findings, analysis.suppressions, selection_of(config, rs))
    from cs_audit.analysis.env_read_hot import split_cheap

    reported, cheap_reads = split_cheap(reported)
    from cs_audit.git.upstream import MODIFIED, UPSTREAM

    upstream_findings: tuple[Finding, ...] = ()
    if not config.include_upstream:
        upstream_findings = tuple(f for f in reported if f.origin in (UPSTREAM, MODIFIED))
        reported = tuple(f for f in reported if f.origin not in (UPSTREAM, MODIFIED))
    return AuditResult(
        root=display_path(config.root),
        commit=commit,
        findings=reported,
        cheap_reads=cheap_reads,
        upstream=upstream,
        upstream_findings=upstream_findings,
        switches=tuple(switches),
        duplicates=duplicates,
        errors=tuple(sorted(errors, key=lambda e: (e.path, e.kind, e.message))),
        files_scanned=len(sources),
        history_note=history_note,
        repositories=repositories,
        timings=tuple(run.timings),
        overridden=tuple(overridden),
        suppressions=suppressions,
        roots=analysis.roots,
        deployment=analysis.deployment,
        aside=config.aside,
        outside_git=outside,
        ignored=tuple(tree.ignored),
        stats=ScanStats(files=len(sources), analysed=tuple(sorted(set(run.analysed))), result=run.result,
                        resolved=run.resolved),
    )


@record
@dataclass(frozen=True)
class Report:
    """A rendered audit, and what a command decides from the audit besides the text."""

    text: str
    #: a finding no comment in the code suppresses (``--exit-non-zero-on-findings``)
    reported: bool
    #: a file was skipped (``--strict``)
    skipped: bool
    #: warning lines on the configuration (a hot root that matches nothing)
    warnings: tuple[str, ...] = ()
    #: for the terminal: the summary's (text, style) lines, and one line per finding (or per rule)
    summary: tuple[tuple[str, str], ...] = ()
    details: tuple[str, ...] = ()
    #: the phases of the run that gave it (never stored)
    timings: tuple[tuple[str, float], ...] = ()


def audit_report(config: AuditConfig, render: Callable[[AuditResult], Report], render_id: str, rs: RuleSet | None = None,
                 progress: Progress | None = None, keep: list[object] | None = None) -> Report:
    """``render(run_audit(config, rs))``, served whole from the cache when everything it
    depends on is what it was when it was stored: each file's key, the rules and cs-audit's
    code (the cache's version directory), the configuration, the commit at HEAD of each
    repository, what decides each line's origin (each upstream named or detected, and the
    commit or files it stands for now), the decisions file, and ``render_id`` (whatever
    else ``render`` reads).
    A report is stored only from an audit that nothing transient shaped (a file that timed
    out, a blame that failed)."""
    with _collector_paused(ending=keep is not None):
        run = _Run()
        tree = _discovered(config, rs, None, run)
        key, heads = None, None
        if tree.cache_dir is not None and all(k is not None for k in tree.keys):
            heads = _heads(tree)
            repositories = (((".", heads[0]),) if heads[0] else ()) + heads[1]
            outside = outside_git(tree.root, repositories)
            upstream = _upstream_state(tree.root, repositories, config)
            key = None if upstream is None else cache.report_key(
                [(s.path, k) for s, k in zip(tree.sources, tree.keys)],  # type: ignore[misc]
                repr((_result_context(config, tree.errors), replace(config, jobs=0), heads, outside,
                      sorted(tree.decisions.items()), tree.decisions_error, render_id, tree.ignored, upstream)))
        if key is not None and tree.cache_dir is not None:
            stored = cache.load_report(tree.cache_dir, key)
            if isinstance(stored, Report):
                run.lap("stored report")
                return replace(stored, timings=tuple(run.timings))
        result = _audit(tree, config, progress, None, run, keep, heads)
        report = render(result)
        run.lap("render")
        if key is not None and run.settled:
            cache.store_report(tree.cache_dir, key, replace(report, timings=()))  # type: ignore[arg-type]
        return replace(report, timings=tuple(run.timings))


def _source_keys(sources: list[SourceFile], config: AuditConfig, cache_dir: str | None,
                 memo: ScanMemo | None = None, stats: dict[str, os.stat_result] | None = None) -> list[str | None]:
    """Each source's key in the facts cache (and the memo), None without either."""
    if cache_dir is not None:
        return cache.source_keys(sources, config.max_file_bytes, cache_dir, os.path.abspath(config.root), stats)
    if memo is not None:
        return [cache.source_key(s, config.max_file_bytes) for s in sources]
    return [None] * len(sources)


@record
@dataclass(frozen=True)
class TreeAnalysis:
    """What a scan derives from the tree's files alone (before history and decisions):
    stored whole in the cache, keyed by every file's key."""

    findings: tuple[Finding, ...]
    switches: tuple[Switch, ...]
    duplicates: tuple[DuplicateGroup, ...]
    errors: tuple[FileError, ...]
    #: no file failed for a reason that may not repeat (timeout, crash, internal error)
    cacheable: bool
    #: the suppression comments of the analysed files
    suppressions: tuple[Suppression, ...] = ()
    #: the hot roots the tree matched and the event loops found in it
    roots: HotRoots | None = None
    #: the deployment audited and the defaults that decided gates
    deployment: Deployment | None = None


def _result_context(config: AuditConfig, discover_errors: list[FileError]) -> str:
    """What a whole-tree result depends on besides the files, the rules and the code."""
    return repr((config.hot_roots, config.default_level, config.max_file_bytes, root_package(config), config.deployment,
                 sorted((e.path, e.kind, e.message) for e in discover_errors)))


def _tree_analysis(sources: list[SourceFile], errors: list[FileError], rs: RuleSet, config: AuditConfig,
                   progress: Progress | None, cache_dir: str | None, keys: list[str | None],
                   memo: ScanMemo | None, run: _Run, keep: list[object] | None = None) -> TreeAnalysis:
    """The tree's ``TreeAnalysis``: stored under every file's key (warm), else the last stored
    one of this root when the changed files' results allow it (``_result_of_equal_facts``),
    else analysed; stored for the next scan, with the root's record of its files."""
    result_key = None
    context = _result_context(config, errors)
    if cache_dir is not None and all(k is not None for k in keys):
        result_key = cache.tree_key([(s.path, k) for s, k in zip(sources, keys)], context)  # type: ignore[misc]
    if cache_dir is None or result_key is None:
        return _analyse_tree(sources, errors, rs, config, progress, cache_dir, keys, memo, run, keep=keep)
    stored = cache.load_result(cache_dir, result_key)
    if isinstance(stored, TreeAnalysis) and all(_holds(e) for e in stored.errors):
        run.result = "stored"
        run.lap("cached result")
        return stored
    reused: TreeAnalysis | None = None
    known: dict[str, FileResult] = {}
    if memo is None:
        reused, known = _result_of_equal_facts(sources, keys, context, rs, config, cache_dir, run)  # type: ignore[arg-type]
    if keep is not None:
        keep.append(known)
    analysis = reused or _analyse_tree(sources, errors, rs, config, progress, cache_dir, keys, memo, run, known, keep)
    _store_tree_result(cache_dir, config, sources, keys, context, analysis, run)  # type: ignore[arg-type]
    return analysis


def _store_tree_result(cache_dir: str, config: AuditConfig, sources: list[SourceFile], keys: list[str], context: str,
                       analysis: TreeAnalysis, run: _Run) -> None:
    """Store ``analysis`` under the tree's key, and as this root's last result (when no file
    failed for a reason that may not repeat)."""
    if analysis.cacheable:
        result_key = cache.tree_key(list(zip((s.path for s in sources), keys)), context)
        cache.store_result(cache_dir, result_key, analysis)
        files = {s.path: k for s, k in zip(sources, keys)}
        cache.store_tree_record(cache_dir, os.path.abspath(config.root), cache.TreeRecord(result_key, context, files))
        run.lap("store")


#: more changed files than this since the last stored tree: analyse the tree, do not compare
MAX_COMPARED_FILES = POOL_MIN_FILES
#: files loaded between two looks at whether the changed files' worker has answered
READY_EVERY = 16


def _result_of_equal_facts(sources: list[SourceFile], keys: list[str], context: str, rs: RuleSet, config: AuditConfig,
                           cache_dir: str, run: _Run) -> tuple[TreeAnalysis | None, dict[str, FileResult]]:
    """The stored result of the last tree scanned at this root when every file changed since
    gives the result it gave then (an edit of code no fact records: the whole-tree result is
    a function of the per-file results, so it is the same), or gives it with lines moved
    (comments, blank lines, docstrings: the result with those lines moved, ``reuse``).
    None when that does not hold, with the results of the changed files computed on the way
    and of the other files loaded while they were (by path), for the full analysis that follows."""
    from cs_audit.incremental.reuse import line_map, moved_deployment, moved_results, moved_roots
    from cs_audit.model import FileFacts

    record = cache.load_tree_record(cache_dir, os.path.abspath(config.root))
    if record is None or record.context != context or len(record.files) != len(sources):
        return None, {}
    changed = [i for i, s in enumerate(sources) if record.files.get(s.path) != keys[i]]
    if not changed or len(changed) > MAX_COMPARED_FILES:
        return None, {}
    before: list[FileResult] = []
    for i in changed:
        old_key = record.files.get(sources[i].path)
        old = cache.load(cache_dir, old_key) if old_key is not None else None
        if old is None or not _holds(old):
            return None, {}
        before.append(old)
    stored = cache.load_result(cache_dir, record.result_key)
    if not isinstance(stored, TreeAnalysis) or not all(_holds(e) for e in stored.errors):
        return None, {}
    from cs_audit.pool import map_files

    # the worker imports what it needs (libcst) itself, while this process loads the facts of
    # the other files that a full analysis would need, until the worker has answered
    changed_sources = [sources[i] for i in changed]
    run.analysed.extend(s.path for s in changed_sources)
    computing = map_files(analyse_file, changed_sources, (rs, config.max_file_bytes, cache_dir))
    known: dict[str, FileResult] = {}  # by path: results loaded or computed here
    changed_set = set(changed)
    for i in range(len(sources)):
        if i in changed_set:
            continue
        if i % READY_EVERY == 0 and computing.ready():  # two system calls: asked now and then
            break
        hit = cache.load(cache_dir, keys[i])
        if hit is not None and _holds(hit):
            known[sources[i].path] = hit
    now = list(computing)
    for i, result in zip(changed, now):
        _store_timeout(cache_dir, keys[i], result)
    run.lap("changed files")
    known.update((s.path, result) for s, result in zip(changed_sources, now))
    maps: dict[str, dict[int, int]] = {}
    for old, new in zip(before, now):
        if new == old:
            continue
        if not (isinstance(old, FileFacts) and isinstance(new, FileFacts)):
            return None, known
        mapping = line_map(old, new)
        if mapping is None:
            return None, known
        maps[new.path] = mapping
    if maps:
        moved = moved_results(stored.findings, stored.switches, stored.duplicates, maps, stored.suppressions)
        roots = moved_roots(stored.roots, maps)
        used = moved_deployment(stored.deployment, maps)
        if moved is None or roots is None or used is None and stored.deployment is not None:
            return None, known
        stored = replace(stored, findings=moved[0], switches=moved[1], duplicates=moved[2], suppressions=moved[3], roots=roots,
                         deployment=used)
    run.result = "moved" if maps else "stored"
    run.lap("cached result")
    return stored, known


def _analyse_tree(sources: list[SourceFile], errors: list[FileError], rs: RuleSet, config: AuditConfig,
                  progress: Progress | None, cache_dir: str | None, keys: list[str | None],
                  memo: ScanMemo | None, run: _Run, known: dict[str, FileResult] | None = None,
                  keep: list[object] | None = None) -> TreeAnalysis:
    from cs_audit.analysis.switches import build_switches
    from cs_audit.joins.readers import readers, writers
    from cs_audit.model import FileFacts

    facts: dict[str, FileFacts] = {}
    scripts: dict[str, ScriptFacts] = {}
    errors = list(errors)
    cacheable = True
    for result in _map_files(sources, rs, config, progress, cache_dir=cache_dir, keys=keys, memo=memo, known=known, run=run):
        if isinstance(result, FileFacts):
            facts[result.path] = result
        elif isinstance(result, FileError):
            errors.append(result)
            cacheable = cacheable and _keeps(result)
        else:
            scripts[result.path] = result
    run.lap("parse/extract")
    # the resolutions of the last full analysis of this root: from the disk cache, or with a
    # memo (``report --range``, whose temporary root is new each run) from the memo's joins
    on_disk = cache_dir if memo is None else None
    earlier, unchanged = _earlier_resolutions(on_disk, config, sources, keys, facts)
    gates = _earlier_site_gates(on_disk, config, sources, keys, facts)
    joins = _joins(facts, rs, memo, run, earlier, unchanged, root_package(config), gates)
    model, findings = joins.model, list(joins.findings)
    resolutions = model.resolutions
    key_of = {s.path: k for s, k in zip(sources, keys)}
    fact_keys = {path: key_of[path] for path in facts if key_of.get(path)}
    if on_disk is not None and resolutions is not None and (
            earlier is None or unchanged != set(facts) or resolutions.digest != earlier.digest):
        cache.store_resolutions(on_disk, os.path.abspath(config.root), resolutions, fact_keys)  # type: ignore[arg-type]
    setters = [s for sf in scripts.values() for s in sf.setters] + [s for ff in facts.values() for s in ff.setters]
    written = writers(model, rs)
    files: dict[str, list[str]] = {}
    for w in written:
        files.setdefault(w.switch, []).append(w.pattern)
    switches = build_switches(
        model, findings, rs, setters, readers(model, rs, written, scripts), files,
    )
    if on_disk is not None:
        # after the analysis: its rules ask the gates of sites the joins did not
        from cs_audit.joins.gates import site_gates

        cache.store_site_gates(on_disk, os.path.abspath(config.root), site_gates(model, *(gates or ())), fact_keys)  # type: ignore[arg-type]
    run.lap("analysis")
    if keep is not None:
        keep.append((facts, scripts, joins))
    suppressions = tuple(s for path in sorted(facts) for s in facts[path].suppressions)
    return TreeAnalysis(tuple(findings), tuple(switches), joins.duplicates, tuple(errors), cacheable, suppressions, joins.roots, joins.deployment)


def _earlier_resolutions(cache_dir: str | None, config: AuditConfig, sources: list[SourceFile], keys: list[str | None],
                         facts: dict[str, FileFacts]) -> tuple[Resolutions | None, set[str] | None]:
    """The call resolutions stored by the last full analysis of this root, and the files
    whose entry key (so whose facts) is the same now as then."""
    if cache_dir is None:
        return None, None
    from cs_audit.joins.callgraph import Resolutions  # before the load: the records it names

    stored = cache.load_resolutions(cache_dir, os.path.abspath(config.root))
    if stored is None:
        return None, None
    resolutions, their_keys = stored
    if not isinstance(resolutions, Resolutions):
        return None, None
    unchanged = {s.path for s, k in zip(sources, keys) if k is not None and s.path in facts and their_keys.get(s.path) == k}
    return resolutions, unchanged


def _earlier_site_gates(cache_dir: str | None, config: AuditConfig, sources: list[SourceFile], keys: list[str | None],
                        facts: dict[str, FileFacts]) -> tuple[SiteGates, set[str]] | None:
    """The site gates stored by the last full analysis of this root, and the files whose
    entry key (so whose facts) is the same now as then."""
    if cache_dir is None:
        return None
    from cs_audit.joins.callgraph import SiteGates  # before the load: the records it names

    stored = cache.load_site_gates(cache_dir, os.path.abspath(config.root))
    if stored is None:
        return None
    gates, their_keys = stored
    if not isinstance(gates, SiteGates):
        return None
    return gates, {s.path for s, k in zip(sources, keys) if k is not None and s.path in facts and their_keys.get(s.path) == k}


#: what ``added_in`` says when history was not asked for
HISTORY_SKIPPED = "history skipped (--no-history)"


def _repository_of(path: str, repos: Sequence[Repository]) -> tuple[str, str]:
    """(the innermost sub-repository holding ``path``, or "" for the root's; the path in it)."""
    for repo in sorted(repos, key=lambda r: -len(r.path)):
        if path.startswith(repo.path + "/"):
            return repo.path, path[len(repo.path) + 1:]
    return "", path


def _with_history(root: Path, repos: Sequence[Repository], switches: list[Switch],
                  config: AuditConfig, run: _Run | None = None) -> tuple[list[Switch], str | None, str | None]:
    """`added_in` for each switch: the oldest answer among the repositories holding its reads,
    each asked of its own history: the first commit whose code reads the name (the history
    pass), else the oldest blame of its reads (answers cached on disk, per HEAD)."""
    from cs_audit.extract.reads import names_read
    from cs_audit.git.blame import open_history

    blame_dir = cache.blame_cache_dir(config.cache, config.cache_dir)
    where: dict[str, dict[int, list[tuple[str, int]]]] = {}  # repository -> switch index -> its reads there
    for i, s in enumerate(switches):
        for r in s.reads:
            repo, rel = _repository_of(r.path, repos)
            where.setdefault(repo, {}).setdefault(i, []).append((rel, r.line))
    answers: dict[int, list[tuple[BlameInfo | None, str | None]]] = {}
    commit, reason = None, None
    for repo in sorted(set(where) | {""}):
        history = open_history(root / repo if repo else root, cache_dir=blame_dir, jobs=config.jobs)
        if not repo:
            commit, reason = history.commit, history.reason
        try:
            sites = where.get(repo, {})
            # the first commit that reads each name; blame of the reads where the pass has none
            introduced = history.first_reads({switches[i].name for i in sites}, names_read) if sites else {}
            blamed = {i: group for i, group in sites.items() if switches[i].name not in introduced}
            history.prefetch(site for group in blamed.values() for site in group)  # each file once, in parallel
            for i in sites:
                got = introduced.get(switches[i].name)
                info, note = got if got is not None else history.first_added(blamed[i])
                if info is not None and repo:
                    info = replace(info, repository=repo)
                answers.setdefault(i, []).append((info, note))
        except (ValueError, OSError) as exc:  # a broken repository (a missing object): the audit stands
            note = f"history skipped: {exc}"
            if run is not None:
                run.settled = False
            for i in where.get(repo, {}):
                answers.setdefault(i, []).append((None, note))
            if not repo:
                reason = note
        finally:
            if run is not None and not getattr(history, "settled", True):
                run.settled = False  # a blame failed: its answers are not stored either
            close = getattr(history, "close", None)
            if close:
                close()
    out = []
    for i, s in enumerate(switches):
        answered = answers.get(i, [])
        dated = [(info, note) for info, note in answered if info is not None]
        if dated:
            info, note = min(dated, key=lambda a: (a[0].date, a[0].repository))
        else:
            info, note = None, "; ".join(dict.fromkeys(n for _, n in answered if n)) or None
        out.append(replace(s, added_in=info, added_in_note=note))
    return out, commit, reason


def tree_model(config: AuditConfig, rs: RuleSet | None = None, progress: Progress | None = None,
               keep: list[object] | None = None) -> tuple[object, tuple[FileError, ...]]:
    """The joined call-graph model of ``config.root`` (``joins.callgraph.TreeModel``) and the
    files that could not be analysed: what ``callgraph`` and ``why`` read.  The per-file
    facts come from the cache as a scan's do."""
    from cs_audit.joins.callgraph import build_model
    from cs_audit.model import FileFacts

    with _collector_paused():
        run = _Run()
        rs = prepare_ruleset(config, rs)
        sources, errors = discover(Path(config.root), config.exclude)
        rs = tree_ruleset(rs, sources, config)
        cache_dir = cache.open_cache(config.cache, config.cache_dir, rs.digest)
        keys = _source_keys(sources, config, cache_dir)
        facts: dict[str, FileFacts] = {}
        errors = list(errors)
        for result in _map_files(sources, rs, config, progress, cache_dir=cache_dir, keys=keys, run=run):
            if isinstance(result, FileFacts):
                facts[result.path] = result
            elif isinstance(result, FileError):
                errors.append(result)
        model = build_model(facts, rs, package=root_package(config))
        if keep is not None:
            keep.append((facts, model))
        return model, tuple(sorted(errors, key=lambda e: (e.path, e.kind, e.message)))


def fix_inputs(config: AuditConfig, rs: RuleSet | None = None, progress: Progress | None = None,
               ) -> tuple[AuditResult, dict[str, FileFacts], dict[str, tuple[int, int]]]:
    """What ``cs-audit fix`` works from: the audit of ``config.root``, every Python file's
    facts (from the cache as the scan's are) and each file's (size, mtime_ns) taken before
    the scan read it, so a file that changes meanwhile is not rewritten from stale findings."""
    from cs_audit.model import FileFacts

    rs = prepare_ruleset(config, rs)
    sources, _ = discover(Path(config.root), config.exclude)
    rs = tree_ruleset(rs, sources, config)
    python = [s for s in sources if s.kind == "python"]
    stamps = {}
    for s in python:
        with contextlib.suppress(OSError):
            st = os.stat(s.abspath)
            stamps[s.path] = (st.st_size, st.st_mtime_ns)
    result = run_audit(config, rs, progress)
    with _collector_paused():
        cache_dir = cache.open_cache(config.cache, config.cache_dir, rs.digest)
        keys = _source_keys(python, config, cache_dir)
        facts = {r.path: r for r in _map_files(python, rs, config, None, cache_dir=cache_dir, keys=keys)
                 if isinstance(r, FileFacts)}
    return result, facts, stamps
