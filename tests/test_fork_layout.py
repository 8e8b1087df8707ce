"""A fork laid out as the CompressSpec team's (#43, tests/forkrepo.py ``make_compressspec``):
an outer repository whose ``.gitignore`` lists the engine's checkout ``vllm/``, a repository
of upstream then fork commits, and ``vllm_cpu/``, a submodule."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.forkrepo import make_compressspec
from tests.gitrepo import git
from tests.test_cli_like_ruff import cs_audit


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_compressspec(tmp_path_factory.mktemp("compressspec"))


def _scan(root: Path, *args: str, cwd: Path | None = None) -> dict:
    proc = cs_audit("scan", str(root), "--no-history", "-j", "1", "-f", "json", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_an_engine_checkout_the_outer_gitignore_lists_is_scanned_and_said(ws: Path, tmp_path: Path) -> None:
    (ws / "build").mkdir(exist_ok=True)
    (ws / "build" / "copy.py").write_text("X = 1\n")
    (ws / ".git" / "info" / "exclude").write_text("build/\n")
    try:
        report = _scan(ws)
    finally:
        (ws / ".git" / "info" / "exclude").write_text("")
        (ws / "build" / "copy.py").unlink()
        (ws / "build").rmdir()
    paths = {f["path"] for f in report["findings"]}
    assert "vllm/vllm/worker/runner.py" in paths
    assert [r["path"] for r in report["repositories"]] == [".", "vllm", "vllm_cpu"]
    notes = {n["path"]: n["message"] for n in report["notes"] if n["id"] == "ignored-folder"}
    assert "scanned" in notes["vllm"] and "not scanned" not in notes["vllm"]
    assert "not scanned (1 Python file" in notes["build"]
    assert report["errors"] == []


def test_check_since_head_in_the_outer_repository_fails_a_new_emitter_in_the_engine(ws: Path) -> None:
    runner = ws / "vllm" / "vllm" / "worker" / "runner.py"
    before = runner.read_text()
    runner.write_text(before.replace("        return batch\n\n    def check",
                                     "        logger.warning(f\"[CS] forward {batch}\")\n        return batch\n\n    def check", 1))
    try:
        # from the outer repository, and from a folder of the engine (checked from the engine's top)
        for cwd, shown in ((ws, "vllm/vllm/worker/runner.py"), (ws / "vllm/vllm/worker", "vllm/worker/runner.py")):
            proc = cs_audit("check", "--since", "HEAD", "-j", "1", ".", cwd=cwd)
            assert proc.returncode == 1, proc.stdout + proc.stderr
            assert f"NEW {shown}:20:9 default-on-emitter" in proc.stdout
    finally:
        runner.write_text(before)
    assert git(ws / "vllm", "status", "--porcelain") == ""
    assert os.listdir(ws / "vllm_cpu")


# -- own versus upstream (#43 "Upstream versus own code")


def _by_origin(report: dict) -> dict[str, list[tuple[str, str, int]]]:
    out: dict[str, list[tuple[str, str, int]]] = {}
    for f in report["findings"]:
        out.setdefault(f.get("origin", ""), []).append((f["rule"], f["path"], f["line"]))
    return out


def test_the_upstream_is_detected_and_only_the_forks_own_lines_are_reported(ws: Path) -> None:
    report = _scan(ws)
    [use] = report["upstream"]
    assert (use["repository"], use["spec"]) == ("vllm", "v0.33.0")
    assert use["how"].startswith("detected: the tag v0.33.0 names the version vllm/version.py states")
    # the fork's per-step log and its switch's read are its own; upstream's read of VLLM_SLOW_CHECKS is left out
    assert _by_origin(report) == {"own": [("default-on-emitter", "vllm/vllm/worker/runner.py", 12),
                                          ("eager-format", "vllm/vllm/worker/runner.py", 12),
                                          ("env-read-hot", "vllm/vllm/worker/runner.py", 13)]}
    assert report["upstream_findings"] == 2
    switches = {s["name"]: (s["origin"], s["disposition"], s["reasons"][0].split(":")[0]) for s in report["switches"]}
    assert switches["VLLM_SLOW_CHECKS"] == ("upstream", "KEEP", "upstream")
    assert switches["VLLM_LOGGING_LEVEL"] == ("upstream", "KEEP", "upstream")
    assert switches["CS_STATE_DEBUG"][0] == "own" and switches["CS_STATE_DEBUG"][2] != "upstream"
    assert switches["MY_DEBUG"][:2] == ("own", "MERGE")  # the submodule is the fork's own code whole
    notes = [n["message"] for n in report["notes"] if n["id"] == "upstream"]
    assert notes == ["vllm: own lines are those that differ from the upstream v0.33.0 (detected: the tag v0.33.0 names the "
                     "version vllm/version.py states); 2 findings on upstream lines left out (--include-upstream lists them)"]


def test_include_upstream_lists_them_after_the_forks_own(ws: Path, tmp_path: Path) -> None:
    report = _scan(ws, "--include-upstream")
    assert sorted(_by_origin(report)) == ["modified", "own"]  # upstream lines of a file the fork changed
    md = cs_audit("scan", str(ws), "--no-history", "-j", "1", "--include-upstream", "-f", "markdown").stdout
    ranked = [line for line in md.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |") or line.startswith("| 3 |")]
    # §1 ranks the fork's own statements first: its env read (≈ 1 µs) before upstream's per-step log (≈ 17 µs)
    assert "[CS] step" in ranked[0] and "CS_STATE_DEBUG" in ranked[1] and "forward %s" in ranked[2], ranked


def test_the_forks_switches_get_its_own_prefix(ws: Path) -> None:
    md = cs_audit("scan", str(ws), "--no-history", "-j", "1", "-f", "markdown").stdout
    assert "| `CS_TRACE` | `0` (default) |" in md and "| `CS_OUT` | path |" in md
    assert "VLLM_TRACE" not in md and "VLLM_OUT" not in md
    assert "2 upstream switches that no line of the fork's reads or sets are left alone" in md


def test_fix_leaves_the_upstreams_lines_alone(ws: Path) -> None:
    proc = cs_audit("fix", str(ws), "-j", "1")
    assert proc.returncode == 1, proc.stderr
    changed = [line for line in proc.stdout.splitlines() if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
    assert changed and all("VLLM_SLOW_CHECKS" not in line and "forward %s" not in line for line in changed), changed
    wide = cs_audit("fix", str(ws), "-j", "1", "--include-upstream").stdout
    assert "VLLM_SLOW_CHECKS" in wide
    assert git(ws / "vllm", "status", "--porcelain") == ""  # a diff, nothing written


def test_fix_edits_only_the_forks_own_lines_and_says_what_it_left_alone(ws: Path) -> None:
    """The fork's hot read of CS_STATE_DEBUG is in an upstream file: hoisting it would add a
    constant among the upstream's imports (a conflict at each rebase), so it is left alone
    and said; the fork's log line is rewritten where it stands."""
    proc = cs_audit("fix", str(ws), "-j", "1")
    assert proc.returncode == 1, proc.stderr
    hunks = [line for line in proc.stdout.splitlines() if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
    assert hunks == ['-        logger.info(f"[CS] step {len(batch)}")', '+        logger.info("[CS] step %s", len(batch))']
    assert ("vllm/vllm/worker/runner.py:13: env-read-hot: left alone: its fix would also edit the upstream's lines "
            "(at line 2; --include-upstream makes it)") in proc.stderr
    assert "cs-audit: fix: left alone, the upstream's: 1 site on its lines in 1 file (--include-upstream fixes them too)" \
        in proc.stderr
    wide = cs_audit("fix", str(ws), "-j", "1", "--include-upstream")
    assert '+_ENV_CS_STATE_DEBUG = os.environ.get("CS_STATE_DEBUG")' in wide.stdout
    assert "left alone" not in wide.stderr


def test_an_unchanged_copy_of_the_distribution_is_upstream_whole_and_one_edit_is_own(tmp_path: Path) -> None:
    """`upstream = "NAME==VERSION"`: the tree is compared with that distribution's files
    (here installed where the scan's Python finds it); a one-line edit makes that site own."""
    from tests.forkrepo import UPSTREAM_COMMITS

    files = {rel: text for _, commit in UPSTREAM_COMMITS for rel, text in commit.items()}
    site = tmp_path / "site"
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    info = site / "vllm-0.33.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n")
    (info / "RECORD").write_text("".join(f"{rel},,\n" for rel in files) + "vllm-0.33.0.dist-info/METADATA,,\n")
    tree = tmp_path / "tree"
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    (tree / "pyproject.toml").write_text('[tool.cs-audit]\nupstream = "vllm==0.33.0"\n')
    env = {"PYTHONPATH": f"{Path(__file__).resolve().parents[1]}{os.pathsep}{site}"}

    def scan(*args: str) -> dict:
        proc = cs_audit("scan", str(tree), "--no-history", "-j", "1", "-f", "json", "--no-cache", *args, env=env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    clean = scan("--include-upstream")
    assert clean["upstream"][0]["how"] == "configured" and clean["upstream"][0]["error"] is None
    assert {f["origin"] for f in clean["findings"]} == {"upstream"} and len(clean["findings"]) == 2
    runner = tree / "vllm/worker/runner.py"
    runner.write_text(runner.read_text().replace('logger.info("forward %s", batch)', 'logger.info(f"forward {batch}")'))
    edited = scan()
    assert [(f["rule"], f["line"], f["origin"]) for f in edited["findings"]] == [
        ("default-on-emitter", 16, "own"), ("eager-format", 16, "own")]


def test_a_distribution_pip_fetches_is_kept_in_the_cache(tmp_path: Path) -> None:
    """Not installed: pip downloads the wheel (here from a local folder of wheels) into the
    cache once; the next scan reads it from there."""
    import zipfile

    from tests.forkrepo import UPSTREAM_COMMITS

    files = {rel: text for _, commit in UPSTREAM_COMMITS for rel, text in commit.items()}
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "fakeengine-1.0-py3-none-any.whl", "w") as whl:
        for rel, text in files.items():
            whl.writestr(rel, text)
        whl.writestr("fakeengine-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fakeengine\nVersion: 1.0\n")
        whl.writestr("fakeengine-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr("fakeengine-1.0.dist-info/RECORD", "")
    tree = tmp_path / "tree"
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    (tree / "pyproject.toml").write_text('[tool.cs-audit]\nupstream = "fakeengine==1.0"\n')
    cache = tmp_path / "xdg"
    env = {"PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1", "XDG_CACHE_HOME": str(cache)}
    for _ in range(2):
        proc = cs_audit("scan", str(tree), "--no-history", "-j", "1", "-f", "json", env=env)
        report = json.loads(proc.stdout)
        assert report["upstream"][0]["error"] is None, report["upstream"]
        assert report["findings"] == [] and report["upstream_findings"] == 2
        env["PIP_FIND_LINKS"] = str(tmp_path / "nowhere")  # the second scan cannot download
    assert (cache / "cs-audit/upstream/fakeengine-1.0/.complete").is_file()
    # a distribution pip cannot fetch: said, and every line is own
    (tree / "pyproject.toml").write_text('[tool.cs-audit]\nupstream = "fakeengine==9.9"\n')
    report = json.loads(cs_audit("scan", str(tree), "--no-history", "-j", "1", "-f", "json", env=env).stdout)
    assert "pip download fakeengine==9.9 failed" in report["upstream"][0]["error"]
    assert len(report["findings"]) == 2 and "origin" not in report["findings"][0]


def test_the_forks_switches_are_dated_by_the_engines_own_history(ws: Path) -> None:
    proc = cs_audit("scan", str(ws), "-j", "1", "-f", "json")
    added = {s["name"]: (s["added_in"] or {}).get("subject") for s in json.loads(proc.stdout)["switches"]}
    assert added["CS_STATE_DEBUG"] == "cs: per-step state log and CS_STATE_DEBUG"
    assert added["MY_DEBUG"] == "cpu: verify"


def test_a_malformed_upstream_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t/pyproject.toml").write_text("[tool.cs-audit]\nupstream = 3\n")
    proc = cs_audit("scan", str(tmp_path / "t"), "--no-history")
    assert proc.returncode == 2 and proc.stderr.startswith("cs-audit: configuration error: pyproject.toml [tool.cs-audit]: upstream = ")


def test_fix_since_a_revision_keeps_to_the_lines_changed_since(tmp_path: Path) -> None:
    from tests.gitrepo import make_repo

    module = ("import logging\n\nlogger = logging.getLogger(__name__)\n\n\ndef old(x):\n    logger.info(f\"old {x}\")\n"
              "    return x\n")
    repo = make_repo(tmp_path, [("init", {"engine/mod.py": module})])
    (repo / "engine/mod.py").write_text(module + "\n\ndef new(x):\n    logger.info(f\"new {x}\")\n    return x\n")
    everything = cs_audit("fix", ".", "-j", "1", cwd=repo)
    assert 'logger.info("old %s", x)' in everything.stdout and 'logger.info("new %s", x)' in everything.stdout
    since = cs_audit("fix", ".", "-j", "1", "--since", "HEAD", cwd=repo)
    assert since.returncode == 1, since.stderr
    assert 'logger.info("new %s", x)' in since.stdout and "old %s" not in since.stdout
    bad = cs_audit("fix", ".", "-j", "1", "--since", "mian", cwd=repo)
    assert bad.returncode == 2 and bad.stderr.startswith("cs-audit: --since: unknown revision 'mian'")


def test_a_checkout_of_the_release_itself_names_no_upstream(tmp_path: Path) -> None:
    from tests.forkrepo import UPSTREAM_COMMITS, UPSTREAM_TAG
    from tests.gitrepo import make_repo

    repo = make_repo(tmp_path, list(UPSTREAM_COMMITS), name="vllm")
    git(repo, "tag", UPSTREAM_TAG)
    report = _scan(repo)
    assert "upstream" not in report and {f.get("origin") for f in report["findings"]} == {None}
    assert len(report["findings"]) == 2


def test_a_baseline_entry_on_the_upstreams_lines_is_left_out_not_fixed(ws: Path, tmp_path: Path) -> None:
    """A baseline recorded with the upstream's findings (an older cs-audit, or --include-upstream):
    the default check leaves those findings out, so their entries are not fixed and stay in
    the baseline (they are back with --include-upstream)."""
    base = tmp_path / "baseline.json"
    made = cs_audit("baseline", str(ws), "-j", "1", "-o", str(base), "--include-upstream")
    assert made.returncode == 0, made.stderr
    recorded = json.loads(base.read_text())["findings"]
    assert len(recorded) == 5
    proc = cs_audit("check", str(ws), "-j", "1", "--baseline", str(base), "--update-baseline", "-f", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = json.loads(proc.stdout)["check"]
    assert check["fixed"] == []
    [note] = [n["message"] for n in check["notes"] if n["id"] == "upstream" and "baseline" in n["message"]]
    assert note.startswith("2 baseline entries (vllm/vllm/worker/runner.py) match findings this check leaves out")
    assert json.loads(base.read_text())["findings"] == recorded
    text = cs_audit("check", str(ws), "-j", "1", "--baseline", str(base)).stdout
    assert "fixed since the baseline" not in text and "0 fixed" in text


def test_a_stored_report_is_not_reused_once_an_upstream_tag_appears(tmp_path: Path) -> None:
    """The whole report a rerun reuses depends on the upstream, which a new tag (or a moved
    one) changes with no file and no HEAD changed."""
    from tests.forkrepo import FORK_COMMITS, UPSTREAM_COMMITS, UPSTREAM_TAG
    from tests.gitrepo import make_repo, sha_of

    repo = make_repo(tmp_path, [*UPSTREAM_COMMITS, *FORK_COMMITS], name="vllm")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}

    def scan() -> dict:
        proc = cs_audit("scan", str(repo), "--no-history", "-j", "1", "-f", "json", env=env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    untagged = scan()
    assert "upstream" not in untagged and len(untagged["findings"]) == 5
    assert scan() == untagged  # the stored report, reused
    git(repo, "tag", UPSTREAM_TAG, sha_of(repo, UPSTREAM_COMMITS[-1][0]))
    tagged = scan()
    assert [u["spec"] for u in tagged["upstream"]] == [UPSTREAM_TAG]
    assert len(tagged["findings"]) == 3 and tagged["upstream_findings"] == 2
    git(repo, "tag", "-f", UPSTREAM_TAG, sha_of(repo, FORK_COMMITS[-1][0]))  # moved to HEAD: no fork's base
    assert "upstream" not in scan()


def test_report_on_past_commits_audits_the_engine_checkout_as_it_stood_then(tmp_path: Path) -> None:
    """A commit of the outer repository records no state of the engine its .gitignore lists:
    the engine is audited at the last commit of its HEAD's line made by that commit's date,
    its own lines told from the upstream detected at that commit, and the report names it;
    before the engine's first commit it is left out, and said."""
    from tests.forkrepo import FORK_COMMITS, UPSTREAM_COMMITS, UPSTREAM_TAG
    from tests.gitrepo import commit_files, init_repo, sha_of

    ws = init_repo(tmp_path / "ws")
    commit_files(ws, "ws: start", {".gitignore": "vllm/\n"}, day=0)
    engine = init_repo(ws / "vllm")
    for day, (subject, files) in enumerate([*UPSTREAM_COMMITS, *FORK_COMMITS], 1):
        commit_files(engine, subject, files, day=day)
    git(engine, "tag", UPSTREAM_TAG, sha_of(engine, UPSTREAM_COMMITS[-1][0]))
    commit_files(ws, "ws: notes", {"NOTES": "pinned to the release\n"}, day=2)
    commit_files(ws, "ws: run script", {"run.sh": "#!/bin/sh\nexport CS_STATE_DEBUG=1\npython -m vllm\n"}, day=3)

    def report(rev: str) -> dict:
        out = tmp_path / f"{rev}.json"
        proc = cs_audit("report", "--rev", rev, "-f", "json", "-o", str(out), "-j", "1", ".", cwd=ws)
        assert proc.returncode == 0, proc.stderr
        return json.loads(out.read_text())

    then = report("HEAD")  # day 3: the engine's first fork commit, not its second (day 4)
    fork_commit = sha_of(engine, FORK_COMMITS[0][0])
    assert then["repositories"] == [{"path": ".", "commit": sha_of(ws, "ws: run script")},
                                    {"path": "vllm", "commit": fork_commit}]
    # the engine's own lines at that commit, told from the upstream detected at it
    assert _by_origin(then) == {"own": [("default-on-emitter", "vllm/vllm/worker/runner.py", 12),
                                        ("eager-format", "vllm/vllm/worker/runner.py", 12),
                                        ("env-read-hot", "vllm/vllm/worker/runner.py", 13)]}
    assert then["upstream_findings"] == 2 and [u["spec"] for u in then["upstream"]] == [UPSTREAM_TAG]
    added = {s["name"]: (s["added_in"] or {}).get("subject") for s in then["switches"]}
    assert added["CS_STATE_DEBUG"] == FORK_COMMITS[0][0]  # dated by the engine's own history
    [note] = [n["message"] for n in then["notes"] if n["id"] == "sub-repository"]
    assert note.startswith(f"vllm: repository of its own, no commit of ws records it: audited at {fork_commit[:9]} "
                           f"(2026-01-04, '{FORK_COMMITS[0][0]}')")
    base = report("HEAD~1")  # day 2: the engine at the release it forks, upstream whole
    assert base["findings"] == [] and base["upstream_findings"] == 2
    assert base["upstream"][0]["how"].endswith("(the commit audited is that base itself)")
    before = report("HEAD~2")  # day 0: before the engine's first commit
    assert before["findings"] == [] and before["repositories"][1] == {"path": "vllm", "commit": None}
    [note] = [n["message"] for n in before["notes"] if n["id"] == "sub-repository"]
    assert "left out, its HEAD's line has no commit made by 2026-01-01" in note
    assert git(ws, "status", "--porcelain") == "" and git(engine, "status", "--porcelain") == ""


def test_check_since_does_not_take_a_finding_on_an_upstream_line_the_fork_touches_for_new(tmp_path: Path) -> None:
    """A comment added to upstream's per-step log line makes that line the fork's own; the
    audit of REV had the finding, on the upstream's lines then: it is not new."""
    from tests.forkrepo import FORK_COMMITS, UPSTREAM_COMMITS, UPSTREAM_TAG
    from tests.gitrepo import make_repo, sha_of

    repo = make_repo(tmp_path, [*UPSTREAM_COMMITS, *FORK_COMMITS], name="vllm")
    git(repo, "tag", UPSTREAM_TAG, sha_of(repo, UPSTREAM_COMMITS[-1][0]))
    runner = repo / "vllm/worker/runner.py"
    runner.write_text(runner.read_text().replace('logger.info("forward %s", batch)', 'logger.info("forward %s", batch)  # cs'))
    proc = cs_audit("check", "--since", "HEAD", "-j", "1", ".", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 new" in proc.stdout


def test_a_baseline_entry_in_a_file_the_check_excludes_is_not_fixed(ws: Path, tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    assert cs_audit("baseline", str(ws), "-j", "1", "-o", str(base)).returncode == 0
    recorded = json.loads(base.read_text())["findings"]
    assert {e["path"] for e in recorded} == {"vllm/vllm/worker/runner.py"}
    proc = cs_audit("check", str(ws), "-j", "1", "--baseline", str(base), "--update-baseline", "--exclude", "vllm/",
                    "-f", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["check"]["fixed"] == []
    assert json.loads(base.read_text())["findings"] == recorded


def test_report_on_a_past_commit_audits_a_checked_out_submodule_at_the_commit_it_pins(ws: Path, tmp_path: Path) -> None:
    out = tmp_path / "head.json"
    proc = cs_audit("report", "--rev", "HEAD", "-f", "json", "-o", str(out), "-j", "1", ".", cwd=ws)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    pinned = git(ws, "ls-tree", "HEAD", "vllm_cpu").split()[2]
    assert {"path": "vllm_cpu", "commit": pinned} in report["repositories"]
    assert report["errors"] == []  # no "submodule ... not audited" entry
    assert f"vllm_cpu: submodule: audited at the commit this commit pins ({pinned[:9]})" in [n["message"] for n in report["notes"]]
    added = {s["name"]: (s["added_in"] or {}).get("subject") for s in report["switches"]}
    assert added["MY_DEBUG"] == "cpu: verify"
