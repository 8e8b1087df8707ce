"""Crash-isolated parallel map: every file is parsed in a worker process.

A scanned tree is hostile input.  libcst can kill its process outright (a
``x and x and ...`` chain of 10,000 terms overflows the native parser's stack:
SIGSEGV, which no ``except`` catches), some files take minutes, and a parser
can eat all memory.  So the parent never parses: it hands chunks of items to
worker processes over pipes and takes one result back per item, in order.

Per worker:

* ``RLIMIT_AS`` = ``MEMORY_LIMIT_BYTES`` (Python allocations raise ``MemoryError``,
  native ones abort the worker); core dumps off (a crash must not drop a ``core``
  file into the user's directory); SIGINT ignored (the parent cleans up); stdout
  sent to ``/dev/null`` (the JSON report may be going to the parent's stdout);
  ``faulthandler`` off (a crash is reported as data, not as a traceback on stderr).
* Before each item, ``RLIMIT_CPU`` is set to the CPU used so far plus
  ``TIMEOUT_S``: a file that spins is stopped by the kernel (SIGXCPU) after that
  much CPU time whatever the machine's load, so ``-j4`` on two cores gives the
  same verdicts as ``-j1``.  The parent also stops a worker that spends
  ``2 * TIMEOUT_S`` of wall time on one item while using (almost) no CPU: it is
  blocked, and the CPU limit would never fire.  A worker that is busy but slowed
  down by a loaded machine is left to its CPU limit (up to ``10 *`` that wall time).

When a worker dies, the item it was on gets a ``Failure`` (``parser-crash``, or
``timeout`` for SIGXCPU and the parent's wall-clock stop), the rest of its chunk
goes back in the queue and a new worker takes over; every other item is still
done.  Determinism: an item's result is a pure function of the item, except for
failures that may depend on what the worker did before (a crash, running out of
memory, an internal error).  Such a failure from a worker that had already done
other items is not trusted: the item is run again alone in a fresh worker and
that verdict is the result.  So the output is the same for any ``jobs`` and any
chunking.  Results come back in input order, exactly one per input.

Workers are forked (cheap: rules and imported modules inherited, no pickling) where the
platform can fork, spawned elsewhere.

A worker ends with its parent, however the parent ends (a SIGKILL runs none of its clean-up):
on Linux the kernel kills it (``PR_SET_PDEATHSIG``); anywhere a thread of its own watches
the parent, as a worker parsing a file or sending a result never reaches its work loop; and
it holds no parent's end of any pipe, so a pipe whose parent is gone reads as closed.  The
parent kills and reaps its workers when the results are done or dropped, on an exception,
and at exit (``stop_workers``: the command line ends with ``os._exit``, which runs no exit
handler).
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import gc
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, TypeVar

from cs_audit.sources import FileError, SourceFile

#: per-file CPU-time limit in seconds (the wall-clock stop is twice this)
TIMEOUT_S: float = 60.0
#: address-space cap of each worker process, in bytes
MEMORY_LIMIT_BYTES: int = 2 << 30
#: most items handed to a worker at once (fewer when there are few items per worker)
CHUNK_MAX = 32
#: items a worker handles between two cyclic garbage collections (the collector is off otherwise)
GC_EVERY = 256

_START_METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
#: how often a worker's watchdog looks for its parent, in seconds
_PARENT_CHECK_S = 1.0
#: prctl(2) option: the signal a process gets when its parent dies (Linux)
_PR_SET_PDEATHSIG = 1

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Failure:
    """Why an item has no result: ``kind`` is ``parser-crash``, ``timeout`` or ``internal``."""

    kind: str
    detail: str


# --------------------------------------------------------------------------- worker side


#: the parent's ends of the workers' pipes.  A forked worker inherits every one (its own, and
#: those of the workers started before it) and closes them at once: while any process holds a
#: parent's end, a worker whose parent died would block forever sending a large result
_PARENT_ENDS: weakref.WeakSet[Connection] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for conn in list(_PARENT_ENDS):
        with contextlib.suppress(OSError):
            conn.close()
    _PARENT_ENDS.clear()
    _LIVE_POOLS.clear()  # the parent's: a child must never stop its parent's workers


def _die_with_parent(parent_pid: int) -> None:
    """End this worker when ``parent_pid`` is no longer its parent."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):  # no ctypes, or a libc without prctl: the watchdog is left
            import ctypes

            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # it died before the signal was asked for
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="cs-audit-watchdog", daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(_PARENT_CHECK_S)
        if os.getppid() != parent_pid:  # orphaned: adopted by init or a subreaper
            os._exit(1)


