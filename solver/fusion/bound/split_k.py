"""A bound under the TeamKorea reading from what its MatMuls pay (``split_k_bound``).

That reading splits K in a subgraph with one MatMul, or one head-tail pair, only, and then
every tile loads again the slices of every k-step: such a subgraph waits at least on its
MatMuls' operand loads (``split_loads``). With one k-step, a MatMul holds whole-K strips of
its operands for the tile, which caps the tile, and every op there pays its base once per
tile (``one_step_tiles``). A subgraph's latency is at least the larger of its compute and
its traffic, so at least ``lam`` times the one plus ``1 - lam`` times the other: summed
over the subgraphs, each op claimed once where it runs (loads of slices no other read there
shares; compute per op), that gives a bound for every ``lam``, and the best is taken.
docs/fusion.md, "The TeamKorea reading", gives the argument.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from itertools import product

from solver.fusion.problem import FusionGraph, ceil_div, exact
from solver.fusion.teamkorea import Role


def split_k_bound(g: FusionGraph) -> Fraction:
    """The largest sum of ``Claims.at`` over ``lam`` in [0, 1]: a sum of concave
    piecewise-linear functions, so largest at 0, 1 or where some MatMul's claims cross."""
    claims = Claims(g)
    return max(sum(claims.at(lam), Fraction(0)) for lam in claims.breakpoints())


class Claims:
    """Per op, what the subgraph it is claimed in pays for it at least."""

    def __init__(self, g: FusionGraph):
        p = g.problem
        grids = Grids(g)
        bandwidth = exact(p.slow_memory_bandwidth)
        outputs = set(g.graph_outputs)
        self.compute = [exact(p.base_costs[q]) * grid.tiles
                        for q, grid in enumerate(g.least_grids)]
        """Per op, its base once per tile of its least grid."""
        self.split: dict[int, Fraction] = {}
        """Per MatMul, its operand loads (time units) in a subgraph that splits K, and
        the write of its output if a graph output (never retained under the reading)."""
        self.unsplit: dict[int, Fraction | None] = {}
        """Per MatMul, its compute in a subgraph with one k-step (None: none fits)."""
        for q in range(p.num_ops):
            if g.is_matmul(q):
                written = sum(g.size(t) for t in p.outputs[q] if t in outputs)
                self.split[q] = Fraction(split_loads(g, q, grids) + written, bandwidth)
                tiles = one_step_tiles(g, q, grids)
                self.unsplit[q] = None if tiles is None else exact(p.base_costs[q]) * tiles

    def at(self, lam: Fraction) -> list[Fraction]:
        """Each Pointwise op its compute times ``lam`` (a subgraph that splits K may hide
        it behind loads); each MatMul the lesser of what a subgraph that splits K pays
        for it (``lam`` of its compute, the rest of its loads) and what one that does not
        pays (its compute there). Any subgraph's latency is at least the sum over its ops
        (the larger of compute and traffic is at least any mix of the two)."""
        out = []
        for q, compute in enumerate(self.compute):
            if q not in self.split:
                out.append(lam * compute)
                continue
            mixed = lam * compute + (1 - lam) * self.split[q]
            unsplit = self.unsplit[q]
            out.append(mixed if unsplit is None else min(mixed, unsplit))
        return out

    def breakpoints(self) -> set[Fraction]:
        """0, 1, and where a MatMul's two claims cross in between."""
        found = {Fraction(0), Fraction(1)}
        for q, unsplit in self.unsplit.items():
            split, compute = self.split[q], self.compute[q]
            if unsplit is not None and split != compute:
                lam = (split - unsplit) / (split - compute)
                if 0 < lam < 1:
                    found.add(lam)
        return found


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
    p = g.problem
    nw, nh, _ = g.native
    k = g.reduction_length(q)
    out = p.outputs[q][0]
    least: int | None = None
    for role in possible_roles(g, q):
        if role.middle or (role.lhs_in and role.rhs_in):
            continue  # split K allows one head and one tail at most
        lhs, rhs = (_paid(g, q, role, pos, split=True) for pos in (0, 1))
        grid = (grids.paired if role.head else grids.alone)[q]
        columns, rows = ceil_div(grid.width, nw), ceil_div(grid.height, nh)
        kind = role.kind
        if kind == "lhs_head":
            loads = lhs * grid.height * k + rhs * grid.tiles * k * p.widths[out]
        elif kind == "rhs_head":
            loads = lhs * grid.tiles * p.heights[out] * k + rhs * grid.width * k
        else:  # standalone or a tail: per-step slices of what is not from the chain
            loads = lhs * columns * grid.height * k + rhs * rows * grid.width * k
        least = loads if least is None else min(least, loads)
    return least or 0


def one_step_tiles(g: FusionGraph, q: int, grids: Grids) -> int | None:
    """The fewest tiles of any subgraph with one k-step that runs ``q`` and fits the
    capacity, or None if none fits: ``q``'s own buffers (``teamkorea.working_set``, whole
    K per strip; a head's streamed operand whole) must fit, which caps the tile."""
    p = g.problem
    nw, nh, _ = g.native
    grid = (grids.any if g.reduction_length(q) <= nw else grids.paired)[q]
    capacity = exact(p.fast_memory_capacity)
    k = g.reduction_length(q)
    out = p.outputs[q][0]
    least: int | None = None
    for role in possible_roles(g, q):
        lhs, rhs = (_paid(g, q, role, pos, split=False) for pos in (0, 1))
        per_h = per_w = fixed = 0  # buffers: per tile row of height, per column, whole
        kind = role.kind
        if kind == "lhs_head":
            per_h, fixed = lhs * k, rhs * k * p.widths[out]
        elif kind == "rhs_head":
            fixed, per_w = lhs * p.heights[out] * k, rhs * k
        else:
            per_h, per_w = lhs * k, rhs * k
        for w in range(1, min(nw, grid.width) + 1):
            room = capacity - fixed - per_w * w
            if room < per_h:
                break  # wider tiles leave less room still
            h = min(nh, grid.height, int(room // per_h) if per_h else nh)
            tiles = max(grid.tiles, ceil_div(grid.width, w) * ceil_div(grid.height, h))
            least = tiles if least is None else min(least, tiles)
    return least
