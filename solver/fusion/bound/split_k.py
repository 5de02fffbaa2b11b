"""A bound under the TeamKorea reading from what its MatMuls pay (``split_k_bound``).

That reading splits K in a subgraph with one MatMul, or one head-tail pair, only, and then
every tile loads again the slices of every k-step: such a subgraph waits at least on its
MatMuls' operand loads (``split_loads``). With one k-step, a MatMul holds whole-K strips of
its operands for the tile, which caps the tile: every op there pays its base once per
tile, and the strips move again as the tiles change row and column
(``one_step_configs``). A subgraph's latency is at least the larger of its compute and its
traffic, so at least ``lam`` times the one plus ``1 - lam`` times the other: each op
claims its part where it runs (loads of slices no other read there shares, or a share of
them; compute per op), the claims of a subgraph's ops add up to at most its latency, and
their sum over the ops bounds every schedule (``Claims``). docs/fusion.md, "The TeamKorea
reading", gives the argument; it rests on that reading's slice keys (``teamkorea._operand``)
and chain rules, so a change there needs it checked again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from itertools import product
from typing import Any

from solver.fusion.problem import FusionGraph, LeastGrid, ceil_div, exact
from solver.fusion.teamkorea import Role, operand_loads, strip_changes


def split_k_bound(g: FusionGraph) -> Fraction:
    """The larger ``Claims.bound`` of the two ways of claiming in subgraphs with one
    k-step."""
    claims = Claims.of(g)
    return max(claims.bound(mixed) for mixed in (False, True))


def _most(f: Callable[[float], float]) -> Fraction:
    """Where the concave ``f`` is largest on [0, 1], near enough: the best of a grid, then
    a ternary search next to it."""
    steps = 16
    best = max(range(steps + 1), key=lambda i: f(i / steps))
    low, high = max(0, best - 1) / steps, min(steps, best + 1) / steps
    for _ in range(60):
        left, right = low + (high - low) / 3, high - (high - low) / 3
        if f(left) < f(right):
            low = left
        else:
            high = right
    middle = (low + high) / 2
    return Fraction(middle) if f(middle) > f(best / steps) else Fraction(best, steps)


Number = Any
"""A Fraction (exact claims) or a float (the same, for the search over ``lam``)."""


@dataclass(frozen=True)
class Claims:
    """Per op, what the subgraph it is claimed in pays for it at least (time units)."""

    compute: list[Number]
    """Per op, its base once per tile of its least grid."""
    io: list[Number]
    """Per op, the writes of its graph outputs (never retained under the reading) and,
    for a Pointwise op, its share of the loads of the graph inputs it reads (tile by tile
    over its least grid, shared by their Pointwise readers; other slices than any
    MatMul's)."""
    split: dict[int, Number]
    """Per MatMul, its operand loads in a subgraph that splits K, and its ``io``."""
    unsplit: dict[int, list[tuple[Number, Number]]]
    """Per MatMul, (compute, loads) of the subgraphs with one k-step
    (``one_step_configs``; the least compute first; empty: none fits)."""

    @classmethod
    def of(cls, g: FusionGraph) -> Claims:
        """The claims of every op of ``g``."""
        p = g.problem
        grids = Grids(g)
        bandwidth = exact(p.slow_memory_bandwidth)
        outputs = set(g.graph_outputs)
        io = [Fraction(sum(g.size(t) for t in p.outputs[q] if t in outputs), bandwidth)
              for q in range(p.num_ops)]
        for t in g.graph_inputs:
            readers = [q for q in g.consumers[t] if not g.is_matmul(q)]
            if readers:
                share = Fraction(min(g.least_grids[r].area for r in readers),
                                 len(readers) * bandwidth)
                for q in readers:
                    io[q] += share
        matmuls = [q for q in range(p.num_ops) if g.is_matmul(q)]
        return cls(
            compute=[exact(p.base_costs[q]) * grid.tiles for q, grid in enumerate(g.least_grids)],
            io=io,
            split={q: io[q] + Fraction(split_loads(g, q, grids), bandwidth) for q in matmuls},
            unsplit={q: [(exact(p.base_costs[q]) * tiles, moved / bandwidth)
                         for tiles, moved in one_step_configs(g, q, grids)] for q in matmuls})

    def bound(self, mixed: bool) -> Fraction:
        """The largest sum of ``at`` over ``lam`` in [0, 1]: a sum of concave
        piecewise-linear functions of ``lam``, searched in floating point; any ``lam``
        gives a bound, which is then summed exactly."""
        rough = self.floats()
        lam = _most(lambda x: sum(rough.at(x, mixed)))
        return sum(self.at(lam, mixed), Fraction(0))

    def floats(self) -> Claims:
        """The same claims in floating point."""
        return Claims([float(x) for x in self.compute], [float(x) for x in self.io],
                      {q: float(x) for q, x in self.split.items()},
                      {q: [(float(c), float(m)) for c, m in points]
                       for q, points in self.unsplit.items()})

    def at(self, lam: Number, mixed: bool) -> list[Number]:
        """Each Pointwise op ``lam`` of its compute and the rest of its ``io``; each MatMul
        the lesser of what a subgraph that splits K pays for it (``lam`` of its compute,
        the rest of its loads and writes) and what one with one k-step pays: its compute
        there (a Pointwise op no more than its compute either), or with ``mixed``, ``lam``
        of that compute and the rest of its loads and writes. A subgraph's latency is at
        least any mix of its compute and its traffic, so, with one mix for every subgraph
        that splits K and one for every other, it is at least the sum over its ops.
        ``lam`` a Fraction (exact) or a float (for the search)."""
        out = []
        for q, compute in enumerate(self.compute):
            if q not in self.split:
                claim = lam * compute + (1 - lam) * self.io[q]
                out.append(claim if mixed else min(claim, compute))
                continue
            claim = lam * compute + (1 - lam) * self.split[q]
            points = self.unsplit[q]
            if points and mixed:
                claim = min(claim, *(lam * c + (1 - lam) * (m + self.io[q]) for c, m in points))
            elif points:
                claim = min(claim, points[0][0])
            out.append(claim)
        return out


class Grids:
    """The least grids a MatMul's subgraph can have (``FusionGraph.least_grids_through``):
    through no other MatMul (alone under split K), one (a head's tail, or one more MatMul
    with one k-step) or any (three or more MatMuls with one k-step: ``w == k == K``, so
    only where K is within the native width)."""

    def __init__(self, g: FusionGraph):
        self.alone, self.paired = g.least_grids_through(0), g.least_grids_through(1)
        self.any = g.least_grids


def possible_roles(g: FusionGraph, q: int) -> Iterator[Role]:
    """Every role the graph leaves ``q`` in some subgraph (a superset: ``check_crossed``
    is the only rule applied): fed through an operand a MatMul makes, feeding a MatMul
    that reads its output on that side."""
    p = g.problem
    fed = [g.producer.get(t) is not None and g.is_matmul(g.producer[t]) for t in p.inputs[q]]
    out = p.outputs[q][0]
    sides = [pos for c in g.consumers[out] if g.is_matmul(c)
             for pos, t in enumerate(p.inputs[c]) if t == out]
    for lhs_in, rhs_in, lhs_out, rhs_out in product((False, True), repeat=4):
        if (lhs_in and not fed[0]) or (rhs_in and not any(fed[1:])) \
                or (lhs_out and 0 not in sides) or (rhs_out and not any(sides)) \
                or (lhs_out and rhs_out):
            continue
        yield Role(lhs_in=lhs_in, rhs_in=rhs_in, lhs_out=lhs_out, rhs_out=rhs_out)


def _paid(g: FusionGraph, q: int, role: Role, pos: int, split: bool) -> bool:
    """Whether the operand at ``pos`` is held or loaded from slow memory in every
    subgraph where ``q`` takes ``role``: not made by the chain, not possibly resident (a
    graph input, or larger than the capacity) and not possibly made by a Pointwise op there
    (a prologue; under split K only where the tile can span K: ``teamkorea.check_tile``)."""
    t = g.problem.inputs[q][pos]
    if (role.lhs_in if pos == 0 else role.rhs_in):
        return False
    if t not in g.graph_inputs and g.size(t) <= g.problem.fast_memory_capacity:
        return False
    producer = g.producer.get(t)
    if producer is None or g.is_matmul(producer):
        return True
    nw, nh, _ = g.native
    return split and g.reduction_length(q) > (nw if pos == 0 else nh)


def split_loads(g: FusionGraph, q: int, grids: Grids) -> int:
    """Elements ``q``'s operands load at least in a subgraph that splits K, the least over
    the roles allowed there (alone, head or tail of one pair). Each k-step's slices are
    new, so every tile loads its whole strips: over the grid a standalone's LHS moves its
    K times the grid's height once per tile column, its RHS K times the width once per
    tile row; a tail the same for the operand it loads; a head its streamed operand whole
    per tile and the other once per row (or column). The grid follows readers through
    no other MatMul, or a head's tail (``Grids``)."""
    nw, nh, _ = g.native
    least: int | None = None
    for role in possible_roles(g, q):
        if role.middle or (role.lhs_in and role.rhs_in):
            continue  # split K allows one head and one tail at most
        grid = (grids.paired if role.head else grids.alone)[q]
        # tiles are within the native size; a head's streamed operand moves once per tile
        tiles = (grid.tiles, 1) if role.head else \
            (ceil_div(grid.width, nw), ceil_div(grid.height, nh))
        loads = sum(_operand_loads(g, q, role, pos, grid, tiles) for pos in (0, 1)
                    if _paid(g, q, role, pos, split=True))
        least = loads if least is None else min(least, loads)
    return least or 0


def _operand_loads(g: FusionGraph, q: int, role: Role, pos: int, grid: LeastGrid,
                   tiles: tuple[int, int] = (1, 1)) -> int:
    """``teamkorea.operand_loads`` of ``q``'s operand at ``pos`` over ``grid``: a head's
    steps add up to its tail's K, the width (LHS head) or height (RHS head) of its
    output; any other's to its own K."""
    p, k = g.problem, g.reduction_length(q)
    out = p.outputs[q][0]
    reduced = {"lhs_head": p.widths[out], "rhs_head": p.heights[out]}.get(role.kind, k)
    return operand_loads(role.kind, pos == 0, (grid.width, grid.height), k, reduced, tiles)


def one_step_configs(g: FusionGraph, q: int, grids: Grids) -> list[tuple[int, Fraction]]:
    """(tiles, elements loaded) of the subgraphs with one k-step that run ``q`` and fit
    the capacity, at least, none of them doing better on both (empty if none fits).

    ``q``'s own buffers (``teamkorea.working_set``, whole K per strip; a head's streamed
    operand whole) must fit, which caps the tile. Its strips are keyed by tile row (LHS)
    or column (RHS): each row's and column's at least once, and where both are loaded every
    tile after the first changes row or column, so loads one (at least K times the
    tile's smaller side: over the grid, K times its area over the tile's larger side).
    Other MatMuls of the subgraph reading the same tensor may share those loads, so they
    count divided by the most MatMuls (anywhere in the graph) reading one of them. For one
    tile width, the tallest tile that fits has the fewest tiles and loads."""
    p = g.problem
    nw, nh, _ = g.native
    grid = (grids.any if g.reduction_length(q) <= nw else grids.paired)[q]
    capacity = exact(p.fast_memory_capacity)
    k = g.reduction_length(q)
    out = p.outputs[q][0]
    found: dict[int, Fraction] = {}  # tiles -> least loads
    for role in possible_roles(g, q):
        lhs, rhs = (_paid(g, q, role, pos, split=False) for pos in (0, 1))
        readers = max([1] + [sum(g.is_matmul(c) for c in g.consumers[p.inputs[q][pos]])
                             for pos, paid in enumerate((lhs, rhs)) if paid])
        loads = sum(_operand_loads(g, q, role, pos, grid) for pos, paid in enumerate((lhs, rhs))
                    if paid)
        per_h = per_w = fixed = 0  # buffers: per tile row of height, per column, whole
        kind = role.kind
        if kind == "lhs_head":
            per_h, fixed = lhs * k, rhs * k * p.widths[out]
        elif kind == "rhs_head":
            fixed, per_w = lhs * p.heights[out] * k, rhs * k
        else:
            per_h, per_w = lhs * k, rhs * k
        for w in range(1, nw + 1):
            room = capacity - fixed - per_w * w
            if room < per_h:
                break  # wider tiles leave less room still
            h = min(nh, int(room // per_h) if per_h else nh)
            tiles = max(grid.tiles, ceil_div(grid.width, w) * ceil_div(grid.height, h))
            moved = Fraction(loads)
            if lhs and rhs and kind not in ("lhs_head", "rhs_head"):
                moved = max(moved, strip_changes(k, grid.area, (w, h)))
            moved /= readers
            if tiles not in found or moved < found[tiles]:
                found[tiles] = moved
    front: list[tuple[int, Fraction]] = []
    for tiles in sorted(found):  # fewer tiles first: keep those that also load less
        if not front or found[tiles] < front[-1][1]:
            front.append((tiles, found[tiles]))
    return front
