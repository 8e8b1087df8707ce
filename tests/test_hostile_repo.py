"""A scanned repository is untrusted: what it holds can make cs-audit fail with one clear
message, never make it run a program, write outside its outputs or exhaust memory."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cs_audit.config import ConfigError, DecisionsError, load_config, load_decisions

PROJECT = Path(__file__).resolve().parent.parent


def _this_checkout(**extra: str) -> dict[str, str]:
    """The environment of a `python -m cs_audit` run from another directory that must still
    import this checkout's package (not an installed copy of it)."""
    path = os.pathsep.join(p for p in (str(PROJECT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def _alias_bomb(levels: int = 5) -> str:
    """A few hundred bytes whose aliases nest into 9**levels list items when expanded."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_the_project_configuration_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cs-audit.yaml").write_text(_alias_bomb() + "hot_roots: [*l4]\n")
    with pytest.raises(ConfigError, match="anchors and aliases are not allowed"):
        load_config(str(tmp_path))


def test_an_alias_bomb_in_the_decisions_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cs-audit.decisions.yaml").write_text(_alias_bomb() + "X_DEBUG: {disposition: KEEP, reason: *l4}\n")
    with pytest.raises(DecisionsError, match="anchors and aliases are not allowed"):
        load_decisions(tmp_path)


def test_a_scan_with_an_alias_bomb_ends_at_once_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("print('x')\n")
    (tmp_path / "cs-audit.yaml").write_text(_alias_bomb(9) + "hot_roots: [*l8]\n")  # 9**9 items if expanded
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(tmp_path), "--no-history", "--no-cache", "-f", "json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "cs-audit: configuration error: cs-audit.yaml: line 1: anchors and aliases are not allowed here\n"


# -- programs a repository's own configuration names are never run

ENGINE = '''import os


class GPUModelRunner:
    def execute_model(self, batch):
        if os.environ.get("ENG_TRACE"):
            print("trace", batch)
        return batch
'''


def _repo_with_drivers(tmp_path: Path, driver: str = "x") -> tuple[Path, Path]:
    """A repository whose .gitattributes names a filter and a diff driver that its own
    .git/config defines, with an fsmonitor, as programs which leave a marker file when git
    runs them."""
    try:
        from tests.gitrepo import git, make_repo
    except ImportError:  # run from tests/
        from gitrepo import git, make_repo  # type: ignore[no-redef]

    marker = tmp_path / "MARKER"
    repo = make_repo(tmp_path, [("one", {"eng/model_runner.py": ENGINE, "run.sh": "export ENG_TRACE=1\n"}),
                                ("two", {"eng/model_runner.py": ENGINE + "\n# two\n"})])
    (repo / ".gitattributes").write_text(f"*.py diff={driver} filter={driver}\n*.sh diff={driver} filter={driver}\n")
    program = f"sh -c 'touch {marker}; cat'"
    for key, value in ((f"filter.{driver}.clean", program), (f"filter.{driver}.smudge", program),
                       (f"filter.{driver}.process", program),
                       (f"diff.{driver}.textconv", f"sh -c 'touch {marker}; cat \"$0\"'"), (f"diff.{driver}.command", program),
                       ("core.fsmonitor", program)):  # git ls-files alone runs an fsmonitor
        git(repo, "config", key, value)
    # the work tree is stat-dirty, as after a checkout: status and diff consult the filters
    (repo / "eng/model_runner.py").write_text(ENGINE + "\n# two\n# three\n")
    return repo, marker


@pytest.mark.parametrize("command", [
    ["scan", "{repo}", "-f", "json", "--no-cache"],
    ["switch", "ENG_TRACE", "{repo}"],
    ["check", "{repo}", "--since", "HEAD~1", "-f", "json"],
    ["report", "{repo}", "--rev", "HEAD~1", "-o", "{out}"],
    ["diff", "HEAD~1", "HEAD", "{repo}"],
])
@pytest.mark.parametrize("driver", ["x", "my.dotted.driver"])
def test_no_filter_or_diff_driver_of_the_repository_runs(tmp_path: Path, command: list[str], driver: str) -> None:
    repo, marker = _repo_with_drivers(tmp_path, driver)
    argv = [part.format(repo=repo, out=tmp_path / "report.md") for part in command]
    proc = subprocess.run([sys.executable, "-m", "cs_audit", *argv, "-j", "1"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=_this_checkout())
    assert proc.returncode in (0, 1), proc.stderr
    assert not marker.exists(), f"git ran a program of the repository's configuration during {command[0]}"


def test_a_dotted_driver_name_is_neutralised_whole(tmp_path: Path) -> None:
    from cs_audit.git.runner import _DRIVERS, driver_overrides, git_argv, git_env

    repo, marker = _repo_with_drivers(tmp_path, "my.dotted.driver")
    _DRIVERS.clear()
    overrides = driver_overrides(repo)
    assert "filter.my.dotted.driver.clean=" in overrides and "diff.my.dotted.driver.textconv=" in overrides
    # git itself, with those overrides, runs none of the programs on a status of a dirty tree
    subprocess.run(git_argv(["status", "--short"], overrides), cwd=repo, env=git_env(), capture_output=True, check=True)
    assert not marker.exists()


def test_a_git_file_naming_a_repository_outside_the_tree_is_noted(tmp_path: Path) -> None:
    """A tree whose `.git` file or symlink (its root's, a nested repository's) names another
    repository is reported with that repository's commit and history: the report says so,
    and git runs none of that repository's programs."""
    try:
        from tests.gitrepo import git, head, make_repo
    except ImportError:  # run from tests/
        from gitrepo import git, head, make_repo  # type: ignore[no-redef]

    elsewhere, marker = _repo_with_drivers(tmp_path / "elsewhere")
    other = make_repo(tmp_path / "elsewhere", [("lib", {"lib.py": "x = 1\n"})], name="other")
    tree = tmp_path / "tree"
    (tree / "vendored").mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    (tree / "vendored" / ".git").write_text("gitdir: ../../elsewhere/other/.git\n")  # read from its own folder
    (tree / "linked").mkdir()
    (tree / "linked" / ".git").symlink_to(other / ".git")
    (tree / "eng").mkdir()
    (tree / "eng" / "model_runner.py").write_text(ENGINE)
    # a repository whose git directory is inside the tree, as a submodule's: nothing to note
    (tree / ".modules").mkdir()
    git(tree, "init", "-q", "--separate-git-dir", str(tree / ".modules" / "inside"), "inside")
    (tree / "inside" / "mod.py").write_text("y = 2\n")
    git(tree / "inside", "add", "-A")
    git(tree / "inside", "commit", "-q", "-m", "inside")

    proc = subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(tree), "-f", "json", "--no-cache", "-j", "1"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_this_checkout())
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["commit"] == head(elsewhere)
    assert {r["path"]: r["commit"] for r in report["repositories"]} == {
        ".": head(elsewhere), "inside": head(tree / "inside"), "linked": head(other), "vendored": head(other)}
    noted = [(n["path"], n["level"], n["message"]) for n in report["notes"] if n["id"] == "git-dir-outside"]
    tail = "outside the scanned tree: the commit, history and blame reported for it are that repository's"
    assert noted == [
        ("", "note", f".git of the scanned folder names the git directory ../elsewhere/repo/.git, {tail}"),
        ("linked", "note", f".git of linked names the git directory ../elsewhere/other/.git, {tail}"),
        ("vendored", "note", f".git of vendored names the git directory ../elsewhere/other/.git, {tail}"),
    ]
    assert not marker.exists(), "git ran a program of the outside repository's configuration"


# -- outputs: written where asked, never through or over a symlink


def _scan_to(tmp_path: Path, output: str, **run: object) -> subprocess.CompletedProcess[str]:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "mod.py").write_text("print('x')\n")
    return subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(tree), "--no-history", "--no-cache", "-f", "json",
                           "-o", output], text=True, timeout=120, **run)  # type: ignore[call-overload]


