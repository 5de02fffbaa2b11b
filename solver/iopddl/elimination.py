"""The exact minimum of a strategy problem's costs by variable elimination, when its graph
has a small treewidth (memory limits aside).

Compute graphs planned per op (a transformer's ops, its weights as leaves) form graphs of
treewidth 3 or 4, so eliminating nodes one by one, each time in the order that makes the
smallest table (the product of its neighbours' strategy counts), finds the cheapest choice
of every node exactly in a few million table entries. The memory limit is not modelled:
the minimum is a lower bound on every choice that fits, and the optimum itself when the
choice it finds fits too (``search.cpsat`` then has nothing left to prove).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from solver.deadline import now
from solver.iopddl.problem import Problem
from solver.iopddl.work import FORBIDDEN

MAX_TABLE = 2**23
"""Most entries one elimination may build (64 MiB of int64): beyond it the graph is too
wide and the caller searches instead."""
CAP = np.int64(FORBIDDEN)
CLOCK_EVERY = 64
"""Eliminations between readings of the clock (each reading costs work-clock time under a
deterministic solve)."""


@dataclass(frozen=True)
class Exact:
    solution: list[int]
    cost: int
    """The exact minimum of node and edge costs (``FORBIDDEN`` and above: no finite one)."""


@dataclass
class _Factor:
    scope: tuple[int, ...]
    table: np.ndarray


def _order(problem: Problem, neighbours: list[set[int]], counts: list[int]) -> list[int]:
    """Greedy elimination order: always the node whose elimination table is smallest."""
    def size(v: int) -> float:
        return math.prod(counts[u] for u in neighbours[v]) * counts[v]

    heap = [(size(v), v) for v in range(problem.n)]
    heapq.heapify(heap)
    done = [False] * problem.n
    order = []
    while heap:
        s, v = heapq.heappop(heap)
        if done[v] or s != size(v):
            if not done[v]:
                heapq.heappush(heap, (size(v), v))
            continue
        done[v] = True
        order.append(v)
        near = neighbours[v]
        for u in near:
            neighbours[u] |= near - {u}
            neighbours[u].discard(v)
            heapq.heappush(heap, (size(u), u))
    return order


def _expand(f: _Factor, scope: tuple[int, ...]) -> np.ndarray:
    """``f``'s table laid out on ``scope`` (size-1 axes where it does not depend)."""
    axes = sorted(range(len(f.scope)), key=lambda a: scope.index(f.scope[a]))
    table = np.transpose(f.table, axes)
    shape = [1] * len(scope)
    for a in axes:
        shape[scope.index(f.scope[a])] = f.table.shape[a]
    return table.reshape(shape)


def eliminate(problem: Problem, until: float, max_table: int = MAX_TABLE) -> Exact | None:
    """The cheapest strategy of every node, memory limit aside; None when some elimination
    would exceed ``max_table`` entries or the time runs out."""
    counts = [len(c) for c in problem.costs]
    neighbours: list[set[int]] = [set() for _ in range(problem.n)]
    for u, v in zip(problem.edge_u.tolist(), problem.edge_v.tolist(), strict=True):
        if u != v:
            neighbours[u].add(v)
            neighbours[v].add(u)
    order = _order(problem, [set(s) for s in neighbours], counts)
    by_node: list[list[_Factor]] = [[] for _ in range(problem.n)]

    def add(f: _Factor) -> None:
        for x in f.scope:
            by_node[x].append(f)

    for i, c in enumerate(problem.costs):
        add(_Factor((i,), np.minimum(c, CAP)))
    for u, v, m in zip(problem.edge_u.tolist(), problem.edge_v.tolist(), problem.edge_costs,
                       strict=True):
        add(_Factor((u, v), np.minimum(m, CAP)) if u != v else
            _Factor((u,), np.minimum(np.diagonal(m), CAP)))
    gone = [False] * problem.n
    choices: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    total = np.int64(0)
    for step, v in enumerate(order):
        if step % CLOCK_EVERY == 0 and now() >= until:
            return None
        factors = [f for f in by_node[v] if not any(gone[x] for x in f.scope)]
        rest = tuple(sorted({x for f in factors for x in f.scope} - {v}))
        scope = (v, *rest)
        if math.prod(counts[x] for x in scope) > max_table:
            return None
        combined = np.zeros([counts[x] for x in scope], dtype=np.int64)
        for f in factors:
            np.minimum(combined + _expand(f, scope), CAP, out=combined)
        choices.append((v, rest, np.argmin(combined, axis=0)))
        gone[v] = True
        best = combined.min(axis=0)
        if rest:
            add(_Factor(rest, best))
        else:
            total = min(total + best, CAP)
    solution = [0] * problem.n
    for v, rest, argmin in reversed(choices):
        solution[v] = int(argmin[tuple(solution[x] for x in rest)]) if rest else int(argmin)
    return Exact(solution, int(total))
