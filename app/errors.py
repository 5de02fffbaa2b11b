"""Map every input fault to a 4xx JSON body with the same shape: ``detail`` plus ``errors``."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from models.errors import InputValidationError, Issue


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
    return JSONResponse(status_code=422, content=exc.as_dict())


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _on_request_validation)
    app.add_exception_handler(InputValidationError, _on_input_validation)
