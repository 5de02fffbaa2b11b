"""Latency and peak working set of one subgraph in closed form over classes of steps.

The reference (``simulate.py``) derives every step's slices and firings from scratch. Here
the derivation is done once per subgraph, symbolically: each requirement becomes a
*template* ``(tensor, role, row spec, column spec)`` whose rows and columns are the tile's
(``T``), the current k-step's (``K``) or the whole extent (``F``), and which is active in a
step when one of the seeds it comes from (a root's k-loop, a tile-level seed) is. A step
then depends only on

* the class of its tile row and column (which extents it clips or masks),
* the class of its k-step (which roots still reduce, partial last k-steps, the epilogue
  step, the last step),
* the state the previous step leaves: which slices were present, which tensors were
  resident whole; and whether the tile row / column is the same.

Consecutive steps (tiles, rows) of one class leave the same state after at most two
repetitions (a whole tensor stays resident exactly while it is required, an idempotent
update), so a run of n of them costs ``first + (n-1) x steady``: the work is proportional
to the number of classes, not of steps. Costs are integers in the context's unit.

Two different templates name the same concrete slice (or firing) only when one tensor
(op) is reached both through a tile range and a k-step range on the same axis, in the same
role, and the k-step happens to cover exactly the tile's range, or when an op is reached
through a spatial and a streamed whole extent. On such a *prone* axis every tile index is a
class of its own and each tile's k-loop is cut around its coincident k-step; in that step
the k-step slice takes the tile slice's identity, a coincident firing is charged once at
the cost of the first firing in the reference's derivation order, and on entering a tile
the slices are compared concretely with the previous tile's last step.

This module is the exact scorer only; the lower bounds drawn from the same templates and
plans (what the search prunes with and the cover bound prices with) are in ``floors.py``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import NamedTuple

from solver.fusion.context import ScoringContext
from solver.fusion.problem import SubgraphShape, ceil_div, k_steps
from solver.fusion.simulate import TraversalName

Traversal = TraversalName | tuple[int, ...]
Granularity = tuple[int, int, int]
Coord = tuple[int, int]  # exact tile row and column on prone axes, -1 elsewhere
# (slices present in the previous step, tensors resident whole, where that step was)
State = tuple[int, int, Coord]
Relation = tuple[bool, bool]  # (same tile row as the previous step, same tile column)
LoadKey = tuple[int, str, str, str]  # (tensor, role, row spec, column spec)

IN_TILE: Relation = (True, True)
ALONG_ROW: Relation = (True, False)
ALONG_COLUMN: Relation = (False, True)
START: State = (0, 0, (-1, -1))


def closed_form(ctx: ScoringContext, ops: tuple[int, ...], gran: Granularity,
                traversal: Traversal, resident: frozenset[int], kept: frozenset[int]
                ) -> tuple[int, int]:
    """(latency in ``ctx`` units, peak working set) of a structurally valid subgraph."""
    span = Run(plan_of(ctx, ops, gran), resident, kept).traverse(traversal)
    assert span.peak is not None
    return span.latency, span.peak


def plan_of(ctx: ScoringContext, ops: tuple[int, ...], gran: Granularity) -> Plan:
    return ctx.memo("plan", (ops, gran), lambda: Plan(ctx, templates_of(ctx, ops), gran))


def templates_of(ctx: ScoringContext, ops: tuple[int, ...]) -> Templates:
    return ctx.memo("templates", ops, lambda: Templates(ctx, ctx.shape(ops)))


# ---------------------------------------------------------------------------------------
# Symbolic requirements of a subgraph (granularity-independent), SEMANTICS.md S10


class _Seed(NamedTuple):
    """Where requirements start: a root's k-loop or a Pointwise subgraph output's tile."""

    root: int | None  # the root op, or None for a tile-level seed
    height: int       # extent of the seed's tile, which masks it on tiles outside
    width: int


class Templates:
    """Every requirement and firing of a subgraph as specs over (tile, k-step), with the
    seeds each comes from (bit masks over ``seeds``) and, for firings, the position at
    which the reference's depth-first derivation of each seed first reaches them."""

    def __init__(self, ctx: ScoringContext, shape: SubgraphShape):
        p, g = ctx.problem, ctx.graph
        self.shape = shape
        self.seeds: list[_Seed] = []
        self.loads: dict[LoadKey, int] = {}
        self.firings: dict[tuple[int, str, str, str | None], int] = {}
        self.order: dict[tuple[int, str, str, str | None], dict[int, int]] = {}
        seen: set[tuple] = set()

        def fire(key: tuple[int, str, str, str | None], bit: int) -> None:
            self.firings[key] = self.firings.get(key, 0) | bit
            self.order.setdefault(key, {}).setdefault(len(self.seeds) - 1, len(seen))

        def require(t: int, r: str, c: str, role: str, bit: int) -> None:
            if (t, r, c, role, bit) in seen:
                return
            seen.add((t, r, c, role, bit))
            if t not in shape.produced:
                self.loads[t, role, r, c] = self.loads.get((t, role, r, c), 0) | bit
                return
            q = shape.producer[t]
            if q in shape.roots:
                return
            if not g.is_matmul(q):
                fire((q, r, c, None), bit)
                for u in p.inputs[q]:
                    require(u, r, c, "pw", bit)
                return
            fire((q, r, c, "F"), bit)
            lhs, rhs = p.inputs[q]
            require(lhs, r, "F", "lhs", bit)
            require(rhs, "F", c, "rhs", bit)

        for q in shape.roots:
            out = p.outputs[q][0]
            bit = self._seed(_Seed(q, p.heights[out], p.widths[out]))
            fire((q, "T", "T", "K"), bit)
            lhs, rhs = p.inputs[q]
            require(lhs, "T", "K", "lhs", bit)
            require(rhs, "K", "T", "rhs", bit)
        for t in shape.outputs:
            if not g.is_matmul(shape.producer[t]):
                require(t, "T", "T", "pw", self._seed(_Seed(None, p.heights[t], p.widths[t])))
        # indexes the floors read (``floors.first_step_floor``)
        self._depths = [g.reduction_length(s.root) if s.root is not None else 0
                        for s in self.seeds]  # a root's K is at least 1
        self.root_depths = [depth for depth in self._depths if depth]
        self.root_seeds = sum(1 << i for i, s in enumerate(self.seeds) if s.root is not None)
        self._extents: dict[int, tuple[tuple[int, int, int], ...]] = {}
        self.by_tensor: dict[int, dict[str, list[tuple[str, str, int]]]] = {}
        for (t, role, r, c), seeds in self.loads.items():
            self.by_tensor.setdefault(t, {}).setdefault(role, []).append((r, c, seeds))

    def extents(self, seeds: int) -> tuple[tuple[int, int, int], ...]:
        """The distinct (height, width, root's reduction length or 0) of the seeds in a
        mask: all the floors read of them, and most of a large op set's seeds share a few
        (memoized per mask; the floors ask it at every granularity)."""
        found = self._extents.get(seeds)
        if found is None:
            found = self._extents[seeds] = tuple({
                (s.height, s.width, self._depths[i])
                for i, s in enumerate(self.seeds) if seeds >> i & 1})
        return found

    def _seed(self, seed: _Seed) -> int:
        self.seeds.append(seed)
        return 1 << (len(self.seeds) - 1)


