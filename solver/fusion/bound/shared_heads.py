"""Heads that share one weight too big for the capacity: what each pays in any subgraph.

Chains that reuse a weight ``B`` (``x_i @ B @ V_i``: batched heads, experts, benchmark 13's
sixteen ``@ W1``) can share its loads only by running their ``x_i @ B`` as heads of the
``@ V_i`` roots in one subgraph, and every head then holds its own full-K strip of
``x_i``, so the capacity limits how many share a slice of ``B``. For a group of readers of
``B`` (``shared_operands``; conditions in ``_group``), in every step of a subgraph where
``a`` of them run as heads of their roots (S10.1, S10.3):

- each head ``q`` fires on its root's rows of the tile and the step's k-range, needing
  ``L_q[rows x [0, K)]`` (its LHS, never ephemeral, so in the working set, S12) and
  ``B[[0, K) x k-range]``; so ``a x rows x K + K <= capacity``;
- that slice of ``B`` is loaded (S11: no other requirement of ``B`` names the same
  rectangle in the step before, whose k-range differs), and its root loads a k-slice of
  its RHS ``V_q`` when only it reads that graph input;
- the step costs at least ``max(a x compute per head, B slice + a x V slice)``, which is
  ``a x max(compute per head, B slice / a + V slice)``.

Summed over a row tile's steps and its column tiles, each head pays
``max(tiles x compute, tiles x |B| / a + |V|)``, ``a`` at most what the capacity allows at
that tile's rows; over its row tiles at the best row height, ``head_floor``. A subgraph
pays at least the sum over the group's heads it runs, whatever else it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import floor as floor_int

from solver.fusion.bound.roles import needs_too_big_operand
from solver.fusion.context import ScoringContext
from solver.fusion.floors import op_weight
from solver.fusion.problem import ceil_div


@dataclass(frozen=True)
class SharedOperand:
    """A weight and the MatMuls reading it, each paying at least ``head_floor`` (``ctx``
    units) in any subgraph that runs it as a head; None when no such subgraph fits."""

    operand: int
    readers: tuple[int, ...]
    head_floor: int | None


def shared_operands(ctx: ScoringContext) -> list[SharedOperand]:
    """Every graph input whose readers form a group (``_group``), cached in ``ctx``."""
    return ctx.memo("shared operands", (), lambda: [
        found for b in ctx.graph.graph_inputs if (found := _group(ctx, b)) is not None])


def _group(ctx: ScoringContext, b: int) -> SharedOperand | None:
    """The group of ``b``'s readers, when the argument above holds for every one of them:
    ``b`` is larger than the capacity (never whole in a step) and a graph input (never
    resident, S5.2, nor made), K and its width exceed the native k (each root's k-loop
    takes new slices every step; a root reading ``b`` never asks for all K rows); each
    reader reads ``b`` as its RHS only, has a distinct LHS that cannot be ephemeral, and
    feeds one MatMul, as its LHS only; all outputs have one height (so in a tile every
    head runs the same rows)."""
    g, p = ctx.graph, ctx.problem
    if g.size(b) <= ctx.capacity or min(p.heights[b], p.widths[b]) <= ctx.nk:
        return None
    readers = tuple(g.consumers[b])
    roots = []
    for q in readers:
        if not g.is_matmul(q) or p.inputs[q] != [p.inputs[q][0], b] or p.inputs[q][0] == b \
                or not _never_ephemeral(ctx, p.inputs[q][0]):
            return None
        out = p.outputs[q][0]
        consumers = g.consumers[out]
        if len(consumers) != 1 or not g.is_matmul(consumers[0]) \
                or p.inputs[consumers[0]] != [out, p.inputs[consumers[0]][1]] \
                or p.inputs[consumers[0]][1] == out:
            return None
        roots.append(consumers[0])
    if len({p.inputs[q][0] for q in readers}) < len(readers) \
            or len({p.heights[p.outputs[q][0]] for q in readers}) > 1:
        return None
    return SharedOperand(b, readers, _head_floor(ctx, b, readers, roots))


def _never_ephemeral(ctx: ScoringContext, lhs: int) -> bool:
    """Whether a head's LHS is in the working set wherever the head runs: a graph input,
    or made by a MatMul that would be a head of a head there and needs all of an operand
    larger than the capacity to be one (``needs_too_big_operand``)."""
    producer = ctx.graph.producer.get(lhs)
    return producer is None or (ctx.graph.is_matmul(producer)
                                and needs_too_big_operand(ctx, producer, 0))


def _head_floor(ctx: ScoringContext, b: int, readers: tuple[int, ...],
                roots: list[int]) -> int | None:
    """The least any reader pays as a head, over every row height ``h`` (S9: up to native):
    the sum over its row tiles of ``max(tiles x compute, tiles x |B| / a + |V|)`` (module
    docstring), with the group's least compute, tiles and ``V`` load."""
    g, p = ctx.graph, ctx.problem
    depth, rows = p.heights[b], p.heights[p.outputs[readers[0]][0]]
    # per tile, one padded native row of a head's whole output and of its root's tile
    compute = min(op_weight(ctx, q) * ctx.nh * p.widths[b] + op_weight(ctx, m) * ctx.nh * ctx.nw
                  for q, m in zip(readers, roots, strict=True))
    across = min(ceil_div(p.widths[p.outputs[m][0]], ctx.nw) for m in roots)
    weight = g.size(b) * ctx.per_element
    rhs_load = min(_root_rhs_load(ctx, m) for m in roots)
    room = (ctx.capacity - depth) / depth  # rows of LHS strips a step can hold
    best = None
    for h in range(1, ctx.nh + 1):
        total = 0
        for start in range(0, rows, h):
            sharing = min(len(readers), floor_int(Fraction(room) / min(h, rows - start)))
            if sharing < 1:
                break
            total += max(across * compute, across * weight // sharing + rhs_load)
        else:
            best = total if best is None else min(best, total)
    return best


def _root_rhs_load(ctx: ScoringContext, m: int) -> int:
    """What root ``m`` loads of its RHS per row tile (``ctx`` units), counted only when
    that is a graph input nothing else reads: all of it, one k-slice per step."""
    g, p = ctx.graph, ctx.problem
    rhs = p.inputs[m][1]
    if rhs not in g.graph_inputs or g.consumers[rhs] != [m] or p.inputs[m][0] == rhs:
        return 0
    return g.size(rhs) * ctx.per_element
