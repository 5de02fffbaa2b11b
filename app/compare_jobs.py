"""Compare jobs of the API: run in a background thread, one at a time, polled by id.

Jobs live in memory (a restart forgets them; their files stay in the output directory).
One job runs at a time because each already uses every worker process it is given.
"""

from __future__ import annotations

import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from solver.compare.batch import Batch, Outcome, run_batch, tasks_for

JobState = Literal["queued", "running", "done", "failed"]


@dataclass
class Job:
    id: str
    out: Path
    total: int
    state: JobState = "queued"
    done: int = 0
    outcome: Outcome | None = None
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record_done(self, _record: dict[str, Any]) -> None:
        with self.lock:
            self.done += 1


class CompareJobs:
    """The registry: submit a batch, look a job up, run small batches inline."""

    def __init__(self, root: Path | None, processes: int):
        self.root = root or Path(tempfile.mkdtemp(prefix="layoutsat-compare-"))
        self.processes = processes
        self.jobs: dict[str, Job] = {}
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compare")

    def _new(self, batch: Batch) -> Job:
        job_id = uuid.uuid4().hex
        job = Job(job_id, self.root / job_id, len(tasks_for(batch)))
        self.jobs[job_id] = job
        return job

    def _run(self, job: Job, batch: Batch) -> None:
        job.state = "running"
        try:
            job.outcome = run_batch(batch, job.out, job.record_done)
            job.state = "done"
        except Exception as exc:  # reported to the poller, never lost
            job.error = f"{type(exc).__name__}: {exc}"
            job.state = "failed"

    def run_now(self, batch: Batch) -> Job:
        job = self._new(batch)
        self._run(job, batch)
        return job

    def submit(self, batch: Batch) -> Job:
        job = self._new(batch)
        self.pool.submit(self._run, job, batch)
        return job

    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)
