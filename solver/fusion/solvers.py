"""The uniform solver interface: a registry of ``solve(problem, ...) -> FusionResult``.

Every solver (the baselines here, the CP-SAT solver, a batch comparison) answers through
``finish``: the solution goes through the evaluator, whose latencies replace the claimed
ones, and an answer the evaluator rejects is a bug, never returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from typing import Protocol

from models.errors import InputValidationError, Issue
from models.fusion import (
    FusionProblem,
    FusionResult,
    FusionSolution,
    LowerBoundsReport,
    ReductionCost,
    SolveStatus,
)
from solver.deadline import Deadline, now, wrap_up_s
from solver.family import InvalidAnswer
from solver.fusion.bound import CoverBound, cover_bound, forced_bound
from solver.fusion.cpsat import as_planned, cpsat_search, total
from solver.fusion.evaluate import evaluate
from solver.fusion.greedy import greedy
from solver.fusion.problem import Rules, lower_bounds
from solver.fusion.schedule import Planned, to_solution
from solver.fusion.score import ScoringContext
from solver.fusion.unfused import unfused

DEFAULT_TIME_LIMIT_S = 10.0
CPSAT_TIME_LIMIT_S = 30.0
MIN_COVER_TIME_S = 0.5
"""Time left after the search below which the cover bound is not attempted."""
BOUND_SHARE = 0.2
"""Share of the time limit a window search (large graphs) leaves to the cover bound: it
would run to the limit otherwise, and on benchmark 13 the bound was then max(compute,
I/O), 68% below the schedule; the single ops and pairs, priced in 5 s, prove it within
0.06%."""


class Solver(Protocol):
    """A solver answers by ``ends`` (a ``deadline.now()`` value on the running clock)."""

    def __call__(self, problem: FusionProblem, ends: float, *, reduction_cost: ReductionCost,
                 seed: int, workers: int) -> FusionResult: ...


class SolverBug(InvalidAnswer):
    """A solver produced a solution the evaluator rejects."""


def finish(problem: FusionProblem, solver: str, solution: FusionSolution,
           status: SolveStatus, rules: Rules, *, context: ScoringContext | None = None,
           objective: float | None = None, bound: float | None = None,
           gap: float | None = None, forced: Fraction | None = None,
           cover: CoverBound | None = None) -> FusionResult:
    """Evaluate a solver's solution and package it with the evaluator's latencies."""
    verdict = evaluate(problem, solution, rules, context=context)
    if not verdict.valid:
        raise SolverBug(f"solver '{solver}' produced an invalid solution: {verdict.error}")
    latencies = [float(x) for x in verdict.subgraph_latencies]
    bounds = lower_bounds(problem, rules.reduction_cost)
    return FusionResult(
        solver=solver,
        status=status,
        reduction_cost=rules.reduction_cost,
        solution=solution.model_copy(update={"subgraph_latencies": latencies}),
        total_latency=float(verdict.total),
        subgraph_latencies=latencies,
        lower_bounds=LowerBoundsReport(
            compute=float(bounds.compute), io=float(bounds.io),
            forced=None if forced is None else float(forced),
            cover=None if cover is None else float(cover.value),
            cover_complete=None if cover is None else cover.complete,
            total=float(max(bounds.total, forced or 0, cover.value if cover else 0))),
        wall_time_s=0.0,
        objective=objective,
        bound=bound,
        gap=gap,
    )


def _heuristic(name: str, build: Callable[[ScoringContext, float], list[Planned]]) -> Solver:
    """A registry entry for a schedule builder that proves nothing (status ``feasible``).

    ``seed`` and ``workers`` are accepted for uniformity: these builders are deterministic
    and single-threaded.
    """

    def solve(problem: FusionProblem, ends: float, *, reduction_cost: ReductionCost,
              seed: int, workers: int) -> FusionResult:
        rules = Rules(reduction_cost=reduction_cost)
        ctx = ScoringContext(problem, rules)
        schedule = build(ctx, ends)
        return finish(problem, name, to_solution(ctx, schedule), "feasible", rules,
                      context=ctx)

    solve.__name__ = f"solve_{name}"
    solve.__doc__ = f"The '{name}' baseline."
    return solve


def solve_cpsat(problem: FusionProblem, ends: float, *, reduction_cost: ReductionCost,
                seed: int, workers: int) -> FusionResult:
    """The global CP-SAT solver (``cpsat.py``): greedy, given up to half the time limit, is
    the first incumbent, so the answer is never worse than greedy whenever greedy finishes in
    that half (a limit too short for greedy gets greedy's partial schedule improved);
    ``optimal`` when proven for its formulation or when the lower bound is reached."""
    rules = Rules(reduction_cost=reduction_cost)
    ctx = ScoringContext(problem, rules, every_tile=True)
    deadline = ends
    found = cpsat_search(ctx, deadline, seed=seed, workers=workers,
                         windows_end=deadline - BOUND_SHARE * max(0.0, deadline - now()))
    objective = total(found.schedule)
    forced = forced_bound(ctx)
    bound = max(lower_bounds(problem, reduction_cost).total, forced)
    cover = None
    if objective > bound and now() < deadline - MIN_COVER_TIME_S:
        cover = cover_bound(ctx, deadline)
        bound = max(bound, cover.value)
    return finish(problem, "cpsat", to_solution(ctx, as_planned(found.schedule)),
                  "optimal" if found.optimal or objective <= bound else "feasible", rules,
                  context=ctx, objective=float(objective), bound=float(bound),
                  gap=float((objective - bound) / objective) if objective else 0.0,
                  forced=forced, cover=cover)


SOLVERS: dict[str, Solver] = {
    "cpsat": solve_cpsat,
    "unfused": _heuristic("unfused", lambda ctx, deadline: unfused(ctx)),
    "greedy": _heuristic("greedy", greedy),
}
DEFAULT_SOLVER = "cpsat"


def default_time_limit_s(solver: str) -> float:
    return CPSAT_TIME_LIMIT_S if solver == "cpsat" else DEFAULT_TIME_LIMIT_S


def solve(problem: FusionProblem, solver: str = DEFAULT_SOLVER, *,
          deadline: Deadline | None = None, time_limit_s: float | None = None,
          reduction_cost: ReductionCost = "per_native_k", seed: int = 0,
          workers: int = 1) -> FusionResult:
    """Run a registered solver by name until ``deadline`` (default: ``time_limit_s`` from
    now, else the solver's own limit). A deterministic deadline gives an answer that
    repeats byte for byte: its wall time is left out (null)."""
    if solver not in SOLVERS:
        raise InputValidationError([Issue(
            ("solver",), f"unknown solver '{solver}'; known: {', '.join(SOLVERS)}",
            "solver.unknown")], "request")
    if deadline is None:
        deadline = Deadline.after(time_limit_s or default_time_limit_s(solver))
    started = time.monotonic()
    with deadline.running() as run:
        ends = run.at - wrap_up_s(problem.num_ops)
        result = SOLVERS[solver](problem, ends, reduction_cost=reduction_cost, seed=seed,
                                 workers=workers)
        repeatable = deadline.deterministic and not run.wall_stopped
    return result.model_copy(update={
        "wall_time_s": None if repeatable else time.monotonic() - started,
        "deterministic": repeatable})
