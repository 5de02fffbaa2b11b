"""The running service's parts in one place: settings, API keys, job store and cache,
worker pool, dispatcher and metrics; and the two ways a route gets a solve done (now, or
as a job)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request
from starlette.concurrency import run_in_threadpool

from app.auth import Caller, Gate, load_keys
from app.jobs.dispatcher import Dispatcher
from app.jobs.kinds import COMPARE, Work
from app.jobs.pool import SolveFailed, SolvePool
from app.jobs.store import JobRow, JobStore
from app.jobs.work import GOOD_STATUSES, Finished, Outcome, run_solve
from app.limits import check_sync_size, queue_full
from app.observability import Metrics
from app.settings import Settings
from models.errors import Loc
from solver.deadline import Deadline

log = logging.getLogger("layoutsat.service")


@dataclass
class Answer:
    """A synchronous solve's result (JSON text) and whether it came from the cache."""

    body: str
    cached: bool


class Refusal(HTTPException):
    """A solve the worker refused (an input fault found there, or a fault of ours): its
    status and JSON body are passed on as they are."""

    def __init__(self, status: int, body: dict[str, Any]):
        super().__init__(status, str(body.get("detail", "")))
        self.body = body


class Service:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.gate = Gate(load_keys(settings))
        data = self.data_dir = settings.data_dir
        self.store = JobStore(settings.db_path or data / "layoutsat.db")
        self.pool = SolvePool(settings.pool_workers, settings.worker_memory_mb)
        self.metrics = Metrics(self.store.counts, lambda: self.pool.size,
                               lambda: self.pool.busy, lambda: self.pool.in_flight)
        self.dispatcher = Dispatcher(self.store, self.pool, data / "compare",
                                     settings.compare_jobs, settings.job_attempts,
                                     settings.result_ttl_s, self.metrics.solved)

    def start(self) -> None:
        self.dispatcher.start()

    def close(self) -> None:
        """Bounded: the dispatcher stops taking jobs, running ones are stopped and
        re-queued (a restart runs them again), the workers are killed."""
        started = time.monotonic()
        budget = self.settings.shutdown_timeout_s
        running = self.dispatcher.running_ids()
        self.dispatcher.stop(budget)
        self.pool.close(max(1.0, budget - (time.monotonic() - started)))
        requeued = self.store.requeue_running(running)
        if requeued:
            log.info("re-queued running jobs at shutdown", extra={
                "fields": {"jobs": requeued}})

    def compare_dir(self, job_id: str) -> Path:
        return self.data_dir / "compare" / job_id

    async def solve_now(self, work: Work, deadline: Deadline,
                        admit_at: tuple[Loc, Loc] | None = None) -> Answer:
        """A solve on the pool, answered from the cache when it can be; the database is
        reached from a thread, never from the event loop. ``admit_at``: the work was
        accepted without the family's admission check, which the worker runs."""
        check_sync_size(self.settings, work.size_name, work.ops)
        cached = await run_in_threadpool(self.store.cached, work.cache_key)
        self.metrics.cache_lookup(cached is not None)
        if cached is not None:
            return Answer(cached, True)
        started = time.perf_counter()
        outcome = await self.on_pool(run_solve, (work.kind, work.payload, work.options,
                                                 deadline, None, admit_at), deadline)
        self.metrics.solved(work.kind, work.options["solver"], time.perf_counter() - started)
        if outcome.status in GOOD_STATUSES and outcome.cacheable:
            await run_in_threadpool(self.store.remember, work.cache_key, outcome.body)
        return Answer(outcome.body, False)

    async def on_pool(self, fn: Callable[..., Outcome], args: tuple,
                      deadline: Deadline) -> Finished:
        """``fn`` on a worker; a refusal, or a worker that gave no answer, is a ``Refusal``
        with its status."""
        try:
            outcome = await self.pool.run(fn, args, deadline)
        except SolveFailed as exc:
            raise Refusal(exc.status, {"detail": exc.reason}) from None
        if not isinstance(outcome, Finished):
            raise Refusal(outcome.status, outcome.body)
        return outcome

    def submit(self, work: Work, caller: Caller) -> JobRow:
        """A queued job, or a finished one when the cache already holds its result; the
        per-client limit is checked and the job stored in one transaction, so concurrent
        submissions cannot pass it together."""
        cached = self.store.cached(work.cache_key) if work.kind != COMPARE else None
        if work.kind != COMPARE:
            self.metrics.cache_lookup(cached is not None)
        job = self.store.create(work.kind, caller.client, work.payload, work.options,
                                work.cache_key, result=cached, cached=cached is not None,
                                max_active=self.settings.max_queued_jobs_per_client)
        if job is None:
            raise queue_full(self.settings, caller.client)
        self.dispatcher.notify()
        return job

    def job_of(self, caller: Caller, job_id: str, kind: str | None = None) -> JobRow:
        """The caller's job, or a 404 that does not tell another key's job from none."""
        job = self.store.get(job_id)
        if job is None or not caller.owns(job.client) or (kind and job.kind != kind):
            what = f"{kind} job" if kind else "job"
            raise HTTPException(404, f"no {what} '{job_id[:64]}' (finished jobs expire after "
                                "LAYOUTSAT_RESULT_TTL_S)")
        return job


def service_of(request: Request) -> Service:
    return request.app.state.service


async def caller_of(request: Request) -> Caller:
    """The request's caller (a FastAPI dependency): a 401 when keys are on and it has none."""
    return service_of(request).gate.caller(request)


def url_for(request: Request, name: str, **params: str) -> str:
    """A URL of this service: under LAYOUTSAT_PUBLIC_URL when set, else relative; never
    built from the request's Host header."""
    path = request.app.url_path_for(name, **params)
    base = service_of(request).settings.public_url
    return f"{base.rstrip('/')}{path}" if base else str(path)
