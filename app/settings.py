"""Service settings, read from ``LAYOUTSAT_*`` environment variables."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything an operator may tune without touching code."""

    model_config = SettingsConfigDict(env_prefix="LAYOUTSAT_")

    host: str = "127.0.0.1"
    port: int = 8000
