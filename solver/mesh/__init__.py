"""Plans over a mesh of chips: placements, strategies and collectives, then each chip's
layout.

``solve`` decides in two coupled stages. First the strategy problem
(``problem.strategy_problem``): one strategy per op and a placement per graph input and
weight, priced by each op's least per-chip latency and the collectives between, under
per-chip DRAM. ``cpsat`` solves it exactly by variable elimination (compute graphs have a
small treewidth) and, when that choice overflows a chip's DRAM, with the baselines
(``baselines.py``) and the ``iopddl`` family's search, keeping the best that fits; each
baseline fills it by its own rule.
Then the per-chip graph those decisions make (``local.py``) is planned by the one-chip
layout solver (``cpsat`` for ``cpsat``, TT-NN's greedy for the baselines) in the time left.
The plan's latency is the per-chip plan's plus the collectives', and its bound (``cpsat``)
the strategy problem's, which no per-chip plan can beat. The independent evaluator
(``evaluate.py``) checks every plan returned.
"""

from __future__ import annotations

import time

from models.errors import InputValidationError, Issue
from models.layout import L1Allocation, LayoutGraph, LayoutPlan
from models.mesh import ChipMemory, MeshSection, MeshSpec
from solver import layout, progress
from solver.deadline import WORK_SHARE, Deadline, now, wrap_up_s
from solver.iopddl.elimination import eliminate
from solver.iopddl.evaluate import evaluate as evaluate_strategies
from solver.iopddl.problem import Problem
from solver.iopddl.search import SOLVERS as STRATEGY_SEARCHES
from solver.iopddl.search import Infeasible, Outcome
from solver.layout.dram_capacity import dram_need
from solver.layout.ops import DEFAULT_MAX_CONFIGS
from solver.layout.problem import LayoutProblem, analyze
from solver.mesh.baselines import BASELINES
from solver.mesh.evaluate import evaluate_mesh
from solver.mesh.local import Decisions, collectives_of, local_graph, placements_of
from solver.mesh.problem import (
    FORBIDDEN_NS,
    NS_PER_US,
    MeshProblem,
    analyze_mesh,
    strategy_problem,
)

MESH_SOLVERS = ("cpsat", *BASELINES)
STRATEGY_SHARE = 0.4
"""Of a solve's time, the share the strategy search (or a baseline's rule) gets; the
per-chip layout plan gets the rest."""
BASELINE_SHARE = 0.1
"""Of the strategy share, what ``cpsat`` gives the baselines it starts from (autoshard
stops at its share; the others take milliseconds)."""
LOCAL_SOLVER = {"cpsat": "cpsat"}
"""The one-chip solver that plans each chip's graph; the baselines use TT-NN's greedy."""


def _choice_of(problem: MeshProblem, d: Decisions) -> list[int]:
    choice = d.as_choice(problem)
    return [choice[name] for name in problem.nodes]


def _decisions(problem: MeshProblem, solution: list[int]) -> Decisions:
    n = len(problem.sources)
    return Decisions({name: problem.options[name][solution[i]]
                      for i, name in enumerate(problem.sources)},
                     {name: solution[n + i] for i, name in enumerate(problem.ops)})


def solve(graph: LayoutGraph, mesh: MeshSpec, solver: str, *, deadline: Deadline,
          seed: int = 0, workers: int = 1, max_configs: int = DEFAULT_MAX_CONFIGS,
          capacity: L1Allocation = "address") -> LayoutPlan:
    """Plan ``graph`` on ``mesh`` with the named solver (``MESH_SOLVERS``) until
    ``deadline``; the evaluator's verdict is in the plan."""
    if solver not in MESH_SOLVERS:
        raise InputValidationError([Issue(("solver",), f"'{solver}' plans one chip; on a mesh "
                                          f"choose one of {list(MESH_SOLVERS)}",
                                          "solver.mesh")], "request")
    started = time.monotonic()
    with deadline.running() as run:
        problem = analyze_mesh(graph, mesh, max_configs)
        strategies = strategy_problem(problem)
        ends = run.at - wrap_up_s(2 * len(graph.ops))
        begun = now()
        chosen, bound = _decide(problem, strategies, solver,
                                begun + STRATEGY_SHARE * (ends - begun), seed, workers)
        left = max(0.0, ends - now())
        inner = Deadline(deadline.at, left / WORK_SHARE, True) if deadline.deterministic \
            else Deadline(time.monotonic() + left, left)
        repeatable = deadline.deterministic and not run.wall_stopped
    chip_graph = local_graph(problem, chosen)
    chip_plan = layout.solve(chip_graph, LOCAL_SOLVER.get(solver, "greedy"), problem.chip,
                             deadline=inner, seed=seed, workers=workers,
                             max_configs=max_configs, capacity=capacity)
    repeatable = repeatable and chip_plan.stats.deterministic
    plan = _mesh_plan(problem, chosen, analyze(chip_graph, problem.chip), chip_plan, solver,
                      bound)
    verdict = evaluate_mesh(graph, plan)
    stats = plan.stats.model_copy(update={
        "wall_time_s": None if repeatable else time.monotonic() - started,
        "deterministic": repeatable})
    if not verdict.valid:
        return plan.model_copy(update={"stats": stats, "status": "invalid",
                                       "violations": verdict.violations})
    return plan.model_copy(update={"stats": stats})


