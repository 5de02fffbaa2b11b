"""Service settings, read from ``LAYOUTSAT_*`` environment variables."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything an operator may tune without touching code."""

    model_config = SettingsConfigDict(env_prefix="LAYOUTSAT_")

    host: str = "127.0.0.1"
    port: int = 8000
    compare_dir: Path | None = Field(
        default=None, description="where compare jobs write their results, report and plots "
        "(default: a fresh temporary directory per process)")
    compare_jobs: int = Field(default=max(1, os.cpu_count() or 1), ge=1,
                              description="worker processes per compare job")
