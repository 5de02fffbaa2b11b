"""``/v1/jobs``: any solve (fusion, layout, compare) as a job that survives a restart."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from app.auth import Caller
from app.jobs.kinds import COMPARE, Work, accept
from app.jobs.store import JobRow, JobState
from app.routes.body import JsonBody, json_body
from app.routes.families import body_schema
from app.routes.responses import INPUT, responses
from app.service import caller_of, service_of, url_for
from app.settings import Settings
from models.errors import InputValidationError, issues_from_pydantic
from solver.families import FAMILIES

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

KINDS = (*FAMILIES, COMPARE)


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str = Field(description=f"one of {list(KINDS)}: a problem family (the payload is "
                      "its document) or compare ({graphs: [{name, graph}]})")
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
    kind: str
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
    return JobView(id=job.id, kind=job.kind, state=job.state, created=job.created,
                   started=job.started, finished=job.finished, attempts=job.attempts,
                   cached=job.cached, progress=progress, error=job.error, result=job.result)


@router.post("", status_code=202, response_model=JobView, responses=responses(*INPUT, 429),
             summary="Submit a solve as a job",
             openapi_extra=body_schema(JobRequest))
async def submit(request: Request, response: Response,
                 body: Annotated[JsonBody, Depends(json_body)],
                 caller: Annotated[Caller, Depends(caller_of)]) -> JobView:
    """Accepted jobs are stored before this answers, so a restart never loses one; poll the
    ``Location``. A result already in the cache makes the job done at once."""
    service = service_of(request)
    work = await run_in_threadpool(_accept, body, service.settings)
    job = await run_in_threadpool(service.submit, work, caller)
    response.headers["Location"] = url_for(request, "job", job_id=job.id)
    return view(job)


def _accept(body: JsonBody, settings: Settings) -> Work:
    try:
        job_request = JobRequest.model_validate(body.parse())
    except ValidationError as exc:
        raise InputValidationError(issues_from_pydantic(exc), "job request") from None
    return accept(job_request.kind, job_request.payload, job_request.options, settings)


@router.get("/{job_id}", response_model=JobView, name="job",
            responses=responses(401, 404),
            summary="A job's state, progress and, once done, its result")
def job(job_id: str, request: Request,
        caller: Annotated[Caller, Depends(caller_of)]) -> JobView:
    return view(service_of(request).job_of(caller, job_id))


@router.delete("/{job_id}", response_model=JobView,
               responses=responses(401, 404, 409),
               summary="Cancel a queued or running job")
def cancel(job_id: str, request: Request,
           caller: Annotated[Caller, Depends(caller_of)]) -> JobView:
    """A running solve's worker is killed (the pool replaces it); a finished job is a 409."""
    service = service_of(request)
    found = service.job_of(caller, job_id)
    if not service.store.cancel(job_id):
        raise HTTPException(409, f"job '{job_id}' already finished ({found.state})")
    service.dispatcher.cancel(job_id)
    return view(service.job_of(caller, job_id))
