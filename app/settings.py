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
    max_body_bytes: int = Field(default=16 * MiB, ge=1024,
                                description="largest JSON request body")
    max_import_bytes: int = Field(default=1024 * MiB, ge=1024,
                                  description="largest ONNX model for /v1/layout/import "
                                  "(streamed to a file under DATA_DIR, never held in memory)")
    max_ops: int = Field(default=5000, ge=1, description="ops per graph")
    max_tensors: int = Field(default=20000, ge=1, description="tensors per graph")
    sync_max_ops: int = Field(default=300, ge=1, description="ops per graph above which the "
                              "synchronous solve routes point to the jobs API")
    max_nodes: int = Field(default=200_000, ge=1, description="nodes per iopddl problem")
    max_edges: int = Field(default=400_000, ge=1, description="edges per iopddl problem")
    sync_max_nodes: int = Field(default=2_000, ge=1, description="nodes per iopddl problem "
                                "above which the synchronous solve route points to the jobs "
                                "API")
    default_time_limit_s: float | None = Field(
        default=None, gt=0, description="time limit when a request gives none (default: the "
        "solver's own: 30 s fusion cpsat, 10 s otherwise)")
    max_time_limit_s: float = Field(default=600.0, gt=0, description="largest time limit")
    max_queued_jobs_per_client: int = Field(
        default=100, ge=1, description="queued and running jobs per client (its API key, "
        "else its address), enforced atomically")
    sync_compare_budget_s: float = Field(
        default=30.0, gt=0, description="how long POST /v1/compare waits for a batch before "
        "it answers 202 with the job to poll (the batch goes on)")
    shutdown_timeout_s: float = Field(
        default=10.0, gt=0, description="how long a shutdown waits for requests in flight; "
        "then running solves are stopped and their jobs re-queued")
    api_keys: str = Field(
        default="", description="comma-separated API keys; when set (or api_keys_file), "
        "every route but /healthz needs 'Authorization: Bearer KEY' and jobs are private to "
        "the key that created them")
    api_keys_file: Path | None = Field(
        default=None, description="a file of API keys, one per line ('#' starts a comment)")
    metrics_require_key: bool = Field(
        default=True, description="with API keys on, /metrics needs a key too")
    docs_public: bool = Field(
        default=True, description="with API keys on, /docs, /redoc and /openapi.json stay "
        "readable without a key")
    public_url: str | None = Field(
        default=None, description="the service's public base URL (e.g. "
        "https://layoutsat.example.com) for the URLs it returns; unset: relative URLs. "
        "The Host header is never used")
    log_json: bool = Field(default=True, description="structured JSON request logs")
