"""``layoutsat layout`` and ``/v1/layout``: exit codes, status codes, error shapes."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.main import create_app
from tests.layout_fixtures import SMALL_EXAMPLE, load, tiny

runner = CliRunner()


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def write(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_validate_accepts_a_layout_graph():
    r = runner.invoke(cli, ["validate", str(SMALL_EXAMPLE)])
    assert r.exit_code == 0 and "valid layout graph" in r.output and "mlp-small" in r.output
    r = runner.invoke(cli, ["validate", "--json", str(SMALL_EXAMPLE)])
    assert json.loads(r.stdout)["family"] == "layout"


def test_validate_names_every_fault_of_a_bad_layout_graph(tmp_path):
    g = tiny()
    g["ops"][1]["inputs"] = ["nope"]
    g["tensors"][4]["shape"] = [2]
    r = runner.invoke(cli, ["validate", write(tmp_path, "g.json", g)])
    assert r.exit_code == 1
    assert "$.ops[1].inputs[0]: op 'act' refers to unknown tensor 'nope'" in r.stderr


def test_solve_writes_a_plan_that_evaluate_accepts(tmp_path):
    plan = tmp_path / "plan.json"
    r = runner.invoke(cli, ["layout", "solve", str(SMALL_EXAMPLE), "-o", str(plan),
                            "--solver", "dfsharding", "--device", "blackhole_p150"])
    assert r.exit_code == 0, r.output
    assert "dfsharding: feasible" in r.output and "on blackhole_p150" in r.output
    assert json.loads(plan.read_text())["device"]["name"] == "blackhole_p150"
    r = runner.invoke(cli, ["layout", "evaluate", str(SMALL_EXAMPLE), str(plan)])
    assert r.exit_code == 0 and "valid, total" in r.output


def test_evaluate_exits_1_with_the_violations(tmp_path):
    plan = tmp_path / "plan.json"
    runner.invoke(cli, ["layout", "solve", str(SMALL_EXAMPLE), "-o", str(plan)])
    data = json.loads(plan.read_text())
    data["total_latency_us"] = 1.0
    r = runner.invoke(cli, ["layout", "evaluate", str(SMALL_EXAMPLE),
                            write(tmp_path, "bad.json", data), "--json"])
    assert r.exit_code == 1
    body = json.loads(r.stdout)
    assert body["valid"] is False and body["violations"][0]["kind"] == "total.mismatch"


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (["--solver", "magic"], 2, "'magic' is not one of"),
    (["--device", "tpu"], 2, "unknown device preset 'tpu'"),
    (["--capacity", "bytes"], 2, "'bytes' is not one of"),
    (["--order", "random"], 2, "'random' is not one of"),
])
def test_solve_rejects_unknown_names(args, code, fragment):
    r = runner.invoke(cli, ["layout", "solve", str(SMALL_EXAMPLE), *args])
    assert r.exit_code == code and fragment in r.stderr, r.output


def test_solve_json_plan_and_schema_command():
    r = runner.invoke(cli, ["layout", "solve", str(SMALL_EXAMPLE), "--solver", "dram", "--json"])
    body = json.loads(r.stdout)
    assert body["status"] == "feasible" and body["format"] == "layoutsat-plan"
    assert {t["buffer"] for t in body["tensors"].values()} == {"dram"}
    r = runner.invoke(cli, ["layout", "schema"])
    assert json.loads(r.stdout)["title"] == "LayoutGraph"
    r = runner.invoke(cli, ["layout", "schema", "--answer"])
    assert json.loads(r.stdout)["title"] == "LayoutPlan"


def test_api_solve_and_evaluate(client):
    graph = load(SMALL_EXAMPLE)
    r = client.post("/v1/layout/solve", json=graph, params={"solver": "greedy"})
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["status"] == "feasible" and plan["solver"] == "greedy"
    assert all("from" in c for c in plan["reshards"] + plan["reloads"])
    r = client.post("/v1/layout/evaluate", json={"graph": graph, "plan": plan})
    assert r.status_code == 200 and r.json()["valid"] is True
    plan["ops"][plan["schedule"][0]]["latency_us"] += 5
    r = client.post("/v1/layout/evaluate", json={"graph": graph, "plan": plan})
    assert r.json()["valid"] is False


def test_capacity_sum_plans_carry_no_offsets_and_address_plans_do(tmp_path, client):
    plan = tmp_path / "plan.json"
    r = runner.invoke(cli, ["layout", "solve", str(SMALL_EXAMPLE), "-o", str(plan),
                            "--solver", "greedy", "--capacity", "sum"])
    assert r.exit_code == 0, r.output
    data = json.loads(plan.read_text())
    assert data["l1_allocation"] == "sum"
    assert all(t["l1_offset"] is None for t in data["tensors"].values())
    r = client.post("/v1/layout/solve", json=load(SMALL_EXAMPLE), params={"solver": "greedy"})
    body = r.json()
    assert body["l1_allocation"] == "address"
    in_l1 = [t for t in body["tensors"].values() if t["buffer"] == "l1"]
    assert in_l1 and all(t["l1_offset"] % 32 == 0 for t in in_l1)
    # the same plan without its offsets fails the address check it claims
    for t in in_l1:
        t["l1_offset"] = None
    r = client.post("/v1/layout/evaluate", json={"graph": load(SMALL_EXAMPLE), "plan": body})
    assert r.json()["valid"] is False
    assert "address.missing" in {v["kind"] for v in r.json()["violations"]}


def test_order_search_is_an_option_of_the_cli_and_the_api(tmp_path, client):
    plan = tmp_path / "plan.json"
    r = runner.invoke(cli, ["layout", "solve", str(SMALL_EXAMPLE), "-o", str(plan),
                            "--order", "search", "--time-limit", "5"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["layout", "evaluate", str(SMALL_EXAMPLE), str(plan)])
    assert r.exit_code == 0 and "valid, total" in r.output
    r = client.post("/v1/layout/solve", json=load(SMALL_EXAMPLE),
                    params={"order": "search", "time_limit_s": "5"})
    assert r.status_code == 200 and r.json()["status"] in ("optimal", "feasible"), r.text


def test_api_reports_graph_faults_at_their_path(client):
    g = tiny()
    g["tensors"][0]["dtype"] = "int8"
    r = client.post("/v1/layout/solve", json=g)
    assert r.status_code == 422
    assert r.json()["errors"][0]["path"] == "$.tensors[0].dtype"
    r = client.post("/v1/layout/evaluate", json={"graph": g, "plan": {}})
    assert r.json()["errors"][0]["path"] == "$.graph.tensors[0].dtype"


@pytest.mark.parametrize(("body", "params", "rule"), [
    (tiny(), {"time_limit_s": "0"}, "schema.greater_than"),
    (tiny(), {"solver": "magic"}, "solver.unknown"),
    (tiny(), {"capacity": "bytes"}, "schema.literal_error"),
    (tiny(), {"order": "random"}, "schema.literal_error"),
    (tiny(), {"extra": "1"}, "schema.extra_forbidden"),
    ({}, {}, "schema.missing"),
])
def test_api_rejects_bad_requests_with_422(client, body, params, rule):
    r = client.post("/v1/layout/solve", json=body, params=params)
    assert r.status_code == 422 and rule in {e["rule"] for e in r.json()["errors"]}, r.text


def test_openapi_lists_the_layout_routes(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/layout/solve", "/v1/layout/evaluate"} <= paths.keys()
