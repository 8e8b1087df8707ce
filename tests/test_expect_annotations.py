"""The `# expect:` / `# ok:` annotation harness (``cs_audit.testing``) and the annotated fixtures.

``fixtures/annotated/`` is a small engine-shaped tree whose every finding is annotated on the
line above it (``# expect: rule``) and whose near misses are annotated ``# ok: rule``; the
first test scans it and wants no disagreement.  The others show that the harness can fail:
one tree per kind of problem.
"""

from __future__ import annotations

from pathlib import Path

from cs_audit.testing import check_annotations, expected_findings, parse_annotations

ANNOTATED = Path(__file__).resolve().parent.parent / "fixtures" / "annotated"

#: `Runner.execute_model` is a per-step hot root; with one line in each slot, line 9 is an
#: ungated f-string info line (default-on-emitter and eager-format), line 11 a lazy debug
#: line (neither)
RUNNER = '''
import logging

logger = logging.getLogger(__name__)


class Runner:
    def execute_model(self, batch):
        {above_info}
        logger.info(f"step {{batch}}")
        {above_debug}
        logger.debug("step %s", batch)
'''


def runner(above_info: str = "# expect: default-on-emitter, eager-format", above_debug: str = "# ok: eager-format") -> dict[str, str]:
    return {"engine/runner.py": RUNNER.format(above_info=above_info, above_debug=above_debug)}


def test_annotated_fixtures_agree_with_the_report() -> None:
    assert sorted(p.name for p in ANNOTATED.rglob("*.py")), "fixtures/annotated holds no Python file"
    assert check_annotations(ANNOTATED) == []


def test_every_annotated_fixture_file_expects_something() -> None:
    for path in sorted(ANNOTATED.rglob("*.py")):
        if path.name == "__init__.py":
            continue  # it makes its folder a package
        assert expected_findings(path.read_text(encoding="utf-8")), f"{path.name}: no `# expect:` annotation"


def test_a_correctly_annotated_tree_has_no_problem() -> None:
    assert check_annotations(runner()) == []


def test_missing_expected_finding() -> None:
    problems = check_annotations(runner(above_debug="# expect: eager-format"))
    assert problems == ["engine/runner.py:11: missing eager-format (annotated `# expect:`, not reported)"]


def test_unexpected_finding_on_a_line_annotated_ok() -> None:
    problems = check_annotations(runner(above_info="# expect: default-on-emitter\n        # ok: eager-format"))
    # two annotation lines above the info line: it is line 10 here
    assert problems == ["engine/runner.py:10: unexpected eager-format (annotated `# ok:`, reported)"]


def test_unannotated_finding_on_a_line_without_annotation() -> None:
    problems = check_annotations(runner(above_info="x = 1"))
    assert problems == [
        "engine/runner.py:9: unannotated default-on-emitter (reported, no annotation names it)",
        "engine/runner.py:9: unannotated eager-format (reported, no annotation names it)",
    ]


def test_unannotated_finding_on_a_line_annotated_for_another_rule() -> None:
    problems = check_annotations(runner(above_info="# expect: default-on-emitter"))
    assert problems == ["engine/runner.py:9: unannotated eager-format (reported, no annotation names it)"]


def test_a_file_without_annotations_is_not_checked() -> None:
    files = {**runner(), "engine/plain.py": RUNNER.format(above_info="x = 1", above_debug="y = 2")}
    assert check_annotations(files) == []


def test_unknown_rule_stray_annotation_and_contradiction() -> None:
    files = {"mod.py": '''
import os

# expect: env-raed-hot
X = 1
Y = 2  # expect: env-read-hot
# ok: own-timestamp
# expect: own-timestamp
Z = 3
# ok: eager-format
'''}
    assert check_annotations(files) == [
        "mod.py:4: annotation names unknown rule 'env-raed-hot'",
        "mod.py:4: missing env-raed-hot (annotated `# expect:`, not reported)",
        "mod.py:5: annotation applies to no code line (write it on its own line, above the code)",
        "mod.py:8: missing own-timestamp (annotated `# expect:`, not reported)",
        "mod.py:8: own-timestamp is both expected and ok",
        "mod.py:9: annotation applies to no code line (write it on its own line, above the code)",
    ]


def test_expected_findings_reads_the_next_code_line() -> None:
    text = '''import os

# expect: env-read-hot, default-on-emitter
# a plain comment between the annotation and its line

# ok: eager-format
x = os.environ.get("A")
s = """
# expect: not-an-annotation (inside a string)
"""
# expected: a prose comment, not an annotation
y = 1
'''
    assert expected_findings(text) == {(7, "env-read-hot"), (7, "default-on-emitter")}
    assert parse_annotations(text).ok == {(7, "eager-format")}
    assert not parse_annotations("x = 1  # a plain comment\n")


def test_directory_and_in_memory_trees_are_checked_alike(tmp_path: Path) -> None:
    from cs_audit.testing import write_tree

    files = runner(above_info="# expect: default-on-emitter")
    write_tree(tmp_path, files)
    assert check_annotations(tmp_path) == check_annotations(files) == [
        "engine/runner.py:9: unannotated eager-format (reported, no annotation names it)",
    ]


def test_fixture_without_its_expect_lines_yields_one_unannotated_finding_each() -> None:
    files = {p.relative_to(ANNOTATED).as_posix(): p.read_text(encoding="utf-8") for p in sorted(ANNOTATED.rglob("*.py"))}
    expected = sum(len(expected_findings(text)) for text in files.values())
    stripped = {
        rel: "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("# expect:"))
        for rel, text in files.items()
    }
    problems = check_annotations(stripped)
    assert expected > 10
    assert len(problems) == expected
    assert all(" unannotated " in p for p in problems)


def test_an_annotated_path_kind_is_checked() -> None:
    assert check_annotations(runner(above_info="# expect: default-on-emitter(normal), eager-format")) == []
    problems = check_annotations(runner(above_info="# expect: default-on-emitter(rare), eager-format"))
    assert problems == ["engine/runner.py:9: default-on-emitter is on a normal path (annotated `(rare)`)"]
