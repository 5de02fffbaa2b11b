"""Lower bounds on one subgraph's latency and working set, cheaper than its exact score
(``closed_form.py``): what the best-config search prunes with (``score.py``) and what the
cover bound prices op sets with (``bound/``).

* per op, the compute it cannot avoid at a tile size (``op_floor``, ``least_compute``;
  summed over an op set at many tile sizes: ``tile_compute_table``);
* from a subgraph's templates: its firings' compute (``firing_floors``; with the ops'
  floors, ``op_set_compute``), the elements it must load (``load_floor``) and its first
  step's working set (``first_step_floor``, its terms apart for sharing:
  ``first_step_terms``, and its least over every granularity: ``least_first_step``,
  ``least_first_step_terms``), none of which needs a ``Plan``; what retaining adds to
  its first and its last step (``kept_in_first_step``, ``kept_by_last_step``);
* from a plan's steps: the least latency of every traversal (``any_order_floor``) and
  whether some traversal's peak may fit (``peak_fits``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from solver.deadline import now
from solver.fusion.closed_form import (
    ALONG_COLUMN,
    ALONG_ROW,
    START,
    Granularity,
    Relation,
    Run,
    State,
    Templates,
    plan_of,
)
from solver.fusion.context import ScoringContext, ScoringTimeout
from solver.fusion.problem import SubgraphShape, ceil_div

STEPS_PER_CHECK = 256
"""Steps ``peak_fits`` checks between two readings of the deadline (about 9 ms of them)."""


def any_order_floor(ctx: ScoringContext, ops: tuple[int, ...], gran: Granularity,
                    resident: frozenset[int], kept: frozenset[int],
                    first_tile: bool = True) -> int | None:
    """A lower bound on the latency of every traversal, custom ones included (None on a
    plan with prone axes, where a tile's predecessor would have to be named).

    Only a tile's first k-step depends on the order, through the step before it: the last
    step of another tile, in its row, its column or neither. Each tile is priced entered
    from each of those with every slice and whole tensor any step can hold present; a
    step's loads only fall as more is present, so that is the least any order pays. Only
    so many tiles can be entered along a row or a column (``least_entries``). With
    ``first_tile``, one tile comes first, entered with nothing before it but the resident
    tensors, and is priced so, all of its k-steps; the others are entered from a tile
    before them, and the least over which class of tile comes first stands (a 6-op chain's
    first tile loads its three weights, which the other seven of its column reuse; a
    3 x 2 grid's first tile loads both strips, and the five others are entered along a
    column at most four times). Without it, every tile is priced entered from a neighbour,
    the first counted once more among the entries (cheaper to find: see
    ``pricing.least``).
    """
    plan = plan_of(ctx, ops, gran)
    if plan.prone_rows or plan.prone_cols:
        return None
    run = Run(plan, resident, kept)
    everything: State = (sum(plan.load_bit.values()),
                         sum(run.bits[t] for t in plan.full if t in run.bits), (-1, -1))
    if plan.ntr == plan.ntc == 1:
        return run.tile(0, 0, (False, False), START).latency
    entries = [rel for rel, possible in ((ALONG_ROW, plan.ntc > 1),
                                         (ALONG_COLUMN, plan.ntr > 1),
                                         ((False, False), plan.ntr > 1 and plan.ntc > 1))
               if possible]
    rows = list(zip(plan.row_starts, plan.row_starts[1:] + [plan.ntr], strict=True))
    cols = list(zip(plan.col_starts, plan.col_starts[1:] + [plan.ntc], strict=True))
    groups: list[tuple[int, dict[Relation, int]]] = []
    cold: list[int] = []  # per class of tile, what it costs coming first
    for ri, (r0, r1) in enumerate(rows):
        for ci, (c0, c1) in enumerate(cols):
            groups.append(((r1 - r0) * (c1 - c0),
                           {rel: run.tile(ri, ci, rel, everything).latency for rel in entries}))
            if first_tile:
                cold.append(run.tile(ri, ci, (False, False), START).latency)
    # moves between two tiles of one row: at most ntc - 1 per row; of one column likewise
    caps = {ALONG_ROW: plan.ntr * (plan.ntc - 1), ALONG_COLUMN: plan.ntc * (plan.ntr - 1)}
    if not first_tile:
        return least_entries(groups, {rel: cap + 1 for rel, cap in caps.items()})
    return min(first + least_entries([(n - (i == j), costs)
                                      for j, (n, costs) in enumerate(groups) if n > (i == j)],
                                     caps)
               for i, first in enumerate(cold))


def least_entries(groups: Sequence[tuple[int, Mapping[Relation, int]]],
                  caps: Mapping[Relation, int]) -> int:
    """A lower bound on the tiles' entry costs summed (``groups``: how many tiles, and what
    one costs entered by each relation) when at most ``caps[rel]`` tiles are entered by
    ``rel``: a traversal moves between two tiles of one row at most ``ntc - 1`` times per
    row (those moves chain the row's tiles), of one column ``ntr - 1`` times per column
    (``any_order_floor`` adds one to each cap where the first tile is counted among the
    entered ones). Were every tile entered its cheapest way, a
    column-snake's 3 x 2 grid would have five moves down a column where it has four.

    Lagrangian: a price ``lam[rel] >= 0`` on each capped relation gives
    ``sum(tiles x min(cost + lam)) - sum(lam x cap)``, below the least sum for any prices
    (weak duality); the prices are raised one relation at a time to the best of their
    breakpoints, twice around."""
    lam = {rel: 0 for rel in caps}

    def dual(prices: Mapping[Relation, int]) -> int:
        return sum(n * min(c + prices.get(rel, 0) for rel, c in costs.items())
                   for n, costs in groups) - sum(prices[rel] * cap for rel, cap in caps.items())

    best = dual(lam)
    for _ in range(2):
        for rel in caps:
            points = {0}
            for _, costs in groups:
                if rel in costs:
                    rest = [c + lam.get(r, 0) for r, c in costs.items() if r != rel]
                    if rest and min(rest) > costs[rel]:
                        points.add(min(rest) - costs[rel])
            value, lam[rel] = max((dual({**lam, rel: x}), x) for x in points)
            best = max(best, value)
    return best


def peak_fits(ctx: ScoringContext, ops: tuple[int, ...], gran: Granularity,
              resident: frozenset[int], kept: frozenset[int], room: int) -> bool:
    """Whether the peak working set of some traversal may fit in ``room``, without the
    resident tensors (as ``first_step_floor``): every step entered with nothing
    present fits, since a step holds its own slices whatever came before and only keeps
    more whole from a step before. Stops at the first step that cannot (each tile's last
    k-step first: outputs and retained tiles peak there), and past ``ctx.deadline``
    (raising ``ScoringTimeout``): where every step fits, all are walked, and three
    2,048-deep MatMuls at 17 x 17 x 4 have 29,287 classes of them (0.5-1.3 s)."""
    plan = plan_of(ctx, ops, gran)
    steps = ((ri, ci, ki) for ri in range(len(plan.row_starts))
             for ci in range(len(plan.col_starts))
             for ki in reversed(range(len(plan.k_runs(ri, ci)[0]))))
    # counted from 1: a short walk reads no clock (a work clock charges each reading)
    for n, (ri, ci, ki) in enumerate(steps, 1):
        if n % STEPS_PER_CHECK == 0 and ctx.deadline is not None and now() > ctx.deadline:
            raise ScoringTimeout
        if plan.entered_ws(ri, ci, ki, resident, kept) > room:
            return False
    return True


def firing_floors(ctx: ScoringContext, tpl: Templates, gran: Granularity,
                  least_k: int | None = None) -> dict[int, int]:
    """Per op, compute (in ``ctx`` units) its firings cost at ``gran`` at the least:
    every firing of a template over all steps where a seed of it is active, at the
    proportional (streamed) rate; identical firings of one op are charged once, so an
    op pays at least its costliest template (S8). This sees what tile counts miss: an
    upstream MatMul of a chain is recomputed in every k-step.

    With ``least_k``, a floor for every k in ``[least_k, k]`` (same specs): tile and
    k-step counts only fall as w, h and k grow, but a firing streamed on both axes
    grows with k, so that one is taken at its least over the range."""
    w, h, k = gran
    depths = range(least_k or k, k + 1)
    out: dict[int, int] = {}
    for q, r, c, red, rows, cols, weight, extents in ctx.memo(
            "firing terms", tpl.shape.ops, lambda: _firing_terms(ctx, tpl)):
        r = "T" if r == "T" and h < rows else "K" if r == "K" and k < rows else "F"
        c = "T" if c == "T" and w < cols else "K" if c == "K" and k < cols else "F"
        best = 0
        for height, width, root_depth in extents:
            ntr, ntc = ceil_div(height, h), ceil_div(width, w)
            # sum over tiles and k-steps of the firing's rows x columns: a tile axis
            # sums to its extent, a k-step axis sums to its extent once per tile, a
            # whole axis is its extent in every tile and step
            if r == c == "K":
                area = min((rows // d) * d * d + (rows % d) ** 2 for d in depths) \
                    * ntr * ntc
            else:
                area = rows * cols * (ntr if r != "T" else 1) * (ntc if c != "T" else 1)
                if "K" not in (r, c) and red != "K" and root_depth:
                    area *= ceil_div(root_depth, k)
            best = max(best, area)
        out[q] = max(out.get(q, 0), weight * best)
    return out


def _firing_terms(ctx: ScoringContext, tpl: Templates
                  ) -> list[tuple[int, str, str, str | None, int, int, int,
                                  tuple[tuple[int, int, int], ...]]]:
    """``firing_floors``' granularity-free terms per firing: (op, row spec, column spec,
    reduction, output rows, output columns, compute per unit of area, its seeds'
    extents)."""
    p, g = ctx.problem, ctx.graph
    out = []
    for (q, r, c, red), seeds in tpl.firings.items():
        target = p.outputs[q][0]
        depth = (ctx.reduction_units(q, g.reduction_length(q)) if red is not None
                 else ctx.reduction_den)
        out.append((q, r, c, red, p.heights[target], p.widths[target],
                    ctx.base_units[q] * depth, tpl.extents(seeds)))
    return out


def op_set_compute(ctx: ScoringContext, shape: SubgraphShape, tpl: Templates,
                   gran: Granularity, least_k: int | None = None) -> int:
    """Compute every schedule of the op set pays at ``gran`` (or, with ``least_k``, at
    every k from it up), in ``ctx`` units: per op, the larger of its tile floor
    (``op_floor``) and its firings' (``firing_floors``)."""
    w, h, _ = gran
    firings = firing_floors(ctx, tpl, gran, least_k)
    tables = ctx.memo("op floor tables", shape.ops,
                      lambda: [op_floors(ctx, shape, q) for q in shape.ops])
    return sum(max(at(w, h), firings.get(q, 0)) for q, at in zip(shape.ops, tables, strict=True))


