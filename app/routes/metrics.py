"""Prometheus metrics of the service (``app.observability``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.routes.responses import responses
from app.service import service_of

router = APIRouter(tags=["health"])


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE_LATEST: {}},
                             "description": "the text exposition format"},
                       **responses(401)})
def metrics(request: Request) -> Response:
    """Needs an API key when keys are on, unless LAYOUTSAT_METRICS_REQUIRE_KEY is false
    (``app.auth.KeyGate``)."""
    data = generate_latest(service_of(request).metrics.registry)
    return Response(data, media_type=CONTENT_TYPE_LATEST)
