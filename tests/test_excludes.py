"""``exclude`` globs (#44): one matcher compiled once, meaning exactly what matching every
glob with ``fnmatchcase`` on every path meant, at a cost that does not grow with the
number of globs."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from fnmatch import fnmatchcase
from pathlib import Path

from cs_audit.extract.excludes import ExcludeMatcher
from cs_audit.testing import write_tree

PROJECT = Path(__file__).resolve().parent.parent


def _excluded_by_any(path: str, globs: list[str]) -> bool:
    """What discovery asked before the matcher: every glob on the path, whole or as a folder."""
    return any(fnmatchcase(path, g) or fnmatchcase(path, g.rstrip("/") + "/*") for g in globs)


#: glob characters weighted so that wildcards, classes (closed or not, negated, ranges) and
#: folder separators all occur often, alone and together
_GLOB_CHARS = "aab/./*?*[]!-]"
_NAME_CHARS = "ab.-[]!*?"


def _random_glob(rng: random.Random) -> str:
    return "".join(rng.choice(_GLOB_CHARS) for _ in range(rng.randint(0, 9)))


def _random_path(rng: random.Random) -> str:
    folders = rng.randint(0, 3)
    return "/".join("".join(rng.choice(_NAME_CHARS) for _ in range(rng.randint(1, 4))) for _ in range(folders + 1))


def test_the_matcher_agrees_with_fnmatchcase_on_generated_globs_and_paths() -> None:
    rng = random.Random(44)
    disagreements = []
    for _ in range(300):
        globs = [_random_glob(rng) for _ in range(rng.randint(1, 40))]
        matcher = ExcludeMatcher(globs)
        for _ in range(60):
            path = _random_path(rng)
            if matcher.excludes(path) != _excluded_by_any(path, globs):
                disagreements.append((path, globs))
    assert disagreements == []


def test_each_generated_glob_alone_agrees_with_fnmatchcase() -> None:
    """One glob per matcher: a wrong bucket for a glob shape shows as that glob's error."""
    rng = random.Random(4404)
    paths = [_random_path(rng) for _ in range(200)]
    paths += ["a/b", "a/b/c", "a", "ab", "b/a", "a.b/a-b", "[a]/b", "a*b", "!a/?"]
    disagreements = []
    for _ in range(1500):
        glob = _random_glob(rng)
        matcher = ExcludeMatcher([glob])
        disagreements += [(glob, p) for p in paths if matcher.excludes(p) != _excluded_by_any(p, [glob])]
    assert disagreements == []


def test_many_globs_sharing_a_literal_start_or_end_are_all_tried() -> None:
    """More globs under one key than one compiled regex holds: the last ones still match."""
    starts = [f"src/m{i}?.py" for i in range(1000)]
    ends = [f"*/x{i}.py" for i in range(1000)]
    matcher = ExcludeMatcher(starts + ends)
    for path in ("src/m999a.py", "src/m0b.py", "a/x999.py", "a/b/x0.py", "src/m999a.py/in/it"):
        assert matcher.excludes(path), path
    for path in ("src/m5.py", "x999.py", "src/m1000ab.py"):
        assert not matcher.excludes(path), path


# -- through the command line: a huge list on a small tree


def _tree_of_47_files() -> dict[str, str]:
    """47 modules, each reading an env var of its own: the scan's switches name the files read."""
    paths = [f"keep/m{i}.py" for i in range(10)] + [f"gen/g{i}.py" for i in range(5)]
    paths += [f"vendor/lib/v{i}.py" for i in range(5)] + [f"proto/x{i}_pb2.py" for i in range(5)]
    paths += ["proto/y0.py", "proto/y1.py"] + [f"build_a/o{i}.py" for i in range(5)]
    paths += [f"src/skip_me/s{i}.py" for i in range(5)] + [f"src/t{i}.py" for i in range(5)] + ["src/one_off.py"]
    paths += [f"deep/a/b/c/d{i}.py" for i in range(4)]
    return {p: f"import os\nX = os.environ.get('F{n}_DEBUG')\n" for n, p in enumerate(paths)}


#: what excludes the files it should: a folder with a slash, a folder without, a literal end,
#: a literal start, neither, one file
_MEANT = ["gen/", "vendor", "*_pb2.py", "build_*/o*.py", "*/skip_me/*", "src/one_off.py"]


def _filler(count: int) -> list[str]:
    """Globs of every shape that match none of the tree's paths; some (``src/t1?.py``) share
    a literal start with a path, so their bucket is compiled and tried."""
    shapes = [
        lambda i: f"z{i}/*.py",
        lambda i: f"*/z{i}.py",
        lambda i: f"keep/m{i}.pyc",
        lambda i: f"src/t{i}?.py",
        lambda i: f"deep/a/b{i}/",
        lambda i: f"[!a-z]z{i}",
    ]
    globs = [shapes[i % len(shapes)](i) for i in range(count)]
    return globs + [f"*z{i}*" for i in range(count // 200)]  # a few with no literal start or end


def test_sixty_thousand_excludes_on_47_files_finish_and_exclude_what_they_should(tmp_path: Path) -> None:
    files = _tree_of_47_files()
    globs = _filler(60_000 - len(_MEANT)) + _MEANT
    assert len(globs) >= 60_000
    tree = write_tree(tmp_path / "tree", {**files, "pyproject.toml": "[tool.cs-audit]\nexclude = " + json.dumps(globs, separators=(",", ":")) + "\n"})
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(PROJECT), os.environ.get("PYTHONPATH", "")) if p)}
    # matching every glob against every path took minutes on this tree
    proc = subprocess.run([sys.executable, "-m", "cs_audit", "scan", str(tree), "-f", "json", "--no-history", "--no-cache",
                           "-j", "1"], capture_output=True, text=True, timeout=120, env=environ)
    assert proc.returncode == 0, proc.stderr
    scanned = {read["path"] for switch in json.loads(proc.stdout)["switches"] for read in switch["reads"]}
    assert scanned == {p for p in files if not _excluded_by_any(p, _MEANT)}
    assert len(scanned) == 21
