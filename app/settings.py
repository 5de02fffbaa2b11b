"""Service settings, read from ``LAYOUTSAT_*`` environment variables (docs/service.md)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MiB = 1 << 20


class Settings(BaseSettings):
    """Everything an operator may tune without touching code."""

    model_config = SettingsConfigDict(env_prefix="LAYOUTSAT_")

    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = Field(
        default_factory=lambda: Path(os.environ.get("XDG_DATA_HOME")
                                     or Path.home() / ".local/share") / "layoutsat",
        description="where the job database and compare outputs live")
    db_path: Path | None = Field(
        default=None, description="the SQLite job and cache database (default: "
        "DATA_DIR/layoutsat.db)")
    pool_workers: int = Field(default=max(1, os.cpu_count() or 1), ge=1,
                              description="solver worker processes")
    worker_memory_mb: int = Field(
        default=4096, ge=0, description="address-space limit per worker process; a solve "
        "beyond it fails alone (0: no limit)")
    compare_jobs: int = Field(default=max(1, os.cpu_count() or 1), ge=1,
                              description="worker processes a compare job runs its pairs on")
    result_ttl_s: float = Field(default=7 * 24 * 3600, gt=0,
                                description="finished jobs and cached results older than "
                                "this are deleted")
    job_attempts: int = Field(default=2, ge=1, description="how often a job interrupted by a "
                              "restart is started before it is marked failed")
    max_body_bytes: int = Field(default=64 * MiB, ge=1024,
                                description="largest JSON request body")
    max_import_bytes: int = Field(default=1024 * MiB, ge=1024,
                                  description="largest ONNX model for /v1/layout/import")
    max_ops: int = Field(default=5000, ge=1, description="ops per graph")
    max_tensors: int = Field(default=20000, ge=1, description="tensors per graph")
    sync_max_ops: int = Field(default=300, ge=1, description="ops per graph above which the "
                              "synchronous solve routes point to the jobs API")
    default_time_limit_s: float | None = Field(
        default=None, gt=0, description="time limit when a request gives none (default: the "
        "solver's own: 30 s fusion cpsat, 10 s otherwise)")
    max_time_limit_s: float = Field(default=600.0, gt=0, description="largest time limit")
    max_configs: int = Field(default=4096, ge=1,
                             description="largest candidate configurations per op a request "
                             "may ask for")
    max_queued_jobs_per_client: int = Field(
        default=100, ge=1, description="queued and running jobs per client (X-Client-Id "
        "header, else the peer address)")
    log_json: bool = Field(default=True, description="structured JSON request logs")
