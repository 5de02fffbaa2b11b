"""``/v1/compare``: a batch of graphs through the solvers, as a job of kind ``compare``.

Every comparison is a job (``/v1/jobs``), stored and run by the dispatcher like every
other. ``POST /v1/compare`` waits for it at most ``LAYOUTSAT_SYNC_COMPARE_BUDGET_S`` and
answers 200 with the results when it finished by then, else 202 with the job to poll (the
batch goes on); ``background: true`` answers 202 at once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from app.auth import Caller
from app.jobs.compare_work import batch_for
from app.jobs.kinds import COMPARE, MAX_GRAPHS, CompareOptions, GraphItem, Work, accept
from app.jobs.store import FINISHED, JobRow, JobState
from app.routes.body import JsonBody, json_body
from app.routes.families import body_schema
from app.routes.responses import INPUT, responses
from app.service import Service, caller_of, service_of, url_for
from app.settings import Settings
from models.errors import InputValidationError, issues_from_pydantic
from solver.compare.batch import tasks_for

router = APIRouter(prefix="/v1/compare", tags=["compare"])

POLL_S = 0.2


class CompareRequest(CompareOptions):
    graphs: list[GraphItem] = Field(min_length=1, max_length=MAX_GRAPHS)
    background: bool = Field(
        default=False, description="answer 202 with the job at once; otherwise wait for "
        "the results up to the service's budget (LAYOUTSAT_SYNC_COMPARE_BUDGET_S)")


class CompareJob(BaseModel):
    id: str
    state: JobState
    done: int = Field(description="pairs finished")
    total: int = Field(description="(graph, solver) pairs")
    error: str | None = None
    summary: dict[str, Any] | None = None
    gate: list[str] | None = Field(default=None, description="why the gate failed; [] passed")
    records: list[dict[str, Any]] | None = None
    files: list[str] = Field(default_factory=list, description="report, results and plots")


def _pairs(service: Service, job: JobRow) -> int:
    return len(tasks_for(batch_for(job.payload, job.options, service.settings.compare_jobs)))


def _view(service: Service, job: JobRow, request: Request) -> CompareJob:
    result = job.result if isinstance(job.result, dict) else None
    total = _pairs(service, job)
    files = [url_for(request, "compare_file", job_id=job.id, path=f)
             for f in result["files"]] if result else []
    return CompareJob(
        id=job.id, state=job.state, total=total, error=job.error,
        done=total if job.state == "done" else (job.progress or {}).get("done", 0),
        summary=result["summary"] if result else None, gate=result["gate"] if result else None,
        records=result["records"] if result else None, files=files)


@router.post("", response_model=CompareJob, responses=responses(
    *INPUT, 429, s202={"model": CompareJob, "description": "running as a background job; "
                       "poll its id"}),
    summary="Compare solvers on a batch of graphs",
    openapi_extra=body_schema(CompareRequest))
async def compare(request: Request, response: Response,
                  body: Annotated[JsonBody, Depends(json_body)],
                  caller: Annotated[Caller, Depends(caller_of)]) -> CompareJob:
    """The results when the batch finishes within the service's budget; else 202 and a
    ``Location`` to poll at ``GET /v1/compare/{id}`` (or ``/v1/jobs/{id}``)."""
    service = service_of(request)
    asked, work = await run_in_threadpool(_accept, body, service.settings)
    job = await run_in_threadpool(service.submit, work, caller)
    ends = time.monotonic() + (0 if asked.background else service.settings.sync_compare_budget_s)
    while job.state not in FINISHED and time.monotonic() < ends:
        await asyncio.sleep(POLL_S)
        job = await run_in_threadpool(service.job_of, caller, job.id)
    if job.state not in FINISHED:
        response.status_code = 202
        response.headers["Location"] = url_for(request, "compare_job", job_id=job.id)
    return _view(service, job, request)


def _accept(body: JsonBody, settings: Settings) -> tuple[CompareRequest, Work]:
    try:
        asked = CompareRequest.model_validate(body.parse())
    except ValidationError as exc:
        raise InputValidationError(issues_from_pydantic(exc), "compare request") from None
    options = asked.model_dump(mode="json", exclude={"graphs", "background"})
    graphs = {"graphs": [g.model_dump() for g in asked.graphs]}
    return asked, accept(COMPARE, graphs, options, settings, (), ())


@router.get("/{job_id}", response_model=CompareJob, name="compare_job",
            responses=responses(401, 404),
            summary="A compare job's progress and, once done, its results")
def compare_job(job_id: str, request: Request,
                caller: Annotated[Caller, Depends(caller_of)]) -> CompareJob:
    service = service_of(request)
    return _view(service, service.job_of(caller, job_id, COMPARE), request)


@router.get("/{job_id}/files/{path:path}", name="compare_file",
            responses=responses(401, 404),
            summary="Download a finished job's report.md, results.json or a plot")
def compare_file(job_id: str, path: str, request: Request,
                 caller: Annotated[Caller, Depends(caller_of)]) -> FileResponse:
    service = service_of(request)
    job = service.job_of(caller, job_id, COMPARE)
    files = job.result["files"] if isinstance(job.result, dict) else []
    if path not in files:
        listed = ", ".join(files) if files else "none yet"
        raise HTTPException(404, f"job '{job_id}' has no file '{path[:200]}'; files: {listed}")
    return FileResponse(service.compare_dir(job_id) / path)
