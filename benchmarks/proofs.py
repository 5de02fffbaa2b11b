"""How far `cpsat` ends from its bound on the model suite: gap, process wall and peak memory,
each solve a fresh ``layoutsat layout solve`` process; with ``--before`` the same pair is
solved by another checkout right before (the "before" of a change, under the same load).

    .venv/bin/python benchmarks/proofs.py [--time-limit 10] [--min-ops 0] [--max-ops 300]
        [--graphs benchmarks/layout/models] [--before PATH]
        [--out benchmarks/results/proofs-10s.json]

``--before`` runs that tree's code (its ``app.cli``) with this interpreter, e.g. a
``git worktree`` of the previous commit. Wall and peak RSS are the child's own
(``os.wait4``), start-up and exit included. A graph a preset cannot hold (over its DRAM)
is skipped, as the layout runner does. Prints one JSON line per solve; the JSON (with
``meta``) is rendered into BENCHMARKS.md by ``render.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least, positive  # noqa: E402
from benchmarks.cli_run import run_cli  # noqa: E402
from benchmarks.meta import meta, write_results  # noqa: E402

PRESETS = ("wormhole_n150", "blackhole_p150")


def run_one(checkout: Path, graph: Path, device: str, limit: float, workers: int) -> dict:
    """One solve in a child process: its plan's numbers, the wall and peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "plan.json"
        run = run_cli(["layout", "solve", str(graph), "-o", str(out), "--device", device,
                       "--time-limit", str(limit), "--workers", str(workers)], checkout,
                      Path(tmp))
        error = run.stderr
        if not run.ok or not out.exists():
            return {"error": error.strip().splitlines()[-1] if error.strip() else "no plan"}
        plan = json.loads(out.read_text())
    stats = plan["stats"]
    return {"ops": len(plan["schedule"]), "total_us": plan["total_latency_us"],
            "bound_us": stats["best_bound"], "gap": stats["gap"], "status": plan["status"],
            "wall_s": run.wall_s, "peak_mb": run.peak_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=positive, default=10.0)
    parser.add_argument("--workers", type=at_least(1), default=2)
    parser.add_argument("--max-ops", type=at_least(1), default=None,
                        help="only graphs of at most this many ops")
    parser.add_argument("--min-ops", type=at_least(0), default=0,
                        help="only graphs of at least this many ops")
    parser.add_argument("--graphs", type=Path, default=ROOT / "benchmarks/layout/models")
    parser.add_argument("--before", type=Path, default=None,
                        help="a checkout to solve each pair with first")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not args.graphs.is_dir():
        parser.error(f"no graph directory at {args.graphs}")
    if args.before is not None and not (args.before / "app" / "cli").is_dir():
        parser.error(f"no checkout at {args.before} (no app/cli in it)")
    started = meta()
    rows = []
    for path in sorted(args.graphs.glob("*.json")):
        ops = len(json.loads(path.read_text())["ops"])
        if ops < args.min_ops or (args.max_ops is not None and ops > args.max_ops):
            continue
        for device in PRESETS:
            row = {"graph": path.stem, "device": device, "time_limit_s": args.time_limit}
            runs = {"before": args.before, "after": ROOT} if args.before else {"after": ROOT}
            for label, checkout in runs.items():
                row[label] = run_one(checkout.resolve(), path.resolve(), device,
                                     args.time_limit, args.workers)
            if any("too small for this graph" in r.get("error", "") for r in row.values()
                   if isinstance(r, dict)):
                continue  # over the preset's DRAM, as the layout runner skips it
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.out:
        write_results(args.out, started, rows)


if __name__ == "__main__":
    main()