def first_step_floor(ctx: ScoringContext, tpl: Templates, gran: Granularity,
                     resident: frozenset[int], kept: frozenset[int]) -> int:
    """A lower bound on the working set of the first step (tile 0, k-step 0), without
    the previous subgraph's retained tensors, that needs no ``Plan``: slices of one
    tensor and role that a prone coincidence might merge count as their largest."""
    held, active = _first_step_outputs(ctx, tpl, gran)
    return held + kept_in_first_step(ctx, tpl, kept) + sum(
        _first_step_load(ctx, t, roles, gran, active)
        for t, roles in tpl.by_tensor.items() if t not in resident)


def first_step_terms(ctx: ScoringContext, tpl: Templates, gran: Granularity
                     ) -> tuple[int, dict[int, int]]:
    """``first_step_floor``'s terms at ``gran``: the output tiles, and what each tensor
    it may load adds (a resident one adds nothing), apart so that every arrival of one op
    set can share them."""
    held, active = _first_step_outputs(ctx, tpl, gran)
    return held, {t: _first_step_load(ctx, t, roles, gran, active)
                  for t, roles in tpl.by_tensor.items()}


def least_first_step(ctx: ScoringContext, tpl: Templates, resident: frozenset[int],
                     kept: frozenset[int], either: Mapping[int, int] | None = None) -> int:
    """A lower bound on ``first_step_floor`` at every granularity: whether any can fit
    (``least_first_step_terms``; memoized per op set, every arrival asks it)."""
    terms = ctx.memo("least first step", tpl.shape.ops, lambda: least_first_step_terms(ctx, tpl))
    return held_in_first_step(terms, resident, either) + kept_in_first_step(ctx, tpl, kept)


