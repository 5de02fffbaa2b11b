"""Large-neighbourhood search over the layout model, for graphs too big for one model.

Each round frees a window of consecutive ops (in schedule order) and fixes every other op
to the incumbent's configuration and reads: a fixed op keeps one candidate that accepts
only the reads it makes, so the CP-SAT model (``cpsat.build``) is the exact whole-graph
model restricted to that neighbourhood, with every spill decision still free. The
incumbent is the hint, so a round never makes it worse; the windows slide over the
schedule, overlapping by half, until the deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from solver import progress
from solver.layout import cpsat
from solver.layout.plan import Assignment, build_plan
from solver.layout.problem import LayoutProblem

WINDOW_OPS = 12
"""Ops freed per round: measured to build in ~0.2 s and solve to optimality in 0.5-3 s on
the Llama layers; 40 rarely finished a round in its 2 s."""
MIN_ROUND_S = 0.5


@dataclass
class SearchResult:
    assignment: Assignment
    total_us: float
    rounds: int
    improved: int


def restrict(problem: LayoutProblem, incumbent: Assignment,
             free: set[str]) -> tuple[LayoutProblem, Assignment]:
    """The problem with every op outside ``free`` fixed to the incumbent, and the incumbent
    expressed in the restricted problem's candidates (for the hint)."""
    ops, configs = {}, {}
    for name, info in problem.ops.items():
        chosen = incumbent.configs[name]
        if name in free:
            ops[name], configs[name] = info, chosen
            continue
        reads = incumbent.reads[name]
        fixed = replace(chosen, accepts=tuple({m: acc[m]} for acc, m in
                                              zip(chosen.accepts, reads, strict=True)))
        ops[name], configs[name] = replace(info, candidates=[fixed]), fixed
    return (replace(problem, ops=ops),
            Assignment(incumbent.schedule, configs, incumbent.reads, dict(incumbent.spills)))


def _windows(order: list[str], size: int) -> list[set[str]]:
    stride = max(1, size // 2)
    starts = range(0, max(1, len(order) - size + stride), stride)
    return [set(order[k:k + size]) for k in starts]


def search(problem: LayoutProblem, start: Assignment, deadline: float, seed: int,
           workers: int, window: int = WINDOW_OPS) -> SearchResult:
    """Improve ``start`` window by window until ``deadline`` (``time.perf_counter()``) or a
    full pass over the schedule without gain; a round's answer is kept only when the plan
    it builds is cheaper (the plan's own total, not the rounded model objective)."""
    incumbent = start
    best = build_plan(problem, start, "lns", 0.0).total_latency_us
    rounds = improved = 0
    windows = _windows(problem.order, window)
    since_gain = 0
    k = 0
    while since_gain < len(windows) and deadline - time.perf_counter() > MIN_ROUND_S:
        free = windows[k % len(windows)]
        k += 1
        sub, hinted = restrict(problem, incumbent, free)
        found = cpsat.solve_restricted(sub, hinted, deadline, seed + rounds, workers)
        rounds += 1
        candidate = None
        if found.assignment is not None and found.objective_us < best:
            lifted = {op: (found.assignment.configs[op] if op in free
                           else incumbent.configs[op]) for op in problem.order}
            candidate = Assignment(list(problem.order), lifted, found.assignment.reads,
                                   found.assignment.spills)
            total = build_plan(problem, candidate, "lns", 0.0).total_latency_us
        if candidate is not None and total < best:
            incumbent, best = candidate, total
            progress.report(best)
            improved += 1
            since_gain = 0
        else:
            since_gain += 1
    return SearchResult(incumbent, best, rounds, improved)
