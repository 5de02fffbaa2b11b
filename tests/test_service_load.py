"""Against a real uvicorn server on loopback: the load test (200 concurrent solves while
/healthz stays fast) and a restart with queued and running jobs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.load_client import FUSION, run_load

ROOT = Path(__file__).resolve().parents[1]
SLOW_LAYOUT = json.loads((ROOT / "benchmarks/layout/llama-decoder-layer.json").read_text())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``layoutsat serve`` in a subprocess, with its data on ``data_dir``."""

    def __init__(self, data_dir: Path, workers: int = 2):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "LAYOUTSAT_DATA_DIR": str(data_dir),
               "LAYOUTSAT_POOL_WORKERS": str(workers)}
        self.log = (data_dir / f"server-{self.port}.log").open("w")
        command = [str(Path(sys.executable).with_name("layoutsat")), "serve", "--port",
                   str(self.port)]
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self.log,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, "the server exited while starting"
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start within 60 s"
            time.sleep(0.2)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.process.send_signal(sig)
        self.process.wait(timeout=60)
        self.log.close()


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
