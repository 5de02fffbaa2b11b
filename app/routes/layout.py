"""Routes of the layout family under ``/v1/layout``: solve a graph, evaluate a plan."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from models.device import DeviceSpec
from models.errors import InputValidationError, Issue
from models.layout import Evaluation, LayoutPlan, parse_graph, parse_plan
from solver.layout import SOLVERS, solve
from solver.layout.evaluate import evaluate
from solver.layout.ops import DEFAULT_MAX_CONFIGS
from solver.layout.problem import analyze

router = APIRouter(prefix="/v1/layout", tags=["layout"])

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"description": "Invalid input: every fault with its JSON path and rule"},
}
MAX_TIME_LIMIT_S = 600.0


class SolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graph: dict[str, Any] = Field(description="a layoutsat-graph document")
    solver: str = Field(default="cpsat", description=f"one of {sorted(SOLVERS)}")
    device: str | DeviceSpec | None = Field(
        default=None, description="preset name or spec; overrides the graph's device")
    time_limit_s: Annotated[float, Field(gt=0, le=MAX_TIME_LIMIT_S)] = 10.0
    seed: int = 0
    workers: Annotated[int, Field(ge=1, le=64)] = 1
    max_configs: Annotated[int, Field(ge=1, le=4096)] = DEFAULT_MAX_CONFIGS
    explain: bool = Field(default=False,
                          description="add the differences from the best baseline's plan")


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graph: dict[str, Any] = Field(description="a layoutsat-graph document")
    plan: dict[str, Any] = Field(description="a layoutsat-plan document")


def _under(field: str, exc: InputValidationError) -> InputValidationError:
    """The same faults, located inside the request body's ``field``."""
    return InputValidationError([Issue((field, *i.loc), i.msg, i.rule) for i in exc.issues],
                                exc.what)


@router.post("/solve", response_model=LayoutPlan, response_model_by_alias=True,
             responses=ERROR_RESPONSES, summary="Plan where every tensor lives")
def solve_route(body: SolveRequest) -> LayoutPlan:
    """Run a solver; the plan is checked by the evaluator (status 'invalid' lists why)."""
    try:
        graph = parse_graph(body.graph)
    except InputValidationError as exc:
        raise _under("graph", exc) from None
    return solve(graph, body.solver, body.device, time_limit_s=body.time_limit_s,
                 seed=body.seed, workers=body.workers, max_configs=body.max_configs,
                 explain=body.explain)


@router.post("/evaluate", response_model=Evaluation, responses=ERROR_RESPONSES,
             summary="Check a plan independently")
def evaluate_route(body: EvaluateRequest) -> Evaluation:
    """Every violation of the plan and the recomputed total latency."""
    try:
        graph = parse_graph(body.graph)
    except InputValidationError as exc:
        raise _under("graph", exc) from None
    try:
        plan = parse_plan(body.plan)
    except InputValidationError as exc:
        raise _under("plan", exc) from None
    return evaluate(analyze(graph, plan.device), plan)
