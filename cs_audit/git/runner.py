"""The one way cs-audit runs git.  Every git process (discovery, blame, commit-graph,
``check --since``, ``report --rev/--range``) is started by :func:`run` or :func:`start`.

Each runs as an argument list with stdin closed or piped, with ``-c`` overrides that
turn off what a repository's configuration could make git execute or page through
(fsmonitor, hooks, pager, external diff, signature checks, ssh, and the programs of every
filter and diff driver it defines), with a timeout, and with an environment
made here: the caller's ``GIT_*`` variables dropped (a stray ``GIT_DIR`` must not
redirect a scan), optional locks off (git never writes the index back), literal
pathspecs (file names are names, not globs) and the C locale (messages are parsed).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.quotepath=false",
    "core.pager=cat",
    "core.sshCommand=",
    "diff.external=",
    "log.showSignature=false",
    "gpg.program=",
    "protocol.allow=never",
)
#: what a filter or diff driver named in a repository's configuration may run: emptied for
#: every driver that configuration names (``driver_overrides``)
_DRIVER_PROGRAMS = {"filter": ("clean", "smudge", "process"), "diff": ("textconv", "command")}
SAFE_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_LITERAL_PATHSPECS": "1",
    "GIT_PAGER": "cat",
    "LC_ALL": "C",
    "LANGUAGE": "C",
}
#: a git command that takes longer than this is stopped (a hung blame must not hang a scan)
DEFAULT_TIMEOUT = 600.0


class GitError(RuntimeError):
    """A git command could not run or failed; ``hint`` says what the user can do."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(SAFE_ENV)
    if extra:
        env.update(extra)
    return env


def git_argv(args: Sequence[str], overrides: Sequence[str] = ()) -> list[str]:
    argv = ["git"]
    for kv in (*SAFE_CONFIG, *overrides):
        argv += ["-c", kv]
    return argv + list(args)


#: cwd -> the overrides that neutralise the drivers its repository's configuration names
_DRIVERS: dict[str, tuple[str, ...]] = {}


def driver_overrides(cwd: Path | str) -> tuple[str, ...]:
    """``-c`` values that empty the programs of every filter and diff driver the
    configuration seen from ``cwd`` defines (``.git/config``, the user's): a repository's
    ``.gitattributes`` can name a driver, and git would run its program on a status, a
    diff or a blame.  Listed once per directory, by a ``git config`` that runs nothing."""
    key = os.path.abspath(cwd)
    cached = _DRIVERS.get(key)
    if cached is not None:
        return cached
    overrides: list[str] = []
    try:
        proc = subprocess.run(git_argv(["config", "--null", "--name-only", "--get-regexp", r"^(filter|diff)\."]),
                              cwd=cwd, env=git_env(), capture_output=True, timeout=DEFAULT_TIMEOUT, check=False,
                              stdin=subprocess.DEVNULL)
        names = proc.stdout.decode("utf-8", "surrogateescape").split("\0") if proc.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        names = []
    # `filter.<driver>.clean`: the driver is everything between the first and the last dot
    # (`filter.my.driver.clean` names the driver `my.driver`)
    drivers = sorted({(name.split(".", 1)[0], name.split(".", 1)[1].rpartition(".")[0]) for name in names if name.count(".") >= 2})
    for section, driver in drivers:
        for program in _DRIVER_PROGRAMS.get(section, ()):
            overrides.append(f"{section}.{driver}.{program}=")
        if section == "filter":
            overrides.append(f"filter.{driver}.required=false")
    _DRIVERS[key] = tuple(overrides)
    return _DRIVERS[key]


def run(cwd: Path | str, args: Sequence[str], *, env: Mapping[str, str] | None = None, stdin: bytes = b"",
        timeout: float = DEFAULT_TIMEOUT) -> tuple[int, bytes, bytes]:
    """Run one git command: (exit code, stdout, stderr).  Exit code 127 when git cannot be
    started, 124 when it timed out (as ``timeout(1)`` reports it); never raises."""
    try:
        proc = subprocess.run(git_argv(args, driver_overrides(cwd)), cwd=cwd, env=git_env(env), input=stdin,
                              capture_output=True, timeout=timeout, check=False)
    except OSError as exc:
        return 127, b"", str(exc).encode()
    except subprocess.TimeoutExpired:
        return 124, b"", f"git {args[0] if args else ''} timed out after {timeout:.0f}s".encode()
    return proc.returncode, proc.stdout, proc.stderr


def output(cwd: Path | str, args: Sequence[str], *, check: bool = True, timeout: float = DEFAULT_TIMEOUT) -> bytes:
    """stdout of one git command; :class:`GitError` when it cannot run, times out or (with
    ``check``) fails."""
    code, out, err = run(cwd, args, timeout=timeout)
    if code == 127 and not out:
        raise GitError("git is not installed")
    if code == 124:
        raise GitError(err.decode("utf-8", "replace"))
    if check and code != 0:
        message = err.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {message[-1] if message else f'exit {code}'}")
    return out


def start(cwd: Path | str, args: Sequence[str]) -> subprocess.Popen[bytes]:
    """A long-lived git process with piped stdin/stdout (``cat-file --batch``)."""
    return subprocess.Popen(git_argv(args, driver_overrides(cwd)), cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=git_env())
