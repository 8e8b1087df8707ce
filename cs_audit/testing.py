"""Test kit: scan small in-memory trees and compare reports with snapshots.

It also holds the annotation harness for fixture files (the convention of semgrep-rules'
``# ruleid:`` and Fixit's inline cases): a comment line ``# expect: rule-a, rule-b`` says
those rules fire on the next code line, ``# ok: rule-a`` that it must stay silent there.
``check_annotations`` scans a tree and lists every place the report and the annotations
disagree.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
import textwrap
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from cs_audit.api import run_audit
from cs_audit.config import AuditConfig
from cs_audit.model import AuditResult
from cs_audit.ruleset import load_ruleset


def _as_written(content: str | bytes) -> str | bytes:
    """What ``write_tree`` stores for ``content``: text dedented, leading newlines dropped."""
    return content if isinstance(content, bytes) else textwrap.dedent(content).lstrip("\n")


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        written = _as_written(content)
        if isinstance(written, bytes):
            target.write_bytes(written)
        else:
            target.write_text(written, encoding="utf-8")
    return root


def scan_files(files: dict[str, str | bytes], **config: object) -> AuditResult:
    """Scan a throwaway tree built from ``files`` (dedented), one process, no history."""
    with tempfile.TemporaryDirectory() as tmp:
        root = write_tree(Path(tmp), files)
        options = {"jobs": 1, "history": False, **config}
        result = run_audit(AuditConfig(root=str(root), **options))  # type: ignore[arg-type]
    return replace(result, root="<tmp>")


def findings_of(source: str, rule: str | None = None, path: str = "mod.py") -> list[tuple[int, str, str | None]]:
    """(line, rule, switch) of every finding in one module, optionally of one rule."""
    result = scan_files({path: source})
    return [(f.line, f.rule, f.switch.text if f.switch else None) for f in result.findings if rule is None or f.rule == rule]


# ------------------------------------------------------------------ `# expect:` annotations
_ANNOTATION = re.compile(r"#\s*(expect|ok)\s*:\s*(\S.*?)\s*$")
_NOT_CODE = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                       tokenize.ENDMARKER, tokenize.ENCODING})


@dataclass(frozen=True, slots=True)
class Annotations:
    """The ``# expect:`` and ``# ok:`` annotations of one file, as (target line, rule) pairs."""

    expect: frozenset[tuple[int, str]]
    ok: frozenset[tuple[int, str]]
    #: lines of annotations that name no code line: written after code on its line, or
    #: with no code line below them
    stray: tuple[int, ...] = ()
    #: (target line, rule, path kind) of ``# expect: rule(kind)``: the finding's ``path_kind``
    kinds: frozenset[tuple[int, str, str]] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.expect or self.ok or self.stray)


def parse_annotations(text: str) -> Annotations:
    """The annotations of one Python file.

    An annotation is a comment on a line of its own, ``# expect: rule-a, rule-b`` or
    ``# ok: rule-a`` (``# expect: rule-a(rare)``: its finding's ``path_kind`` too); it applies to the next line that holds code (blank lines and other
    comments in between are skipped), so several annotation lines can stack above one line.
    Comments are found with ``tokenize``: text inside strings never counts.  Raises
    ``ValueError`` when ``text`` cannot be tokenized.
    """
    comments: list[tuple[int, str, bool]] = []  # (line, text, alone on its line)
    code_lines: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                comments.append((tok.start[0], tok.string, not tok.line[: tok.start[1]].strip()))
            elif tok.type not in _NOT_CODE:
                code_lines.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ValueError(f"cannot tokenize: {exc}") from None
    found: dict[str, set[tuple[int, str]]] = {"expect": set(), "ok": set()}
    kinds: set[tuple[int, str, str]] = set()
    stray: list[int] = []
    for line, comment, alone in comments:
        match = _ANNOTATION.match(comment)
        if match is None:
            continue
        target = min((n for n in code_lines if n > line), default=None)
        if not alone or target is None:
            stray.append(line)
            continue
        for token in match[2].split(","):
            rule, _, kind = token.strip().partition("(")
            if rule:
                found[match[1]].add((target, rule))
            if kind.endswith(")") and match[1] == "expect":
                kinds.add((target, rule, kind[:-1]))
    return Annotations(frozenset(found["expect"]), frozenset(found["ok"]), tuple(stray), frozenset(kinds))


