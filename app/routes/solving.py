"""What the synchronous solve routes share: running accepted work on the pool and turning
the outcome into a response (cache header, or the failure's status and reason)."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Response

from app.jobs.kinds import Work
from app.jobs.pool import SolveFailed
from app.service import Service

CACHE_HEADER = "X-Layoutsat-Cache"
SOLVE_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {"description": "a graph beyond the size limits, or too large to solve "
          "synchronously (the message points to POST /v1/jobs)"},
    422: {"description": "Invalid input: every fault with its JSON path and rule"},
    503: {"description": "the worker process died; retry"},
    504: {"description": "no solution within the time limit"},
}


async def answer(service: Service, work: Work) -> Response:
    """The worker's JSON passed on as it is (the worker built it from the response model)."""
    try:
        found = await service.solve_now(work)
    except SolveFailed as exc:
        raise HTTPException(exc.status, exc.reason) from None
    return Response(found.body, media_type="application/json",
                    headers={CACHE_HEADER: "hit" if found.cached else "miss"})
