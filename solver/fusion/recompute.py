"""The teamkorea reading's one rule across subgraphs, as pairs of ops that must run together.

SEMANTICS.md lets an op outside a subgraph read a tensor that subgraph keeps ephemeral,
provided some other subgraph writes it. The teamkorea reading does not: each outside
consumer of an ephemeral tensor must run in a subgraph that also runs a copy of the
tensor's producer (``teamkorea._check_recomputed``). Each such demand is a (consumer,
producer) pair; a schedule is accepted on this rule when every pair its subgraphs demand is
run together by one of its subgraphs. Under the default reading nothing is demanded.
"""

from __future__ import annotations

from collections.abc import Iterable

from solver.fusion.context import ScoringContext

Pair = tuple[int, int]
"""(consumer, producer): ops that one subgraph must run together."""


def demanded(ctx: ScoringContext, ops: tuple[int, ...], retained_out: frozenset[int]
             ) -> frozenset[Pair]:
    """The pairs a subgraph running ``ops`` and keeping ``retained_out`` resident demands of
    the others: for each tensor it makes and reads itself (ephemeral, unless kept), each
    consumer it does not run, with the tensor's producer. Empty under the default reading."""
    if ctx.semantics != "teamkorea":
        return frozenset()
    return ctx.memo("demanded", (ops, retained_out),
                    lambda: _demanded(ctx, ops, retained_out))


def _demanded(ctx: ScoringContext, ops: tuple[int, ...], retained_out: frozenset[int]
              ) -> frozenset[Pair]:
    g, members = ctx.graph, set(ops)
    return frozenset((c, g.producer[t]) for t in ctx.shape(ops).ephemerals - retained_out
                     for c in g.consumers[t] if c not in members)


def run_together(op_sets: Iterable[tuple[int, ...]], pairs: Iterable[Pair]) -> frozenset[Pair]:
    """Those of ``pairs`` that one of ``op_sets`` runs together."""
    sets = [set(ops) for ops in op_sets]
    return frozenset(pair for pair in pairs if any(pair[0] in s and pair[1] in s for s in sets))


def paired_edges(ctx: ScoringContext, op_sets: Iterable[tuple[int, ...]]) -> frozenset[Pair]:
    """Every (consumer, producer) pair that one of ``op_sets`` runs together and that could
    be demanded (the consumer reads a tensor the producer makes); empty under the default
    reading, where nothing is demanded."""
    if ctx.semantics != "teamkorea":
        return frozenset()
    g, p = ctx.graph, ctx.problem
    return frozenset((c, g.producer[t]) for ops in op_sets for c in ops for t in p.inputs[c]
                     if g.producer.get(t) in ops)

