"""Map every input fault to a 4xx JSON body with the same shape: ``detail`` plus ``errors``."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from app.auth import Unauthorized
from app.body import UnsupportedMediaType
from app.limits import LimitExceeded
from app.service import Refusal
from models.errors import InputValidationError, Issue

log = logging.getLogger("layoutsat.http")


def _request_issue(err: dict) -> Issue:
    """A FastAPI request error, located relative to the request body or query string."""
    loc = tuple(err.get("loc", ()))
    if loc and loc[0] == "body":
        loc = loc[1:]
    if err.get("type") == "json_invalid":
        ctx = err.get("ctx") or {}
        return Issue((), f"request body is not valid JSON: {ctx.get('error', err['msg'])}",
                     "json.invalid")
    msg = str(err.get("msg", "invalid value"))
    if err.get("type") == "missing":
        msg = f"required field '{loc[-1]}' is missing" if loc else "request body is missing"
    return Issue(loc, msg, f"schema.{err.get('type', 'invalid')}")


async def _on_request_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
    issues = [_request_issue(err) for err in exc.errors()]
    body = {"detail": "invalid request", "errors": [i.as_dict() for i in issues]}
    return JSONResponse(status_code=422, content=body)


async def _on_input_validation(_: Request, exc: InputValidationError) -> JSONResponse:
    status = 415 if isinstance(exc, UnsupportedMediaType) else 422
    return JSONResponse(status_code=status, content=exc.as_dict())


async def _on_unauthorized(_: Request, exc: Unauthorized) -> JSONResponse:
    return JSONResponse(status_code=401, content=exc.as_dict(), headers=exc.headers)


async def _on_refusal(_: Request, exc: Refusal) -> JSONResponse:
    return JSONResponse(status_code=exc.status_code, content=exc.body)


async def _on_limit(_: Request, exc: LimitExceeded) -> JSONResponse:
    headers = {"Retry-After": "30"} if exc.status_code == 429 else None
    return JSONResponse(status_code=exc.status_code, content=exc.as_dict(), headers=headers)


async def _on_bug(request: Request, exc: Exception) -> JSONResponse:
    """A fault of ours, never of the input: logged with the request id the client sees."""
    request_id = request.scope.get("state", {}).get("request_id")
    log.error("unhandled error", exc_info=exc, extra={"fields": {"request_id": request_id}})
    return JSONResponse(status_code=500, content={
        "detail": f"internal error ({type(exc).__name__}); request id {request_id}"})


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _on_request_validation)
    app.add_exception_handler(InputValidationError, _on_input_validation)
    app.add_exception_handler(LimitExceeded, _on_limit)
    app.add_exception_handler(Unauthorized, _on_unauthorized)
    app.add_exception_handler(Refusal, _on_refusal)
    app.add_exception_handler(Exception, _on_bug)
