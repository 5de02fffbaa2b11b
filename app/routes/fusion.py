"""Routes of the fusion (MLSys 2026) family under ``/v1/fusion``: validate, solve, evaluate."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from app.jobs.kinds import accept
from app.routes.solving import SOLVE_RESPONSES, answer
from app.service import service_of
from models.errors import Issue, raise_if_any
from models.fusion import (
    EvaluationReport,
    FusionProblem,
    FusionResult,
    FusionSolution,
    ReductionCost,
    problem_issues,
)
from solver.fusion.evaluate import evaluate
from solver.fusion.problem import Rules, summarize
from solver.fusion.solvers import DEFAULT_SOLVER, SOLVERS

router = APIRouter(prefix="/v1/fusion", tags=["fusion"])

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"description": "Invalid input: every fault with its JSON path and rule"},
}


class ProblemSummary(BaseModel):
    valid: bool
    summary: dict[str, Any]


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem: FusionProblem
    solution: FusionSolution


def checked(problem: FusionProblem, field: str | None = None) -> FusionProblem:
    """The problem after the cross-field rules (the schema rules ran when FastAPI parsed it),
    faults located under ``field`` of the request body when given."""
    issues = problem_issues(problem)
    if field:
        issues = [Issue((field, *i.loc), i.msg, i.rule) for i in issues]
    raise_if_any(issues, "fusion problem")
    return problem


@router.post("/validate", response_model=ProblemSummary, responses=ERROR_RESPONSES,
             summary="Validate a problem and summarize it")
def validate(problem: FusionProblem) -> ProblemSummary:
    """Sizes, graph boundary and compute/I-O lower bounds of a valid problem, or a 422."""
    return ProblemSummary(valid=True, summary=summarize(checked(problem)))


@router.post("/solve", response_model=FusionResult, responses=SOLVE_RESPONSES,
             summary="Schedule a problem")
async def solve_route(
    problem: FusionProblem,
    request: Request,
    solver: Annotated[str, Query(description=f"one of {list(SOLVERS)}")] = DEFAULT_SOLVER,
    time_limit_s: Annotated[float | None, Query(
        gt=0, description="seconds for the whole solve; default 30 for cpsat, 10 "
        "otherwise (at most LAYOUTSAT_MAX_TIME_LIMIT_S)")] = None,
    reduction_cost: Annotated[ReductionCost, Query()] = "per_native_k",
    seed: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    workers: Annotated[int, Query(ge=1, le=64, description="CP-SAT search workers")] = 1,
) -> Response:
    """Run a solver (default cpsat) on the problem in the body on the worker pool; the
    solution is checked by the evaluator, and the latencies reported are the evaluator's.
    Graphs above LAYOUTSAT_SYNC_MAX_OPS go to ``POST /v1/jobs``."""
    options = {"solver": solver, "time_limit_s": time_limit_s,
               "reduction_cost": reduction_cost, "seed": seed, "workers": workers}
    service = service_of(request)
    payload = problem.model_dump(mode="json")
    work = await run_in_threadpool(accept, "fusion", payload, options, service.settings,
                                   (), ())
    return await answer(service, work)


@router.post("/evaluate", response_model=EvaluationReport, responses=ERROR_RESPONSES,
             response_model_exclude_none=True, summary="Check a solution independently")
def evaluate_route(
    body: EvaluateRequest,
    reduction_cost: Annotated[ReductionCost, Query()] = "per_native_k",
    steps: Annotated[bool, Query(description="include every step of every subgraph")] = False,
    strict: Annotated[bool, Query(
        description="a claimed latency off by more than 1e-6 is an error")] = False,
) -> EvaluationReport:
    """The recomputed latencies of a valid solution, or the first rule it breaks (200 with
    ``valid: false``: an invalid solution is an answer, not a bad request)."""
    problem = checked(body.problem, "problem")
    return evaluate(problem, body.solution, Rules(reduction_cost=reduction_cost),
                    strict=strict, details=steps).report()