def _decide(problem: MeshProblem, strategies: Problem, solver: str, until: float, seed: int,
            workers: int) -> tuple[Decisions, float | None]:
    """The decisions of ``solver`` and, for ``cpsat``, a bound on every plan's latency.

    ``cpsat`` first eliminates the strategy problem exactly (``iopddl.elimination``: a
    compute graph's treewidth is small): when that choice fits every chip's DRAM it is the
    optimum and its cost the bound. Otherwise the minimum still bounds every plan, and the
    baselines and the ``iopddl`` search look for decisions that fit."""
    bound = None
    options: list[tuple[int, int, Decisions]] = []
    if solver == "cpsat":
        exact = eliminate(strategies, until)
        if exact is not None:
            bound = exact.cost / NS_PER_US
            d = _decisions(problem, exact.solution)
            cost, peak = _priced(strategies, problem, d)
            if cost >= 0:
                progress.report(cost / NS_PER_US, bound)
                return d, bound
            options.append((cost, peak, d))
    baselines = [solver] if solver != "cpsat" else list(BASELINES)
    share = 1.0 if solver != "cpsat" else BASELINE_SHARE
    for name in baselines:
        d = BASELINES[name](problem, now() + share * max(0.0, until - now()))
        options.append((*_priced(strategies, problem, d), d))
    if solver == "cpsat":
        try:
            outcome = STRATEGY_SEARCHES["cpsat"](strategies, until, seed, workers)
        except Infeasible:  # even each node's least DRAM overflows a chip somewhere
            outcome = Outcome(None, "infeasible")
        if outcome.solution is not None:
            d = _decisions(problem, outcome.solution)
            options.append((*_priced(strategies, problem, d), d))
        if outcome.bound is not None:
            bound = max(bound or 0.0, outcome.bound / NS_PER_US)
    fitting = [o for o in options if o[0] >= 0]
    if not fitting:
        raise InputValidationError([Issue(("mesh",), _unfit(problem, options),
                                          "mesh.dram_capacity")], "layout graph")
    cost, _, chosen = min(fitting, key=lambda o: o[0])
    progress.report(cost / NS_PER_US, bound)
    return chosen, bound


def _priced(strategies: Problem, problem: MeshProblem, d: Decisions) -> tuple[int, int]:
    """(cost in ns, peak DRAM bytes per chip) of decisions; cost -1 when they do not fit
    (or need what no collective or configuration makes: a forbidden cost)."""
    report = evaluate_strategies(strategies, _choice_of(problem, d))
    peak = report.peak.usage if report.peak else 0
    ok = report.valid and report.cost is not None and report.cost < FORBIDDEN_NS
    return (report.cost if ok and report.cost is not None else -1), peak


def _unfit(problem: MeshProblem, options: list[tuple[int, int, Decisions]]) -> str:
    least = min(peak for _, peak, _ in options)
    return (f"no plan found fits {problem.mesh.name}'s per-chip DRAM: the best needs "
            f"{least:,} bytes on one chip, {problem.chip.name} has "
            f"{problem.chip.dram_size_bytes:,}; choose a larger mesh")


def _mesh_plan(problem: MeshProblem, d: Decisions, chip_problem: LayoutProblem,
               chip: LayoutPlan, solver: str, bound: float | None) -> LayoutPlan:
    collectives = collectives_of(problem, d)
    collective_us = sum(c.latency_us for c in collectives)
    total = chip.total_latency_us + collective_us
    where = placements_of(problem, d)
    weights = sum(t.stored_bytes for t in chip_problem.tensors.values()
                  if t.kind == "constant")
    section = MeshSection(
        mesh=problem.mesh,
        placements={t: list(p) for t, p in where.items()},
        strategies={op: list(problem.strategies[op][k].name)
                    for op, k in d.strategies.items()},
        collectives=collectives, collective_latency_us=collective_us,
        chip_latency_us=chip.total_latency_us,
        memory=ChipMemory(dram_peak_bytes=max(dram_need(chip_problem), default=0),
                          dram_capacity_bytes=problem.chip.dram_size_bytes,
                          weight_bytes=weights))
    bound = None if bound is None else min(bound, total)
    gap = None if bound is None else (total - bound) / total if total > 0 else 0.0
    status = "optimal" if gap is not None and gap <= 1e-9 else "feasible"
    stats = chip.stats.model_copy(update={"objective": total, "best_bound": bound, "gap": gap})
    return chip.model_copy(update={"solver": solver, "graph": problem.graph.name,
                                   "total_latency_us": total, "status": status,
                                   "stats": stats, "mesh": section, "explanation": None})
