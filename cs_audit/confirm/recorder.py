"""The recorder of ``cs-audit trace``: runs a Python program under ``sys.monitoring`` (3.12+)
or ``sys.setprofile`` and writes, per function of the recorded folders, its calls once the
warm-up steps are over and in all, with the number of steps (calls of the step root) counted.

    python recorder.py -o run.json [--root QUALNAME] [--warmup N] [--steps N] [--tree DIR]
                       [--package NAME] [--tracer auto|setprofile|monitoring] -- prog.py ARGS | -m module ARGS

Standard library only, and runnable as a file: ``trace`` starts it with the program's own
interpreter, which need not have cs-audit installed.
"""

from __future__ import annotations

import argparse
import dis
import inspect
import json
import os
import runpy
import signal
import sys
import threading
from collections.abc import Callable

FORMAT = "cs-audit-trace"
VERSION = 1
#: code whose frames are resumed: each resume is a "call" event of its own
_RESUMED = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_RESUME = dis.opmap.get("RESUME")  # 3.11+: `RESUME 0` starts a function, other arguments resume it


def _starts(frame) -> bool:
    """A "call" event of a generator or coroutine frame is its start, not a resume after a
    `yield` or `await` (Python 3.10: a fresh frame has no last instruction yet)."""
    lasti = frame.f_lasti
    if lasti < 0:
        return True
    if _RESUME is None:
        return False
    code = frame.f_code.co_code
    return code[lasti] == _RESUME and code[lasti + 1] == 0


class Recorder:
    """Counts calls per code object of the recorded folders, and the calls of the step root.

    Counting starts at the first step's call with no warm-up, else when the N-th step returns;
    with ``stop_after`` it stops (and the output is written) once that many steps are counted."""

    def __init__(self, folders: list[str], roots: list[str], warmup: int, stop_after: int, on_done) -> None:
        self.folders = tuple(f.rstrip(os.sep) + os.sep for f in folders)
        self.roots = roots
        self.warmup = warmup
        self.stop_after = stop_after
        self.on_done = on_done
        #: code object -> (recorded, is the step root, is resumed: a generator or coroutine)
        self.codes: dict = {}
        self.counted: dict = {}
        self.total: dict = {}
        self.step_codes: set = set()
        self.step_calls = 0
        self.steps = 0
        self.active = False
        self.done = False

    def _info(self, code) -> tuple[bool, bool, bool]:
        info = self.codes.get(code)
        if info is None:
            qualname = getattr(code, "co_qualname", code.co_name)
            is_root = any(qualname == r or qualname.endswith("." + r) for r in self.roots)
            file = code.co_filename  # `<frozen os>`, `<string>`: no file of any tree
            recorded = not file.startswith("<") and os.path.abspath(file).startswith(self.folders)
            info = self.codes[code] = (recorded, is_root, bool(code.co_flags & _RESUMED))
            if is_root:
                self.step_codes.add(code)
        return info

    def start(self, code) -> bool:
        """A call of ``code`` starts (never a generator's resume); False when ``code`` is
        neither recorded nor a step root, so a tracer can stop reporting it."""
        recorded, is_root, resumed = self._info(code)
        if is_root:
            self.step_calls += 1
            if not self.active and (not self.warmup or (resumed and self.step_calls > self.warmup)):
                self.active = True  # a generator root's returns are its yields: counted from its next start
            if self.active:
                if self.stop_after and self.steps >= self.stop_after:
                    self.done = True
                    self.on_done()
                    return False
                self.steps += 1
        if recorded:
            self.total[code] = self.total.get(code, 0) + 1
            if self.active:
                self.counted[code] = self.counted.get(code, 0) + 1
        return recorded or is_root

    def returned(self, code) -> None:
        recorded, is_root, resumed = self._info(code)
        if is_root and not resumed and not self.active and self.warmup and self.step_calls >= self.warmup:
            self.active = True  # the warm-up steps are over when the last of them returns

    def profile(self, frame, event, arg) -> None:
        """The ``sys.setprofile`` hook: a generator's or coroutine's resume is a "call" event
        too, and is left out."""
        if self.done or (event != "call" and event != "return"):
            return
        code = frame.f_code
        if event == "return":
            self.returned(code)
        elif not self._info(code)[2] or _starts(frame):
            self.start(code)

    def result(self, command: list[str]) -> dict:
        files: dict[str, dict[str, list[int]]] = {}
        for code, n in self.total.items():
            row = files.setdefault(os.path.abspath(code.co_filename), {})
            name = getattr(code, "co_qualname", code.co_name)
            counted, total = row.get(name, [0, 0])
            row[name] = [counted + self.counted.get(code, 0), total + n]  # two code objects of one name add up
        loaded = set(files)
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and os.path.abspath(path).startswith(self.folders):
                loaded.add(os.path.abspath(path))
        steps = sorted({f"{os.path.abspath(c.co_filename)}:{getattr(c, 'co_qualname', c.co_name)}" for c in self.step_codes})
        return {
            "format": FORMAT, "version": VERSION, "command": command, "python": sys.version.split()[0],
            "folders": [f.rstrip(os.sep) for f in self.folders], "root": self.roots, "step_functions": steps,
            "warmup": self.warmup, "steps": self.steps, "step_calls": self.step_calls,
            "modules": sorted(loaded), "functions": {path: dict(sorted(rows.items())) for path, rows in sorted(files.items())},
        }


