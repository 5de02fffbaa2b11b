"""Neighbouring subgraphs run as one where that is faster: a pass over the whole schedule.

A window frees a few neighbouring subgraphs, drawn at random, and the relinking's pool
holds only as many merges as its budget leaves room for, so neither is sure to meet every
pair, least of all under the TeamKorea reading, where scoring is slower and windows fewer:
a 10-s solve of the 53-op ``gen-residual-07`` there ended with its first two subgraphs
apart (49,792.53), which run as one in 43,165.87. Trying a pair costs one scoring, so the
pass tries them all, first to last, a merged pair facing its next neighbour in turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from solver.deadline import now
from solver.fusion.context import ScoringContext, ScoringTimeout
from solver.fusion.cpsat_model import may_replace
from solver.fusion.variants import Variant, make_variant


def merged_neighbours(ctx: ScoringContext, schedule: Sequence[Variant],
                      deadline: float) -> list[Variant]:
    """``schedule`` with each pair of neighbours that runs faster as one subgraph (keeping
    what the first finds resident and the second hands on) merged, where the model of
    their window would allow it; under SEMANTICS.md only pairs that exchange a tensor
    (S2.4: a subgraph is connected), under the teamkorea reading any pair. Stops at
    ``deadline`` with the merges made so far."""
    out = list(schedule)
    i = 0
    with ctx.searching_until(deadline):
        while i < len(out) - 1 and now() < deadline:
            first, second = out[i], out[i + 1]
            try:
                merged = _merged(ctx, first, second)
            except ScoringTimeout:
                break
            if merged is not None and merged.latency < first.latency + second.latency \
                    and may_replace(ctx, out, i, i + 2, [merged]):
                out[i:i + 2] = [merged]
            else:
                i += 1
    return out


def _merged(ctx: ScoringContext, first: Variant, second: Variant) -> Variant | None:
    """The pair as one subgraph at its best config (an op both run, one recomputing it, runs
    once), None where it may not be one or fits nowhere."""
    if ctx.semantics == "default" and \
            not any(ctx.graph.neighbours[q].intersection(second.ops) for q in first.ops):
        return None
    return make_variant(ctx, ctx.graph.in_order(first.ops + second.ops), first.retained_in,
                        second.retained_out)