# ---------------------------------------------------------------------------------------
# One subgraph at one granularity


class _Load(NamedTuple):
    role: str
    rows: str  # "T", "K" or "F" after normalization
    cols: str
    height: int
    width: int
    seeds: int


class _Firing(NamedTuple):
    op: int
    rows: str  # "T", "K", "Fs" (spatial whole extent) or "Fk" (streamed whole extent)
    cols: str
    reduction: str | None  # "K" (a root's k-step), "F" (a head's whole K), None (Pointwise)
    height: int
    width: int
    seeds: int
    order: dict[int, int]  # seed index -> first position in that seed's derivation


class _StepStatic(NamedTuple):
    tensors: tuple  # (tensor, whole slice active, ((bit, size, row tiled, col tiled, K), ..))
    areas: dict[int, int]  # tile area of every subgraph output
    last: bool


class Plan:
    """Templates of a subgraph normalized for one granularity, and its step classes."""

    def __init__(self, ctx: ScoringContext, tpl: Templates, gran: Granularity):
        p, g = ctx.problem, ctx.graph
        self.ctx, self.tpl, self.shape = ctx, tpl, tpl.shape
        self.w, self.h, self.k = gran
        self.ntr, self.ntc = self.shape.grid(self.w, self.h)
        nkq = k_steps(g, self.shape, self.k)
        self.nks = max(nkq.values(), default=1)
        self.last = self.nks - 1
        self.epilogue = self.last if ctx.rules.epilogue_step == "last" else 0
        self.seed_steps = [nkq[s.root] if s.root is not None else None for s in tpl.seeds]

        self.full: dict[int, int] = {}
        partial: dict[LoadKey, int] = {}
        for (t, role, r, c), seeds in tpl.loads.items():
            # a load does not care how a whole extent arose: Fs and Fk are both F
            rows = normal_spec(r, p.heights[t], self.h, self.k)[0]
            cols = normal_spec(c, p.widths[t], self.w, self.k)[0]
            if rows == cols == "F":
                self.full[t] = self.full.get(t, 0) | seeds
            else:
                partial[t, role, rows, cols] = partial.get((t, role, rows, cols), 0) | seeds
        self.partial: dict[int, list[_Load]] = {}
        for (t, role, rows, cols), seeds in sorted(partial.items()):
            self.partial.setdefault(t, []).append(
                _Load(role, rows, cols, p.heights[t], p.widths[t], seeds))
        merged: dict[tuple, tuple[int, dict[int, int]]] = {}
        for (q, r, c, red), seeds in tpl.firings.items():
            out = p.outputs[q][0]
            key = (q, normal_spec(r, p.heights[out], self.h, self.k),
                   normal_spec(c, p.widths[out], self.w, self.k), red)
            old_seeds, old_order = merged.get(key, (0, {}))
            order = dict(old_order)
            for i, pos in tpl.order[q, r, c, red].items():
                order[i] = min(pos, order.get(i, pos))
            merged[key] = (old_seeds | seeds, order)
        self.firings = [_Firing(q, r, c, red, p.heights[p.outputs[q][0]],
                                p.widths[p.outputs[q][0]], seeds, order)
                        for (q, r, c, red), (seeds, order) in merged.items()]

        # a slice whole in its rows but cut to the tile's columns (a MatMul's RHS strip at
        # k >= K) is what a column order can keep from tile to tile; without one, no
        # column order beats the row orders
        self.column_strips = any(rows == "F" and cols == "T" for _, _, rows, cols in partial)
        self.prone_rows, self.prone_cols = self._prone_axes(partial)
        self.load_bit = _load_bits(partial, self.prone_rows, self.prone_cols)
        self.bit_key = {bit: key for key, bit in self.load_bit.items()}
        self.prone_dims = (
            {ld.height for lds in self.partial.values() for ld in lds if ld.rows == "K"}
            | {f.height for f in self.firings if f.rows == "K"},
            {ld.width for lds in self.partial.values() for ld in lds if ld.cols == "K"}
            | {f.width for f in self.firings if f.cols == "K"})

        # only extents cut by tile rows (columns) make tile rows (columns) differ
        rows = [s.height for s in tpl.seeds] + [p.heights[t] for t in self.shape.outputs]
        cols = [s.width for s in tpl.seeds] + [p.widths[t] for t in self.shape.outputs]
        rows += [ld.height for lds in self.partial.values() for ld in lds if ld.rows == "T"]
        cols += [ld.width for lds in self.partial.values() for ld in lds if ld.cols == "T"]
        rows += [f.height for f in self.firings if f.rows == "T"]
        cols += [f.width for f in self.firings if f.cols == "T"]
        self.row_starts = (list(range(self.ntr)) if self.prone_rows
                           else _class_starts(set(rows), self.h, self.ntr))
        self.col_starts = (list(range(self.ntc)) if self.prone_cols
                           else _class_starts(set(cols), self.w, self.ntc))
        self.loaded_tensors = sorted(set(self.full) | set(self.partial))
        self.k_cuts = {0, self.epilogue, self.epilogue + 1, self.last}
        for n in nkq.values():
            self.k_cuts |= {n - 1, n}
        self._k_runs: dict[tuple[int, int], tuple[list[int], list[tuple[int, int]]]] = {}
        self._statics: dict[tuple[int, int, int], _StepStatic] = {}
        self._computes: dict[tuple[int, int, int], int] = {}

    def _prone_axes(self, partial: dict[LoadKey, int]) -> tuple[bool, bool]:
        """Axes on which a tile range and a k-step range of one identity may coincide."""
        groups: dict[tuple, list[tuple[str, str]]] = {}
        for t, role, rows, cols in partial:
            groups.setdefault((t, role), []).append((rows, cols))
        for f in self.firings:
            groups.setdefault(("op", f.op), []).append((f.rows, f.cols))
        prone = [False, False]
        for specs in groups.values():
            for a, b in combinations(specs, 2):
                tk = [{x, y} == {"T", "K"} for x, y in zip(a, b, strict=True)]
                may = [x == y or both or {x, y} == {"Fs", "Fk"}
                       for x, y, both in zip(a, b, tk, strict=True)]
                if all(may):
                    prone = [was or now for was, now in zip(prone, tk, strict=True)]
        return prone[0], prone[1]

    def row_size(self, extent: int, tr: int) -> int:
        return max(min(self.h, extent - tr * self.h), 0)

    def col_size(self, extent: int, tc: int) -> int:
        return max(min(self.w, extent - tc * self.w), 0)

    def k_size(self, extent: int, j: int) -> int:
        return max(min(self.k, extent - j * self.k), 0)

    def extent(self, spec: str, extent: int, index: int, j: int, along_rows: bool) -> int:
        """Concrete length of a spec's interval in tile row/column ``index`` and k-step j."""
        if spec == "T":
            return self.row_size(extent, index) if along_rows else self.col_size(extent, index)
        if spec == "K":
            return self.k_size(extent, j)
        return extent

    def interval(self, spec: str, extent: int, index: int, j: int, along_rows: bool
                 ) -> tuple[int, int]:
        """The concrete interval of a spec (first letter) in tile ``index``, k-step ``j``."""
        if spec[0] == "T":
            step = self.h if along_rows else self.w
            return index * step, min((index + 1) * step, extent)
        if spec[0] == "K":
            return j * self.k, min((j + 1) * self.k, extent)
        return 0, extent

    def effective(self, spec: str, extent: int, index: int, j: int, along_rows: bool) -> str:
        """A k-step range on a prone axis that covers exactly the tile's range is that range."""
        prone = self.prone_rows if along_rows else self.prone_cols
        if (spec == "K" and prone and self.interval("K", extent, index, j, along_rows)
                == self.interval("T", extent, index, j, along_rows)):
            return "T"
        return spec

    def k_runs(self, ri: int, ci: int) -> tuple[list[int], list[tuple[int, int]]]:
        """Starts and runs of k-step classes of a tile: the rule cuts, plus, on prone axes,
        the k-step whose range equals the tile's and the one after it."""
        key = (ri, ci) if self.prone_rows or self.prone_cols else (0, 0)
        found = self._k_runs.get(key)
        if found is None:
            cuts = set(self.k_cuts)
            for along_rows, index, dims in ((True, self.row_starts[ri], self.prone_dims[0]),
                                            (False, self.col_starts[ci], self.prone_dims[1])):
                if not (self.prone_rows if along_rows else self.prone_cols):
                    continue
                start = index * (self.h if along_rows else self.w)
                if start % self.k == 0:
                    j = start // self.k
                    if any(self.effective("K", d, index, j, along_rows) == "T" for d in dims):
                        cuts |= {j, j + 1}
            starts = sorted(c for c in cuts if 0 <= c < self.nks)
            found = self._k_runs[key] = (
                starts, list(zip(starts, starts[1:] + [self.nks], strict=True)))
        return found

    def active_seeds(self, tr: int, tc: int, j: int) -> int:
        mask = 0
        for i, seed in enumerate(self.tpl.seeds):
            if self.row_size(seed.height, tr) and self.col_size(seed.width, tc):
                steps = self.seed_steps[i]
                if (j < steps) if steps is not None else (j == self.epilogue):
                    mask |= 1 << i
        return mask

    def compute(self, active: int, tr: int, tc: int, j: int) -> int:
        """S8: the compute of a step, in the context's unit; identical firings charged once,
        at the cost of the first one the reference's derivation reaches."""
        ctx = self.ctx
        charged: dict[tuple, tuple[tuple[int, int], int]] = {}
        for f in self.firings:
            seeds = f.seeds & active
            if not seeds:
                continue
            ident = (f.op, self.effective(f.rows, f.height, tr, j, True)[0],
                     self.effective(f.cols, f.width, tc, j, False)[0])
            first = min((i, pos) for i, pos in f.order.items() if seeds >> i & 1)
            if ident in charged and charged[ident][0] < first:
                continue
            cost = ctx.base_units[f.op]
            cost *= _factor(f.rows, self.extent(f.rows[0], f.height, tr, j, True), ctx.nh)
            cost *= _factor(f.cols, self.extent(f.cols[0], f.width, tc, j, False), ctx.nw)
            if f.reduction == "K":
                cost *= ctx.reduction_units(f.op, self.k_size(ctx.graph.reduction_length(f.op), j))
            elif f.reduction == "F":
                cost *= ctx.reduction_units(f.op, ctx.graph.reduction_length(f.op))
            else:
                cost *= ctx.reduction_den
            charged[ident] = (first, cost)
        return sum(cost for _, cost in charged.values())

    def static(self, ri: int, ci: int, ki: int) -> _StepStatic:
        """What a step of these classes needs, independent of retention and history."""
        key = (ri, ci, ki)
        found = self._statics.get(key)
        if found is None:
            tr, tc, j = self.row_starts[ri], self.col_starts[ci], self.k_runs(ri, ci)[0][ki]
            active = self.active_seeds(tr, tc, j)
            tensors = []
            for t in self.loaded_tensors:
                whole = bool(self.full.get(t, 0) & active)
                parts: dict[LoadKey, tuple] = {}
                for ld in self.partial.get(t, ()):
                    if not ld.seeds & active:
                        continue
                    r = self.effective(ld.rows, ld.height, tr, j, True)
                    c = self.effective(ld.cols, ld.width, tc, j, False)
                    size = (self.extent(ld.rows, ld.height, tr, j, True)
                            * self.extent(ld.cols, ld.width, tc, j, False))
                    parts[t, ld.role, r, c] = (self.load_bit[t, ld.role, r, c], size,
                                               r == "T", c == "T", "K" in (r, c))
                if whole or parts:
                    tensors.append((t, whole, tuple(parts.values())))
            p = self.ctx.problem
            areas = {t: self.row_size(p.heights[t], tr) * self.col_size(p.widths[t], tc)
                     for t in self.shape.outputs}
            found = self._statics[key] = _StepStatic(tuple(tensors), areas, j == self.last)
        return found

    def step_compute(self, ri: int, ci: int, ki: int) -> int:
        """``compute`` of a step of these classes, memoized apart from ``static``: whether
        a granularity fits (``entered_ws``) needs only the latter."""
        key = (ri, ci, ki)
        found = self._computes.get(key)
        if found is None:
            tr, tc, j = self.row_starts[ri], self.col_starts[ci], self.k_runs(ri, ci)[0][ki]
            found = self._computes[key] = self.compute(self.active_seeds(tr, tc, j), tr, tc, j)
        return found

    def coincides(self, bit: int, ri: int, ci: int, before: int, coord: Coord,
                  rel: Relation) -> bool:
        """Whether the slice ``bit`` names in the first step of tile (ri, ci) is the slice
        ``before`` named in the previous tile's last step (at ``coord`` on prone axes)."""
        t, role, r, c = self.bit_key[bit]
        t0, role0, r0, c0 = self.bit_key[before]
        if (t, role) != (t0, role0):
            return False
        p = self.ctx.problem
        for along_rows, spec, spec0, index, index0, same, extent in (
                (True, r, r0, self.row_starts[ri], coord[0], rel[0], p.heights[t]),
                (False, c, c0, self.col_starts[ci], coord[1], rel[1], p.widths[t])):
            if self.prone_rows if along_rows else self.prone_cols:
                if (self.interval(spec, extent, index, 0, along_rows)
                        != self.interval(spec0, extent, index0, self.last, along_rows)):
                    return False
            elif spec != spec0 or spec == "K" or (spec == "T" and not same):
                return False
        return True

    def entered_ws(self, ri: int, ci: int, ki: int, resident: frozenset[int],
                   kept: frozenset[int]) -> int:
        """Working set of a step of these classes entered with nothing present (what
        ``Run.step`` holds from ``START``: its own slices, whole tensors it requires
        whole), without the previous subgraph's retained tensors."""
        st = self.static(ri, ci, ki)
        ws = sum(st.areas.values())
        if self.ctx.rules.retained_output_ws == "accumulate":
            ws += sum(self.ctx.graph.size(t) for t in kept if t in self.shape.ephemerals)
        for t, whole, parts in st.tensors:
            if t not in resident:
                ws += self.ctx.graph.size(t) if whole else sum(part[1] for part in parts)
        return ws


