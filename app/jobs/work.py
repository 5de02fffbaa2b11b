"""What a worker process runs: one fusion or layout solve from accepted JSON to result JSON.

These functions are sent to the pool by name, take and return plain JSON, and are the
only place a solve happens for the service (synchronous routes and jobs alike).
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any, NamedTuple

from app.jobs.store import JobStore
from models.device import DeviceSpec
from models.fusion import parse_problem
from models.layout import parse_graph
from solver import progress
from solver.fusion.solvers import solve as solve_fusion_problem
from solver.layout import solve as solve_layout_graph

GOOD_STATUSES = ("optimal", "feasible")


class Solved(NamedTuple):
    """A solve's status and its answer already serialized, so the server process only
    passes the bytes on (serializing in the server would slow every other request)."""

    status: str
    body: str


def solve_fusion(payload: Any, options: dict[str, Any]) -> Solved:
    problem = parse_problem(payload)
    extra = {k: v for k, v in options.items() if k != "solver"}
    result = solve_fusion_problem(problem, options["solver"], **extra)
    return Solved(result.status, result.model_dump_json())


def solve_layout(payload: Any, options: dict[str, Any]) -> Solved:
    graph = parse_graph(payload)
    device = options["device"]
    if isinstance(device, dict):
        device = DeviceSpec.model_validate(device)
    plan = solve_layout_graph(graph, options["solver"], device,
                              time_limit_s=options["time_limit_s"],
                              seed=options["seed"], workers=options["workers"],
                              max_configs=options["max_configs"], explain=options["explain"])
    return Solved(plan.status, plan.model_dump_json(by_alias=True))


SOLVES = {"fusion": solve_fusion, "layout": solve_layout}


PROGRESS_EVERY_S = 0.5


class JobProgress:
    """The solver's progress reports (``solver.progress``) written to the job's row, at
    most every ``PROGRESS_EVERY_S``, with the worker's pid and start time."""

    def __init__(self, store: JobStore, job_id: str):
        self.store = store
        self.job_id = job_id
        self.shown: dict[str, Any] = {"pid": os.getpid(), "started": time.time()}
        self.written = 0.0
        store.progress(job_id, self.shown)

    def __call__(self, objective: float, bound: float | None) -> None:
        self.shown["objective"] = objective
        if bound is not None:
            self.shown["bound"] = bound
        if time.monotonic() - self.written >= PROGRESS_EVERY_S:
            self.written = time.monotonic()
            self.store.progress(self.job_id, self.shown)


def run_job(kind: str, payload: Any, options: dict[str, Any], db: str, job_id: str) -> Solved:
    """A job's solve, its progress visible on the job while it runs."""
    progress.install(JobProgress(JobStore(Path(db)), job_id))
    try:
        return SOLVES[kind](payload, options)
    finally:
        progress.install(None)


def limit_memory(max_bytes: int) -> None:
    """Pool initializer: cap the worker's data memory (heap and private mappings; not the
    address space, which thread stacks and allocator arenas inflate far beyond what a solve
    uses), so a runaway solve raises MemoryError or dies alone."""
    if max_bytes > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (max_bytes, max_bytes))
