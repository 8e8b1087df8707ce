"""Facts for one file: a pure function of its bytes and the rule set.

``extract_python`` decodes (coding cookie, BOM), indexes the module with the stdlib
``ast`` and, when the file holds any token worth it, walks it once with libcst.
Every failure becomes a ``FileError`` for that file only.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

import libcst as cst

from cs_audit.extract.facts import collect_facts
from cs_audit.extract.index import index_module, module_name
from cs_audit.model import FileError, FileFacts
from cs_audit.ruleset import RuleSet

#: files without any of these tokens get the ast index only (no env read,
#: emitter, sync or debug helper can hide in them)
DETAIL_TOKENS = re.compile(
    rb"environ|getenv|envs\.|logg|print\(|\.write\(|dump|save\(|\.item\(|\.cpu\(|tolist|\.numpy\(|"
    rb"synchroni[sz]e|open\(|flush|strftime|datetime|trace|diag|debug|_log\b|\.to\("
)


def decode_source(data: bytes) -> str:
    """Decode like the interpreter: coding cookie or UTF-8, BOM dropped.
    Raises UnicodeDecodeError/SyntaxError (bad cookie) for the caller to report."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text[1:] if text.startswith("\ufeff") else text


def extract_python(path: str, data: bytes, rs: RuleSet) -> FileFacts | FileError:
    if b"\0" in data:
        return FileError(path, "binary", "contains NUL bytes: not a text file, skipped")
    try:
        text = decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return FileError(path, "encoding", f"cannot decode: {exc}")
    # normalise newlines so line numbers agree between ast and libcst
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    detailed = DETAIL_TOKENS.search(data) is not None
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        return FileError(path, "syntax", f"syntax error at {exc.lineno}:{exc.offset}: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:
        return FileError(path, "syntax", f"cannot parse: {type(exc).__name__}: {exc}")
    index = index_module(tree, path, rs, with_calls=not detailed)
    env_reads: tuple = ()
    calls = index.calls
    literal_paths: tuple = ()
    if detailed:
        try:
            collector = collect_facts(text, rs, index.aliases, index.logger_names, index.string_constants)
        except cst.ParserSyntaxError as exc:
            return FileError(path, "syntax", f"syntax error at {exc.raw_line}:{exc.raw_column}: {exc.message}")
        except RecursionError:
            return FileError(path, "parser-crash", "expression nesting too deep for the parser")
        env_reads = tuple(collector.env_reads)
        calls = tuple(collector.calls)
        literal_paths = tuple(collector.literal_paths)
    return FileFacts(
        path=path,
        module=module_name(path),
        aliases=tuple(sorted(index.aliases.items())),
        functions=index.functions,
        env_reads=env_reads,
        calls=calls,
        detailed=detailed,
        literal_paths=literal_paths,
    )
