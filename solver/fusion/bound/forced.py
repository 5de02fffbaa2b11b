"""The slow-memory traffic every schedule is forced into, per op (``forced_traffic``), and
the bound it gives on its own (``forced_bound``): split-K reloads, loads of graph inputs
too big for the capacity, writes every schedule makes, and the loads or recomputation a
consumer of those writes pays.
"""

from __future__ import annotations

from fractions import Fraction

from solver.fusion.bound.roles import always_split_root, splits_past_native
from solver.fusion.bound.zones import zones
from solver.fusion.context import ScoringContext
from solver.fusion.problem import ceil_div


def forced_traffic(ctx: ScoringContext) -> tuple[int, ...]:
    """Per op, slow-memory traffic (``ctx`` units) that the subgraph it is *designated* to
    pays for it, such that any subgraph pays at least the sum over its designated ops.

    An op is designated to every unpriced subgraph that runs it and, if its one output
    must be written, writes it (some subgraph that runs it does; one filler stands for all
    of them, and fillers are the cover's writers of the op's outputs, so the cover stays a
    relaxation). Then a designated op ``q`` brings: its forced split-K loads
    (``_forced_loads``); its share of the pointwise loads of graph inputs too big to be
    held whole (``_pointwise_reads``); the write of its output where that output must
    reach slow memory (``must_write``), since its subgraph writes it; and for each input
    that must be written and cannot be resident, either that input's load or, if its
    producer runs here too, its share of what that producer brings: the producer is not
    designated here, since its output is consumed here and so not written here. Cached
    in ``ctx``: the search, the solver's report and the cover all ask for it."""
    return ctx.memo("forced_traffic", (), lambda: _traffic_per_op(ctx))


def _traffic_per_op(ctx: ScoringContext) -> tuple[int, ...]:
    """The computation behind ``forced_traffic`` (uncached)."""
    g, p = ctx.graph, ctx.problem
    # what each op brings wherever it runs (designated or included): its own loads and its
    # inputs' floor; producers come first in topological order
    brought: dict[int, Fraction] = {}
    for q in g.topological_order:
        total = _forced_loads(ctx, q) + _pointwise_reads(ctx, q)
        for t in dict.fromkeys(p.inputs[q]):
            producer = g.producer.get(t)
            if producer is None or len(p.outputs[producer]) != 1 or g.is_matmul(q) \
                    or g.size(t) <= ctx.capacity or not must_write(ctx, t):
                continue
            # the load of t (a share of the Pointwise readers' tile slices) or, when its
            # producer runs here too, that producer's share of what it brings
            total += min(Fraction(_needed(ctx, t, q), _pointwise_readers(ctx, t, q)),
                         brought[producer] / _fan_out(ctx, producer))
        brought[q] = total
    out = []
    for q in range(p.num_ops):
        written = [g.size(t) for t in p.outputs[q] if must_write(ctx, t)]
        writes = written[0] if len(p.outputs[q]) == 1 and written else 0
        out.append(int((brought[q] + writes) * ctx.per_element))
    return tuple(out)


def forced_bound(ctx: ScoringContext) -> Fraction:
    """A lower bound on every schedule (time units), instant on any graph: the cover with
    no op set priced, every op at its forced traffic (each op is designated somewhere)."""
    return ctx.latency(sum(forced_traffic(ctx)))


def _forced_loads(ctx: ScoringContext, q: int) -> Fraction:
    """Slow-memory traffic (elements) a MatMul's k-loop loads in any subgraph that holds
    it, shared evenly among the MatMuls reading each tensor (a subgraph holding several of
    them may load a slice once for all; a Pointwise reader's tile slices are other slices,
    its role differs): 0 unless ``q`` is a root wherever it runs and must split its K
    (``always_split_root``). Then every operand that can be neither resident (a graph
    input, or larger than the capacity) nor made in the same subgraph (a graph input, or
    made by a Pointwise op that S6.4 forbids there), and that no subgraph can hold whole
    (``_only_sliced``), has each k-step's slice loaded afresh, the step before having
    another k range: all of it once per tile across, at least ``ceil(extent / native)``
    tiles."""
    g, p = ctx.graph, ctx.problem
    if not always_split_root(ctx, q):
        return Fraction(0)
    rows, cols = p.heights[p.outputs[q][0]], p.widths[p.outputs[q][0]]
    total = Fraction(0)
    for side, t in enumerate(p.inputs[q]):
        if _made_outside(ctx, t, q, side) and _only_sliced(ctx, t, side):
            across = ceil_div(rows, ctx.nh) if side else ceil_div(cols, ctx.nw)
            sharing = sum(1 for c in g.consumers[t] if g.is_matmul(c))
            total += Fraction(g.size(t) * across, sharing)
    return total


