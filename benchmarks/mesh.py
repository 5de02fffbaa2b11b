"""Mesh plans of the mesh model suite: `cpsat` against the three baselines (replicate,
megatron, autoshard) per (model, mesh), each solve a fresh ``layoutsat layout solve``
process: total, bound and gap, collectives, per-chip DRAM, process wall and peak memory.

    .venv/bin/python benchmarks/mesh.py [--meshes n300,t3000,galaxy] [--time-limit 60]
        [--baseline-limit 30] [--graphs PATH ...] [--only NAME ...]
        [--out benchmarks/results/mesh.json]

A pair whose graph no plan fits (every solver refused with ``mesh.dram_capacity``) is kept
with its errors, so the table says so. Wall and peak RSS are the child's own
(``os.wait4``), start-up and exit included. The JSON (with ``meta``) is rendered into
BENCHMARKS.md by ``render.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cli_run import (  # noqa: E402
    add_suite_arguments,
    graph_files,
    solve_in_child,
)
from benchmarks.meta import meta, write_results  # noqa: E402

BASELINES = ("replicate", "megatron", "autoshard")
GRAPHS = [ROOT / "benchmarks/layout/mesh_models",
          ROOT / "benchmarks/layout/models/llama-3.1-8b-prefill128-l32.json",
          ROOT / "benchmarks/layout/models/vit-b16.json"]
"""The mesh models, plus the one-chip suite's 8B prefill and ViT planned on meshes."""


def run_one(graph: Path, mesh: str, solver: str, limit: float, workers: int) -> dict:
    """One solve in a child process: its plan's numbers, the wall and peak RSS."""
    plan, run = solve_in_child([str(graph), "--mesh", mesh, "--solver", solver,
                                "--time-limit", str(limit), "--workers", str(workers)], ROOT)
    if plan is None:
        return run
    m = plan["mesh"]
    kinds: dict[str, int] = {}
    for c in m["collectives"]:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    return {"ops": len(plan["schedule"]), "total_us": plan["total_latency_us"],
            "bound_us": plan["stats"]["best_bound"], "gap": plan["stats"]["gap"],
            "status": plan["status"], "chip_us": m["chip_latency_us"],
            "collective_us": m["collective_latency_us"], "collectives": kinds,
            "dram_gib": m["memory"]["dram_peak_bytes"] / 2**30, **run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--meshes", default="n300,t3000,galaxy")
    add_suite_arguments(parser, GRAPHS, 60.0, 30.0)
    args = parser.parse_args()
    paths = graph_files(parser, args.graphs)
    started = meta()
    rows = []
    for path in paths:
        if args.only and path.stem not in args.only:
            continue
        for mesh in args.meshes.split(","):
            row: dict = {"graph": path.stem, "mesh": mesh, "time_limit_s": args.time_limit}
            for solver in (*BASELINES, "cpsat"):
                limit = args.time_limit if solver == "cpsat" else args.baseline_limit
                row[solver] = run_one(path.resolve(), mesh, solver, limit, args.workers)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        write_results(args.out, started, rows)


if __name__ == "__main__":
    main()
