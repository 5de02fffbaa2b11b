"""Liveness and version information."""

from __future__ import annotations

from typing import Literal

import ortools
from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from app import __version__
from app.service import service_of

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: Literal["ok", "degraded"] = Field(
        description="degraded: the worker pool is broken (it is rebuilt before the next "
        "solve; if that keeps failing, solves answer 503)")
    version: str
    ortools: str
    pool_rebuilds: int = Field(description="times the worker pool was rebuilt since start")


@router.get("/healthz", response_model=Health, summary="Liveness and versions")
async def healthz(request: Request) -> Health:
    pool = service_of(request).pool
    return Health(status="ok" if pool.healthy else "degraded", version=__version__,
                  ortools=ortools.__version__, pool_rebuilds=pool.rebuilds)
