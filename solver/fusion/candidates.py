"""Candidate op sets for the CP-SAT fusion model: the connected subsets of a set of ops.

A candidate is any set of ops connected through tensors produced and consumed inside it
(SEMANTICS.md S2.4), grown level by level (size 1, 2, ...) until a budget is reached, so
the sets kept are always every connected set up to some size. Convexity is not required:
a set that skips an intermediate op is valid when that op ran earlier (recomputation);
the model's availability constraints decide whether such an order exists.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import networkx as nx

from solver.fusion.problem import FusionGraph


@dataclass(frozen=True)
class Enumeration:
    """Connected op sets, each listed in the graph's topological order."""

    sets: list[tuple[int, ...]]
    complete: bool
    """Every connected subset of the ops (but those holding a pair kept apart) is in
    ``sets``."""
    max_size: int


def is_connected(graph: FusionGraph, ops: Iterable[int]) -> bool:
    """Whether ``ops`` are connected through tensors produced and consumed among them."""
    members = frozenset(ops)
    return bool(members) and nx.is_weakly_connected(graph.dag.subgraph(members))


@dataclass(frozen=True)
class Attempted:
    """Op sets a bound priced (each in topological order), asked whether every connected
    op set of some ops is among them (``covers``). Built once per set of prices: the
    fillers ask it for every MatMul's root component and every zone."""

    sets: frozenset[tuple[int, ...]]
    largest: int

    @classmethod
    def of(cls, sets: Iterable[tuple[int, ...]]) -> Attempted:
        found = frozenset(sets)
        return cls(found, max(map(len, found), default=0))

    def covers(self, graph: FusionGraph, ops: Collection[int],
               apart: Collection[frozenset[int]], holding: int | None = None) -> bool:
        """Whether every connected subset of ``ops`` (holding op ``holding``, if given), but
        those holding a pair in ``apart``, is among these op sets. ``ops`` larger than every
        one of them counts as not covered (it may itself be such a subset)."""
        if len(ops) > self.largest:
            return False
        found = connected_op_sets(graph, ops, len(self.sets) + 1, apart)
        return found.complete and all(s in self.sets for s in found.sets
                                      if holding is None or holding in s)


def connected_op_sets(graph: FusionGraph, ops: Iterable[int], budget: int,
                      apart: Collection[frozenset[int]] = frozenset()) -> Enumeration:
    """Every connected subset of ``ops`` of size 1, 2, ... while the running total stays
    within ``budget`` (a level that would exceed it is dropped whole, so sizes are never
    partially covered). Sets holding both ops of a pair in ``apart`` (pairs no valid
    subgraph holds, ``bound.roles.never_together``) are left out and take none of it."""
    allowed = frozenset(ops)
    enemies: dict[int, set[int]] = {}
    for pair in apart:
        a, b = pair
        enemies.setdefault(a, set()).add(b)
        enemies.setdefault(b, set()).add(a)
    neighbours = {k: nb & allowed for k, nb in graph.neighbours.items() if k in allowed}
    rank = {k: i for i, k in enumerate(graph.topological_order)}
    level = {frozenset({k}) for k in allowed}
    kept: list[frozenset[int]] = []
    size = 0
    while level and len(kept) + len(level) <= budget:
        kept.extend(level)
        size += 1
        grown: set[frozenset[int]] = set()
        for s in level:
            for k in frozenset().union(*(neighbours[q] for q in s)) - s:
                if enemies.get(k) and not enemies[k].isdisjoint(s):
                    continue
                grown.add(s | {k})
                if len(kept) + len(grown) > budget:
                    break
            if len(kept) + len(grown) > budget:
                break
        level = grown
    ordered = sorted((tuple(sorted(s, key=rank.__getitem__)) for s in kept),
                     key=lambda t: (len(t), [rank[q] for q in t]))
    return Enumeration(ordered, complete=not level, max_size=size)
