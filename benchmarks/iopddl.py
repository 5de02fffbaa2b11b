"""The IOPDDL contest benchmarks (A, G, M, S) through the command line, as the contest ran
them: the whole process timed at the benchmark's timeout, the solution file re-checked by
the evaluator, the peak RSS of the process measured.

    .venv/bin/python benchmarks/iopddl.py                    # full and quarter timeouts
    .venv/bin/python benchmarks/iopddl.py --only G --scale 1 # one benchmark, full timeout

Writes ``benchmarks/results/iopddl.json``; ``benchmarks/render.py`` makes the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.cli.io import load_json  # noqa: E402
from benchmarks.arguments import positive  # noqa: E402
from benchmarks.meta import meta, write_results  # noqa: E402
from benchmarks.render import iopddl_table  # noqa: E402
from solver.iopddl.evaluate import evaluate  # noqa: E402
from solver.iopddl.problem import parse_problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "iopddl"
OUT = ROOT / "benchmarks" / "results" / "iopddl.json"
BENCHMARKS = {  # timeout (s) and best published cost, from ../shared/iopddl/README.md
    "A": (60, 6_548_641_531),
    "G": (120, 217_039),
    "M": (180, 49_928_460_991),
    "S": (240, 1_534_613_444),
}


def run(name: str, timeout: float, out: Path, solver: str = "cpsat") -> dict:
    """Solve one benchmark in a fresh process (its own peak RSS measured: this process
    holds no problem while it runs); the solution is checked later by ``check``."""
    path = SHARED / f"asplos-2025-iopddl-{name}.json.gz"
    started = time.monotonic()
    child = subprocess.Popen(
        [str(Path(sys.executable).parent / "layoutsat"), "iopddl", "solve", str(path),
         "-o", str(out), "--time-limit", str(timeout), "--solver", solver, "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout = child.stdout.read() if child.stdout else b""
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    claimed = json.loads(stdout) if stdout.strip() else {}
    reduction = (claimed.get("stats") or {}).get("reduction") or {}
    return {"benchmark": name, "solver": solver, "timeout_s": timeout,
            "reduced_nodes": reduction.get("nodes"), "reduced_edges": reduction.get("edges"),
            "claimed": claimed.get("cost"), "bound": claimed.get("bound"),
            "gap": claimed.get("gap"), "status": claimed.get("status"),
            "wall_s": round(wall, 2), "peak_rss_mib": round(usage.ru_maxrss / 1024),
            "exit": os.waitstatus_to_exitcode(status)}


def check(row: dict, out: Path) -> dict:
    """The row with the solution file re-checked by the evaluator (the cost counted is the
    evaluator's, not the solver's)."""
    path = SHARED / f"asplos-2025-iopddl-{row['benchmark']}.json.gz"
    problem = parse_problem(load_json(path, "iopddl problem"))
    solution = json.loads(out.read_text()) if out.is_file() else None
    report = evaluate(problem, solution) if solution is not None else None
    cost = report.cost if report is not None and report.valid else None
    best = BENCHMARKS[row["benchmark"]][1]
    return {**row, "nodes": problem.n, "edges": problem.m, "valid": cost is not None,
            "cost": cost, "best_published": best,
            "ratio": None if cost is None else cost / best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), default=None)
    parser.add_argument("--scale", nargs="*", type=positive, default=[1.0, 0.25],
                        help="fractions of each contest timeout to run at")
    parser.add_argument("--solvers", nargs="*", default=["cpsat", "greedy"],
                        choices=["cpsat", "greedy", "cheapest"],
                        help="solvers to run (the baselines only at the largest scale: they end "
                        "long before)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    started = meta()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for scale in args.scale:
            for name in args.only or sorted(BENCHMARKS):
                for solver in args.solvers:
                    if solver != "cpsat" and scale != max(args.scale):
                        continue
                    out = Path(tmp) / f"{name}-{scale}-{solver}.json"
                    row = run(name, BENCHMARKS[name][0] * scale, out, solver)
                    print(json.dumps(row), flush=True)
                    runs.append((row, out))
        rows = [check(row, out) for row, out in runs]
    print(iopddl_table(rows))
    write_results(args.out, started, rows)


if __name__ == "__main__":
    main()
