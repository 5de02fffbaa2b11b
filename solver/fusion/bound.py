"""A lower bound on the whole fusion problem, far above max(compute, I/O) where it matters.

Every subgraph of a schedule runs some connected op set (S2.4) with some tensors resident
from the previous subgraph and some outputs retained. For each connected op set and each
such arrival (``Priced``), the least latency any granularity and traversal can give is
bounded from below (``price``); CP-SAT then picks the cheapest choice of them that runs
every op, writes every graph output, and writes (or keeps) every tensor it reads that a
graph input is not. No order, no one-subgraph retention limit, no availability: each is a
relaxation, so the optimum of that cover, and CP-SAT's proven bound on it, bounds every
valid schedule.

Granularities: all integers ``1..native`` on each axis that S6.4 allows, not only the
tiles the search tries. Each axis is cut into single values (powers of two, the cap, every
extent of the op set, where specs change) and the open ranges between them; cells are
searched best first and split where they hold the least floor (``_least``). A single-value
cell is priced exactly per step (``any_order_floor``) and checked against the capacity at
every step (``peak_fits``); a range at its favourable ends: counts and traffic at
the largest values (they only fall as tiles grow), working set at the smallest (it only
grows).

Op sets not priced (the enumeration budget or the deadline ran out) leave their ops to
per-op fillers (``Fillers``): what any such set computes for an op (``unpriced_compute``:
its area share, or, for a MatMul that only a head role leaves to them, the recomputation
that role forces), the traffic it forces (``forced_traffic``: split-K reloads, loads of
big graph inputs, writes every schedule makes, and the loads or recomputation a consumer of
those writes pays), and for heads sharing a weight too big for the capacity what each pays
(``shared_heads``). The unpriced sets together pay at least the largest of those sums over
their (designated) ops, so the cover stays a bound, weaker than a complete one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from math import floor as floor_int

from ortools.sat.python import cp_model

from solver.deadline import charge, limit_cpsat, now, run_cpsat
from solver.fusion.candidates import connected_op_sets
from solver.fusion.closed_form import Granularity, any_order_floor, peak_fits, templates_of
from solver.fusion.context import ScoringContext
from solver.fusion.problem import SubgraphShape, ceil_div, prologue_feeds
from solver.fusion.roles import unpriced_compute, unpriced_roots
from solver.fusion.score import op_floors
from solver.fusion.shared_heads import shared_operands

SET_BUDGET = 3000
"""Connected op sets priced at most (the same scale as the solver's whole-graph model)."""
COVER_TIME_S, COVER_SHARE = 1.0, 0.05
"""Time kept for solving the cover: at least this, or this share of what is left. The
cover of benchmark 5 (2,343 op sets, every arrival priced) solves in 0.07 s; pricing is
what needs the time, and a cover cut short still proves a valid bound."""
COST_RESOLUTION = 2**60
QUICK_SPLITS, REFINE_FACTOR = 16, 32
"""Range cells split at most, per op set and arrival, before the least floor stands, for
every op set; each refinement of a price the cover picks allows this factor more."""
IDLE_ROUNDS = 2
"""Refinement rounds in a row that leave the cover where it was before refining stops
(one such round may only have swapped a tie; benchmark 7 ``per_op`` spent 20 s more on
rounds that raised nothing)."""
FIRST_STEP_S, FLOOR_S, PEAK_S, OP_SET_S = 5e-6, 1e-5, 5.6e-5, 1.1e-3
"""Deterministic seconds charged to a deterministic solve's work clock per first step
checked against the capacity, per cell floor, per single value checked at its peak and per
op set priced. Fitted to the wall time of pricing the op sets of every public benchmark in
both modes (reference machine, one core): within 0.6-1.7x of it on each, but for 7
``per_native_k`` (3.9x, of 0.15 s). A clock tick per op set priced, as before, charged 13
``per_op`` a seventeenth of its 26 ms an op set, and its deterministic solves ran into the
wall-clock backstop at 30 s."""
MAX_ARRIVALS = 16
"""Resident-input and retained-output choices that fit the capacity priced one by one per
op set; beyond it one relaxed price stands for all of them."""



@dataclass(frozen=True)
class Priced:
    """A connected op set run with ``resident`` inputs and ``kept`` outputs, at the least
    latency (``units``, in the context's unit) any schedule can give it. A ``relaxed`` one
    stands for every arrival at once: it may keep or write any output, loads nothing
    produced elsewhere, and is charged no retained capacity."""

    ops: tuple[int, ...]
    resident: frozenset[int]
    kept: frozenset[int]
    units: int
    relaxed: bool = False
    exact: bool = True
    """The least floor over single granularities; else a range's floor, below it."""
    splits: int = QUICK_SPLITS
    """The split budget it was priced with."""


@dataclass(frozen=True)
class CoverBound:
    """The bound, and how much of the problem was priced exactly."""

    value: Fraction
    sets_priced: int
    complete: bool
    """Every connected op set was priced (no op fell back to a filler)."""
    optimal: bool
    """CP-SAT solved the cover to optimality (else ``value`` is its proven bound)."""


@dataclass(frozen=True)
class Fillers:
    """What the op sets left unpriced pay for an op they run, when one of them is the op's
    designated one: its compute (``unpriced_compute``; None when no unpriced set can run
    it) and its forced traffic (``forced_traffic``). Each unpriced subgraph pays at least
    its compute and at least its traffic, so all of them together pay at least either sum
    over the ops they are designated for."""

    compute: Sequence[int | None]
    traffic: Sequence[int]
    shared: Sequence[dict[int, int]]
    """Per group of heads sharing a weight (``shared_operands``), what each of its readers
    that an unpriced set can run only as a head pays there (``head_floor``): the unpriced
    sets together pay at least each group's sum too."""


def make_fillers(ctx: ScoringContext, attempted: Sequence[tuple[int, ...]]) -> Fillers:
    """The fillers for every op outside the ``attempted`` op sets."""
    free_roots = unpriced_roots(ctx, attempted)
    shared = [{q: group.head_floor for q in group.readers if q not in free_roots}
              for group in shared_operands(ctx) if group.head_floor is not None]
    return Fillers(unpriced_compute(ctx, free_roots), forced_traffic(ctx),
                   [floors for floors in shared if floors])


def cover_bound(ctx: ScoringContext, deadline: float) -> CoverBound:
    """The cover bound, priced and solved before ``deadline`` (a ``deadline.now()`` value).

    Every op set is first priced with ``QUICK_SPLITS``; then, while time is left, the
    prices the cover's optimum picks that are not exact are refined (``REFINE_FACTOR``
    times their splits each time) and the cover solved again: only those can hold the
    bound down. Refining stops after ``IDLE_ROUNDS`` rounds that raise nothing."""
    n = ctx.problem.num_ops
    sets = connected_op_sets(ctx.graph, range(n), SET_BUDGET)

    def kept_for_cover() -> float:
        return max(COVER_TIME_S, COVER_SHARE * (deadline - now()))

    pricing_ends = deadline - kept_for_cover()
    priced: list[Priced] = []
    done = 0
    for ops in sets.sets:
        if now() > pricing_ends:
            break
        priced.extend(price(ctx, ops, QUICK_SPLITS))
        done += 1
    complete = sets.complete and done == len(sets.sets)
    fillers = None if complete else make_fillers(ctx, sets.sets[:done])
    best, idle = Fraction(-1), 0
    while True:
        value, optimal, chosen = _solve_cover(ctx, priced, fillers, deadline)
        best, idle = max(best, value), 0 if value > best else idle + 1
        loose = [i for i in chosen if not priced[i].exact]
        refine_ends = deadline - kept_for_cover()
        if not optimal or not loose or idle >= IDLE_ROUNDS or now() > refine_ends:
            return CoverBound(value, done, complete, optimal)
        refined: dict[int, Priced | None] = {}
        for i in loose:
            if now() > refine_ends:
                break
            v = priced[i]
            splits = v.splits * REFINE_FACTOR
            found = _least(ctx, ctx.shape(v.ops), v.resident, v.kept, v.relaxed, splits,
                           refine_ends)
            refined[i] = None if found is None else replace(
                v, units=max(found[0], v.units), exact=found[1], splits=splits)
        priced = [refined.get(i, v) for i, v in enumerate(priced) if refined.get(i, v)]


def price(ctx: ScoringContext, ops: tuple[int, ...], splits: int) -> list[Priced]:
    """Every arrival of ``ops`` that some granularity fits, at its least latency (found
    with at most ``splits`` range splits each)."""
    shape = ctx.shape(ops)
    made_elsewhere = [t for t in shape.inputs if t not in ctx.graph.graph_inputs]
    arrivals = _arrivals(ctx, made_elsewhere, shape.outputs)
    everything = (frozenset(made_elsewhere), frozenset(shape.outputs), True)
    charge(OP_SET_S)
    out = []
    for resident, kept, relaxed in [everything] if arrivals is None else \
            [(resident, kept, False) for resident, kept in arrivals]:
        found = _least(ctx, shape, resident, kept, relaxed, splits)
        if found is not None:
            out.append(Priced(ops, resident, kept, found[0], relaxed, found[1]))
    return out


def _arrivals(ctx: ScoringContext, made_elsewhere: Sequence[int], outputs: Sequence[int]
              ) -> list[tuple[frozenset[int], frozenset[int]]] | None:
    """Every (resident inputs, retained outputs) whose tensors fit the capacity together
    (resident ones are held throughout; retained ones, under the accumulate rule, whole in
    the last step), None if more than ``MAX_ARRIVALS`` do."""
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


Cell = tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
"""``[lo, hi]`` ranges of w, h and k."""


def _least(ctx: ScoringContext, shape: SubgraphShape, resident: frozenset[int],
           kept: frozenset[int], relaxed: bool, splits: int, deadline: float | None = None
           ) -> tuple[int, bool] | None:
    """The least latency over every granularity that may fit and whether it is exact (not
    a range's floor), None if none can.

    Best first: cells wait in a heap under a floor (first their tile compute, then their
    priced floor, then, for single values, the exact per-step floor); the cheapest is
    priced, split in two along its widest range, or, once exact, is the answer, since
    every other cell's floor is at least as high. A range is priced at its favourable
    ends, so a wide one can look cheaper than any value in it; splitting removes that.
    Past ``splits`` splits or ``deadline`` the heap's least floor is returned (still a
    bound). The work is charged to the running solve's clock (``FIRST_STEP_S``)."""
    size = ctx.graph.size
    held = 0 if relaxed else sum(size(t) for t in resident)
    if not relaxed and ctx.rules.retained_output_ws == "accumulate":
        # in its last step a subgraph holds every output it retains, whole
        if held + sum(size(t) for t in kept) > ctx.capacity:
            return None
    ws_kept = frozenset() if relaxed else kept
    written = sum(size(t) for t in shape.outputs if t not in kept) * ctx.per_element
    templates = templates_of(ctx, shape.ops)
    spatial, depths, compute_of, feeds = _cells(ctx, shape)

    room = floor_int(ctx.capacity) - held  # working sets are whole elements
    fitting: dict[Granularity, bool] = {}

    def fits(w: int, h: int, k: int) -> bool:
        """Whether a first step at these values may fit (cells share corners: memoized)."""
        found = fitting.get((w, h, k))
        if found is None:
            found = fitting[w, h, k] = \
                templates.first_step_floor(ctx, (w, h, k), resident, ws_kept) <= room
        return found

    floors = peaks = 0  # the work done, besides the first steps checked (``fitting``)

    def floor(cell: Cell) -> tuple[int, Cell] | None:
        """The cell's floor and the cell cut to the values whose first step may fit (the
        working set grows on every axis), None if none does or S6.4 rules all out."""
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
                   templates.load_floor(ctx, (w1, h1, k1), resident) * ctx.per_element
                   + written), cell

    PRICED, EXACT = 1, 0  # at equal floors the exact one pops first
    heap: list[tuple[int, int, Cell]] = []
    next_start = 0  # spatial cells taken
    try:
        while heap or next_start < len(spatial):
            if next_start < len(spatial) and (not heap or spatial[next_start][0] <= heap[0][0]):
                # starting cells join the heap in order of their tile compute, a floor of theirs
                _, w, h = spatial[next_start]
                for k in depths:
                    if (priced := floor((w, h, k))) is not None:
                        heapq.heappush(heap, (priced[0], PRICED, priced[1]))
                next_start += 1
                continue
            units, stage, cell = heapq.heappop(heap)
            if stage == EXACT:
                return units, True
            widest = max(range(3), key=lambda axis: cell[axis][1] - cell[axis][0])
            lo, hi = cell[widest]
            if lo == hi:
                gran = (cell[0][0], cell[1][0], cell[2][0])
                peaks += 1
                if peak_fits(ctx, shape.ops, gran, resident, ws_kept, room):
                    exact = any_order_floor(ctx, shape.ops, gran, resident, kept)
                    heapq.heappush(heap, (max(units, exact or 0), EXACT, cell))
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
        charge(len(fitting) * FIRST_STEP_S + floors * FLOOR_S + peaks * PEAK_S)


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
        floors = [op_floors(ctx, shape, q) for q in shape.ops]
        deepest = min([ctx.nk] + [g.reduction_length(q) for q in matmuls])
        depths = axis_cells(deepest, cuts) if matmuls else [(1, 1)]
        feeds = [(g.reduction_length(q), 0 if side == "LHS" else 1)
                 for q, side, _, _ in prologue_feeds(g, shape)]
        spatial = sorted((sum(at(w[1], h[1]) for at in floors), w, h)
                         for w in axis_cells(ctx.nw, cuts) for h in axis_cells(ctx.nh, cuts)
                         ) if _allowed(((1, ctx.nw), (1, ctx.nh), depths[-1]), feeds) else []
        templates = templates_of(ctx, shape.ops)
        found: dict[tuple[Granularity, int], int] = {}

        def compute_of(gran: Granularity, least_k: int) -> int:
            if (gran, least_k) not in found:
                w, h, _ = gran
                firings = templates.firing_floors(ctx, gran, least_k=least_k)
                found[gran, least_k] = sum(max(at(w, h), firings.get(q, 0))
                                           for q, at in zip(shape.ops, floors, strict=True))
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
            total += min(Fraction(_needed(ctx, t, q), _pointwise_readers(ctx, t)),
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
    (``_always_split_root``). Then every operand that can be neither resident (a graph
    input, or larger than the capacity) nor made in the same subgraph (a graph input, or
    made by a Pointwise op that S6.4 forbids there), and that no subgraph can hold whole
    (``_only_sliced``), has each k-step's slice loaded afresh, the step before having
    another k range: all of it once per tile across, at least ``ceil(extent / native)``
    tiles."""
    g, p = ctx.graph, ctx.problem
    if not _always_split_root(ctx, q):
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
    native = ctx.nh if side else ctx.nw
    split_past_native = g.reduction_length(q) > native
    return split_past_native and (producer is None or (
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
        _always_split_root(ctx, c) and _made_outside(ctx, t, c, side)
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
        total += Fraction(_needed(ctx, t, q), _pointwise_readers(ctx, t))
    return total


def _pointwise_readers(ctx: ScoringContext, t: int) -> int:
    """Pointwise ops reading ``t``: they share its ``pw`` tile slices in a subgraph."""
    return sum(1 for c in ctx.graph.consumers[t] if not ctx.graph.is_matmul(c))


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
        if not (_always_split_root(ctx, c) and not g.is_matmul(q) and all(
            _made_outside(ctx, t, c, side) for side, u in enumerate(p.inputs[c]) if u == t))))


def _always_split_root(ctx: ScoringContext, q: int) -> bool:
    """A MatMul whose K exceeds nk (so it always splits it) and that no subgraph can make a
    head (S6.1): its output reaches no MatMul operand directly, and through Pointwise ops
    only operands S6.4 forbids there (that MatMul splits a K above the native w for an
    LHS, h for an RHS)."""
    return ctx.memo("always_split_root", (q,), lambda: _reaches_no_head_operand(ctx, q))


def _reaches_no_head_operand(ctx: ScoringContext, q: int) -> bool:
    """The walk behind ``_always_split_root`` (uncached)."""
    g, p = ctx.graph, ctx.problem
    if not g.is_matmul(q) or g.reduction_length(q) <= ctx.nk:
        return False
    frontier, seen = [(t, True) for t in p.outputs[q]], set()
    while frontier:
        t, direct = frontier.pop()
        for c in g.consumers[t]:
            if g.is_matmul(c):
                big_k = g.reduction_length(c)
                natives = [ctx.nh if side else ctx.nw
                           for side, u in enumerate(p.inputs[c]) if u == t]
                if direct or big_k <= ctx.nk or big_k <= max(natives):
                    return False
            elif c not in seen:
                seen.add(c)
                frontier += [(u, False) for u in p.outputs[c]]
    return True


def _only_sliced(ctx: ScoringContext, t: int, side: int) -> bool:
    """Whether every requirement of ``t`` in any subgraph is a k-step slice of a root or a
    tile slice that no head widens to a whole extent: each consumer is an always-split root
    reading it once on the same side, or a Pointwise op from whose output only
    always-split roots are reached through Pointwise ops."""
    g, p = ctx.graph, ctx.problem
    for c in g.consumers[t]:
        if g.is_matmul(c):
            if p.inputs[c].count(t) != 1 or p.inputs[c][side] != t \
                    or not _always_split_root(ctx, c):
                return False
            continue
        frontier, seen = list(p.outputs[c]), {c}
        while frontier:
            for d in g.consumers[frontier.pop()]:
                if g.is_matmul(d):
                    if not _always_split_root(ctx, d):
                        return False
                elif d not in seen:
                    seen.add(d)
                    frontier += p.outputs[d]
    return True


def _solve_cover(ctx: ScoringContext, priced: Sequence[Priced], fillers: Fillers | None,
                 deadline: float) -> tuple[Fraction, bool, list[int]]:
    """CP-SAT's proven bound on the cheapest cover (in time units), whether it is the
    optimum, and which prices that cover picks. With ``fillers``, every op an unpriced set
    can run may also be covered that way; those ops together cost the largest of their
    compute, traffic and shared-weight sums (``Fillers``)."""
    g = ctx.graph
    filled_ops = [] if fillers is None else \
        [q for q, c in enumerate(fillers.compute) if c is not None]
    # each row: what the unpriced subgraphs cost together at least, over the ops designated
    # to them (``forced_traffic``'s designation; the compute and shared-weight rows hold for
    # any unpriced subgraph that runs the op)
    rows = [] if fillers is None else [
        [fillers.compute[q] or 0 for q in filled_ops],
        [fillers.traffic[q] for q in filled_ops],
        *([floors.get(q, 0) for q in filled_ops] for floors in fillers.shared)]
    # costs rounded down to a common multiple keep a bound and keep sums within int64
    scale = max(1, (sum(v.units for v in priced) + max(map(sum, rows), default=0))
                // COST_RESOLUTION)
    model = cp_model.CpModel()
    chosen = [model.new_bool_var(f"p{i}") for i in range(len(priced))]
    filled = [model.new_bool_var(f"f{q}") for q in filled_ops]
    runs: dict[int, list[cp_model.IntVar]] = {}
    writers: dict[int, list[cp_model.IntVar]] = {}
    keepers: dict[int, list[cp_model.IntVar]] = {}
    for v, x in zip(priced, chosen, strict=True):
        shape = ctx.shape(v.ops)
        for q in v.ops:
            runs.setdefault(q, []).append(x)
        for t in shape.outputs:
            if v.relaxed or t not in v.kept:
                writers.setdefault(t, []).append(x)
            if v.relaxed or t in v.kept:
                keepers.setdefault(t, []).append(x)
        for t in shape.ephemerals:
            keepers.setdefault(t, []).append(x)
    for q, x in zip(filled_ops, filled, strict=True):
        runs.setdefault(q, []).append(x)
        for t in ctx.problem.outputs[q]:
            writers.setdefault(t, []).append(x)
            keepers.setdefault(t, []).append(x)
    # linear rows, not clauses: CP-SAT's LP, which proves the bound, only sees those
    for q in range(ctx.problem.num_ops):
        model.add(sum(runs.get(q, [])) >= 1)
    for t in g.producer:  # graph outputs and what some always-split root must load
        if must_write(ctx, t):
            model.add(sum(writers.get(t, [])) >= 1)
    # one row per tensor says whether any choice writes (keeps) it; a choice that reads it
    # from slow memory (as resident) implies that row's literal; a relaxed choice stands
    # for every arrival, so either source serves it
    sources: dict[tuple[int, str], cp_model.IntVar] = {}
    for v, x in zip(priced, chosen, strict=True):
        for t in ctx.shape(v.ops).inputs:
            if t in g.graph_inputs:
                continue
            source = "either" if v.relaxed else "kept" if t in v.resident else "written"
            if (t, source) not in sources:
                literal = sources[t, source] = model.new_bool_var(f"s{t}{source}")
                found = [*(writers.get(t, []) if source != "kept" else []),
                         *(keepers.get(t, []) if source != "written" else [])]
                model.add(sum(found) >= literal)
            model.add(sources[t, source] >= x)
    unpriced = model.new_int_var(0, max(map(sum, rows), default=0) // scale, "unpriced")
    for row in rows:
        model.add(unpriced >= sum(c // scale * x for c, x in zip(row, filled, strict=True)))
    model.minimize(unpriced + sum(v.units // scale * x
                                  for v, x in zip(priced, chosen, strict=True)))
    solver = cp_model.CpSolver()
    # one worker: it runs the LP that proves the bound (a two-worker portfolio proved
    # nothing in 10 s on benchmark 5, where one worker solves the cover in 1 s)
    solver.parameters.num_workers = 1
    solver.parameters.linearization_level = 2
    limit_cpsat(solver.parameters, deadline)
    status = run_cpsat(solver, model)
    if status in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
        return Fraction(0), False, []  # cannot happen for a problem with a valid schedule
    bound = int(solver.best_objective_bound) * scale
    picked = [i for i, x in enumerate(chosen) if status == cp_model.OPTIMAL and solver.value(x)]
    return ctx.latency(bound), status == cp_model.OPTIMAL, picked
