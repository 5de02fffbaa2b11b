"""Segment sizes of the layout search (``solver/layout/lns.py``) on one large graph: the
gain over the best baseline within a time limit, one line per schedule of sizes.

    .venv/bin/python benchmarks/segments.py \
        benchmarks/layout/models/llama-3.1-8b-prefill128-l32.json \
        --sizes 48 12 6 4 4,8,16,32 [--time-limit 60] [--workers 2] [--device NAME]
        [--out benchmarks/results/segments.json]

Each ``--sizes`` item is one run: a comma list is the cycle of sizes of that run (the
last item above is the default, ``lns.SEGMENT_SIZES``). The time limit counts from before
the graph is analysed, as in a solve. Prints one JSON line per run, then the table; the
JSON (with ``meta``) is rendered into BENCHMARKS.md by ``render.py``.
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
from benchmarks.render import segments_table  # noqa: E402
from models.errors import InputValidationError  # noqa: E402
from models.layout import parse_graph  # noqa: E402
from solver.layout import BASELINE_POLICIES, lns  # noqa: E402
from solver.layout.evaluate import evaluate  # noqa: E402
from solver.layout.plan import build_plan  # noqa: E402
from solver.layout.problem import analyze, resolve_device  # noqa: E402


def run(path: Path, sizes: tuple[int, ...], limit: float, workers: int,
        device: str | None) -> dict:
    started = time.perf_counter()
    graph = parse_graph(json.loads(path.read_text()))
    problem = analyze(graph, resolve_device(graph, device))
    priced = [(build_plan(problem, assign(problem), name, 0.0).total_latency_us, assign(problem))
              for name, assign in BASELINE_POLICIES.items()]
    baseline, start = min(priced, key=lambda p: p[0])
    found = lns.search(problem, start, started + limit, seed=0, workers=workers, sizes=sizes)
    plan = build_plan(problem, found.assignment, "segments", 0.0)
    assert evaluate(problem, plan).valid and plan.total_latency_us == found.total_us
    return {"graph": path.stem, "device": problem.device.name, "sizes": list(sizes),
            "best_baseline_us": baseline, "segments_us": found.total_us,
            "gain_pct": 100 * (1 - found.total_us / baseline), "rounds": found.rounds,
            "improved": found.improved, "wall_s": time.perf_counter() - started}


def sizes_list(text: str) -> tuple[int, ...]:
    """``4,8,16``: positive segment sizes, as argparse reads one ``--sizes`` item."""
    try:
        sizes = tuple(int(s) for s in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma list of integers") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': every segment size must be at least 1")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", type=Path)
    parser.add_argument("--sizes", nargs="+", type=sizes_list, default=[lns.SEGMENT_SIZES])
    parser.add_argument("--time-limit", type=positive, default=60.0)
    parser.add_argument("--workers", type=at_least(1), default=2)
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "segments.json")
    args = parser.parse_args()
    if not args.graph.is_file():
        parser.error(f"no graph file at {args.graph}")
    started = meta()
    rows = []
    for sizes in args.sizes:
        try:
            rows.append(run(args.graph, sizes, args.time_limit, args.workers, args.device))
        except InputValidationError as exc:  # e.g. weights beyond the device's DRAM
            raise SystemExit(f"{args.graph}: {exc.issues[0].msg}") from None
        print(json.dumps(rows[-1]), flush=True)
    print(segments_table(rows))
    write_results(args.out, started, rows, time_limit_s=args.time_limit,
                  workers=args.workers)


if __name__ == "__main__":
    main()
