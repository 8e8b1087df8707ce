"""The same tree gives byte-identical JSON and markdown, however it is scanned.

Across: two runs, ``-j1``/``-j2``/``-j4`` (the process pool forced on), ``PYTHONHASHSEED`` 0 vs 1
(fresh interpreters), a copy of the tree written in the opposite order (files and directories
created in reverse, so directory listing order differs), and a relative vs an absolute root.

The tree is a git repository with a fixed identity and dates (``tests/gitrepo.py``), so the
history columns are covered too.  It mixes the bundled fixture trees with files that fail in
every way a file can fail (a libcst SIGSEGV, ast RecursionError, syntax, encoding, binary,
symlink) and hostile file names, so failure verdicts must be stable as well.

The JSON ``root`` field is, by contract, "the scanned path as given", so the relative-vs-absolute
comparison replaces that one field before comparing; everything else must match byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cs_audit import api
from cs_audit.api import run_audit
from cs_audit.config import AuditConfig, load_config
from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset
from tests.gitrepo import START, git

#: every file parsed for real, never served from a facts cache (where the engine has one)
NO_CACHE = {"cache": False} if "cache" in AuditConfig.__dataclass_fields__ else {}
PROJECT = Path(__file__).resolve().parent.parent
FIXTURES = PROJECT / "fixtures"


def _files() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for tree in ("compressspec", "sglang_trace"):
        for path in sorted((FIXTURES / tree).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                files[f"{tree}/{path.relative_to(FIXTURES / tree).as_posix()}"] = path.read_bytes()
    engine = (
        "import logging, os\nlogger = logging.getLogger(__name__)\n\n"
        "class Runner{i}:\n    def execute_model(self, batch):\n"
        "        logger.info(f\"step {{batch}} {i}\")\n        return os.environ.get(\"DBG_{j}\")\n"
    )
    for i in range(40):  # enough files for the pool to use every worker
        files[f"gen/m{i:02d}.py"] = engine.format(i=i, j=i % 5).encode()
    files["bad/crash.py"] = (FIXTURES / "hostile" / "and_chain_10000.py").read_bytes()
    files["bad/deep.py"] = (FIXTURES / "hostile" / "concat_7000.py").read_bytes()
    files["bad/syntax.py"] = b"def f(:\n"
    files["bad/latin.py"] = b"x = 'caf\xe9'\n"
    files["bad/blob.py"] = b"\0\1\2"
    for name in ("with space.py", "pipe|name.py", "back`tick.py", "new\nline.py", "bidi\u202e.py"):
        files[f"names/{name}"] = files["gen/m00.py"]
    return files


def _write(root: Path, files: dict[str, bytes], reverse: bool = False) -> Path:
    for rel in sorted(files, reverse=reverse):
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(files[rel])
    with open(os.path.join(os.fsencode(root / "names"), b"caf\xe9.py"), "wb") as handle:  # not UTF-8
        handle.write(files["gen/m00.py"])
    (root / "names" / "loop").symlink_to(".")
    git(root, "init", "-q")
    git(root, "add", "-A", when=START)
    git(root, "commit", "-qm", "tree", when=START)
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("det") / "tree", _files())


def _outputs(root: str, jobs: int) -> tuple[str, str]:
    rs = load_ruleset()
    result = run_audit(load_config(root, jobs=jobs, **NO_CACHE), rs)
    return render_json(result), render_markdown(result, rs)


def _normalised(text: str, root: str) -> str:
    """The JSON with its ``root`` field (the path as given) blanked."""
    data = json.loads(text)
    assert data["root"] == root
    data["root"] = "<root>"
    return json.dumps(data, indent=2, ensure_ascii=False)


@pytest.fixture(scope="module")
def reference(tree: Path) -> tuple[str, str]:
    mp = pytest.MonkeyPatch()
    mp.setattr(api, "POOL_MIN_FILES", 0)
    try:
        return _outputs(str(tree), jobs=2)
    finally:
        mp.undo()


def test_the_reference_scan_saw_everything(reference: tuple[str, str]) -> None:
    report = json.loads(reference[0])
    kinds = {e["path"]: e["kind"] for e in report["errors"]}
    assert kinds == {
        "bad/blob.py": "binary", "bad/crash.py": "parser-crash", "bad/deep.py": "parser-crash",
        "bad/latin.py": "encoding", "bad/syntax.py": "syntax", "names/loop": "symlink",
    }
    assert report["commit"] is not None
    paths = {f["path"] for f in report["findings"]}
    assert {"names/with space.py", "names/new\nline.py", "names/caf\\xe9.py", "gen/m39.py"} <= paths


@pytest.mark.parametrize("jobs", [1, 2, 4])
def test_identical_for_any_worker_count_and_run(tree: Path, reference: tuple[str, str], jobs: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "POOL_MIN_FILES", 0)
    assert _outputs(str(tree), jobs) == reference


def test_identical_for_a_copy_written_in_the_opposite_order(tmp_path: Path, reference: tuple[str, str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    copy = _write(tmp_path / "tree", _files(), reverse=True)
    monkeypatch.setattr(api, "POOL_MIN_FILES", 0)
    out_json, out_md = _outputs(str(copy), jobs=2)
    assert _normalised(out_json, str(copy)) == _normalised(reference[0], _root_of(reference))
    assert out_md == reference[1]


def _root_of(reference: tuple[str, str]) -> str:
    return json.loads(reference[0])["root"]


def test_identical_for_a_relative_and_an_absolute_root(tree: Path, reference: tuple[str, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree.parent)
    monkeypatch.setattr(api, "POOL_MIN_FILES", 0)
    out_json, out_md = _outputs("tree", jobs=2)
    assert _normalised(out_json, "tree") == _normalised(reference[0], str(tree))
    assert out_md == reference[1]


_SCRIPT = """
import sys
from cs_audit.api import run_audit
from cs_audit.config import AuditConfig, load_config
from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from cs_audit.ruleset import load_ruleset
rs = load_ruleset()
no_cache = {"cache": False} if "cache" in AuditConfig.__dataclass_fields__ else {}
result = run_audit(load_config(sys.argv[1], jobs=2, **no_cache), rs)
sys.stdout.buffer.write((render_json(result) + "\\f" + render_markdown(result, rs)).encode("utf-8"))
"""


def test_identical_across_hash_seeds(tree: Path, reference: tuple[str, str]) -> None:
    outputs = []
    for seed in ("0", "1"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tree)], capture_output=True, env=env, timeout=600,
                              cwd=PROJECT, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    text = outputs[0].decode("utf-8")
    assert text == reference[0] + "\f" + reference[1]


def test_no_timestamps_durations_or_absolute_paths_in_default_outputs(tree: Path, reference: tuple[str, str]) -> None:
    json_text, markdown = reference
    assert str(tree) not in json_text.replace(f'"root": {json.dumps(str(tree))}', "") and str(tree) not in markdown
    assert str(tree.parent) not in json_text.replace(f'"root": {json.dumps(str(tree))}', "")
