"""The best granularity and traversal of one op set under the TeamKorea reading.

With ``semantics=teamkorea`` the solvers score subgraphs here instead of the SEMANTICS.md
scorer, so they search the space that reading allows: ``k`` up to a MatMul's whole K,
prologues priced like epilogues, their added chain rules. Tile sizes are those that split
the output grid evenly into a given number of tiles (``ceil(W / n)``; the fewest tiles
first, where compute is least), ``k`` the K of the chain's tail divided the same way.
Candidates are priced exactly (``teamkorea.latency``) in increasing order of a floor
(compute of every tile; the least loads, what a tile's MatMul strips reload and every
output's writes over the bandwidth), until the floor passes the best found.
``k`` is also halved towards 1: a head-tail MatMul pair over wide operands may fit only at
a small k (that reading charges compute by k / K, so small steps cost no more compute).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import pairwise

from solver.deadline import now
from solver.fusion import teamkorea
from solver.fusion.context import ScoringContext, ScoringTimeout
from solver.fusion.problem import FusionGraph, ceil_div, exact
from solver.fusion.simulate import TraversalName

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


def _least_loads(sg: teamkorea.Subgraph, grid: tuple[int, int],
                 resident: frozenset[int]) -> dict[int, int]:
    """Elements each input moves under any tile, ``k`` and order, as ``teamkorea._operand``
    slices it over the subgraph's grid, which may be narrower than a MatMul's own output
    (a MatMul read through a Pointwise op by a narrower one computes only the grid's
    columns): per tensor the largest of its reads (one slice is cached per tensor, so
    reads alike share their loads)."""
    least: dict[int, int] = {}
    for q in sg.ops:
        for pos, t in enumerate(sg.g.problem.inputs[q]):
            if t not in resident and t not in sg.ephemerals:
                least[t] = max(least.get(t, 0), _least_read(sg, q, pos == 0, grid))
    return least


def _least_read(sg: teamkorea.Subgraph, q: int, lhs: bool, grid: tuple[int, int]) -> int:
    """Elements one read of op ``q`` moves at least: every slice once
    (``teamkorea.operand_loads``; a Pointwise input every grid cell once, an operand from
    the chain nothing)."""
    role = sg.roles.get(q)
    if role is None:
        return grid[0] * grid[1]
    return teamkorea.operand_loads(role.kind, lhs, grid, sg.k_of(q), sg.reduced_over(q))


def reloads(sg: teamkorea.Subgraph, gran: tuple[int, int, int], grid: tuple[int, int],
            resident: frozenset[int], least: dict[int, int]) -> int:
    """Elements the subgraph moves at ``gran`` beyond its ``least`` loads (per input), as
    ``teamkorea._operand`` keys the slices: ``_split_reloads`` where ``k`` splits the K it
    slices, else ``_one_step_reloads``."""
    if sg.k_steps(gran[2]) > 1:
        return sum(max(0, moved - least.get(t, 0))
                   for t, moved in _split_reloads(sg, gran, grid, resident).items())
    return _one_step_reloads(sg, gran, grid, resident, least)


def _split_reloads(sg: teamkorea.Subgraph, gran: tuple[int, int, int], grid: tuple[int, int],
                   resident: frozenset[int]) -> dict[int, int]:
    """Elements each MatMul operand moves at least under split K, where every tile loads
    its strips again (``teamkorea.operand_loads`` over the tile columns and rows). Two
    reads of one tensor use different slice keys, so the larger counts. (A head's held
    strip moves what its least read does, so it reloads nothing.)"""
    g, (w, h, _) = sg.g, gran
    tiles = ceil_div(grid[0], w), ceil_div(grid[1], h)
    found: dict[int, int] = {}
    for q in sg.matmuls:
        for pos, t in enumerate(g.problem.inputs[q][:2]):
            if t not in resident and t not in sg.ephemerals:
                moved = teamkorea.operand_loads(sg.roles[q].kind, pos == 0, grid, sg.k_of(q),
                                                sg.reduced_over(q), tiles)
                found[t] = max(found.get(t, 0), moved)
    return found


def _one_step_reloads(sg: teamkorea.Subgraph, gran: tuple[int, int, int],
                      grid: tuple[int, int], resident: frozenset[int],
                      least: dict[int, int]) -> int:
    """With one k-step a standalone MatMul with both operands loaded moves at least
    ``teamkorea.strip_changes`` of them together, past their least loads. MatMuls may
    share an operand's slices, so the largest excess of one MatMul counts."""
    g, (w, h, _) = sg.g, gran
    most = 0
    for q in sg.matmuls:
        if not sg.roles[q].standalone:
            continue
        lhs, rhs = g.problem.inputs[q][:2]
        if any(t in resident or t in sg.ephemerals for t in (lhs, rhs)):
            continue
        moved = int(teamkorea.strip_changes(sg.k_of(q), grid[0] * grid[1], (w, h)))
        paid = least.get(lhs, 0) + (least.get(rhs, 0) if rhs != lhs else 0)
        most = max(most, moved - paid)
    return most


