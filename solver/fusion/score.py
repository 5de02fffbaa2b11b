"""Scoring one subgraph: the API every solver calls, and the search for its best config.

``score_subgraph`` gives the exact latency, fit and peak working set of one subgraph at
one granularity, traversal and retention, memoized per problem in a ``ScoringContext``.
It uses the closed form (``closed_form.py``), which the tests prove equal to the literal
simulation (``simulate.py``).
``best_config`` searches the legal granularities and traversals for the fastest that fits,
in increasing order of their floors (``floors.py``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from solver.deadline import now
from solver.fusion import teamkorea_config
from solver.fusion.closed_form import (
    Granularity,
    Traversal,
    closed_form,
    plan_of,
    templates_of,
)
from solver.fusion.context import ScoringContext, ScoringTimeout
from solver.fusion.floors import (
    compute_groups,
    first_step_floor,
    kept_by_last_step,
    least_first_step,
    load_floor,
    op_set_compute,
    peak_fits,
    tile_area,
)
from solver.fusion.problem import SubgraphShape, bounds_issue, k_depth_issue, prologue_issue
from solver.fusion.simulate import NAMED_ORDERS, TraversalName
from solver.fusion.twins import signature

__all__ = ["Config", "Granularity", "Score", "ScoringContext", "ScoringTimeout", "Traversal",
           "best_config", "config_at", "known_best", "least_floor", "legal_config_at",
           "quick_config", "remember_best", "score_subgraph", "tile_order"]


# tried, in this order of preference on ties, where a MatMul subgraph has several tile rows
# and columns: a row order keeps LHS strips, a column order RHS strips (so the column orders
# only where the plan has such strips), snake also the strip at the turn
ROW_ORDERS: tuple[TraversalName, ...] = ("snake", "raster")
COLUMN_ORDERS: tuple[TraversalName, ...] = ("column_snake", "column")


NARROWINGS = 3
"""Candidates that do not fit narrowed per search (``_narrowed``), cheapest floor first;
only those with a narrower tile that fits count."""


class Score(NamedTuple):
    """Latency and peak working set of a subgraph; ``fits`` when the peak fits in fast memory."""

    latency: Fraction
    fits: bool
    ws_peak: int


@dataclass(frozen=True)
class Config:
    """A granularity and traversal for a subgraph, with its score."""

    gran: Granularity
    traversal: TraversalName
    latency: Fraction
    ws_peak: int


def score_subgraph(
    ctx: ScoringContext,
    ops: Sequence[int],
    gran: Granularity,
    traversal: Traversal = "raster",
    retained_in: Iterable[int] = (),
    retained_out: Iterable[int] = (),
) -> Score:
    """Latency, fit and peak working set of a structurally valid subgraph (memoized).

    ``ops`` in a topological order; ``gran`` legal (``legal_granularities``);
    ``traversal`` a name of ``NAMED_ORDERS`` or a tuple of tile indices; ``retained_in`` everything
    the previous subgraph retained (all of it occupies fast memory); ``retained_out`` the
    tensors of this subgraph kept for the next one. Nothing is validated here: the
    evaluator does that.
    """
    ops = tuple(ops)
    shape = ctx.shape(ops)
    resident, kept = frozenset(retained_in), frozenset(retained_out)
    held = sum(ctx.graph.size(t) for t in resident)
    key = (ops, gran, traversal, resident & shape.consumed, held, kept)
    return ctx.memo("score", key, lambda: _score(ctx, shape, gran, traversal, resident, kept))


def _score(ctx: ScoringContext, shape: SubgraphShape, gran: Granularity, traversal: Traversal,
           resident: frozenset[int], kept: frozenset[int]) -> Score:
    units, peak = closed_form(ctx, shape.ops, gran, traversal, resident, kept)
    return Score(ctx.latency(units), peak <= ctx.capacity, peak)


def tile_order(traversal: Traversal, ntr: int, ntc: int) -> list[int]:
    """The tile indices a traversal visits, in order."""
    if isinstance(traversal, str):
        return NAMED_ORDERS[traversal](ntr, ntc)
    return list(traversal)


def best_config(
    ctx: ScoringContext,
    ops: Sequence[int],
    retained_in: Iterable[int] = (),
    retained_out: Iterable[int] = (),
    at_most: Fraction | None = None,
) -> Config | None:
    """The lowest-latency legal granularity and traversal that fits, or None (memoized).

    Candidates are ``legal_granularities`` (and, with ``ctx.every_tile``, the largest tiles
    below those that do not fit); ties go to larger tiles (w*h, then k, then w)
    and, for multi-tile MatMul subgraphs, to snake order (the seed team's choice). A
    candidate is scored only while its floor (least compute, least slow-memory traffic)
    can still match the best found.

    With ``at_most``, None also when the best is slower than that, and then sooner: no
    candidate whose floor is above it is tried (the greedy asks of every merge whether
    it pays, and most do not). The config returned is the same as without it.
    """
    ops = tuple(ops)
    shape = ctx.shape(ops)
    resident, kept = frozenset(retained_in), frozenset(retained_out)
    held = sum(ctx.graph.size(t) for t in resident)
    key = _best_key(shape, resident, held, kept)
    if ctx.semantics == "teamkorea":
        found = ctx.memo("teamkorea best", key, lambda: _teamkorea(ctx, ops, resident, kept))
    elif at_most is None or ctx.every_tile or ctx.has("best", key) or \
            ctx.has("best like", twin := signature(ctx, shape, resident, kept, held)):
        # with every tile, which narrowings are tried depends on the candidates before
        found = ctx.memo("best", key, lambda: _twin_or_search(ctx, shape, resident, kept, held))
    else:
        # twins have the same best: what one's search ruled out holds for all of them
        exceeds = ctx.memo("best exceeds", twin, lambda: [Fraction(-1)])
        if at_most <= exceeds[0]:
            return None
        found = _search(ctx, shape, resident, kept, held, at_most * ctx.unit)
        if found is None:
            exceeds[0] = at_most
            return None
        ctx.memo("best", key, lambda: found)
        ctx.remember("best like", twin, found)
    return found if at_most is None or (found is not None and found.latency <= at_most) \
        else None


def quick_config(ctx: ScoringContext, ops: Sequence[int]) -> Config | None:
    """A legal config that fits, nothing retained, or None when none does (memoized apart
    from ``best_config``): the first the search prices, the least floor, found in a few
    scorings where the best may take hundreds. For a schedule wanted before the time runs
    out (``unfused`` under a deadline)."""
    ops = tuple(ops)
    nothing: frozenset[int] = frozenset()
    if ctx.semantics == "teamkorea":
        return ctx.memo("quick", ops, lambda: _teamkorea(ctx, ops, nothing, nothing, True))
    return ctx.memo("quick", ops, lambda: _search(ctx, ctx.shape(ops), nothing, nothing, 0,
                                                  first=True))


def known_best(ctx: ScoringContext, ops: Sequence[int]) -> Config | None:
    """``best_config``'s answer for ``ops`` with nothing retained if a search already found
    it, else None: what a schedule wanted after its deadline can still use."""
    ops = tuple(ops)
    key = _best_key(ctx.shape(ops), frozenset(), 0, frozenset())
    kind = "teamkorea best" if ctx.semantics == "teamkorea" else "best"
    return ctx.memo(kind, key, lambda: None) if ctx.has(kind, key) else None


def remember_best(ctx: ScoringContext, ops: tuple[int, ...], retained_in: frozenset[int],
                  retained_out: frozenset[int], config: Config) -> None:
    """Make ``config`` what ``best_config`` answers for this subgraph from now on: one found
    beyond its candidates (``retile``), faster than its best."""
    shape = ctx.shape(ops)
    held = sum(ctx.graph.size(t) for t in retained_in)
    ctx.remember("best", _best_key(shape, retained_in, held, retained_out), config)
    ctx.remember("best like", signature(ctx, shape, retained_in, retained_out, held), config)


def _twin_or_search(ctx: ScoringContext, shape: SubgraphShape, resident: frozenset[int],
                    kept: frozenset[int], held: int) -> Config | None:
    """A twin's best config (``twins.py``) re-scored on this subgraph when one was found
    and scores the same here, else ``_search``'s, which its twins then get."""
    twin = signature(ctx, shape, resident, kept, held)
    if ctx.has("best like", twin):
        config = ctx.memo("best like", twin, lambda: None)
        if config is None:
            return None
        again = legal_config_at(ctx, shape, config.gran, resident, kept)
        if again is not None and again.latency == config.latency:
            return again
    found = _search(ctx, shape, resident, kept, held)
    ctx.remember("best like", twin, found)
    return found


def _best_key(shape: SubgraphShape, resident: frozenset[int], held: int,
              kept: frozenset[int]) -> tuple:
    """What a subgraph's best config depends on: the resident tensors it reads, the room
    all of them take (``held``), and what it keeps."""
    return shape.ops, resident & shape.consumed, held, kept


def config_at(ctx: ScoringContext, shape: SubgraphShape, gran: Granularity,
              resident: frozenset[int], kept: frozenset[int]) -> Config | None:
    """The fastest named traversal at ``gran`` that fits (the first in the order of
    preference among equals), None if none does. Only several tile rows and columns give
    a MatMul subgraph a choice."""
    plan = plan_of(ctx, shape.ops, gran)
    orders: tuple[TraversalName, ...] = ("raster",)
    if shape.has_matmul and plan.ntr > 1 and plan.ntc > 1:
        orders = ROW_ORDERS + COLUMN_ORDERS if plan.column_strips else ROW_ORDERS
    found = None
    for traversal in orders:
        s = score_subgraph(ctx, shape.ops, gran, traversal, resident, kept)
        if s.fits and (found is None or s.latency < found.latency):
            found = Config(gran, traversal, s.latency, s.ws_peak)
    return found


def legal_config_at(ctx: ScoringContext, shape: SubgraphShape, gran: Granularity,
                    resident: frozenset[int], kept: frozenset[int]) -> Config | None:
    """``config_at`` where ``gran`` is legal for the subgraph (S2.5, S6.4, S9), else None:
    for a tile found on another subgraph (a twin's) or off the candidates (``retile``)."""
    if k_depth_issue(ctx.graph, shape, gran[2]) or bounds_issue(ctx.graph, gran) or \
            prologue_issue(ctx.graph, shape, gran):
        return None
    return config_at(ctx, shape, gran, resident, kept)


def _teamkorea(ctx: ScoringContext, ops: tuple[int, ...], resident: frozenset[int],
               kept: frozenset[int], first: bool = False) -> Config | None:
    """``teamkorea_config.best`` as a ``Config``."""
    found = teamkorea_config.best(ctx, ops, resident, kept, first)
    return None if found is None else Config(*found)


def _search(ctx: ScoringContext, shape: SubgraphShape, resident: frozenset[int],
            kept: frozenset[int], held: int, cutoff: Fraction | None = None,
            first: bool = False) -> Config | None:
    """Candidates in increasing order of their floor, max(compute, traffic): the compute
    floor is cheap, so the traffic floor is computed only for candidates whose compute floor
    does not already exceed the smallest floor waiting (a heap keeps the exact order).
    With ``ctx.every_tile``, a candidate that does not fit adds its ``_narrowed`` twins to
    the wait. With ``cutoff`` (in ``ctx`` units), no candidate whose floor is above it is
    tried, and None unless the best is at most it (that best is then the same). With
    ``first``, the first candidate that fits (``quick_config``)."""
    templates = templates_of(ctx, shape.ops)
    if held + least_first_step(ctx, templates, resident, kept) > ctx.capacity \
            or held + kept_by_last_step(ctx, kept & shape.produced) > ctx.capacity:
        return None  # no granularity's first step, or last, fits
    written = sum(ctx.graph.size(t) for t in shape.outputs if t not in kept)
    loaded_resident = resident & frozenset(shape.inputs)
    by_compute = list(ctx.memo("candidates", shape.ops, lambda: _candidates(ctx, shape)))
    candidates = {gran for _, _, gran in by_compute}
    tried = set(candidates)
    waiting: list[tuple[int, tuple[int, int, int], Granularity]] = []
    best: tuple | None = None
    found: Config | None = None
    narrowings = 0

    # every retention variant of an op set asks for the same floors: shared per op set
    computes: dict[Granularity, int] = ctx.memo("compute floors", shape.ops, dict)
    loads: dict[Granularity, int] = ctx.memo("load floors", (shape.ops, loaded_resident), dict)

    def wait(gran: Granularity, rank: tuple[int, int, int]) -> None:
        compute = computes.get(gran)
        if compute is None:
            compute = computes[gran] = op_set_compute(ctx, shape, templates, gran)
        load = loads.get(gran)
        if load is None:
            load = loads[gran] = load_floor(ctx, templates, gran, resident)
        traffic = (load + written) * ctx.per_element
        heapq.heappush(waiting, (max(compute, traffic), rank, gran))

    limit = math.inf if cutoff is None else cutoff
    while True:
        while by_compute and by_compute[-1][0] <= limit \
                and (not waiting or by_compute[-1][0] <= waiting[0][0]):
            _, rank, gran = by_compute.pop()
            wait(gran, rank)
        if not waiting:
            break
        floor, rank, gran = heapq.heappop(waiting)
        if floor > limit or (best is not None and (floor, rank) > best):
            break  # its latency is at least its floor: it cannot beat the best, nor can later ones
        if ctx.deadline is not None and now() > ctx.deadline:
            raise ScoringTimeout  # before memo() stores a result: an unfinished search is not kept
        config = None
        if held + first_step_floor(ctx, templates, gran, resident, kept) <= ctx.capacity:
            config = config_at(ctx, shape, gran, resident, kept)
        if config is not None and (best is None or (config.latency * ctx.unit, rank) < best):
            best, found = (config.latency * ctx.unit, rank), config
            if first:
                break
        if config is None and ctx.every_tile and gran in candidates and narrowings < NARROWINGS:
            # the cheapest candidates that do not fit, each once; one with no tile that may
            # fit within half of it does not count (a 128 x 128 tile whose output alone
            # overflows yields none, and the next k may hold the best tile)
            fresh = [g for g in _narrowed(ctx, shape, gran, resident, kept, held)
                     if g not in tried]
            narrowings += bool(fresh)
            for narrower in fresh:
                tried.add(narrower)
                wait(narrower, _tie_rank(narrower))
    return found if found is None or found.latency * ctx.unit <= limit else None


def least_floor(ctx: ScoringContext, ops: tuple[int, ...]) -> Fraction | None:
    """The least floor (max of compute and slow-memory traffic, as ``_search`` orders
    them) of the candidates ``best_config`` may take for the op set with nothing retained,
    None when it has none (memoized). A candidate counts when its first step may fit, or,
    with ``ctx.every_tile``, that of a tile no wider on any axis than ``_narrowed`` goes
    (a narrower tile pays at least the compute and the traffic of a wider one); every
    candidate counts when none does (nothing fits then, which the search finds fast).
    About a fifth of a search's cost; what lazy scoring raises an op set's
    ``op_set_roofline`` to before scoring it (``guided.score_plain_along_paths``)."""
    return ctx.memo("least floor", ops, lambda: _least_floor(ctx, ctx.shape(ops)))


def _least_floor(ctx: ScoringContext, shape: SubgraphShape) -> Fraction | None:
    templates = templates_of(ctx, shape.ops)
    nothing: frozenset[int] = frozenset()
    written = sum(ctx.graph.size(t) for t in shape.outputs)
    computes: dict[Granularity, int] = ctx.memo("compute floors", shape.ops, dict)
    loads: dict[Granularity, int] = ctx.memo("load floors", (shape.ops, nothing), dict)

    def may_fit(gran: Granularity) -> bool:
        w, h, k = gran
        side = min(w, h) // 2 + 1  # w and h shrink together down to this, each alone less
        narrowest = (side, side, k // 2 + 1) if ctx.every_tile else gran
        return any(first_step_floor(ctx, templates, g, nothing, nothing) <= ctx.capacity
                   for g in dict.fromkeys((gran, narrowest)))

    best = least = math.inf
    for tiles, _, gran in reversed(ctx.memo("candidates", shape.ops,
                                            lambda: _candidates(ctx, shape))):
        if tiles >= best:
            break  # the tile-count floor only grows from here, and the floor is above it
        if gran not in computes:
            computes[gran] = op_set_compute(ctx, shape, templates, gran)
        if gran not in loads:
            loads[gran] = load_floor(ctx, templates, gran, nothing)
        floor = max(computes[gran], (loads[gran] + written) * ctx.per_element)
        least = min(least, floor)
        if floor < best and may_fit(gran):
            best = floor
    found = best if best < math.inf else least
    return None if found == math.inf else ctx.latency(found)


def _narrowed(ctx: ScoringContext, shape: SubgraphShape, gran: Granularity,
              resident: frozenset[int], kept: frozenset[int], held: int) -> list[Granularity]:
    """For a candidate that does not fit, the largest tiles below it that may: shrinking
    w, h or k alone, or w and h together, down to half their value. S9 allows every
    integer, and the tile that just fits (say 86 x 86 with a whole K of 128) can beat
    every power of two by far. A shrink is found on the first step's working set (cheap),
    then on every step's (``peak_fits``)."""
    g = ctx.graph
    templates = templates_of(ctx, shape.ops)
    axes: list[tuple[int, ...]] = [(0,), (1,), (0, 1)]
    if shape.has_matmul:
        axes.append((2,))
    out = []
    for moved in axes:
        top = min(gran[a] for a in moved)
        if top == 1:
            continue

        def at(value: int, moved: tuple[int, ...] = moved) -> Granularity:
            w, h, k = (value if a in moved else gran[a] for a in range(3))
            return w, h, k

        def first_fits(value: int) -> bool:
            trial = at(value)
            return held + first_step_floor(ctx, templates, trial, resident, kept) <= ctx.capacity

        def all_fit(value: int) -> bool:
            return peak_fits(ctx, shape.ops, at(value), resident, kept, ctx.capacity - held)

        lo = top // 2 + 1
        value = _largest(first_fits, lo, top - 1)
        if value is not None and not all_fit(value):
            # most often nothing in the range fits once every step counts: the least value
            # settles that with one check instead of a whole search
            if value == lo or not all_fit(lo):
                value = None
            else:
                found = _largest(all_fit, lo + 1, value - 1)
                value = lo if found is None else found
        # S6.4 holds from some value up (w, h >= K, or k >= K), fitting up to some value:
        # the largest that fits is the answer if it meets S6.4, else nothing does
        if value is not None and prologue_issue(g, shape, at(value)) is None:
            out.append(at(value))
    return out


def _largest(holds: Callable[[int], bool], lo: int, hi: int) -> int | None:
    """The largest value in ``lo..hi`` where a property that only fails above some value
    holds, None if it holds nowhere."""
    found = None
    while lo <= hi:
        mid = (lo + hi) // 2
        if holds(mid):
            found, lo = mid, mid + 1
        else:
            hi = mid - 1
    return found


def _candidates(ctx: ScoringContext, shape: SubgraphShape
                ) -> list[tuple[int, tuple[int, int, int], Granularity]]:
    """(tile-count compute floor, tie rank, granularity) of every legal granularity,
    largest first (the search pops from the end)."""
    groups = compute_groups(ctx, shape)  # ops with one output shape share a factor
    computes: dict[tuple[int, int], int] = {}
    out = []
    for gran in ctx.granularities(shape.ops):
        w, h, _ = gran
        if (w, h) not in computes:
            computes[w, h] = sum(weight * tile_area(ctx, key, w, h)
                                 for key, weight in groups.items())
        out.append((computes[w, h], _tie_rank(gran), gran))
    return sorted(out, reverse=True)


def _tie_rank(gran: Granularity) -> tuple[int, int, int]:
    w, h, k = gran
    return -w * h, -k, -w
