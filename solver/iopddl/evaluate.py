"""The contest's ``Evaluate``, exactly: a solution's cost is the sum of its chosen node and
edge costs (Python integers: no overflow), and it is invalid when its length is wrong, an
index is out of range or the usage at some time step exceeds the limit.

This module shares nothing with the solvers but the parsed problem, so it can check them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from models.errors import InputValidationError, Issue
from models.iopddl import IopddlReport, Peak
from solver.iopddl.problem import Problem

PEAK_NODES = 10


def parse_solution(doc: Any) -> list[int]:
    """A solution document: the JSON list of strategy indices (or ``{"solution": [...]}``)."""
    if isinstance(doc, dict) and "solution" in doc:
        doc = doc["solution"]
    if not isinstance(doc, list):
        raise InputValidationError([Issue((), "a solution is a JSON list of strategy indices, "
                                          f"one per node; got {type(doc).__name__}",
                                          "schema.type")], "iopddl solution")
    bad = next((i for i, v in enumerate(doc) if type(v) is not int), None)
    if bad is not None:
        raise InputValidationError([Issue((bad,), "must be an integer strategy index, got "
                                          f"{str(doc[bad])[:40]}", "integer.type")],
                                   "iopddl solution")
    return doc


def usage_profile(problem: Problem, solution: Sequence[int]) -> tuple[list[int], list[int]]:
    """The total usage as a step function: ``times[k]`` starts a stretch of ``totals[k]``
    (exact integers)."""
    delta: dict[int, int] = {}
    for i in range(problem.n):
        start, end = int(problem.starts[i]), int(problem.ends[i])
        if start < end:
            use = int(problem.usages[i][solution[i]])
            delta[start] = delta.get(start, 0) + use
            delta[end] = delta.get(end, 0) - use
    times = sorted(delta)
    totals, running = [], 0
    for t in times:
        running += delta[t]
        totals.append(running)
    return times, totals


def _peak(problem: Problem, solution: Sequence[int]) -> Peak:
    times, totals = usage_profile(problem, solution)
    if not times:
        return Peak(usage=0, step=None, live_nodes=0, largest=[])
    k = max(range(len(totals)), key=totals.__getitem__)
    step = times[k]
    live = np.flatnonzero((problem.starts <= step) & (step < problem.ends))
    uses = sorted(((int(problem.usages[i][solution[i]]), int(i)) for i in live), reverse=True)
    return Peak(usage=totals[k], step=step, live_nodes=len(live),
                largest=[(i, u) for u, i in uses[:PEAK_NODES]])


def evaluate(problem: Problem, solution: Sequence[int]) -> IopddlReport:
    """The contest's verdict on ``solution``, with the peak usage and where it occurs."""
    limit = problem.usage_limit
    if len(solution) != problem.n:
        return IopddlReport(valid=False, cost=None, node_cost=None, edge_cost=None,
                            usage_limit=limit, peak=None, errors=[
                                f"the solution has {len(solution)} entries; the problem has "
                                f"{problem.n} nodes"])
    errors = [f"node {i}: strategy {s} is out of range (it has {len(problem.costs[i])})"
              for i, s in enumerate(solution) if not 0 <= s < len(problem.costs[i])]
    if errors:
        return IopddlReport(valid=False, cost=None, node_cost=None, edge_cost=None,
                            usage_limit=limit, peak=None, errors=errors[:20])
    node_cost = sum(int(problem.costs[i][s]) for i, s in enumerate(solution))
    edge_cost = sum(int(problem.edge_costs[e][solution[u], solution[v]])
                    for e, (u, v) in enumerate(zip(problem.edge_u.tolist(),
                                                   problem.edge_v.tolist(), strict=True)))
    peak = _peak(problem, solution)
    if limit is not None and peak.usage > limit:
        return IopddlReport(valid=False, cost=None, node_cost=node_cost, edge_cost=edge_cost,
                            usage_limit=limit, peak=peak, errors=[
                                f"usage {peak.usage} at time step {peak.step} exceeds the "
                                f"limit {limit}"])
    return IopddlReport(valid=True, cost=node_cost + edge_cost, node_cost=node_cost,
                        edge_cost=edge_cost, usage_limit=limit, peak=peak)
