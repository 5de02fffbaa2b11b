"""Property-based fuzzing of every route from the OpenAPI schema (schemathesis): no input
may get a 5xx, and every response must match its documented schema."""

from __future__ import annotations

import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as fuzz_settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from app.main import create_app
from app.settings import Settings

# Short solves only: a generated problem that happens to be valid must not run for minutes.
APP = create_app(Settings(data_dir=Path(tempfile.mkdtemp(prefix="layoutsat-fuzz-")),
                          pool_workers=2, default_time_limit_s=1, max_time_limit_s=2,
                          max_body_bytes=1 << 20, log_json=True))
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)


@SCHEMA.parametrize()
@fuzz_settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_route_answers_5xx_or_off_schema(case):
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])
