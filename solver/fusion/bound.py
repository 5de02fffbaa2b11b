"""A lower bound on the whole fusion problem, far above max(compute, I/O) where it matters.

Every subgraph of a schedule runs some connected op set (S2.4) with some tensors resident
from the previous subgraph and some outputs retained. For each connected op set and each
such arrival (``Priced``), the least latency any granularity and traversal can give is
bounded from below (``price``); CP-SAT then picks the cheapest choice of them that runs
every op, writes every graph output, and writes (or keeps) every tensor it reads that a
graph input is not. No order, no one-subgraph retention limit, no availability: each is a
relaxation, so the optimum of that cover, and CP-SAT's proven bound on it, bounds every
valid schedule.

Granularities: all integers ``1..native`` on each axis, not only the powers of two the
search tries. Each axis is cut into single values (powers of two, the cap, every extent
of the op set, where specs change) and the open ranges between them. A single-value cell
is priced exactly per step (``any_order_floor``); a range at its favourable ends: counts
and traffic at the largest values (they only fall as tiles grow), working set at the
smallest (it only grows).

Op sets not priced (the enumeration budget or the deadline ran out) are covered per op at
its compute floor, which any subgraph pays for it; the bound then is weaker, still valid.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain, combinations

from ortools.sat.python import cp_model

from solver.fusion.candidates import connected_op_sets
from solver.fusion.closed_form import Granularity, any_order_floor, templates_of
from solver.fusion.context import ScoringContext
from solver.fusion.problem import SubgraphShape
from solver.fusion.score import least_compute, op_floor

SET_BUDGET = 3000
"""Connected op sets priced at most (the same scale as the solver's whole-graph model)."""
COVER_TIME_S, COVER_SHARE = 1.0, 0.15
"""Time kept for solving the cover: at least this, or this share of what is left."""
COST_RESOLUTION = 2**48
MAX_ARRIVALS = 16
"""Resident-input and retained-output subsets priced one by one per op set; beyond it one
relaxed price stands for all of them."""



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


@dataclass(frozen=True)
class CoverBound:
    """The bound, and how much of the problem was priced exactly."""

    value: Fraction
    sets_priced: int
    complete: bool
    """Every connected op set was priced (no op fell back to its compute floor)."""
    optimal: bool
    """CP-SAT solved the cover to optimality (else ``value`` is its proven bound)."""


def cover_bound(ctx: ScoringContext, deadline: float) -> CoverBound:
    """The cover bound, priced and solved before ``deadline`` (a ``time.monotonic()``)."""
    n = ctx.problem.num_ops
    sets = connected_op_sets(ctx.graph, range(n), SET_BUDGET)
    pricing_ends = deadline - max(COVER_TIME_S, COVER_SHARE * (deadline - time.monotonic()))
    priced: list[Priced] = []
    done = 0
    for ops in sets.sets:
        if time.monotonic() > pricing_ends:
            break
        priced.extend(price(ctx, ops))
        done += 1
    complete = sets.complete and done == len(sets.sets)
    value, optimal = _solve_cover(ctx, priced, not complete, deadline)
    return CoverBound(value, done, complete, optimal)


def price(ctx: ScoringContext, ops: tuple[int, ...]) -> list[Priced]:
    """Every arrival of ``ops`` that some granularity fits, at its least latency."""
    shape = ctx.shape(ops)
    made_elsewhere = [t for t in shape.inputs if t not in ctx.graph.graph_inputs]
    arrivals = 2 ** (len(made_elsewhere) + len(shape.outputs))
    out = []
    if arrivals > MAX_ARRIVALS:
        units = _least(ctx, shape, frozenset(made_elsewhere), frozenset(shape.outputs), True)
        if units is not None:
            out.append(Priced(ops, frozenset(made_elsewhere), frozenset(shape.outputs), units,
                              relaxed=True))
        return out
    for resident in map(frozenset, _subsets(made_elsewhere)):
        for kept in map(frozenset, _subsets(shape.outputs)):
            units = _least(ctx, shape, resident, kept, False)
            if units is not None:
                out.append(Priced(ops, resident, kept, units))
    return out


def _least(ctx: ScoringContext, shape: SubgraphShape, resident: frozenset[int],
           kept: frozenset[int], relaxed: bool) -> int | None:
    """The least latency over every granularity that may fit, None if none can."""
    size = ctx.graph.size
    held = 0 if relaxed else sum(size(t) for t in resident)
    if not relaxed and ctx.rules.retained_output_ws == "accumulate":
        # in its last step a subgraph holds every output it retains, whole
        if held + sum(size(t) for t in kept) > ctx.capacity:
            return None
    ws_kept = frozenset() if relaxed else kept
    written = sum(size(t) for t in shape.outputs if t not in kept) * ctx.per_element
    templates = templates_of(ctx, shape.ops)
    spatial, depths, compute_of = _cells(ctx, shape)
    best: int | None = None

    def floor(w: tuple[int, int], h: tuple[int, int], k: tuple[int, int]) -> int | None:
        """The cell's floor, None if it cannot fit or cannot beat ``best``."""
        compute = compute_of((w[1], h[1], k[1]), k[0])
        if best is not None and compute >= best:
            return None
        if held + templates.first_step_floor(ctx, (w[0], h[0], k[0]), resident, ws_kept) \
                > ctx.capacity:
            return None
        units = max(compute, templates.load_floor(ctx, (w[1], h[1], k[1]), resident)
                    * ctx.per_element + written)
        return None if best is not None and units >= best else units

    for tiles, w, h in spatial:
        if best is not None and tiles >= best:
            break
        for k in depths:
            units = floor(w, h, k)
            if units is None:
                continue
            # a range is refined into its single k values, each priced step by step
            for single in ([k] if k[0] == k[1] or w[0] != w[1] or h[0] != h[1]
                           else [(d, d) for d in range(k[1], k[0] - 1, -1)]):
                if single != k and (units := floor(w, h, single)) is None:
                    continue
                if w[0] == w[1] and h[0] == h[1] and single[0] == single[1]:
                    exact = any_order_floor(ctx, shape.ops, (w[0], h[0], single[0]),
                                            resident, kept)
                    units = max(units, exact or 0)
                best = units if best is None else min(best, units)
    return best


Spatial = list[tuple[int, tuple[int, int], tuple[int, int]]]


def _cells(ctx: ScoringContext, shape: SubgraphShape
           ) -> tuple[Spatial, list[tuple[int, int]], Callable[[Granularity, int], int]]:
    """The cells of an op set (memoized): ``[lo, hi]`` ranges of w and h with the tile
    compute of their ops (cheapest first), of k, and its compute floor over a cell (given
    its largest values and least k). They cover every w <= nw, h <= nh and k <= min(nk,
    every K) (S9, S2.5); k is one value for a Pointwise-only set (S9: ignored), and every
    k alone (a k-step's size sets what each step loads against what it computes)."""

    def make() -> tuple[Spatial, list[tuple[int, int]], Callable[[Granularity, int], int]]:
        p, g = ctx.problem, ctx.graph
        tensors = shape.consumed | shape.produced
        cuts = {p.heights[t] for t in tensors} | {p.widths[t] for t in tensors}
        matmuls = [q for q in shape.ops if g.is_matmul(q)]
        cuts |= {g.reduction_length(q) for q in matmuls}
        tiled = {(w[1], h[1]): [op_floor(ctx, shape, q, w[1], h[1]) for q in shape.ops]
                 for w in axis_cells(ctx.nw, cuts) for h in axis_cells(ctx.nh, cuts)}
        spatial = sorted((sum(tiled[w[1], h[1]]), w, h)
                         for w in axis_cells(ctx.nw, cuts) for h in axis_cells(ctx.nh, cuts))
        deepest = min([ctx.nk] + [g.reduction_length(q) for q in matmuls])
        depths = axis_cells(deepest, cuts)[::-1] if matmuls else [(1, 1)]
        templates = templates_of(ctx, shape.ops)
        found: dict[tuple[Granularity, int], int] = {}

        def compute_of(gran: Granularity, least_k: int) -> int:
            if (gran, least_k) not in found:
                w, h, _ = gran
                firings = templates.firing_floors(ctx, gran, least_k=least_k)
                found[gran, least_k] = sum(max(floor, firings.get(q, 0)) for q, floor
                                           in zip(shape.ops, tiled[w, h], strict=True))
            return found[gran, least_k]

        return spatial, depths, compute_of

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


def _subsets(items: Sequence[int]) -> Iterator[tuple[int, ...]]:
    return chain.from_iterable(combinations(items, r) for r in range(len(items) + 1))


def _solve_cover(ctx: ScoringContext, priced: Sequence[Priced], fill: bool, deadline: float
                 ) -> tuple[Fraction, bool]:
    """CP-SAT's proven bound on the cheapest cover (in time units) and whether it is the
    optimum. With ``fill``, every op may also be covered alone at its compute floor."""
    g = ctx.graph
    fillers = ([(q, least_compute(ctx, q))
                for q in range(ctx.problem.num_ops)] if fill else [])
    costs = [v.units for v in priced] + [c for _, c in fillers]
    # costs rounded down to a common multiple keep a bound and keep sums within int64
    scale = max(1, sum(costs) // COST_RESOLUTION)
    model = cp_model.CpModel()
    chosen = [model.new_bool_var(f"p{i}") for i in range(len(priced))]
    filled = [model.new_bool_var(f"f{q}") for q, _ in fillers]
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
    for (q, _), x in zip(fillers, filled, strict=True):
        runs.setdefault(q, []).append(x)
        for t in ctx.problem.outputs[q]:
            writers.setdefault(t, []).append(x)
            keepers.setdefault(t, []).append(x)
    # linear rows, not clauses: CP-SAT's LP, which proves the bound, only sees those
    for q in range(ctx.problem.num_ops):
        model.add(sum(runs.get(q, [])) >= 1)
    for t in g.graph_outputs:
        model.add(sum(writers.get(t, [])) >= 1)
    # one row per tensor says whether any choice writes (keeps) it; a choice that reads it
    # from slow memory (as resident) implies that row's literal
    sources: dict[tuple[int, bool], cp_model.IntVar] = {}
    for v, x in zip(priced, chosen, strict=True):
        for t in ctx.shape(v.ops).inputs:
            if t in g.graph_inputs:
                continue
            key = (t, t in v.resident)
            if key not in sources:
                sources[key] = model.new_bool_var(f"s{t}")
                model.add(sum((keepers if key[1] else writers).get(t, [])) >= sources[key])
            model.add(sources[key] >= x)
    model.minimize(sum(c // scale * x for c, x in zip(costs, chosen + filled, strict=True)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.1, deadline - time.monotonic())
    # one worker: it runs the LP that proves the bound (a two-worker portfolio proved
    # nothing in 10 s on benchmark 5, where one worker solves the cover in 1 s)
    solver.parameters.num_workers = 1
    solver.parameters.linearization_level = 2
    status = solver.solve(model)
    if status in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
        return Fraction(0), False  # cannot happen for a problem with a valid schedule
    bound = int(solver.best_objective_bound) * scale
    return ctx.latency(bound), status == cp_model.OPTIMAL