def profile_hooks(rec: Recorder):
    """Start recording with ``sys.setprofile`` (every thread started from now on too); the
    function that stops it."""
    threading.setprofile(rec.profile)
    sys.setprofile(rec.profile)

    def stop() -> None:
        sys.setprofile(None)
        threading.setprofile(None)

    return stop


def monitoring_hooks(rec: Recorder):
    """Start recording with ``sys.monitoring`` (3.12+, every thread): a function start is its
    own event (a resume is another), and code neither recorded nor a root stops being reported
    after its first call.  None when the profiler's tool id is taken."""
    mon = sys.monitoring  # type: ignore[attr-defined]
    tool, events = mon.PROFILER_ID, mon.events
    try:
        mon.use_tool_id(tool, "cs-audit trace")
    except ValueError:
        return None

    def on_start(code, offset):
        if rec.done or not rec.start(code):
            return mon.DISABLE
        if rec._info(code)[1]:
            mon.set_local_events(tool, code, events.PY_RETURN)  # the warm-up ends when a step returns
        return None

    def on_return(code, offset, value):
        rec.returned(code)

    mon.register_callback(tool, events.PY_START, on_start)
    mon.register_callback(tool, events.PY_RETURN, on_return)
    mon.set_events(tool, events.PY_START)

    def stop() -> None:
        mon.set_events(tool, 0)
        for code in rec.step_codes:
            mon.set_local_events(tool, code, 0)
        mon.register_callback(tool, events.PY_START, None)
        mon.register_callback(tool, events.PY_RETURN, None)
        mon.free_tool_id(tool)

    return stop


def package_folder(name: str) -> str | None:
    """The folder of an installed top-level package, found without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return os.path.realpath(list(spec.submodule_search_locations)[0])
    return os.path.realpath(os.path.dirname(spec.origin)) if spec.origin else None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        cut = argv.index("--")
        own, program = argv[:cut], argv[cut + 1:]
    else:
        own, program = argv, []
    parser = argparse.ArgumentParser(prog="cs-audit trace (recorder)")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--root", action="append", default=[])
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--tree", action="append", default=[])
    parser.add_argument("--package", action="append", default=[])
    parser.add_argument("--tracer", choices=("auto", "setprofile", "monitoring"), default="auto")
    args = parser.parse_args(own)
    if not program:
        sys.stderr.write("cs-audit trace: no program to run (after --: prog.py ARGS or -m module ARGS)\n")
        return 2
    folders = [os.path.realpath(t) for t in args.tree]
    for name in args.package:
        folder = package_folder(name)
        if folder is None:
            sys.stderr.write(f"cs-audit trace: package {name!r} is not installed for {sys.executable}\n")
            return 2
        folders.append(folder)
    output = os.path.abspath(args.output)
    command = [sys.executable, *program]
    written: list[bool] = []
    stops: list[Callable[[], object]] = []

    def write() -> None:
        if written:
            return
        written.append(True)
        for stop_recording in stops:
            stop_recording()
        data = rec.result(command)
        tmp = output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
        os.replace(tmp, output)
        sys.stderr.write(f"cs-audit trace: {data['steps']} steps counted after {args.warmup} warm-up, "
                         f"{sum(len(r) for r in data['functions'].values())} functions; written {output}\n")

    rec = Recorder(folders, args.root, max(args.warmup, 0), max(args.steps, 0), write)

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), stop)
    # sys.path[0] is this file's folder, whose modules (`report`, `join`) must not shadow the
    # program's: it becomes what `python prog.py` or `python -m module` would have put there
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    if program[0] == "-m":
        if len(program) < 2:
            sys.stderr.write("cs-audit trace: -m needs a module name\n")
            return 2
        sys.argv = [program[1], *program[2:]]
        sys.path.insert(0, os.getcwd())
        run = lambda: runpy.run_module(program[1], run_name="__main__", alter_sys=True)  # noqa: E731
    else:
        script = program[0]
        if not os.path.isfile(script):
            sys.stderr.write(f"cs-audit trace: {script}: no such file\n")
            return 2
        sys.argv = list(program)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        run = lambda: runpy.run_path(script, run_name="__main__")  # noqa: E731
    status = 0
    if args.tracer == "monitoring" and not hasattr(sys, "monitoring"):
        sys.stderr.write(f"cs-audit trace: --tracer monitoring needs Python 3.12 or later ({sys.executable} is {sys.version.split()[0]})\n")
        return 2
    hooks = monitoring_hooks(rec) if args.tracer != "setprofile" and hasattr(sys, "monitoring") else None
    if hooks is None and args.tracer == "monitoring":
        sys.stderr.write("cs-audit trace: the profiler's sys.monitoring tool id is taken by another tool\n")
        return 2
    stops.append(hooks or profile_hooks(rec))
    try:
        run()
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        status = 130
    finally:
        write()
    return status


if __name__ == "__main__":
    sys.exit(main())
