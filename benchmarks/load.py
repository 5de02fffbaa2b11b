"""Load the service: a real ``layoutsat serve`` on loopback, 200 concurrent small fusion and
layout solves while a separate connection samples ``/healthz``; medians over repeats.

    .venv/bin/python benchmarks/load.py [--solves 200] [--repeats 3] [--pool-workers 2]
        [--out benchmarks/results/load.json]

The same generator (``tests/load_client.py``) drives the load test of the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least  # noqa: E402
from benchmarks.meta import meta  # noqa: E402
from benchmarks.render import load_table  # noqa: E402
from tests.live_server import Server  # noqa: E402
from tests.load_client import run_load  # noqa: E402

REPORTED = ("wall_s", "solve_p50_s", "solve_p99_s", "health_p50_ms", "health_p99_ms",
            "health_max_ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solves", type=at_least(1), default=200)
    parser.add_argument("--repeats", type=at_least(1), default=3)
    parser.add_argument("--pool-workers", type=at_least(1), default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/load.json")
    args = parser.parse_args()
    started = meta()
    runs = []
    with tempfile.TemporaryDirectory(prefix="layoutsat-load-") as data:
        server = Server(Path(data), workers=args.pool_workers)
        try:
            for i in range(args.repeats):
                numbers = asyncio.run(run_load(server.url, args.solves, i * args.solves))
                print(f"run {i + 1}: {numbers}")
                runs.append(numbers)
        finally:
            server.stop()
    medians = {k: statistics.median(r[k] for r in runs) for k in REPORTED}
    failures = sum(r["failures"] for r in runs)
    print(f"median of {len(runs)}: {medians}; failures {failures}")
    results = {"meta": started, "runs": runs, "median": medians, "failures": failures}
    print(load_table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
