"""The best granularity and traversal of one op set under the TeamKorea reading.

With ``semantics=teamkorea`` the solvers score subgraphs here instead of the SEMANTICS.md
scorer, so they search the space that reading allows: ``k`` up to a MatMul's whole K,
prologues priced like epilogues, their added chain rules. Tile sizes are those that split
the output grid evenly into a given number of tiles (``ceil(W / n)``; the fewest tiles
first, where compute is least), ``k`` the K of the chain's tail divided the same way.
Candidates are priced exactly (``teamkorea.latency``) in increasing order of a floor
(compute of every tile, writes of every output), until the floor reaches the best found.
``k`` is also halved towards 1: a head-tail MatMul pair over wide operands may fit only at
a small k (that reading charges compute by k / K, so small steps cost no more compute).
"""

from __future__ import annotations

import heapq
from fractions import Fraction
from functools import lru_cache

from solver.deadline import now
from solver.fusion import teamkorea
from solver.fusion.context import ScoringContext, ScoringTimeout
from solver.fusion.problem import FusionGraph, ceil_div, exact
from solver.fusion.simulate import NAMED_ORDERS, TraversalName

TRAVERSALS: tuple[TraversalName, ...] = ("raster", "snake", "column", "column_snake")
SPLITS = 8
"""Tile counts tried per axis (the fewest that fit native, a few more, then up to this many
doublings) and k = K / n for n up to it."""

Found = tuple[tuple[int, int, int], TraversalName, Fraction, int]
"""(granularity, traversal name, latency, working set)."""


def splits(extent: int, most: int) -> list[int]:
    """Tile sizes ``ceil(extent / n)`` no larger than ``most``, fewest tiles first."""
    first = ceil_div(extent, most)
    counts = [first, first + 1, first + 2, first + 3]
    while counts[-1] < extent and len(counts) < SPLITS + 4:
        counts.append(counts[-1] * 2)
    sizes = dict.fromkeys(ceil_div(extent, n) for n in counts if n <= extent)
    return list(sizes) or [extent]


def even(extent: int, size: int) -> int:
    """The smallest tile size that splits ``extent`` into as few tiles as ``size`` does."""
    return ceil_div(extent, ceil_div(extent, size))


