"""What a MatMul's role in a subgraph forces it to compute, for op sets the bound did not price.

S6.1 makes a MatMul ``q`` of a subgraph a head when its output reaches an operand of another
MatMul ``m`` of it, else a root. The role changes what ``q`` must compute:

- a root computes its output once: its area share (``least_compute``);
- a head feeding a root ``m`` directly recomputes its whole output for every tile of ``m``
  across the other axis (S10.3: every step of ``m``'s k-loop asks for a full-K strip of
  ``q``'s output, and firings are never cached across steps, S8.1): on ``m``'s LHS once per
  column tile of ``m``, on its RHS once per row tile; at least ``ceil(extent / native)``;
- a head feeding a head ``m`` produces, in every step, the whole width (LHS side) or height
  (RHS side) of ``m``'s operand, so it needs all of its own other operand in that step: a
  graph input larger than the capacity can never be (S12, S5.2), nor a tensor that could
  only be made whole from one (``never_whole``), so no such subgraph fits.

``q`` can be a root only in an op set without the MatMuls that read its output directly;
when every connected op set of that kind was priced, an unpriced set can run ``q`` only as a
head, and the cover's compute filler for ``q`` may charge the least a head pays.

The other way round, a MatMul that no valid subgraph makes a head and whose K exceeds nk is
a root that splits its K wherever it runs (``always_split_root``): the forced traffic
charges its reloads, and S6.4 keeps it apart from a Pointwise op making an operand whose
side is narrower than that K (``never_together``, the links that cut the graph into zones).
"""

from __future__ import annotations

from collections.abc import Collection

from solver.fusion.candidates import Attempted
from solver.fusion.context import ScoringContext
from solver.fusion.floors import least_compute
from solver.fusion.problem import SubgraphShape, ceil_div, matmuls_fed


def compute_floor_in(ctx: ScoringContext, shape: SubgraphShape, q: int) -> int | None:
    """Least compute (``ctx`` units) the firings of ``q`` cost in a run of the op set
    ``shape`` at any granularity and traversal; None when no run of it can fit."""
    if q not in shape.heads:
        return least_compute(ctx, q)
    p = ctx.problem
    factor = 1
    for m in shape.feeds[q]:
        for side, t in enumerate(p.inputs[m]):
            if t != p.outputs[q][0]:
                continue  # reached through Pointwise ops: no factor claimed
            if m in shape.heads:
                if needs_too_big_operand(ctx, q, side):
                    return None
            else:
                factor = max(factor, tiles_across(ctx, m, side))
    return factor * least_compute(ctx, q)


def unpriced_compute(ctx: ScoringContext, free_roots: Collection[int]) -> list[int | None]:
    """Per op, the least compute it costs in any connected op set the bound did not price;
    None when no such set can run it. ``free_roots``: the MatMuls such a set may run as a
    root (``unpriced_roots``).

    Any other MatMul is charged the least over the head roles it can take: fed to a root
    (``tiles_across`` times its own compute), to a head (once, or never when that needs too
    big an operand), or to a Pointwise op (once, nothing claimed). Every other op: its area
    share."""
    g, p = ctx.graph, ctx.problem
    every_op = set(range(p.num_ops))
    out: list[int | None] = []
    for q in range(p.num_ops):
        own = least_compute(ctx, q)
        if not g.is_matmul(q) or q in free_roots:
            out.append(own)
            continue
        factors = []
        for c in g.consumers[p.outputs[q][0]]:
            if not g.is_matmul(c):
                factors.append(1)
                continue
            for side, t in enumerate(p.inputs[c]):
                if t != p.outputs[q][0]:
                    continue
                factors.append(tiles_across(ctx, c, side))
                may_be_head = bool(matmuls_fed(g, every_op, p.outputs[c][0]))  # S6.1
                if may_be_head and not needs_too_big_operand(ctx, q, side):
                    factors.append(1)
        out.append(min(factors) * own if factors else None)
    return out


def unpriced_roots(ctx: ScoringContext, attempted: Attempted) -> frozenset[int]:
    """The MatMuls that some connected op set outside ``attempted`` (op sets the bound
    priced) runs as a root: those with such a set holding them within their
    ``_root_component``."""
    g = ctx.graph
    neighbours = g.neighbours
    return frozenset(
        q for q in range(ctx.problem.num_ops) if g.is_matmul(q) and not attempted.covers(
            g, _root_component(ctx, q, neighbours), never_together(ctx), holding=q))


def _root_component(ctx: ScoringContext, q: int, neighbours: dict[int, frozenset[int]]
                    ) -> frozenset[int]:
    """Ops connected to ``q`` without the MatMuls reading its output directly: a set running
    ``q`` as a root holds none of those (it would be a head) and is connected, so it lies
    within this component."""
    p = ctx.problem
    readers = {c for c in ctx.graph.consumers[p.outputs[q][0]] if ctx.graph.is_matmul(c)}
    seen, todo = {q}, [q]
    while todo:
        for k in neighbours[todo.pop()] - readers - seen:
            seen.add(k)
            todo.append(k)
    return frozenset(seen)


def tiles_across(ctx: ScoringContext, m: int, side: int) -> int:
    """Tiles of root ``m`` that each need all of its operand on ``side``: its column tiles
    for the LHS, row tiles for the RHS. A tile is at most native, and the grid spans ``m``'s
    output: that output or a Pointwise op's below it, the same shape (S1.5), is an output of
    the subgraph."""
    out = ctx.problem.outputs[m][0]
    if side == 0:
        return ceil_div(ctx.problem.widths[out], ctx.nw)
    return ceil_div(ctx.problem.heights[out], ctx.nh)


