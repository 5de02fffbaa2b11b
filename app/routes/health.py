"""Liveness and version information."""

from __future__ import annotations

import ortools
from fastapi import APIRouter
from pydantic import BaseModel

from app import __version__

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str
    version: str
    ortools: str


@router.get("/healthz", response_model=Health, summary="Liveness and versions")
async def healthz() -> Health:
    return Health(status="ok", version=__version__, ortools=ortools.__version__)