class _WorkingSet:
    """The working set at one k as a function of the tile: bilinear in (w, h), so four
    evaluations give it everywhere."""

    def __init__(self, g: FusionGraph, sg: teamkorea.Subgraph, k: int,
                 resident: frozenset[int]):
        def at(w: int, h: int) -> int:
            return teamkorea.working_set(g, sg, (w, h, k), resident)

        self.fixed = at(0, 0)
        self.per_w = at(1, 0) - self.fixed
        self.per_h = at(0, 1) - self.fixed
        self.per_area = at(1, 1) - self.fixed - self.per_w - self.per_h

    def __call__(self, w: int, h: int) -> int:
        return self.fixed + self.per_w * w + self.per_h * h + self.per_area * w * h

    def widest(self, capacity: Fraction, most: int, h: int | None = None,
               w: int | None = None) -> int:
        """The largest free side <= ``most`` that fits with the other side given (0 if
        none)."""
        fixed = self.fixed + (self.per_h * h if h is not None else self.per_w * (w or 0))
        slope = (self.per_w if h is not None else self.per_h) + self.per_area * (h or w or 0)
        if fixed + slope > capacity:
            return 0
        return most if slope == 0 else min(most, int((capacity - fixed) // slope))


def candidates(ctx: ScoringContext, sg: teamkorea.Subgraph, grid: tuple[int, int],
               resident: frozenset[int]) -> list[tuple[tuple[int, int, int], int]]:
    """(granularity, working set) of the legal ones that fit and are worth pricing: for
    each allowed k and each of the ``splits`` of one axis, the widest even split of the
    other axis that still fits (fewer tiles cost less compute and never more traffic).
    Below ``K / SPLITS``, k is halved only while the largest tile does not fit (a smaller
    k fits no larger tile), and a halved k adds only tiles no larger k fits."""
    nw, nh, _ = ctx.graph.native
    axes = (splits(grid[0], nw), splits(grid[1], nh))
    depths = [1]
    if sg.matmuls:
        depths = [ceil_div(sg.slicing_k, n) for n in range(1, SPLITS + 1)]
        if sg.slicing_k <= nw:
            axes[0].append(sg.slicing_k)  # 3+ MatMul chains need w == k == K
    found: dict[tuple[int, int, int], int] = {}
    for k in dict.fromkeys(depths):
        largest_fits = _add_tiles(ctx, sg, grid, resident, k, axes, found)
    k = depths[-1]
    tried = {(w, h) for w, h, _ in found}
    while k > 1 and largest_fits is False:  # None: split K refused, at every smaller k too
        k = ceil_div(k, 2)
        smaller: dict[tuple[int, int, int], int] = {}
        largest_fits = _add_tiles(ctx, sg, grid, resident, k, axes, smaller)
        for (w, h, _), ws in smaller.items():  # only tiles no larger k fits
            if (w, h) not in tried:
                tried.add((w, h))
                found[(w, h, k)] = ws
    return list(found.items())


def _add_tiles(ctx: ScoringContext, sg: teamkorea.Subgraph, grid: tuple[int, int],
               resident: frozenset[int], k: int, axes: tuple[list[int], list[int]],
               found: dict[tuple[int, int, int], int]) -> bool | None:
    """Adds the candidates at ``k`` to ``found``; whether the largest tile fits there, None
    when the reading refuses ``k``."""
    try:
        teamkorea.check_depth(sg, k)
    except teamkorea.Rejected:
        return None
    g = ctx.graph
    nw, nh, _ = g.native
    capacity = exact(g.problem.fast_memory_capacity)
    ws = _WorkingSet(g, sg, k, resident)
    tiles: set[tuple[int, int]] = set()
    for w in axes[0]:
        if top := ws.widest(capacity, min(nh, grid[1]), w=w):
            tiles.add((w, even(grid[1], top)))
    for h in axes[1]:
        if top := ws.widest(capacity, min(nw, grid[0]), h=h):
            tiles.add((even(grid[0], top), h))
    for w, h in tiles:
        if ws(w, h) <= capacity and _tile_allowed(sg, (w, h, k)):
            found[(w, h, k)] = ws(w, h)
    return ws(min(nw, grid[0]), min(nh, grid[1])) <= capacity


def _tile_allowed(sg: teamkorea.Subgraph, gran: tuple[int, int, int]) -> bool:
    try:
        teamkorea.check_tile(sg, gran)
    except teamkorea.Rejected:
        return False
    return True


def _least_traffic(g: FusionGraph, sg: teamkorea.Subgraph, grid: tuple[int, int],
                   resident: frozenset[int]) -> int:
    """Elements any configuration moves: every output written once, and every input read
    at least once whole (a MatMul operand) or over the output grid (a Pointwise input)."""
    p = g.problem
    least: dict[int, int] = {}
    for q in sg.ops:
        for t in p.inputs[q]:
            if t in resident or t in sg.ephemerals:
                continue
            whole = g.size(t) if g.is_matmul(q) else grid[0] * grid[1]
            least[t] = min(least.get(t, whole), whole)
    return sum(least.values()) + len(sg.written) * grid[0] * grid[1]


@lru_cache(maxsize=4096)
def order_kinds(tile: tuple[int, int], grid: tuple[int, int], name: TraversalName
                ) -> teamkorea.TileKinds:
    """``teamkorea.tile_kinds`` of a named traversal, kept: the same for every op set of one
    grid, and sorting the tiles of each candidate again took more than half of a greedy
    solve's time (the 21-op ``gen-attention-04``)."""
    order = NAMED_ORDERS[name](ceil_div(grid[1], tile[1]), ceil_div(grid[0], tile[0]))
    return teamkorea.tile_kinds(tile, grid, order)


def best(ctx: ScoringContext, ops: tuple[int, ...], resident: frozenset[int],
         kept: frozenset[int]) -> Found | None:
    """The lowest-latency legal configuration that fits, or None; ties go to the candidate
    met first (fewest tiles, then largest k, then widest)."""
    g = ctx.graph
    sg = teamkorea.Subgraph(g, ops, kept)
    try:
        grid = teamkorea.subgraph_grid(g, sg)
        teamkorea.check_crossed(sg)
    except teamkorea.Rejected:
        return None
    per_tile = sum((exact(g.problem.base_costs[q]) for q in ops), Fraction(0))
    traffic = _least_traffic(g, sg, grid, resident) / exact(g.problem.slow_memory_bandwidth)
    waiting = [(ceil_div(grid[0], w) * ceil_div(grid[1], h), -k, -w, (w, h, k), ws)
               for (w, h, k), ws in candidates(ctx, sg, grid, resident)]
    heapq.heapify(waiting)  # fewest tiles first: the floor max(tiles x compute, traffic)
    found: Found | None = None
    while waiting and (found is None or max(waiting[0][0] * per_tile, traffic) < found[2]):
        if ctx.deadline is not None and now() > ctx.deadline:
            raise ScoringTimeout
        *_, gran, ws = heapq.heappop(waiting)
        orders: dict[teamkorea.TileKinds, TraversalName] = {}
        for name in TRAVERSALS:  # orders alike in their tile classes cost alike: once each
            orders.setdefault(order_kinds(gran[:2], grid, name), name)
        for kinds, name in orders.items():
            latency = teamkorea.latency(g, sg, gran, kinds, resident, grid)
            if found is None or latency < found[2]:
                found = (gran, name, latency, ws)
    return found