def _limit_worker(memory_limit: int | None) -> None:
    try:
        import resource
    except ImportError:  # not a POSIX system: no limits but the parent's wall clock
        resource = None  # type: ignore[assignment]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if resource is not None:
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(Exception):  # Linux: not even a piped core dump (it would also delay the verdict)
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4, 0 = off
    if memory_limit and resource is not None:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = memory_limit if hard == resource.RLIM_INFINITY else min(memory_limit, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    faulthandler.disable()  # a crash is reported as data, not as a traceback on the parent's stderr
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the worker


def _arm_cpu_limit(timeout: float | None) -> None:
    if not timeout:
        return
    try:
        import resource
    except ImportError:
        return

    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime) + 1 + math.ceil(timeout)
    _cur, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _worker_main(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float | None,
                 memory_limit: int | None, parent_pid: int) -> None:
    _die_with_parent(parent_pid)  # first: its thread's stack counts against the address-space cap
    _limit_worker(memory_limit)
    # Facts are trees of acyclic objects freed by reference counting: the cyclic collector
    # only costs time here (a noticeable part of parse/extract).  What the fork inherited is
    # frozen (never scanned, pages stay shared) and a collection runs every GC_EVERY items instead.
    gc.freeze()
    gc.disable()
    code = 0
    done = 0
    try:
        while True:
            chunk = conn.recv()
            if chunk is None:
                return
            for index, item in chunk:
                _arm_cpu_limit(timeout)
                try:
                    message: tuple[int, bool, Any] = (index, True, fn(item, *args))
                except MemoryError:
                    message = (index, False, ("parser-crash", "out of memory"))
                except BaseException as exc:  # noqa: BLE001 - reported for this item only
                    message = (index, False, ("internal", f"{type(exc).__name__}: {exc}"))
                try:
                    conn.send(message)
                except MemoryError:
                    conn.send((index, False, ("parser-crash", "out of memory")))
                except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be pickled
                    conn.send((index, False, ("internal", f"result could not be sent: {type(exc).__name__}: {exc}")))
                done += 1
                if done % GC_EVERY == 0:
                    gc.collect()
    except (EOFError, OSError):
        code = 1
    finally:
        os._exit(code)  # no atexit handlers, no flushing of stdio buffers copied from the parent


# --------------------------------------------------------------------------- parent side


@dataclass(eq=False)
class _Worker:
    process: Any
    conn: Connection
    #: items of the current chunk not yet answered, first = in progress
    items: deque[int] = field(default_factory=deque)
    #: items answered in this worker's life
    done: int = 0
    #: when the item in progress started (last message or chunk sent)
    started: float = 0.0
    #: CPU seconds the worker had used at ``mark`` (a wall-clock time), None where unknown
    cpu_mark: float | None = None
    mark: float = 0.0
    #: the parent stopped it for the wall-clock limit: why
    stopped: str = ""


@dataclass(frozen=True)
class _Chunk:
    items: tuple[int, ...]
    #: must run in a worker that has done nothing else (confirming a failure)
    fresh: bool = False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: a worker that used less CPU than this share of the wall time since its last check is blocked
