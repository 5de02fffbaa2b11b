"""The slow-memory traffic every schedule is forced into, per op (``forced_traffic``), and
the bound it gives on its own (``forced_bound``): split-K reloads, loads of graph inputs
too big for the capacity, writes every schedule makes, the loads or recomputation a
consumer of those writes pays, and the round trip through slow memory of a Pointwise op's
input or output where no subgraph can run it with both of its MatMul neighbours.
"""

from __future__ import annotations

from fractions import Fraction

from solver.fusion.bound.roles import always_split_root, needs_too_big_operand, splits_past_native
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
    designated here, since its output is consumed here and so not written here. A MatMul on
    either side of a Pointwise op that can share a subgraph with only one of them also
    brings that op's input or output written or loaded (``_round_trips``). Cached in
    ``ctx``: the search, the solver's report and the cover all ask for it."""
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
    trips = _round_trips(ctx)
    out = []
    for q in range(p.num_ops):
        written = [g.size(t) for t in p.outputs[q] if must_write(ctx, t)]
        writes = written[0] if len(p.outputs[q]) == 1 and written else 0
        out.append(int((brought[q] + writes + trips.get(q, 0)) * ctx.per_element))
    return tuple(out)


def _round_trips(ctx: ScoringContext) -> dict[int, Fraction]:
    """Per op, elements a subgraph that runs it writes or loads because a Pointwise op
    ``q`` between two MatMuls shares no subgraph with both (a transformer's softmax between
    its scores and ``P @ V``). ``q`` reads ``S``, made by the MatMul ``m`` and read by
    ``q`` alone, and makes ``P``; a MatMul ``c`` reads ``P`` once, on a side whose native
    extent its K exceeds (and K exceeds nk), so S6.4 keeps ``q`` from ``c`` as a root, and
    as a head ``c`` would make ``m`` a head of a head that needs all of an operand no step
    can have (``needs_too_big_operand``). ``S`` and ``P`` are larger than the capacity
    (never resident) and neither must be written otherwise (``must_write``: that write is
    claimed there). Then a subgraph running ``m`` writes ``S`` (``q`` runs elsewhere) or
    ``P`` (``c`` does); one running ``c`` loads ``P`` (``q`` runs elsewhere) or, with ``q``,
    what ``q`` reads of ``S`` (``m`` cannot run there), shared among such readers of ``P``.
    A write and a load are different traffic, so both claims hold in one subgraph. Only
    where one input of ``q`` is such an ``S``: two would claim ``P``'s write twice."""
    g, p = ctx.graph, ctx.problem
    out: dict[int, Fraction] = {}
    for q in range(p.num_ops):
        if g.is_matmul(q) or len(p.outputs[q]) != 1:
            continue
        made = p.outputs[q][0]
        if g.size(made) <= ctx.capacity or must_write(ctx, made):
            continue
        trips = {s: readers for s in dict.fromkeys(p.inputs[q])
                 if (readers := _head_only_readers(ctx, q, s))}
        if len(trips) != 1:
            continue
        (s, readers), = trips.items()
        maker = g.producer[s]
        out[maker] = out.get(maker, Fraction(0)) + min(g.size(s), g.size(made))
        load = Fraction(min(g.size(made), _needed(ctx, s, q)), len(readers))
        for c in readers:
            out[c] = out.get(c, Fraction(0)) + load
    return out


def _head_only_readers(ctx: ScoringContext, q: int, s: int) -> list[int]:
    """The readers ``c`` of the Pointwise op ``q``'s output for which ``_round_trips``
    holds with ``S = s``; none unless ``s`` fits its rule."""
    g, p = ctx.graph, ctx.problem
    maker = g.producer.get(s)
    if maker is None or not g.is_matmul(maker) or g.consumers[s] != [q] \
            or g.size(s) <= ctx.capacity or must_write(ctx, s):
        return []
    made = p.outputs[q][0]
    readers = []
    for c in dict.fromkeys(g.consumers[made]):
        sides = [side for side, t in enumerate(p.inputs[c]) if t == made]
        if g.is_matmul(c) and len(sides) == 1 and g.reduction_length(c) > ctx.nk \
                and splits_past_native(ctx, c, sides[0]) \
                and needs_too_big_operand(ctx, maker, sides[0]):
            readers.append(c)
    return readers


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
