"""``/v1/compare``: a batch of graphs through the solvers, inline or as a polled job.

A background comparison is a job of kind ``compare`` (``/v1/jobs``), stored and run like
every other job; an inline one is stored as a finished job, so its report and plots are
downloadable the same way.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field

from app.jobs.compare_work import batch_for, run_compare
from app.jobs.kinds import MAX_GRAPHS as MAX_GRAPHS
from app.jobs.kinds import CompareOptions, GraphItem, accept
from app.jobs.store import JobRow
from app.service import Service, client_of, service_of
from solver.compare.batch import tasks_for

router = APIRouter(prefix="/v1/compare", tags=["compare"])

SYNC_BUDGET_S = 30.0
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {"description": "a graph beyond the service's size limits"},
    422: {"description": "Invalid input: every fault with its JSON path and rule"},
    429: {"description": "too many queued or running jobs for this client"},
}


class CompareRequest(CompareOptions):
    graphs: list[GraphItem] = Field(min_length=1, max_length=MAX_GRAPHS)
    background: bool | None = Field(
        default=None, description="run as a job to poll; default: when the batch could take "
        f"more than {SYNC_BUDGET_S:g} s")


class CompareJob(BaseModel):
    id: str
    state: Literal["queued", "running", "done", "failed", "cancelled"]
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
    base = str(request.url_for("compare_file", job_id=job.id, path=""))
    return CompareJob(
        id=job.id, state=job.state, total=total, error=job.error,
        done=total if job.state == "done" else (job.progress or {}).get("done", 0),
        summary=result["summary"] if result else None, gate=result["gate"] if result else None,
        records=result["records"] if result else None,
        files=[base + f for f in result["files"]] if result else [])


@router.post("", response_model=CompareJob, responses={
    **ERROR_RESPONSES, 202: {"description": "accepted as a background job; poll its id"}},
    summary="Compare solvers on a batch of graphs")
def compare(body: CompareRequest, request: Request, response: Response) -> CompareJob:
    """Small batches answer inline; larger ones (or ``background: true``) answer 202 with
    a job id to poll at ``GET /v1/compare/{id}`` (or ``/v1/jobs/{id}``)."""
    service = service_of(request)
    options = body.model_dump(mode="json", exclude={"graphs", "background"})
    work = accept("compare", {"graphs": [g.model_dump() for g in body.graphs]}, options,
                  service.settings, (), ())
    processes = service.settings.compare_jobs
    pairs = len(tasks_for(batch_for(work.payload, work.options, processes)))
    estimate = pairs * work.time_limit_s / processes
    background = body.background if body.background is not None else estimate > SYNC_BUDGET_S
    if background:
        job = service.submit(work, client_of(request))
        response.status_code = 202
        response.headers["Location"] = str(request.url_for("compare_job", job_id=job.id))
        return _view(service, job, request)
    job = service.store.create("compare", client_of(request), work.payload, work.options,
                               work.cache_key, running=True)
    try:
        result = run_compare(work.payload, work.options, processes, service.compare_dir(job.id))
    except Exception as exc:  # recorded on the job, then the 500 it is
        service.store.fail(job.id, f"{type(exc).__name__}: {exc}")
        raise
    service.store.finish(job.id, json.dumps(result))
    return _view(service, _found(service, job.id), request)


def _found(service: Service, job_id: str) -> JobRow:
    job = service.store.get(job_id)
    if job is None or job.kind != "compare":
        raise HTTPException(404, f"no compare job '{job_id}'")
    return job


@router.get("/{job_id}", response_model=CompareJob, name="compare_job",
            summary="A compare job's progress and, once done, its results")
def compare_job(job_id: str, request: Request) -> CompareJob:
    service = service_of(request)
    return _view(service, _found(service, job_id), request)


@router.get("/{job_id}/files/{path:path}", name="compare_file",
            summary="Download a finished job's report.md, results.json or a plot")
def compare_file(job_id: str, path: str, request: Request) -> FileResponse:
    service = service_of(request)
    job = _found(service, job_id)
    files = job.result["files"] if isinstance(job.result, dict) else []
    if path not in files:
        listed = ", ".join(files) if files else "none yet"
        raise HTTPException(404, f"job '{job_id}' has no file '{path}'; files: {listed}")
    return FileResponse(service.compare_dir(job_id) / path)
