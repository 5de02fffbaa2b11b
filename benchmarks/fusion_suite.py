"""Greedy against cpsat on the generated development suite (``fusion_generate.py``), in
both reduction modes: a gain must show on many graphs of the official kinds, not on the
public 8 alone. Saves JSON with ``meta``, every record and the summary (rendered into
BENCHMARKS.md by ``render.py``).

    .venv/bin/python benchmarks/fusion_suite.py [--time-limit 10] [--workers 2] [--seed 0]
        [--count 66] [--only NAME-SUBSTRING ...] [--modes per_native_k per_op]
        [--semantics default|teamkorea] [--out benchmarks/results/fusion-suite.json]

Each record is ``benchmarks/fusion.py``'s row for greedy and cpsat (each solve in a fresh
process, the two back to back; every schedule checked by the evaluator inside ``solve``),
with the problem's family, MatMul share and capacity factor. A solve that fails is
recorded with its error and the run goes on. Gaps are to cpsat's lower bound:
``(total - bound) / total``. ``--semantics teamkorea`` solves under the TeamKorea reading
(docs/fusion.md), in ``per_op``, the one mode it has; its bound is that reading's compute
and I/O bound, far weaker than the default one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least, positive  # noqa: E402
from benchmarks.fusion import measure  # noqa: E402
from benchmarks.fusion_generate import (  # noqa: E402
    DEFAULT_COUNT,
    family,
    matmul_share,
    native_working_set,
    suite,
)
from benchmarks.meta import meta  # noqa: E402
from benchmarks.render import FUSION_MODES, NEAR_BOUND, fusion_suite_tables, geomean  # noqa: E402
from benchmarks.suite_args import reading_modes  # noqa: E402
from models.fusion import ReductionCost, Semantics, parse_problem  # noqa: E402

SOLVERS = ("greedy", "cpsat")
GAP_BINS = ((1e-9, "0"), (0.01, "<=1%"), (0.02, "<=2%"), (0.05, "<=5%"), (0.10, "<=10%"),
            (float("inf"), ">10%"))
"""Upper end (inclusive) and label of each bin of the gap distribution; "0" is a gap of
at most 1e-9 (float noise)."""
TOLERANCE = 1e-9
"""Relative difference below which two totals are the same."""

Record = dict


def run(problems: list[tuple[str, dict]], modes: list[ReductionCost], time_limit: float,
        workers: int, semantics: Semantics = "default") -> list[Record]:
    """A record per (problem, mode), printed as it comes."""
    records = []
    for mode in modes:
        for name, raw in problems:
            record = {"benchmark": name, "mode": mode, "family": family(name),
                      "ops": len(raw["op_types"]), "matmul_share": matmul_share(raw),
                      "capacity_factor": raw["fast_memory_capacity"] / native_working_set(raw)}
            try:
                record |= measure(name, parse_problem(raw), mode, time_limit, workers, SOLVERS,
                                  semantics)
            except Exception as error:  # a solver bug on one problem is a finding, not the end
                record["error"] = f"{type(error).__name__}: {error}"
            print(json.dumps(record), flush=True)
            records.append(record)
    return records


def distribution(gaps: list[float]) -> dict:
    """Counts per ``GAP_BINS`` bin, median and max."""
    counts = dict.fromkeys((label for _, label in GAP_BINS), 0)
    for gap in gaps:
        counts[next(label for top, label in GAP_BINS if gap <= top)] += 1
    return {"counts": counts, "median": statistics.median(gaps) if gaps else None,
            "max": max(gaps, default=None)}


def aggregate(records: list[Record]) -> dict:
    """The numbers of a set of records: geomean greedy/cpsat, the gap distributions of both
    schedules, and, where greedy is more than 2% above the bound, on how many cpsat
    improves on it."""
    done = [r for r in records if "error" not in r]
    far = [r for r in done if r["greedy"] > NEAR_BOUND * r["bound"]]
    return {
        "problems": len(records),
        "errors": len(records) - len(done),
        "ops": [min(r["ops"] for r in records), max(r["ops"] for r in records)],
        "matmul_share": [min(r["matmul_share"] for r in records),
                         max(r["matmul_share"] for r in records)],
        "geomean_greedy_cpsat": geomean([r["greedy/cpsat"] for r in done]),
        "optimal": sum(r["status"] == "optimal" for r in done),
        "cpsat_gap": distribution([r["gap"] for r in done]),
        "greedy_gap": distribution([(r["greedy"] - r["bound"]) / r["greedy"] for r in done]),
        "greedy_far": len(far),
        "cpsat_improves_far": sum(r["cpsat"] < (1 - TOLERANCE) * r["greedy"] for r in far),
        "cpsat_worse": sum(r["cpsat"] > (1 + TOLERANCE) * r["greedy"] for r in done),
        "greedy_s_max": max((r["greedy_s"] for r in done), default=None),
        "cpsat_s_max": max((r["cpsat_s"] for r in done), default=None),
    }


def summarize(records: list[Record]) -> dict:
    """Per mode: ``aggregate`` over every problem, and per family."""
    out = {}
    for mode in dict.fromkeys(r["mode"] for r in records):
        rows = [r for r in records if r["mode"] == mode]
        families = dict.fromkeys(r["family"] for r in rows)
        out[mode] = aggregate(rows) | {"families": {
            f: aggregate([r for r in rows if r["family"] == f]) for f in families}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=positive, default=10.0, help="cpsat seconds")
    parser.add_argument("--workers", type=at_least(1), default=2, help="cpsat search workers")
    parser.add_argument("--seed", type=int, default=0, help="the suite's generator seed")
    parser.add_argument("--count", type=at_least(1), default=DEFAULT_COUNT,
                        help="problems generated")
    parser.add_argument("--only", action="append", metavar="NAME-SUBSTRING",
                        help="run only the problems whose name contains this (repeatable)")
    parser.add_argument("--modes", nargs="+", choices=FUSION_MODES,
                        help="reduction modes (default: both; per_op under teamkorea)")
    parser.add_argument("--semantics", choices=("default", "teamkorea"), default="default",
                        help="the reading solved and checked under")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "fusion-suite.json")
    args = parser.parse_args()
    modes = reading_modes(parser, args.modes, args.semantics)
    problems = suite(args.seed, args.count)
    if args.only:
        problems = [(n, raw) for n, raw in problems if any(part in n for part in args.only)]
        if not problems:
            parser.error(f"no problem of the suite matches --only {' '.join(args.only)}")
    started = meta()
    records = run(problems, modes, args.time_limit, args.workers, args.semantics)
    data = {"meta": started, "time_limit_s": args.time_limit, "workers": args.workers,
            "seed": args.seed, "count": args.count, "semantics": args.semantics,
            "records": records,
            "summary": summarize(records)}
    print(fusion_suite_tables(data))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"\nwritten to {args.out}; tables in BENCHMARKS.md: benchmarks/render.py")


if __name__ == "__main__":
    main()
