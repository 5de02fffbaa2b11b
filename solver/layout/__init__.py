"""The ``layout`` family: TTNN-style L1/DRAM sharding on a Tensix-like device.

The solver registry maps a name to a policy that turns an analysed problem into an
``Assignment``; ``solve`` runs it, builds the plan and has the independent evaluator
check it. A new solver (``cpsat``, a batch-compare tool) registers here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from models.device import DeviceSpec
from models.errors import InputValidationError, Issue
from models.layout import LayoutGraph, LayoutPlan
from solver import progress
from solver.deadline import Deadline, wrap_up_s
from solver.layout import cpsat, dfsharding, dram, greedy, lns
from solver.layout.evaluate import evaluate
from solver.layout.explain import explain as explain_plan
from solver.layout.ops import DEFAULT_MAX_CONFIGS
from solver.layout.plan import Assignment, build_plan
from solver.layout.problem import LayoutProblem, analyze, resolve_device

DEFAULT_TIME_LIMIT_S = 10.0


@dataclass(frozen=True)
class SolveOptions:
    """Knobs every solver receives; heuristics ignore the ones they have no use for.
    ``ends`` is the deadline on the running solve's clock (``deadline.now()``)."""

    ends: float
    seed: int = 0
    workers: int = 1


@dataclass(frozen=True)
class Outcome:
    """What a policy returns: its decisions plus, for exact solvers, proof information."""

    assignment: Assignment
    status: str = "feasible"
    objective: float | None = None
    best_bound: float | None = None
    gap: float | None = None


Policy = Callable[[LayoutProblem, SolveOptions], Outcome]


def _heuristic(assign: Callable[[LayoutProblem], Assignment]) -> Policy:
    return lambda problem, _options: Outcome(assign(problem))


BASELINE_POLICIES: dict[str, Callable[[LayoutProblem], Assignment]] = {
    "dram": dram.assign,
    "dfsharding": dfsharding.assign,
    "greedy": greedy.assign,
}
BASELINES = tuple(BASELINE_POLICIES)
QUICK_BASELINES = {name: BASELINE_POLICIES[name] for name in ("dram", "dfsharding")}


def _global(problem: LayoutProblem, options: SolveOptions) -> Outcome:
    """The CP-SAT model (``cpsat.py``) hinted with the best baseline, the better of the two
    plans kept; graphs beyond one model get the segment search (``lns.py``) from the best
    baseline. The answer is never worse than a baseline (``greedy`` counts when its walk
    ends before the deadline: always on graphs of up to 32 ops), and every plan kept
    passed the evaluator."""
    priced = [(build_plan(problem, a, name, 0.0).total_latency_us, a)
              for name, a in ((n, assign(problem)) for n, assign in QUICK_BASELINES.items())]
    try:  # the slowest baseline (3 s on a 5,000-op chain) stops at the deadline
        found = greedy.assign(problem, options.ends)
        priced.append((build_plan(problem, found, "greedy", 0.0).total_latency_us, found))
    except greedy.TimeUp:
        pass
    best_total, best = min(priced, key=lambda p: p[0])
    progress.report(best_total)
    deadline = options.ends
    if len(problem.order) > cpsat.MAX_MODEL_OPS:
        return _by_segments(problem, best, best_total, deadline, options,
                            cpsat.latency_floor_us(problem))
    found = cpsat.solve_model(problem, best, deadline, options.seed, options.workers)
    if found.assignment is not None:
        plan = build_plan(problem, found.assignment, "cpsat", 0.0)
        if plan.total_latency_us <= best_total and evaluate(problem, plan).valid:
            best_total, best = plan.total_latency_us, found.assignment
    # The model's bound bounds every plan the model expresses, the baseline's included; a
    # proven optimum no better than the incumbent makes the incumbent optimal too. The proof
    # is in the model's integer cost units, so an optimal plan's gap is 0 even though its
    # evaluated total differs from the bound by the rounding of each term.
    bound = found.bound_us if found.bound_us is not None else cpsat.latency_floor_us(problem)
    bound = min(bound, best_total)
    gap = 0.0 if found.optimal else _gap(best_total, bound)
    return Outcome(best, "optimal" if found.optimal else "feasible", best_total, bound, gap)


def _by_segments(problem: LayoutProblem, best: Assignment, best_total: float, deadline: float,
                options: SolveOptions, bound: float) -> Outcome:
    """LNS over segments of the schedule from ``best`` until the deadline; the better plan."""
    found = lns.search(problem, best, deadline, options.seed, options.workers)
    if found.improved and found.total_us < best_total and evaluate(
            problem, build_plan(problem, found.assignment, "cpsat", 0.0)).valid:
        best, best_total = found.assignment, found.total_us
    return Outcome(best, "feasible", best_total, bound, _gap(best_total, bound))


def _gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None:
        return None
    return max(0.0, (objective - bound) / objective) if objective else 0.0


SOLVERS: dict[str, Policy] = {
    "cpsat": _global,
    **{name: _heuristic(assign) for name, assign in BASELINE_POLICIES.items()},
}


def solve(graph: LayoutGraph, solver: str = "cpsat", device: str | DeviceSpec | None = None,
          *, deadline: Deadline | None = None, time_limit_s: float | None = None,
          seed: int = 0, workers: int = 1, max_configs: int = DEFAULT_MAX_CONFIGS,
          explain: bool = False) -> LayoutPlan:
    """Plan ``graph`` with the named solver until ``deadline`` (default: ``time_limit_s``
    from now, else 10 s); the evaluator's verdict is in the plan, and with ``explain`` the
    differences from the best baseline's plan. A deterministic deadline gives a plan that
    repeats byte for byte (its wall time is left out)."""
    if solver not in SOLVERS:
        raise InputValidationError([Issue(("solver",), f"unknown solver '{solver}'; choose one "
                                          f"of {sorted(SOLVERS)}", "solver.unknown")], "request")
    if deadline is None:
        deadline = Deadline.after(time_limit_s or DEFAULT_TIME_LIMIT_S)
    started = time.monotonic()
    problem = analyze(graph, resolve_device(graph, device), max_configs)
    with deadline.running() as run:
        ends = run.at - wrap_up_s(len(problem.order))
        outcome = SOLVERS[solver](problem, SolveOptions(ends, seed, workers))
        repeatable = deadline.deterministic and not run.wall_stopped
    plan = build_plan(problem, outcome.assignment, solver, 0.0, outcome.status,
                      outcome.objective, outcome.best_bound, outcome.gap)
    verdict = evaluate(problem, plan)
    wall = None if repeatable else time.monotonic() - started
    stats = plan.stats.model_copy(update={"wall_time_s": wall, "deterministic": repeatable})
    if not verdict.valid:
        return plan.model_copy(update={"stats": stats, "status": "invalid",
                                       "violations": verdict.violations})
    plan = plan.model_copy(update={"stats": stats})
    if explain:
        baselines = {b: build_plan(problem, BASELINE_POLICIES[b](problem), b, 0.0)
                     for b in BASELINES}
        plan = plan.model_copy(update={"explanation": explain_plan(graph, plan, baselines)})
    return plan
