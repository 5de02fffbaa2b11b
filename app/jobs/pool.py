"""The bounded pool of solver worker processes shared by the synchronous routes and jobs.

``pebble`` gives what a long-running service needs from a process pool: a per-task hard
deadline, cancellation of a running task (its process is killed), and a crashed or killed
worker replaced while every other task goes on.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from pebble import ProcessExpired, ProcessPool

from app.jobs.work import limit_memory

GRACE_S = 30.0


def hard_deadline_s(time_limit_s: float) -> float:
    """Solvers stop at their limit themselves; the process is killed only well past it
    (model building and evaluation get the grace)."""
    return time_limit_s + max(GRACE_S, time_limit_s)


class SolveFailed(Exception):
    """A solve that gave no answer: why, and the HTTP status a synchronous route answers."""

    def __init__(self, reason: str, status: int):
        super().__init__(reason)
        self.reason = reason
        self.status = status


def failure(exc: BaseException, time_limit_s: float, memory_mb: int) -> SolveFailed:
    """What went wrong in a worker, in words a client can act on."""
    if isinstance(exc, FutureTimeout):
        return SolveFailed(f"no solution within the time limit: the solve was stopped after "
                           f"{hard_deadline_s(time_limit_s):.0f} s (time limit "
                           f"{time_limit_s:g} s plus grace)", 504)
    if isinstance(exc, MemoryError):
        return SolveFailed(f"the solve needed more than the worker memory limit of "
                           f"{memory_mb} MiB (LAYOUTSAT_WORKER_MEMORY_MB)", 413)
    if isinstance(exc, ProcessExpired):
        return SolveFailed(f"the worker process died (exit code {exc.exitcode}); the pool "
                           "replaced it", 503)
    if isinstance(exc, CancelledError):
        return SolveFailed("cancelled", 409)
    return SolveFailed(f"the solver failed: {type(exc).__name__}: {exc}", 500)


class SolvePool:
    """``size`` worker processes (forkserver: never a fork of the threaded server)."""

    def __init__(self, size: int, memory_mb: int):
        self.size = size
        self.memory_mb = memory_mb
        self._in_flight = 0
        self._lock = threading.Lock()
        self._pool = ProcessPool(max_workers=size,
                                 context=multiprocessing.get_context("forkserver"),
                                 initializer=limit_memory, initargs=(memory_mb << 20,))

    @property
    def in_flight(self) -> int:
        """Tasks submitted and not finished (running or waiting for a worker)."""
        return self._in_flight

    @property
    def busy(self) -> int:
        return min(self._in_flight, self.size)

    def submit(self, fn: Callable[..., Any], args: tuple, time_limit_s: float) -> Future:
        with self._lock:
            self._in_flight += 1
        future = self._pool.schedule(fn, args=args, timeout=hard_deadline_s(time_limit_s))
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: Future) -> None:
        with self._lock:
            self._in_flight -= 1

    async def run(self, fn: Callable[..., Any], args: tuple, time_limit_s: float) -> Any:
        """Await a task without blocking the event loop; a failure raises SolveFailed."""
        future = self.submit(fn, args, time_limit_s)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()  # the client went away: free the worker
            raise
        except Exception as exc:
            raise failure(exc, time_limit_s, self.memory_mb) from None

    def close(self) -> None:
        self._pool.stop()
        self._pool.join(timeout=10)