def held_in_first_step(terms: tuple[int, dict[int, int]], resident: frozenset[int],
                       either: Mapping[int, int] | None = None) -> int:
    """A first step's working set from its terms (``first_step_terms`` or their least),
    without the resident tensors and the retained ones. A tensor in ``either`` (its size)
    may be resident or not: it adds the lesser of its slices and its size, what it holds
    either way (its slices may be two, larger together than it is)."""
    outputs, loaded = terms
    either = either or {}
    return outputs + sum(min(n, either[t]) if t in either else n
                         for t, n in loaded.items() if t not in resident)


def least_first_step_terms(ctx: ScoringContext, tpl: Templates,
                           tile: tuple[int, int] | None = None) -> tuple[int, dict[int, int]]:
    """``first_step_terms`` at their least over every granularity (with ``tile``, every
    one of that w x h), per tensor apart: an output tile holds at least one element.

    Not the terms at 1 x 1 x 1: a tensor's first-step slices grow with w, h and k only
    until an axis reaches one of its extents, where a tile or k-slice becomes the whole
    axis and may merge with a slice of another role (a root's k-slice of an LHS and a
    head's full-width slice of it, once k reaches the width), or until k reaches the
    deepest root, where every seed is active in the first step. So each tensor is taken
    at its least over the corners where those regions start (``_region_starts``)."""
    starts = ctx.memo("first step regions", tpl.shape.ops, lambda: _region_starts(ctx, tpl))
    if tile is None:
        outputs = len(tpl.shape.outputs)
    else:
        outputs = _first_step_outputs(ctx, tpl, (*tile, 1))[0]
    loads = {}
    for t, roles in tpl.by_tensor.items():
        ws, hs, ks = starts[t]
        if tile is not None:
            ws, hs = (tile[0],), (tile[1],)
        loads[t] = min(_first_step_load(ctx, t, roles, (w, h, k), active)
                       for w in ws for h in hs for k, active in ks)
    return outputs, loads


