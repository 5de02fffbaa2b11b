"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import __version__
from app.errors import install_error_handlers
from app.limits import BodyLimit
from app.observability import RequestLog, configure_logging
from app.routes import compare, fusion, health, jobs, layout, metrics
from app.service import Service
from app.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service: its job dispatcher starts here (re-queuing jobs a restart interrupted),
    its worker processes on the first solve; both stop when the server shuts down."""
    settings = settings or Settings()
    configure_logging(settings.log_json)
    service = Service(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        service.close()

    app = FastAPI(
        title="layoutsat",
        version=__version__,
        description="Global memory-layout, fusion and schedule optimizer for tiled ML "
        "accelerators (OR-Tools CP-SAT), with an independent evaluator.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    for router in (health.router, fusion.router, layout.router, compare.router, jobs.router,
                   metrics.router):
        app.include_router(router)
    app.add_middleware(BodyLimit, settings=settings)
    app.add_middleware(RequestLog, metrics=service.metrics)
    app.state.service = service
    service.start()
    return app
