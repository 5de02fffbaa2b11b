"""How long the fusion cover bound takes to price and solve, alone in one process, on
generated suite problems (``fusion_generate.py``): seconds, op sets priced, whether the
cover is complete and its value. Pricing speed is what decides how large a graph's cover
can complete within a solve, so a pricing change is measured here, before and after.

    .venv/bin/python benchmarks/cover_time.py [--only gen-transformer-04 ...]
        [--modes per_native_k per_op] [--deadline 60] [--tree PATH]

``--tree`` imports the solver from another checkout (e.g. a ``git worktree`` of the
previous commit) with this interpreter, so both sides run on one machine back to back.
Prints one JSON line per (problem, mode).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

# a sibling: ``benchmarks`` comes from --tree
from arguments import positive
from suite_args import add_problem_arguments, chosen, reading_modes

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_problem_arguments(parser, "gen-transformer-04")
    parser.add_argument("--deadline", type=positive, default=60.0,
                        help="seconds the cover may take (default 60)")
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="checkout whose solver is timed (default: this one)")
    args = parser.parse_args(argv)
    if not (args.tree / "solver" / "fusion").is_dir():
        parser.error(f"--tree {args.tree} holds no solver/fusion")
    sys.path.insert(0, str(args.tree.resolve()))

    from benchmarks.fusion_generate import suite
    from models.fusion import parse_problem
    from solver.deadline import now
    from solver.fusion.bound import cover_bound
    from solver.fusion.context import ScoringContext
    from solver.fusion.problem import DEFAULT_RULES

    problems = chosen(parser, args.only, dict(suite()))
    for name in problems:
        for mode in reading_modes(parser, args.modes):
            rules = replace(DEFAULT_RULES, reduction_cost=mode)
            ctx = ScoringContext(parse_problem(problems[name]), rules)
            started = time.perf_counter()
            bound = cover_bound(ctx, now() + args.deadline)
            print(json.dumps({"benchmark": name, "mode": mode, "tree": str(args.tree),
                              "seconds": round(time.perf_counter() - started, 2),
                              "sets_priced": bound.sets_priced, "complete": bound.complete,
                              "cover": float(bound.value)}), flush=True)


if __name__ == "__main__":
    main()
