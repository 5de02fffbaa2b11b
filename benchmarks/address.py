"""What placing L1 buffers by address costs, on every shipped layout graph and preset.

    .venv/bin/python benchmarks/address.py [--time-limit 10] [--workers 2]
        [--out benchmarks/results/address.json]

For each (graph, preset) the ``dfsharding``, ``greedy`` and ``cpsat`` policies run once
(``cpsat`` until the time limit) with the byte-sum capacity of the model; each plan's
buffers are then placed (``solver/layout/address.py``): how many, how full the fullest
step is by sum, what found the offsets and how long it took. The Llama-3.1-8B graph
(1,472 ops, a minute per solve) is left out unless ``--all``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least, positive  # noqa: E402
from benchmarks.meta import meta, write_results  # noqa: E402
from benchmarks.render import address_table  # noqa: E402
from models.errors import InputValidationError  # noqa: E402
from models.layout import parse_graph  # noqa: E402
from solver.deadline import now  # noqa: E402
from solver.layout import SOLVERS, SolveOptions  # noqa: E402
from solver.layout.address import place_assignment  # noqa: E402
from solver.layout.problem import analyze, resolve_device  # noqa: E402

PRESETS = ("wormhole_n150", "blackhole_p150")
POLICIES = ("dfsharding", "greedy", "cpsat")
SLOW = "llama-3.1-8b"


def run(paths: list[Path], time_limit: float, workers: int) -> list[dict]:
    rows = []
    for path in paths:
        graph = parse_graph(json.loads(path.read_text()))
        for device in PRESETS:
            try:
                problem = analyze(graph, resolve_device(graph, device))
            except InputValidationError as exc:
                print(f"{path.name} {device}: rejected ({exc.issues[0].rule})", flush=True)
                continue
            for policy in POLICIES:
                outcome = SOLVERS[policy](problem, SolveOptions(now() + time_limit, 0, workers))
                started = time.monotonic()
                placement = place_assignment(problem, outcome.assignment, now() + time_limit,
                                             workers)
                row = {"graph": path.stem, "device": device, "solver": policy,
                       "ops": len(problem.order), "buffers": len(placement.offsets),
                       "sum_peak": max(placement.load, default=0) / problem.usable_l1,
                       "method": placement.method,
                       "place_s": time.monotonic() - started}
                print(row, flush=True)
                rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=positive, default=10.0, help="cpsat seconds")
    parser.add_argument("--workers", type=at_least(1), default=2, help="cpsat search workers")
    parser.add_argument("--all", action="store_true", help="include the Llama-3.1-8B graph")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "address.json")
    args = parser.parse_args()
    layout = ROOT / "benchmarks" / "layout"
    paths = [p for p in sorted(layout.glob("*.json")) + sorted((layout / "models").glob("*.json"))
             if args.all or SLOW not in p.name]
    started = meta()
    rows = run(paths, args.time_limit, args.workers)
    print(address_table(rows))
    write_results(args.out, started, rows, time_limit_s=args.time_limit,
                  workers=args.workers)


if __name__ == "__main__":
    main()
