"""Layout graphs planned for a TX8 chip (docs/tx8.md): ``solve`` with ``cpsat`` or the
seed compiler's ``groupcost``; every plan goes through the independent evaluator."""

from __future__ import annotations

import time

from models.errors import InputValidationError, Issue
from models.layout import LayoutGraph, LayoutPlan
from models.tx8 import TX8_PRESETS, Tx8Spec
from solver import progress
from solver.deadline import Deadline, now
from solver.layout.plan import with_verdict
from solver.tx8.cpsat import price, solve_groups
from solver.tx8.evaluate import evaluate_tx8
from solver.tx8.groupcost import groupcost
from solver.tx8.plan import build_plan
from solver.tx8.problem import build_problem

TX8_SOLVERS = ("cpsat", "groupcost")
__all__ = ["TX8_SOLVERS", "admit", "evaluate_tx8", "resolve_tx8", "solve"]
PRICING_SHARE = 0.5
"""Share of cpsat's time for pricing candidate groups; the model gets the rest."""
WRAP_UP_S_PER_OP = 6e-4
"""Time kept out of the deadline per op for building the plan and the evaluator's check
of it (Gemma-2-27B decode, 2,530 ops: 0.38 s and 0.55 s)."""


def resolve_tx8(graph: LayoutGraph, override: object) -> Tx8Spec | None:
    """The TX8 chip to plan for (the option's, else the graph's), or None for a Tensix."""
    chosen = override if override is not None else graph.device
    if isinstance(chosen, Tx8Spec):
        return chosen
    if isinstance(chosen, str) and chosen in TX8_PRESETS:
        return TX8_PRESETS[chosen]
    return None


def admit(graph: LayoutGraph, device: Tx8Spec) -> None:
    """Refuse a graph the chip cannot hold: its tensors beyond the DDR, or an op that fits
    no configuration in SPM (the baseline's groups are single ops or fit by construction)."""
    groupcost(build_problem(graph, device))


def solve(graph: LayoutGraph, device: Tx8Spec, solver: str, *, deadline: Deadline,
          seed: int = 0, workers: int = 1) -> LayoutPlan:
    """Plan ``graph`` for ``device`` with ``solver`` until ``deadline``; the evaluator's
    verdict is in the plan."""
    if solver not in TX8_SOLVERS:
        raise InputValidationError([Issue(("solver",), f"'{solver}' plans a Tensix chip; for "
                                          f"a TX8 choose one of {list(TX8_SOLVERS)}",
                                          "solver.tx8")], "request")
    started = time.monotonic()
    with deadline.running() as run:
        problem = build_problem(graph, device)
        ends = run.at - WRAP_UP_S_PER_OP * len(graph.ops)
        seeded = groupcost(problem)
        plan = build_plan(problem, seeded, solver, "feasible")
        if solver == "cpsat" and now() < ends:  # else no time left: the baseline's plan
            progress.report(plan.total_latency_us, None)
            priced = price(problem, now() + PRICING_SHARE * max(0.0, ends - now()), seeded)
            chosen, bound, proven = solve_groups(problem, priced, seeded, ends, seed, workers)
            found = None if chosen is None else build_plan(
                problem, chosen, "cpsat", "optimal" if proven else "feasible", bound)
            if found is not None and found.total_latency_us <= plan.total_latency_us:
                plan = found
            elif bound is not None:
                gap = max(0.0, (plan.total_latency_us - bound) / plan.total_latency_us)
                plan = plan.model_copy(update={"stats": plan.stats.model_copy(
                    update={"best_bound": bound, "gap": gap})})
            progress.report(plan.total_latency_us, bound)
        repeatable = deadline.deterministic and not run.wall_stopped
    return with_verdict(plan, evaluate_tx8(graph, plan, device), started, repeatable)
