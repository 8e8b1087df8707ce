"""The per-file facts cache (``cs_audit.incremental.cache``): same output warm or cold, changed files
re-analysed, corrupt entries ignored and rewritten, ``--no-cache`` writes nothing,
concurrent writers safe.  No timings are asserted."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from cs_audit.api import analyse_file, prepare_ruleset, run_audit
from cs_audit.config import AuditConfig, load_config
from cs_audit.extract.discover import discover
from cs_audit.incremental import cache
from cs_audit.model import CallSite, FileFacts, PlainCall
from cs_audit.render.json import render_json
from cs_audit.ruleset import load_ruleset
from cs_audit.sources import FileError

PROJECT = Path(__file__).resolve().parent.parent
TREE = PROJECT / "fixtures" / "compressspec"


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.entry")) if root.exists() else []


def _sources(root: Path):
    sources, _ = discover(root, ())
    return sources


def _scan(root: Path, cache_root: Path | None, **options) -> str:
    return _scan_stats(root, cache_root, **options)[0]


def _scan_stats(root: Path, cache_root: Path | None, **options):
    """The JSON report of a scan and what the scan did (``ScanStats``)."""
    options.setdefault("jobs", 1)
    config = load_config(str(root), history=False, cache=cache_root is not None,
                         cache_dir=str(cache_root) if cache_root else None, **options)
    result = run_audit(config)
    return render_json(replace(result, root="<root>", commit=None, history_note=None)), result.stats


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(TREE, root)
    return root


@pytest.fixture
def rs():
    return prepare_ruleset(load_config(str(TREE)), load_ruleset())


def _analyse_all(root: Path, rs, cache_dir: str | None):
    return [analyse_file(s, rs, 1 << 20, cache_dir) for s in _sources(root)]


# ------------------------------------------------------------------ per file (analyse_file)
def test_warm_results_equal_cold(tree: Path, rs, tmp_path: Path) -> None:
    cache_dir = cache.open_cache(True, str(tmp_path / "c"), rs.digest)
    assert cache_dir is not None
    uncached = _analyse_all(tree, rs, None)
    cold = _analyse_all(tree, rs, cache_dir)
    assert _entries(Path(cache_dir))
    warm = _analyse_all(tree, rs, cache_dir)
    assert cold == uncached
    assert warm == uncached


def test_changed_file_is_reanalysed(tree: Path, rs, tmp_path: Path) -> None:
    cache_dir = cache.open_cache(True, str(tmp_path / "c"), rs.digest)
    assert cache_dir is not None
    _analyse_all(tree, rs, cache_dir)
    before = len(_entries(Path(cache_dir)))
    target = next(p for p in sorted(tree.rglob("*.py")) if p.stat().st_size > 0)
    target.write_text(target.read_text() + "\nimport os\nDEBUG_X = os.getenv('CSA_NEW_SWITCH', '0')\n")
    rel = target.relative_to(tree).as_posix()
    source = next(s for s in _sources(tree) if s.path == rel)
    result = analyse_file(source, rs, 1 << 20, cache_dir)
    assert isinstance(result, FileFacts)
    assert "CSA_NEW_SWITCH" in {r.var for r in result.env_reads}
    assert result == analyse_file(source, rs, 1 << 20, None)
    assert len(_entries(Path(cache_dir))) == before + 1


def test_same_bytes_at_two_paths_keep_their_own_path(tmp_path: Path, rs) -> None:
    root = tmp_path / "two"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    body = "from . import helpers\nimport os\nFLAG = os.getenv('CSA_TWO')\n"
    (root / "a" / "m.py").write_text(body)
    (root / "b" / "m.py").write_text(body)
    cache_dir = cache.open_cache(True, str(tmp_path / "c"), rs.digest)
    assert cache_dir is not None
    for _ in range(2):  # cold, then warm
        results = {r.path: r for r in _analyse_all(root, rs, cache_dir)}
        assert set(results) == {"a/m.py", "b/m.py"}
        assert dict(results["a/m.py"].aliases)["helpers"] == "a.helpers"
        assert dict(results["b/m.py"].aliases)["helpers"] == "b.helpers"


def test_corrupt_entry_is_ignored_and_rewritten(tree: Path, rs, tmp_path: Path) -> None:
    cache_dir = cache.open_cache(True, str(tmp_path / "c"), rs.digest)
    assert cache_dir is not None
    expected = _analyse_all(tree, rs, cache_dir)
    entries = _entries(Path(cache_dir))
    garbage = [b"", b"not an entry", cache._head(cache._FACTS) + b"truncated", entries[0].read_bytes()[:-7]]
    for entry, blob in zip(entries, garbage * len(entries)):
        entry.write_bytes(blob)
    assert _analyse_all(tree, rs, cache_dir) == expected
    # rewritten: every entry loads again
    for entry in entries:
        assert cache.load(cache_dir, entry.stem) is not None


def test_an_entry_with_a_bit_flipped_in_a_name_it_holds_is_a_miss(tree: Path, rs, tmp_path: Path) -> None:
    # the flipped entry still loads (a path one letter off): only the checksum tells
    cache_dir = cache.open_cache(True, str(tmp_path / "c"), rs.digest)
    assert cache_dir is not None
    _analyse_all(tree, rs, cache_dir)
    for entry in _entries(Path(cache_dir)):
        facts = cache.load(cache_dir, entry.stem)
        blob = entry.read_bytes()
        at = blob.rfind(facts.path.encode()) if isinstance(facts, FileFacts) else -1
        if at > 0:
            break
    else:
        raise AssertionError("no entry names its path")
    entry.write_bytes(blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1:])
    assert cache.load(cache_dir, entry.stem) is None


def test_entry_under_another_key_is_a_miss(tree: Path, rs, tmp_path: Path) -> None:
    cache_dir = cache.open_cache(True, str(tmp_path / "c"), rs.digest)
    assert cache_dir is not None
    _analyse_all(tree, rs, cache_dir)
    first, second = _entries(Path(cache_dir))[:2]
    first.write_bytes(second.read_bytes())  # e.g. a rename gone wrong: the key inside does not match
    assert cache.load(cache_dir, first.stem) is None


def test_versions_are_separate_directories(tmp_path: Path) -> None:
    a = cache.open_cache(True, str(tmp_path), "digest-a")
    b = cache.open_cache(True, str(tmp_path), "digest-b")
    assert a and b and a != b
    assert cache.open_cache(False, str(tmp_path), "digest-a") is None
    for i in range(cache.KEEP_VERSIONS + 3):
        os.utime(cache.open_cache(True, str(tmp_path), f"d{i}"), (i, i))  # type: ignore[arg-type]
    cache.open_cache(True, str(tmp_path), "latest")
    assert len([d for d in (tmp_path / "facts").iterdir() if d.is_dir()]) <= cache.KEEP_VERSIONS


def test_default_root_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_cache_root() == tmp_path / "xdg" / "cs-audit"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert cache.default_cache_root() == Path.home() / ".cache" / "cs-audit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.default_cache_root() == Path.home() / ".cache" / "cs-audit"


def _write_same_key(args: tuple[str, str, int]) -> int:
    cache_dir, key, rounds = args
    result = FileFacts(path="p.py", module="p", aliases=(("os", "os"),), functions=(), env_reads=(), calls=())
    for _ in range(rounds):
        cache.store(cache_dir, key, result)
        loaded = cache.load(cache_dir, key)
        assert loaded is None or loaded == result
    return 0


def test_concurrent_writers_of_one_key(tmp_path: Path) -> None:
    cache_dir = cache.open_cache(True, str(tmp_path), "digest")
    assert cache_dir is not None
    key = "ab" * 20
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ctx.Pool(4) as pool:
        assert pool.map(_write_same_key, [(cache_dir, key, 200)] * 8) == [0] * 8
    assert cache.load(cache_dir, key) is not None
    leftovers = [p for p in Path(cache_dir).rglob("*") if p.is_file() and p.suffix != ".entry"]
    assert leftovers == []  # no temp files left behind


# ------------------------------------------------------------------ whole scans (needs the cache wired into run_audit)
def test_warm_scan_equals_cold_scan(tree: Path, tmp_path: Path) -> None:
    cache_root = tmp_path / "cache"
    uncached = _scan(tree, None)
    cold = _scan(tree, cache_root)
    assert _entries(cache_root), "run_audit did not write the facts cache (config.cache_dir)"
    warm = _scan(tree, cache_root)
    assert cold == uncached
    assert warm == uncached
    assert _scan(tree, cache_root, jobs=2) == uncached


def test_no_cache_writes_nothing(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from cs_audit.cli import app

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["scan", str(tree), "--format", "json", "--no-history", "-j", "1", "--no-cache", "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    assert out.exists()
    assert not (tmp_path / "xdg").exists()
    result = CliRunner().invoke(app, ["scan", str(tree), "--format", "json", "--no-history", "-j", "1", "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    assert _entries(tmp_path / "xdg" / "cs-audit"), "the default cache dir ($XDG_CACHE_HOME/cs-audit) was not used"


def test_cache_dir_from_config(tree: Path, tmp_path: Path) -> None:
    config = load_config(str(tree), history=False, cache_dir=str(tmp_path / "here"))
    assert config.cache is True and config.cache_dir == str(tmp_path / "here")
    run_audit(replace(config, jobs=1))
    assert _entries(tmp_path / "here")


# ------------------------------------------------------------------ whole-tree results
def _results(cache_root: Path) -> list[Path]:
    return sorted(cache_root.rglob("results/*.entry")) if cache_root.exists() else []


def _record_classes() -> dict[str, type]:
    """The records entries name, by name."""
    from cs_audit import records

    return {name: cls for cls, (name, _) in records._FIELDS_OF.items()}


def _forged(payload: bytes, how: str) -> bytes:
    """A plain-format payload with one field of the first record that has one of the kind
    ``how`` names given a value of another type: "int" an int field holding a string,
    "records" a tuple of records holding arrays of their fields instead, "string" a tuple of
    records holding a string."""
    import dataclasses
    import json

    classes = _record_classes()

    def forge(node: object) -> bool:
        if isinstance(node, dict) and len(node) == 1:
            (name, body), = node.items()
            cls = classes.get(name)
            if cls is not None and not issubclass(cls, tuple) and isinstance(body, list):
                for i, field in enumerate(dataclasses.fields(cls)):
                    annotation = str(field.type).replace(" ", "")
                    held = body[i]
                    if how == "int" and annotation == "int":
                        body[i] = str(held)
                        return True
                    if how in ("records", "string") and annotation.startswith("tuple[") and annotation[6:-5] in classes \
                            and held and all(isinstance(h, dict) for h in held):
                        body[i] = [next(iter(h.values())) for h in held] if how == "records" else "calls"
                        return True
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        return any(forge(child) for child in children)

    value = json.loads(bytes(payload))
    assert forge(value), how
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("how", ["int", "records", "string"])
def test_an_entry_with_a_field_of_another_type_is_a_miss(tree: Path, tmp_path: Path, how: str) -> None:
    """Entries well formed and sealed with a right checksum (as one with write access could
    make them), one field holding another type: each is a miss, never a crash in the joins."""
    cache_root = tmp_path / "cache"
    expected = _scan(tree, None)
    _scan(tree, cache_root)
    forged: dict[bytes, int] = {}
    for entry in _entries(cache_root):
        blob = entry.read_bytes()
        kind = blob.split(b" ", 2)[1]
        if kind not in (cache._FACTS, b"result"):
            continue
        payload = cache._opened(blob, kind, entry.stem)
        assert payload is not None
        try:
            changed = _forged(payload, how)
        except AssertionError:
            continue  # no field of that kind in this entry
        entry.write_bytes(cache._sealed(kind, entry.stem, changed))
        if kind == cache._FACTS:
            assert cache.load(str(entry.parent.parent), entry.stem) is None
        else:
            assert cache.load_result(str(entry.parent.parent), entry.stem) is None
        forged[kind] = forged.get(kind, 0) + 1
    assert forged[cache._FACTS] >= 3 and forged[b"result"] == 1  # the files' facts and the tree's result
    assert _scan(tree, cache_root) == expected


def test_unchanged_tree_loads_the_stored_result(tree: Path, tmp_path: Path) -> None:
    cache_root = tmp_path / "cache"
    cold, stats = _scan_stats(tree, cache_root)
    assert len(_results(cache_root)) == 1 and stats.result == "analysed" and stats.analysed
    warm, stats = _scan_stats(tree, cache_root)
    assert warm == cold and stats.result == "stored" and stats.analysed == ()


def test_changed_file_misses_the_stored_result(tree: Path, tmp_path: Path) -> None:
    cache_root = tmp_path / "cache"
    before = _scan(tree, cache_root)
    target = next(p for p in sorted(tree.rglob("*.py")) if "logger" in p.read_text(encoding="utf-8"))
    with open(target, "a", encoding="utf-8") as handle:
        handle.write('\n\ndef _late(x):\n    logger.info(f"late {x}")\n')
    after = _scan(tree, cache_root)
    assert after != before
    assert after == _scan(tree, None)  # the same as an uncached scan of the changed tree
    assert '"late {x}"' in after or "late {x}" in after
    assert len(_results(cache_root)) == 2


def test_config_outside_the_files_misses_the_stored_result(tree: Path, tmp_path: Path) -> None:
    cache_root = tmp_path / "cache"
    _scan(tree, cache_root)
    _scan(tree, cache_root, default_level="debug")
    assert len(_results(cache_root)) == 2
    assert _scan(tree, cache_root, default_level="debug") == _scan(tree, None, default_level="debug")


def test_corrupt_result_is_recomputed(tree: Path, tmp_path: Path) -> None:
    cache_root = tmp_path / "cache"
    cold = _scan(tree, cache_root)
    (stored,) = _results(cache_root)
    stored.write_bytes(b"cs-audit result 7\n" + b"\x80garbage")
    assert _scan(tree, cache_root) == cold
    assert stored.read_bytes().startswith(b"cs-audit result 7\n") and len(stored.read_bytes()) > 100  # rewritten


def test_stored_results_are_bounded(tmp_path: Path) -> None:
    cache_dir = str(tmp_path)
    for i in range(cache.KEEP_RESULTS + 5):
        cache.store_result(cache_dir, f"{i:040x}", ("value", i))
    assert len(list((tmp_path / "results").glob("*.entry"))) == cache.KEEP_RESULTS
    assert cache.load_result(cache_dir, f"{cache.KEEP_RESULTS + 4:040x}") == ("value", cache.KEEP_RESULTS + 4)


# ------------------------------------------------------------------ stat records (source_keys)
def _read_counter(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths whose bytes ``source_keys`` reads (through ``cache.source_key``)."""
    read: list[str] = []
    original = cache.source_key

    def counting(source, max_bytes):
        read.append(source.path)
        return original(source, max_bytes)

    monkeypatch.setattr(cache, "source_key", counting)
    return read


