"""The HTTP routes of the foundation, through an in-process HTTP client."""

from __future__ import annotations

import ortools
import pytest
from fastapi.testclient import TestClient

from app import __version__
from app.main import create_app
from tests.conftest import BAD_FILES, BENCHMARKS, DIAMOND, load


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def test_healthz(client):
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "version": __version__, "ortools": ortools.__version__,
                        "pool_rebuilds": 0}


def test_openapi_lists_the_routes(client):
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/healthz", "/v1/fusion/validate"} <= paths.keys()


def test_validate_summarizes_a_valid_problem(client):
    data = load(next(p for p in BENCHMARKS if p.name == "mlsys-2026-1.json"))
    r = client.post("/v1/fusion/validate", json=data)
    assert r.status_code == 200
    body = r.json()
    assert body["valid"] is True
    s = body["summary"]
    assert s["ops"] == 5 and s["ops_by_type"] == {"MatMul": 3, "Pointwise": 2}
    assert s["tensors"] == 9 and len(s["graph_outputs"]) == 1
    # SEMANTICS.md "Public benchmarks": compute LB 400,000 / 112,000, slow-memory LB 65,536.
    assert s["lower_bounds"]["per_native_k"] == {"compute": 400000.0, "io": 65536.0,
                                                 "total": 400000.0}
    assert s["lower_bounds"]["per_op"]["compute"] == 112000.0


def test_validate_reports_every_semantic_fault_with_its_path(client):
    data = load(next(p for p in BAD_FILES if "17" in p.name))
    r = client.post("/v1/fusion/validate", json=data)
    assert r.status_code == 422
    errors = r.json()["errors"]
    assert errors[0]["path"] == "$.inputs" and errors[0]["rule"] == "length.ops"
    assert "inputs has 99 entries but op_types has 103" in errors[0]["msg"]
    assert sum(e["rule"] == "index.tensor" for e in errors) == 9


def test_validate_reports_schema_faults_in_the_same_shape(client):
    data = {**DIAMOND, "widths": [128, "x", 128, 128]}
    del data["op_types"]
    r = client.post("/v1/fusion/validate", json=data)
    assert r.status_code == 422
    paths = {e["path"]: e for e in r.json()["errors"]}
    assert paths["$.op_types"]["msg"] == "required field 'op_types' is missing"
    assert "$.widths[1]" in paths


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b"", b'"text"'])
def test_validate_rejects_non_object_bodies_with_422(client, body):
    r = client.post("/v1/fusion/validate", content=body,
                    headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["errors"]
