"""``layoutsat layout``: plan a layout graph with a solver, or check a plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from app.cli.io import console, err_console, fail, load_json
from models.errors import InputValidationError
from models.layout import LayoutGraph, LayoutPlan, parse_graph, parse_plan
from solver.layout import SOLVERS, solve
from solver.layout.evaluate import evaluate
from solver.layout.ops import DEFAULT_MAX_CONFIGS
from solver.layout.plan import plan_summary
from solver.layout.problem import analyze

app = typer.Typer(help="TTNN-style L1/DRAM layout planning.", no_args_is_help=True)


@app.command("solve")
def solve_command(
    graph_file: Annotated[Path, typer.Argument(help="Layout graph JSON.")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the plan here.")]
    = None,
    solver: Annotated[str, typer.Option(help=f"One of {', '.join(SOLVERS)}.")] = "cpsat",
    device: Annotated[str | None, typer.Option(help="Device preset (overrides the graph's).")]
    = None,
    time_limit: Annotated[float, typer.Option(help="Seconds.", min=0.1, max=3600)] = 10.0,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    workers: Annotated[int, typer.Option(help="Solver threads.", min=1, max=64)] = 1,
    max_configs: Annotated[int, typer.Option(help="Candidate configurations per op.", min=1)]
    = DEFAULT_MAX_CONFIGS,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Show what differs from the best baseline's plan and what it saved.")]
    = False,
) -> None:
    """Plan where every tensor lives; exit 1 on bad input or a plan the evaluator rejects."""
    try:
        graph = parse_graph(load_json(graph_file, "layout graph"))
        plan = solve(graph, solver, device, time_limit_s=time_limit, seed=seed,
                     workers=workers, max_configs=max_configs, explain=explain)
    except InputValidationError as exc:
        raise fail(exc, as_json) from None
    if output:
        output.write_text(plan.model_dump_json(by_alias=True, indent=1) + "\n")
    summary = plan_summary(graph, plan)
    if as_json:
        violations = [v.model_dump() for v in plan.violations]
        extra = {"explanation": plan.explanation.model_dump()} if plan.explanation else {}
        console.print_json(data={**summary, "violations": violations, **extra})
    else:
        console.print(f"{graph_file}: {plan.solver} on {plan.device.name}: {plan.status}, "
                      f"{plan.total_latency_us:,.2f} us; activations in L1 "
                      f"{summary['activations_in_l1']}/{summary['activations']}, reshards "
                      f"{summary['reshards']}, reloads {summary['reloads']}, spills "
                      f"{summary['spills']}; {plan.stats.wall_time_s:.2f} s"
                      + (f"; plan written to {output}" if output else ""))
        for v in plan.violations:
            err_console.print(f"  {v.kind} at {v.where}: {v.msg}", markup=False)
        if plan.explanation:
            _print_explanation(plan)
    if plan.status == "invalid":
        raise typer.Exit(code=1)


def _print_explanation(plan: LayoutPlan) -> None:
    e = plan.explanation
    console.print(e.summary, markup=False)
    console.print(f"  vs {e.baseline}: op time saved {e.op_time_saved_us:,.2f} us, reshard/"
                  f"reload/spill time saved {e.copy_and_spill_time_saved_us:,.2f} us", markup=False)
    for d in e.ops:
        console.print(f"  op {d.op}: {d.baseline_config} reading {d.baseline_inputs} -> "
                      f"{d.config} reading {d.inputs} ({d.baseline_latency_us:,.2f} -> "
                      f"{d.latency_us:,.2f} us)", markup=False)
    for d in e.tensors:
        console.print(f"  tensor {d.tensor}: {d.baseline_home} -> {d.home}", markup=False)


@app.command("evaluate")
def evaluate_command(
    graph_file: Annotated[Path, typer.Argument(help="Layout graph JSON.")],
    plan_file: Annotated[Path, typer.Argument(help="Plan JSON to check.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Check a plan independently; exit 0 when valid, 1 with every violation when not."""
    try:
        graph = parse_graph(load_json(graph_file, "layout graph"))
        plan = parse_plan(load_json(plan_file, "layout plan"))
        verdict = evaluate(analyze(graph, plan.device), plan)
    except InputValidationError as exc:
        raise fail(exc, as_json) from None
    if as_json:
        console.print_json(data=verdict.model_dump())
    elif verdict.valid:
        console.print(f"{plan_file}: valid plan, total {verdict.total_latency_us:,.2f} us")
    else:
        err_console.print(f"{plan_file}: {len(verdict.violations)} violations", markup=False)
        for v in verdict.violations:
            err_console.print(f"  {v.kind} at {v.where}: {v.msg}", markup=False)
    if not verdict.valid:
        raise typer.Exit(code=1)


@app.command("schema")
def schema_command(
    plan: Annotated[bool, typer.Option("--plan", help="The plan's schema instead.")] = False,
) -> None:
    """Print the JSON Schema of the graph format (docs/layout-graph.schema.json)."""
    model = LayoutPlan if plan else LayoutGraph
    typer.echo(json.dumps(model.model_json_schema(by_alias=True), indent=1))
