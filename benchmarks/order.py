"""What searching the op order gains (``order="search"``), on every shipped layout graph
(or the graphs of ``--graphs``, e.g. ``benchmarks/layout_order_suite.py --write``), both
presets.

    .venv/bin/python benchmarks/order.py [--time-limit 10] [--workers 2]
        [--graphs DIR ...] [--out benchmarks/results/order.json]

Each (graph, preset) is solved by ``cpsat`` twice, on the graph's order and with the
order search (the order model on graphs solved as one model, order moves in the segment
search beyond), each plan checked by the evaluator inside ``solve``.
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
from benchmarks.render import order_table  # noqa: E402
from models.errors import InputValidationError  # noqa: E402
from models.layout import parse_graph  # noqa: E402
from solver.layout import solve  # noqa: E402
from solver.layout.problem import analyze, resolve_device  # noqa: E402

PRESETS = ("wormhole_n150", "blackhole_p150")


def run(paths: list[Path], time_limit: float, workers: int) -> list[dict]:
    rows = []
    for path in paths:
        graph = parse_graph(json.loads(path.read_text()))
        for device in PRESETS:
            try:
                analyze(graph, resolve_device(graph, device))
            except InputValidationError as exc:
                print(f"{path.name} {device}: rejected ({exc.issues[0].rule})", flush=True)
                continue
            plans = {order: isolated(solve, graph, "cpsat", device, time_limit_s=time_limit,
                                     workers=workers, order=order)
                     for order in ("given", "search")}
            for order, plan in plans.items():
                if plan.status == "invalid":
                    raise SystemExit(f"{path.name} {device} {order}: invalid plan")
            given, searched = plans["given"], plans["search"]
            row = {"graph": path.stem, "device": device, "ops": len(graph.ops),
                   "given_us": given.total_latency_us, "search_us": searched.total_latency_us,
                   "given_status": given.status, "search_status": searched.status,
                   "reordered": searched.schedule != given.schedule,
                   "given_gap": given.stats.gap, "search_gap": searched.stats.gap,
                   "given_wall_s": given.stats.wall_time_s,
                   "search_wall_s": searched.stats.wall_time_s}
            print(row, flush=True)
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=positive, default=10.0, help="seconds per solve")
    parser.add_argument("--workers", type=at_least(1), default=2, help="cpsat search workers")
    parser.add_argument("--graphs", type=Path, nargs="+", default=None,
                        help="directories of graphs (default: the shipped ones)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "order.json")
    args = parser.parse_args()
    layout = ROOT / "benchmarks" / "layout"
    dirs = args.graphs or [layout, layout / "models"]
    missing = [d for d in dirs if not d.is_dir()]
    if missing:
        parser.error(f"--graphs: no such directory: {missing[0]}")
    paths = [p for d in dirs for p in sorted(d.glob("*.json"))]
    started = meta()
    rows = run(paths, args.time_limit, args.workers)
    print(order_table(rows))
    write_results(args.out, started, rows, time_limit_s=args.time_limit, workers=args.workers)


if __name__ == "__main__":
    main()
