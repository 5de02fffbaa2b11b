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
    Semantics,
    SolveStatus,
)
from solver.collector import young_collections_only
from solver.deadline import Deadline, deterministic, now, wrap_up_s
from solver.family import InvalidAnswer
from solver.fusion import teamkorea
from solver.fusion.bound import CoverBound, cover_bound, reading_bound
from solver.fusion.bound.background import start as start_cover
from solver.fusion.cpsat import (
    LEAST_SOLVE_S,
    accepted_whole,
    as_planned,
    as_variants,
    cpsat_search,
    total,
)
from solver.fusion.evaluate import evaluate
from solver.fusion.greedy import greedy
from solver.fusion.problem import Rules, lower_bounds
from solver.fusion.schedule import Planned, to_solution
from solver.fusion.score import ScoringContext
from solver.fusion.unfused import unfused
from solver.fusion.variants import Variant

DEFAULT_TIME_LIMIT_S = 10.0
CPSAT_TIME_LIMIT_S = 30.0
MIN_COVER_TIME_S = 0.5
"""Time left after the search below which the cover bound is not attempted."""
BOUND_SHARE = 0.2
"""Share of the time limit a window search (large graphs) leaves to the cover bound when
that runs after the search (one worker, or deterministic): it would run to the limit
otherwise, and on benchmark 13 the bound was then max(compute, I/O), 68% below the
schedule; the single ops and pairs, priced in 5 s, prove it within 0.06%."""
OVERRUN_SHARE, MOST_OVERRUN_S = 0.05, 0.3
"""Share of the time the search leaves (at least ``cpsat.LEAST_SOLVE_S``, at most
``MOST_OVERRUN_S``) when no bound follows it in this process (the teamkorea reading, or the
cover in a child beside it): the last CP-SAT model may end past its limit, since it takes
at least 0.1 s, more to load when it is large (benchmark 13: 0.03 s past a 30-s limit with
none left; a 2-s solve of a 60-op random graph, the cover beside it, ended at 2.00-2.01 s).
That model ends by the solve's deadline (``cpsat_search``'s ``hard_end``): it is not solved
when its build leaves too little time (``cpsat.LOAD_SHARE``), hence the least margin of one
CP-SAT floor: 5% of the 1.35 s a 2-s solve's search starts with is 0.07 s, and a 45-op
graph's last relinking then found no time for its model, which takes 22% off its
schedule."""


class Solver(Protocol):
    """A solver answers by ``ends`` (a ``deadline.now()`` value on the running clock)."""

    def __call__(self, problem: FusionProblem, ends: float, *, reduction_cost: ReductionCost,
                 seed: int, workers: int, semantics: Semantics) -> FusionResult: ...


class SolverBug(InvalidAnswer):
    """A solver produced a solution the evaluator rejects."""


def finish(problem: FusionProblem, solver: str, solution: FusionSolution,
           status: SolveStatus, rules: Rules, *, context: ScoringContext | None = None,
           objective: float | None = None, bound: float | None = None,
           gap: float | None = None, forced: Fraction | None = None,
           cover: CoverBound | None = None) -> FusionResult:
    """Evaluate a solver's solution (under the context's reading) and package it with the
    evaluator's latencies."""
    semantics = "default" if context is None else context.semantics
    verdict = evaluate(problem, solution, rules, context=context, semantics=semantics)
    if not verdict.valid:
        raise SolverBug(f"solver '{solver}' produced an invalid solution: {verdict.error}")
    latencies = [float(x) for x in verdict.subgraph_latencies]
    bounds = lower_bounds(problem, rules.reduction_cost, semantics)
    return FusionResult(
        solver=solver,
        status=status,
        reduction_cost=rules.reduction_cost,
        semantics=semantics,
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
              seed: int, workers: int, semantics: Semantics) -> FusionResult:
        rules = reading_rules(reduction_cost, semantics)
        ctx = ScoringContext(problem, rules, semantics=semantics)
        schedule = build(ctx, ends)
        return finish(problem, name, to_solution(ctx, schedule), "feasible", rules,
                      context=ctx)

    solve.__name__ = f"solve_{name}"
    solve.__doc__ = f"The '{name}' baseline."
    return solve


def reading_rules(reduction_cost: ReductionCost, semantics: Semantics) -> Rules:
    """The rules of a reading: the teamkorea one fixes its own."""
    return teamkorea.RULES if semantics == "teamkorea" else Rules(reduction_cost=reduction_cost)


