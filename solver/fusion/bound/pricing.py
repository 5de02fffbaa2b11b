"""What one connected op set costs at the least, for every arrival (``price``).

A subgraph runs a connected op set with some tensors resident from the previous subgraph
and some outputs kept for the next (an *arrival*). For each arrival, the least latency any
granularity and traversal can give is bounded from below: all integers ``1..native`` on each
axis that S6.4 allows, not only the tiles the search tries. Each axis is cut into single
values (powers of two, the cap, every extent of the op set, where specs change) and the
open ranges between them; cells are searched best first and split where they hold the
least floor (``least``). A single-value cell is priced exactly per step
(``floors.any_order_floor``) and checked against the capacity at every step
(``floors.peak_fits``); a range at its favourable ends: counts and traffic at the largest
values (they only fall as tiles grow), working set at the smallest (within a cell, which
stops short of every extent and root depth, it only grows).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import floor as floor_int

from solver.deadline import charge, now
from solver.fusion.closed_form import Granularity, templates_of
from solver.fusion.context import ScoringContext
from solver.fusion.floors import (
    any_order_floor,
    first_step_terms,
    held_in_first_step,
    kept_in_first_step,
    least_first_step,
    least_first_step_terms,
    load_floor,
    op_set_compute,
    peak_fits,
    tile_compute_table,
)
from solver.fusion.problem import SubgraphShape, prologue_feeds
from solver.fusion.twins import floor_signature

QUICK_SPLITS = 16
"""Range cells split at most, per op set and arrival, before the least floor stands, for
every op set (``cover.REFINE_FACTOR`` times more for each refinement)."""
FIRST_STEP_S, FLOOR_S, PEAK_S, OP_SET_S = 5e-6, 1e-5, 5.6e-5, 1.1e-3
"""Deterministic seconds charged to a deterministic solve's work clock per first step
checked against the capacity, per cell floor, per single value checked at its peak and per
op set priced. Fitted to the wall time of pricing the op sets of every public benchmark in
both modes (reference machine, one core): within 0.6-1.7x of it on each, but for 7
``per_native_k`` (3.9x, of 0.15 s). A clock tick per op set priced, as before, charged 13
``per_op`` a seventeenth of its 26 ms an op set, and its deterministic solves ran into the
wall-clock backstop at 30 s."""


@dataclass
class FirstSteps:
    """First steps' terms (output tiles, and what each tensor adds) shared by the arrivals
    of one op set: ``floors.first_step_terms`` by granularity, and their least over every
    k at a w x h (``floors.least_first_step_terms``) by (w, h)."""

    at: dict[Granularity, tuple[int, dict[int, int]]] = field(default_factory=dict)
    least_at: dict[tuple[int, int], tuple[int, dict[int, int]]] = field(default_factory=dict)


MAX_ARRIVALS = 16
"""Resident-input and retained-output choices that fit the capacity priced one by one per
op set; beyond it one relaxed price stands for all of them."""
MOST_LEAVES = 4096
"""Choices walked at most in search of the most a relaxed arrival's tensors can hold
(``_most_within``); past it the capacity stands for that."""


@dataclass(frozen=True)
class Priced:
    """A connected op set run with ``resident`` inputs and ``kept`` outputs, at the least
    latency (``units``, in the context's unit) any schedule can give it. A ``relaxed`` one
    stands for every arrival at once: it may keep or write any output, loads nothing
    produced elsewhere but pays for what cannot all be resident or kept together
    (``_unavoidable``), and holds of each input made elsewhere the lesser of its first
    steps' slices and its size (what any arrival holds)."""

    ops: tuple[int, ...]
    resident: frozenset[int]
    kept: frozenset[int]
    units: int
    relaxed: bool = False
    exact: bool = True
    """The least floor over single granularities; else a range's floor, below it."""
    splits: int = QUICK_SPLITS
    """The split budget it was priced with."""
    first_tile: bool = False
    """Priced with a traversal's first tile entered with nothing present
    (``floors.any_order_floor``); else every tile as if entered from a neighbour."""


def price(ctx: ScoringContext, ops: tuple[int, ...], splits: int) -> list[Priced]:
    """Every arrival of ``ops`` that some granularity fits, at its least latency (found
    with at most ``splits`` range splits each)."""
    shape = ctx.shape(ops)
    made_elsewhere = [t for t in shape.inputs if t not in ctx.graph.graph_inputs]
    keepable = [*shape.outputs, *read_elsewhere(ctx, shape)]
    arrivals = _arrivals(ctx, made_elsewhere, keepable)
    everything = (frozenset(made_elsewhere), frozenset(keepable), True)
    charge(OP_SET_S)
    out = []
    terms = FirstSteps()  # every arrival checks the same first steps
    for resident, kept, relaxed in [everything] if arrivals is None else \
            [(resident, kept, False) for resident, kept in arrivals]:
        found = least_once(ctx, shape, resident, kept, relaxed, splits, terms=terms)
        if found is not None:
            out.append(Priced(ops, resident, kept, found[0], relaxed, found[1]))
    return out


def read_elsewhere(ctx: ScoringContext, shape: SubgraphShape) -> list[int]:
    """The ephemerals of ``shape`` that an op outside it reads: worth retaining (S5.3),
    at their full size in every step (S12)."""
    return [t for t in shape.ephemerals
            if any(c not in shape.ops for c in ctx.graph.consumers[t])]


def _arrivals(ctx: ScoringContext, made_elsewhere: Sequence[int], outputs: Sequence[int]
              ) -> list[tuple[frozenset[int], frozenset[int]]] | None:
    """Every (resident inputs, retained outputs and ephemerals) whose tensors fit the
    capacity together (resident ones are held throughout; retained ones, under the
    accumulate rule, whole in the last step or, for ephemerals, in every step), None if
    more than ``MAX_ARRIVALS`` do."""
    size = ctx.graph.size
    held_when_kept = ctx.rules.retained_output_ws == "accumulate"
    items = [(t, True) for t in made_elsewhere] + [(t, False) for t in outputs]
    found: list[tuple[frozenset[int], frozenset[int]]] = []

    def extend(i: int, held: int, resident: frozenset[int], kept: frozenset[int]) -> bool:
        """Appends every fitting extension of the choice so far; False past the limit."""
        if i == len(items):
            found.append((resident, kept))
            return len(found) <= MAX_ARRIVALS
        if not extend(i + 1, held, resident, kept):
            return False
        t, is_input = items[i]
        more = held + (size(t) if is_input or held_when_kept else 0)
        if more > ctx.capacity:
            return True
        return extend(i + 1, more, resident | {t}, kept) if is_input \
            else extend(i + 1, more, resident, kept | {t})

    return found if extend(0, 0, frozenset(), frozenset()) else None


def _unavoidable(ctx: ScoringContext, resident: frozenset[int], kept: frozenset[int]) -> int:
    """Elements that every arrival within a relaxed one (``Priced``) loads or writes beyond
    it: its resident tensors not resident there are loaded whole at least once
    (``floors.load_floor``), its kept ones not kept there are written, and an arrival
    holds only what fits the capacity (``_arrivals``). Without it a 19-op fork-join's op
    set with room for two of its seven 128 x 128 inputs and outputs had loaded none of
    five."""
    size = ctx.graph.size
    held_when_kept = ctx.rules.retained_output_ws == "accumulate"
    weighed = sorted([size(t) for t in resident] +
                     [size(t) for t in kept if held_when_kept], reverse=True)
    return sum(weighed) - _most_within(weighed, floor_int(ctx.capacity))


def _most_within(sizes: Sequence[int], room: int) -> int:
    """The largest sum of some of ``sizes`` (largest first) within ``room``: exact, or
    ``room`` itself after ``MOST_LEAVES`` choices walked (still at least the largest)."""
    best, walked = 0, 0
    rest = [sum(sizes[i:]) for i in range(len(sizes) + 1)]

    def walk(i: int, held: int) -> bool:
        """Raises ``best`` from the choice so far; False once the walk is cut short."""
        nonlocal best, walked
        best = max(best, held)
        if i == len(sizes) or held + rest[i] <= best or best == room:
            return True
        walked += 1
        if walked > MOST_LEAVES:
            return False
        if held + sizes[i] <= room and not walk(i + 1, held + sizes[i]):
            return False
        return walk(i + 1, held)

    return best if walk(0, 0) else min(room, rest[0])


def least_once(ctx: ScoringContext, shape: SubgraphShape, resident: frozenset[int],
               kept: frozenset[int], relaxed: bool, splits: int, deadline: float | None = None,
               terms: FirstSteps | None = None, first_tile: bool = False
               ) -> tuple[int, bool] | None:
    """``least``, found once for all twins (``twins.floor_signature``; memoized in ``ctx``).
    Repeated layers make most op sets of a large graph twins of others: three quarters of
    the arrivals priced on benchmarks 13 and 17. One cut short by ``deadline`` stands for
    its twins as well: still a floor of each."""
    key = (floor_signature(ctx, shape, resident, kept), relaxed, splits, first_tile)
    return ctx.memo("least like", key, lambda: least(
        ctx, shape, resident, kept, relaxed, splits, deadline, terms, first_tile))


Cell = tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
"""``[lo, hi]`` ranges of w, h and k."""


def least(ctx: ScoringContext, shape: SubgraphShape, resident: frozenset[int],
           kept: frozenset[int], relaxed: bool, splits: int, deadline: float | None = None,
           terms: FirstSteps | None = None, first_tile: bool = False,
           price_at: Callable[[Granularity], int | None] | None = None,
           below: int | None = None) -> tuple[int, bool] | None:
    """The least latency over every granularity that may fit and whether it is exact (not
    a range's floor), None if none can.

    Best first: cells wait in a heap under a floor (the starting ones in groups of every
    depth, first under their tile compute, then also under the loads of their largest
    values; then each cell under its priced floor, then, for single values, the exact
    per-step floor); the cheapest is cut into its cells (a group), priced, split in two
    along its widest range, or, once exact, is the answer, since
    every other cell's floor is at least as high. A range is priced at its favourable
    ends, so a wide one can look cheaper than any value in it; splitting removes that.
    Past ``splits`` splits or ``deadline`` the heap's least floor is returned (still a
    bound). The work is charged to the running solve's clock (``FIRST_STEP_S``).
    ``terms``: the first steps' terms found so far for this op set (other arrivals').
    ``first_tile``: a single value's exact price counts a traversal's first tile entered
    with nothing present. It raises exact prices above the floors of the cells around
    them, so more cells are walked before one is found (2.5 times the single values on
    ``gen-attention-09``): the cover asks it only of the prices its optimum picks.
    ``price_at``: what a single value that may fit costs in place of that floor (at least
    it; None drops the value): the search asks the latency of its best named traversal
    that fits, and gets the fastest of every granularity (``retile``). With
    ``below``, None as soon as the least waiting is not below it (the search asks only for
    something faster than the config it has)."""
    size = ctx.graph.size
    held = 0 if relaxed else sum(size(t) for t in resident)
    # a relaxed arrival loads none of its resident tensors, but each may be resident or
    # not: its first steps hold the lesser of its slices and its size
    either = {t: size(t) for t in resident} if relaxed else None
    ws_resident = frozenset() if relaxed else resident
    if not relaxed and ctx.rules.retained_output_ws == "accumulate":
        # in its last step a subgraph holds every output it retains, whole
        if held + sum(size(t) for t in kept) > ctx.capacity:
            return None
    ws_kept = frozenset() if relaxed else kept
    written = sum(size(t) for t in shape.outputs if t not in kept)
    if relaxed:  # what its resident and kept tensors cannot all avoid: they share the room
        written += _unavoidable(ctx, resident, kept & frozenset(shape.outputs))
    written *= ctx.per_element
    templates = templates_of(ctx, shape.ops)
    spatial, depths, compute_of, feeds = _cells(ctx, shape)

    room = floor_int(ctx.capacity) - held  # working sets are whole elements
    first_room = room - kept_in_first_step(ctx, templates, ws_kept)
    fitting: dict[Granularity, bool] = {}
    shared = FirstSteps() if terms is None else terms

    def fits(w: int, h: int, k: int) -> bool:
        """Whether a first step at these values may fit (``floors.first_step_floor``;
        cells share corners: memoized)."""
        gran = (w, h, k)
        found = fitting.get(gran)
        if found is None:
            if gran not in shared.at:
                shared.at[gran] = first_step_terms(ctx, templates, gran)
            found = fitting[gran] = \
                held_in_first_step(shared.at[gran], ws_resident, either) <= first_room
        return found

    def any_depth_fits(w: int, h: int) -> bool:
        """Whether a first step at w x h and some k may fit (``least_first_step_terms``)."""
        nonlocal least_at
        if (w, h) not in shared.least_at:
            least_at += 1
            shared.least_at[w, h] = least_first_step_terms(ctx, templates, (w, h))
        return held_in_first_step(shared.least_at[w, h], ws_resident, either) <= first_room

    floors = peaks = least_at = 0  # the work done, besides first steps checked (``fitting``)

    def floor(cell: Cell) -> tuple[int, Cell] | None:
        """The cell's floor and the cell cut to the values whose first step may fit (within
        a cell the working set grows on every axis: its ranges stop short of every extent and
        root depth, where slices merge), None if none does or S6.4 rules all out."""
        nonlocal floors
        floors += 1
        (w0, w1), (h0, h1), (k0, k1) = cell
        if not _allowed(cell, feeds) or not fits(w0, h0, k0):
            return None
        if not fits(w1, h1, k1):
            bounds = [w1, h1, k1]
            for axis in range(3):
                lo, hi = cell[axis]
                least = [w0, h0, k0]
                while lo < hi:
                    least[axis] = mid = (lo + hi + 1) // 2
                    lo, hi = (mid, hi) if fits(*least) else (lo, mid - 1)
                bounds[axis] = hi
            w1, h1, k1 = bounds
            cell = ((w0, w1), (h0, h1), (k0, k1))
            if not _allowed(cell, feeds):
                return None
        return max(compute_of((w1, h1, k1), k0),
                   load_floor(ctx, templates, (w1, h1, k1), resident) * ctx.per_element
                   + written), cell

    # at equal floors the exact one pops first, then groups (as starting cells joined the
    # heap before its least was split: else a split budget may run out on a tie)
    EXACT, GROUP, LOADED, PRICED = range(4)
    # a group: one spatial cell at every depth, under its tile compute, then (LOADED) also
    # under the loads of its largest values; its depth cells are priced only when it pops
    heap: list[tuple[int, int, tuple]] = [(units, GROUP, (w, h)) for units, w, h in spatial]
    try:
        if not fits(1, 1, 1) and \
                least_first_step(ctx, templates, ws_resident, ws_kept, either) > room:
            return None  # no granularity's first step fits: no cell walked
        while heap:
            units, stage, cell = heapq.heappop(heap)
            if below is not None and units >= below:
                return None  # nothing waiting can be below it
            if stage == EXACT:
                return units, True
            if stage == GROUP:
                (w0, w1), (h0, h1) = cell
                # the least w x h of the group at k = 1 (its first cell checks it anyway),
                # else at its least over every k
                if not fits(w0, h0, 1) and not any_depth_fits(w0, h0):
                    continue
                floors += 1
                loads = load_floor(ctx, templates, (w1, h1, depths[-1][1]), resident) \
                    * ctx.per_element + written
                if loads > units:
                    heapq.heappush(heap, (loads, LOADED, cell))
                    continue
            if stage in (GROUP, LOADED):
                for k in depths:
                    if (priced := floor((*cell, k))) is not None:
                        heapq.heappush(heap, (priced[0], PRICED, priced[1]))
                continue
            widest = max(range(3), key=lambda axis: cell[axis][1] - cell[axis][0])
            lo, hi = cell[widest]
            if lo == hi:
                gran = (cell[0][0], cell[1][0], cell[2][0])
                peaks += 1
                if peak_fits(ctx, shape.ops, gran, resident, ws_kept, room):
                    exact = price_at(gran) if price_at is not None else \
                        any_order_floor(ctx, shape.ops, gran, resident, kept, first_tile) or 0
                    if exact is not None:
                        heapq.heappush(heap, (max(units, exact), EXACT, cell))
                continue
            if splits == 0 or (deadline is not None and now() > deadline):
                return units, False
            splits -= 1
            mid = (lo + hi) // 2
            for half in ((lo, mid), (mid + 1, hi)):
                part = (*cell[:widest], half, *cell[widest + 1:])
                if (priced := floor(part)) is not None:  # type: ignore[arg-type]
                    heapq.heappush(heap, (priced[0], PRICED, priced[1]))
        return None
    finally:
        charge((len(fitting) + 4 * least_at) * FIRST_STEP_S + floors * FLOOR_S
               + peaks * PEAK_S)


Feeds = list[tuple[int, int]]
"""(K, axis) of every root operand S6.4 constrains: axis 0 (w) for an LHS, 1 (h) for an RHS."""


def _allowed(cell: Cell, feeds: Feeds) -> bool:
    """S6.4: a split-K root fed by a Pointwise op of the set needs w (LHS) or h (RHS) >= K;
    whether some value of the cell may meet it."""
    return not any(cell[2][1] < big_k and cell[axis][1] < big_k for big_k, axis in feeds)


Spatial = list[tuple[int, tuple[int, int], tuple[int, int]]]
Cells = tuple[Spatial, list[tuple[int, int]], Callable[[Granularity, int], int], Feeds]


def _cells(ctx: ScoringContext, shape: SubgraphShape) -> Cells:
    """The starting cells of an op set (memoized): ranges of w and h with the tile compute
    of their ops at their largest values, cheapest first, ranges of k, the compute floor of
    any cell (given its largest values and least k) and the set's ``Feeds``. Their products
    cover every w <= nw, h <= nh and k <= min(nk, every K) (S9, S2.5); k is one value for
    a Pointwise-only set (S9: ignored). Each axis is cut at its powers of two, cap and
    extents (``axis_cells``)."""

    def make() -> Cells:
        p, g = ctx.problem, ctx.graph
        tensors = shape.consumed | shape.produced
        cuts = {p.heights[t] for t in tensors} | {p.widths[t] for t in tensors}
        matmuls = [q for q in shape.ops if g.is_matmul(q)]
        cuts |= {g.reduction_length(q) for q in matmuls}
        deepest = min([ctx.nk] + [g.reduction_length(q) for q in matmuls])
        depths = axis_cells(deepest, cuts) if matmuls else [(1, 1)]
        feeds = [(g.reduction_length(q), 0 if side == "LHS" else 1)
                 for q, side, _, _ in prologue_feeds(g, shape)]
        spatial: Spatial = []
        if _allowed(((1, ctx.nw), (1, ctx.nh), depths[-1]), feeds):
            ws, hs = axis_cells(ctx.nw, cuts), axis_cells(ctx.nh, cuts)
            table = tile_compute_table(ctx, shape, [hi for _, hi in ws], [hi for _, hi in hs])
            spatial = sorted((table[i][j], w, h) for i, w in enumerate(ws)
                             for j, h in enumerate(hs))
        templates = templates_of(ctx, shape.ops)
        found: dict[tuple[Granularity, int], int] = {}

        def compute_of(gran: Granularity, least_k: int) -> int:
            if (gran, least_k) not in found:
                found[gran, least_k] = op_set_compute(ctx, shape, templates, gran, least_k)
            return found[gran, least_k]

        return spatial, depths, compute_of, feeds

    return ctx.memo("bound cells", shape.ops, make)


def axis_cells(cap: int, cuts: set[int]) -> list[tuple[int, int]]:
    """``[lo, hi]`` ranges covering ``1..cap`` exactly once: every power of two, ``cap`` and
    each cut alone (a spec changes where a tile reaches an extent), the rest between."""
    points = sorted({1 << i for i in range(cap.bit_length()) if 1 << i <= cap} | {cap}
                    | {c for c in cuts if 1 <= c <= cap})
    out: list[tuple[int, int]] = []
    previous = 0
    for point in points:
        if point - previous > 1:
            out.append((previous + 1, point - 1))
        out.append((point, point))
        previous = point
    return out
