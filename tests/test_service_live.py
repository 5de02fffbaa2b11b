"""Schemathesis against a live ``layoutsat serve``: requests generated from the OpenAPI
schema (valid and invalid) get no 5xx, no status code the schema does not list, and no
body off its documented schema. (Generated documents rarely pass the cross-field rules;
``test_service_fuzz.py`` mutates valid ones to reach the solvers.)"""

from __future__ import annotations

from itertools import product

import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as fuzz_settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.live_server import Server

EXAMPLES_PER_OPERATION = 20
"""Per operation and generation mode (schema-valid and schema-invalid requests)."""


def test_no_5xx_and_no_undocumented_status_code(tmp_path):
    server = Server(tmp_path, workers=2, default_time_limit_s="1", max_time_limit_s="2",
                    max_body_bytes=str(1 << 20), sync_compare_budget_s="2",
                    compare_jobs="1")
    try:
        schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 12
        for operation, mode in product(operations, schemathesis.GenerationMode):
            @given(case=operation.as_strategy(mode))
            @fuzz_settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                           suppress_health_check=list(HealthCheck))
            def check(case: schemathesis.Case) -> None:
                case.call_and_validate(checks=[not_a_server_error, status_code_conformance,
                                               response_schema_conformance])

            try:
                check()
            except Unsatisfiable:  # an operation with nothing to make invalid (/healthz)
                assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
    finally:
        server.stop()
