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
