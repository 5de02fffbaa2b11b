"""The FastAPI application factory."""

from __future__ import annotations

from fastapi import FastAPI

from app import __version__
from app.compare_jobs import CompareJobs
from app.errors import install_error_handlers
from app.routes import compare, fusion, health, layout
from app.settings import Settings


def create_app() -> FastAPI:
    app = FastAPI(
        title="layoutsat",
        version=__version__,
        description="Global memory-layout, fusion and schedule optimizer for tiled ML "
        "accelerators (OR-Tools CP-SAT), with an independent evaluator.",
    )
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(fusion.router)
    app.include_router(layout.router)
    app.include_router(compare.router)
    settings = Settings()
    app.state.compare_jobs = CompareJobs(settings.compare_dir, settings.compare_jobs)
    return app