def needs_too_big_operand(ctx: ScoringContext, q: int, side: int) -> bool:
    """Whether ``q``, feeding a head on ``side``, needs in one step all of an operand that
    no step can hold or make whole (``never_whole``): its RHS when it feeds an LHS, its LHS
    when it feeds an RHS (S10.3: the head asks for the full width or height of ``q``'s
    output)."""
    return ctx.problem.inputs[q][1 - side] in never_whole(ctx)


def never_whole(ctx: ScoringContext) -> frozenset[int]:
    """The tensors no step can have all of: each is larger than the capacity, so it is never
    whole in a working set (loaded or resident, S12), and it is a graph input (never
    ephemeral) or its producer would need all of such a tensor to make all of it in one
    step: a MatMul then is a head and reduces each output element over its whole K (S6.3),
    so it needs both operands whole; a Pointwise op needs each input no larger than its
    output whole. On a transformer block, ``K^T = W_k^T X^T`` with ``X^T`` an input larger
    than the capacity: a head making all of ``K^T`` needs all of ``X^T``. Cached in ``ctx``."""
    return ctx.memo("never_whole", (), lambda: _never_whole(ctx))


def _never_whole(ctx: ScoringContext) -> frozenset[int]:
    """The set behind ``never_whole`` (uncached), producers before consumers."""
    g, p = ctx.graph, ctx.problem
    out = {t for t in g.graph_inputs if g.size(t) > ctx.capacity}
    for q in g.topological_order:
        for t in p.outputs[q]:
            if g.size(t) <= ctx.capacity:
                continue
            needed = p.inputs[q] if g.is_matmul(q) else [
                u for u in p.inputs[q] if p.heights[u] <= p.heights[t]
                and p.widths[u] <= p.widths[t]]
            if any(u in out for u in needed):
                out.add(t)
    return frozenset(out)


def splits_past_native(ctx: ScoringContext, q: int, side: int) -> bool:
    """Whether MatMul ``q`` reduces over a K above the native extent of its operand on
    ``side`` (w for an LHS, h for an RHS): as a root that splits K, S6.4 then keeps the
    Pointwise op making that operand out of its subgraph."""
    return ctx.graph.reduction_length(q) > (ctx.nh if side else ctx.nw)


def always_split_root(ctx: ScoringContext, q: int) -> bool:
    """A MatMul whose K exceeds nk (so it always splits it) and that no subgraph can make a
    head (S6.1, ``_possible_heads``)."""
    g = ctx.graph
    return g.is_matmul(q) and g.reduction_length(q) > ctx.nk and \
        q not in ctx.memo("possible_heads", (), lambda: _possible_heads(ctx))


def _possible_heads(ctx: ScoringContext) -> frozenset[int]:
    """The MatMuls some valid subgraph runs as a head: the output of each reaches an
    operand of a MatMul ``c`` directly, or through Pointwise ops where ``c`` may take an
    operand a Pointwise op makes: as a root that S6.4 lets do so (its K at most nk, or at
    most the native w for an LHS, h for an RHS), or as a head itself (S6.4 binds roots
    only) unless, feeding that head, ``q`` would need all of a tensor no step can have
    whole (``needs_too_big_operand``). MatMuls are walked last to first, so each ``c``
    is settled before any MatMul reaching it. (Taking every such ``c`` for a root, as
    before, let the forced traffic claim a head's reloads that it never makes.)"""
    g = ctx.graph
    heads: set[int] = set()
    for q in reversed(g.topological_order):
        if g.is_matmul(q) and _reaches_head_operand(ctx, q, heads):
            heads.add(q)
    return frozenset(heads)


def _reaches_head_operand(ctx: ScoringContext, q: int, heads: set[int]) -> bool:
    """Whether ``q``'s output reaches an operand that makes it a head in some subgraph
    (``_possible_heads``), given the MatMuls after it that may be heads."""
    g, p = ctx.graph, ctx.problem
    frontier, seen = [(t, True) for t in p.outputs[q]], set()
    while frontier:
        t, direct = frontier.pop()
        for c in g.consumers[t]:
            if g.is_matmul(c):
                sides = [side for side, u in enumerate(p.inputs[c]) if u == t]
                if direct or g.reduction_length(c) <= ctx.nk \
                        or not all(splits_past_native(ctx, c, side) for side in sides) \
                        or any(c in heads and not needs_too_big_operand(ctx, q, side)
                               for side in sides):
                    return True
            elif c not in seen:
                seen.add(c)
                frontier += [(u, False) for u in p.outputs[c]]
    return False


def never_together(ctx: ScoringContext) -> frozenset[frozenset[int]]:
    """The pairs of adjacent ops that no valid subgraph runs together: a Pointwise op and
    the always-split root whose operand it makes on a side whose native extent is below
    that root's K (S6.4). Cached in ``ctx``."""
    return ctx.memo("never_together", (), lambda: _kept_apart(ctx))


def _kept_apart(ctx: ScoringContext) -> frozenset[frozenset[int]]:
    """The pairs behind ``never_together`` (uncached)."""
    g, p = ctx.graph, ctx.problem
    pairs = set()
    for root in range(p.num_ops):
        if not always_split_root(ctx, root):
            continue
        for side, t in enumerate(p.inputs[root]):
            maker = g.producer.get(t)
            if maker is not None and not g.is_matmul(maker) and \
                    splits_past_native(ctx, root, side):
                pairs.add(frozenset((maker, root)))
    return frozenset(pairs)
