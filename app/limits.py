"""The service's configurable limits: each refusal says which limit it hit and its value.

Sizes the request cannot change (body bytes, ops, tensors) answer 413; a value the client
chose above its maximum (the time limit) answers 422; too many jobs in flight for one
client answers 429.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.settings import Settings
from models.errors import Issue, Loc

IMPORT_PATH = "/v1/layout/import"


class LimitExceeded(HTTPException):
    """A request beyond a configured limit; the body names the limit and its value."""

    def __init__(self, status: int, limit: str, value: float, loc: Loc, msg: str):
        super().__init__(status, msg)
        self.limit = limit
        self.value = value
        self.issue = Issue(loc, msg, f"limit.{limit}")
        self.args = (status, limit, value, loc, msg)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), self.args)

    def as_dict(self) -> dict[str, Any]:
        return {"detail": f"limit '{self.limit}' exceeded", "limit": self.limit,
                "value": self.value, "errors": [self.issue.as_dict()]}


def check_graph_size(settings: Settings, names: tuple[str, str], items: int, links: int,
                     loc: Loc = ()) -> None:
    """A document's two counts (ops and tensors of a graph, nodes and edges of a strategy
    graph: the family's ``size_names``) against the limits of those names."""
    for name, count in zip(names, (items, links), strict=True):
        limit = getattr(settings, f"max_{name}")
        if count > limit:
            raise LimitExceeded(413, f"max_{name}", limit, loc,
                                f"the document has {count} {name}; this service takes at "
                                f"most {limit} (LAYOUTSAT_MAX_{name.upper()})")


def check_sync_size(settings: Settings, name: str, items: int) -> None:
    """Large documents go through the jobs API, so no request holds a connection for
    minutes."""
    limit = getattr(settings, f"sync_max_{name}")
    if items > limit:
        raise LimitExceeded(413, f"sync_max_{name}", limit, (),
                            f"the document has {items} {name}; synchronous solves take at most "
                            f"{limit} (LAYOUTSAT_SYNC_MAX_{name.upper()}): submit it to "
                            "POST /v1/jobs and poll GET /v1/jobs/{id}")


def time_limit(settings: Settings, asked: float | None, loc: Loc) -> float | None:
    """The time limit to use: the request's, else the configured default (None: the
    solver's own default); above the maximum is refused."""
    value = asked if asked is not None else settings.default_time_limit_s
    if value is not None and value > settings.max_time_limit_s:
        raise LimitExceeded(422, "max_time_limit_s", settings.max_time_limit_s, loc,
                            f"time limit {value:g} s is above the maximum "
                            f"{settings.max_time_limit_s:g} s (LAYOUTSAT_MAX_TIME_LIMIT_S)")
    return value


def queue_full(settings: Settings, client: str) -> LimitExceeded:
    limit = settings.max_queued_jobs_per_client
    return LimitExceeded(429, "max_queued_jobs_per_client", limit, (),
                         f"client '{client}' already has {limit} queued or running jobs, the "
                         "limit (LAYOUTSAT_MAX_QUEUED_JOBS_PER_CLIENT)")


class BodyLimit:
    """ASGI middleware: refuse a body over the limit before reading it when its length is
    declared, and stop reading a chunked one as soon as it passes the limit."""

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.settings = settings

    def _limit(self, path: str) -> tuple[str, int]:
        if path == IMPORT_PATH:
            return "max_import_bytes", self.settings.max_import_bytes
        return "max_body_bytes", self.settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        name, limit = self._limit(scope["path"])

        def refused(size: str) -> LimitExceeded:
            env = f"LAYOUTSAT_{name.upper()}"
            return LimitExceeded(413, name, limit, (), f"the request body is {size} bytes; "
                                 f"the limit is {limit} ({env})")

        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _send_json(send, 413, refused(declared.decode()).as_dict())
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise refused(f"more than {limit}")
            return message

        await self.app(scope, counted, send)


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