def _load_bits(partial: dict[LoadKey, int], prone_rows: bool, prone_cols: bool
               ) -> dict[LoadKey, int]:
    """A bit for every slice identity a step can name: each template, and each with its
    k-step range on a prone axis replaced by the tile range it coincides with."""
    keys: list[LoadKey] = []
    for t, role, r, c in sorted(partial):
        for rr in {r, "T"} if r == "K" and prone_rows else {r}:
            for cc in {c, "T"} if c == "K" and prone_cols else {c}:
                keys.append((t, role, rr, cc))
    return {key: 1 << i for i, key in enumerate(sorted(set(keys)))}


def normal_spec(raw: str, extent: int, tile: int, k: int) -> str:
    """Normalize a spec for a granularity: a tile or k-step covering the extent is whole.

    ``Fs`` is a whole extent that is spatial (paid in native tiles), ``Fk`` one reached by
    a k-step (streamed, paid proportionally).
    """
    if raw == "T":
        return "T" if tile < extent else "Fs"
    if raw == "K":
        return "K" if k < extent else "Fk"
    return "Fs"


def _factor(spec: str, n: int, native: int) -> int:
    """S8.2 dimension factor in 1/native: whole native tiles if spatial, a share if streamed."""
    return n if spec in ("K", "Fk") else ceil_div(n, native) * native


