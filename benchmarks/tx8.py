"""TX8 plans of the model suite: `cpsat` against `groupcost` (the seed's compiler) per
model, each solve a fresh ``layoutsat layout solve --device tx8`` process: total, bound
and gap, groups, conversions, SPM peak, process wall and peak memory.

    .venv/bin/python benchmarks/tx8.py [--time-limit 30] [--baseline-limit 30]
        [--graphs PATH ...] [--generated COUNT [--seed S]] [--only NAME ...]
        [--out benchmarks/results/tx8.json]

``--generated`` plans the seeded suite of ``benchmarks/tx8_generate.py`` instead of files.

Wall and peak RSS are the child's own (``os.wait4``), start-up and exit included. The
JSON (with ``meta``) is rendered into BENCHMARKS.md by ``render.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least  # noqa: E402
from benchmarks.cli_run import (  # noqa: E402
    add_suite_arguments,
    graph_files,
    solve_in_child,
)
from benchmarks.meta import meta, write_results  # noqa: E402
from benchmarks.tx8_generate import suite  # noqa: E402

GRAPHS = [ROOT / "benchmarks/layout/models"]
SOLVERS = ("groupcost", "cpsat")


def run_one(graph: Path, solver: str, limit: float, workers: int) -> dict:
    """One solve in a child process: its plan's numbers, the wall and peak RSS."""
    plan, run = solve_in_child([str(graph), "--device", "tx8", "--solver", solver,
                                "--time-limit", str(limit), "--workers", str(workers)], ROOT)
    if plan is None:
        return run
    t = plan["tx8"]
    return {"ops": len(plan["schedule"]), "total_us": plan["total_latency_us"],
            "bound_us": plan["stats"]["best_bound"], "gap": plan["stats"]["gap"],
            "status": plan["status"], "groups": len(t["groups"]),
            "multi_op_groups": sum(1 for g in t["groups"] if len(g["ops"]) > 1),
            "conversions": len(t["conversions"]), "conversion_us": t["conversion_latency_us"],
            "spm_peak_kib": t["spm_peak_bytes"] / 1024, **run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_suite_arguments(parser, GRAPHS, 30.0, 30.0)
    parser.add_argument("--generated", type=at_least(0), default=0,
                        help="plan this many graphs of the generated suite instead")
    parser.add_argument("--seed", type=int, default=0, help="the generated suite's seed")
    args = parser.parse_args()
    scratch = tempfile.TemporaryDirectory()
    if args.generated:
        for doc in suite(args.generated, args.seed):
            (Path(scratch.name) / f"{doc['name']}.json").write_text(json.dumps(doc))
        args.graphs = [Path(scratch.name)]
    paths = graph_files(parser, args.graphs)
    started = meta()
    rows = []
    for path in paths:
        if args.only and path.stem not in args.only:
            continue
        row: dict = {"graph": path.stem, "time_limit_s": args.time_limit}
        for solver in SOLVERS:
            limit = args.time_limit if solver == "cpsat" else args.baseline_limit
            row[solver] = run_one(path.resolve(), solver, limit, args.workers)
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.out:
        write_results(args.out, started, rows)
    scratch.cleanup()


if __name__ == "__main__":
    main()
