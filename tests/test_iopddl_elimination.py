"""Variable elimination finds the exact minimum of a strategy problem's costs (memory
aside): equal to exhaustive search on small random problems, None past its table cap."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from solver.iopddl.elimination import eliminate
from solver.iopddl.problem import Problem


def random_problem(seed: int, n: int = 7, edges: int = 10) -> Problem:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 4, size=n)
    costs = [rng.integers(0, 100, size=k).astype(np.int64) for k in counts]
    pairs = [tuple(rng.choice(n, 2, replace=False)) for _ in range(edges)]
    matrices = [rng.integers(0, 100, size=(counts[u], counts[v])).astype(np.int64)
                for u, v in pairs]
    for m in matrices[:2]:
        m[0, :] = 10**18  # forbidden pairs
    return Problem("random", np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), costs,
                   [np.zeros(k, dtype=np.int64) for k in counts],
                   np.array([u for u, _ in pairs]), np.array([v for _, v in pairs]),
                   matrices, None)


def brute_force(p: Problem) -> int:
    best = None
    for choice in itertools.product(*(range(len(c)) for c in p.costs)):
        total = sum(int(c[s]) for c, s in zip(p.costs, choice, strict=True)) + sum(
            int(m[choice[u], choice[v]]) for u, v, m in zip(p.edge_u, p.edge_v, p.edge_costs,
                                                           strict=True))
        best = total if best is None else min(best, total)
    assert best is not None
    return min(best, 10**18)


def cost_of(p: Problem, solution: list[int]) -> int:
    return sum(int(c[s]) for c, s in zip(p.costs, solution, strict=True)) + sum(
        int(m[solution[u], solution[v]]) for u, v, m in zip(p.edge_u, p.edge_v, p.edge_costs,
                                                            strict=True))


@pytest.mark.parametrize("seed", range(40))
def test_elimination_equals_exhaustive_search(seed: int) -> None:
    p = random_problem(seed)
    exact = eliminate(p, time.monotonic() + 10)
    assert exact is not None
    assert exact.cost == brute_force(p)
    if exact.cost < 10**18:
        assert cost_of(p, exact.solution) == exact.cost


def test_a_graph_too_wide_for_the_table_cap_is_left_to_the_search() -> None:
    """A clique of 8 nodes of 3 strategies needs a 3^8 table at some elimination."""
    n = 8
    pairs = list(itertools.combinations(range(n), 2))
    p = Problem("clique", np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64),
                [np.arange(3, dtype=np.int64)] * n, [np.zeros(3, dtype=np.int64)] * n,
                np.array([u for u, _ in pairs]), np.array([v for _, v in pairs]),
                [np.ones((3, 3), dtype=np.int64)] * len(pairs), None)
    assert eliminate(p, time.monotonic() + 10, max_table=3**7) is None
    exact = eliminate(p, time.monotonic() + 10, max_table=3**8)
    assert exact is not None and exact.cost == len(pairs) and exact.solution == [0] * n
