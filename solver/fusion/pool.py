"""A pool of op sets around an incumbent schedule, for one set partition of the whole graph.

A window of the large-neighbourhood search frees only subgraphs that run next to each
other; two subgraphs that exchange a tensor but run far apart (the branches of a fork, a
residual's two ends) are never in one window, so their fusion is never tried. The pool
holds, besides the incumbent's own op sets: each one cut in two along its op order, the
union of every two subgraphs joined by a tensor, and each op set with one op moved out
(what stays connected) or one op adjacent to it through a tensor moved in. The
whole-graph model over the pool (``cpsat.relink``) reorders, relinks, regroups and merges
them at once. Every set is connected (S2.4).
"""

from __future__ import annotations

from collections.abc import Sequence

from solver.fusion.candidates import is_connected
from solver.fusion.problem import FusionGraph

MAX_MERGED_OPS = 24
"""Most ops of a set the pool adds by a merge or a move in (the window search's largest
window)."""


def halves(graph: FusionGraph, schedule: Sequence[tuple[int, ...]]) -> set[tuple[int, ...]]:
    """Each op set cut in two at every point of its op order (a topological order, so the
    first part never reads the second), the connected parts."""
    return {part for ops in schedule for i in range(1, len(ops))
            for part in (ops[:i], ops[i:]) if is_connected(graph, part)}


def reshaped(graph: FusionGraph, schedule: Sequence[tuple[int, ...]]) -> set[tuple[int, ...]]:
    """Each op set with one op moved out (what stays connected) or one op adjacent to it
    through a tensor moved in: the move a window makes between neighbours, between any two
    subgraphs here."""
    neighbours = graph.neighbours
    found: set[tuple[int, ...]] = set()
    for ops in schedule:
        members = set(ops)
        if len(ops) > 1:
            found |= {graph.in_order(members - {q}) for q in ops
                      if is_connected(graph, members - {q})}
        if len(ops) < MAX_MERGED_OPS:
            found |= {graph.in_order(members | {k})
                      for k in set().union(*(neighbours[q] for q in ops)) - members}
    return found


def merged(graph: FusionGraph, schedule: Sequence[tuple[int, ...]]) -> set[tuple[int, ...]]:
    """The union of every two op sets of which one produces a tensor the other consumes,
    up to ``MAX_MERGED_OPS`` ops."""
    owner: dict[int, list[int]] = {}
    for i, ops in enumerate(schedule):
        for q in ops:
            owner.setdefault(q, []).append(i)
    neighbours = graph.neighbours
    found: set[tuple[int, ...]] = set()
    for i, ops in enumerate(schedule):
        joined = {j for q in ops for k in neighbours[q] for j in owner[k] if j != i}
        for j in joined:
            union = set(ops) | set(schedule[j])
            if len(union) <= MAX_MERGED_OPS:
                found.add(graph.in_order(union))
    return found


def pool(graph: FusionGraph, schedule: Sequence[tuple[int, ...]],
         budget: int) -> list[tuple[int, ...]]:
    """The incumbent's op sets, then its halves, merges and one-op reshapes, in that order
    of priority, at most ``budget`` sets in all (the incumbent's always)."""
    kept = dict.fromkeys(schedule)
    for more in (halves(graph, schedule), merged(graph, schedule), reshaped(graph, schedule)):
        for ops in sorted(more, key=lambda s: (len(s), s)):
            if len(kept) >= budget:
                return list(kept)
            kept.setdefault(ops)
    return list(kept)
