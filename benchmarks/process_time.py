"""Whole-process time of ``layoutsat fusion solve`` at a short limit: each problem, reading
and checkout in a fresh process timed from outside (start-up and exit included,
``cli_run.py``), and the total of the solution it wrote, re-checked by this checkout's
evaluator. Several checkouts (``--checkout LABEL=DIR``, e.g. a worktree of an older
commit) run back to back per problem, so their columns share one machine load.

    .venv/bin/python benchmarks/process_time.py PROBLEM_OR_DIR... [--time-limit 2]
        [--semantics default teamkorea] [--checkout new=.] [--out FILE]

Large generated graphs (``fusion_generate.py --count 12 --ops 320 --out DIR``) are what
a short limit strains: an op's config search or greedy's first round of merges can
outlast it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import positive  # noqa: E402
from benchmarks.cli_run import graph_files, run_cli  # noqa: E402
from benchmarks.meta import meta, write_results  # noqa: E402
from models.fusion import parse_problem, parse_solution  # noqa: E402
from solver.fusion.evaluate import evaluate  # noqa: E402
from solver.fusion.solvers import reading_rules  # noqa: E402


def checkout(text: str) -> tuple[str, Path]:
    label, _, folder = text.partition("=")
    if not label or not folder or not (Path(folder) / "app" / "cli").is_dir():
        raise argparse.ArgumentTypeError(f"'{text}': want LABEL=DIR, DIR a layoutsat checkout")
    return label, Path(folder).resolve()


def measure(problem: Path, semantics: str, limit: float, folder: Path) -> dict:
    """One solve in a timed child: its wall time and the total of what it wrote (None
    when it wrote nothing valid)."""
    raw = json.loads(problem.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "solution.json"
        run = run_cli(["fusion", "solve", str(problem), "-o", str(out), "--time-limit",
                       str(limit), "--semantics", semantics], folder, Path(tmp))
        total = None
        if run.ok and out.exists():
            rules = reading_rules("per_op" if semantics == "teamkorea" else "per_native_k",
                                  semantics)
            verdict = evaluate(parse_problem(raw), parse_solution(json.loads(out.read_text())),
                               rules, semantics=semantics)
            total = float(verdict.total) if verdict.valid else None
    return {"wall_s": run.wall_s, "total": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", type=Path, nargs="+")
    parser.add_argument("--time-limit", type=positive, default=2.0)
    parser.add_argument("--semantics", nargs="+", default=["default", "teamkorea"],
                        choices=["default", "teamkorea"])
    parser.add_argument("--checkout", type=checkout, action="append", default=None,
                        help="LABEL=DIR, repeatable (default: this checkout, as 'here')")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "process-time.json")
    args = parser.parse_args()
    checkouts = args.checkout or [("here", ROOT)]
    rows = []
    for problem in graph_files(parser, args.problems):
        ops = len(json.loads(problem.read_text())["op_types"])
        for semantics in args.semantics:
            row = {"problem": problem.stem, "ops": ops, "semantics": semantics,
                   "limit_s": args.time_limit,
                   "runs": {label: measure(problem, semantics, args.time_limit, folder)
                            for label, folder in checkouts}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_results(args.out, meta(), rows, checkouts=[label for label, _ in checkouts])


if __name__ == "__main__":
    main()
