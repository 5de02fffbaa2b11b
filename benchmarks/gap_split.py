"""How much of each gap is the bound and how much the search: the bound a solve reported
(by parts, ``solver/layout/bound.py``) against the whole graph's LP relaxation, for the
plans of a ``benchmarks/proofs.py`` run.

    .venv/bin/python benchmarks/gap_split.py benchmarks/results/proofs-10s.json
        [benchmarks/results/proofs-60s.json ...] [--min-ops 61] [--whole-max-ops 800]
        [--graphs benchmarks/layout/models] [--out benchmarks/results/gap-split.json]

For each (graph, preset) of the given runs, the ``after`` plan's total ``found`` and the
bound ``parts`` its solve reported are set against the whole model's LP ``whole`` (built
and solved here without a time limit; left out for graphs over ``--whole-max-ops``: the
1,472-op Llama-3.1-8B's model takes 35 s and 2.1 GB to build). The gap
``(found - parts) / found`` splits into the cuts' share ``(whole - parts) / found`` (what
cutting the graph into parts costs the bound) and the rest ``(found - whole) / found``:
the search's, plus the LP's own integrality gap, which on every graph of up to 60 ops is
under 0.5 us (``benchmarks/relaxation.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least  # noqa: E402
from benchmarks.meta import meta, write_results  # noqa: E402
from models.layout import parse_graph  # noqa: E402
from solver.layout import cpsat_model  # noqa: E402
from solver.layout.problem import analyze, resolve_device  # noqa: E402
from solver.relaxation import relax  # noqa: E402


def whole_lp_us(problem) -> float | None:  # noqa: ANN001
    relaxed = relax(cpsat_model.build(problem).model, 3600)
    return None if relaxed is None else relaxed.objective / cpsat_model.UNITS_PER_US


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="results of benchmarks/proofs.py")
    parser.add_argument("--min-ops", type=at_least(0), default=61,
                        help="smaller graphs are one model, with the model's own bound")
    parser.add_argument("--whole-max-ops", type=at_least(0), default=800,
                        help="no whole-graph LP for larger graphs")
    parser.add_argument("--graphs", type=Path, default=ROOT / "benchmarks/layout/models",
                        help="where the runs' graphs are")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/gap-split.json")
    args = parser.parse_args()
    for run in args.runs:
        if not run.is_file():
            parser.error(f"no results file at {run}")
    started = meta()
    rows = []
    for run in args.runs:
        for r in json.loads(run.read_text())["rows"]:
            after = r["after"]
            if "error" in after or after["ops"] < args.min_ops:
                continue
            graph = parse_graph(json.loads((args.graphs / f"{r['graph']}.json").read_text()))
            problem = analyze(graph, resolve_device(graph, r["device"]))
            clock = time.perf_counter()
            whole = whole_lp_us(problem) if after["ops"] <= args.whole_max_ops else None
            whole_s = time.perf_counter() - clock
            found, parts = after["total_us"], after["bound_us"]
            row = {"graph": r["graph"], "device": r["device"], "ops": after["ops"],
                   "time_limit_s": r["time_limit_s"], "found_us": found, "parts_us": parts,
                   "whole_lp_us": whole, "whole_s": whole_s, "gap": (found - parts) / found,
                   "cuts_share": None if whole is None else (whole - parts) / found,
                   "rest_share": None if whole is None else (found - whole) / found}
            print(json.dumps(row), flush=True)
            rows.append(row)
    write_results(args.out, started, rows)


if __name__ == "__main__":
    main()
