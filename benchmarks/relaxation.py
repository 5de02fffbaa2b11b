"""How tight the layout model's bounds are: the per-op floor, CP-SAT's own bound on the
model after a plain search, the LP relaxation solved with CLP (``solver/relaxation.py``)
and the optimum ``cpsat`` proves, on every example graph and preset.

    .venv/bin/python benchmarks/relaxation.py [--time-limit 10] [--workers 2]
        [--out benchmarks/results/relaxation.json]

The plain search is the model hinted with the best baseline and nothing else (no
relaxation, no fixing), for the time limit; it shows where CP-SAT's own LP leaves the
bound. The last columns are ``cpsat`` as shipped, with the same limit. Prints one JSON line
per pair, then the table; the JSON (with ``meta``) is rendered into BENCHMARKS.md by
``render.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ortools.sat.python import cp_model  # noqa: E402

from benchmarks.arguments import at_least, positive  # noqa: E402
from benchmarks.meta import meta, write_results  # noqa: E402
from benchmarks.render import relaxation_table  # noqa: E402
from models.layout import parse_graph  # noqa: E402
from solver.layout import BASELINE_POLICIES, cpsat, cpsat_model, solve  # noqa: E402
from solver.layout.plan import build_plan  # noqa: E402
from solver.layout.problem import analyze, resolve_device  # noqa: E402
from solver.relaxation import relax  # noqa: E402

PRESETS = ("wormhole_n150", "blackhole_p150")


def plain_bound_us(problem, limit: float, workers: int) -> float:  # noqa: ANN001
    """CP-SAT's bound on the model after ``limit`` seconds of a search hinted with the
    best baseline, without the relaxation."""
    start = min((assign(problem) for assign in BASELINE_POLICIES.values()),
                key=lambda a: build_plan(problem, a, "b", 0.0).total_latency_us)
    lm = cpsat_model.build(problem)
    cpsat_model.hint(problem, lm, start)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = limit
    solver.parameters.num_workers = workers
    solver.solve(lm.model)
    return solver.best_objective_bound / cpsat_model.UNITS_PER_US


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=positive, default=10.0)
    parser.add_argument("--workers", type=at_least(1), default=2)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "relaxation.json")
    args = parser.parse_args()
    started = meta()
    rows = []
    for path in sorted((ROOT / "benchmarks/layout").glob("*.json")):
        graph = parse_graph(json.loads(path.read_text()))
        for device in PRESETS:
            problem = analyze(graph, resolve_device(graph, device))
            relaxed = relax(cpsat_model.build(problem).model, args.time_limit)
            plain = plain_bound_us(problem, args.time_limit, args.workers)
            clock = time.perf_counter()
            plan = solve(graph, "cpsat", device, time_limit_s=args.time_limit,
                         workers=args.workers)
            rows.append({"graph": path.stem, "device": device,
                         "floor_us": cpsat.latency_floor_us(problem), "plain_bound_us": plain,
                         "lp_bound_us": None if relaxed is None
                         else relaxed.objective / cpsat_model.UNITS_PER_US,
                         "cpsat_us": plan.total_latency_us, "status": plan.status,
                         "wall_s": time.perf_counter() - clock})
            print(json.dumps(rows[-1]), flush=True)
    print(relaxation_table(rows))
    write_results(args.out, started, rows, time_limit_s=args.time_limit,
                  workers=args.workers)


if __name__ == "__main__":
    main()