def _region_starts(ctx: ScoringContext, tpl: Templates
                   ) -> dict[int, tuple[tuple[int, ...], tuple[int, ...],
                                        tuple[tuple[int, int], ...]]]:
    """Per tensor the op set loads, the values of w, of h and of k (with the seeds active
    there) where its first-step load may fall: 1, where a tile spec reaches its width
    (height), where a k-step spec reaches the extent it runs along, and for k where the
    first step becomes the last (the deepest root)."""
    p = ctx.problem
    deepest = max(tpl.root_depths, default=1)
    shallow, deep = _active_seeds(ctx, tpl, 1), _active_seeds(ctx, tpl, deepest)
    out = {}
    for t, roles in tpl.by_tensor.items():
        height, width = p.heights[t], p.widths[t]
        rows = {r for found in roles.values() for r, _, _ in found}
        cols = {c for found in roles.values() for _, c, _ in found}
        ks = {1, deepest}
        if "K" in rows:
            ks.add(height)
        if "K" in cols:
            ks.add(width)
        out[t] = ((1, width) if "T" in cols and width <= ctx.nw else (1,),
                  (1, height) if "T" in rows and height <= ctx.nh else (1,),
                  tuple((k, deep if k >= deepest else shallow) for k in ks if k <= ctx.nk))
    return out


