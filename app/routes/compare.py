"""``/v1/compare``: a batch of graphs through the solvers, inline or as a polled job."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from app.compare_jobs import CompareJobs, Job
from models.errors import InputValidationError, Issue
from models.family import detect_family
from models.fusion import ReductionCost, parse_problem
from models.layout import parse_graph
from solver.compare.batch import Batch, check_solvers, tasks_for
from solver.compare.discover import GraphDoc
from solver.compare.task import Options

router = APIRouter(prefix="/v1/compare", tags=["compare"])

MAX_GRAPHS = 500
MAX_TIME_LIMIT_S = 600.0
SYNC_BUDGET_S = 30.0
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"description": "Invalid input: every fault with its JSON path and rule"},
}


class GraphItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=200)]
    graph: dict[str, Any] = Field(description="a fusion problem or a layoutsat-graph")


class CompareRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graphs: list[GraphItem] = Field(min_length=1, max_length=MAX_GRAPHS)
    solvers: list[str] | None = Field(
        default=None, description="default: every solver of each graph's family")
    time_limit_s: Annotated[float, Field(gt=0, le=MAX_TIME_LIMIT_S)] = 10.0
    device: str | None = Field(default=None, description="device preset for layout graphs")
    reduction_cost: ReductionCost = "per_native_k"
    seed: int = 0
    workers: Annotated[int, Field(ge=1, le=64, description="CP-SAT threads per solve")] = 1
    fail_if_worse: str | None = Field(
        default=None, description="regression gate: fails when cpsat is worse than this")
    background: bool | None = Field(
        default=None, description="run as a job to poll; default: when the batch could take "
        f"more than {SYNC_BUDGET_S:g} s")


class CompareJob(BaseModel):
    id: str
    state: Literal["queued", "running", "done", "failed"]
    done: int = Field(description="pairs finished")
    total: int = Field(description="(graph, solver) pairs")
    error: str | None = None
    summary: dict[str, Any] | None = None
    gate: list[str] | None = Field(default=None, description="why the gate failed; [] passed")
    records: list[dict[str, Any]] | None = None
    files: list[str] = Field(default_factory=list, description="report, results and plots")


def _docs(body: CompareRequest) -> list[GraphDoc]:
    """Every graph parsed up front: a malformed one is a 422, not a failed pair."""
    issues: list[Issue] = []
    docs = []
    names: set[str] = set()
    for i, item in enumerate(body.graphs):
        if item.name in names:
            issues.append(Issue(("graphs", i, "name"), f"duplicate graph name '{item.name}'",
                                "names.duplicate"))
        names.add(item.name)
        try:
            family = detect_family(item.graph)
            (parse_problem if family == "fusion" else parse_graph)(item.graph)
        except InputValidationError as exc:
            issues += [Issue(("graphs", i, "graph", *e.loc), e.msg, e.rule) for e in exc.issues]
            continue
        docs.append(GraphDoc(item.name, item.graph, family))
    if issues:
        raise InputValidationError(issues, "compare request")
    return docs


def _view(job: Job, request: Request) -> CompareJob:
    outcome = job.outcome
    base = str(request.url_for("compare_file", job_id=job.id, path=""))
    return CompareJob(
        id=job.id, state=job.state, done=job.done, total=job.total, error=job.error,
        summary=outcome.summary if outcome else None, gate=outcome.gate if outcome else None,
        records=[{k: v for k, v in r.items() if k != "answer"} for r in outcome.records]
        if outcome else None,
        files=[base + f for f in outcome.files] if outcome else [])


def _jobs(request: Request) -> CompareJobs:
    return request.app.state.compare_jobs


@router.post("", response_model=CompareJob, responses={
    **ERROR_RESPONSES, 202: {"description": "accepted as a background job; poll its id"}},
    summary="Compare solvers on a batch of graphs")
def compare(body: CompareRequest, request: Request, response: Response) -> CompareJob:
    """Small batches answer inline; larger ones (or ``background: true``) answer 202 with
    a job id to poll at ``GET /v1/compare/{id}``."""
    check_solvers(body.solvers, body.fail_if_worse)
    jobs = _jobs(request)
    batch = Batch(_docs(body), body.solvers,
                  Options(body.time_limit_s, body.seed, body.device, body.reduction_cost,
                          body.workers),
                  jobs=jobs.processes, fail_if_worse=body.fail_if_worse)
    estimate = len(tasks_for(batch)) * body.time_limit_s / jobs.processes
    background = body.background if body.background is not None else estimate > SYNC_BUDGET_S
    if not background:
        return _view(jobs.run_now(batch), request)
    job = jobs.submit(batch)
    response.status_code = 202
    response.headers["Location"] = str(request.url_for("compare_job", job_id=job.id))
    return _view(job, request)


@router.get("/{job_id}", response_model=CompareJob, name="compare_job",
            summary="A compare job's progress and, once done, its results")
def compare_job(job_id: str, request: Request) -> CompareJob:
    job = _jobs(request).get(job_id)
    if job is None:
        raise HTTPException(404, f"no compare job '{job_id}'")
    return _view(job, request)


@router.get("/{job_id}/files/{path:path}", name="compare_file",
            summary="Download a finished job's report.md, results.json or a plot")
def compare_file(job_id: str, path: str, request: Request) -> FileResponse:
    job = _jobs(request).get(job_id)
    if job is None:
        raise HTTPException(404, f"no compare job '{job_id}'")
    if job.outcome is None or path not in job.outcome.files:
        listed = ", ".join(job.outcome.files) if job.outcome else "none yet"
        raise HTTPException(404, f"job '{job_id}' has no file '{path}'; files: {listed}")
    return FileResponse(job.out / path)
