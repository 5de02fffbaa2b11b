"""Moves queued jobs from the store onto the worker pool, and their outcomes back.

Two lanes: fusion and layout solves take one pool worker each (at most ``pool.size`` run at
once, so the jobs never crowd out the synchronous routes beyond the pool's bound); compare
jobs run one at a time on a thread of their own, since each already spreads its pairs over
its own worker processes. A job leaves ``queued`` only when it can start, so a restart
finds every accepted job either still queued or marked running (and re-queues that one).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from pathlib import Path
from typing import Any

from app.jobs.compare_work import run_compare
from app.jobs.pool import SolvePool, failure
from app.jobs.store import JobRow, JobStore
from app.jobs.work import GOOD_STATUSES, Finished, run_solve
from solver.compare.batch import BatchStopped
from solver.deadline import Deadline
from solver.families import FAMILIES

log = logging.getLogger("layoutsat.jobs")

IDLE_POLL_S = 1.0
EXPIRE_EVERY_S = 300.0
SOLVE_KINDS = tuple(FAMILIES)

OnSolved = Callable[[str, str, float], None]


class Dispatcher:
    """Runs jobs in the background; ``notify`` after a submission to start it at once."""

    def __init__(self, store: JobStore, pool: SolvePool, compare_dir: Path,
                 compare_processes: int, attempts: int, ttl_s: float,
                 on_solved: OnSolved | None = None):
        self.store = store
        self.pool = pool
        self.compare_dir = compare_dir
        self.compare_processes = compare_processes
        self.attempts = attempts
        self.ttl_s = ttl_s
        self.on_solved = on_solved
        self._slots = threading.Semaphore(pool.size)
        self._compare_busy = threading.Event()
        self._running: dict[str, Future] = {}
        self._stopped_compares: set[str] = set()
        self._running_compares: set[str] = set()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dispatcher", daemon=True)
        self._expired_at = 0.0

    def start(self) -> None:
        requeued, failed = self.store.recover(self.attempts)
        if requeued or failed:
            log.info("recovered jobs after a restart", extra={
                "fields": {"requeued": requeued, "failed": failed}})
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop taking jobs and stop the running comparisons; running solves stay
        'running' in the store until the caller re-queues them (``running_ids``)."""
        self._stopping.set()
        self._stopped_compares.update(self._running_compares)
        self._wake.set()
        self._thread.join(timeout=timeout_s)

    def running_ids(self) -> list[str]:
        """The jobs this dispatcher has started and not finished."""
        return [*self._running, *self._running_compares]

    def notify(self) -> None:
        self._wake.set()

    def cancel(self, job_id: str) -> None:
        """After the store marked the job cancelled: kill its worker or stop its batch."""
        self._stopped_compares.add(job_id)
        future = self._running.get(job_id)
        if future is not None:
            future.cancel()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            started = self._start_solve() | self._start_compare()
            if time.monotonic() - self._expired_at > EXPIRE_EVERY_S:
                self._expired_at = time.monotonic()
                for job_id in self.store.expire(self.ttl_s):
                    shutil.rmtree(self.compare_dir / job_id, ignore_errors=True)
            if not started:
                self._wake.wait(IDLE_POLL_S)
                self._wake.clear()

    def _start_solve(self) -> bool:
        if not self._slots.acquire(blocking=False):
            return False
        job = self.store.claim_next(SOLVE_KINDS)
        if job is None:
            self._slots.release()
            return False
        deadline = Deadline.after(_limit(job), deterministic=job.options.get(
            "deterministic", False))
        try:
            future = self.pool.submit(run_solve, (job.kind, job.payload, job.options, deadline,
                                                  (str(self.store.path), job.id)), deadline)
        except Exception as exc:  # the pool could not be rebuilt: the job waits for it
            self.store.requeue_running([job.id])
            self._slots.release()
            log.error("cannot start a job", extra={"fields": {"job": job.id,
                                                               "error": repr(exc)}})
            return False
        self._running[job.id] = future
        future.add_done_callback(lambda f: self._solved(job, f))
        return True

    def _solved(self, job: JobRow, future: Future) -> None:
        try:
            outcome = future.result()
            if not isinstance(outcome, Finished):
                self.store.fail(job.id, outcome.reason)
                log.warning("job refused", extra={"fields": {"job": job.id,
                                                              "reason": outcome.reason}})
                return
            if self.store.finish(job.id, outcome.body) and outcome.status in GOOD_STATUSES:
                self.store.remember(job.cache_key, outcome.body)
            if self.on_solved:
                self.on_solved(job.kind, job.options["solver"], _elapsed(job))
        except CancelledError:
            pass  # the store already says cancelled
        except Exception as exc:
            if self._stopping.is_set():
                return  # shutting down killed it: it stays 'running', a restart re-queues it
            reason = failure(exc, _limit(job), self.pool.memory_mb).reason
            self.store.fail(job.id, reason)
            log.warning("job failed", extra={"fields": {"job": job.id, "reason": reason}})
        finally:
            self._running.pop(job.id, None)
            self._slots.release()
            self._wake.set()

    def _start_compare(self) -> bool:
        if self._compare_busy.is_set():
            return False
        job = self.store.claim_next(("compare",))
        if job is None:
            return False
        self._compare_busy.set()
        self._running_compares.add(job.id)
        threading.Thread(target=self._compare, args=(job,), name=f"compare-{job.id}",
                         daemon=True).start()
        return True

    def _compare(self, job: JobRow) -> None:
        done = 0

        def recorded(_record: dict[str, Any]) -> None:
            nonlocal done
            done += 1
            self.store.progress(job.id, {"done": done})

        try:
            result = run_compare(job.payload, job.options, self.compare_processes,
                                 self.compare_dir / job.id, recorded,
                                 stop=lambda: job.id in self._stopped_compares,
                                 memory_mb=self.pool.memory_mb)
            self.store.finish(job.id, json.dumps(result))
        except BatchStopped:
            pass  # cancelled (the store says so) or shutting down (re-queued)
        except Exception as exc:  # reported to the poller, never lost
            self.store.fail(job.id, f"{type(exc).__name__}: {exc}")
        finally:
            self._running_compares.discard(job.id)
            self._stopped_compares.discard(job.id)
            self._compare_busy.clear()
            self._wake.set()


def _limit(job: JobRow) -> float:
    return job.options["time_limit_s"]


def _elapsed(job: JobRow) -> float:
    return time.time() - (job.started or job.created)
