"""Against a real uvicorn server on loopback: the load test (200 concurrent solves while
/healthz stays fast) and a restart with queued and running jobs."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from tests.layout_fixtures import SLOW_GRAPH
from tests.live_server import Server
from tests.load_client import FUSION, run_load

ROOT = Path(__file__).resolve().parents[1]
SLOW_LAYOUT = json.loads(SLOW_GRAPH.read_text())


@pytest.fixture
def server(tmp_path):
    running = Server(tmp_path)
    yield running
    if running.process.poll() is None:
        running.stop()


def test_200_concurrent_solves_and_healthz_stays_fast(server):
    numbers = asyncio.run(run_load(server.url, solves=200))
    print("load:", numbers)
    assert numbers["failures"] == 0, numbers
    assert numbers["health_samples"] >= 20, numbers
    assert numbers["health_p99_ms"] < 100, numbers


def test_a_server_restart_loses_no_job(tmp_path):
    first = Server(tmp_path, workers=1)
    submit = lambda body: httpx.post(first.url + "/v1/jobs", json=body).json()  # noqa: E731
    running = submit({"kind": "layout", "payload": SLOW_LAYOUT, "options": {"time_limit_s": 3}})
    queued = [submit({"kind": "fusion", "payload": FUSION, "options": {"solver": s}})
              for s in ("greedy", "unfused")]
    deadline = time.monotonic() + 30
    while httpx.get(f"{first.url}/v1/jobs/{running['id']}").json()["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    first.stop()

    second = Server(tmp_path, workers=1)
    try:
        for job in (running, *queued):
            deadline = time.monotonic() + 90
            while (seen := httpx.get(f"{second.url}/v1/jobs/{job['id']}").json())["state"] in (
                    "queued", "running"):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            assert seen["state"] == "done", seen
        assert httpx.get(f"{second.url}/v1/jobs/{running['id']}").json()["attempts"] == 2
    finally:
        second.stop()


def test_200_concurrent_submissions_of_one_key_with_a_limit_of_100_accept_exactly_100(
        tmp_path):
    """The per-key limit is checked and the job stored in one transaction. Every job is
    a slow solve on one worker, so none finishes while the 200 arrive."""
    problem = json.loads((ROOT.parent / "shared/mlsys2026/benchmarks/mlsys-2026-5.json")
                         .read_text())
    server = Server(tmp_path, workers=1, api_keys="burst-key",
                    max_queued_jobs_per_client="100")
    key = {"authorization": "Bearer burst-key"}

    async def burst() -> list[int]:
        limits = httpx.Limits(max_connections=210)
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as c:
            answers = await asyncio.gather(*(c.post("/v1/jobs", headers=key, json={
                "kind": "fusion", "payload": problem,
                "options": {"seed": i, "time_limit_s": 120}}) for i in range(200)))
        return [a.status_code for a in answers]

    try:
        codes = asyncio.run(burst())
        assert codes.count(202) == 100 and codes.count(429) == 100, sorted(set(codes))
    finally:
        server.stop()