@lru_cache(maxsize=4096)
def order_kinds(tile: tuple[int, int], grid: tuple[int, int], name: TraversalName
                ) -> teamkorea.TileKinds:
    """``teamkorea.tile_kinds`` of a named traversal (the same classes, in the same order),
    kept: the same for every op set of one grid, and sorting the tiles of each candidate
    again took more than half of a greedy solve's time (the 21-op ``gen-attention-04``).
    Worked out run by run, not tile by tile: a named order walks rows (or columns)
    straight, and past a run's first tile its tiles differ only in their extent along the
    run, which changes at the grid's last column (row) alone. Walking the tiles of a
    4,096 x 4,096 grid in 11 x 8 tiles (190,976) took 0.09 s per order, one op set's
    scoring 0.4 s, past its deadline."""
    columns, rows = ceil_div(grid[0], tile[0]), ceil_div(grid[1], tile[1])
    counts: dict[tuple[int, int, bool, bool, bool], list] = {}  # kind -> [prior, first, n]
    before = (-1, -1)
    for run in _runs(name, rows, columns):
        length = len(run.walked)
        cut = run.walked.index(columns - 1 if run.along_row else rows - 1)
        bounds = sorted({0, 1, cut, cut + 1, length})
        for start, stop in pairwise(bounds):  # the tiles from start to stop load alike
            prior = before if start == 0 else run.place(start - 1)
            row, col = run.place(start)
            kind = (min(tile[0], grid[0] - col * tile[0]), min(tile[1], grid[1] - row * tile[1]),
                    prior[0] < 0, prior[0] == row, prior[1] == col)
            if kind not in counts:
                counts[kind] = [None if prior[0] < 0 else prior, (row, col), 0]
            counts[kind][2] += stop - start
        before = run.place(length - 1)
    return tuple((prior, at, n) for prior, at, n in counts.values())


@dataclass(frozen=True)
class _Run:
    """A straight run of a named order: along a row (or a column), which one, and the
    columns (rows) it walks, in order."""

    along_row: bool
    fixed: int
    walked: range

    def place(self, j: int) -> tuple[int, int]:
        """(row, column) of the run's ``j``-th tile."""
        return (self.fixed, self.walked[j]) if self.along_row else (self.walked[j], self.fixed)


def _runs(name: TraversalName, rows: int, columns: int) -> Iterator[_Run]:
    """The straight runs of a named order (``simulate.NAMED_ORDERS``), in order."""
    if name in ("raster", "snake"):
        for row in range(rows):
            back = name == "snake" and row % 2 == 1
            yield _Run(True, row, range(columns - 1, -1, -1) if back else range(columns))
    elif name in ("column", "column_snake"):
        for col in range(columns):
            back = name == "column_snake" and col % 2 == 1
            yield _Run(False, col, range(rows - 1, -1, -1) if back else range(rows))
    else:
        raise ValueError(f"no runs known for the order {name!r}")


