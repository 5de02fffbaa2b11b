"""``layoutsat fusion``: schedule an MLSys 2026 problem with a solver, or check a solution."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, get_args

import typer

from app.cli.io import console, err_console, fail, load_json
from models.errors import InputValidationError
from models.fusion import FusionResult, ReductionCost, parse_problem, parse_solution
from solver.fusion.evaluate import evaluate
from solver.fusion.problem import Rules
from solver.fusion.solvers import DEFAULT_SOLVER, SOLVERS, solve

app = typer.Typer(help="MLSys 2026 fusion scheduling.", no_args_is_help=True)

MODES = get_args(ReductionCost)


def _mode(value: str) -> str:
    if value not in MODES:
        raise typer.BadParameter(f"must be one of {', '.join(MODES)}")
    return value


def _solver(value: str) -> str:
    if value not in SOLVERS:
        raise typer.BadParameter(f"must be one of {', '.join(SOLVERS)}")
    return value


@app.command("solve")
def solve_command(
    problem_file: Annotated[Path, typer.Argument(help="Problem JSON (contest format).")],
    output: Annotated[Path | None, typer.Argument(
        help="Write the contest solution JSON here (as the contest's ./mlsys in out).")] = None,
    output_option: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Same as OUT (the layout family's spelling).")] = None,
    solver: Annotated[str, typer.Option(help=f"One of {', '.join(SOLVERS)}.",
                                        callback=_solver)] = DEFAULT_SOLVER,
    time_limit: Annotated[float | None, typer.Option(
        help="Seconds for the whole solve [default: 30 for cpsat, 10 otherwise].",
        min=0.1, max=3600)] = None,
    reduction_cost: Annotated[str, typer.Option(
        help=f"MatMul reduction cost: {' or '.join(MODES)}.", callback=_mode)] = MODES[0],
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    workers: Annotated[int, typer.Option(help="CP-SAT search workers.", min=1, max=64)] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full result as JSON.")]
    = False,
) -> None:
    """Schedule the problem; the answer is checked by the evaluator before it is printed."""
    if output and output_option and output != output_option:
        raise typer.BadParameter(f"OUT is {output} but --output is {output_option}; give one",
                                 param_hint="--output")
    output = output or output_option
    options = {"reduction_cost": reduction_cost, "seed": seed, "workers": workers}
    if time_limit is not None:
        options["time_limit_s"] = time_limit
    try:
        result = solve(parse_problem(load_json(problem_file, "fusion problem")), solver,
                       **options)
    except InputValidationError as exc:
        raise fail(exc, as_json) from None
    if output:
        output.write_text(result.solution.model_dump_json(indent=1) + "\n")
    if as_json:
        console.print_json(result.model_dump_json())
        return
    console.print(_summary(problem_file, result)
                  + (f"; solution written to {output}" if output else ""))


def _summary(problem_file: Path, r: FusionResult) -> str:
    line = (f"{problem_file}: {r.solver} ({r.reduction_cost}): {r.status}, total "
            f"{r.total_latency:,.2f} in {len(r.solution.subgraphs)} subgraphs; lower bound "
            f"{r.lower_bounds.total:,.2f}")
    if r.gap is not None:
        line += f", gap {r.gap:.1%}"
    return line + f"; {r.wall_time_s:.2f} s"


@app.command("evaluate")
def evaluate_command(
    problem_file: Annotated[Path, typer.Argument(help="Problem JSON (contest format).")],
    solution_file: Annotated[Path, typer.Argument(help="Solution JSON to check.")],
    reduction_cost: Annotated[str, typer.Option(
        help=f"MatMul reduction cost: {' or '.join(MODES)}.", callback=_mode)] = MODES[0],
    steps: Annotated[bool, typer.Option(
        "--steps", help="Include every step (tile and k-step) of every subgraph.")] = False,
    strict: Annotated[bool, typer.Option(
        help="Treat a claimed latency off by more than 1e-6 as an error.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Check a solution independently; exit 0 when valid, 1 with the rule broken when not."""
    try:
        problem = parse_problem(load_json(problem_file, "fusion problem"))
        solution = parse_solution(load_json(solution_file, "fusion solution"))
    except InputValidationError as exc:
        raise fail(exc, as_json) from None
    verdict = evaluate(problem, solution, Rules(reduction_cost=reduction_cost), strict=strict,
                       details=steps)
    report = verdict.report()
    if as_json:
        console.print_json(report.model_dump_json(exclude_none=True))
    elif report.valid:
        console.print(f"{solution_file}: valid, total {report.total_latency:,.4f} "
                      f"({reduction_cost}); subgraphs " +
                      ", ".join(f"{x:,.4f}" for x in report.subgraph_latencies))
        for m in report.claimed_mismatches:
            err_console.print(f"  subgraph {m.subgraph}: claimed {m.claimed:,.4f}, "
                              f"computed {m.computed:,.4f}", markup=False)
        if steps and report.details:
            for sub in report.details:
                console.print(f"  subgraph {sub.subgraph}: {len(sub.steps)} steps")
                for s in sub.steps:
                    console.print(f"    tile {s.tile} (r{s.row} c{s.col}) k{s.k_step}: compute "
                                  f"{s.compute:,.2f}, loaded {s.loaded}, stored {s.stored}, "
                                  f"latency {s.latency:,.2f}, working set {s.working_set}")
    else:
        err_console.print(f"{solution_file}: invalid: {report.error}", markup=False)
    if not report.valid:
        raise typer.Exit(code=1)