def kept_in_first_step(ctx: ScoringContext, tpl: Templates, kept: frozenset[int]) -> int:
    """What retaining ``kept`` adds to the first step: under the accumulate rule, every
    retained intermediate whole."""
    if ctx.rules.retained_output_ws != "accumulate":
        return 0
    return sum(ctx.graph.size(t) for t in kept if t in tpl.shape.ephemerals)


def kept_by_last_step(ctx: ScoringContext, kept: Iterable[int]) -> int:
    """What retaining ``kept`` (tensors the subgraph produces) holds in its last step:
    under the accumulate rule (S12), every one whole, an output having gathered all its
    tiles by then."""
    if ctx.rules.retained_output_ws != "accumulate":
        return 0
    return sum(ctx.graph.size(t) for t in kept)


def _first_step_outputs(ctx: ScoringContext, tpl: Templates, gran: Granularity
                        ) -> tuple[int, int]:
    """The first step's output tiles, and the seeds it serves (bit mask)."""
    w, h, k = gran
    p = ctx.problem
    return (sum(min(w, p.widths[t]) * min(h, p.heights[t]) for t in tpl.shape.outputs),
            _active_seeds(ctx, tpl, k))


def _active_seeds(ctx: ScoringContext, tpl: Templates, k: int) -> int:
    """The seeds the first step serves (bit mask): the roots' alone, unless it is also
    the last k-step or the epilogue runs in the first one."""
    nks = max((ceil_div(depth, k) for depth in tpl.root_depths), default=1)
    return (1 << len(tpl.seeds)) - 1 if nks == 1 or ctx.rules.epilogue_step == "first" \
        else tpl.root_seeds


def _first_step_load(ctx: ScoringContext, t: int, roles: dict[str, list[tuple[str, str, int]]],
                     gran: Granularity, active: int) -> int:
    """What tensor ``t`` (loaded in ``roles``) holds in the first step."""
    w, h, k = gran
    height, width = ctx.problem.heights[t], ctx.problem.widths[t]
    # a spec normalized to this granularity, with its slice's extent on that axis
    row_of = {"T": ("T", h) if h < height else ("F", height),
              "K": ("K", k) if k < height else ("F", height), "F": ("F", height)}
    col_of = {"T": ("T", w) if w < width else ("F", width),
              "K": ("K", k) if k < width else ("F", width), "F": ("F", width)}
    adds = 0
    for found in roles.values():
        specs: dict[tuple[str, str], int] = {}
        for r, c, seeds in found:
            if seeds & active:
                (rows, n_rows), (cols, n_cols) = row_of[r], col_of[c]
                specs[rows, cols] = n_rows * n_cols
        if not specs:
            continue
        if ("F", "F") in specs:
            return height * width  # the whole tensor: its other roles' slices are in it
        if len(specs) == 1:
            adds += next(iter(specs.values()))
            continue
        rows = {r for r, _ in specs}
        cols = {c for _, c in specs}
        merged = {"T", "K"} <= rows or {"T", "K"} <= cols
        adds += max(specs.values()) if merged else sum(specs.values())
    return adds


def load_floor(ctx: ScoringContext, tpl: Templates, gran: Granularity,
               resident: frozenset[int]) -> int:
    """Elements any schedule at ``gran`` loads from slow memory (a lower bound, S11).

    Every boundary input is loaded whole at least once. A slice on a k-step range is
    never present in the step before (that one had another k-step), so unless the
    tensor is also required whole or a tile range may coincide with it, its k-loop
    loads the whole tensor again in every tile row (column) its rows (columns) do not
    follow.
    """
    w, h, k = gran
    p = ctx.problem
    total = 0
    for t in tpl.by_tensor:
        if t in resident:
            continue
        height, width = p.heights[t], p.widths[t]
        size = height * width
        spans = (h < height, k < height, w < width, k < width)
        sweeps = ctx.memo("load sweeps", (tpl.shape.ops, t, spans),
                          lambda t=t, spans=spans: _load_sweeps(tpl, t, spans))
        if sweeps is None:
            total += size
            continue
        swept = sum(size * max((ceil_div(rows, h) if along_rows else 1)
                               * (ceil_div(cols, w) if along_cols else 1)
                               for rows, cols, _ in extents)
                    for along_rows, along_cols, extents in sweeps)
        total += max(size, swept)
    return total