def _class_starts(extents: set[int], tile: int, count: int) -> list[int]:
    """First index of each run of tile rows (or columns) that clip every extent alike."""
    cuts = {0}
    for e in extents:
        cuts |= {e // tile, ceil_div(e, tile)}
    return sorted(c for c in cuts if 0 <= c < count)


# ---------------------------------------------------------------------------------------
# Composing steps into tiles, rows and the whole traversal


class Span(NamedTuple):
    """A contiguous run of steps: total latency, peak working set (relative to the retained
    output area completed before the run), retained output area it completes, final state."""

    latency: int
    peak: int | None
    area: int
    state: State


def _then(a: Span, b: Span) -> Span:
    if b.peak is None:
        peak = a.peak
    elif a.peak is None:
        peak = a.area + b.peak
    else:
        peak = max(a.peak, a.area + b.peak)
    return Span(a.latency + b.latency, peak, a.area + b.area, b.state)


def _repeat(unit: Callable[[State], Span], span: Span, n: int) -> Span:
    """``span`` followed by n runs of ``unit``, each entered with the previous one's state.

    As soon as a run leaves the state it found, every further run is identical.
    """
    state = span.state
    for i in range(n):
        s = unit(state)
        if s.state == state:
            m = n - i
            peak = None if s.peak is None else s.peak + (m - 1) * s.area
            return _then(span, Span(s.latency * m, peak, s.area * m, state))
        span = _then(span, s)
        state = s.state
    return span


class Run:
    """A plan with a given retention: steps, tiles and traversals, memoized by class."""

    def __init__(self, plan: Plan, resident: frozenset[int], kept: frozenset[int]):
        ctx = plan.ctx
        self.plan = plan
        self.per_element = ctx.per_element
        self.resident = resident
        self.written = [t for t in plan.shape.outputs if t not in kept]
        accumulate = ctx.rules.retained_output_ws == "accumulate"
        self.retained = [t for t in plan.shape.outputs if t in kept] if accumulate else []
        self.fixed = sum(ctx.graph.size(t) for t in resident)
        if accumulate:
            self.fixed += sum(ctx.graph.size(t) for t in kept if t in plan.shape.ephemerals)
        self.size = {t: ctx.graph.size(t) for t in plan.shape.consumed}
        self.bits = {t: 1 << i for i, t in enumerate(sorted(plan.shape.consumed))}
        self._steps: dict[tuple, Span] = {}
        self._tiles: dict[tuple, Span] = {}

    def step(self, ri: int, ci: int, ki: int, rel: Relation, state: State) -> Span:
        """S11/S12 for one step given the state the previous step left."""
        key = (ri, ci, ki, rel, state)
        found = self._steps.get(key)
        if found is not None:
            return found
        plan = self.plan
        st = plan.static(ri, ci, ki)
        same_row, same_col = rel
        present, whole_before, coord = state
        entering = rel != IN_TILE and (plan.prone_rows or plan.prone_cols)
        loaded = ws = present_now = whole_now = 0
        for t, whole, parts in st.tensors:
            if t in self.resident:
                continue
            tbit = self.bits[t]
            if whole or whole_before & tbit:
                whole_now |= tbit
                ws += self.size[t]
                if not whole_before & tbit:
                    loaded += self.size[t]
                continue
            for bit, size, row_tiled, col_tiled, streamed in parts:
                ws += size
                present_now |= bit
                reused = (present & bit and not streamed and (same_row or not row_tiled)
                          and (same_col or not col_tiled))
                if not reused and entering:
                    reused = any(plan.coincides(bit, ri, ci, before, coord, rel)
                                 for before in _bits(present))
                if not reused:
                    loaded += size
        stored = sum(st.areas[t] for t in self.written) if st.last else 0
        area = sum(st.areas[t] for t in self.retained) if st.last else 0
        ws += self.fixed + sum(st.areas.values())
        latency = max(plan.step_compute(ri, ci, ki), (loaded + stored) * self.per_element)
        here = (plan.row_starts[ri] if plan.prone_rows else -1,
                plan.col_starts[ci] if plan.prone_cols else -1)
        found = self._steps[key] = Span(latency, ws, area, (present_now, whole_now, here))
        return found

    def tile(self, ri: int, ci: int, rel: Relation, state: State) -> Span:
        """All k-steps of one tile, entered with relation ``rel`` to the previous step."""
        key = (ri, ci, rel, state)
        found = self._tiles.get(key)
        if found is not None:
            return found
        span = self.step(ri, ci, 0, rel, state)
        for ki, (a, b) in enumerate(self.plan.k_runs(ri, ci)[1]):
            n = b - a - (1 if ki == 0 else 0)
            span = _repeat(lambda s, ki=ki: self.step(ri, ci, ki, IN_TILE, s), span, n)
        self._tiles[key] = span
        return span

    def line(self, index: int, by_rows: bool, forward: bool, enter: Relation,
             state: State) -> Span:
        """One row (``by_rows``) or column of tiles, forwards or backwards, entered with
        ``enter``."""
        plan = self.plan
        fixed, moving, count = ((plan.row_starts, plan.col_starts, plan.ntc) if by_rows
                                else (plan.col_starts, plan.row_starts, plan.ntr))
        fi = bisect_right(fixed, index) - 1
        along = ALONG_ROW if by_rows else ALONG_COLUMN

        def tile(mi: int, rel: Relation, s: State) -> Span:
            return self.tile(fi, mi, rel, s) if by_rows else self.tile(mi, fi, rel, s)

        runs = list(zip(moving, moving[1:] + [count], strict=True))
        if not forward:
            runs.reverse()
        span: Span | None = None
        for a, b in runs:
            mi = bisect_right(moving, a) - 1
            if span is None:
                span = tile(mi, enter, state)
                n = b - a - 1
            else:
                n = b - a
            span = _repeat(lambda s, mi=mi: tile(mi, along, s), span, n)
        assert span is not None
        return span

    def traverse(self, traversal: Traversal) -> Span:
        plan = self.plan
        span = Span(0, None, 0, START)
        if not isinstance(traversal, str):
            return self._custom(traversal, span)
        by_rows = traversal in ("raster", "snake")
        snake = traversal in ("snake", "column_snake")
        starts, count, across = ((plan.row_starts, plan.ntr, plan.ntc) if by_rows
                                 else (plan.col_starts, plan.ntc, plan.ntr))
        # entering a line: raster comes from the previous line's last tile, snake from the
        # tile next to it (the same column for rows, the same row for columns)
        enter = ((False, True) if by_rows else (True, False)) if snake or across == 1 \
            else (False, False)
        for a, b in zip(starts, starts[1:] + [count], strict=True):
            n = b - a
            if not snake:
                span = _repeat(lambda s, a=a: self.line(a, by_rows, True, enter, s), span, n)
                continue

            def pair(s: State, a: int = a) -> Span:
                first = self.line(a, by_rows, a % 2 == 0, enter, s)
                return _then(first, self.line(a + 1, by_rows, a % 2 == 1, enter, first.state))

            span = _repeat(pair, span, n // 2)
            if n % 2:
                span = _then(span, self.line(b - 1, by_rows, (b - 1) % 2 == 0, enter,
                                             span.state))
        return span

    def _custom(self, order: Sequence[int], span: Span) -> Span:
        plan = self.plan
        prev: tuple[int, int] | None = None
        for index in order:
            tr, tc = divmod(index, plan.ntc)
            rel = (prev is not None and prev[0] == tr, prev is not None and prev[1] == tc)
            ri = bisect_right(plan.row_starts, tr) - 1
            ci = bisect_right(plan.col_starts, tc) - 1
            span = _then(span, self.tile(ri, ci, rel, span.state))
            prev = (tr, tc)
        return span


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low)
        mask ^= low
    return out
