"""`cs-audit report --rev/--range` and `cs-audit diff`: audits of past commits read from
git objects, with the work tree and the index left exactly as they were.

Golden files: fixtures/snapshots/history_rev.md and history_diff.md (regenerate with
`pytest --update-snapshots`, then read the diff).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cs_audit.cli  # noqa: F401  (registers every command)
from cs_audit.ci.gate import match_findings
from cs_audit.ci.revisions import TreeAuditor
from cs_audit.cli import app
from cs_audit.git.repo import GitRepo
from cs_audit.render.diff import render_diff
from cs_audit.render.json import render_json
from cs_audit.render.markdown import render_markdown
from tests.gitrepo import HOT_ENGINE, git, make_repo

runner = CliRunner()
SNAPSHOTS = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"

V0 = HOT_ENGINE
V1 = V0.replace("        out = self.forward(batch)\n",
                "        out = self.forward(batch)\n        logger.info(f\"step {batch} done\")\n")
V2 = V1.replace(
    '_TRACE = os.environ.get("ENGINE_TRACE", "0") == "1"\n',
    '_TRACE = os.environ.get("ENGINE_TRACE", "0") == "1"\n_KV = os.environ.get("KV_DEBUG") == "1"\n',
).replace("        return out\n\n", "        if _KV:\n            logger.info(\"kv %s\", out.sum().item())\n        return out\n\n", 1)
# V2 with the two methods swapped: only moved
_HEAD, _, _BODY = V2.partition("class Runner:\n")
_EXEC, _, _FWD = _BODY.partition("\n    def forward")
V4 = _HEAD + "class Runner:\n    def forward" + _FWD + "\n" + _EXEC.rstrip("\n") + "\n"
# the step log and KV_DEBUG gone again
V5 = V4.replace('        logger.info(f"step {batch} done")\n', "").replace(
    '_KV = os.environ.get("KV_DEBUG") == "1"\n', "").replace(
    "        if _KV:\n            logger.info(\"kv %s\", out.sum().item())\n", "")
#: it names a device API, so the package's `.item()` calls are syncs (rules/gpu_syncs.yaml `device_apis`)
UTIL = "import torch\n\n\ndef helper():\n    return torch.cuda.device_count()\n"
RUN_SH = "#!/bin/sh\nexport ENGINE_TRACE=1\nexec python -m engine\n"
DECISIONS = "ENGINE_TRACE:\n  disposition: KEEP\n  reason: on-call tracing needs it\n"

COMMITS = [
    ("init", {"engine/__init__.py": "", "engine/runner.py": V0, "scripts/run.sh": RUN_SH, "README.md": "demo\n"}),
    ("add step log", {"engine/runner.py": V1}),
    ("add KV_DEBUG dump log", {"engine/runner.py": V2, "engine/util.py": UTIL}),
    ("decide ENGINE_TRACE", {"cs-audit.decisions.yaml": DECISIONS}),
    ("swap methods", {"engine/runner.py": V4}),
    ("drop step log and KV_DEBUG", {"engine/runner.py": V5}),
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path, COMMITS)


def _compare(name: str, actual: str, update: bool) -> None:
    path = SNAPSHOTS / name
    if update or not path.exists():
        path.write_text(actual, encoding="utf-8")
        if not update:
            pytest.fail(f"snapshot {name} was missing and has been written; rerun")
    assert actual == path.read_text(encoding="utf-8"), f"{name} differs; run pytest --update-snapshots and review"


def _state(repo: Path) -> dict[str, object]:
    """Everything a read-only command must leave alone."""
    index = repo / ".git" / "index"
    index_bytes, index_mtime = index.read_bytes(), index.stat().st_mtime_ns
    files = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath) / name
            st = p.stat()
            files[str(p.relative_to(repo))] = (p.read_bytes(), st.st_mtime_ns)
    # GIT_OPTIONAL_LOCKS=0: the test's own `git status` must not refresh the index either
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, env=env,
                            capture_output=True, text=True, check=True).stdout
    refs = subprocess.run(["git", "for-each-ref"], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout
    return {"index": index_bytes, "index_mtime": index_mtime, "files": files,
            "status": status, "refs": refs, "HEAD": (repo / ".git/HEAD").read_bytes()}


def test_report_rev_leaves_the_repository_untouched_and_matches_the_golden(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, update_snapshots: bool) -> None:
    before = _state(repo)
    assert before["status"] == ""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = runner.invoke(app, ["report", str(repo), "--rev", "HEAD~3", "-j", "1"])
    assert result.exit_code == 0, result.output
    # default output: reports/<date>_<short-sha>.md under the current directory
    sha = git(repo, "rev-parse", "HEAD~3").strip()
    written = work / "reports" / f"2026-01-03_{sha[:9]}.md"
    assert written.is_file(), sorted(p.name for p in (work / "reports").iterdir())
    after = _state(repo)
    assert after == before  # git status clean, .git/index bytes and mtime, every file, refs, HEAD
    text = written.read_text(encoding="utf-8")
    assert f"- Commit: `{sha[:12]}`" in text
    _compare("history_rev.md", text, update_snapshots)


def test_report_rev_reads_the_commit_not_the_work_tree(repo: Path, tmp_path: Path) -> None:
    # uncommitted edits and an untracked file must neither be read nor changed
    (repo / "engine/runner.py").write_text(V2, encoding="utf-8")
    (repo / "engine/untracked.py").write_text(V2, encoding="utf-8")
    before = _state(repo)
    out = tmp_path / "head.md"
    result = runner.invoke(app, ["report", str(repo), "--rev", "HEAD", "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    assert _state(repo) == before
    text = out.read_text()
    assert "KV_DEBUG" not in text and "untracked.py" not in text  # HEAD has neither
    scan = runner.invoke(app, ["scan", str(repo), "--format", "markdown", "-o", str(tmp_path / "wt.md"), "-j", "1"])
    assert scan.exit_code == 0
    assert "KV_DEBUG" in (tmp_path / "wt.md").read_text()


def test_report_range_over_five_commits(repo: Path, tmp_path: Path) -> None:
    before = _state(repo)
    out = tmp_path / "out"
    result = runner.invoke(app, ["report", str(repo), "--range", "HEAD~5..HEAD", "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    assert _state(repo) == before
    shas = git(repo, "rev-list", "--reverse", "HEAD~5..HEAD").split()
    assert len(shas) == 5
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"2026-01-{day:02d}_{sha[:9]}.md" for day, sha in zip(range(2, 7), shas)]
    # progress: one line per commit, then the totals
    lines = result.stderr.strip().splitlines()
    assert [line.split()[0] for line in lines[:5]] == [f"[{i}/5]" for i in range(1, 6)]
    assert "5 commits in" in lines[-1] and "reused" in lines[-1]
    assert re.search(r"; joins reused for [0-4] commits(, whole results from the cache for [1-5] commits?)?$", lines[-1]), lines[-1]
    # each report is exactly what --rev writes for that commit
    for sha in (shas[0], shas[2], shas[4]):
        single = tmp_path / f"{sha}.md"
        assert runner.invoke(app, ["report", str(repo), "--rev", sha, "-o", str(single), "-j", "1"]).exit_code == 0
        match = next(out.glob(f"*_{sha[:9]}.md"))
        assert match.read_text() == single.read_text(), sha


def test_report_range_timing_adds_up(repo: Path, tmp_path: Path) -> None:
    """The summary's parts are the commit lines' times and the rest, and they sum to its total."""
    result = runner.invoke(app, ["report", str(repo), "--range", "HEAD~3..HEAD", "-o", str(tmp_path / "out"), "-j", "1"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    each = [round(float(re.search(r" (\d+\.\d\d)s ", line).group(1)) * 100) for line in lines[:3]]  # type: ignore[union-attr]
    summary = re.match(r"cs-audit: 3 commits in (\d+\.\d\d)s: the first (\d+\.\d\d)s, the other 2 (\d+\.\d\d)s "
                       r"\((\d+\.\d\d)s each\), (\d+\.\d\d)s setting up and cleaning up; ", lines[-1])
    assert summary, lines[-1]
    total, first, others, mean, rest = (round(float(x) * 100) for x in summary.groups())
    assert (first, others, abs(mean * 2 - others) <= 1) == (each[0], each[1] + each[2], True)
    assert total == first + others + rest


def test_range_reuses_facts_of_unchanged_blobs(repo: Path) -> None:
    git_repo = GitRepo.open(repo)
    shas = git_repo.rev_range("HEAD~5..HEAD")
    reference = []
    # no disk cache: what is counted is the reuse across the commits of one auditor
    with TreeAuditor(git_repo, str(repo), reuse=False, jobs=1, cache=False) as fresh:
        for sha in shas:
            reference.append(render_markdown(fresh.audit(sha), fresh.last_rs))
        assert fresh.stats.reused == 0
    with TreeAuditor(git_repo, str(repo), reuse=True, jobs=1, cache=False) as cached:
        got = [render_markdown(cached.audit(sha), cached.last_rs) for sha in shas]
        stats = cached.stats
    assert got == reference
    # the range starts at "add step log": 3 analysable files (engine/__init__.py, engine/runner.py,
    # scripts/run.sh; README.md is not read); then only what a commit added or changed is parsed:
    # engine/util.py once, engine/runner.py in the 3 commits that touch it.  5 commits hold 19 files.
    touched = [git(repo, "diff", "--name-only", a, b, "--", "engine/runner.py").strip() for a, b in zip(shas, shas[1:])]
    assert touched == ["engine/runner.py", "", "engine/runner.py", "engine/runner.py"]
    assert (stats.commits, stats.analysed, stats.reused) == (5, 3 + 1 + 3, 19 - 7)


def test_range_takes_call_resolutions_from_its_memo_and_writes_no_record(repo: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # with the disk cache on: the temporary root of a range is new each run, so a record of it
    # would never be read again; the memo's last joins give the resolutions instead
    git_repo = GitRepo.open(repo)
    shas = git_repo.rev_range("HEAD~5..HEAD")
    cache_root = tmp_path / "cache"
    with TreeAuditor(git_repo, str(repo), reuse=True, jobs=1, cache=True, cache_dir=str(cache_root)) as cached:
        got = []
        per_commit = []
        for sha in shas:
            result = cached.audit(sha)
            got.append(render_markdown(result, cached.last_rs))
            per_commit.append(list(result.stats.resolved))
    with TreeAuditor(git_repo, str(repo), reuse=False, jobs=1, cache=False) as fresh:
        reference = [render_markdown(fresh.audit(sha), fresh.last_rs) for sha in shas]
    assert got == reference
    assert not list(cache_root.rglob("resolutions/*"))
    # every file where the resolution tables changed (a file added, functions added or renamed),
    # nothing where the joins were reused whole, and else only the changed file (the last commit)
    assert per_commit == [
        ["engine/__init__.py", "engine/runner.py"],
        ["engine/__init__.py", "engine/runner.py", "engine/util.py"],
        [],
        ["engine/__init__.py", "engine/runner.py", "engine/util.py"],
        ["engine/runner.py"],
    ]


def test_range_reuses_the_joins_when_the_python_facts_did_not_change(tmp_path: Path) -> None:
    # commits that touch only a runner script, a README or nothing the scan reads leave the
    # Python facts as they were: the model, findings and duplicate groups are reused, while
    # setters and switches follow the script
    commits = [
        ("init", {"engine/__init__.py": "", "engine/runner.py": V0, "scripts/run.sh": RUN_SH}),
        ("docs", {"README.md": "demo\n"}),
        ("runner sets KV_DEBUG", {"scripts/run.sh": RUN_SH.replace("exec", "export KV_DEBUG=1\nexec")}),
        ("add step log", {"engine/runner.py": V1}),
        ("runner drops ENGINE_TRACE", {"scripts/run.sh": "#!/bin/sh\nexec python -m engine\n"}),
        ("decide ENGINE_TRACE", {"cs-audit.decisions.yaml": DECISIONS}),
    ]
    root = make_repo(tmp_path, commits)
    git_repo = GitRepo.open(root)
    shas = [git_repo.verify("HEAD~5"), *git_repo.rev_range("HEAD~5..HEAD")]
    with TreeAuditor(git_repo, str(root), reuse=False, jobs=1, cache=False) as fresh:
        reference = [fresh.audit(sha) for sha in shas]
        assert fresh.stats.joins_reused == 0
    with TreeAuditor(git_repo, str(root), reuse=True, jobs=1, cache=False) as cached:
        got = [cached.audit(sha) for sha in shas]
        stats = cached.stats
    assert [render_json(r) for r in got] == [render_json(r) for r in reference]
    # reused for "docs", "runner sets KV_DEBUG", "runner drops ENGINE_TRACE", "decide ENGINE_TRACE"
    assert stats.joins_reused == 4
    setters = [{s.name: len(s.setters) for s in r.switches} for r in got]
    assert setters == [{"ENGINE_TRACE": 1}] * 4 + [{"ENGINE_TRACE": 0}] * 2
    assert got[-1].overridden == ("ENGINE_TRACE",) and got[-2].overridden == ()
    # a rule set with other hot roots is not served the joins of the shipped one
    from cs_audit.ruleset import load_ruleset

    shipped = load_ruleset()
    other = shipped.with_extra_roots([{"name": "forward", "class": "Runner", "frequency": "step"}])
    with TreeAuditor(git_repo, str(root), reuse=True, jobs=1, cache=False) as auditor:
        plain = auditor.audit(shas[-1], shipped)
        hot = auditor.audit(shas[-1], other)
        assert auditor.stats.joins_reused == 0
    with TreeAuditor(git_repo, str(root), reuse=False, jobs=1, cache=False) as auditor:
        assert render_json(auditor.audit(shas[-1], other)) == render_json(hot)
    assert render_json(plain) == render_json(got[-1])


def test_the_tree_on_disk_follows_each_commit(tmp_path: Path) -> None:
    # after the first commit the directory is updated from `git diff-tree`: added, deleted,
    # renamed, retyped (file <-> symlink) and mode-changed paths, in any order of commits
    root = make_repo(tmp_path, [
        ("init", {"a.py": "A = 1\n", "d/b.py": "B = 1\n", "d/e/c.sh": "export X=1\n", "keep.txt": "k\n"}),
        ("edit and add", {"a.py": "A = 2\n", "d/new.py": "N = 1\n"}),
        ("delete a whole directory", {"d/e/c.sh": None}),
        ("rename", {"d/b.py": None, "d/renamed.py": "B = 1\n"}),
    ])
    os.remove(root / "keep.txt")
    os.symlink("a.py", root / "keep.txt")
    os.chmod(root / "a.py", 0o755)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "retype and chmod")
    git_repo = GitRepo.open(root)
    shas = git(root, "rev-list", "--reverse", "HEAD").split()

    def on_disk(directory: Path) -> dict[str, str]:
        out = {}
        for dirpath, _, filenames in os.walk(directory):
            for name in filenames:
                p = Path(dirpath) / name
                rel = p.relative_to(directory).as_posix()
                out[rel] = "-> " + os.readlink(p) if p.is_symlink() else p.read_text()
        return out

    def expected(sha: str) -> dict[str, str]:
        names = git(root, "ls-tree", "-r", "--name-only", sha).split("\n")
        out = {}
        for name in filter(None, names):
            mode = git(root, "ls-tree", sha, "--", name).split()[0]
            body = git(root, "show", f"{sha}:{name}")
            out[name] = "-> " + body if mode == "120000" else body
        return out

    order = [*shas, shas[0], shas[3], shas[1], shas[-1]]
    with TreeAuditor(git_repo, str(root), jobs=1, cache=False) as auditor:
        for sha in order:
            auditor.audit(sha)
            assert on_disk(auditor.root) == expected(sha), sha
            # no directory left behind by deleted files
            for dirpath, dirnames, filenames in os.walk(auditor.root):
                assert dirnames or filenames, dirpath


def test_diff_between_two_commits(repo: Path, tmp_path: Path, update_snapshots: bool) -> None:
    before = _state(repo)
    out = tmp_path / "diff.md"
    result = runner.invoke(app, ["diff", "HEAD~5", "HEAD~2", str(repo), "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "| `KV_DEBUG` |" in text.split("## Switches added")[1].split("## Switches removed")[0]
    changed = text.split("## Dispositions changed")[1].split("## New findings")[0]
    assert "`ENGINE_TRACE`" in changed and "KEEP" in changed
    new = text.split("## New findings")[1].split("## Fixed findings")[0]
    assert "`default-on-emitter` | `engine/runner.py:12`" in new
    # each new finding says whether a switch gates it, how often it runs and what it costs a step
    assert "| switch | freq | µs/step |" in new
    log_row = next(line for line in new.splitlines() if "`default-on-emitter`" in line)
    assert re.search(r"\| ungated \| step \| [0-9.]+ \|", log_row), log_row
    sync_row = next(line for line in new.splitlines() if "`sync-in-debug`" in line)
    assert re.search(r"\| `KV_DEBUG` \| step \| [0-9.]+ when on \|", sync_row), sync_row
    _compare("history_diff.md", text, update_snapshots)
    # moving code is neither new nor fixed; dropping it is fixed; a removed switch is listed
    back = runner.invoke(app, ["diff", "HEAD~2", "HEAD", str(repo), "-j", "1"])
    assert back.exit_code == 0
    assert "- Findings: 0 new," in back.stdout
    removed = back.stdout.split("## Switches removed")[1].split("## Dispositions changed")[0]
    assert "`KV_DEBUG`" in removed
    fixed = back.stdout.split("## Fixed findings")[1]
    assert "`default-on-emitter` | `engine/runner.py:12`" in fixed
    moves = runner.invoke(app, ["diff", "HEAD~2", "HEAD~1", str(repo), "-j", "1"])
    assert "- Findings: 0 new, 0 fixed," in moves.stdout
    assert _state(repo) == before


def test_render_diff_is_pure(repo: Path) -> None:
    git_repo = GitRepo.open(repo)
    a, b = git_repo.verify("HEAD~5"), git_repo.verify("HEAD~4")
    with TreeAuditor(git_repo, "repo", jobs=1) as auditor:
        ra, rb = auditor.audit(a), auditor.audit(b)
    changes = match_findings(list(rb.findings), list(ra.findings))
    one = render_diff(ra, rb, git_repo.commit_info(a), git_repo.commit_info(b), *changes)
    two = render_diff(ra, rb, git_repo.commit_info(a), git_repo.commit_info(b), *changes)
    assert one == two and "2 new" in one


def test_report_on_a_subdirectory_and_bad_revisions(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "sub.md"
    result = runner.invoke(app, ["report", str(repo / "engine"), "--rev", "HEAD~4", "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "# cs-audit: engine" in text and "`runner.py:" in text and "run.sh" not in text
    bad = runner.invoke(app, ["report", str(repo), "--rev", "nope"])
    assert bad.exit_code == 2 and bad.stderr == "cs-audit: unknown revision 'nope'\n"
    assert runner.invoke(app, ["report", str(repo), "--range", "HEAD~1"]).exit_code == 2
    assert runner.invoke(app, ["report", str(repo)]).exit_code == 2
    assert runner.invoke(app, ["report", str(repo), "--rev", "HEAD", "--range", "HEAD~1..HEAD"]).exit_code == 2
    assert runner.invoke(app, ["report", str(repo), "--rev", "--upload-pack=x"]).exit_code == 2
    assert runner.invoke(app, ["diff", "HEAD", "nope", str(repo)]).exit_code == 2
    outside = tmp_path / "plain"
    outside.mkdir()
    assert runner.invoke(app, ["report", str(outside), "--rev", "HEAD"]).exit_code == 2


def test_hostile_tree_paths_are_not_written_outside(tmp_path: Path) -> None:
    from cs_audit.git.repo import safe_parts as _safe_parts

    assert _safe_parts("a/b.py") == ["a", "b.py"]
    for bad in ("../x.py", "a/../../x.py", "/abs.py", "a//b.py", ".git/config", "a/.GIT/hooks/x", "./a.py"):
        assert _safe_parts(bad) is None, bad
    # a symlink in the tree is recreated as a link (never followed), and reported as skipped
    repo = make_repo(tmp_path, [("init", {"engine/runner.py": V1})])
    os.symlink("/etc/passwd", repo / "engine/passwd.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "link")
    out = tmp_path / "r.md"
    result = runner.invoke(app, ["report", str(repo), "--rev", "HEAD", "-o", str(out), "-j", "1"])
    assert result.exit_code == 0, result.output
    assert "engine/passwd.py" in out.read_text() and "root:" not in out.read_text()


def test_report_from_a_bare_mirror(repo: Path, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(mirror))
    out, ref = tmp_path / "bare.md", tmp_path / "work.md"
    assert runner.invoke(app, ["report", str(mirror), "--rev", "HEAD~3", "-o", str(out), "-j", "1"]).exit_code == 0
    assert runner.invoke(app, ["report", str(repo), "--rev", "HEAD~3", "-o", str(ref), "-j", "1"]).exit_code == 0
    assert out.read_text().replace("# cs-audit: mirror.git", "# cs-audit: repo") == ref.read_text()
    result = runner.invoke(app, ["check", str(mirror), "--since", "HEAD~1", "-j", "1"])
    assert result.exit_code == 2 and "bare repository" in result.stderr


def test_head_commit_without_history(tmp_path: Path) -> None:
    # `--no-history` still names the commit: one `git rev-parse`, no GitPython
    from cs_audit.extract.discover import git_head

    root = make_repo(tmp_path, [("init", {"pkg/a.py": "import os\nX = os.getenv('A')\n"})])
    head = git(root, "rev-parse", "HEAD").strip()
    assert git_head(root) == head and git_head(root / "pkg") == head
    assert git_head(root / "pkg" / "a.py") is None  # a file, not a directory
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_head(plain) is None  # not a git work tree
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert git_head(empty) is None  # no commit yet
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(root), str(bare))
    assert git_head(bare) is None  # no work tree
