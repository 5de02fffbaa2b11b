"""The normalized fusion problem: derived graph structure and the problem-wide lower bounds.

Everything here is a pure function of a validated ``FusionProblem``; values that the
evaluator and the solvers compare exactly are kept as ``Fraction``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import NamedTuple

import networkx as nx

from models.fusion import (
    EpilogueStep,
    FusionProblem,
    ReductionCost,
    RetainedOutputWS,
    Semantics,
)


def exact(x: int | float) -> Fraction:
    """An exact rational for a JSON number: ints stay exact, floats via their shortest repr."""
    return Fraction(x) if isinstance(x, int) else Fraction(repr(x))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Rules:
    """The readings of SEMANTICS.md an evaluation follows; the defaults are the reference's."""

    reduction_cost: ReductionCost = "per_native_k"
    epilogue_step: EpilogueStep = "last"
    retained_output_ws: RetainedOutputWS = "accumulate"


DEFAULT_RULES = Rules()


class LeastGrid(NamedTuple):
    """The least tile grid a subgraph running one op can have under the teamkorea reading,
    each measure minimized apart: native tiles (``w, h <= native``), width, height, area."""

    tiles: int
    width: int
    height: int
    area: int


@dataclass(frozen=True, eq=False)
class FusionGraph:
    """Producers, consumers and graph boundary of a validated problem.

    Compared and hashed by identity, so that caches may key on the graph they belong to.
    """

    problem: FusionProblem

    @cached_property
    def producer(self) -> dict[int, int]:
        return {t: k for k, outs in enumerate(self.problem.outputs) for t in outs}

    @cached_property
    def consumers(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {t: [] for t in range(self.problem.num_tensors)}
        for k, ins in enumerate(self.problem.inputs):
            for t in dict.fromkeys(ins):
                out[t].append(k)
        return out

    @cached_property
    def graph_inputs(self) -> list[int]:
        """Tensors no op produces but some op consumes (SEMANTICS.md S1.2)."""
        return [t for t, cs in self.consumers.items() if cs and t not in self.producer]

    @cached_property
    def graph_outputs(self) -> list[int]:
        """Tensors some op produces and no op consumes."""
        return [t for t in sorted(self.producer) if not self.consumers[t]]

    @cached_property
    def unused_tensors(self) -> list[int]:
        """Tensors neither produced nor consumed; ignored by the semantics (S1.2)."""
        return [t for t, cs in self.consumers.items() if not cs and t not in self.producer]

    @cached_property
    def dag(self) -> nx.DiGraph:
        """Op-level DAG: an edge p -> c for every tensor p produces and c consumes."""
        g = nx.DiGraph()
        g.add_nodes_from(range(self.problem.num_ops))
        for t, cs in self.consumers.items():
            if t in self.producer:
                g.add_edges_from((self.producer[t], c) for c in cs)
        return g

    @cached_property
    def neighbours(self) -> dict[int, frozenset[int]]:
        """Ops adjacent through a produced-and-consumed tensor, in either direction."""
        dag = self.dag
        return {k: frozenset(dag.predecessors(k)) | frozenset(dag.successors(k))
                for k in dag.nodes}

    @cached_property
    def ancestors(self) -> list[int]:
        """Per op, a bit mask of the ops it depends on (itself not included)."""
        masks = [0] * self.problem.num_ops
        for q in self.topological_order:
            for p in self.dag.predecessors(q):
                masks[q] |= masks[p] | 1 << p
        return masks

    def reentrant(self, ops: Iterable[int]) -> frozenset[int]:
        """The ops of an op set whose output some op outside it reads on a path back into
        it. A subgraph running the set needs that path's result before it starts, so such
        an op has run in some earlier subgraph: the first run of an op is never in a set
        where it is reentrant."""
        members = set(ops)
        above = 0
        for q in members:
            above |= self.ancestors[q]
        return frozenset(q for q in members
                         for t in self.problem.outputs[q] for c in self.consumers[t]
                         if c not in members and above >> c & 1)

    @cached_property
    def topological_order(self) -> tuple[int, ...]:
        """Ops in a deterministic topological order (smallest index first among ready ops)."""
        return tuple(nx.lexicographical_topological_sort(self.dag))

    def in_order(self, ops: Iterable[int]) -> tuple[int, ...]:
        """``ops``, each once, in ``topological_order``: how an op set is listed (a union of
        two that both run an op, one recomputing it, runs it once)."""
        members = set(ops)
        return tuple(q for q in self.topological_order if q in members)

    @cached_property
    def native(self) -> tuple[int, int, int]:
        return native_sizes(self.problem)

    @cached_property
    def _shapes(self) -> dict[tuple[int, ...], SubgraphShape]:
        return {}

    def size(self, t: int) -> int:
        return self.problem.widths[t] * self.problem.heights[t]

    @cached_property
    def streamable(self) -> dict[int, tuple[bool, bool]]:
        """Per op: whether some subgraph may fire it with rows, and with columns, streamed
        (S8.2), i.e. paid at their share rather than in whole native tiles. A root streams
        its LHS's columns and its RHS's rows; a Pointwise op passes its own flags to its
        inputs, a head its rows to its LHS and its columns to its RHS (S10.3); every other
        requirement is spatial. An op's firings make all its outputs at once, so a flag
        any of them gets is the op's."""
        p = self.problem
        flags: dict[int, tuple[bool, bool]] = {}
        for q in reversed(self.topological_order):
            rows = cols = False
            for t in p.outputs[q]:
                for m in self.consumers[t]:
                    down_rows, down_cols = flags[m]
                    if not self.is_matmul(m):
                        rows, cols = rows or down_rows, cols or down_cols
                        continue
                    lhs, rhs = p.inputs[m]
                    if t == lhs:  # a root's LHS: columns; a head's: the head's rows
                        rows, cols = rows or down_rows, True
                    if t == rhs:  # a root's RHS: rows; a head's: the head's columns
                        rows, cols = True, cols or down_cols
            flags[q] = rows, cols
        return flags

    def least_extents(self, op: int) -> tuple[int, int]:
        """(rows, columns) the firings of ``op`` pay for over its whole output in any
        subgraph: a dimension no subgraph streams padded to whole native tiles (S8.2: spans
        covering an extent pay at least ``ceil(extent / native)`` native tiles across it),
        a streamable one at its extent."""
        rows, cols = self.streamable[op]
        nw, nh, _ = self.native
        out = self.problem.outputs[op][0]
        height, width = self.problem.heights[out], self.problem.widths[out]
        return (height if rows else ceil_div(height, nh) * nh,
                width if cols else ceil_div(width, nw) * nw)

    def least_area(self, op: int) -> int:
        """The least area (elements) the firings of ``op`` pay for over its whole output in
        any subgraph (``least_extents``)."""
        rows, cols = self.least_extents(op)
        return rows * cols

    @cached_property
    def least_grids(self) -> list[LeastGrid]:
        """Per op, the least grid of any subgraph that runs it under the teamkorea reading,
        by each measure apart. That grid is the shape of the subgraph's outputs that are
        not ephemeral, and an ephemeral output has a reader inside, so following readers
        from the op ends at one of them: the grid is the shape of the op's own output or of
        one downstream of it."""
        return self.least_grids_through(None)

    def least_grids_through(self, matmuls: int | None) -> list[LeastGrid]:
        """``least_grids`` over the readers reached through at most ``matmuls`` MatMuls
        (any number if None): a subgraph that splits K runs one MatMul or one head-tail
        pair, so its grid follows fewer readers (``bound/split_k.py``)."""
        nw, nh, _ = self.native
        p = self.problem
        own = [[LeastGrid(ceil_div(p.widths[t], nw) * ceil_div(p.heights[t], nh),
                          p.widths[t], p.heights[t], p.widths[t] * p.heights[t])
                for t in p.outputs[q]] for q in range(p.num_ops)]
        found: dict[int, LeastGrid] = {}
        for depth in range(1 if matmuls is None else matmuls + 1):
            through_fewer, found = found, {}  # through one MatMul fewer
            for q in reversed(self.topological_order):
                shapes = list(own[q])
                for c in (c for t in p.outputs[q] for c in self.consumers[t]):
                    if matmuls is None or not self.is_matmul(c):
                        shapes.append(found[c])
                    elif depth:
                        shapes.append(through_fewer[c])
                found[q] = LeastGrid(*map(min, zip(*shapes, strict=True)))
        return [found[q] for q in range(p.num_ops)]

    def reduction_length(self, op: int) -> int:
        """K of a MatMul: the width of its LHS."""
        return self.problem.widths[self.problem.inputs[op][0]]

    def misordered(self, ops: Sequence[int]) -> tuple[int, int, int, int] | None:
        """The first op of ``ops`` that reads a tensor an op listed at or after it produces,
        as (its position, the op, the tensor, the producer); None when ``ops`` is in a
        topological order."""
        position = {q: pos for pos, q in enumerate(ops)}
        for pos, q in enumerate(ops):
            for t in self.problem.inputs[q]:
                producer = self.producer.get(t)
                if producer in position and position[producer] >= pos:
                    return pos, q, t, producer
        return None

    def is_matmul(self, op: int) -> bool:
        return self.problem.op_types[op] == "MatMul"

    def covered_depth(self, op: int, rules: Rules) -> int:
        """S8.3: the reduction depth a MatMul's base cost covers: the native k
        (``per_native_k``) or its own K (``per_op``)."""
        if rules.reduction_cost == "per_native_k":
            return self.native[2]
        return self.reduction_length(op)

    def shape(self, ops: Iterable[int]) -> SubgraphShape:
        """The tensor classes and MatMul roles of the subgraph listing ``ops`` (cached)."""
        key = tuple(ops)
        found = self._shapes.get(key)
        if found is None:
            found = self._shapes[key] = _shape_of(self, key)
        return found


@dataclass(frozen=True)
class SubgraphShape:
    """Tensor classes, MatMul roles and tile grid extent of one subgraph.

    SEMANTICS.md S3 (boundary inputs, ephemerals, outputs), S6.1 (heads and roots) and
    S7.1 (the grid spans the largest subgraph output in each dimension). ``ops`` keeps the
    listed order: the evaluator checks it and the simulation fires roots in that order.
    """

    ops: tuple[int, ...]
    produced: frozenset[int]
    consumed: frozenset[int]
    inputs: tuple[int, ...]
    ephemerals: frozenset[int]
    outputs: tuple[int, ...]
    producer: Mapping[int, int]
    feeds: Mapping[int, frozenset[int]]  # MatMul -> MatMuls of S its output reaches (S6.1)
    heads: frozenset[int]
    roots: tuple[int, ...]
    grid_width: int
    grid_height: int

    @property
    def has_matmul(self) -> bool:
        return bool(self.heads or self.roots)

    def grid(self, w: int, h: int) -> tuple[int, int]:
        """(rows, columns) of the tile grid at spatial granularity ``w x h``."""
        return ceil_div(self.grid_height, h), ceil_div(self.grid_width, w)


def _shape_of(g: FusionGraph, ops: tuple[int, ...]) -> SubgraphShape:
    p = g.problem
    members = set(ops)
    producer = {t: q for q in ops for t in p.outputs[q]}
    consumed = frozenset(t for q in ops for t in p.inputs[q])
    produced = frozenset(producer)
    outputs = tuple(t for q in ops for t in p.outputs[q] if t not in consumed)
    matmuls = [q for q in ops if g.is_matmul(q)]
    feeds = {q: matmuls_fed(g, members, p.outputs[q][0]) for q in matmuls}
    heads = frozenset(q for q in matmuls if feeds[q])
    return SubgraphShape(
        ops=ops,
        produced=produced,
        consumed=consumed,
        inputs=tuple(sorted(consumed - produced)),
        ephemerals=produced & consumed,
        outputs=outputs,
        producer=producer,
        feeds=feeds,
        heads=heads,
        roots=tuple(q for q in matmuls if q not in heads),
        grid_width=max(p.widths[t] for t in outputs),
        grid_height=max(p.heights[t] for t in outputs),
    )


def matmuls_fed(g: FusionGraph, members: set[int], tensor: int) -> frozenset[int]:
    """MatMuls of the subgraph that ``tensor`` reaches through zero or more of its Pointwise
    ops (as an operand)."""
    found: set[int] = set()
    todo, seen = [tensor], {tensor}
    while todo:
        t = todo.pop()
        for c in g.consumers[t]:
            if c not in members:
                continue
            if g.is_matmul(c):
                found.add(c)
                continue
            for u in g.problem.outputs[c]:
                if u not in seen:
                    seen.add(u)
                    todo.append(u)
    return frozenset(found)


def k_steps(g: FusionGraph, shape: SubgraphShape, k: int) -> dict[int, int]:
    """k-steps of every root: ceil(K/k) (SEMANTICS.md S6.2)."""
    return {q: ceil_div(g.reduction_length(q), k) for q in shape.roots}


def k_depth_issue(g: FusionGraph, shape: SubgraphShape, k: int) -> str | None:
    """S2.5: k may not exceed the reduction length of any MatMul of the subgraph."""
    for q in shape.ops:
        if g.is_matmul(q) and k > g.reduction_length(q):
            return (f"k = {k} exceeds the reduction length K = {g.reduction_length(q)} of "
                    f"MatMul op {q}; k <= K must hold for every MatMul of the subgraph")
    return None


def bounds_issue(g: FusionGraph, gran: tuple[int, int, int]) -> tuple[int, str] | None:
    """S9: every axis a positive integer no larger than its native size; (axis, why) if not."""
    for axis, (name, value, native) in enumerate(zip("whk", gran, g.native, strict=True)):
        if value < 1:
            return axis, f"granularity {name} = {value} must be a positive integer"
        if value > native:
            return axis, (f"granularity {name} = {value} exceeds the native {name} = {native}; "
                          "super-native granularities are invalid")
    return None


def prologue_feeds(g: FusionGraph, shape: SubgraphShape) -> list[tuple[int, str, int, int]]:
    """(root, "LHS"/"RHS", tensor, Pointwise producer) for every root operand produced by a
    Pointwise op of the subgraph: the operands S6.4 constrains."""
    out = []
    for q in shape.roots:
        for side, t in zip(("LHS", "RHS"), g.problem.inputs[q], strict=True):
            p = shape.producer.get(t)
            if p is not None and not g.is_matmul(p):
                out.append((q, side, t, p))
    return out


def prologue_issue(g: FusionGraph, shape: SubgraphShape, gran: tuple[int, int, int]) -> str | None:
    """S6.4: a split-K root fed by a Pointwise op of the subgraph needs w (LHS) or h (RHS) >= K."""
    w, h, k = gran
    for q, side, t, p in prologue_feeds(g, shape):
        big_k = g.reduction_length(q)
        steps = ceil_div(big_k, k)
        axis, extent = ("w", w) if side == "LHS" else ("h", h)
        if steps > 1 and extent < big_k:
            return (f"MatMul op {q} splits K = {big_k} into {steps} k-steps and its "
                    f"{side} tensor {t} is produced by Pointwise op {p} of the same "
                    f"subgraph; that needs {axis} >= {big_k}, got {axis} = {extent}")
    return None


def axis_candidates(native: int, extent: int, balanced: bool = False) -> list[int]:
    """Powers of two below min(native, extent), then that cap itself, largest first;
    with ``balanced``, the cap's balanced twin too: the least that covers the extent in as
    few pieces (``extent / ceil(extent / cap)`` rounded up).

    Every value at or above the extent gives the same schedule, so one stands for all. A
    ragged last piece costs as many steps as a whole one and often a whole native tile's
    compute: a 784 x 1,024 by 1,024 x 256 MatMul in 128-row tiles has a 16-row seventh,
    compute-bound where the others are memory-bound; in 112-row tiles (seven even ones)
    it takes 2.7% less (generated ``gen-conv-02``). Twins of the smaller powers too found
    the same latencies for the first 657 op sets of ``gen-residual-07`` (heights of 200)
    and took 1.67 times as long to score them, against 1.34 times for the cap's alone.
    """
    cap = min(native, extent)
    out = {cap}
    p = 1
    while p < cap:
        out.add(p)
        p *= 2
    if balanced:
        out.add(ceil_div(extent, ceil_div(extent, cap)))
    return sorted(out, reverse=True)


def legal_granularities(g: FusionGraph, shape: SubgraphShape, balanced: bool = False
                        ) -> list[tuple[int, int, int]]:
    """Candidate ``[w, h, k]`` for a subgraph: power-of-two axes (and with ``balanced``
    each axis's balanced tile, ``axis_candidates``) that pass S2.5, S9 and S6.4.

    Never above native (S9) nor above any MatMul's K (S2.5); k is 1 for Pointwise-only
    subgraphs, where it is ignored; values past the grid or the reductions are
    represented once. Larger tiles come first.
    """
    nw, nh, nk = g.native
    widths = axis_candidates(nw, shape.grid_width, balanced)
    heights = axis_candidates(nh, shape.grid_height, balanced)
    if not shape.has_matmul:
        return [(w, h, 1) for w in widths for h in heights]
    depths_cap = min(g.reduction_length(q) for q in shape.ops if g.is_matmul(q))
    longest = max(g.reduction_length(q) for q in shape.roots)
    feeds = [(g.reduction_length(q), side) for q, side, _, _ in prologue_feeds(g, shape)]
    out = []
    for k in axis_candidates(min(nk, depths_cap), longest, balanced):
        split = [(big_k, side) for big_k, side in feeds if k < big_k]
        min_w = max((big_k for big_k, side in split if side == "LHS"), default=0)
        min_h = max((big_k for big_k, side in split if side == "RHS"), default=0)
        out += [(w, h, k) for w in widths if w >= min_w for h in heights if h >= min_h]
    return out


@dataclass(frozen=True)
class LowerBounds:
    """Bounds no valid solution can beat: total compute, and slow-memory traffic."""

    compute: Fraction
    io: Fraction

    @property
    def total(self) -> Fraction:
        return max(self.compute, self.io)


def native_sizes(problem: FusionProblem) -> tuple[int, int, int]:
    """(nw, nh, nk): the native k equals the native w unless given (SEMANTICS.md S1.6)."""
    g = problem.native_granularity
    return g[0], g[1], g[2] if len(g) > 2 else g[0]


def least_teamkorea_load(g: FusionGraph, q: int, pos: int) -> int:
    """Elements of op ``q``'s input at ``pos`` that any subgraph under the teamkorea
    reading loads at least, when it is neither resident nor ephemeral (a graph input never
    is). Every tile and k-step reads its slice, and the slices cover the grid: a Pointwise
    input its area; a MatMul operand its K times the grid's height (LHS) or width (RHS).
    A chain head loads some operands whole instead, no less: its least grid is no larger
    than its own output."""
    grid = g.least_grids[q]
    if not g.is_matmul(q):
        return grid.area
    return g.reduction_length(q) * (grid.height if pos == 0 else grid.width)


def lower_bounds(problem: FusionProblem, mode: ReductionCost = "per_native_k",
                 semantics: Semantics = "default") -> LowerBounds:
    """Compute and I/O lower bounds: SEMANTICS.md "Public benchmarks", with each op's
    compute padded where no subgraph can stream it (equal on extents the native size
    divides).

    Every op fires at least once over its whole output and pays for it at least its
    ``least_area`` (whole native tiles on every dimension no subgraph can stream); every
    consumed graph input and every graph output crosses the slow-memory boundary at least
    once. Under the teamkorea reading an op costs its base once per tile of its
    subgraph's grid, which may be smaller than its output, and its inputs move only over
    that grid (``FusionGraph.least_grids``): each op costs its base at least once per tile
    of its least grid, each graph input moves at least ``least_teamkorea_load`` of its
    least reader, and each graph output (never retained) is written whole.
    """
    g = FusionGraph(problem)
    bandwidth = exact(problem.slow_memory_bandwidth)
    if semantics == "teamkorea":
        compute = sum((exact(c) * grid.tiles for c, grid in
                       zip(problem.base_costs, g.least_grids, strict=True)), Fraction(0))
        loads = sum(min(least_teamkorea_load(g, q, pos) for q in g.consumers[t]
                        for pos, u in enumerate(problem.inputs[q]) if u == t)
                    for t in g.graph_inputs)
        traffic = loads + sum(g.size(t) for t in g.graph_outputs)
        return LowerBounds(compute=compute, io=Fraction(traffic) / bandwidth)
    nw, nh, nk = native_sizes(problem)
    compute = Fraction(0)
    for k, op in enumerate(problem.op_types):
        area = Fraction(g.least_area(k), nw * nh)
        cost = exact(problem.base_costs[k]) * area
        if op == "MatMul" and mode == "per_native_k":
            cost *= Fraction(g.reduction_length(k), nk)
        compute += cost
    traffic = sum(g.size(t) for t in g.graph_inputs) + sum(g.size(t) for t in g.graph_outputs)
    return LowerBounds(compute=compute, io=Fraction(traffic) / bandwidth)


def summarize(problem: FusionProblem) -> dict[str, object]:
    """A short description of a valid problem: sizes, boundary and lower bounds in both modes."""
    g = FusionGraph(problem)
    bounds = {mode: lower_bounds(problem, mode) for mode in ("per_native_k", "per_op")}
    return {
        "ops": problem.num_ops,
        "ops_by_type": dict(sorted(Counter(problem.op_types).items())),
        "tensors": problem.num_tensors,
        "graph_inputs": g.graph_inputs,
        "graph_outputs": g.graph_outputs,
        "unused_tensors": g.unused_tensors,
        "fast_memory_capacity": problem.fast_memory_capacity,
        "slow_memory_bandwidth": problem.slow_memory_bandwidth,
        "native_granularity": list(native_sizes(problem)),
        "lower_bounds": {
            mode: {
                "compute": float(b.compute),
                "io": float(b.io),
                "total": float(b.total),
            }
            for mode, b in bounds.items()
        },
    }
