"""``/v1/jobs``: any solve (fusion, layout, compare) as a job that survives a restart."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.jobs.kinds import Kind, accept
from app.jobs.store import JobRow, JobState
from app.service import client_of, service_of

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {"description": "a graph beyond the service's size limits"},
    422: {"description": "Invalid input: every fault with its JSON path and rule"},
    429: {"description": "too many queued or running jobs for this client"},
}


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Kind = Field(description="fusion: a contest problem; layout: a layoutsat-graph; "
                       "compare: {graphs: [{name, graph}]}")
    payload: dict[str, Any] = Field(description="the problem, graph or batch")
    options: dict[str, Any] = Field(
        default_factory=dict, description="as the synchronous route of the kind takes them "
        "(solver, time_limit_s, seed, workers, ...)")


class Progress(BaseModel):
    elapsed_s: float | None = Field(default=None, description="since the job started")
    done: int | None = Field(default=None, description="compare: pairs finished")
    pid: int | None = Field(default=None, description="the worker process running it")
    objective: float | None = Field(
        default=None, description="best objective so far (the solver's units: us for layout, "
        "contest time for fusion); once done, the answer's")
    bound: float | None = Field(default=None,
                                description="best proven lower bound so far; once done, the "
                                "answer's")


class JobView(BaseModel):
    id: str
    kind: Kind
    state: JobState
    created: float = Field(description="Unix time")
    started: float | None = None
    finished: float | None = None
    attempts: int = Field(description="how often it was started (a restart re-queues)")
    cached: bool = Field(description="the result came from the cache")
    progress: Progress
    error: str | None = None
    result: Any = Field(default=None, description="the solve's answer, once done")


def view(job: JobRow) -> JobView:
    shown = job.progress or {}
    end = job.finished or time.time()
    result = job.result if isinstance(job.result, dict) else {}
    stats = result.get("stats") or {}  # a layout plan keeps them there
    running = job.state == "running"
    progress = Progress(
        elapsed_s=round(end - job.started, 3) if job.started else None,
        done=shown.get("done"), pid=shown.get("pid") if running else None,
        objective=shown.get("objective") if running else result.get(
            "objective", stats.get("objective")),
        bound=shown.get("bound") if running else result.get("bound", stats.get("best_bound")))
    return JobView(id=job.id, kind=job.kind, state=job.state, created=job.created,  # type: ignore[arg-type]
                   started=job.started, finished=job.finished, attempts=job.attempts,
                   cached=job.cached, progress=progress, error=job.error, result=job.result)


@router.post("", status_code=202, response_model=JobView, responses=ERROR_RESPONSES,
             summary="Submit a solve as a job")
def submit(body: JobRequest, request: Request, response: Response) -> JobView:
    """Accepted jobs are stored before this answers, so a restart never loses one; poll the
    ``Location``. A result already in the cache makes the job done at once."""
    service = service_of(request)
    work = accept(body.kind, body.payload, body.options, service.settings)
    job = service.submit(work, client_of(request))
    response.headers["Location"] = str(request.url_for("job", job_id=job.id))
    return view(job)


def _found(request: Request, job_id: str) -> JobRow:
    job = service_of(request).store.get(job_id)
    if job is None:
        raise HTTPException(404, f"no job '{job_id}' (finished jobs expire after "
                                 "LAYOUTSAT_RESULT_TTL_S)")
    return job


@router.get("/{job_id}", response_model=JobView, name="job", responses={404: {}},
            summary="A job's state, progress and, once done, its result")
def job(job_id: str, request: Request) -> JobView:
    return view(_found(request, job_id))


@router.delete("/{job_id}", response_model=JobView, responses={404: {}, 409: {}},
               summary="Cancel a queued or running job")
def cancel(job_id: str, request: Request) -> JobView:
    """A running solve's worker is killed (the pool replaces it); a finished job is a 409."""
    service = service_of(request)
    found = _found(request, job_id)
    if not service.store.cancel(job_id):
        raise HTTPException(409, f"job '{job_id}' already finished ({found.state})")
    service.dispatcher.cancel(job_id)
    return view(_found(request, job_id))
