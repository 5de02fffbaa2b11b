"""Fusion benchmarks: every solver on every public MLSys 2026 benchmark in both modes, plus
the evaluator's and the scorer's speed. Prints markdown tables and saves JSON (with
``meta``, rendered into BENCHMARKS.md by ``render.py``).

    .venv/bin/python benchmarks/fusion.py [--time-limit 30] [--workers 2]
        [--benchmarks DIR] [--out benchmarks/results/fusion.json] [--perturb]

``--perturb`` runs, instead of the benchmarks themselves, each with half and twice its
fast-memory capacity and four times its bandwidth (``PERTURBATIONS``): the same graphs
under other machines, so that no solver is judged on the published parameters alone.

Every solution is checked by the evaluator inside ``solve``; claimed latencies are the
evaluator's. All solvers of one (benchmark, mode) run back to back, so their ratios are
measured under the same machine load, each in a fresh process (``isolated.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least, positive  # noqa: E402
from benchmarks.isolated import isolated  # noqa: E402
from benchmarks.meta import meta  # noqa: E402
from benchmarks.render import FUSION_MODES as MODES  # noqa: E402
from benchmarks.render import fusion_table  # noqa: E402
from models.fusion import (  # noqa: E402
    FusionProblem,
    ReductionCost,
    Semantics,
    parse_problem,
    parse_solution,
)
from solver.fusion.candidates import connected_op_sets  # noqa: E402
from solver.fusion.evaluate import evaluate  # noqa: E402
from solver.fusion.problem import Rules  # noqa: E402
from solver.fusion.score import ScoringContext, score_subgraph  # noqa: E402
from solver.fusion.solvers import solve  # noqa: E402

PERTURBATIONS = {"cap/2": (Fraction(1, 2), 1), "cap*2": (Fraction(2), 1), "bw*4": (Fraction(1), 4)}
"""Name: (capacity factor, bandwidth factor)."""
SOLVERS = ("unfused", "greedy", "cpsat")


def load(directory: Path) -> dict[str, FusionProblem]:
    """Every ``mlsys-2026-<number>.json`` problem in ``directory``, by number; a ValueError
    naming the file for one that is not a valid problem or not so named."""
    found = {}
    for path in directory.glob("mlsys-2026-*.json"):
        name = path.stem.removeprefix("mlsys-2026-")
        if not name.isdigit():
            raise ValueError(f"{path}: expected a name mlsys-2026-<number>.json")
        try:
            found[name] = parse_problem(json.loads(path.read_text()))
        except ValueError as error:  # malformed JSON or a problem that breaks a rule
            raise ValueError(f"{path}: {error}") from None
    return dict(sorted(found.items(), key=lambda kv: int(kv[0])))


def load_or_exit(parser: argparse.ArgumentParser, directory: Path) -> dict[str, FusionProblem]:
    """``load(directory)``, or the parser's usage error saying what is wrong."""
    if not directory.is_dir():
        parser.error(f"no benchmark directory at {directory}")
    try:
        problems = load(directory)
    except ValueError as error:
        parser.error(str(error))
    if not problems:
        parser.error(f"no mlsys-2026-*.json file in {directory}")
    return problems


def perturbed(problems: dict[str, FusionProblem]) -> dict[str, FusionProblem]:
    """Every problem under every ``PERTURBATIONS`` entry, named "<benchmark> <entry>"; a
    ValueError naming the entry for one that is no longer a valid problem (a capacity of
    1 halves to 0)."""
    out = {}
    for name, problem in problems.items():
        for tag, (capacity, bandwidth) in PERTURBATIONS.items():
            raw = problem.model_dump()
            raw["fast_memory_capacity"] = int(capacity * raw["fast_memory_capacity"])
            raw["slow_memory_bandwidth"] = bandwidth * raw["slow_memory_bandwidth"]
            try:
                out[f"{name} {tag}"] = parse_problem(raw)
            except ValueError as error:
                raise ValueError(f"benchmark {name} at {tag}: {error}") from None
    return out