def test_unchanged_files_are_not_read_for_their_keys(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "RACY_NS", 0)  # the fixture's files were written just now
    sources = _sources(tree)
    first = cache.source_keys(sources, 1 << 20, str(tmp_path), str(tree))
    assert first == [cache.source_key(s, 1 << 20) for s in sources]
    read = _read_counter(monkeypatch)
    assert cache.source_keys(sources, 1 << 20, str(tmp_path), str(tree)) == first
    assert read == []
    # same size, new bytes: the stat signature (mtime, ctime) changed, so it is read again
    target = next(s for s in sources if s.path.endswith(".py"))
    data = Path(target.abspath).read_bytes()
    Path(target.abspath).write_bytes(data.replace(b"(", b"[", 1) if b"(" in data else data + b"#")
    again = cache.source_keys(sources, 1 << 20, str(tmp_path), str(tree))
    assert read == [target.path]
    index = sources.index(target)
    assert again[index] != first[index] and again[:index] + again[index + 1:] == first[:index] + first[index + 1:]


def test_a_recorded_file_over_a_lower_size_limit_has_no_key(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the record was made under a larger max_file_bytes: the file is now too large to scan
    monkeypatch.setattr(cache, "RACY_NS", 0)
    sources = _sources(tree)
    first = cache.source_keys(sources, 1 << 20, str(tmp_path), str(tree))
    biggest = max(sources, key=lambda s: Path(s.abspath).stat().st_size)
    limit = Path(biggest.abspath).stat().st_size - 1
    lowered = cache.source_keys(sources, limit, str(tmp_path), str(tree))
    assert lowered == [cache.source_key(s, limit) for s in sources]
    assert lowered[sources.index(biggest)] is None and first[sources.index(biggest)] is not None


def test_files_changed_just_before_hashing_are_read_every_time(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a file written within RACY_NS of being hashed could change again without a new mtime
    sources = _sources(tree)
    cache.source_keys(sources, 1 << 20, str(tmp_path), str(tree))
    read = _read_counter(monkeypatch)
    cache.source_keys(sources, 1 << 20, str(tmp_path), str(tree))
    assert sorted(read) == sorted(s.path for s in sources)


def test_stat_records_of_other_roots_are_bounded(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "RACY_NS", 0)
    sources = _sources(tree)[:2]
    for i in range(cache.KEEP_STAT_MEMOS + 3):
        cache.source_keys(sources, 1 << 20, str(tmp_path), f"{tree}/view{i}")
    assert len(list((tmp_path / "stats").glob("*.entry"))) == cache.KEEP_STAT_MEMOS


# ------------------------------------------------------------------ a new cache: keys from the workers
def test_the_keys_of_files_that_fail_are_stored(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "RACY_NS", 0)
    (tree / "broken.py").write_text("def (:\n", encoding="utf-8")
    (tree / "blob.py").write_bytes(b"x = 1\0\0")
    cache_root = tmp_path / "cache"
    cold = _scan(tree, cache_root)
    assert '"syntax"' in cold and '"binary"' in cold
    warm, stats = _scan_stats(tree, cache_root)
    assert warm == cold and stats.result == "stored"  # the failed files had keys too


def test_a_worker_lost_on_a_file_costs_only_that_file(tree: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that crashes its worker is reported, the other files' entries are kept, no
    whole-tree result is stored (a crash may not repeat), and the next scan takes every key
    from the stat record and analyses the file again."""
    monkeypatch.setattr(cache, "RACY_NS", 0)
    shutil.copy(PROJECT / "fixtures" / "hostile" / "and_chain_10000.py", tree / "chain.py")  # crashes libcst's parser
    cache_root = tmp_path / "cache"
    first = _scan(tree, cache_root)
    assert '"path": "chain.py"' in first and '"parser-crash"' in first
    assert first == _scan(tree, None) and _results(cache_root) == []  # a crash may not repeat: not stored
    read = _read_counter(monkeypatch)
    assert _scan(tree, cache_root) == first
    assert read == []


def test_warm_scan_imports_no_parser_model_or_git(tree: Path, tmp_path: Path) -> None:
    # a stored report is all a warm scan needs: the parsers, the model, the joins and
    # GitPython stay unimported (their import is a good part of a warm scan's time)
    import subprocess
    import sys

    probe = (
        "import sys\nfrom cs_audit.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('libcst', 'git', 'cs_audit.model', 'cs_audit.joins.callgraph', 'cs_audit.extract.index',"
        " 'cs_audit.pool') if m in sys.modules))\n"
    )
    args = ["scan", str(tree), "--format", "json", "--no-history", "-j", "1", "-o", str(tmp_path / "r.json")]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    cold = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, check=False)
    warm = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, check=False)
    assert "cs_audit.joins.callgraph" in cold.stdout, cold.stdout + cold.stderr  # the probe sees imports
    assert warm.stdout.strip().splitlines()[-1] == "[]", warm.stdout + warm.stderr


def test_facts_read_back_in_the_plain_format(rs) -> None:
    import dataclasses

    from cs_audit import records

    results = _analyse_all(TREE, rs, None)
    facts = [r for r in results if isinstance(r, FileFacts) and r.calls and r.functions]
    assert facts
    blob = records.dumps(tuple(results))
    back = records.loads(blob)
    assert back == tuple(results) and [type(r) for r in back] == [type(r) for r in results]
    calls = [(type(c), type(c.gates)) for r in results if isinstance(r, FileFacts) for c in r.calls]
    assert [(type(c), type(c.gates)) for r in back if isinstance(r, FileFacts) for c in r.calls] == calls
    assert {kind for kind, _ in calls} == {CallSite, PlainCall}
    for facts_back in back:  # one object per distinct gate and text in an entry, as extraction made them
        if isinstance(facts_back, FileFacts):
            gates = [g for c in facts_back.calls for g in c.gates]
            assert len({id(g) for g in gates}) == len(set(gates))
            callees = [c.callee for c in facts_back.calls]
            assert len({id(c) for c in callees}) == len(set(callees))
    with pytest.raises(dataclasses.FrozenInstanceError):
        back[results.index(facts[0])].calls[0].line = 0  # still frozen
    assert {c.__name__ for c in _slotted_model_classes()} <= set(records._MAKERS)  # every slotted model type is a record


def _slotted_model_classes() -> list[type]:
    import dataclasses

    from cs_audit import model, sources

    return [c for module in (model, sources) for c in vars(module).values() if isinstance(c, type)
            and dataclasses.is_dataclass(c) and c.__module__ == module.__name__ and getattr(c, "__slots__", None)]


@pytest.mark.parametrize("cls", _slotted_model_classes(), ids=lambda c: c.__name__)
def test_model_objects_read_back_are_of_their_class_equal_and_frozen(cls: type) -> None:
    import dataclasses
    import typing

    from cs_audit import model, records

    classes = _record_classes()

    def value(i: int, annotation: str) -> object:  # of the type the field is annotated with
        annotation = annotation.replace(" ", "")
        if annotation in classes:  # a record: one made the same way
            return make(classes[annotation])
        alternatives = [a for a in typing.get_args(getattr(model, annotation, None)) if a in records._FIELDS_OF]
        if alternatives:  # an alias of records (``FindingDetail``)
            return make(alternatives[0])
        containers = {"tuple[": (), "dict[": {}, "frozenset[": frozenset()}
        empty = next((empty for head, empty in containers.items() if annotation.startswith(head)), None)
        if empty is not None or "|None" in annotation or "None|" in annotation:
            return empty
        return {"int": 7, "float": 1.5, "bool": True}.get(annotation, f"v{i}")

    def make(record_class: type) -> object:
        return record_class(**{f.name: value(i, str(f.type)) for i, f in enumerate(dataclasses.fields(record_class))})

    fields = dataclasses.fields(cls)
    built = make(cls)
    for restored in (records.loads(records.dumps(built)), pickle.loads(pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL))):
        assert type(restored) is cls and restored == built and hash(restored) == hash(built)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(restored, fields[0].name, "other")


def test_every_field_of_every_record_is_type_checked_when_read() -> None:
    import importlib

    from cs_audit import records

    for module in ("api", "incremental.cache", "joins.callgraph", "model", "ruleset", "sources"):
        importlib.import_module(f"cs_audit.{module}")
    for name in _record_classes():
        make = records._MAKERS[name]
        if isinstance(make, records._Lazy):
            make.compile()
    assert records.UNCHECKED == set()  # an annotation the loader does not know is not checked


def test_the_plain_format_keeps_each_container_and_refuses_the_rest() -> None:
    from cs_audit import records
    from cs_audit.model import SwitchRef

    value = ({("a", 1): b"\x00\xff", 2: frozenset({SwitchRef("env", "X")})}, {1.5, None}, (True, "\udcff", ()))
    assert records.loads(records.dumps(value)) == value
    for refused in ([1], object(), {"a": [1]}):
        with pytest.raises(TypeError):
            records.dumps(refused)
    for foreign in (b'{"os.system": ["true"]}', b'{"SwitchRef": ["env"]}', b'{"#d": [[1]]}', b'{"a": 1, "b": 2}',
                    b'{"#d": [[{"#s": []}, 1]]}', b"[" * 100_000, b'{"#b": 1}', b"\xff"):
        with pytest.raises(ValueError):
            records.loads(foreign)


def test_record_refuses_what_it_cannot_rebuild() -> None:
    import dataclasses

    from cs_audit.records import record

    @dataclasses.dataclass
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class SwitchRef:  # the name of a record of the model
        x: int

    for cls in (Mutable, Checked, SwitchRef):
        with pytest.raises(TypeError):
            record(cls)


def test_a_result_stored_by_a_worker_reads_back(tmp_path: Path) -> None:
    """What a worker stores reads back equal to the result it returned; a cache hit returns
    the same; an error comes back as it is."""
    root = tmp_path / "t"
    root.mkdir()
    (root / "m.py").write_text("import os\nX = os.getenv('A')\n", encoding="utf-8")
    (root / "bad.py").write_text("def (:\n", encoding="utf-8")
    cache_dir = cache.open_cache(True, str(tmp_path / "c"), "digest")
    assert cache_dir is not None
    rs = prepare_ruleset(AuditConfig(root=root))
    good, bad = sorted(_sources(root), key=lambda s: s.path != "m.py")
    result = analyse_file(good, rs, 1 << 20, cache_dir)
    assert isinstance(result, FileFacts) and result == analyse_file(good, rs, 1 << 20, None)
    (entry,) = [p for p in Path(cache_dir).rglob("*.entry")]
    assert cache.load(cache_dir, entry.stem) == result
    assert analyse_file(good, rs, 1 << 20, cache_dir) == result  # from the cache
    error = analyse_file(bad, rs, 1 << 20, cache_dir)
    assert isinstance(error, FileError) and error.kind == "syntax"
    assert cache.unpack(b"\x80garbage") is None and cache.unpack(b'["foreign"]') is None


def test_the_code_digest_covers_every_module_of_the_package() -> None:
    """An edit of any cs-audit module (not only of the cache's own folder) makes a new
    cache version: the digest is taken over the whole package."""
    import cs_audit

    assert cache.CODE_ROOT == Path(cs_audit.__file__).resolve().parent
    assert (cache.CODE_ROOT / "model.py").is_file() and (cache.CODE_ROOT / "analysis" / "rules.py").is_file()