_BLOCKED_SHARE = 0.02
#: a busy worker is stopped anyway after this many wall-clock limits on one item
_WALL_CAP = 10


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) used by process ``pid`` so far; None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        fields = data[data.rindex(b")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, ValueError, IndexError):
        return None


def cpu_time_exceeded(timeout: float | None) -> str:
    """The detail of a ``timeout`` the CPU-time limit stopped: a verdict on the item alone
    under that limit (a wall-clock stop depends on the machine's state too)."""
    return f"used more than {timeout:g}s of CPU time: stopped"


def _death(exitcode: int | None, timeout: float | None, stopped: str, wall: float | None) -> Failure:
    if stopped:
        return Failure("timeout", stopped)
    if exitcode is not None and exitcode < 0:
        number = -exitcode
        if number == signal.SIGXCPU:
            return Failure("timeout", cpu_time_exceeded(timeout))
        name = _signal_name(number)
        if number == signal.SIGKILL:
            return Failure("parser-crash", f"worker process killed ({name}), e.g. out of memory")
        if number == signal.SIGABRT:
            return Failure("parser-crash", f"worker process aborted ({name}), e.g. out of memory in native code")
        return Failure("parser-crash", f"the parser crashed the worker process ({name})")
    return Failure("parser-crash", f"worker process exited unexpectedly (status {exitcode})")


def _default_confirm(outcome: object) -> bool:
    return isinstance(outcome, Failure) and outcome.kind != "timeout"


class _Pool(Generic[T]):
    def __init__(self, fn: Callable[..., Any], items: Sequence[T], args: tuple[Any, ...], jobs: int,
                 timeout: float | None, wall_timeout: float | None, memory_limit: int | None,
                 chunk_size: int | None, confirm: Callable[[object], bool]) -> None:
        self.fn, self.items, self.args = fn, items, args
        self.timeout, self.wall, self.memory_limit = timeout, wall_timeout, memory_limit
        self.confirm = confirm
        n = len(items)
        self.jobs = max(1, jobs)
        size = chunk_size or max(1, min(CHUNK_MAX, math.ceil(n / (self.jobs * 4))))
        self.pending: deque[_Chunk] = deque(_Chunk(tuple(range(i, min(i + size, n)))) for i in range(0, n, size))
        self.results: dict[int, object] = {}
        self.workers: list[_Worker] = []
        # spelled out: each literal gives its own context type (``Process`` is on those alone)
        self.ctx = multiprocessing.get_context("fork") if _START_METHOD == "fork" else multiprocessing.get_context("spawn")
        _LIVE_POOLS.add(self)

    # -- workers
    def _spawn(self) -> _Worker | None:
        parent_conn, child_conn = self.ctx.Pipe(duplex=True)
        _PARENT_ENDS.add(parent_conn)
        process = self.ctx.Process(
            target=_worker_main, daemon=True, name="cs-audit-worker",
            args=(child_conn, self.fn, self.args, self.timeout, self.memory_limit, os.getpid()),
        )
        try:
            process.start()
        except OSError as exc:
            parent_conn.close()
            child_conn.close()
            if not self.workers:  # nothing can run: every remaining item fails, the scan still ends
                self._fail_all(Failure("internal", f"cannot start a worker process: {exc}"))
            return None
        child_conn.close()
        worker = _Worker(process, parent_conn)
        self.workers.append(worker)
        return worker

    def _fail_all(self, failure: Failure) -> None:
        while self.pending:
            for index in self.pending.popleft().items:
                self.results[index] = failure

    def _retire(self, worker: _Worker) -> None:
        try:
            worker.conn.send(None)
        except OSError:
            pass
        worker.conn.close()
        worker.process.join(timeout=5)
        if worker.process.exitcode is None:
            worker.process.kill()
            worker.process.join()
        self.workers.remove(worker)

    def close(self) -> None:
        for worker in list(self.workers):
            if worker.process.exitcode is None:
                worker.process.kill()
            worker.process.join()
            worker.conn.close()
        self.workers.clear()
        _LIVE_POOLS.discard(self)

    # -- scheduling
    def _start_item(self, worker: _Worker) -> None:
        worker.started = worker.mark = time.monotonic()
        worker.cpu_mark = _cpu_seconds(worker.process.pid) if self.wall else None

    def _send(self, worker: _Worker, chunk: _Chunk) -> None:
        worker.items = deque(chunk.items)
        self._start_item(worker)
        try:
            worker.conn.send([(i, self.items[i]) for i in chunk.items])
        except OSError:  # it died before taking the chunk: nothing was started, no blame
            self.pending.appendleft(chunk)
            worker.items = deque()
            self._bury(worker, blame=False)

    def _dispatch(self) -> None:
        while self.pending:
            chunk = self.pending[0]
            idle = [w for w in self.workers if not w.items]
            if chunk.fresh:
                worker = next((w for w in idle if w.done == 0), None)
                if worker is None and len(self.workers) >= self.jobs and idle:
                    self._retire(idle.pop(0))
                if worker is None and len(self.workers) < self.jobs:
                    worker = self._spawn()
                if worker is None and idle:  # no fresh worker can be started: the best we can do
                    worker = idle[0]
            else:
                worker = idle[0] if idle else (self._spawn() if len(self.workers) < self.jobs else None)
            if worker is None:
                return
            self.pending.popleft()
            self._send(worker, chunk)

    # -- results
    def _complete(self, worker: _Worker, index: int, outcome: object) -> None:
        if worker.done > 0 and self.confirm(outcome):
            # may depend on what this worker did before: run it again alone, in a fresh worker
            self.pending.appendleft(_Chunk((index,), fresh=True))
        else:
            self.results[index] = outcome
        worker.done += 1

    def _drain(self, worker: _Worker) -> bool:
        """Read every message waiting from ``worker``; False once its pipe is broken."""
        try:
            while worker.conn.poll():
                index, ok, payload = worker.conn.recv()
                if not worker.items or worker.items[0] != index:  # out of protocol: treat as dead
                    return False
                worker.items.popleft()
                if worker.items:
                    self._start_item(worker)
                self._complete(worker, index, payload if ok else Failure(*payload))
        except (EOFError, OSError, ValueError, TypeError):
            return False
        except Exception:  # noqa: BLE001 - a torn message from a worker killed mid-send
            return False
        return True

    def _bury(self, worker: _Worker, blame: bool = True) -> None:
        """``worker`` is dead (or must be): blame the item it was on, requeue the rest."""
        if worker.process.exitcode is None:
            worker.process.kill()
        worker.process.join()
        worker.conn.close()
        if worker in self.workers:
            self.workers.remove(worker)
        if not worker.items:
            return
        rest = list(worker.items)
        if blame:
            index = rest.pop(0)
            self._complete(worker, index, _death(worker.process.exitcode, self.timeout, worker.stopped, self.wall))
        if rest:
            self.pending.appendleft(_Chunk(tuple(rest)))

    def _poll(self) -> None:
        busy = [w for w in self.workers if w.items]
        now = time.monotonic()
        wait_for: float | None = None
        if self.wall and busy:
            wait_for = max(0.0, min(w.mark + self.wall - now for w in busy))
        if not busy:  # nothing running: dispatch again (or everything has failed to start)
            return
        handles: list[Any] = [w.conn for w in busy] + [w.process.sentinel for w in self.workers]
        ready = set(wait(handles, timeout=wait_for))
        for worker in list(self.workers):
            alive = True
            if worker.conn in ready:
                alive = self._drain(worker)
            if not alive or worker.process.sentinel in ready or worker.process.exitcode is not None:
                self._drain(worker)  # results it sent before dying still count
                self._bury(worker)
        if self.wall:
            for worker in [w for w in self.workers if w.items and time.monotonic() - w.mark > self.wall]:
                if self._drain(worker) and worker.items:
                    self._check_wall(worker)

    def _check_wall(self, worker: _Worker) -> None:
        """A wall-clock period passed on one item: stop the worker if it is blocked (or far too slow)."""
        assert self.wall
        now = time.monotonic()
        if now - worker.mark <= self.wall:
            return
        cpu = _cpu_seconds(worker.process.pid)
        if worker.cpu_mark is None or cpu is None:
            worker.stopped = f"no result after {self.wall:g}s of wall-clock time: stopped"
        elif cpu - worker.cpu_mark < _BLOCKED_SHARE * (now - worker.mark):
            worker.stopped = f"no CPU used for {self.wall:g}s of wall-clock time (blocked): stopped"
        elif now - worker.started > _WALL_CAP * self.wall:
            worker.stopped = f"no result after {_WALL_CAP * self.wall:g}s of wall-clock time: stopped"
        else:  # busy on a loaded machine: its CPU-time limit decides
            worker.cpu_mark, worker.mark = cpu, now
            return
        self._bury(worker)

    def ready(self) -> bool:
        """Whether a worker has an answer waiting, has died, or none is at work (all done, or
        none could start): the parent can stop doing something else in the meantime."""
        busy = [w for w in self.workers if w.items]
        return not busy or any(w.process.exitcode is not None or w.conn.poll() for w in busy)

    def run(self) -> Iterator[object]:
        n = len(self.items)
        next_index = 0
        try:
            while next_index < n:
                while next_index in self.results:
                    yield self.results.pop(next_index)
                    next_index += 1
                if next_index >= n:
                    break
                self._dispatch()
                self._poll()
            for worker in list(self.workers):
                self._retire(worker)
        finally:
            self.close()


#: pools that may have workers running
_LIVE_POOLS: weakref.WeakSet[_Pool[Any]] = weakref.WeakSet()


def stop_workers() -> None:
    """Kill and reap every worker of this process still running."""
    for pool in list(_LIVE_POOLS):
        pool.close()


atexit.register(stop_workers)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def map_isolated(fn: Callable[..., R], items: Sequence[T], args: tuple[Any, ...] = (), *, jobs: int = 1,
                 timeout: float | None = None, wall_timeout: float | None = None, memory_limit: int | None = None,
                 chunk_size: int | None = None, confirm: Callable[[object], bool] | None = None) -> Results[R | Failure]:
    """``fn(item, *args)`` for every item, in ``jobs`` worker processes; yields, in input order,
    exactly one result per item: what ``fn`` returned, or a ``Failure``.

    ``timeout`` (CPU seconds per item) defaults to ``TIMEOUT_S``, ``wall_timeout`` to twice the
    timeout, ``memory_limit`` (bytes per worker) to ``MEMORY_LIMIT_BYTES``; 0 turns a limit off.
    ``confirm(outcome)`` says which outcomes must be confirmed in a fresh worker when the worker
    that produced them had done other items first (default: crashes and internal failures).
    """
    timeout = TIMEOUT_S if timeout is None else timeout
    if wall_timeout is None:
        wall_timeout = 2 * timeout if timeout else 0
    memory_limit = MEMORY_LIMIT_BYTES if memory_limit is None else memory_limit
    if not items:
        return Results(iter(()))
    check = confirm or _default_confirm
    pool: _Pool[T] = _Pool(fn, items, args, jobs, timeout or None, wall_timeout or None, memory_limit or None,
                           chunk_size, lambda outcome: _default_confirm(outcome) or check(outcome))
    pool._dispatch()  # the workers start now, not at the first ``next``
    return Results(pool.run(), pool.ready, pool.close)  # type: ignore[arg-type]


class Results(Iterator[R]):
    """The results of ``map_isolated`` / ``map_files``, in input order.  The workers are
    already at work: the caller can do something else first, until ``ready()``.  Workers
    left when the results are dropped unread are stopped."""

    def __init__(self, results: Iterator[R], ready: Callable[[], bool] = lambda: True,
                 close: Callable[[], None] = lambda: None) -> None:
        self._results = results
        self.ready = ready
        self._close = close

    def __next__(self) -> R:
        return next(self._results)

    def close(self) -> None:
        """Stop here: the workers still running are stopped (as when the results are dropped)."""
        close = getattr(self._results, "close", None)
        if close is not None:
            close()
        self._close()

    def __del__(self) -> None:
        self._close()


# --------------------------------------------------------------------------- files


def _may_depend_on_worker(outcome: object) -> bool:
    """A file's error that a previous file in the same worker could have caused."""
    return isinstance(outcome, FileError) and (
        outcome.kind == "internal" or (outcome.kind == "parser-crash" and "memory" in outcome.message.lower())
    )


def _file_result(source: SourceFile, outcome: object, memory_limit: int) -> object:
    if isinstance(outcome, Failure):
        detail = outcome.detail
        if detail == "out of memory":
            detail = f"out of memory (limit {memory_limit >> 20} MiB per worker)"
        prefix = "internal error: " if outcome.kind == "internal" else ""
        return FileError(source.path, outcome.kind, prefix + detail)  # type: ignore[arg-type]
    if isinstance(outcome, FileError) and outcome.kind == "internal" and "MemoryError" in outcome.message:
        return FileError(source.path, "parser-crash", f"out of memory (limit {memory_limit >> 20} MiB per worker)")
    return outcome


def map_files(analyse: Callable[..., R], sources: Sequence[SourceFile], args: tuple[Any, ...] = (), *, jobs: int = 1,
              timeout: float | None = None, memory_limit: int | None = None) -> Results[R | FileError]:
    """``analyse(source, *args)`` for each file in worker processes (started on the call), one
    result per file in input order; a file whose worker crashed, hung or ran out of memory
    gets a ``FileError``."""
    memory_limit = MEMORY_LIMIT_BYTES if memory_limit is None else memory_limit
    outcomes = map_isolated(analyse, sources, args, jobs=jobs, timeout=timeout, memory_limit=memory_limit,
                            confirm=_may_depend_on_worker)
    results = (_file_result(source, outcome, memory_limit) for source, outcome in zip(sources, outcomes))
    return Results(results, outcomes.ready, outcomes.close)  # type: ignore[arg-type]
