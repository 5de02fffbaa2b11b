"""Routes of the layout family under ``/v1/layout``: solve a graph, evaluate a plan."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from app.jobs.kinds import LayoutOptions, accept
from app.onnx_support import importer, parse_dims
from app.routes.solving import SOLVE_RESPONSES, answer
from app.service import service_of
from models.errors import InputValidationError, Issue
from models.layout import Evaluation, LayoutPlan, parse_graph, parse_plan
from solver.layout.evaluate import evaluate
from solver.layout.problem import analyze

router = APIRouter(prefix="/v1/layout", tags=["layout"])

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"description": "Invalid input: every fault with its JSON path and rule"},
}
ImportDType = Literal["bf16", "f32", "bfp8", "bfp4"]


class SolveRequest(LayoutOptions):
    graph: dict[str, Any] = Field(description="a layoutsat-graph document")


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graph: dict[str, Any] = Field(description="a layoutsat-graph document")
    plan: dict[str, Any] = Field(description="a layoutsat-plan document")


def _under(field: str, exc: InputValidationError) -> InputValidationError:
    """The same faults, located inside the request body's ``field``."""
    return InputValidationError([Issue((field, *i.loc), i.msg, i.rule) for i in exc.issues],
                                exc.what)


@router.post("/solve", response_model=LayoutPlan, response_model_by_alias=True,
             responses=SOLVE_RESPONSES, summary="Plan where every tensor lives")
async def solve_route(body: SolveRequest, request: Request) -> Response:
    """Run a solver on the worker pool; the plan is checked by the evaluator (status
    'invalid' lists why). Graphs above LAYOUTSAT_SYNC_MAX_OPS go to ``POST /v1/jobs``."""
    service = service_of(request)
    options = body.model_dump(mode="json", by_alias=True, exclude={"graph"})
    work = await run_in_threadpool(accept, "layout", body.graph, options, service.settings,
                                   ("graph",), ())
    return await answer(service, work)


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
             responses={**ERROR_RESPONSES, 413: {
                 "description": "model larger than LAYOUTSAT_MAX_IMPORT_BYTES (1 GiB)"}},
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
    data = await request.body()  # its size is bounded by LAYOUTSAT_MAX_IMPORT_BYTES
    module = importer()
    options = module.ImportOptions(batch, seq_len, parse_dims(dim), dtype, weight_dtype,
                                   repeat, name)
    result = await run_in_threadpool(module.import_onnx, data, options)
    graph = {"format": "layoutsat-graph", "version": 1,
             **result.graph.model_dump(mode="json", by_alias=True, exclude_defaults=True)}
    return ImportAnswer(graph=graph, report=result.report)
