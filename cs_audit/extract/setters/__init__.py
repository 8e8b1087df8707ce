"""Find every place an environment variable ("switch") is *set* outside the code that reads it.

Runner scripts, ``.env`` files, Dockerfiles, Makefiles, CI workflows and Python
launchers turn debug switches on.  Each function here takes one file's text and
returns ``EnvSetter`` rows; nothing reads the disk, imports or executes anything.

Classification (``EnvSetter.kind``)
-----------------------------------
``set``
    A real setting.  ``value`` is the literal text after ``=`` with one layer of
    quoting removed; a computed value (``$(date)``, ``"$HOME/x"``, a Python
    expression) keeps its raw text.
``off``
    A real setting to an off value: ``0``, ``false``, ``no``, ``off`` or the empty
    string, compared case-insensitively (``False``, ``OFF`` are off too).
``passthrough``
    The setting only forwards what the caller already had: ``X=${X:-0}``,
    ``X=${X-0}``, ``X=${X:=0}``, ``X=${X}``, ``X="$X"``, a bare ``export X``,
    make ``X ?= 0``, ``os.environ.setdefault("X", "0")``,
    ``env={"X": os.environ.get("X", "0")}``, CI ``X: ${{ env.X }}``.
    ``value`` is the default (``"0"``) or ``None`` when there is none.
``commented``
    The setting sits in a commented-out line (``# export X=1``, ``#X=1`` in a
    ``.env``, ``# ENV X=1``, ``# os.environ["X"] = "1"``).  ``value`` is computed
    as for the live line (for a commented passthrough, its default).  A comment
    that follows code on the same line is not a commented-out line and is ignored.

Scope decisions
---------------
* Shell: every syntactic assignment counts, including lower-case names (``i=0``)
  and plain ``X=1`` that is never exported — runners do ``X=1`` then ``export X``.
  Callers filter by the switches they know.  A bare ``export X`` adds a
  passthrough site only when the file never assigns ``X`` plainly (anywhere in
  the file, so ``export X; X=1`` is one site, not two).  ``local`` (with or
  without ``-x``), array assignments (``X=(a b)``) and subscripted targets
  (``X[0]=1``) are skipped; ``declare X=1`` and ``readonly X=1`` are plain
  assignments.  ``X+=v`` appends: always ``set``, value ``v``.
  ``env [-i] [-u NAME] X=1 cmd`` counts, also behind ``nohup``/``exec``/``time``/
  ``sudo``/``nice``/``setsid``/``stdbuf`` wrappers.  Assignments in heredoc bodies
  are text and are skipped.  A comment is read by parsing its body as shell, so
  prose (``# set X=1 to enable``) stays silent.  Lines inside a tree-sitter ERROR
  region that yielded nothing are re-parsed one by one.  ``docker run -e``,
  ``srun --export=`` and ``RUN`` bodies of Dockerfiles are not parsed.
* ``.env``: ``X=1``, ``export X=1``, ``X = 1``, quoted values, `` # note`` after an
  unquoted value dropped; a commented line needs ``#X=1`` without spaces around
  ``=`` (``# N = number of ...`` is prose).
* Dockerfile: ``ENV X=1 Y=2`` (shell-style quotes), legacy ``ENV X value``,
  ``\\`` continuations (each var gets the physical line it sits on);
  ``ARG`` is a build argument, not a setter.
* Makefile: ``export X=1`` / ``X := 1`` + ``export X`` / ``.EXPORT_ALL_VARIABLES``
  / a bare ``export`` line, target-specific ``target: export X=1``,
  ``$(eval export X=1)``, and recipe lines parsed as shell (``$$`` -> ``$``).
  A make value keeps no quotes here either (make would pass them literally).
* CI YAML: any mapping under a key named ``env`` or ``variables`` at any depth;
  line numbers come from the YAML node marks (``yaml.compose`` with the safe
  loader).  A null value is the empty string (off).  Shell in ``run:`` blocks
  is not parsed.
* Python: ``os.environ[...] = v``, ``os.putenv``, ``os.environ.setdefault``
  (passthrough), ``os.environ.update``, ``env=`` keywords of any call, and dicts
  bound to a name that is passed as ``env=`` or copied from ``os.environ``.
  Keys must be string literals.  A whole-line comment mentioning ``env`` is
  parsed as Python; prose does not parse and stays silent.  Line ends are
  normalised first, so line numbers follow ``ast``.
* Results are ordered by (line, column).  ``count_setters`` removes exact
  duplicates before counting; its ``count`` is the number of ``set`` sites.
* Nothing raises on odd input: unparsable YAML or Python gives ``[]``, shell
  with syntax errors gives what tree-sitter recovers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cs_audit.extract.setters.build_files import setters_in_ci_yaml, setters_in_dockerfile, setters_in_dotenv, setters_in_makefile
from cs_audit.extract.setters.python import may_set_env, setters_in_python
from cs_audit.extract.setters.shell import setters_in_shell
from cs_audit.model import EnvSetter

__all__ = [
    "count_setters",
    "may_set_env",
    "setters_in_ci_yaml",
    "setters_in_dockerfile",
    "setters_in_dotenv",
    "setters_in_file",
    "setters_in_makefile",
    "setters_in_python",
    "setters_in_shell",
]


def setters_in_file(path: str, text: str, kind: str) -> list[EnvSetter]:
    """Dispatch on ``kind`` (as ``cs_audit.extract.discover.file_kind`` names it); unknown kinds -> []."""
    reader = _READERS.get(kind)
    return reader(path, text) if reader is not None else []


_READERS: dict[str, Callable[[str, str], list[EnvSetter]]] = {
    "shell": setters_in_shell,
    "dotenv": setters_in_dotenv,
    "docker": setters_in_dockerfile,
    "make": setters_in_makefile,
    "ci": setters_in_ci_yaml,
    "python": setters_in_python,
}


def count_setters(setters: Iterable[EnvSetter]) -> dict[str, dict[str, Any]]:
    """Per var: ``count`` (kind ``set``), ``passthrough``, ``commented``, ``off`` and every site.

    Exact duplicate rows are counted once.  Vars are in sorted order; sites are
    sorted by (path, line, kind, value, source).  Each site is
    ``{"path", "line", "value", "kind"}``.
    """

    def site_order(setter: EnvSetter) -> tuple[str, int, str, bool, str, str]:
        return (
            setter.path,
            setter.line,
            setter.kind,
            setter.value is None,
            setter.value or "",
            setter.source,
        )

    by_var: dict[str, list[EnvSetter]] = {}
    for setter in set(setters):
        by_var.setdefault(setter.var, []).append(setter)
    summary: dict[str, dict[str, Any]] = {}
    for var in sorted(by_var):
        rows = sorted(by_var[var], key=site_order)
        summary[var] = {
            "count": sum(row.kind == "set" for row in rows),
            "passthrough": sum(row.kind == "passthrough" for row in rows),
            "commented": sum(row.kind == "commented" for row in rows),
            "off": sum(row.kind == "off" for row in rows),
            "sites": [
                {
                    "path": row.path,
                    "line": row.line,
                    "value": row.value,
                    "kind": row.kind,
                }
                for row in rows
            ],
        }
    return summary