def _made_outside(ctx: ScoringContext, t: int, q: int, side: int) -> bool:
    """Whether operand ``t`` on ``side`` of the always-split root ``q`` can be neither
    resident nor made in ``q``'s subgraph: a graph input, or larger than the capacity and
    made by a Pointwise op that S6.4 keeps out (``q`` splits a K above the native w for
    an LHS, h for an RHS)."""
    g = ctx.graph
    producer = g.producer.get(t)
    return splits_past_native(ctx, q, side) and (producer is None or (
        not g.is_matmul(producer) and g.size(t) > ctx.capacity))


def must_write(ctx: ScoringContext, t: int) -> bool:
    """Whether every schedule writes ``t`` to slow memory at least once: a graph output, or
    an output some always-split root must load because it can be neither resident nor made
    in that root's subgraph. Cached in ``ctx`` (every cover solve asks again)."""
    return ctx.memo("must_write", (t,), lambda: _must_reach_slow_memory(ctx, t))


def _must_reach_slow_memory(ctx: ScoringContext, t: int) -> bool:
    """The test behind ``must_write`` (uncached)."""
    g, p = ctx.graph, ctx.problem
    if t in g.producer and not g.consumers[t]:
        return True
    return t in g.producer and any(
        always_split_root(ctx, c) and _made_outside(ctx, t, c, side)
        for c in g.consumers[t] for side, u in enumerate(p.inputs[c]) if u == t)


def _pointwise_reads(ctx: ScoringContext, q: int) -> Fraction:
    """Elements of graph inputs a Pointwise op loads in any subgraph that runs it, shared
    among the Pointwise ops reading each: every element of its output is made once, and an
    input larger than the capacity is never whole in a step, so its tile slices (role
    ``pw``) are loaded apart from any MatMul's slices of it."""
    g, p = ctx.graph, ctx.problem
    if g.is_matmul(q):
        return Fraction(0)
    total = Fraction(0)
    for t in dict.fromkeys(p.inputs[q]):
        if t in g.producer or g.size(t) <= ctx.capacity:
            continue
        total += Fraction(_needed(ctx, t, q), _pointwise_readers(ctx, t, q))
    return total


def _pointwise_readers(ctx: ScoringContext, t: int, q: int) -> int:
    """Pointwise ops reading ``t`` in ``q``'s zone: a subgraph holding several of them
    loads its ``pw`` tile slices once for all, and a subgraph lies within one zone
    (``zones.py``), so no reader of another zone shares them with ``q``."""
    zone = zones(ctx)
    return sum(1 for c in ctx.graph.consumers[t]
               if not ctx.graph.is_matmul(c) and zone[c] == zone[q])


def _needed(ctx: ScoringContext, t: int, q: int) -> int:
    """Elements of input ``t`` a Pointwise op ``q`` reads to make all of its outputs."""
    p = ctx.problem
    rows = max(p.heights[u] for u in p.outputs[q])
    cols = max(p.widths[u] for u in p.outputs[q])
    return min(rows, p.heights[t]) * min(cols, p.widths[t])


def _fan_out(ctx: ScoringContext, q: int) -> int:
    """Readings of ``q``'s outputs by ops that may share a subgraph with ``q`` (each may
    claim a share of what ``q`` brings when it runs there)."""
    g, p = ctx.graph, ctx.problem
    return max(1, sum(
        1 for t in p.outputs[q] for c in g.consumers[t]
        if not (always_split_root(ctx, c) and not g.is_matmul(q) and all(
            _made_outside(ctx, t, c, side) for side, u in enumerate(p.inputs[c]) if u == t))))


def _only_sliced(ctx: ScoringContext, t: int, side: int) -> bool:
    """Whether every requirement of ``t`` in any subgraph is a k-step slice of a root or a
    tile slice that no head widens to a whole extent: each consumer is an always-split root
    reading it once on the same side, or a Pointwise op from whose output only
    always-split roots are reached through Pointwise ops."""
    g, p = ctx.graph, ctx.problem
    for c in g.consumers[t]:
        if g.is_matmul(c):
            if p.inputs[c].count(t) != 1 or p.inputs[c][side] != t \
                    or not always_split_root(ctx, c):
                return False
            continue
        frontier, seen = list(p.outputs[c]), {c}
        while frontier:
            for d in g.consumers[frontier.pop()]:
                if g.is_matmul(d):
                    if not always_split_root(ctx, d):
                        return False
                elif d not in seen:
                    seen.add(d)
                    frontier += p.outputs[d]
    return True
