"""The running service's parts in one place: settings, job store and cache, worker pool,
dispatcher and metrics; and the two ways a route gets a solve done (now, or as a job)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from app.jobs.dispatcher import Dispatcher
from app.jobs.kinds import Work
from app.jobs.pool import SolvePool
from app.jobs.store import JobRow, JobStore
from app.jobs.work import GOOD_STATUSES, SOLVES
from app.limits import check_queue, check_sync_size
from app.observability import Metrics
from app.settings import Settings


@dataclass
class Answer:
    """A synchronous solve's result (JSON text) and whether it came from the cache."""

    body: str
    cached: bool


class Service:
    def __init__(self, settings: Settings):
        self.settings = settings
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
        self.dispatcher.stop()
        self.pool.close()

    def compare_dir(self, job_id: str) -> Path:
        return self.data_dir / "compare" / job_id

    async def solve_now(self, work: Work) -> Answer:
        """A fusion or layout solve on the pool, answered from the cache when it can be;
        the database is reached from a thread, never from the event loop."""
        check_sync_size(self.settings, work.ops)
        cached = await run_in_threadpool(self.store.cached, work.cache_key)
        self.metrics.cache_lookup(cached is not None)
        if cached is not None:
            return Answer(cached, True)
        started = time.perf_counter()
        solved = await self.pool.run(SOLVES[work.kind], (work.payload, work.options),
                                     work.time_limit_s)
        self.metrics.solved(work.kind, work.options["solver"], time.perf_counter() - started)
        if solved.status in GOOD_STATUSES:
            await run_in_threadpool(self.store.remember, work.cache_key, solved.body)
        return Answer(solved.body, False)

    def submit(self, work: Work, client: str) -> JobRow:
        """A queued job, or a finished one when the cache already holds its result."""
        check_queue(self.settings, self.store.active_for(client), client)
        cached = self.store.cached(work.cache_key) if work.kind != "compare" else None
        if work.kind != "compare":
            self.metrics.cache_lookup(cached is not None)
        job = self.store.create(work.kind, client, work.payload, work.options, work.cache_key,
                                result=cached, cached=cached is not None)
        self.dispatcher.notify()
        return job


def service_of(request: Request) -> Service:
    return request.app.state.service


def client_of(request: Request) -> str:
    """Who a per-client limit counts: the X-Client-Id header, else the peer address."""
    given = request.headers.get("x-client-id", "").strip()
    if given:
        return given[:128]
    return request.client.host if request.client else "unknown"
