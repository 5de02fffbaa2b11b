"""The ``iopddl`` family: one sharding strategy per node of a production graph, node and
edge costs, a memory limit over time (the ASPLOS/EuroSys 2025 contest).

``solve`` runs a solver until a ``Deadline``, unfolds its answer to every node, and has the
independent evaluator recompute its cost; the result claims only what the evaluator
confirms.
"""

from __future__ import annotations

import math
import time

from models.iopddl import IopddlResult, IopddlStats, Reduction
from solver.deadline import Deadline, wrap_up_s
from solver.iopddl.evaluate import evaluate
from solver.iopddl.problem import Problem
from solver.iopddl.search import SOLVERS, Infeasible, Outcome
from solver.iopddl.work import NO_LIMIT

DEFAULT_TIME_LIMIT_S = 60.0
WRAP_UP_S_PER_NODE = 3e-5
"""Seconds kept per node, out of the deadline, to unfold and evaluate the answer (0.1 s
at 35,000 nodes)."""


def _reduction(outcome: Outcome) -> Reduction | None:
    work = outcome.work
    if work is None:
        return None
    live = [int(i) for i in work.live_nodes]
    left = sum(len(work.cost[i]) for i in live)
    total = sum(len(c) for c in work.problem.costs)
    folded = work.problem.n - len(live)
    return Reduction(nodes=len(live), edges=len(work.edges), strategies=left,
                     removed_strategies=total - left - sum(
                         len(work.strategies[i]) for i in range(work.problem.n)
                         if not work.alive[i]),
                     folded_nodes=folded,
                     memory_steps=int((work.cap < NO_LIMIT).sum()))


def solve(problem: Problem, solver: str, deadline: Deadline, seed: int = 0,
          workers: int = 1) -> IopddlResult:
    """The named solver's answer to ``problem``, checked by the evaluator."""
    started = time.monotonic()
    with deadline.running() as run:
        until = run.at - wrap_up_s(0) - WRAP_UP_S_PER_NODE * problem.n
        try:
            outcome = SOLVERS[solver](problem, until, seed, workers)
        except Infeasible:
            outcome = Outcome(None, "infeasible")
        repeatable = deadline.deterministic and not run.wall_stopped
    wall = None if repeatable else time.monotonic() - started
    first = None if repeatable or outcome.first_incumbent_at is None \
        else outcome.first_incumbent_at
    stats = IopddlStats(wall_time_s=wall, deterministic=repeatable, nodes=problem.n,
                        edges=problem.m, reduction=_reduction(outcome),
                        lns_rounds=outcome.rounds, lns_improvements=outcome.improvements,
                        first_incumbent_s=first)
    if outcome.solution is None:
        return IopddlResult(solver=solver, status="infeasible", solution=None, cost=None,
                            bound=None, gap=None, usage_limit=problem.usage_limit,
                            stats=stats, errors=["even each node's smallest usage exceeds "
                                                 "the usage limit at some time step"])
    report = evaluate(problem, outcome.solution)
    if not report.valid or report.cost is None:
        return IopddlResult(solver=solver, status="invalid", solution=outcome.solution,
                            cost=None, bound=None, gap=None, usage_limit=problem.usage_limit,
                            stats=stats, errors=report.errors)
    cost = report.cost
    bound = None if outcome.bound is None else min(cost, math.floor(outcome.bound))
    status = "optimal" if bound is not None and bound >= cost else "feasible"
    gap = None if bound is None else (0.0 if cost == bound else (cost - bound) / abs(cost))
    return IopddlResult(solver=solver, status=status, solution=outcome.solution, cost=cost,
                        bound=bound, gap=gap, peak_usage=report.peak.usage if report.peak
                        else None, usage_limit=problem.usage_limit, stats=stats)
