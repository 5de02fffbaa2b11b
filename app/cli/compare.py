"""``layoutsat compare``: every graph through every solver, checked, reported, gated."""

from __future__ import annotations

import glob
import json
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from app.cli.io import console, err_console, fail, usage_error
from app.jobs.kinds import family_option_issues
from models.errors import InputValidationError
from solver.compare.batch import (
    REPORT,
    RESULTS,
    Backend,
    Batch,
    Outcome,
    check_solvers,
    run_batch,
    tasks_for,
)
from solver.compare.discover import discover
from solver.compare.summary import succeeded
from solver.compare.task import Options


def compare(
    paths: Annotated[list[str], typer.Argument(
        help="Graph files, folders (searched for *.json; files of neither family are skipped) "
             "or globs; fusion and layout graphs are told apart by their content.")],
    solvers: Annotated[str | None, typer.Option(
        help="Comma-separated solvers (default: every solver of each graph's family).")] = None,
    time_limit: Annotated[float, typer.Option(help="Seconds per solve.", min=0.1, max=3600)]
    = 10.0,
    jobs: Annotated[int, typer.Option(help="Parallel worker processes (local backend).", min=1)]
    = max(1, os.cpu_count() or 1),
    backend: Annotated[Backend, typer.Option(help="local processes or a Ray cluster.")]
    = "local",
    ray_address: Annotated[str | None, typer.Option(
        help="Ray cluster address (ray backend; default: start a local instance).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Directory for results.json, report.md, plots (finished pairs found there are "
             "reused) [default: a new folder under the system's temporary directory].")]
    = None,
    fail_if_worse: Annotated[str | None, typer.Option(
        help="Regression gate: exit 1 when cpsat is worse than this baseline on any graph "
             "or any answer is invalid.")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Re-run pairs already finished in --out.")] = False,
    option: Annotated[list[str], typer.Option(
        "--option", help="A family's own option for every graph of it, FAMILY.FIELD=VALUE "
        "(repeatable; VALUE is JSON or text): --option layout.device=blackhole_p150 "
        "--option fusion.reduction_cost=per_op.")] = [],  # noqa: B006
    seed: Annotated[int, typer.Option(help="Random seed of every solve.")] = 0,
    workers: Annotated[int, typer.Option(
        help="CP-SAT search threads per solve (jobs x workers should not exceed the cores).",
        min=1, max=64)] = 1,
    deterministic: Annotated[bool, typer.Option(
        "--deterministic", help="Bound every solve by deterministic work, so a re-run gives "
        "the same answers.")] = False,
) -> None:
    """Compare solvers on a batch of graphs and write results.json, report.md and plots.

    Exit code 0 when every pair produced a valid answer (and the gate, if asked for,
    passed); 1 when a pair failed (error, timeout, invalid answer) or the gate tripped;
    2 on bad usage.
    """
    missing = [p for p in paths if not Path(p).exists() and not glob.glob(p, recursive=True)]
    if missing:
        raise usage_error("no such file, folder or matching glob: " + ", ".join(missing))
    docs, notes = discover(paths)
    names = [s.strip() for s in solvers.split(",") if s.strip()] if solvers else None
    family_options = _family_options(option)
    faults = family_option_issues(family_options, ())
    if faults:
        raise usage_error("; ".join(i.msg for i in faults))
    options = Options(time_limit, seed, workers, deterministic, family_options)
    out = out or Path(tempfile.mkdtemp(prefix="layoutsat-compare-"))
    batch = Batch(docs, names, options, jobs, backend, ray_address, force, fail_if_worse)
    try:
        check_solvers(names, fail_if_worse)
    except InputValidationError as exc:
        err_console.print(exc.summary(), style="red", markup=False)
        raise typer.Exit(code=2) from None
    for note in notes:
        err_console.print(note, markup=False)
    if not docs:
        err_console.print("no graphs found in " + " ".join(paths), style="red", markup=False)
        raise typer.Exit(code=2)
    total = len(tasks_for(batch))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=False) as progress:
        bar = progress.add_task(f"{len(docs)} graphs x solvers", total=total)

        def advance(record: dict) -> None:
            progress.advance(bar)
            if not succeeded(record):
                progress.console.print(f"{record['graph']} / {record['solver']}: "
                                       f"{record['status']}", style="red", markup=False)

        try:
            outcome = run_batch(batch, out, advance)
        except (InputValidationError, RuntimeError) as exc:
            raise fail(exc) if isinstance(exc, InputValidationError) else _runtime(exc) from None
    _print_summary(outcome, out)
    if outcome.failed:
        raise typer.Exit(code=1)


def _family_options(given: list[str]) -> dict[str, dict[str, Any]]:
    """``FAMILY.FIELD=VALUE`` options by family; a malformed one is a usage error."""
    found: dict[str, dict[str, Any]] = {}
    for text in given:
        key, sep, value = text.partition("=")
        name, dot, field = key.partition(".")
        if not (sep and dot and name and field):
            raise usage_error(f"--option takes FAMILY.FIELD=VALUE, got '{text}'")
        try:
            found.setdefault(name, {})[field] = json.loads(value)
        except ValueError:
            found.setdefault(name, {})[field] = value
    return found


def _runtime(exc: RuntimeError) -> typer.Exit:
    err_console.print(str(exc), style="red", markup=False)
    return typer.Exit(code=2)


def _print_summary(outcome: Outcome, out: Path) -> None:
    s = outcome.summary
    console.print(f"{s['graphs']} graphs, {s['pairs']} pairs ({outcome.reused} reused from "
                  f"{out / RESULTS}), {s['failed']} failed", markup=False)
    for v in s["versus"]:
        g = "n/a" if v["geomean_ratio"] is None else f"{v['geomean_ratio']:.4f}"
        console.print(f"  {v['family']}: {v['baseline']} / cpsat geomean {g} over "
                      f"{v['graphs']} graphs; cpsat wins {v['wins']}, ties {v['ties']}, "
                      f"losses {v['losses']}", markup=False)
    if outcome.gate is not None:
        console.print("gate: passed" if not outcome.gate else "gate: FAILED", markup=False)
        for reason in outcome.gate:
            err_console.print(f"  {reason}", markup=False)
    console.print(f"report: {out / REPORT}", markup=False)
