"""The bounded pool of solver worker processes shared by the synchronous routes and jobs.

``pebble`` gives what a long-running service needs from a process pool: a per-task hard
deadline, cancellation of a running task (its process is killed), and a crashed or killed
worker replaced while every other task goes on. A pool that breaks anyway (pebble stops
for good when its result pipe fails) is rebuilt before the next task; the task that found
it broken answers 503 naming the cause, and ``/healthz`` says ``degraded`` until a
rebuild succeeds.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from pebble import ProcessExpired, ProcessPool

from solver.deadline import Deadline
from solver.workers import grace_s, limit_memory

log = logging.getLogger("layoutsat.pool")


def hard_deadline_s(deadline: Deadline) -> float:
    """Solvers stop at their deadline themselves; the process is killed only well past it
    (model building and evaluation get the grace), counted from now."""
    return deadline.remaining() + grace_s(deadline.limit_s)


class SolveFailed(Exception):
    """A solve that gave no answer: why, and the HTTP status a synchronous route answers."""

    def __init__(self, reason: str, status: int):
        super().__init__(reason)
        self.reason = reason
        self.status = status

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.reason, self.status))


def failure(exc: BaseException, limit_s: float, memory_mb: int) -> SolveFailed:
    """What went wrong in a worker, in words a client can act on."""
    if isinstance(exc, SolveFailed):
        return exc
    if isinstance(exc, FutureTimeout):
        return SolveFailed(f"no answer within the time limit: the solve was stopped well past "
                           f"its limit of {limit_s:g} s", 504)
    if isinstance(exc, MemoryError):
        return SolveFailed(f"the solve needed more than the worker memory limit of "
                           f"{memory_mb} MiB (LAYOUTSAT_WORKER_MEMORY_MB)", 413)
    if isinstance(exc, ProcessExpired):
        return SolveFailed(f"the worker process died (exit code {exc.exitcode}); the pool "
                           "replaced it", 503)
    if isinstance(exc, CancelledError):
        return SolveFailed("cancelled", 409)
    if isinstance(exc, BrokenProcessPool | RuntimeError):
        return SolveFailed(f"the worker pool broke ({type(exc).__name__}: {exc}); it is "
                           "being rebuilt, retry", 503)
    return SolveFailed(f"the worker failed: {type(exc).__name__}: {exc}", 500)


class SolvePool:
    """``size`` worker processes (forkserver: never a fork of the threaded server)."""

    def __init__(self, size: int, memory_mb: int):
        self.size = size
        self.memory_mb = memory_mb
        self.rebuilds = 0
        self._broken = False
        self._in_flight = 0
        self._lock = threading.Lock()
        self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPool:
        return ProcessPool(max_workers=self.size,
                           context=multiprocessing.get_context("forkserver"),
                           initializer=limit_memory, initargs=(self.memory_mb << 20,))

    @property
    def healthy(self) -> bool:
        """False from a task that found the pool broken until the rebuild (a flag: pebble's
        own ``active`` check stalled the event loop for 100-200 ms under load)."""
        return not self._broken

    @property
    def in_flight(self) -> int:
        """Tasks submitted and not finished (running or waiting for a worker)."""
        return self._in_flight

    @property
    def busy(self) -> int:
        return min(self._in_flight, self.size)

    def _usable(self, rebuild: bool = False) -> ProcessPool:
        """The pool, rebuilt first if a task found it broken (or ``rebuild``)."""
        with self._lock:
            if self._broken or rebuild:
                log.error("worker pool broken; rebuilding it")
                broken, self._pool = self._pool, self._new_pool()
                self._broken = False
                self.rebuilds += 1
                threading.Thread(target=_stop, args=(broken,), daemon=True).start()
            return self._pool

    def submit(self, fn: Callable[..., Any], args: tuple, deadline: Deadline) -> Future:
        pool = self._usable()
        with self._lock:
            self._in_flight += 1
        try:
            future = pool.schedule(fn, args=args, timeout=hard_deadline_s(deadline))
        except RuntimeError:  # broke, and no task has told yet
            self._finished(None)
            pool = self._usable(rebuild=True)
            with self._lock:
                self._in_flight += 1
            future = pool.schedule(fn, args=args, timeout=hard_deadline_s(deadline))
        future.add_done_callback(self._finished)
        return future

    def _finished(self, future: Future | None) -> None:
        with self._lock:
            self._in_flight -= 1
            if future is not None and not future.cancelled() and isinstance(
                    future.exception(), BrokenProcessPool):
                self._broken = True

    async def run(self, fn: Callable[..., Any], args: tuple, deadline: Deadline) -> Any:
        """Await a task without blocking the event loop; a failure raises SolveFailed."""
        future = self.submit(fn, args, deadline)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()  # the client went away: free the worker
            raise
        except Exception as exc:
            raise failure(exc, deadline.limit_s, self.memory_mb) from None

    def close(self, timeout_s: float = 10.0) -> None:
        """Kill the workers (running tasks end at once) and wait at most ``timeout_s``."""
        _stop(self._pool, timeout_s)


def _stop(pool: ProcessPool, timeout_s: float = 10.0) -> None:
    pool.stop()
    pool.join(timeout=timeout_s)
