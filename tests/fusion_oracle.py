"""An exhaustive search over the CP-SAT fusion model's decision space, to check its optimum.

The decision space: every connected op set (all sizes) with the retention options of
``variants_of``, in any order that the availability (S4) and retention (S5)
rules allow. A shortest path over states (ops covered, tensors in slow memory, tensors
resident) finds the least total latency exactly; only usable on tiny graphs.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from fractions import Fraction
from itertools import count

from solver.fusion.candidates import connected_op_sets
from solver.fusion.score import ScoringContext
from solver.fusion.variants import Variant, variants_of


def all_variants(ctx: ScoringContext) -> list[Variant]:
    sets = connected_op_sets(ctx.graph, range(ctx.problem.num_ops), budget=10**6)
    assert sets.complete
    return [v for ops in sets.sets for v in variants_of(ctx, ops)]


def optimum(ctx: ScoringContext, *, recompute: bool = True,
            extra: Sequence[Variant] = ()) -> Fraction | None:
    """The least total latency of a valid schedule of variants and ``extra`` ones (the
    solver's hint is part of its decision space), None if there is none; with
    ``recompute=False`` every op runs exactly once."""
    g = ctx.graph
    variants = all_variants(ctx) + list(extra)
    everything = frozenset(range(ctx.problem.num_ops))
    outputs = frozenset(g.graph_outputs)
    start = (frozenset(), frozenset(g.graph_inputs), frozenset())
    best = {start: Fraction(0)}
    tie = count()
    queue = [(Fraction(0), next(tie), start)]
    while queue:
        cost, _, state = heapq.heappop(queue)
        if cost > best[state]:
            continue
        covered, slow, resident = state
        if covered == everything and outputs <= slow and not resident:
            return cost
        for v in variants:
            if v.retained_in != resident or not v.reads_from_slow <= slow:
                continue
            if not recompute and covered & set(v.ops):
                continue
            nxt = (covered | frozenset(v.ops), slow | v.writes, v.retained_out)
            if nxt == state:
                continue
            c = cost + v.latency
            if c < best.get(nxt, c + 1):
                best[nxt] = c
                heapq.heappush(queue, (c, next(tie), nxt))
    return None