def _load_sweeps(tpl: Templates, t: int, spans: tuple[bool, bool, bool, bool]
                 ) -> list[tuple[bool, bool, tuple[tuple[int, int, int], ...]]] | None:
    """How ``load_floor`` counts tensor ``t`` at every granularity where its tile and
    k-slice cover its extents alike (``spans``: h, k below its height; w, k below its
    width): None when it is loaded whole once, else per normalized spec on a k-step range
    whether its rows and its columns repeat across tile rows and columns, and the seeds'
    extents it repeats over."""
    tile_rows, k_rows, tile_cols, k_cols = spans
    specs: dict[tuple[str, str, str], int] = {}
    for role, found in tpl.by_tensor[t].items():
        for r, c, seeds in found:
            r = "T" if r == "T" and tile_rows else "K" if r == "K" and k_rows else "F"
            c = "T" if c == "T" and tile_cols else "K" if c == "K" and k_cols else "F"
            specs[role, r, c] = specs.get((role, r, c), 0) | seeds
    rows = {r for _, r, _ in specs}
    cols = {c for _, _, c in specs}
    if any(r == c == "F" for _, r, c in specs) or {"T", "K"} <= rows or {"T", "K"} <= cols:
        return None
    return [(r != "T", c != "T", tpl.extents(seeds)) for (_, r, c), seeds in specs.items()
            if "K" in (r, c) and (r, c) != ("K", "K")]


def op_floor(ctx: ScoringContext, shape: SubgraphShape, q: int, w: int, h: int) -> int:
    """Compute op ``q`` cannot avoid at ``w x h``, in ``ctx`` units (S8)."""
    return op_weight(ctx, q) * tile_area(ctx, floor_shape(ctx, shape, q), w, h)


def op_floors(ctx: ScoringContext, shape: SubgraphShape, q: int) -> Callable[[int, int], int]:
    """``op_floor`` of ``q`` at any ``w x h``, shared by every op set where ``q`` fires the
    same way (the lower bound asks it of thousands of op sets)."""
    key = floor_shape(ctx, shape, q)
    table: dict[tuple[int, int], int] = ctx.memo("op floors", (q, key[2]), dict)

    def at(w: int, h: int) -> int:
        found = table.get((w, h))
        if found is None:
            found = table[w, h] = op_floor(ctx, shape, q, w, h)
        return found

    return at


def compute_groups(ctx: ScoringContext, shape: SubgraphShape
                   ) -> dict[tuple[int, int, bool], int]:
    """The op set's ops by ``floor_shape``, with their ``op_weight`` summed: ops of one
    output shape pay one area, so their compute floor at any tile is one product."""
    groups: dict[tuple[int, int, bool], int] = {}
    for q in shape.ops:
        key = floor_shape(ctx, shape, q)
        groups[key] = groups.get(key, 0) + op_weight(ctx, q)
    return groups


def tile_compute_table(ctx: ScoringContext, shape: SubgraphShape, ws: Sequence[int],
                       hs: Sequence[int]) -> list[list[int]]:
    """``op_floor`` summed over the op set at every ``w`` in ``ws`` (outer) and ``h`` in
    ``hs`` (inner), exactly: a tiled group's area (``compute_groups``) is its padded rows
    at h times its padded columns at w, so the table is a few outer products (pricing
    asks it of every op set, at hundreds of tiles)."""
    groups = compute_groups(ctx, shape)
    untiled = sum(weight * rows * cols for (rows, cols, tiled), weight in groups.items()
                  if not tiled)
    factors = [(weight, [_padded(rows, h, ctx.nh) * ctx.nh for h in hs],
                [_padded(cols, w, ctx.nw) * ctx.nw for w in ws])
               for (rows, cols, tiled), weight in groups.items() if tiled]
    return [[untiled + sum(weight * by_h[j] * by_w[i] for weight, by_h, by_w in factors)
             for j in range(len(hs))] for i in range(len(ws))]


