"""The "added in" of each switch across the repositories of a fork (tests/forkrepo.py):
sub-repositories found and dated by their own history, and the first commit that reads a
switch preferred to the blame of today's read line."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cs_audit.api import run_audit
from cs_audit.config import load_config
from cs_audit.extract.reads import names_read
from cs_audit.render.json import render_json
from tests.forkrepo import EXPECTED, expected_sha, make_fork
from tests.gitrepo import git


@pytest.fixture(scope="module")
def fork(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fork(tmp_path_factory.mktemp("fork"))


def _report(root: Path, cache_dir: Path | None = None, history: bool = True) -> dict:
    config = load_config(str(root), jobs=1, history=history)
    config = replace(config, cache=cache_dir is not None, cache_dir=str(cache_dir) if cache_dir else None)
    return json.loads(render_json(run_audit(config)))


def test_sub_repositories_are_listed_with_their_own_files(fork: Path) -> None:
    report = _report(fork, history=False)
    paths = {r["path"] for s in report["switches"] for r in s["reads"]}
    assert {"cpu/verify.py", "third/kernels/kern.py", "engine/core.py"} <= paths
    repos = {r["path"]: r["commit"] for r in report["repositories"]}
    assert list(repos) == [".", "cpu", "third/kernels"]
    assert repos["cpu"] == git(fork / "cpu", "rev-parse", "HEAD").strip()
    assert repos["third/kernels"] == git(fork / "third/kernels", "rev-parse", "HEAD").strip()
    assert [(e["path"], e["kind"]) for e in report["errors"]] == [("third/unused", "submodule")]
    # a switch no history was asked for says so
    assert {s["added_in_note"] for s in report["switches"]} == {"history skipped (--no-history)"}


def test_added_in_is_the_first_commit_that_reads_each_switch(fork: Path, tmp_path: Path) -> None:
    report = _report(fork, tmp_path / "cache")
    got = {s["name"]: s["added_in"] for s in report["switches"]}
    for name in EXPECTED:
        sha, repo = expected_sha(fork, name)
        assert got[name] is not None, name
        assert (got[name]["commit"], got[name].get("repository", "")) == (sha, repo), name
    # stored on disk: a second scan asks git for no history pass and says the same
    again = _report(fork, tmp_path / "cache")
    assert {s["name"]: s["added_in"] for s in again["switches"]} == got


def test_blame_would_have_dated_the_rewrites(fork: Path) -> None:
    # what the pass corrects: today's read lines blame to the rewrite and the reformat
    blamed = git(fork, "blame", "-s", "-L", "/getenv/,+1", "HEAD", "--", "engine/core.py").split()[0]
    assert blamed.lstrip("^")[:7] != expected_sha(fork, "TRACE_STEPS")[0][:7]


def test_reads_tell_a_read_from_a_mention() -> None:
    source = b'''"""X_DOC is documented here."""
import os
# X_COMMENT in a comment
print("set X_MSG=1")
os.environ["X_SET"] = "1"
env = {"X_CHILD": "1"}
a = os.getenv("X_GET")
b = os.environ["X_ITEM"]
c = "X_IN" in os.environ
d = {"X_REG": lambda: os.getenv("X_REG2")}
e = envs.X_ATTR
class Envs:
    X_FIELD = EnvBool(False)
'''
    read = names_read(source)
    assert read is not None
    assert {"X_GET", "X_ITEM", "X_IN", "X_REG", "X_REG2", "X_ATTR", "X_FIELD"} <= read
    assert not {"X_DOC", "X_COMMENT", "X_MSG", "X_SET", "X_CHILD"} & read
    assert names_read(b"def broken(:\n") is None


def test_report_of_past_commits_dates_switches_and_names_submodules(fork: Path, tmp_path: Path) -> None:
    from cs_audit.ci.revisions import TreeAuditor
    from cs_audit.git.repo import GitRepo

    repo = GitRepo.open(fork)
    commits = repo.rev_range("HEAD~3..HEAD")
    with TreeAuditor(repo, str(fork), reuse=True, jobs=1) as auditor:
        results = [auditor.audit(sha) for sha in commits]
    last = {s.name: s.added_in for s in results[-1].switches}
    assert last["TRACE_STEPS"] is not None and last["TRACE_STEPS"].commit == expected_sha(fork, "TRACE_STEPS")[0]
    assert last["KV_DUMP_DIR"] is not None and last["KV_DUMP_DIR"].commit == expected_sha(fork, "KV_DUMP_DIR")[0]
    # the commit that added the submodules says they were not audited
    assert {(e.path, e.kind) for e in results[-1].errors} == {("third/kernels", "submodule"), ("third/unused", "submodule")}
    assert not [e for e in results[0].errors if e.kind == "submodule"]


def test_check_since_compares_each_sub_repository_on_its_own(tmp_path: Path) -> None:
    from cs_audit.ci.gate import sub_repository_changes
    from cs_audit.git.repo import GitRepo
    from tests.gitrepo import commit_files

    fork = make_fork(tmp_path)
    since = git(fork, "rev-parse", "HEAD").strip()
    # the nested repository changes in its work tree; the submodule moves on a commit
    (fork / "cpu/verify.py").write_text((fork / "cpu/verify.py").read_text() + "X = 1\n")
    commit_files(fork / "third/kernels", "kernels: more", {"kern.py": (fork / "third/kernels/kern.py").read_text() + "Y = 2\n"},
                 day=11)
    report = _report(fork, history=False)
    changed, notes = sub_repository_changes(GitRepo.open(fork), since, fork,
                                            [(r["path"], r["commit"]) for r in report["repositories"]])
    assert changed["cpu/verify.py"] == {8}
    assert changed["third/kernels/kern.py"] == {8}
    said = {n.path: n.message for n in notes}
    assert "compared with its own HEAD" in said["cpu"]
    assert "pins it at" in said["third/kernels"]
