"""The working form of a problem that the reductions shrink and the searches solve.

Costs are float64 (every finite cost the contest uses is an integer far below 2^53, so sums
stay exact; the evaluator recomputes the final cost in Python integers anyway); a cost of
``FORBIDDEN`` or more is the contest's "infinity" and is never chosen when a finite
solution exists. Time is compressed to the steps where some interval starts or ends, and
each node's usage is split into its smallest usage (a constant ``base`` load) plus a
``var``iable part: only steps where the variable parts can exceed what the base leaves
(``cap``) can bind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from solver.iopddl.problem import Problem

FORBIDDEN = 1e18
"""Costs at or above this are the contest's "infinite" strategies."""
NO_LIMIT = np.iinfo(np.int64).max // 4


@dataclass
class Edge:
    u: int
    v: int
    cost: np.ndarray
    """``(len(strategies[u]), len(strategies[v]))`` float64."""

    def toward(self, i: int) -> np.ndarray:
        """The matrix with node ``i``'s strategies as rows."""
        return self.cost if i == self.u else self.cost.T

    def other(self, i: int) -> int:
        return self.v if i == self.u else self.u


@dataclass
class Work:
    """The problem as the solver sees it: live nodes, their remaining strategies (indices
    into the original), costs, variable usages, edges and the memory caps per step."""

    problem: Problem
    strategies: list[np.ndarray]
    cost: list[np.ndarray]
    use: list[np.ndarray]
    edges: dict[int, Edge]
    adjacent: list[dict[int, int]]
    """``adjacent[i][j]``: the edge id joining i and j."""
    alive: np.ndarray
    first: np.ndarray
    """Node i is live on compressed steps ``first[i] <= k < last[i]``."""
    last: np.ndarray
    times: np.ndarray
    cap: np.ndarray
    """Per compressed step: what the variable usages may sum to (``NO_LIMIT`` where the
    step cannot bind)."""
    folds: list[tuple] = field(default_factory=list)
    offset: float = 0.0
    """Cost of the nodes folded away at degree 0 (part of every solution's cost)."""
    next_edge: int = 0
    _var: dict[int, np.ndarray] = field(default_factory=dict)
    _binding: list[int] = field(default_factory=list)
    """Binding steps before each compressed step (a prefix count of ``cap < NO_LIMIT``)."""

    @property
    def live_nodes(self) -> np.ndarray:
        return np.flatnonzero(self.alive)

    def var(self, i: int) -> np.ndarray:
        """Node i's usage above its smallest, per remaining strategy."""
        found = self._var.get(i)
        if found is None:
            u = self.use[i]
            found = self._var[i] = u - u.min()
        return found

    def degree(self, i: int) -> int:
        return len(self.adjacent[i])

    def add_edge(self, u: int, v: int, cost: np.ndarray) -> None:
        """Join u and v, summing into an edge that already joins them."""
        if u == v:
            self.cost[u] = self.cost[u] + np.diag(cost)
            return
        e = self.adjacent[u].get(v)
        if e is not None:
            edge = self.edges[e]
            edge.cost = edge.cost + (cost if edge.u == u else cost.T)
            return
        e = self.next_edge
        self.next_edge += 1
        self.edges[e] = Edge(u, v, cost)
        self.adjacent[u][v] = e
        self.adjacent[v][u] = e

    def drop_edge(self, e: int) -> None:
        edge = self.edges.pop(e)
        del self.adjacent[edge.u][edge.v]
        del self.adjacent[edge.v][edge.u]

    def keep(self, i: int, rows: np.ndarray) -> None:
        """Restrict node i to its strategies at positions ``rows``."""
        self.strategies[i] = self.strategies[i][rows]
        self.cost[i] = self.cost[i][rows]
        self.use[i] = self.use[i][rows]
        self._var.pop(i, None)
        for e in self.adjacent[i].values():
            edge = self.edges[e]
            edge.cost = edge.cost[rows, :] if edge.u == i else edge.cost[:, rows]

    def memory_relevant(self, i: int) -> bool:
        """Whether node i's choice can change whether some step fits (asked ~100,000
        times by the reductions: scalar work only)."""
        a, b = int(self.first[i]), int(self.last[i])
        if a >= b or not self.var(i).any():
            return False
        if len(self._binding) != len(self.cap) + 1:
            self._binding = [0, *np.cumsum(self.cap < NO_LIMIT).tolist()]
        return self._binding[b] > self._binding[a]

    def refresh_caps(self) -> bool:
        """Recompute the base load and which steps can bind, from the strategies left.
        False when even the smallest usages exceed the limit somewhere (no solution)."""
        limit = self.problem.usage_limit
        steps = len(self.times)
        if limit is None:
            self.cap = np.full(steps, NO_LIMIT, dtype=np.int64)
            self._binding = []
            return True
        base = np.zeros(steps + 1, dtype=np.int64)
        top = np.zeros(steps + 1, dtype=np.int64)
        for i in range(self.problem.n):
            a, b = self.first[i], self.last[i]
            if a < b:
                low = int(self.use[i].min())
                base[a] += low
                base[b] -= low
                top[a] += int(self.use[i].max()) - low
                top[b] -= int(self.use[i].max()) - low
        base = np.cumsum(base)[:steps]
        top = np.cumsum(top)[:steps]
        cap = limit - base
        if steps and cap.min() < 0:
            self.cap = cap
            self._binding = []
            return False
        self.cap = np.where(top > cap, cap, NO_LIMIT)
        self._binding = []
        return True


def build(problem: Problem, forbid: bool = True) -> Work:
    """The working form of ``problem``: parallel edges summed, self-edges folded into their
    node, and (``forbid``) strategies of "infinite" cost removed where a node has others."""
    n = problem.n
    times = np.unique(np.concatenate([problem.starts, problem.ends]))
    first = np.searchsorted(times, problem.starts)
    last = np.searchsorted(times, problem.ends)
    strategies = [np.arange(len(c)) for c in problem.costs]
    cost = [c.astype(np.float64) for c in problem.costs]
    use = [u.copy() for u in problem.usages]
    work = Work(problem, strategies, cost, use, {}, [{} for _ in range(n)],
                np.ones(n, dtype=bool), first, last, times, np.zeros(0, dtype=np.int64))
    for e in range(problem.m):
        work.add_edge(int(problem.edge_u[e]), int(problem.edge_v[e]),
                      problem.edge_costs[e].astype(np.float64))
    if forbid:
        for i in range(n):
            ok = work.cost[i] < FORBIDDEN
            for e in work.adjacent[i].values():
                ok &= (work.edges[e].toward(i) < FORBIDDEN).any(axis=1)
            if ok.any() and not ok.all():
                work.keep(i, np.flatnonzero(ok))
    work.refresh_caps()
    return work
