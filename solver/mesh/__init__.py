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
layout solver (``cpsat`` for ``cpsat``, TT-NN's greedy for the baselines) in the time left;
``cpsat`` keeps the best baseline's plan instead when its own ends dearer.
The plan's latency is the per-chip plan's plus the collectives', and its bound (``cpsat``)
the strategy problem's, which no per-chip plan can beat. The independent evaluator
(``evaluate.py``) checks every plan returned.
"""

from __future__ import annotations

import math
import time

from models.errors import InputValidationError, Issue
from models.layout import L1Allocation, LayoutGraph, LayoutPlan
from models.mesh import MeshSection, MeshSpec
from solver import layout, progress
from solver.deadline import WORK_SHARE, Deadline, now, wrap_up_s
from solver.iopddl.elimination import eliminate
from solver.iopddl.evaluate import evaluate as evaluate_strategies
from solver.iopddl.problem import Problem
from solver.iopddl.search import SOLVERS as STRATEGY_SEARCHES
from solver.iopddl.search import Infeasible
from solver.layout.ops import DEFAULT_MAX_CONFIGS
from solver.layout.plan import with_verdict
from solver.layout.problem import LayoutProblem, analyze
from solver.mesh.baselines import BASELINES
from solver.mesh.evaluate import evaluate_mesh
from solver.mesh.local import (
    Decisions,
    chip_memory,
    collectives_of,
    local_graph,
    placements_of,
)
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
BASELINE_PLAN_SHARE = 0.05
"""Of the time left after the strategies, what ``cpsat`` gives each baseline's plan (its
rule and TT-NN's greedy per chip) to compare its own with."""
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
        ends = run.at - wrap_up_s(2 * len(graph.ops))
        begun = now()
        shared = strategy_problem(problem, shared=True)
        chosen, bound = _decide(problem, shared, solver,
                                begun + STRATEGY_SHARE * (ends - begun), seed, workers)
        repeatable = deadline.deterministic and not run.wall_stopped

        def until_now(share: float) -> Deadline:
            """``share`` of the time left, as a deadline of its own for a one-chip solve."""
            left = share * max(0.0, ends - now())
            return Deadline(deadline.at, left / WORK_SHARE, True) if deadline.deterministic \
                else Deadline(time.monotonic() + left, left)

        def planned(d: Decisions, chip_solver: str,
                    share: float) -> tuple[float, LayoutPlan, LayoutGraph, Decisions]:
            chip_graph = local_graph(problem, d)
            chip = layout.solve(chip_graph, chip_solver, problem.chip,
                                deadline=until_now(share), seed=seed, workers=workers,
                                max_configs=max_configs, capacity=capacity)
            total = chip.total_latency_us + sum(c.latency_us for c in collectives_of(problem, d))
            return (total if chip.status != "invalid" else math.inf), chip, chip_graph, d

        # cpsat also plans each baseline's decisions as that baseline does (TT-NN's greedy per
        # chip) and keeps the best such plan if its own ends dearer: never worse than one
        runs = [planned(d, "greedy", BASELINE_PLAN_SHARE)
                for d in _baseline_decisions(
                    problem, shared, now() + BASELINE_PLAN_SHARE * max(0.0, ends - now()))] \
            if solver == "cpsat" else []
        runs.append(planned(chosen, LOCAL_SOLVER.get(solver, "greedy"), 1.0))
    _, chip_plan, chip_graph, chosen = min(runs, key=lambda r: r[0])
    repeatable = repeatable and chip_plan.stats.deterministic
    plan = _mesh_plan(problem, chosen, analyze(chip_graph, problem.chip), chip_plan, solver,
                      bound)
    return with_verdict(plan, evaluate_mesh(graph, plan, mesh), started, repeatable)


def _decide(problem: MeshProblem, shared: Problem, solver: str, until: float, seed: int,
            workers: int) -> tuple[Decisions, float | None]:
    """The decisions of ``solver`` and, for ``cpsat``, a bound on every plan's latency.

    ``cpsat`` eliminates the strategy problem exactly twice (``iopddl.elimination``: a
    compute graph's treewidth is small): with each reader paying a whole conversion, and
    with each paying its share, whose optimum (DRAM aside) bounds every plan. When neither
    choice fits every chip's DRAM, the baselines and the ``iopddl`` search (on the shared
    problem: its bound is a bound too) look for decisions that do. Candidates are ranked by
    what they cost with one collective chain per tensor and placement (``_strategy_us``);
    the cheapest whose per-chip graph fits a chip's DRAM is kept. ``shared`` is the
    strategy problem with shared collectives."""
    bound = None
    if solver != "cpsat":
        found = [BASELINES[solver](problem, until)]
    else:
        found = []
        for costs in (shared, strategy_problem(problem)):
            exact = eliminate(costs, until)
            if exact is not None:
                found.append(_decisions(problem, exact.solution))
                if costs is shared:
                    bound = exact.cost / NS_PER_US
    chosen = _first_fitting(problem, shared, found)
    if chosen is None and solver == "cpsat":
        more, searched = _searched(problem, shared, until, seed, workers)
        found += more
        bound = searched if bound is None or searched is None else max(bound, searched)
        chosen = _first_fitting(problem, shared, found)
    if chosen is None:
        raise InputValidationError([Issue(("mesh",), _unfit(problem, shared, found),
                                          "mesh.dram_capacity")], "layout graph")
    progress.report(_strategy_us(problem, chosen), bound)
    return chosen, bound


def _baseline_decisions(problem: MeshProblem, shared: Problem,
                        until: float) -> list[Decisions]:
    """Each baseline's decisions that fit a chip (autoshard stops at ``until``)."""
    found = [rule(problem, until) for rule in BASELINES.values()]
    return [d for d in found if _fits(problem, shared, d)]


def _searched(problem: MeshProblem, shared: Problem, until: float, seed: int,
              workers: int) -> tuple[list[Decisions], float | None]:
    """The baselines' decisions and the ``iopddl`` search's on the shared problem, with its
    bound (in us)."""
    found = [rule(problem, now() + BASELINE_SHARE * max(0.0, until - now()))
             for rule in BASELINES.values()]
    try:
        outcome = STRATEGY_SEARCHES["cpsat"](shared, until, seed, workers)
    except Infeasible:  # even each node's least DRAM overflows a chip somewhere
        return found, None
    if outcome.solution is not None:
        found.append(_decisions(problem, outcome.solution))
    return found, None if outcome.bound is None else outcome.bound / NS_PER_US


def _strategy_us(problem: MeshProblem, d: Decisions) -> float:
    """Every op at its least per-chip latency plus every collective chain once (inf when
    some operand cannot be resharded as its reader needs)."""
    try:
        collectives = collectives_of(problem, d)
    except ValueError:
        return math.inf
    return sum(problem.op_us[op][k] for op, k in d.strategies.items()) + sum(
        c.latency_us for c in collectives)


def _fits(problem: MeshProblem, shared: Problem, d: Decisions) -> bool:
    """Within the strategy problem's DRAM, then within the per-chip graph's own check."""
    report = evaluate_strategies(shared, _choice_of(problem, d))
    if not report.valid or report.cost is None or report.cost >= FORBIDDEN_NS:
        return False
    try:
        analyze(local_graph(problem, d), problem.chip)
    except InputValidationError:
        return False
    return True


def _first_fitting(problem: MeshProblem, shared: Problem,
                   found: list[Decisions]) -> Decisions | None:
    priced = sorted(((_strategy_us(problem, d), i) for i, d in enumerate(found)))
    return next((found[i] for us, i in priced
                 if not math.isinf(us) and _fits(problem, shared, found[i])), None)


def _unfit(problem: MeshProblem, shared: Problem, found: list[Decisions]) -> str:
    peaks = [r.peak.usage for d in found
             if (r := evaluate_strategies(shared, _choice_of(problem, d))).peak]
    least = f"{min(peaks):,}" if peaks else "more than that"
    return (f"no plan found fits {problem.mesh.name}'s per-chip DRAM: the best needs "
            f"{least} bytes on one chip, {problem.chip.name} has "
            f"{problem.chip.dram_size_bytes:,}; choose a larger mesh")


def _mesh_plan(problem: MeshProblem, d: Decisions, chip_problem: LayoutProblem,
               chip: LayoutPlan, solver: str, bound: float | None) -> LayoutPlan:
    collectives = collectives_of(problem, d)
    collective_us = sum(c.latency_us for c in collectives)
    total = chip.total_latency_us + collective_us
    section = MeshSection(
        mesh=problem.mesh,
        placements={t: list(p) for t, p in placements_of(problem, d).items()},
        strategies={op: list(problem.strategies[op][k].name)
                    for op, k in d.strategies.items()},
        collectives=collectives, collective_latency_us=collective_us,
        chip_latency_us=chip.total_latency_us, memory=chip_memory(chip_problem))
    gap = None if bound is None else (total - bound) / total if total > 0 else 0.0
    status = "optimal" if gap is not None and abs(gap) <= 1e-9 else "feasible"
    stats = chip.stats.model_copy(update={"objective": total, "best_bound": bound, "gap": gap})
    return chip.model_copy(update={"solver": solver, "graph": problem.graph.name,
                                   "total_latency_us": total, "status": status,
                                   "stats": stats, "mesh": section, "explanation": None})
