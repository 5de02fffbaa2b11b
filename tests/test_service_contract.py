"""The service contract (issue 23): every request that once broke the worker pool or got a
500 is a 4xx naming field and rule, at submission; the pool survives and is rebuilt when
broken; API keys isolate clients; work is bounded; URLs never come from Host."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.jobs.pool import SolveFailed
from app.main import create_app
from app.settings import Settings
from solver.deadline import Deadline
from tests.layout_fixtures import SLOW_GRAPH
from tests.pool_breakers import raise_unpicklable

ROOT = Path(__file__).resolve().parents[1]
FUSION = json.loads((ROOT / "app/examples/fusion-example.json").read_text())
LAYOUT = json.loads((ROOT / "app/examples/layout-mlp-small.json").read_text())
JSON = {"content-type": "application/json"}


def make(tmp_path: Path, **overrides) -> TestClient:
    settings = Settings(data_dir=tmp_path, pool_workers=overrides.pop("pool_workers", 1),
                        **overrides)
    return TestClient(create_app(settings))


def wait_for(client: TestClient, job_id: str, headers=None, within_s: float = 60) -> dict:
    deadline = time.monotonic() + within_s
    while (job := client.get(f"/v1/jobs/{job_id}", headers=headers).json())["state"] in (
            "queued", "running"):
        assert time.monotonic() < deadline, f"job stuck in {job['state']}"
        time.sleep(0.05)
    return job


def rules(answer: httpx.Response) -> set[str]:
    return {e["rule"] for e in answer.json()["errors"]}


def a_solve_still_works(client: TestClient) -> None:
    ok = client.post("/v1/fusion/solve?solver=greedy", json=FUSION)
    assert ok.status_code == 200, ok.text
    job = client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                        "options": {"solver": "unfused"}})
    assert job.status_code == 202
    assert wait_for(client, job.json()["id"])["state"] == "done"
    assert client.get("/healthz").json()["status"] == "ok"


# --------------------------------------------------------------- pool-breaking requests


def nested(levels: int) -> dict:
    inner: dict = {}
    for _ in range(levels):
        inner = {"k": inner}
    return inner


def test_requests_that_broke_the_pool_are_4xx_and_the_next_solve_succeeds(tmp_path):
    infeasible = {**FUSION, "fast_memory_capacity": 1}
    with make(tmp_path) as client:
        sync = client.post("/v1/fusion/solve", json=infeasible)
        assert sync.status_code == 422 and rules(sync) == {"capacity.op_does_not_fit"}
        a_solve_still_works(client)
        job = client.post("/v1/jobs", json={"kind": "fusion", "payload": infeasible})
        assert job.status_code == 422 and job.json()["errors"][0]["path"].startswith(
            "$.payload.op_types")
        deep = client.post("/v1/jobs", json={"kind": "fusion", "payload": {
            **FUSION, "extra": nested(520)}})
        assert deep.status_code == 422 and rules(deep) == {"json.depth"}
        compare = client.post("/v1/compare", json={"graphs": [
            {"name": "deep", "graph": {**FUSION, "extra": nested(520)}}]})
        assert compare.status_code == 422 and rules(compare) == {"json.depth"}
        a_solve_still_works(client)
        quick = client.post("/v1/compare", json={
            "graphs": [{"name": "f", "graph": FUSION}], "solvers": ["greedy", "unfused"],
            "time_limit_s": 2})
        assert quick.status_code == 200 and quick.json()["state"] == "done", quick.text


def test_a_broken_pool_is_rebuilt_and_the_request_that_found_it_gets_503(tmp_path):
    with make(tmp_path) as client:
        service = client.app.state.service
        with pytest.raises(SolveFailed) as broke:  # its unpicklable error stops pebble's pool
            asyncio.run(service.pool.run(raise_unpicklable, (), Deadline.after(10)))
        assert broke.value.status == 503 and "being rebuilt" in broke.value.reason
        assert client.get("/healthz").json()["status"] == "degraded"
        a_solve_still_works(client)
        assert client.get("/healthz").json()["pool_rebuilds"] == 1


# ------------------------------------------------------------------ faults at submission


def test_input_faults_that_were_500s_name_field_and_rule(tmp_path):
    small_device = {"name": "tiny", "grid": [1, 1], "l1_size_bytes": 200_000,
                    "l1_unreserved_base_bytes": 100_000, "dram_bandwidth_gbps": 288.0,
                    "clock_ghz": 1.0, "l1_bytes_per_cycle": 64.0, "noc_bytes_per_cycle": 32.0,
                    "tile_matmul_cycles": {"LoFi": 16, "HiFi2": 32, "HiFi3": 48, "HiFi4": 64},
                    "dispatch_overhead_us": 2.0}
    many_steps = {"widths": [4096] * 3, "heights": [4096] * 3, "inputs": [[0], [1]],
                  "outputs": [[1], [2]], "base_costs": [1, 1], "op_types": ["Pointwise"] * 2,
                  "fast_memory_capacity": 100_000, "slow_memory_bandwidth": 10,
                  "native_granularity": [128, 128]}
    fine_grained = {"subgraphs": [[0], [1]], "granularities": [[1, 1, 1], [1, 1, 1]],
                    "tensors_to_retain": [[], []], "subgraph_latencies": [0, 0]}
    huge_dim = copy.deepcopy(LAYOUT)
    huge_dim["tensors"][0]["shape"] = [2**40, 64, 256]
    with make(tmp_path) as client:
        cases = [
            (client.post("/v1/layout/solve?device=no_such_chip", json=LAYOUT),
             422, "device.unknown", "$.query.device"),
            (client.post("/v1/jobs", json={"kind": "layout", "payload": LAYOUT,
                                           "options": {"device": "no_such_chip"}}),
             422, "device.unknown", "$.options.device"),
            (client.post("/v1/jobs", json={"kind": "layout", "payload": LAYOUT,
                                           "options": {"device": small_device}}),
             422, "device.fit", "$.options.device"),
            (client.post("/v1/layout/solve", json={**LAYOUT, "device": small_device}),
             422, "device.too_small", "$.ops[1]"),
            (client.post("/v1/layout/solve", json={
                **LAYOUT, "device": {**small_device, "op_latency_us": -1}}),
             422, "schema.greater_than_equal", "$.device.op_latency_us"),
            (client.post("/v1/layout/solve", json={
                **LAYOUT, "device": {**small_device, "k_block_sync_cycles": "x"}}),
             422, "schema.int_type", "$.device.k_block_sync_cycles"),
            (client.post("/v1/layout/solve", json={
                **LAYOUT, "device": {**small_device, "dram_interleaved_efficiency": 1.5}}),
             422, "schema.less_than_equal", "$.device.dram_interleaved_efficiency"),
            (client.post("/v1/layout/solve", json={
                **LAYOUT, "device": {**small_device, "dram_sharded_efficiency": 0}}),
             422, "schema.greater_than_equal", "$.device.dram_sharded_efficiency"),
            (client.post("/v1/fusion/solve", json={
                **FUSION, "base_costs": [1e308] * len(FUSION["op_types"])}),
             422, "range.cost", "$.base_costs[0]"),
            (client.post("/v1/fusion/solve", json={**FUSION, "slow_memory_bandwidth": 1e-320}),
             422, "range.hardware", "$.slow_memory_bandwidth"),
            (client.post("/v1/layout/solve", json=huge_dim),
             422, "schema.less_than_equal", "$.tensors[0].shape[0]"),
            (client.post("/v1/fusion/solve", content=b"\xff\xfe{}", headers=JSON),
             422, "json.encoding", "$"),
            (client.post("/v1/fusion/solve", content=b"[" * 10_000 + b"]" * 10_000,
                         headers=JSON), 422, "json.depth", "$"),
            (client.post("/v1/fusion/validate", content=b'{"widths": [' + b"7" * 5000 + b"]}",
                         headers=JSON), 422, "json.number_size", "$"),
            (client.post("/v1/fusion/solve", content=json.dumps(FUSION),
                         headers={"content-type": "text/plain"}),
             415, "content_type.unsupported", "$.headers.content-type"),
            (client.post("/v1/fusion/solve", json=LAYOUT), 422, "family.mismatch", "$"),
            (client.post("/v1/fusion/solve?solver=greedy&solver=cpsat", json=FUSION),
             422, "query.repeated", "$.query.solver"),
            (client.post("/v1/fusion/validate", content=json.dumps(FUSION)[:-1] + ', "x": NaN}',
                         headers=JSON), 422, "json.invalid", "$"),
            (client.post("/v1/fusion/solve", json={
                **FUSION, "widths": [2**20] * len(FUSION["widths"]),
                "heights": [2**20] * len(FUSION["heights"])}),
             422, "limit.max_tiles", "$.widths[0]"),
            (client.post("/v1/fusion/evaluate?steps=true", json={"problem": many_steps,
                                                                 "solution": fine_grained}),
             422, "limit.max_detail_steps", "$.solution.granularities"),
            (client.post("/v1/compare", json={"graphs": [{"name": "f", "graph": FUSION}],
                                              "solvers": ["greedy", "greedy"]}),
             422, "solvers.duplicate", "$.solvers"),
        ]
        for answer, status, rule, path in cases:
            assert answer.status_code == status, (rule, answer.text)
            found = {(e["rule"], e["path"]) for e in answer.json()["errors"]}
            assert (rule, path) in found, (rule, path, found)
        a_solve_still_works(client)


def test_fusion_workers_out_of_range_are_named_and_the_default_solves(tmp_path):
    """``workers`` defaults to the machine's cores (two or more fork the cover bound from
    the pool worker); out of range it is refused, naming the field, on both routes, and a
    cpsat solve with the default then answers with a bound at or below its schedule."""
    with make(tmp_path) as client:
        for value, rule in ((0, "schema.greater_than_equal"), (65, "schema.less_than_equal")):
            direct = client.post(f"/v1/fusion/solve?solver=cpsat&workers={value}", json=FUSION)
            assert direct.status_code == 422
            assert (rule, "$.query.workers") in {(e["rule"], e["path"])
                                                 for e in direct.json()["errors"]}
            job = client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                                "options": {"workers": value}})
            assert job.status_code == 422
            assert (rule, "$.options.workers") in {(e["rule"], e["path"])
                                                   for e in job.json()["errors"]}
        solved = client.post("/v1/fusion/solve?solver=cpsat&time_limit_s=3", json=FUSION)
        assert solved.status_code == 200, solved.text
        result = solved.json()
        assert result["bound"] <= result["total_latency"]
        a_solve_still_works(client)


# --------------------------------------------------------------------------- isolation


def test_with_keys_jobs_are_private_and_every_route_but_healthz_needs_a_key(tmp_path):
    a, b = ({"authorization": f"Bearer {k}"} for k in ("key-a", "key-b"))
    with make(tmp_path, api_keys="key-a,key-b") as client:
        assert client.get("/healthz").status_code == 200
        bare = client.post("/v1/fusion/validate", json=FUSION)
        assert bare.status_code == 401 and rules(bare) == {"auth.missing"}
        assert bare.headers["www-authenticate"] == "Bearer"
        wrong = client.post("/v1/fusion/validate", json=FUSION,
                            headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401 and rules(wrong) == {"auth.invalid"}
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers=a).status_code == 200
        job = client.post("/v1/jobs", headers=a, json={
            "kind": "fusion", "payload": FUSION, "options": {"solver": "greedy"}})
        assert job.status_code == 202
        job_id = job.json()["id"]
        assert wait_for(client, job_id, headers=a)["state"] == "done"
        assert client.get(f"/v1/jobs/{job_id}", headers=b).status_code == 404
        assert client.delete(f"/v1/jobs/{job_id}", headers=b).status_code == 404
        compare = client.post("/v1/compare", headers=a, json={
            "graphs": [{"name": "f", "graph": FUSION}], "solvers": ["greedy"],
            "time_limit_s": 2})
        assert compare.status_code == 200 and compare.json()["files"]
        compare_id = compare.json()["id"]
        assert client.get(f"/v1/compare/{compare_id}", headers=b).status_code == 404
        file_url = compare.json()["files"][0]
        assert client.get(file_url, headers=b).status_code == 404
        assert client.get(file_url, headers=a).status_code == 200


def test_urls_never_come_from_the_host_header(tmp_path):
    with make(tmp_path) as client:
        slash = client.get("/v1/jobs/", headers={"host": "evil.example"},
                           follow_redirects=False)
        assert slash.status_code == 404 and "location" not in slash.headers
        job = client.post("/v1/jobs", headers={"host": "evil.example"}, json={
            "kind": "fusion", "payload": FUSION, "options": {"solver": "greedy"}})
        assert job.headers["location"] == f"/v1/jobs/{job.json()['id']}"
    with make(tmp_path, public_url="https://solver.example.com/") as client:
        job = client.post("/v1/jobs", headers={"host": "evil.example"}, json={
            "kind": "fusion", "payload": FUSION, "options": {"solver": "greedy"}})
        assert job.headers["location"] == (
            f"https://solver.example.com/v1/jobs/{job.json()['id']}")


# ------------------------------------------------------------------------ bounded work


def test_every_route_that_parses_a_problem_has_the_op_limit(tmp_path):
    many = {**FUSION, "op_types": ["Pointwise"] * 50}
    with make(tmp_path, max_ops=10) as client:
        for path in ("/v1/fusion/validate", "/v1/fusion/solve"):
            answer = client.post(path, json=many)
            assert answer.status_code == 413 and answer.json()["limit"] == "max_ops", path
        evaluate = client.post("/v1/fusion/evaluate", json={"problem": many, "solution": {}})
        assert evaluate.status_code == 413 and evaluate.json()["errors"][0]["loc"] == [
            "problem"]


def test_a_synchronous_compare_is_bounded_by_its_budget(tmp_path):
    slow = json.loads(SLOW_GRAPH.read_text())
    with make(tmp_path, sync_compare_budget_s=1.0, compare_jobs=1) as client:
        started = time.monotonic()
        answer = client.post("/v1/compare", json={
            "graphs": [{"name": "slow", "graph": slow}], "solvers": ["cpsat"],
            "time_limit_s": 20})
        assert time.monotonic() - started < 10
        assert answer.status_code == 202 and answer.json()["state"] in ("queued", "running")
        assert answer.headers["location"] == f"/v1/compare/{answer.json()['id']}"
        client.delete(f"/v1/jobs/{answer.json()['id']}")


def test_the_import_upload_limit_holds_while_streaming(tmp_path):
    pytest.importorskip("onnx")
    with make(tmp_path, max_import_bytes=10_000) as client:
        def chunks():
            for _ in range(100):
                yield b"\0" * 1000

        answer = client.post("/v1/layout/import", content=chunks(),
                             headers={"content-type": "application/octet-stream"})
        assert answer.status_code == 413 and answer.json()["limit"] == "max_import_bytes"
        assert not list((tmp_path / "uploads").glob("*")), "a refused upload was left behind"
        bad = client.post("/v1/layout/import", content=b"not onnx",
                          headers={"content-type": "application/octet-stream"})
        assert bad.status_code == 422 and rules(bad) == {"onnx.corrupt"}
        assert not list((tmp_path / "uploads").glob("*"))
