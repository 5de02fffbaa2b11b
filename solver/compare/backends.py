"""Run tasks in parallel and hand each record back as it finishes.

Local: a ``pebble`` process pool (forkserver start), so a pair that overruns its hard
deadline or kills its process is recorded (``timeout`` / ``error``) while the pool
replaces the worker and the batch goes on. Every task gets a fresh worker, forked from a
server that has the solvers imported: a solve never inherits the heap of the ones before
it (in a reused worker, the 10-s fusion solve of contest benchmark 5 came out 4.4% worse
after the layout graphs than alone, deterministically). Ray: the same ``run_task`` as a remote
function on a cluster (``ray`` is an optional extra).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from pebble import ProcessExpired, ProcessPool

from solver.compare.task import Task, blank_record, run_task
from solver.workers import grace_s, limit_memory

Record = dict[str, Any]
OnDone = Callable[[Record], None]
Runner = Callable[[Task], Record]

STOP_POLL_S = 0.5


def hard_deadline_s(task: Task) -> float:
    """Solvers stop at their time limit; the process is killed only well past it (model
    building, evaluation and heuristics that take no limit get the grace)."""
    return task.options.time_limit_s + grace_s(task.options.time_limit_s)


def _failed(task: Task, status: str, error: str, wall: float) -> Record:
    return {**blank_record(task), "status": status, "error": error, "wall_time_s": wall}


def run_local(tasks: list[Task], jobs: int, on_done: OnDone, runner: Runner = run_task,
              stop: Callable[[], bool] | None = None, memory_mb: int = 0) -> None:
    """Run ``tasks`` on ``jobs`` worker processes, each capped at ``memory_mb`` (0: no
    cap); ``runner`` must be importable by name. When ``stop`` answers True the unfinished
    tasks are cancelled (running ones killed)."""
    if not tasks:
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([run_task.__module__])
    with ProcessPool(max_workers=max(1, min(jobs, len(tasks))), max_tasks=1,
                     context=context, initializer=limit_memory,
                     initargs=(memory_mb << 20,)) as pool:
        futures: dict[Future, Task] = {
            pool.schedule(runner, args=(t,), timeout=hard_deadline_s(t)): t for t in tasks}
        pending = set(futures)
        while pending:
            if stop is not None and stop():
                for future in pending:
                    future.cancel()
                return
            done, pending = wait(pending, timeout=STOP_POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                on_done(_collect(future, futures[future]))


def _collect(future: Future, task: Task) -> Record:
    limit = hard_deadline_s(task)
    try:
        return future.result()
    except FutureTimeout:
        return _failed(task, "timeout", f"killed after {limit:.0f} s (time limit "
                       f"{task.options.time_limit_s:g} s plus grace)", limit)
    except ProcessExpired as exc:
        return _failed(task, "error", f"the worker process died (exit code {exc.exitcode})", 0.0)
    except Exception as exc:  # e.g. an unpicklable result; recorded, never fatal
        return _failed(task, "error", f"{type(exc).__name__}: {exc}", 0.0)


def run_ray(tasks: list[Task], address: str | None, on_done: OnDone,
            runner: Runner = run_task) -> None:
    """Run ``tasks`` on a Ray cluster (``address``; None starts a local instance).

    At most one task per cluster CPU is in flight, so a task's hard deadline counts from
    when it can start rather than from when it was queued."""
    try:
        import ray
    except ImportError:
        raise RuntimeError("the ray backend needs Ray: pip install 'layoutsat[ray]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(max_retries=0)(runner)
        slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        queue = list(reversed(tasks))
        in_flight: dict[Any, tuple[Task, float]] = {}
        while queue or in_flight:
            while queue and len(in_flight) < slots:
                task = queue.pop()
                in_flight[remote.remote(task)] = (task, time.monotonic() + hard_deadline_s(task))
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
            for ref in ready:
                task, _deadline = in_flight.pop(ref)
                try:
                    on_done(ray.get(ref))
                except Exception as exc:  # a crashed task is recorded, never fatal
                    on_done(_failed(task, "error", f"{type(exc).__name__}: {exc}", 0.0))
            now = time.monotonic()
            for ref in [r for r, (_t, deadline) in in_flight.items() if deadline < now]:
                task, _deadline = in_flight.pop(ref)
                ray.cancel(ref, force=True)
                on_done(_failed(task, "timeout", f"cancelled after {hard_deadline_s(task):.0f} s",
                                hard_deadline_s(task)))
    finally:
        if started_here:
            ray.shutdown()