class Floor:
    """What an op set costs at least at a granularity, whatever the traversal: the compute of
    every tile, or what moves (its ``_least_loads``, the ``reloads`` of its MatMul strips,
    every output written) over the bandwidth; in integer units of 1 / ``scale`` time units
    (the search compares thousands of them)."""

    def __init__(self, sg: teamkorea.Subgraph, grid: tuple[int, int],
                 resident: frozenset[int]):
        p = sg.g.problem
        self.sg, self.grid, self.resident = sg, grid, resident
        per_tile = sum((exact(p.base_costs[q]) for q in sg.ops), Fraction(0))
        bandwidth = exact(p.slow_memory_bandwidth)
        self.scale = bandwidth.numerator * per_tile.denominator
        self.per_tile = int(per_tile * self.scale)
        self.per_element = bandwidth.denominator * per_tile.denominator
        self.least = _least_loads(sg, grid, resident)
        self.traffic = sum(self.least.values()) + len(sg.written) * grid[0] * grid[1]

    def tiles(self, gran: tuple[int, int, int]) -> int:
        return ceil_div(self.grid[0], gran[0]) * ceil_div(self.grid[1], gran[1])

    def compute(self, gran: tuple[int, int, int]) -> int:
        """Of every tile, at most the floor."""
        return self.tiles(gran) * self.per_tile

    def __call__(self, gran: tuple[int, int, int]) -> int:
        moved = self.traffic + reloads(self.sg, gran, self.grid, self.resident, self.least)
        return max(self.compute(gran), moved * self.per_element)


def best(ctx: ScoringContext, ops: tuple[int, ...], resident: frozenset[int],
         kept: frozenset[int], first: bool = False) -> Found | None:
    """The lowest-latency legal configuration that fits, or None; ties go to the fewest
    tiles, then the largest k, the widest, the lowest, then the first of ``TRAVERSALS``.
    Candidates are priced in increasing order of their ``Floor``, which sees what a tile's
    strips reload, until the floor passes the best. With ``first``, the fastest traversal
    of the first candidate priced: a good tile in a few simulations, for a schedule wanted
    before the time runs out."""
    g = ctx.graph
    sg = teamkorea.Subgraph(g, ops, kept)
    try:
        grid = teamkorea.subgraph_grid(g, sg)
        teamkorea.check_crossed(sg)
    except teamkorea.Rejected:
        return None
    floor = Floor(sg, grid, resident)
    # least floor first, each candidate's reloads counted only once it reaches the top (the
    # compute of its tiles is below its floor): most are never priced, and working out every
    # candidate's reloads cost Pointwise-heavy op sets more than pricing (benchmark 17)
    waiting = [(floor.compute(gran), (floor.tiles(gran), -gran[2], -gran[0], gran), False, ws)
               for gran, ws in candidates(ctx, sg, grid, resident)]
    heapq.heapify(waiting)
    found: Found | None = None
    leader: tuple = ()  # (latency in the floor's units, rank, traversal) of the best found
    # a candidate whose (floor, rank) passes the best's (latency, rank) cannot beat it
    while waiting and (found is None or not first and waiting[0][:2] < leader[:2]):
        _, rank, counted, ws = heapq.heappop(waiting)
        gran = rank[-1]
        if not counted:
            heapq.heappush(waiting, (floor(gran), rank, True, ws))
            continue
        if ctx.deadline is not None and now() > ctx.deadline:
            raise ScoringTimeout
        orders: dict[teamkorea.TileKinds, TraversalName] = {}
        for name in TRAVERSALS:  # orders alike in their tile classes cost alike: once each
            orders.setdefault(order_kinds(gran[:2], grid, name), name)
        for position, (kinds, name) in enumerate(orders.items()):
            latency = teamkorea.latency(g, sg, gran, kinds, resident, grid)
            if found is None or (latency * floor.scale, rank, position) < leader:
                found, leader = (gran, name, latency, ws), (latency * floor.scale, rank, position)
    return found
