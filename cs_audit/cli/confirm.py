"""``trace`` (record a run's calls per function and per step) and ``confirm`` (join a
profile to the audit)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer

from cs_audit.cli.common import CONFIG, app, check_writable, fail, load_profile, output_path, say, write_output

#: interpreter options that take no value, passed on to the traced program's interpreter
_FLAGS = re.compile(r"^-[bBdEiIOqsSuvR]+$")


def _interpreter(command: list[str]) -> tuple[str, list[str], list[str]]:
    """(python, its own options, the program and its arguments) of ``python [opts] prog.py ARGS``,
    ``python [opts] -m module ARGS``, or a script whose first line names a Python interpreter
    (a console script such as ``vllm``)."""
    exe = shutil.which(command[0]) or command[0]
    if not os.path.isfile(exe):
        fail(f"{command[0]}: no such program")
    if re.match(r"^(python|pypy)[0-9.]*$", os.path.basename(exe)):
        rest = command[1:]
        opts = []
        while rest and _FLAGS.match(rest[0]):
            opts.append(rest.pop(0))
        if not rest:
            fail("no program to trace after the interpreter (prog.py ARGS or -m module ARGS)")
        return exe, opts, rest
    try:
        with open(exe, "rb") as handle:
            first = handle.readline(512).decode("utf-8", "replace").strip()
    except OSError as exc:
        fail(f"{exe}: {exc.strerror}")
    words = first[2:].split() if first.startswith("#!") else []
    if words and os.path.basename(words[0]) == "env":
        words = [shutil.which(words[1]) or words[1]] if len(words) > 1 else []
    if not words or "python" not in os.path.basename(words[0]):
        fail(f"{command[0]}: not a Python program (trace runs `python prog.py`, `python -m module` or a Python script)")
    return words[0], [], [exe, *command[1:]]


@app.command(context_settings={"allow_interspersed_args": False})
def trace(
    command: list[str] = typer.Argument(..., help="after --: python prog.py ARGS, python -m module ARGS, or a Python script"),
    output_raw: str = typer.Option(..., "--output", "-o", help="the JSON to write"),
    root: list[str] = typer.Option([], "--root", help="the step root: a function's qualname or its last parts (repeatable); its calls are the steps"),
    warmup: int = typer.Option(0, "--warmup", min=0, help="steps left out before counting starts"),
    steps: int = typer.Option(0, "--steps", min=0, help="write the JSON once this many steps are counted and stop recording (a server goes on running)"),
    tree: list[Path] = typer.Option([], "--tree", help="a folder whose functions are recorded (repeatable; default: the current folder, unless --package is given)"),
    package: list[str] = typer.Option([], "--package", help="record the functions of this installed package too (repeatable)"),
    tracer: str = typer.Option("auto", "--tracer", help="auto (sys.monitoring on Python 3.12+, else sys.setprofile), setprofile or monitoring"),
) -> None:
    """Run a Python program and record the calls of each function of the tree, per step of --root."""
    if tracer not in ("auto", "setprofile", "monitoring"):
        fail(f"unknown tracer {tracer!r}; choose from auto, setprofile, monitoring")
    output = output_path(output_raw)
    assert output is not None
    check_writable(output)
    folders = tree or ([] if package else [Path(".")])
    for folder in folders:
        if not folder.is_dir():
            fail(f"{folder}: not a directory")
    python, opts, program = _interpreter(list(command))
    if not root:
        say("cs-audit trace: no --root given: calls are counted, but no rate per step")
    recorder = Path(__file__).resolve().parent.parent / "confirm" / "recorder.py"
    argv = [python, *opts, str(recorder), "-o", str(output.resolve()), "--warmup", str(warmup), "--steps", str(steps),
            "--tracer", tracer]
    for r in root:
        argv += ["--root", r]
    for folder in folders:
        argv += ["--tree", str(folder.resolve())]
    for name in package:
        argv += ["--package", name]
    try:
        child = subprocess.Popen([*argv, "--", *program])
    except OSError as exc:
        fail(f"{python}: cannot run: {exc.strerror}")
    while True:
        try:
            status = child.wait()
            break
        except KeyboardInterrupt:  # Ctrl-C reached the program too: wait while it writes its counts
            continue
    if not output.is_file():
        fail(f"the traced program wrote no {output} (exit {status})")
    raise typer.Exit(status)


@app.command()
def confirm(
    profile_path: Path = typer.Argument(..., metavar="PROFILE", help="trace JSON, pstats, py-spy raw, speedscope, viztracer JSON or torch Chrome trace"),
    path: Path = typer.Argument(Path("."), help="the scanned tree"),
    root: list[str] = typer.Option([], "--root", help="a call-count profile's step root (its calls are the steps)"),
    steps: int = typer.Option(0, "--steps", min=0, help="the steps the profile covers, when it does not say"),
    profile_format: Optional[str] = typer.Option(None, "--profile-format", help="the profile's format (default: found from its first bytes)"),
    format: str = typer.Option("text", "--format", "-f", help="text or json"),
    output_raw: Optional[str] = typer.Option(None, "--output", "-o", help="write it here"),
    limit: int = typer.Option(20, "--limit", min=1, help="rows per list in the text"),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="worker processes (default: cores)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="neither read nor write the per-file facts cache"),
    config_file: Optional[Path] = CONFIG,
) -> None:
    """Join a run's profile to the audit of PATH: which findings ran per step, which did not."""
    from cs_audit.confirm.profiles import FORMATS

    if format not in ("text", "json"):
        fail(f"unknown format {format!r}; choose from text, json")
    if profile_format is not None and profile_format not in FORMATS:
        fail(f"unknown profile format {profile_format!r}; choose from {', '.join(FORMATS)}")
    output = output_path(output_raw)
    if output is not None:
        check_writable(output)
    if not path.is_dir():
        fail(f"{path}: not a directory")
    profile = load_profile(profile_path, profile_format, root, steps)
    from cs_audit.api import run_audit
    from cs_audit.cli.graph import _model
    from cs_audit.confirm.report import confirm as confirm_tree
    from cs_audit.render.confirm import render_confirm_json, render_confirm_text

    config, rs, model, _ = _model(path, jobs, no_cache, config_file)
    run = join_or_fail(profile, profile_path, Path(config.root), model.facts)
    result = run_audit(config, rs)
    c = confirm_tree(profile, run, result, model, limit)
    text = render_confirm_json(c) if format == "json" else render_confirm_text(c, limit)
    if output is not None:
        write_output(output, text)
    else:
        sys.stdout.write(text)


def join_or_fail(profile, profile_path: Path, root: Path, tree_files):
    """The profile joined to the tree, or one line when none of its files is the tree's."""
    from cs_audit.confirm.join import join

    run = join(profile, root, [p for p in tree_files if p.endswith((".py", ".pyw"))])
    if run.root is None:
        fail(f"{profile_path}: none of the profile's {run.outside} files is in {root} (a profile of another tree?)")
    return run
