"""The command line: a thin typer layer over ``cs_audit.api``.  Each command imports what
it needs when it runs, so ``--help`` and ``version`` stay quick.

Exit codes: 0 clean, 1 findings that gate (``check``, ``scan --exit-non-zero-on-findings``),
2 could not complete (a usage error, bad config, unreadable root, an output that cannot be
written, and with ``--strict`` any skipped file).  Every error is one line on stderr.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

from cs_audit.cli import (
    ci,  # noqa: F401  (registers baseline, check, report, diff)
    confirm,  # noqa: F401  (registers trace, confirm)
    fix,  # noqa: F401  (registers fix)
    graph,  # noqa: F401  (registers callgraph, why)
    scan,  # noqa: F401,I001  (registers scan, switch, rules, config, version: listed first)
)
from cs_audit.cli import common as state
from cs_audit.cli.common import app

__all__ = ["app", "main"]


def exit_on_signals() -> None:
    """SIGTERM and SIGHUP end the command as Ctrl-C does: by an exception, so the temporary
    trees of ``report``/``diff`` and blame's commit-graph are removed on the way out."""
    def stop(signum: int, _frame: object) -> NoReturn:
        raise SystemExit(128 + signum)

    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, stop)


def main() -> None:
    state.KEPT = []
    exit_on_signals()
    out_of_memory = False
    status: object = 0
    try:
        app()
    except SystemExit as exc:  # typer ends every command this way
        status = exc.code
    except KeyboardInterrupt:
        status = 130
    except MemoryError:
        out_of_memory = True  # said below, once the frames that ran out of memory are let go
    except Exception as exc:  # noqa: BLE001 - an internal error: one line, the trace in a file
        status = _internal_error(exc)
    if out_of_memory:
        status = _out_of_memory()
    pool = sys.modules.get("cs_audit.pool")
    if pool is not None:  # workers an error or a signal left running (the exit handlers are skipped)
        pool.stop_workers()
    _exit_now(status)


#: written as bytes made in advance: when memory ran out, formatting a message may fail too
_OUT_OF_MEMORY = (b"cs-audit: out of memory: the scan stopped and wrote no report (see Security in the "
                  b"README: exclude part of the tree, or run where more memory is available)\n")


def _out_of_memory() -> int:
    """Say in one line, with no traceback, that the command ran out of memory: a resource
    limit of the machine or of the session, not a fault of cs-audit to report."""
    if state.KEPT is not None:
        state.KEPT.clear()  # the tree's objects kept for a fast exit: freed, as nothing follows
    try:
        os.write(2, _OUT_OF_MEMORY)
    except OSError:
        pass
    return 2


def _internal_error(exc: BaseException) -> int:
    """Say in one line that cs-audit failed, and where the full traceback was written."""
    import tempfile
    import traceback

    where = "not written"
    try:
        fd, where = tempfile.mkstemp(prefix="cs-audit-traceback-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("".join(traceback.format_exception(exc)))
    except OSError:
        pass
    sys.stderr.write(f"cs-audit: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                     f" (traceback in {where})\n")
    return 2


def _exit_now(status: object) -> NoReturn:
    """End the process as ``sys.exit(status)`` would, without freeing memory: a scan leaves a
    tree's worth of objects (its facts and model, kept in ``common.KEPT``) and the interpreter's
    teardown would spend a good part of a warm or one-file run freeing them.  Everything
    the commands write is written by then (reports through closed files, stdout and stderr
    flushed here), and the exit handlers skipped have nothing left to do: the worker processes
    are stopped by ``main`` (a command that returns has joined them) and blame threads joined
    before a command returns, and nothing logs to a handler."""
    if status is None:
        code = 0
    elif isinstance(status, int):
        code = status
    else:  # sys.exit("message"): printed, exit status 1
        sys.stderr.write(f"{status}\n")
        code = 1
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed pipe (`| head`): nothing left to say on it
        code = code or 1
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code % 256)  # as the shell sees sys.exit(code)
