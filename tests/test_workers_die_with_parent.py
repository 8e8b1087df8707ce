"""Worker processes end with the scan that started them (#44), even when it is killed with
SIGKILL and runs none of its own clean-up.  The processes are read from /proc: Linux only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cs_audit import api
from cs_audit.pool import map_isolated
from cs_audit.testing import write_tree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc")

PROJECT = Path(__file__).resolve().parent.parent
_TICKS = os.sysconf("SC_CLK_TCK")


def _environment() -> dict[str, str]:
    """A `python -m cs_audit` (or `-c`) run that imports this checkout's package."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(PROJECT), os.environ.get("PYTHONPATH", "")) if p)}


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state first); None once it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return data[data.rindex(b")") + 2:].split()


def _children(parent: int) -> dict[int, bytes]:
    """The processes whose parent is ``parent``, each with its start time (a pid reused later
    has another)."""
    found = {}
    for name in os.listdir("/proc"):
        fields = _stat(int(name)) if name.isdigit() else None
        if fields is not None and int(fields[1]) == parent:
            found[int(name)] = fields[19]
    return found


def _cpu_seconds(pid: int) -> float:
    fields = _stat(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / _TICKS


def _running(processes: dict[int, bytes]) -> list[int]:
    """Those of ``processes`` still running (a zombie has ended: only its exit status is left)."""
    alive = []
    for pid, started in processes.items():
        fields = _stat(pid)
        if fields is not None and fields[19] == started and fields[0] != b"Z":
            alive.append(pid)
    return alive


def _gone_within(processes: dict[int, bytes], seconds: float) -> list[int]:
    """Those of ``processes`` still running after waiting up to ``seconds`` for them to end."""
    deadline = time.monotonic() + seconds
    while _running(processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _running(processes)


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _busy_workers(proc: subprocess.Popen[bytes], count: int, cpu: float) -> dict[int, bytes]:
    """``count`` children of ``proc`` that have each used ``cpu`` seconds (at work on an item)."""
    deadline = time.monotonic() + 120
    workers: dict[int, bytes] = {}
    while proc.poll() is None and time.monotonic() < deadline:
        workers = _children(proc.pid)
        if len(workers) >= count and all(_cpu_seconds(pid) >= cpu for pid in workers):
            return workers
        time.sleep(0.05)
    raise AssertionError(f"no {count} busy workers (exit status {proc.poll()}, children {workers})")


def _survivors_of_sigkill(proc: subprocess.Popen[bytes], busy_cpu: float) -> list[int]:
    """Kill ``proc`` with SIGKILL once two of its workers are busy (each has used ``busy_cpu``
    seconds): those still running a while later (none are left running after the test)."""
    workers: dict[int, bytes] = {}
    try:
        workers = _busy_workers(proc, 2, busy_cpu)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        return _gone_within(workers, 20)
    finally:
        proc.kill()
        proc.wait()
        _kill_all(_running(workers))


#: a module that takes a worker seconds and gives facts larger than a pipe's buffer: a
#: worker whose parent is gone finishes it, then blocks sending them unless its pipe is closed
_LARGE_MODULE = "import logging, os\nlogger = logging.getLogger(__name__)\n\ndef step(x, i):\n" + "".join(
    f"    logger.debug(f'step {{i}} {n} %s', x.item(), os.environ.get('K{n}_DEBUG'))\n" for n in range(1500))


def test_no_worker_outlives_a_sigkill_of_the_scan(tmp_path: Path) -> None:
    # enough files for the scan to start a worker per job (fewer are parsed in one)
    tree = write_tree(tmp_path / "tree", {f"m{i}.py": _LARGE_MODULE for i in range(api.POOL_MIN_FILES)})
    proc = subprocess.Popen([sys.executable, "-m", "cs_audit", "scan", str(tree), "-j", "2", "--no-cache", "--no-history",
                             "-q", "-f", "json", "-o", str(tmp_path / "report.json")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_environment())
    assert _survivors_of_sigkill(proc, busy_cpu=0.5) == []


def test_without_the_kernels_parent_death_signal_workers_still_end(tmp_path: Path) -> None:
    """Where ``PR_SET_PDEATHSIG`` is missing (not Linux), a worker ends by its own watch of the
    parent: one spinning on an item forever, one blocked sending a result nobody reads."""
    program = (
        "import ctypes, time\n"
        "class NoPrctl:  # a platform without prctl\n"
        "    def __init__(self, *args, **kwargs): pass\n"
        "    def __getattr__(self, name): raise AttributeError(name)\n"
        "ctypes.CDLL = NoPrctl\n"
        "from cs_audit.pool import map_isolated\n"
        "def work(item):\n"
        "    sum(range(10 ** 7))\n"
        "    if item == 'large':\n"
        "        return b'x' * (64 << 20)\n"
        "    while True:\n"
        "        pass\n"
        "results = map_isolated(work, ['large', 'spin'], jobs=2, chunk_size=1, timeout=0)\n"
        "time.sleep(3600)  # never reads a result\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", program], env=_environment(), cwd=tmp_path)
    assert _survivors_of_sigkill(proc, busy_cpu=0.1) == []


def _sockets(pid: int) -> set[str]:
    """The sockets process ``pid`` holds (``socket:[inode]``)."""
    held = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except PermissionError:  # a worker is not dumpable (no core files): only root reads its fds
        pytest.skip("the workers' file descriptors are readable by root only")
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            held.add(target)
    return held


def _block(item: int) -> int:
    time.sleep(3600)
    return item


def test_a_worker_holds_no_parents_end_of_any_pipe() -> None:
    sockets, children = _sockets(os.getpid()), _children(os.getpid())
    results = map_isolated(_block, [1, 2, 3], jobs=3, chunk_size=1)
    try:
        parent_ends = _sockets(os.getpid()) - sockets
        workers = {pid: started for pid, started in _children(os.getpid()).items() if pid not in children}
        assert len(parent_ends) == len(workers) == 3
        assert {pid: _sockets(pid) & parent_ends for pid in workers} == {pid: set() for pid in workers}
    finally:
        results.close()