def measure(name: str, problem: FusionProblem, mode: ReductionCost, time_limit: float,
            workers: int, solvers: tuple[str, ...] = SOLVERS,
            semantics: Semantics = "default") -> dict:
    """One row: ``solvers`` (greedy and cpsat among them) on one (benchmark, mode), under
    one reading, back to back so that their ratio is measured under one machine load, each
    in a fresh process; cpsat's status, gap and lower bounds with them."""
    row: dict = {"benchmark": name, "mode": mode, "ops": problem.num_ops}
    for solver in solvers:
        options = {"time_limit_s": time_limit, "workers": workers} if solver == "cpsat" else {}
        r = isolated(solve, problem, solver, reduction_cost=mode, semantics=semantics,
                     **options)
        row[solver] = r.total_latency
        row[f"{solver}_s"] = r.wall_time_s
        if solver == "cpsat":
            row["status"], row["gap"] = r.status, r.gap
            row["bound"] = r.lower_bounds.total
            row["cover_complete"] = r.lower_bounds.cover_complete
            row["simple_bound"] = max(r.lower_bounds.compute, r.lower_bounds.io)
    row["greedy/cpsat"] = row["greedy"] / row["cpsat"]
    return row


def run_solvers(problems: dict[str, FusionProblem], time_limit: float,
                workers: int) -> list[dict]:
    rows = []
    for mode in MODES:
        for name, problem in problems.items():
            row = measure(name, problem, mode, time_limit, workers)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def evaluator_speed(name: str, problem: FusionProblem, repeats: int = 5) -> dict:
    """Median wall time of a full evaluation (fresh caches) of the greedy solution of
    benchmark ``name``."""
    solution = parse_solution(solve(problem, "greedy").solution.model_dump())
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        verdict = evaluate(problem, solution)
        times.append(time.perf_counter() - started)
        assert verdict.valid
    return {"benchmark": name, "ops": problem.num_ops, "subgraphs": len(solution.subgraphs),
            "repeats": repeats, "median_s": statistics.median(times), "max_s": max(times)}


def scorer_speed(problems: dict[str, FusionProblem], samples: int = 400) -> dict:
    """Mean time to score a random connected subgraph at one random legal granularity,
    cold (a fresh context per problem, every call a cache miss)."""
    rng = random.Random(0)
    total, count = 0.0, 0
    for problem in problems.values():
        ctx = ScoringContext(problem, Rules())
        sets = connected_op_sets(ctx.graph, range(problem.num_ops), 2000).sets
        cases = []
        for ops in rng.sample(sets, min(len(sets), samples // len(problems))):
            grans = ctx.granularities(ops)
            if grans:
                cases.append((ops, rng.choice(grans)))
        for ops, gran in cases:
            started = time.perf_counter()
            score_subgraph(ctx, ops, gran, "raster")
            total += time.perf_counter() - started
            count += 1
    return {"samples": count, "mean_ms": 1000 * total / max(1, count)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=positive, default=30.0, help="cpsat seconds")
    parser.add_argument("--workers", type=at_least(1), default=2, help="cpsat search workers")
    parser.add_argument("--benchmarks", type=Path,
                        default=ROOT.parent / "shared" / "mlsys2026" / "benchmarks")
    parser.add_argument("--out", type=Path, default=None,
                        help="results JSON (default benchmarks/results/fusion.json, or "
                             "fusion-perturbed.json with --perturb)")
    parser.add_argument("--perturb", action="store_true",
                        help="run each benchmark at half and twice its capacity and four "
                             "times its bandwidth instead")
    args = parser.parse_args()
    problems = load_or_exit(parser, args.benchmarks)
    out = args.out or ROOT / "benchmarks" / "results" / (
        "fusion-perturbed.json" if args.perturb else "fusion.json")
    run = meta()  # when the run started
    speed = {}
    if args.perturb:
        try:
            problems = perturbed(problems)
        except ValueError as error:
            parser.error(str(error))
    else:
        largest = max(problems, key=lambda name: problems[name].num_ops)
        speed = {"evaluation": evaluator_speed(largest, problems[largest]),
                 "scoring": scorer_speed(problems)}
        print(json.dumps(speed), flush=True)
    rows = run_solvers(problems, args.time_limit, args.workers)
    print(fusion_table(rows))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": run, "speed": speed, "rows": rows,
                               "time_limit_s": args.time_limit, "workers": args.workers},
                              indent=1) + "\n")
    print(f"\nwritten to {out}; tables in BENCHMARKS.md: benchmarks/render.py")


if __name__ == "__main__":
    main()
