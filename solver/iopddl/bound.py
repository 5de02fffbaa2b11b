"""A lower bound by min-sum diffusion: costs are moved between each node and its edges
(a reparametrization: every assignment keeps its cost) so that the sum of the smallest
node costs and the smallest edge costs, a lower bound at every iteration, grows. The
memory limit is left out, which can only lower the bound.
"""

from __future__ import annotations

import numpy as np

from solver import deadline as clock
from solver.iopddl.work import FORBIDDEN, Work


def _total(node: dict[int, np.ndarray], edge: dict[int, np.ndarray]) -> float:
    return (sum(float(t.min()) for t in node.values())
            + sum(float(t.min()) for t in edge.values()))


def diffusion(work: Work, until: float, extra: dict[int, np.ndarray] | None = None,
              iterations: int = 50) -> float:
    """A proven lower bound on the working problem's optimum (hence the original's), with
    ``extra`` costs added to nodes' strategies, improved until ``until`` (a ``clock.now()``
    value)."""
    nodes = [int(i) for i in work.live_nodes]
    extra = extra or {}
    node = {i: np.minimum(work.cost[i], FORBIDDEN) + extra.get(i, 0.0) for i in nodes}
    edge = {e: np.minimum(ed.cost, FORBIDDEN) for e, ed in work.edges.items()}
    best = _total(node, edge) + work.offset
    for _ in range(iterations):
        if clock.now() >= until:
            break
        for k, i in enumerate(nodes):
            if k % 1000 == 999 and clock.now() >= until:
                break  # every step so far moved costs exactly: the bound below holds
            incident = work.adjacent[i]
            if not incident:
                continue
            views = [edge[e] if work.edges[e].u == i else edge[e].T for e in incident.values()]
            theta = node[i]
            for view in views:
                pulled = view.min(axis=1)
                view -= pulled[:, None]
                theta += pulled
            share = theta / (len(views) + 1)
            for view in views:
                view += share[:, None]
            node[i] = share
        best = max(best, _total(node, edge) + work.offset)
    # float sums of integers below 2^53 are exact up to rounding of the shares: keep a margin
    return float(np.floor(best - 1e-9 * abs(best) - 1.0))
