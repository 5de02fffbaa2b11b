"""A load generator for a running layoutsat server: many concurrent small solves while a
separate connection measures ``/healthz``. Used by the load test and ``benchmarks/load.py``."""

from __future__ import annotations

import asyncio
import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
FUSION = json.loads((ROOT / "app/examples/fusion-example.json").read_text())
LAYOUT = json.loads((ROOT / "app/examples/layout-mlp-small.json").read_text())
HEALTH_EVERY_S = 0.01


def _request(i: int) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Alternating fusion and layout solves, each with its own seed so none is cached."""
    if i % 2:
        return "/v1/fusion/solve", {"solver": "greedy", "seed": i}, FUSION
    return "/v1/layout/solve", {"solver": "greedy", "seed": i}, LAYOUT


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def run_load(base_url: str, solves: int = 200, first_seed: int = 0) -> dict[str, Any]:
    """Fire ``solves`` requests at once (seeds from ``first_seed``, so a repeat on the same
    server is not answered from its cache); a thread of its own samples /healthz until the last
    one answers (so the load's own event loop never delays a probe)."""
    health_ms: list[float] = []
    finished = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            while not finished.is_set():
                started = time.perf_counter()
                answer = client.get("/healthz")
                health_ms.append((time.perf_counter() - started) * 1000)
                if answer.status_code != 200:
                    raise AssertionError(f"/healthz answered {answer.status_code}")
                time.sleep(HEALTH_EVERY_S)

    async def solve(client: httpx.AsyncClient, i: int) -> tuple[int, float]:
        path, params, body = _request(first_seed + i)
        started = time.perf_counter()
        answer = await client.post(path, params=params, json=body)
        return answer.status_code, time.perf_counter() - started

    limits = httpx.Limits(max_connections=solves + 10)
    prober = threading.Thread(target=probe, name="healthz-probe")
    async with httpx.AsyncClient(base_url=base_url, timeout=300, limits=limits) as load:
        prober.start()
        started = time.perf_counter()
        answers = await asyncio.gather(*(solve(load, i) for i in range(solves)))
        wall = time.perf_counter() - started
        finished.set()
        prober.join()
    codes = [code for code, _ in answers]
    seconds = [s for _, s in answers]
    return {"solves": solves, "failures": sum(code != 200 for code in codes),
            "statuses": sorted(set(codes)), "wall_s": round(wall, 2),
            "solve_p50_s": round(statistics.median(seconds), 3),
            "solve_p99_s": round(percentile(seconds, 99), 3),
            "health_samples": len(health_ms),
            "health_p50_ms": round(statistics.median(health_ms), 1),
            "health_p99_ms": round(percentile(health_ms, 99), 1),
            "health_max_ms": round(max(health_ms), 1)}
