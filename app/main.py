"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app import __version__
from app.auth import KeyGate
from app.errors import install_error_handlers
from app.limits import BodyLimit
from app.observability import RequestLog, configure_logging
from app.routes import compare, docs, families, health, imports, jobs, metrics
from app.service import Service
from app.settings import Settings
from solver.families import FAMILIES


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service: its job dispatcher starts here (re-queuing jobs a restart interrupted),
    its worker processes on the first solve; both stop when the server shuts down."""
    settings = settings or Settings()
    configure_logging(settings.log_json)
    service = Service(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        service.close()  # bounded by LAYOUTSAT_SHUTDOWN_TIMEOUT_S

    app = FastAPI(
        title="layoutsat",
        version=__version__,
        description="Global memory-layout, fusion and schedule optimizer for tiled ML "
        "accelerators (OR-Tools CP-SAT), with an independent evaluator.",
        lifespan=lifespan,
        docs_url=None,  # app.routes.docs serves /docs and /redoc from packaged assets
        redoc_url=None,
        redirect_slashes=False,  # Starlette builds that redirect's Location from Host
    )
    install_error_handlers(app)
    for router in (health.router, *map(families.router_for, FAMILIES.values()),
                   imports.router, compare.router, jobs.router, metrics.router, docs.router):
        app.include_router(router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.add_middleware(BodyLimit, settings=settings)
    app.add_middleware(KeyGate, gate=service.gate, settings=settings)
    app.add_middleware(RequestLog, metrics=service.metrics)
    app.state.service = service
    service.start()
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema plus the request bodies the routes read as raw JSON (so that every
    fault gets one kind of answer) and document by reference: every family's document and
    answer, a job request, a compare request."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description,
                         routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    bodies = [m for fam in FAMILIES.values() for m in (fam.document_model, fam.answer_model)]
    for model in (*bodies, jobs.JobRequest, compare.CompareRequest):
        found = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(found.pop("$defs", {}))
        components[model.__name__] = found
    app.openapi_schema = schema
    return schema
