"""Sequential tree-reweighted message passing (TRW-S, Kolmogorov 2006) over the units: a
pairwise solver for the priced problem (memory moved into the objective) that sees every
edge, where the forest dynamic programming sees a spanning tree only.

Each pass visits the units in order (then in reverse), updates the messages to the units
ahead, and assigns each unit its best position given the units already assigned in that
pass and the messages from those ahead: an assignment per pass, the cheapest kept. The
messages persist between calls, so a change of prices starts from the last ones.
"""

from __future__ import annotations

import numpy as np

from solver import deadline as clock
from solver.iopddl.coarse import UnitGraph


class MessagePassing:
    def __init__(self, graph: UnitGraph):
        self.graph = graph
        n = graph.count
        self.incoming: list[dict[int, np.ndarray]] = [
            {w: np.zeros(len(graph.unary[u])) for w, _ in graph.neighbours[u]} for u in range(n)]
        """``incoming[u][w]``: the message from w to u (over u's positions)."""
        self.gamma = []
        for u in range(n):
            before = sum(1 for w, _ in graph.neighbours[u] if w < u)
            after = len(graph.neighbours[u]) - before
            self.gamma.append(1.0 / max(before, after, 1))

    def beliefs(self, unary: list[np.ndarray]) -> list[np.ndarray]:
        """Each unit's costs plus the messages into it: low where the whole graph, not only
        the unit's neighbours as they stand, favours a position."""
        return [self._belief(unary, u) for u in range(self.graph.count)]

    def _belief(self, unary: list[np.ndarray], u: int) -> np.ndarray:
        inbox = self.incoming[u]
        return unary[u] + sum(inbox.values()) if inbox else unary[u].copy()

    def solve(self, unary: list[np.ndarray], passes: int, until: float) -> list[int] | None:
        """The cheapest assignment (under ``unary`` and the pair costs) over ``passes``
        passes, or None when the clock ends the first pass."""
        g = self.graph
        n = g.count
        best, best_cost = None, np.inf
        for k in range(passes):
            order = range(n) if k % 2 == 0 else range(n - 1, -1, -1)
            ahead = 1 if k % 2 == 0 else -1
            pos = [-1] * n
            for u in order:
                if u % 256 == 0 and clock.now() >= until:
                    return best
                inbox = self.incoming[u]
                belief = self._belief(unary, u)
                chosen = unary[u].copy()
                for w, m in g.neighbours[u]:
                    chosen += m[:, pos[w]] if pos[w] >= 0 else inbox[w]
                pos[u] = int(np.argmin(chosen))
                for w, m in g.neighbours[u]:
                    if (w - u) * ahead > 0:
                        out = ((self.gamma[u] * belief - inbox[w])[:, None] + m).min(axis=0)
                        self.incoming[w][u] = out - out.min()
            cost = (sum(float(unary[u][pos[u]]) for u in range(n))
                    + sum(float(m[pos[a], pos[b]]) for (a, b), m in g.pairs.items()))
            if cost < best_cost:
                best, best_cost = pos, cost
        return best
