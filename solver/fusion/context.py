"""What every scoring call of one problem shares: constants, an exact integer unit, caches.

Latency is a sum of ``max(compute, traffic / B)`` over steps, where compute is a product
of a base cost (a rational), native-tile factors (multiples of 1/nh and 1/nw) and a
reduction factor (a multiple of 1/nk or 1/K). Every such quantity is an integer multiple
of one unit, ``1 / unit``, fixed per problem; the closed form adds integers in that unit,
which is exact and much faster than ``Fraction``, and converts once at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from math import lcm
from typing import Any

from models.fusion import FusionProblem, Semantics
from solver.fusion.problem import (
    DEFAULT_RULES,
    FusionGraph,
    Rules,
    SubgraphShape,
    exact,
    legal_granularities,
)


class ScoringTimeout(Exception):
    """The context's deadline passed during a config search; nothing was cached."""


class ScoringContext:
    """One problem under one set of rules, with the caches every scoring call shares."""

    def __init__(self, problem: FusionProblem | FusionGraph, rules: Rules = DEFAULT_RULES, *,
                 every_tile: bool = False, semantics: Semantics = "default"):
        self.graph = problem if isinstance(problem, FusionGraph) else FusionGraph(problem)
        p = self.graph.problem
        self.problem = p
        self.rules = rules
        self.nw, self.nh, self.nk = self.graph.native
        self.capacity = exact(p.fast_memory_capacity)
        base = [exact(c) for c in p.base_costs]
        cost_den = lcm(*(b.denominator for b in base))
        depths = [self.graph.reduction_length(q) for q in range(p.num_ops)
                  if self.graph.is_matmul(q)]
        self.reduction_den = lcm(self.nk, *depths) if rules.reduction_cost == "per_op" else self.nk
        compute_scale = cost_den * self.nh * self.nw * self.reduction_den
        bandwidth = exact(p.slow_memory_bandwidth)
        self.unit = compute_scale * bandwidth.numerator
        """Latency units per time unit."""
        self.base_units = [int(b * cost_den) * bandwidth.numerator for b in base]
        """Base cost of every op, times nh * nw * reduction_den units per native factor."""
        self.per_element = bandwidth.denominator * compute_scale
        """Latency units one element of slow-memory traffic costs."""
        self.semantics = semantics
        """``teamkorea``: subgraphs are scored under that reading (``teamkorea_config``)."""
        self.every_tile = every_tile
        """Also search the largest tiles below a power of two that does not fit
        (``score.best_config``) and each axis's balanced tile (``axis_candidates``);
        without it, powers of two only, as the seed team's greedy."""
        self._cache: dict[tuple[Any, ...], Any] = {}
        self.deadline: float | None = None
        """A ``deadline.now()`` value after which a config search stops (``best_config``
        raises ``ScoringTimeout``): set by a solver while it scores under a time limit."""

    @contextmanager
    def searching_until(self, deadline: float) -> Iterator[None]:
        """Config searches inside stop at ``deadline`` (raising ``ScoringTimeout``), one op
        set's search being long enough to overrun a scoring share on its own."""
        outer, self.deadline = self.deadline, deadline
        try:
            yield
        finally:
            self.deadline = outer

    def shape(self, ops: tuple[int, ...]) -> SubgraphShape:
        return self.graph.shape(ops)

    def latency(self, units: int) -> Fraction:
        return Fraction(units, self.unit)

    def reduction_units(self, q: int, depth: int) -> int:
        """S8.3 reduction factor of a MatMul firing of ``depth``, in 1/reduction_den."""
        return depth * (self.reduction_den // self.graph.covered_depth(q, self.rules))

    def memo(self, kind: str, key: tuple[Any, ...], make: Any) -> Any:
        """A cached value of ``make()`` under (kind, key)."""
        full = (kind, *key)
        if full not in self._cache:
            self._cache[full] = make()
        return self._cache[full]

    def remember(self, kind: str, key: tuple[Any, ...], value: Any) -> None:
        """Make ``value`` what ``memo`` answers under (kind, key) from now on."""
        self._cache[(kind, *key)] = value

    def has(self, kind: str, key: tuple[Any, ...]) -> bool:
        """Whether ``memo`` holds a value under (kind, key)."""
        return (kind, *key) in self._cache

    def granularities(self, ops: tuple[int, ...]) -> list[tuple[int, int, int]]:
        return self.memo("grans", ops, lambda: legal_granularities(
            self.graph, self.shape(ops), balanced=self.every_tile))