def least_compute(ctx: ScoringContext, q: int) -> int:
    """Compute op ``q`` pays in any subgraph, in ``ctx`` units: its whole output at its
    least area (S8; ``FusionGraph.least_area``)."""
    return op_weight(ctx, q) * ctx.graph.least_area(q)


def op_set_roofline(ctx: ScoringContext, shape: SubgraphShape) -> int:
    """Latency (in ``ctx`` units) any config of the op set with nothing retained pays at
    the least, in O(ops): each op's ``least_compute``, or one load of every boundary input
    and one write of every output, whichever is more."""
    compute = sum(least_compute(ctx, q) for q in shape.ops)
    size = ctx.graph.size
    traffic = sum(size(t) for t in shape.inputs) + sum(size(t) for t in shape.outputs)
    return max(compute, traffic * ctx.per_element)


def floor_shape(ctx: ScoringContext, shape: SubgraphShape, q: int) -> tuple[int, int, bool]:
    """(rows, columns, tiled) of an op's output: roots and Pointwise ops producing a
    subgraph output that feed no MatMul of the op set fire once on every tile, paying
    whole native tiles; every other op pays at least its least area (its area share on
    each dimension some subgraph may stream, whole native tiles on the others). (A
    Pointwise op whose output is also a root's operand fires on that operand's k-slices,
    not on tiles: a stress test found a cover above a schedule that ran one at 32 x 32
    under a 64-wide native tile.)"""
    out = ctx.problem.outputs[q][0]
    if q in shape.roots or (
            any(t in shape.outputs for t in ctx.problem.outputs[q])
            and q not in ctx.memo("feed a matmul", shape.ops,
                                  lambda: _feeding_matmuls(ctx, shape))):
        return ctx.problem.heights[out], ctx.problem.widths[out], True
    return *ctx.graph.least_extents(q), False


def _feeding_matmuls(ctx: ScoringContext, shape: SubgraphShape) -> frozenset[int]:
    """The ops of ``shape`` whose outputs reach one of its MatMuls (within it): walked
    back from the MatMuls through the producers of their inputs in ``shape``."""
    feeding: set[int] = set()
    stack = [q for q in shape.ops if ctx.graph.is_matmul(q)]
    while stack:
        for t in ctx.problem.inputs[stack.pop()]:
            q = shape.producer.get(t)
            if q is not None and q not in feeding:
                feeding.add(q)
                stack.append(q)
    return frozenset(feeding)


def op_weight(ctx: ScoringContext, q: int) -> int:
    """Base cost times the reduction factor of a whole K (MatMuls), per unit of area."""
    g = ctx.graph
    depth = (ctx.reduction_units(q, g.reduction_length(q)) if g.is_matmul(q)
             else ctx.reduction_den)
    return ctx.base_units[q] * depth


def tile_area(ctx: ScoringContext, key: tuple[int, int, bool], w: int, h: int) -> int:
    """Area of an output in 1/(nh*nw) native tiles: padded to whole native tiles per tile
    when the op fires on tiles, its exact share otherwise."""
    rows, cols, tiled = key
    if not tiled:
        return rows * cols
    return _padded(rows, h, ctx.nh) * ctx.nh * _padded(cols, w, ctx.nw) * ctx.nw


def _padded(extent: int, tile: int, native: int) -> int:
    """Native tiles paid along one axis when ``extent`` is cut into tiles of ``tile``."""
    full, rest = divmod(extent, tile)
    return full * ceil_div(tile, native) + (ceil_div(rest, native) if rest else 0)
