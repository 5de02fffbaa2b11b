"""Every error status a route can answer, documented with the one body all faults share,
so the OpenAPI schema lists each status a client may see (``tests/test_service_live.py``
checks it against a live server)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorItem(BaseModel):
    path: str = Field(description="where the fault is, as a JSON path ($ is the body)")
    loc: list[str | int]
    rule: str = Field(description="the rule broken, e.g. length.ops or limit.max_ops")
    msg: str


class ErrorBody(BaseModel):
    detail: str
    errors: list[ErrorItem] = Field(default_factory=list)
    limit: str | None = Field(default=None, description="the limit exceeded (413, 422, 429)")
    value: float | None = Field(default=None, description="that limit's value")


DESCRIPTIONS = {
    401: "API keys are on and the request has none, or an unknown one",
    404: "no such job or file (or one another key created)",
    409: "the job already finished",
    413: "a body or a graph beyond the service's size limits, or too large to solve "
         "synchronously (the message points to POST /v1/jobs)",
    415: "the body is not sent as application/json",
    422: "invalid input: every fault with its JSON path and rule",
    429: "too many queued or running jobs for this client",
    500: "a fault of ours (a solver failed); the service stays up",
    503: "the worker process died or the pool broke and is being rebuilt; retry",
    504: "no answer well past the time limit",
}
INPUT = (401, 413, 415, 422)
SOLVE = (*INPUT, 500, 503, 504)


def responses(*codes: int, **extra: dict[str, Any]) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route answering ``codes`` (plus ``extra`` entries,
    keyed by status as text)."""
    found: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorBody, "description": DESCRIPTIONS[code]} for code in codes}
    found.update({int(k.removeprefix("s")): v for k, v in extra.items()})
    return found