def solve_cpsat(problem: FusionProblem, ends: float, *, reduction_cost: ReductionCost,
                seed: int, workers: int, semantics: Semantics) -> FusionResult:
    """The global CP-SAT solver (``cpsat.py``): greedy, given up to half the time limit, is
    the first incumbent, so the answer is never worse than greedy whenever greedy finishes in
    that half (a limit too short for greedy gets greedy's partial schedule improved);
    ``optimal`` only when the schedule reaches the lower bound it reports (a search proven
    optimal for its own formulation, whose granularities and retained sets are a subset of
    the rules', ends early and reports its gap to that bound). With two
    workers or more (not deterministic) the cover bound runs in a forked child beside the
    search for the whole time (``bound/background.py``), and the search ends
    ``OVERRUN_SHARE`` early (at least ``cpsat.LEAST_SOLVE_S``, at most ``MOST_OVERRUN_S``);
    else after it, in what is left.

    Under the teamkorea reading the bound is that reading's compute and I/O bound and what
    its MatMuls pay (``bound/split_k.py``, reported as ``forced``; the forced-traffic and
    cover bounds follow SEMANTICS.md, so no time is kept for them; the search ends
    ``OVERRUN_SHARE`` early, within the same bounds, as with the cover beside it),
    ``optimal`` needs that bound reached (the model's proofs are not trusted there). In
    either reading the search keeps only schedules the reading accepts whole
    (``cpsat.accepted_whole``: under the teamkorea reading our model allows an ephemeral
    tensor read by a subgraph that does not recompute it, which that reading refuses)."""
    rules = reading_rules(reduction_cost, semantics)
    ctx = ScoringContext(problem, rules, every_tile=True, semantics=semantics)
    deadline = ends
    left = max(0.0, deadline - now())
    # with two workers or more the cover runs beside the search (``bound/background.py``)
    background = start_cover(ctx, deadline) \
        if semantics == "default" and workers >= 2 and not deterministic() else None
    try:
        if semantics == "default" and background is None:
            found = cpsat_search(ctx, deadline, seed=seed, workers=workers,
                                 windows_end=deadline - BOUND_SHARE * left, hard_end=deadline)
        else:
            margin = min(max(OVERRUN_SHARE * left, LEAST_SOLVE_S), MOST_OVERRUN_S)
            found = cpsat_search(ctx, deadline - margin,
                                 seed=seed, workers=workers, hard_end=deadline)
        schedule = found.schedule
        bound = lower_bounds(problem, rules.reduction_cost, semantics).total
        cover = None
        schedule = _accepted(ctx, schedule, deadline)
        forced = reading_bound(ctx)
        bound = max(bound, forced)
        objective = total(schedule)
        if objective > bound:
            if background is not None:
                cover = background.result(deadline)
            if cover is None and semantics == "default" and \
                    now() < deadline - MIN_COVER_TIME_S:  # no child, or it failed early
                cover = cover_bound(ctx, deadline)
    finally:
        if background is not None:
            background.stop()
    if cover is not None:
        bound = max(bound, cover.value)
    return finish(problem, "cpsat", to_solution(ctx, as_planned(schedule)),
                  "optimal" if objective <= bound else "feasible", rules,
                  context=ctx, objective=float(objective), bound=float(bound),
                  gap=float((objective - bound) / objective) if objective else 0.0,
                  forced=forced, cover=cover)


def _accepted(ctx: ScoringContext, schedule: list[Variant], deadline: float) -> list[Variant]:
    """``schedule`` if the context's reading accepts it, else greedy's schedule (merging
    until ``deadline``; under the teamkorea reading the search's greedy ran on ``ctx``, so
    its scores are cached): a safety net, since the search keeps only schedules the reading
    accepts (``cpsat.accepted_whole``) but for greedy's own, which it starts from."""
    if accepted_whole(ctx, schedule):
        return schedule
    return as_variants(ctx, greedy(ctx, deadline))


SOLVERS: dict[str, Solver] = {
    "cpsat": solve_cpsat,
    "unfused": _heuristic("unfused", lambda ctx, deadline: unfused(ctx, deadline=deadline)),
    "greedy": _heuristic("greedy", greedy),
}
DEFAULT_SOLVER = "cpsat"


def default_time_limit_s(solver: str) -> float:
    return CPSAT_TIME_LIMIT_S if solver == "cpsat" else DEFAULT_TIME_LIMIT_S


def solve(problem: FusionProblem, solver: str = DEFAULT_SOLVER, *,
          deadline: Deadline | None = None, time_limit_s: float | None = None,
          reduction_cost: ReductionCost = "per_native_k", seed: int = 0,
          workers: int = 1, semantics: Semantics = "default") -> FusionResult:
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
    with deadline.running() as run, young_collections_only():
        ends = run.at - wrap_up_s(problem.num_ops)
        result = SOLVERS[solver](problem, ends, reduction_cost=reduction_cost, seed=seed,
                                 workers=workers, semantics=semantics)
        repeatable = deadline.deterministic and not run.wall_stopped
    return result.model_copy(update={
        "wall_time_s": None if repeatable else time.monotonic() - started,
        "deterministic": repeatable})
