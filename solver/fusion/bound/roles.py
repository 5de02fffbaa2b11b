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
  graph input larger than the capacity can never be (S12, S5.2), so no such subgraph fits.

``q`` can be a root only in an op set without the MatMuls that read its output directly;
when every connected op set of that kind was priced, an unpriced set can run ``q`` only as a
head, and the cover's compute filler for ``q`` may charge the least a head pays.
"""

from __future__ import annotations

from collections.abc import Collection

from solver.fusion.candidates import connected_op_sets
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


def unpriced_roots(ctx: ScoringContext, attempted: Collection[tuple[int, ...]]
                   ) -> frozenset[int]:
    """The MatMuls that some connected op set outside ``attempted`` (op sets the bound
    priced, each in topological order) runs as a root: those with such a set within their
    ``_root_component``."""
    g = ctx.graph
    attempted = set(attempted)
    largest = max(map(len, attempted), default=0)
    neighbours = g.neighbours
    found = set()
    for q in range(ctx.problem.num_ops):
        if not g.is_matmul(q):
            continue
        component = _root_component(ctx, q, neighbours)
        if len(component) > largest:
            found.add(q)  # the component itself is such a set
            continue
        sets = connected_op_sets(g, component, budget=len(attempted) + 1)
        if not sets.complete or any(q in s and s not in attempted for s in sets.sets):
            found.add(q)
    return frozenset(found)


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
    """Whether ``q``, feeding a head on ``side``, needs a whole graph input larger than the
    capacity in one step: its RHS when it feeds an LHS, its LHS when it feeds an RHS (S10.3:
    the head asks for the full width or height of ``q``'s output). A graph input is never
    resident (S5.2) nor ephemeral, so it counts whole in that step's working set (S12)."""
    operand = ctx.problem.inputs[q][1 - side]
    return operand in ctx.graph.graph_inputs and ctx.graph.size(operand) > ctx.capacity
