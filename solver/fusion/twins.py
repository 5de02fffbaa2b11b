"""Subgraphs alike up to the names of their ops and tensors: twins.

Repeated layers and heads make many of them (two thirds of the config searches of a
window search on a 160-op transformer, four fifths on a 124-op attention stack). Scoring
reads nothing of a subgraph but what ``signature`` records, so twins have the same best
config; callers still re-score a twin's config on each subgraph before they use it.
Their prices (the cover's floors) are the same too, given what ``floor_signature`` adds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from solver.fusion.context import ScoringContext
from solver.fusion.problem import SubgraphShape

if TYPE_CHECKING:  # variants imports score, which imports this module
    from solver.fusion.variants import Variant


def signature(ctx: ScoringContext, shape: SubgraphShape, resident: frozenset[int],
              kept: frozenset[int], held: int) -> tuple:
    """The subgraph with its ops named by position and its tensors by first mention: each
    op's type, base cost and tensors (extents, whether a graph input, resident, an output
    of the subgraph, kept, and which op of it makes it), and the room resident tensors
    take (``held``)."""
    p = ctx.problem
    position = {q: i for i, q in enumerate(shape.ops)}
    named: dict[int, int] = {}

    def tensor(t: int) -> tuple:
        made = shape.producer.get(t)
        return (named.setdefault(t, len(named)), p.heights[t], p.widths[t],
                t not in ctx.graph.producer, t in resident, t in shape.outputs, t in kept,
                None if made is None else position[made])

    return (tuple((p.op_types[q], p.base_costs[q], tuple(map(tensor, p.inputs[q])),
                   tuple(map(tensor, p.outputs[q]))) for q in shape.ops), held)


def floor_signature(ctx: ScoringContext, shape: SubgraphShape, resident: frozenset[int],
                    kept: frozenset[int]) -> tuple:
    """``signature``, with the one fact of the whole graph the floors read besides: each
    op's least extents (``FusionGraph.least_extents``: whether some subgraph may stream its
    rows or columns). Twins under it have the same prices (``pricing.least``)."""
    held = sum(ctx.graph.size(t) for t in resident)
    return (signature(ctx, shape, resident, kept, held),
            tuple(ctx.graph.least_extents(q) for q in shape.ops))


def variant_signature(ctx: ScoringContext, v: Variant) -> tuple:
    """``signature`` of a scheduled subgraph, with what it finds resident and keeps."""
    return signature(ctx, ctx.shape(v.ops), v.retained_in, v.retained_out,
                     sum(ctx.graph.size(t) for t in v.retained_in))