def expected_findings(text: str) -> set[tuple[int, str]]:
    """(line, rule) of every finding the ``# expect:`` annotations of ``text`` ask for."""
    return set(parse_annotations(text).expect)


def check_annotations(root_or_files: str | os.PathLike[str] | Mapping[str, str | bytes]) -> list[str]:
    """Scan a tree and compare its findings with the annotations of its ``.py`` files.

    ``root_or_files``: a directory (scanned as it is, one process, no history, no cache) or
    an in-memory tree ``{relative path: source}`` (written and scanned by ``scan_files``).
    Returns one ``path:line: ...`` line per problem, sorted (empty: they agree):

    - ``missing``: an ``# expect:`` rule that does not fire on its line;
    - ``unexpected``: a rule that fires on a line annotated ``# ok:`` for it;
    - ``unannotated``: a rule that fires on a line no annotation names it for, in a file
      with at least one annotation (files without any are not checked);
    - an annotation naming an unknown rule, or both expecting and excusing one rule, a
      stray annotation (no code line to apply to), and every file the scan could not read.
    """
    if isinstance(root_or_files, Mapping):
        result = scan_files(dict(root_or_files), cache=False)
        texts = {rel: _decoded(_as_written(content)) for rel, content in root_or_files.items() if rel.endswith(".py")}
    else:
        root = Path(root_or_files)
        result = run_audit(AuditConfig(root=str(root), jobs=1, history=False, cache=False))
        texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8-sig", errors="replace") for p in root.rglob("*.py")}
    known = set(load_ruleset().rules)
    problems: list[tuple[str, int, str]] = [(e.path, 0, f"scan error ({e.kind}): {e.message}") for e in result.errors]
    fired: dict[str, set[tuple[int, str]]] = {}
    path_kinds: dict[tuple[str, int, str], set[str]] = {}
    for f in result.findings:
        fired.setdefault(f.path, set()).add((f.line, f.rule))
        path_kinds.setdefault((f.path, f.line, f.rule), set()).add(f.path_kind)
    for path, text in texts.items():
        try:
            notes = parse_annotations(text)
        except ValueError as exc:
            problems.append((path, 0, str(exc)))
            continue
        if not notes:
            continue
        problems += [(path, line, "annotation applies to no code line (write it on its own line, above the code)")
                     for line in notes.stray]
        problems += [(path, line, f"annotation names unknown rule {rule!r}")
                     for line, rule in notes.expect | notes.ok if rule not in known]
        problems += [(path, line, f"{rule} is both expected and ok") for line, rule in notes.expect & notes.ok]
        here = fired.get(path, set())
        problems += [(path, line, f"missing {rule} (annotated `# expect:`, not reported)") for line, rule in notes.expect - here]
        problems += [(path, line, f"unexpected {rule} (annotated `# ok:`, reported)") for line, rule in notes.ok & here]
        problems += [(path, line, f"unannotated {rule} (reported, no annotation names it)")
                     for line, rule in here - notes.expect - notes.ok]
        problems += [(path, line, f"{rule} is on a {'/'.join(sorted(path_kinds[(path, line, rule)]))} path (annotated `({kind})`)")
                     for line, rule, kind in notes.kinds
                     if (path, line, rule) in path_kinds and path_kinds[(path, line, rule)] != {kind}]
    return [f"{path}:{line}: {message}" if line else f"{path}: {message}" for path, line, message in sorted(problems)]


def _decoded(content: str | bytes) -> str:
    return content.decode("utf-8-sig", errors="replace") if isinstance(content, bytes) else content
