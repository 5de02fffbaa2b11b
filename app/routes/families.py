"""The routes of every problem family, made from the family contract: under
``/v1/<family>``, ``validate`` (a document), ``solve`` (a document; options in the query
string) and ``evaluate`` (a document and an answer). A new family in
``solver/families.py`` gets them without a line here."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from app.auth import Caller
from app.jobs.kinds import accept, parse_document
from app.jobs.work import run_evaluate
from app.routes.body import JsonBody, json_body
from app.routes.responses import INPUT, SOLVE, responses
from app.service import caller_of, service_of
from models.errors import InputValidationError, Issue
from solver.deadline import Deadline
from solver.family import Family

CACHE_HEADER = "X-Layoutsat-Cache"
EVALUATE_TIME_LIMIT_S = 30.0
class Validated(BaseModel):
    valid: bool
    family: str
    summary: dict[str, Any]


def query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    """OpenAPI query parameters for the scalar fields of an options model (the route
    validates the query string with the model itself)."""
    schema = model.model_json_schema()
    params = []
    for name, prop in schema.get("properties", {}).items():
        scalar = [c for c in _alternatives(prop) if c.get("type") in (
            "string", "integer", "number", "boolean") or ("enum" in c and "$ref" not in c)]
        if not scalar:
            continue
        shown = scalar[0] if len(scalar) == 1 else {"anyOf": scalar}
        shown = {**shown, **{k: prop[k] for k in ("default", "description") if k in prop}}
        params.append({"name": name, "in": "query", "required": False, "schema": shown,
                       "description": prop.get("description", "")})
    return params


def _alternatives(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """A schema's alternatives (``anyOf`` / ``oneOf``, nested), or the schema itself."""
    nested = schema.get("anyOf") or schema.get("oneOf")
    return [a for c in nested for a in _alternatives(c)] if nested else [schema]


def body_schema(model: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    schema = model if isinstance(model, dict) else \
        {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": schema}}}}


async def query_options(request: Request) -> dict[str, Any]:
    """The query string as options; a parameter given twice is a fault, not a guess."""
    repeated = sorted({k for k in request.query_params if
                       len(request.query_params.getlist(k)) > 1})
    if repeated:
        raise InputValidationError([Issue(("query", k), f"'{k}' is given "
                                          f"{len(request.query_params.getlist(k))} times; give "
                                          "it once", "query.repeated") for k in repeated],
                                   "request")
    return dict(request.query_params)


def router_for(fam: Family) -> APIRouter:
    router = APIRouter(prefix=f"/v1/{fam.name}", tags=[fam.name])
    doc_key = fam.document_key

    @router.post("/validate", response_model=Validated, responses=responses(*INPUT),
                 summary=f"Validate a {fam.document} and summarize it",
                 openapi_extra=body_schema(fam.document_model),
                 name=f"{fam.name}_validate")
    def validate(request: Request, body: Annotated[JsonBody, Depends(json_body)],
                 _caller: Annotated[Caller, Depends(caller_of)]) -> Validated:
        problem = parse_document(fam, body.parse(), service_of(request).settings, ())
        return Validated(valid=True, family=fam.name, summary=fam.summarize(problem))

    @router.post("/solve", response_model=fam.result_model, response_model_by_alias=True,
                 responses=responses(*SOLVE), summary=f"Solve a {fam.document}",
                 openapi_extra={**body_schema(fam.document_model),
                                "parameters": query_parameters(fam.options)},
                 name=f"{fam.name}_solve")
    async def solve(request: Request, body: Annotated[JsonBody, Depends(json_body)],
                    options: Annotated[dict[str, Any], Depends(query_options)],
                    _caller: Annotated[Caller, Depends(caller_of)]) -> Response:
        """Run a solver (options in the query string) on the worker pool within the time
        limit; the answer is checked by the family's evaluator, and the totals reported
        are the evaluator's. Graphs above LAYOUTSAT_SYNC_MAX_OPS go to ``POST
        /v1/jobs``."""
        service = service_of(request)
        deadline_from = time.monotonic()
        work = await run_in_threadpool(lambda: accept(
            fam.name, body.parse(), options, service.settings, (), ("query",), False))
        deadline = Deadline.after(work.time_limit_s, deterministic=work.deterministic,
                                  start=deadline_from)
        found = await service.solve_now(work, deadline, ((), ("query",)))
        return Response(found.body, media_type="application/json",
                        headers={CACHE_HEADER: "hit" if found.cached else "miss"})

    @router.post("/evaluate", response_model=fam.evaluation_model,
                 response_model_exclude_none=True, responses=responses(*SOLVE),
                 summary=f"Check a {fam.answer_name} independently",
                 openapi_extra={**body_schema({
                     "type": "object", "required": [doc_key, fam.answer_name],
                     "properties": {
                         doc_key: {"$ref": f"#/components/schemas/"
                                   f"{fam.document_model.__name__}"},
                         fam.answer_name: {"$ref": f"#/components/schemas/"
                                           f"{fam.answer_model.__name__}"}}}),
                     "parameters": query_parameters(fam.evaluate_options)},
                 name=f"{fam.name}_evaluate")
    async def evaluate(request: Request, raw: Annotated[JsonBody, Depends(json_body)],
                       options: Annotated[dict[str, Any], Depends(query_options)],
                       _caller: Annotated[Caller, Depends(caller_of)]) -> Response:
        """Every fault of the answer and the recomputed totals (200 with ``valid: false``:
        an invalid answer is an answer, not a bad request). Checked by a worker, within
        ``EVALUATE_TIME_LIMIT_S``."""
        service = service_of(request)
        found = await service.on_pool(run_evaluate, (fam.name, raw.raw, options,
                                                     service.settings),
                                      Deadline.after(EVALUATE_TIME_LIMIT_S))
        return Response(found.body, media_type="application/json")

    return router
