"""Run the layout solvers on every example graph and preset; print and save the table
(the JSON, with ``meta``, is rendered into BENCHMARKS.md by ``render.py``).

    .venv/bin/python benchmarks/layout.py [--time-limit 10] [--workers 2]
        [--out benchmarks/results/layout.json]

The baselines and ``cpsat`` of one (graph, preset) run back to back, each in a fresh
process (``isolated.py``).

Each plan is checked by the evaluator (inside ``solve``); an invalid plan fails the run.
A preset that cannot hold a graph (its DRAM) is skipped with a note.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least, positive  # noqa: E402
from benchmarks.isolated import isolated  # noqa: E402
from benchmarks.meta import meta, write_results  # noqa: E402
from benchmarks.render import layout_table  # noqa: E402
from models.errors import InputValidationError  # noqa: E402
from models.layout import parse_graph  # noqa: E402
from solver.layout import BASELINES, SOLVERS, solve  # noqa: E402
from solver.layout.plan import plan_summary  # noqa: E402
from solver.layout.problem import analyze, resolve_device  # noqa: E402

PRESETS = ("wormhole_n150", "blackhole_p150")


def run(graph_dir: Path, time_limit: float, workers: int) -> list[dict]:
    rows = []
    for path in sorted(graph_dir.glob("*.json")):
        graph = parse_graph(json.loads(path.read_text()))
        for device in PRESETS:
            try:
                analyze(graph, resolve_device(graph, device))
            except InputValidationError as exc:  # e.g. weights beyond the device's DRAM
                print(f"{path.name} {device}: rejected ({exc.issues[0].rule})", flush=True)
                continue
            summaries = []
            for solver in (*BASELINES, *(s for s in SOLVERS if s not in BASELINES)):
                plan = isolated(solve, graph, solver, device, time_limit_s=time_limit,
                                workers=workers)
                if plan.status == "invalid":
                    raise SystemExit(f"{path.name} {device} {solver}: invalid plan "
                                     f"{[v.kind for v in plan.violations]}")
                summaries.append({**plan_summary(graph, plan), "gap": plan.stats.gap,
                                  "tensors": len(graph.tensors)})
            dram_total = summaries[0]["total_latency_us"]
            best = min(s["total_latency_us"] for s in summaries if s["solver"] in BASELINES)
            rows += [{**s, "vs_dram": dram_total / s["total_latency_us"],
                      "vs_best_baseline": best / s["total_latency_us"]} for s in summaries]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=Path, default=ROOT / "benchmarks" / "layout")
    parser.add_argument("--time-limit", type=positive, default=10.0, help="cpsat seconds")
    parser.add_argument("--workers", type=at_least(1), default=2, help="cpsat search workers")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "layout.json")
    args = parser.parse_args()
    started = meta()
    rows = run(args.graphs, args.time_limit, args.workers)
    print(layout_table(rows))
    write_results(args.out, started, rows, time_limit_s=args.time_limit,
                  workers=args.workers)


if __name__ == "__main__":
    main()
