"""Routes of the layout family under ``/v1/layout``: solve a graph, evaluate a plan."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from app.onnx_support import importer, parse_dims
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
MAX_ONNX_BYTES = 1 << 30
ImportDType = Literal["bf16", "f32", "bfp8", "bfp4"]


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


class ImportAnswer(BaseModel):
    graph: dict[str, Any] = Field(description="the imported layoutsat-graph")
    report: dict[str, Any] = Field(
        description="ops, tensors; ONNX op types mapped, fused, folded and left opaque")


@router.post("/import", response_model=ImportAnswer,
             responses={**ERROR_RESPONSES, 413: {"description": "model larger than 1 GiB"}},
             summary="Import an ONNX model as a layout graph",
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/octet-stream": {"schema": {"type": "string",
                                                         "format": "binary"}}}}})
async def import_route(
    request: Request,
    batch: Annotated[int | None, Query(ge=1, description="dynamic batch dimension")] = None,
    seq_len: Annotated[int | None, Query(ge=1, description="dynamic sequence length")] = None,
    dim: Annotated[list[str], Query(description="NAME=VALUE for any dynamic dimension")] = [],  # noqa: B006
    dtype: ImportDType = "bf16",
    weight_dtype: ImportDType | None = None,
    repeat: Annotated[int, Query(ge=1, le=1024, description="stack N copies")] = 1,
    name: str | None = None,
) -> ImportAnswer:
    """The ONNX bytes are the body; unknown operators become opaque ops (see the report)."""
    data = await request.body()
    if len(data) > MAX_ONNX_BYTES:
        raise HTTPException(413, f"the model is {len(data)} bytes; the limit is "
                                 f"{MAX_ONNX_BYTES} (export one layer and use repeat)")
    module = importer()
    options = module.ImportOptions(batch, seq_len, parse_dims(dim), dtype, weight_dtype,
                                   repeat, name)
    result = await run_in_threadpool(module.import_onnx, data, options)
    graph = {"format": "layoutsat-graph", "version": 1,
             **result.graph.model_dump(mode="json", by_alias=True, exclude_defaults=True)}
    return ImportAnswer(graph=graph, report=result.report)