def test_an_output_symlink_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text("keep me\n")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    proc = _scan_to(tmp_path, str(link), capture_output=True)
    assert proc.returncode == 2 and "refusing to write through a symlink" in proc.stderr
    assert link.is_symlink() and target.read_text() == "keep me\n"


@pytest.mark.parametrize(("output", "message"), [("{tmp}", "not a regular file (a directory)"),
                                                 ("/dev/full", "cannot write: No space left on device")])
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path, output: str, message: str) -> None:
    if output == "/dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    proc = _scan_to(tmp_path, output.format(tmp=tmp_path), capture_output=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_output_to_dev_stdout_reaches_a_redirected_stdout(tmp_path: Path) -> None:
    redirected = tmp_path / "out.json"
    with open(redirected, "w") as handle:
        proc = _scan_to(tmp_path, "/dev/stdout", stdout=handle, stderr=subprocess.PIPE)
    assert proc.returncode == 0 and '"findings"' in redirected.read_text()


# -- names from the tree cannot drive the terminal


def test_the_terminal_summary_escapes_control_characters_in_names(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    evil = "run\x1b[2J\x1b]0;pwned\x07\u202eyp.\u2028x"  # clear screen, set title, bidi, line separator
    (tree / f"{evil}.py").write_text("def (:\n")  # a skipped file: listed by name
    (tree / "eng").mkdir()
    (tree / "eng" / f"{evil}_runner.py").write_text(
        "class GPUModelRunner:\n    def execute_model(self, b):\n        print(b)\n        return b\n")
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(tree), "--no-history", "--no-cache",
                           "-o", str(tmp_path / "r.md")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    for raw in ("\x1b", "\x07", "\u202e", "\u2028"):
        assert raw not in proc.stdout, repr(raw)
    assert "\\x1b[2J" in proc.stdout and "\\u202e" in proc.stdout  # shown, escaped


@pytest.mark.parametrize("command", [
    ["scan", "--format", "github"], ["scan", "--format", "html"], ["fix", "--diff"],
])
def test_github_html_and_the_fix_diff_escape_control_characters(tmp_path: Path, command: list[str]) -> None:
    tree = tmp_path / "tree"
    (tree / "eng").mkdir(parents=True)
    evil = "run\x1b[2J\u202eyp"
    (tree / "eng" / f"{evil}_runner.py").write_text(
        "import logging\nlogger = logging.getLogger(__name__)\n\n\nclass GPUModelRunner:\n"
        "    def execute_model(self, b):\n        logger.info(f\"step \x1b]0;pwned\x07 {b}\")\n        return b\n")
    args = [sys.executable, "-m", "cs_audit", command[0], str(tree), *command[1:], "--no-cache"]
    page = tmp_path / "report.html"
    if command[0] == "scan":
        args += ["--no-history"] + (["-o", str(page)] if "html" in command else [])
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert proc.returncode in (0, 1), proc.stderr
    shown = page.read_text() if "html" in command else proc.stdout
    assert "\\u202eyp" in shown  # the file name, escaped where it is shown
    if "github" not in command:  # annotations carry no code; the page and the diff show the line
        assert "pwned" in shown and "\\x1b]0;pwned\\x07" in shown
    for raw in ("\x1b", "\x07", "\u202e"):
        assert raw not in shown, repr(raw)


# -- a malformed or hostile project configuration is one line, exit 2


@pytest.mark.parametrize("yaml_text", [
    "exclude: 5\n", "exclude: [1, 2]\n", "exclude: [[a]]\n", 'exclude: "v*"\n',
    "max_file_bytes: lots\n", "max_file_bytes: .inf\n", "max_file_bytes: 1.5e300\n", "max_file_bytes: -5\n",
    "max_file_bytes: true\n", "default_level: verbose\n", "default_level: [info]\n",
])
def test_a_malformed_value_is_a_configuration_error(tmp_path: Path, yaml_text: str) -> None:
    from cs_audit.api import prepare_ruleset

    (tmp_path / "cs-audit.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError, match="cs-audit.yaml: (exclude|max_file_bytes|default_level)"):
        prepare_ruleset(load_config(str(tmp_path)))


@pytest.mark.parametrize("toml_text", ["tool = 5\n", "[tool]\ncs-audit = 5\n",
                                       "[tool.cs-audit]\nmax_file_bytes = inf\n", "[tool.cs-audit]\nmax_file_bytes = nan\n",
                                       "x = " + "[" * 3000 + "]" * 3000 + "\n"])
def test_a_malformed_pyproject_is_a_configuration_error(tmp_path: Path, toml_text: str) -> None:
    (tmp_path / "pyproject.toml").write_text(toml_text)
    if toml_text.startswith("tool = 5"):
        assert load_config(str(tmp_path)).config_source is None  # no [tool.cs-audit]: nothing of ours
        return
    with pytest.raises(ConfigError, match="pyproject.toml"):
        load_config(str(tmp_path))


@pytest.mark.parametrize("name", ["cs-audit.yaml", "cs-audit.decisions.yaml", "pyproject.toml"])
def test_configuration_files_are_not_read_through_symlinks_or_fifos(tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text("exclude: ['*']\n")
    root = tmp_path / "tree"
    root.mkdir()
    (root / name).symlink_to(outside)
    error = DecisionsError if name == "cs-audit.decisions.yaml" else ConfigError
    with pytest.raises(error, match="a symlink: not followed"):
        load_decisions(root) if error is DecisionsError else load_config(str(root))
    (root / name).unlink()
    os.mkfifo(root / name)  # a FIFO would block a plain open() forever
    with pytest.raises(error, match="not a regular file"):
        load_decisions(root) if error is DecisionsError else load_config(str(root))


def test_python_m_cs_audit_inside_a_tree_imports_nothing_from_it(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("ast.py", "tokenize.py", "yaml.py", "typer.py"):
        (tree / name).write_text(f"open({str(marker)!r}, 'w').close()\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "scan", ".", "--no-history", "--no-cache", "-f", "json"],
                          capture_output=True, text=True, timeout=120, cwd=tree, env=env)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()


# -- the cache trusts nothing it did not write


def test_a_bit_flipped_cache_entry_is_a_miss_and_is_rewritten(tmp_path: Path) -> None:
    """Every single-bit flip in the payload of a facts entry is caught by its checksum: the
    next scan misses it, gives the report of a fresh scan, and rewrites the entry."""
    import random

    from cs_audit.api import run_audit
    from cs_audit.config import AuditConfig
    from cs_audit.render.json import render_json

    tree = tmp_path / "tree"
    (tree / "eng").mkdir(parents=True)
    (tree / "eng" / "model_runner.py").write_text(
        "import os\n\n\nclass GPUModelRunner:\n    def execute_model(self, b):\n"
        "        if os.environ.get('ENG_DUMP'):\n            print('dump', b)\n        print(b)\n        return b\n")
    cache_dir = tmp_path / "cache"

    def report() -> str:
        config = AuditConfig(root=str(tree), jobs=1, history=False, cache_dir=str(cache_dir))
        return render_json(run_audit(config))

    fresh = report()
    (entry,) = [p for p in cache_dir.rglob("*.entry") if p.parent.name == p.stem[:2]]  # facts: <key[:2]>/<key>.entry
    original = entry.read_bytes()
    for result in cache_dir.rglob("results/*.entry"):
        result.unlink()  # so the scan reads the facts entry
    rng = random.Random(7)
    for _ in range(20):
        flipped = bytearray(original)
        at = rng.randrange(len(original) - 40, len(original))  # in the pickled payload
        flipped[at] ^= 1 << rng.randrange(8)
        entry.write_bytes(bytes(flipped))
        for result in cache_dir.rglob("results/*.entry"):
            result.unlink()
        assert report() == fresh
        assert entry.read_bytes() == original  # rewritten


def _engine_tree(root: Path) -> Path:
    """A small tree with a finding, a gated site and an env registry (so every store of the
    cache has entries)."""
    (root / "eng").mkdir(parents=True)
    (root / "eng" / "model_runner.py").write_text(
        "import os\nfrom eng import envs\n\n\nclass GPUModelRunner:\n    def execute_model(self, b):\n"
        "        if os.environ.get('ENG_DUMP'):\n            print('dump', b)\n        if envs.ENG_TRACE:\n"
        "            print('trace', b)\n        print(b)\n        return b\n")
    (root / "eng" / "envs.py").write_text(
        "import os\n\nenvironment_variables = {\n    'ENG_TRACE': lambda: os.getenv('ENG_TRACE', '0') == '1',\n}\n\n\n"
        "def __getattr__(name):\n    return environment_variables[name]()\n")
    return root


class _Scans:
    """``cs-audit scan`` of a tree through the CLI with its own XDG cache, counting the files
    each scan analyses (hands to ``analyse_file``, in the workers the scan forks, which parse
    a file unless its facts are in the cache)."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from cs_audit import api
        from cs_audit.incremental import cache

        self.tree = _engine_tree(tmp_path / "tree")
        self.xdg = tmp_path / "xdg"
        self.report = tmp_path / "report.json"
        self.analysed = tmp_path / "analysed.log"
        analyse = api.analyse_file

        def counted(source, *args):  # type: ignore[no-untyped-def]
            with open(self.analysed, "a", encoding="utf-8") as log:
                log.write(source.path + "\n")
            return analyse(source, *args)

        monkeypatch.setattr(api, "analyse_file", counted)
        monkeypatch.setattr(cache, "RACY_NS", 0)  # the stat and registry records vouch for files just written

    def scan(self) -> tuple[str, list[str]]:
        """The JSON report of a scan, and the files it analysed."""
        from typer.testing import CliRunner

        from cs_audit.cli import app

        self.analysed.write_text("")
        result = CliRunner().invoke(app, ["scan", str(self.tree), "-f", "json", "--no-history", "-j", "1", "-o", str(self.report)],
                                    env={"XDG_CACHE_HOME": str(self.xdg)})
        assert result.exit_code == 0, result.output
        return self.report.read_text(), sorted(self.analysed.read_text().split())

    def entries(self, pattern: str) -> list[Path]:
        return sorted((self.xdg / "cs-audit").glob(pattern))

    def forget(self, folders: tuple[str, ...]) -> None:
        """Remove the stored reports or tree results, so the next scan reads what is below them."""
        for folder in folders:
            for entry in self.entries(f"facts/v*/{folder}/*.entry"):
                entry.unlink()


def test_a_warm_scan_after_a_cold_one_analyses_nothing_and_gives_the_same_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scans = _Scans(tmp_path, monkeypatch)
    cold, analysed = scans.scan()
    assert analysed == ["eng/envs.py", "eng/model_runner.py"]  # the counter sees the workers
    assert scans.scan() == (cold, [])  # the stored report
    scans.forget(("reports", "results"))
    assert scans.scan() == (cold, [])  # the facts, resolutions and site gates, read back


#: every store of the cache: the entries (under the cache root), and the stores above it a
#: scan would be served from first (removed so that the scan reads these)
_STORES = {
    "facts": ("facts/v*/??/*.entry", ("reports", "results")),
    "stat record": ("facts/v*/stats/*.entry", ()),
    "tree result": ("facts/v*/results/*.entry", ("reports",)),
    "stored report": ("facts/v*/reports/*.entry", ()),
    "last tree of the root": ("facts/v*/trees/*.entry", ("reports", "results")),
    "resolutions": ("facts/v*/resolutions/*.entry", ("reports", "results")),
    "site gates": ("facts/v*/gates/*.entry", ("reports", "results")),
    "registries": ("registries/v*/roots/*.entry", ()),
}
#: what the stores began their entries with when they held pickles (cs-audit < cache format 7)
_PICKLE_MAGIC = {"facts": b"csa-facts", "stat record": b"csa-stats", "tree result": b"csa-result",
                 "stored report": b"csa-report", "last tree of the root": b"csa-tree", "resolutions": b"csa-resolutions",
                 "site gates": b"csa-gates", "registries": b"csa-registries"}


def _popen_pickle(marker: Path) -> bytes:
    """A protocol-4 pickle whose load runs ``touch marker``: ``subprocess.Popen`` reached
    through ``cs_audit.git.runner`` (which the allow-list of the old loader admitted), REDUCE."""
    import pickle

    def text(value: str) -> bytes:
        raw = value.encode()
        return pickle.BINUNICODE + len(raw).to_bytes(4, "little") + raw

    argument = pickle.EMPTY_LIST + pickle.MARK + text("touch") + text(str(marker)) + pickle.APPENDS
    return (pickle.PROTO + bytes([4]) + text("cs_audit.git.runner") + text("subprocess.Popen") + pickle.STACK_GLOBAL
            + argument + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP)


def _planted(store: str, entry: bytes, payload: bytes, form: str) -> bytes:
    """``payload`` as the entry ``entry`` would be planted: in the pickle stores' own form (their
    header, then the CRC-32 the old loader checked), or in the current form with everything
    right (the store, the format, the key, the digest) but what it holds."""
    import zlib

    from cs_audit.incremental import cache

    head, _, key, _ = entry.split(b"\n", 3)
    if form == "current":
        return cache._sealed(head.split()[1], key.decode("utf-8", "surrogatepass"), payload)
    crc = zlib.crc32(payload).to_bytes(4, "little")
    return _PICKLE_MAGIC[store] + (key + b"\0" if store == "facts" else b"") + crc + payload


@pytest.mark.parametrize("store", list(_STORES))
def test_an_entry_of_any_store_that_is_planted_or_flipped_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    """Each store of the cache, with every entry (1) replaced by a pickle that runs a program on
    load, in the old form and in the current one, (2) replaced by an entry in the current form
    naming a class no record of cs-audit has, (3) with one bit flipped (anywhere: header,
    digest, key, value): the next scan gives the cold scan's report, nothing runs, and the
    entry is written again."""
    import random

    scans = _Scans(tmp_path, monkeypatch)
    cold, _ = scans.scan()
    pattern, above = _STORES[store]
    originals = {entry: entry.read_bytes() for entry in scans.entries(pattern)}
    assert originals
    marker = tmp_path / "MARKER"
    foreign = [b'{"Popen": [["touch", %s]]}' % json.dumps(str(marker)).encode(),
               b'[{"system": ["touch"]}, {"#d": []}]', b'{"AuditConfig": ["."]}', b'{"__reduce__": []}']
    rng = random.Random(store)
    planted: list[tuple[str, dict[Path, bytes]]] = []
    for form in ("pickle", "current"):
        planted.append((f"a pickle in the {form} form",
                        {e: _planted(store, blob, _popen_pickle(marker), form) for e, blob in originals.items()}))
    for payload in foreign:
        planted.append((f"the current form holding {payload!r}", {e: _planted(store, blob, payload, "current") for e, blob in originals.items()}))
    for _ in range(3):
        flipped = {}
        for entry, blob in originals.items():
            at = rng.randrange(len(blob))
            flipped[entry] = blob[:at] + bytes([blob[at] ^ (1 << rng.randrange(8))]) + blob[at + 1:]
        planted.append(("a bit flipped", flipped))
    for how, blobs in planted:
        scans.forget(above)
        for entry, blob in blobs.items():
            entry.write_bytes(blob)
        report, _ = scans.scan()
        time.sleep(0.1)  # a Popen would have touched it by now
        assert not marker.exists(), how
        assert report == cold, how
        for entry, blob in blobs.items():
            assert entry.read_bytes() != blob, f"{how}: {entry} not written again"


#: the uid of another user, for the cache folders a test makes someone else's
OTHER_UID = 65534


def _share_cache(shared: Path, how: str) -> None:
    """Make the cache folder ``shared`` one another user could have planted entries in."""
    if how == "group or others may write it":
        shared.mkdir(parents=True)
        shared.chmod(0o777)  # as a shared XDG_CACHE_HOME/cs-audit another user made
    elif how == "a symlink":
        (shared.parent / "elsewhere").mkdir(parents=True)
        shared.symlink_to(shared.parent / "elsewhere")
    else:
        shared.mkdir(parents=True, mode=0o700)
        os.chown(shared, OTHER_UID, OTHER_UID)


@pytest.mark.parametrize(("how", "said"), [
    ("group or others may write it", "is writable by its group or others (mode 777)"),
    ("a symlink", "is not a plain directory"),
    pytest.param("another user's", f"is owned by another user (uid {OTHER_UID})", marks=pytest.mark.skipif(
        not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give a folder away")),
])
def test_a_cache_others_can_write_is_not_used(tmp_path: Path, how: str, said: str) -> None:
    from typer.testing import CliRunner

    from cs_audit.cli import app

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text("import os\nX = os.getenv('A')\n")
    shared = tmp_path / "xdg" / "cs-audit"
    _share_cache(shared, how)
    args = ["scan", str(tree), "-f", "json", "--no-history", "-j", "1"]
    result = CliRunner().invoke(app, args, env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert result.exit_code == 0
    warnings = [line for line in result.stderr.splitlines() if "cache not used" in line]
    assert len(warnings) == 1 and f"{shared} {said}" in warnings[0]
    assert not list(shared.rglob("*.entry"))  # nothing read from it, nothing written to it
    assert CliRunner().invoke(app, args, env={"XDG_CACHE_HOME": str(tmp_path / "mine")}).exit_code == 0
    own = tmp_path / "mine" / "cs-audit"
    assert stat.S_IMODE(own.stat().st_mode) == 0o700 and list(own.rglob("*.entry"))


def test_report_of_a_crafted_commit_creates_nothing_outside_its_temp_tree(tmp_path: Path) -> None:
    """A commit holding ``d -> OUTSIDE`` and ``d/sub/x.py`` (made with plumbing): writing
    its tree must not create ``OUTSIDE/sub`` through the link."""
    try:
        from tests.gitrepo import git
    except ImportError:  # run from tests/
        from gitrepo import git  # type: ignore[no-redef]

    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")

    def hashed(data: str) -> str:
        return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data, capture_output=True,
                              text=True, check=True).stdout.strip()

    def tree(listing: str) -> str:
        return subprocess.run(["git", "mktree"], cwd=repo, input=listing, capture_output=True, text=True,
                              check=True).stdout.strip()

    code = hashed("print(1)\n")
    sub = tree(f"100644 blob {code}\tx.py\n")
    d = tree(f"040000 tree {sub}\tsub\n")
    top = tree(f"120000 blob {hashed(str(outside))}\td\n040000 tree {d}\td\n")
    commit = git(repo, "commit-tree", top, "-m", "crafted").strip()
    git(repo, "update-ref", "refs/heads/main", commit)
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "report", str(repo), "--rev", commit,
                           "-o", str(tmp_path / "r.md")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert list(outside.iterdir()) == []


def test_sigterm_removes_the_temporary_tree_of_a_past_commit(tmp_path: Path) -> None:
    """Killed with SIGTERM while it holds a commit's temporary tree, the command removes it
    on the way out, as on Ctrl-C."""
    try:
        from tests.gitrepo import make_repo
    except ImportError:  # run from tests/
        from gitrepo import make_repo  # type: ignore[no-redef]

    repo = make_repo(tmp_path, [("one", {"mod.py": "print(1)\n"})])
    program = (
        "import os, signal, sys\n"
        "from cs_audit.cli import exit_on_signals\n"
        "from cs_audit.ci.revisions import TreeAuditor\n"
        "from cs_audit.git.repo import GitRepo\n"
        "exit_on_signals()\n"
        f"repo = GitRepo.open(__import__('pathlib').Path({str(repo)!r}))\n"
        "with TreeAuditor(repo, 'repo', jobs=1) as auditor:\n"
        "    auditor.audit(repo.verify('HEAD'))\n"
        "    print(auditor.root, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    print('not reached', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 128 + 15, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and "not reached" not in lines
    assert not Path(lines[0]).exists()


def test_sigterm_removes_the_temporary_commit_graph_of_a_scan(tmp_path: Path) -> None:
    """Killed with SIGTERM while git writes blame's temporary commit-graph, a scan removes
    that directory on the way out: closing the history does, not a finalizer, which never
    runs while anything still holds the history (the CLI exits with os._exit, keeping what
    it holds alive; here a list keeps it)."""
    try:
        from tests.gitrepo import make_repo
    except ImportError:  # run from tests/
        from gitrepo import make_repo  # type: ignore[no-redef]

    files = {f"eng/m{i}.py": f"import os\nX = os.environ.get('X{i}_DEBUG')\n" for i in range(12)}
    repo = make_repo(tmp_path, [("one", files)])
    program = (
        "import os, signal, sys\n"
        "from cs_audit.git import blame\n"
        "real = blame._spawn\n"
        "def spawn(args, cwd, env, stdin=b''):\n"
        "    if args[0] == 'commit-graph':\n"
        "        print(env['GIT_OBJECT_DIRECTORY'], flush=True)\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return real(args, cwd, env, stdin)\n"
        "blame._spawn = spawn\n"
        "blame.GitHistory.first_reads = lambda self, names, reads: {}\n"  # blame, not the history pass, dates them
        "held, real_open = [], blame.open_history\n"
        "blame.open_history = lambda *a, **k: held.append(real_open(*a, **k)) or held[-1]\n"
        f"sys.argv = ['cs-audit', 'scan', {str(repo)!r}, '--no-cache', '-f', 'json', '-j', '1']\n"
        "import cs_audit.cli\n"
        "cs_audit.cli.main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env=_this_checkout())
    assert proc.returncode == 128 + 15, proc.stderr
    (graph_dir,) = proc.stdout.splitlines()
    assert "cs-audit-graph-" in graph_dir and not Path(graph_dir).exists()


def test_a_huge_env_instruction_gives_every_pair_in_order() -> None:
    """One Dockerfile ENV of 50,000 pairs (each found from where the one before it was: the
    parse is linear), with continuation lines and a repeated name."""
    from cs_audit.extract.setters import setters_in_file

    pairs = " ".join(f"K{i}=v{i}" for i in range(50000))
    text = f"FROM x\nENV A=1 \\\n    {pairs} \\\n    A=2\n"
    started = time.process_time()
    found = setters_in_file("Dockerfile", text, "docker")
    assert time.process_time() - started < 5  # about 0.6 s of CPU; the quadratic parse took minutes
    assert [(s.var, s.value, s.line) for s in found[:2]] == [("A", "1", 2), ("K0", "v0", 3)]
    assert [(s.var, s.value, s.line) for s in found[-2:]] == [("K49999", "v49999", 3), ("A", "2", 4)]
    assert len(found) == 50002


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_mailmap_that_is_no_regular_file_skips_history_and_never_hangs(tmp_path: Path, kind: str) -> None:
    import json

    try:
        from tests.gitrepo import make_repo
    except ImportError:  # run from tests/
        from gitrepo import make_repo  # type: ignore[no-redef]

    repo = make_repo(tmp_path, [("one", {"mod.py": "import os\nX = os.environ.get('X_DEBUG')\n"})])
    if kind == "fifo":
        os.mkfifo(repo / ".mailmap")
    else:
        (repo / ".mailmap").symlink_to("/dev/zero")
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(repo), "--no-cache", "-f", "json", "-j", "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    switch = json.loads(proc.stdout)["switches"][0]
    assert switch["added_in"] is None and "mailmap" in (switch["added_in_note"] or "")


def test_a_garbage_git_index_is_one_line_where_it_is_needed(tmp_path: Path) -> None:
    """A scan's history reads commits and the work tree, never the index: it still works; a
    check --since needs the index's list of paths, and says in one line it could not."""
    import json

    try:
        from tests.gitrepo import make_repo
    except ImportError:  # run from tests/
        from gitrepo import make_repo  # type: ignore[no-redef]

    repo = make_repo(tmp_path, [("one", {"mod.py": "import os\nX = os.environ.get('X_DEBUG')\n"}), ("two", {"b.py": ""})])
    (repo / ".git" / "index").write_bytes(b"garbage")
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(repo), "--no-cache", "-f", "json", "-j", "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (switch,) = json.loads(proc.stdout)["switches"]
    assert switch["added_in"]["subject"] == "one"
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "check", str(repo), "--since", "HEAD~1", "-f", "json", "-j", "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr == "", proc.stderr
    (why,) = json.loads(proc.stdout)["check"]["incomplete"]
    assert why.startswith("--since HEAD~1: git ls-files failed: ") and "\n" not in why
    assert (repo / ".git" / "index").read_bytes() == b"garbage"


def test_an_internal_error_is_one_line_and_a_traceback_file(tmp_path: Path) -> None:
    program = (
        "import sys\n"
        "import cs_audit.api\n"
        "def boom(*a, **k):\n"
        "    raise RuntimeError('boom\\nsecond line')\n"
        "cs_audit.api.run_audit = cs_audit.api.audit_report = boom\n"
        f"sys.argv = ['cs-audit', 'scan', {str(tmp_path)!r}, '--no-history', '-f', 'json']\n"
        "import cs_audit.cli\n"
        "cs_audit.cli.main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("cs-audit: internal error: RuntimeError: boom (traceback in ")
    trace = Path(proc.stderr.rsplit("traceback in ", 1)[1].rstrip(")\n"))
    assert "RuntimeError: boom" in trace.read_text()
    trace.unlink()


def test_a_missing_tree_object_is_one_line_and_the_rest_goes_on(tmp_path: Path) -> None:
    """Commits whose tree object was deleted from .git/objects: the scan still finds what the
    work tree holds (history says why it is missing), and each command that needs such a
    commit says so in one line, exit 2, going on with the commits it can read."""
    import json

    try:
        from tests.gitrepo import git, make_repo
    except ImportError:  # run from tests/
        from gitrepo import git, make_repo  # type: ignore[no-redef]

    repo = make_repo(tmp_path, [(f"c{i}", {"eng/model_runner.py": ENGINE + f"\n# {i}\n"}) for i in range(4)])
    for rev in ("HEAD~2", "HEAD"):
        tree = git(repo, "rev-parse", f"{rev}^{{tree}}").strip()
        (repo / ".git" / "objects" / tree[:2] / tree[2:]).unlink()

    def cs_audit(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cs_audit", *argv, "-j", "1"], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, env=_this_checkout(XDG_CACHE_HOME=str(tmp_path / "cache")))

    scan = cs_audit("scan", str(repo), "-f", "json")
    assert scan.returncode == 0 and "Traceback" not in scan.stderr, scan.stderr
    doc = json.loads(scan.stdout)
    assert [f["rule"] for f in doc["findings"]] == ["env-read-hot"]
    (switch,) = doc["switches"]
    assert switch["added_in"] is None and switch["added_in_note"].startswith("history skipped: the tree of HEAD (")
    assert "\n" not in switch["added_in_note"]

    report = cs_audit("report", str(repo), "--range", "HEAD~3..HEAD", "-o", str(tmp_path / "reports"))
    lines = report.stderr.splitlines()
    assert report.returncode == 2 and "Traceback" not in report.stderr, report.stderr
    assert [line.split(":")[0] for line in lines if "cannot read the commit" in line] == [
        f"[1/3] {git(repo, 'rev-parse', '--short=9', 'HEAD~2').strip()}", f"[3/3] {git(repo, 'rev-parse', '--short=9', 'HEAD').strip()}"]
    (written,) = (tmp_path / "reports").iterdir()  # the commit between them
    assert git(repo, "rev-parse", "--short=9", "HEAD~1").strip() in written.name and "ENG_TRACE" in written.read_text()

    diff = cs_audit("diff", "HEAD~2", "HEAD~1", str(repo))
    assert diff.returncode == 2 and diff.stderr.count("\n") == 1 and "cannot read a commit" in diff.stderr, diff.stderr

    (repo / "eng/model_runner.py").write_text(ENGINE + "\n# edited\n")
    check = cs_audit("check", str(repo), "--since", "HEAD~2", "-f", "json")
    assert check.returncode == 2 and check.stderr == "", check.stderr
    (why,) = json.loads(check.stdout)["check"]["incomplete"]
    assert why.startswith("--since HEAD~2: ") and "\n" not in why


def test_a_flipped_bit_in_a_stored_history_entry_is_a_miss(tmp_path: Path) -> None:
    from cs_audit.git.blame import _Blamed, _BlameStore
    from cs_audit.model import BlameInfo

    sha = "a" * 40
    blamed = _Blamed(BlameInfo(sha[:9], "2026-12-01", "add the switch", "dev"), sha, 1764547200)
    store = _BlameStore(tmp_path, "key1")
    store.save({("x.py", "b" * 40): {3: blamed, 4: None}})
    assert store.load()[("x.py", "b" * 40)][3].info.subject == "add the switch"
    data = bytearray(store.path.read_bytes())
    at = data.index(b"add the switch")
    data[at] ^= 0x01  # "add" -> "`dd": still valid JSON, other data
    store.path.write_bytes(bytes(data))
    assert store.load() == {}
    store.path.write_bytes(bytes(data[: len(data) // 2]))  # torn
    assert store.load() == {}
