"""The TeamKorea reading of the contest: a second evaluator profile (``semantics=teamkorea``).

The Track B winners published their own evaluator, and the organisers accepted their
schedules, so a user comparing against the contest's best results needs that reading too.
``../shared/mlsys2026/teamkorea/README.md`` lists where it differs from SEMANTICS.md; the
rules below were established from their published evaluator and pinned by the fixtures
there (validity, error message and total of 32 schedules). In short:

* granularity: only ``w <= native_w`` and ``h <= native_h``; ``k`` may reach a MatMul's K;
* MatMuls take roles from the MatMul -> MatMul edges inside the subgraph (a head feeds a
  tail through an ephemeral tensor, as LHS or RHS); the chain's tail K sets the k-steps;
  a chain head keeps its whole operand strip resident for the tile; with one k-step a
  standalone MatMul reduces its whole K whatever ``k`` is;
* Pointwise ops cost their base cost once per tile and move ``w x h`` tiles, prologue or
  epilogue alike; a MatMul step costs ``base * k_step_depth / K`` (like ``per_op``);
* the working set is checked once per subgraph at full tiles: the tensors retained into it
  at full size plus one buffer per (op, input position) and per output, as sized above;
* slow-memory loads are cached one slice per tensor; outputs that leave the subgraph are
  written at each tile's last k-step;
* added rules: split-K with two standalone MatMuls, chains and standalones mixed, middle
  MatMuls under split-K, 3+ MatMul chains unless ``w == k == K`` for all, a Pointwise input
  to a split-K MatMul not covering its K, graph outputs retained, outputs of different
  shapes, an ephemeral tensor whose outside consumer does not recompute its producer.

Subgraphs need not be connected. The list checks (lengths, index ranges, repeats, every op
scheduled) and the availability of every boundary input (S4.2: produced by an earlier
subgraph and written, or retained by the one before) are this project's: their evaluator
does not check availability, and no fixture depends on it. Latencies are exact
(``Fraction``); theirs are doubles, which agree to well within the 1e-6 claim tolerance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, wraps
from typing import Any, TypeVar

from models.errors import Issue
from models.fusion import FusionProblem, FusionSolution
from solver.fusion.problem import FusionGraph, Rules, ceil_div, exact

RULES = Rules(reduction_cost="per_op", epilogue_step="first", retained_output_ws="slice")
"""The nearest SEMANTICS.md options (reported with the verdict; the reading is below)."""
CLAIM_TOLERANCE = Fraction(1, 10**6)


class Rejected(Exception):
    """A schedule this reading rejects; ``status`` and ``msg`` as their evaluator says it."""

    def __init__(self, loc: tuple[str | int, ...], rule: str, msg: str,
                 status: str = "INVALID_ARGUMENT"):
        super().__init__(loc, rule, msg, status)  # all of them, so that it pickles
        self.issue = Issue(loc, f"{status}: {msg}", f"teamkorea.{rule}")

    def __str__(self) -> str:
        return self.issue.msg


@dataclass(frozen=True)
class Role:
    """A MatMul's place in the subgraph's MatMul chains: which of its operands come from,
    and which uses of its output go to, another MatMul of the subgraph (ephemerally)."""

    lhs_in: bool = False
    rhs_in: bool = False
    lhs_out: bool = False
    rhs_out: bool = False

    @property
    def fed(self) -> bool:
        return self.lhs_in or self.rhs_in

    @property
    def feeds(self) -> bool:
        return self.lhs_out or self.rhs_out

    @property
    def standalone(self) -> bool:
        return not self.fed and not self.feeds

    @property
    def head(self) -> bool:
        return not self.fed and self.feeds

    @property
    def tail(self) -> bool:
        return self.fed and not self.feeds

    @property
    def middle(self) -> bool:
        return self.fed and self.feeds

    @property
    def kind(self) -> str:
        """How its operands are sized and sliced; the first that applies, in this order."""
        if not self.lhs_in and self.lhs_out:
            return "lhs_head"
        if self.lhs_in and not self.feeds:
            return "lhs_tail"
        if not self.rhs_in and self.rhs_out:
            return "rhs_head"
        if self.rhs_in and not self.feeds:
            return "rhs_tail"
        return "standalone"


@dataclass(frozen=True, eq=False)
class Subgraph:
    """One subgraph under this reading: its tensor classes, MatMul roles and k-steps."""

    g: FusionGraph
    ops: tuple[int, ...]
    retain: frozenset[int]

    @cached_property
    def members(self) -> frozenset[int]:
        return frozenset(self.ops)

    @cached_property
    def ephemerals(self) -> frozenset[int]:
        """Produced and consumed here, neither a graph output nor retained: never written."""
        p, outs = self.g.problem, set(self.g.graph_outputs)
        return frozenset(t for q in self.ops for t in p.outputs[q]
                         if t not in outs and t not in self.retain
                         and any(c in self.members for c in self.g.consumers[t]))

    @cached_property
    def written(self) -> tuple[int, ...]:
        """Outputs stored to slow memory at each tile's last k-step."""
        p = self.g.problem
        return tuple(t for q in self.ops for t in p.outputs[q]
                     if t not in self.ephemerals and t not in self.retain)

    @cached_property
    def matmuls(self) -> tuple[int, ...]:
        return tuple(q for q in self.ops if self.g.is_matmul(q))

    @cached_property
    def roles(self) -> dict[int, Role]:
        p, found = self.g.problem, {}
        for q in self.matmuls:
            lhs, rhs = (self._from_matmul(t) for t in p.inputs[q][:2])
            out = p.outputs[q][0]
            uses = [pos for c in self.matmuls for pos, t in enumerate(p.inputs[c])
                    if t == out and out in self.ephemerals]
            found[q] = Role(lhs_in=lhs, rhs_in=rhs, lhs_out=0 in uses,
                            rhs_out=any(pos > 0 for pos in uses))
        return found

    def _from_matmul(self, t: int) -> bool:
        producer = self.g.producer.get(t)
        return t in self.ephemerals and producer is not None and self.g.is_matmul(producer)

    def k_of(self, q: int) -> int:
        return self.g.reduction_length(q)

    @cached_property
    def slicing_k(self) -> int:
        """The K the k-steps divide: the (last listed) tail's, else the largest K."""
        tails = [self.k_of(q) for q in self.matmuls if self.roles[q].tail]
        return tails[-1] if tails else max((self.k_of(q) for q in self.matmuls), default=0)

    @cached_property
    def head_k(self) -> int:
        heads = [self.k_of(q) for q in self.matmuls if self.roles[q].head]
        return heads[-1] if heads else 0

    def k_steps(self, k: int) -> int:
        return ceil_div(self.slicing_k, k) if self.slicing_k else 1

    def depth(self, q: int, k: int, step: int) -> int:
        """The reduction depth MatMul ``q`` covers in k-step ``step``."""
        if not self.roles[q].standalone:
            return min(k, self.slicing_k - step * k)
        if self.k_steps(k) > 1:
            return min(k, self.k_of(q) - step * k)
        return self.k_of(q)

    def reduced_over(self, q: int) -> int:
        return self.k_of(q) if self.roles[q].standalone else self.slicing_k

    @cached_property
    def memo(self) -> dict[tuple, Any]:
        """What pricing worked out for this subgraph (``kept_per_subgraph``)."""
        return {}


T = TypeVar("T")


def kept_per_subgraph(compute: Callable[..., T]) -> Callable[..., T]:
    """``compute(sg, *args)`` worked out once per subgraph and arguments, and kept on the
    subgraph: the search prices one subgraph at many tiles and traversals, and a cache
    kept with the module would hold on to every graph it met."""
    @wraps(compute)
    def kept(sg: Subgraph, *args: int) -> T:
        key = (compute.__name__, *args)
        if key not in sg.memo:
            sg.memo[key] = compute(sg, *args)
        return sg.memo[key]
    return kept


def evaluate_subgraph(g: FusionGraph, sg: Subgraph, i: int, gran: tuple[int, int, int],
                      order: Sequence[int] | None, resident: frozenset[int],
                      runs_in: dict[int, list[tuple[int, ...]]]) -> Fraction:
    """Check subgraph ``i`` as their evaluator does and return its latency, or raise.
    ``runs_in``: op -> the op lists of the subgraphs that run it."""
    _check_granularity(i, g, gran)
    _check_order(g, sg, i)
    _check_retain(g, sg, i)
    _check_recomputed(g, sg, i, runs_in)
    _check_chains(i, sg, gran)
    grid_w, grid_h = subgraph_grid(g, sg, i)
    ws = working_set(g, sg, gran, resident)
    if ws > exact(g.problem.fast_memory_capacity):
        raise Rejected(("granularities", i), "capacity",
                       f"Subgraph {i}: working set {ws} exceeds capacity "
                       f"{g.problem.fast_memory_capacity}", status="RESOURCE_EXHAUSTED")
    w, h, _ = gran
    tiles = _tile_order(order, i, ceil_div(grid_w, w) * ceil_div(grid_h, h))
    return latency(g, sg, gran, tile_kinds((w, h), (grid_w, grid_h), tiles), resident,
                   (grid_w, grid_h))


def _check_granularity(i: int, g: FusionGraph, gran: tuple[int, int, int]) -> None:
    w, h, k = gran
    nw, nh, _ = g.native
    if w > nw or h > nh:
        raise Rejected(("granularities", i), "granularity",
                       "Tile size exceeds native granularity")
    if min(w, h, k) <= 0:
        raise Rejected(("granularities", i), "granularity", "Granularity must be positive")


def _check_order(g: FusionGraph, sg: Subgraph, i: int) -> None:
    if (found := g.misordered(sg.ops)) is not None:
        pos, q, t, producer = found
        raise Rejected(("subgraphs", i, pos), "order",
                       f"Subgraph {i}: op {q} consumes tensor {t} produced by op "
                       f"{producer} which appears at the same or later position")


def _check_retain(g: FusionGraph, sg: Subgraph, i: int) -> None:
    for t in sorted(sg.retain):
        loc = ("tensors_to_retain", i)
        if not 0 <= t < g.problem.num_tensors:
            raise Rejected(loc, "retain", f"Subgraph {i}: retained tensor index {t} out of range")
        if g.producer.get(t) is None:
            raise Rejected(loc, "retain", "Cannot retain graph input tensor")
        if g.producer[t] not in sg.members:
            raise Rejected(loc, "retain", f"Subgraph {i}: cannot retain tensor {t} which is "
                           "not produced by any op in this subgraph")
        if not g.consumers[t]:
            raise Rejected(loc, "retain", f"Subgraph {i}: cannot retain tensor {t} which is a "
                           "graph output (must be evicted to slow memory)")


def _check_recomputed(g: FusionGraph, sg: Subgraph, i: int,
                      runs_in: dict[int, list[tuple[int, ...]]]) -> None:
    """An ephemeral tensor's outside consumers must each run in a subgraph that also runs
    its producer."""
    for t in sorted(sg.ephemerals):
        producer = g.producer[t]
        for c in g.consumers[t]:
            if c not in sg.members and not any(producer in ops for ops in runs_in[c]):
                raise Rejected(("subgraphs", i), "ephemeral",
                               f"Subgraph {i}: tensor {t} would be ephemeral but has external "
                               f"consumer (op {c}) whose subgraph does not recompute producer "
                               f"(op {producer})")


def _check_chains(i: int, sg: Subgraph, gran: tuple[int, int, int]) -> None:
    """Their MatMul-chain rules, which depend on whether the subgraph splits K."""
    check_crossed(sg, i)
    check_tile(sg, gran, i)
    check_depth(sg, gran[2], i)


def check_crossed(sg: Subgraph, i: int = 0) -> None:
    """No MatMul output feeds one MatMul as LHS and another as RHS."""
    for q, role in sg.roles.items():
        if role.lhs_out and role.rhs_out:
            raise Rejected(("subgraphs", i), "chain", f"Op {q}: ephemeral output consumed as both "
                           "LHS and RHS of downstream MMs — inconsistent per-step shape")


def _long_chain(sg: Subgraph) -> bool:
    return len(sg.matmuls) >= 3 or any(r.middle for r in sg.roles.values())


def check_tile(sg: Subgraph, gran: tuple[int, int, int], i: int = 0) -> None:
    """The chain rules on the tile: split K needs every Pointwise -> MatMul operand's tile to
    span the MatMul's K; a long chain without split K needs w == k."""
    w, h, k = gran
    if sg.k_steps(k) == 1:
        if _long_chain(sg) and w != k:
            raise Rejected(("granularities", i), "chain",
                           f"3+ MM chain with k=K requires w == k (got w={w}, k={k})")
        return
    g = sg.g
    p = g.problem
    for q in sg.ops:
        if g.is_matmul(q):
            continue
        for t in p.outputs[q]:
            for c in g.consumers[t]:
                if c not in sg.members or not g.is_matmul(c):
                    continue
                k_c = sg.k_of(c)
                for pos, u in enumerate(p.inputs[c]):
                    if u != t:
                        continue
                    side, size, axis = ("LHS", w, "w") if pos == 0 else ("RHS", h, "h")
                    if size < k_c:
                        raise Rejected(("granularities", i), "split_k",
                                       f"Pointwise (op {q}) → MatMul (op {c}) {side} split-K "
                                       f"granule alignment: {axis}={size} < MM.K={k_c} "
                                       "(issue #71)")


def check_depth(sg: Subgraph, k: int, i: int = 0) -> None:
    """The chain rules on k: split K allows one MatMul or one head-tail pair; a long chain
    without split K needs every K equal to k."""
    if sg.k_steps(k) == 1:
        if _long_chain(sg):
            for q in sg.matmuls:
                if sg.k_of(q) != k:
                    raise Rejected(("granularities", i), "chain",
                                   "3+ MM chain with k=K requires all reduction dims == k, but "
                                   f"op {q} has K={sg.k_of(q)} != k={k}")
        return
    roles = list(sg.roles.values())
    if any(r.middle for r in roles):
        raise Rejected(("granularities", i), "split_k",
                       "Middle MatMul (chain relay) in 3+ MM chain not allowed with split-K")
    heads = sum(r.head for r in roles)
    tails = sum(r.tail for r in roles)
    pure_chain = heads == 1 and tails == 1 and len(roles) == 2
    if not pure_chain and not all(r.standalone for r in roles):
        raise Rejected(("granularities", i), "split_k",
                       "Split-K mixes chain and non-chain MMs — not supported")
    if not pure_chain and len(roles) >= 2:
        raise Rejected(("granularities", i), "split_k",
                       "Two MMs without chain not allowed with split-K")


def subgraph_grid(g: FusionGraph, sg: Subgraph, i: int = 0) -> tuple[int, int]:
    """(width, height) of the tile grid: every written or retained output has that shape."""
    p = g.problem
    shapes = [(t, p.widths[t], p.heights[t]) for q in sg.ops for t in p.outputs[q]
              if t not in sg.ephemerals]
    if not shapes:
        raise Rejected(("subgraphs", i), "outputs", "No non-ephemeral output in subgraph")
    first, w0, h0 = shapes[0]
    for t, w, h in shapes[1:]:
        if (w, h) != (w0, h0):
            raise Rejected(("subgraphs", i), "outputs",
                           f"Subgraph {i}: non-ephemeral outputs have inconsistent shapes "
                           f"(tensor {first}: {w0}x{h0}, tensor {t}: {w}x{h})")
    return w0, h0


def working_set(g: FusionGraph, sg: Subgraph, gran: tuple[int, int, int],
                resident: frozenset[int]) -> int:
    """Resident tensors whole, plus one buffer per (op, input position) and per output."""
    w, h, k = gran
    p = g.problem
    step_k, head_k = min(k, sg.slicing_k), sg.head_k
    total = sum(g.size(t) for t in resident)
    for q in sg.ops:
        kind = sg.roles[q].kind if q in sg.roles else "pointwise"
        for pos, t in enumerate(p.inputs[q]):
            if t in resident or t in sg.ephemerals:
                continue
            lhs = pos == 0
            if kind == "pointwise":
                total += h * w
            elif kind == "lhs_head":
                total += h * head_k if lhs else head_k * step_k
            elif kind == "lhs_tail":
                total += 0 if lhs else step_k * w
            elif kind == "rhs_head":
                total += step_k * head_k if lhs else head_k * w
            elif kind == "rhs_tail":
                total += h * step_k if lhs else 0
            else:
                depth = sg.depth(q, k, 0)
                total += h * depth if lhs else depth * w
        total += sum(h * w for t in p.outputs[q] if t not in sg.ephemerals)
    return total


def _tile_order(order: Sequence[int] | None, i: int, n: int) -> Sequence[int]:
    if order is None:
        return range(n)
    if len(order) != n:
        raise Rejected(("traversal_orders", i), "traversal",
                       f"Subgraph {i}: traversal_order size {len(order)} does not match "
                       f"num_tiles {n}")
    seen: set[int] = set()
    for idx in order:
        if not 0 <= idx < n:
            raise Rejected(("traversal_orders", i), "traversal",
                           f"Subgraph {i}: traversal_order contains out-of-range index {idx}")
        if idx in seen:
            raise Rejected(("traversal_orders", i), "traversal",
                           f"Subgraph {i}: traversal_order contains duplicate index {idx}")
        seen.add(idx)
    return order


Slice = tuple[int, int, int]
"""(tile row, tile column, k-step), -1 where a slice does not depend on it."""


Read = tuple[int, str | None, int | None, bool, int]
"""An input a k-step reads: (tensor, its reader's role kind and K, both None for a
Pointwise op, whether it is the reader's LHS, the reader's depth in that step)."""


@kept_per_subgraph
def _reads(sg: Subgraph, k: int, step: int) -> tuple[Read, ...]:
    """Every input of the subgraph's ops that is not ephemeral, in op order, as k-step
    ``step`` reads it: the same in every tile, and a tile is priced for many tile sizes
    and traversals."""
    p = sg.g.problem
    found = []
    for q in sg.ops:
        role = sg.roles.get(q)
        depth = sg.depth(q, k, step) if role else 0
        found.extend((t, role and role.kind, role and sg.k_of(q), pos == 0, depth)
                     for pos, t in enumerate(p.inputs[q]) if t not in sg.ephemerals)
    return tuple(found)


def _operand(read: Read, row: int, col: int, step: int,
             tile: tuple[int, int]) -> tuple[Slice, int, bool] | None:
    """The slice of an input a step reads, its size, and whether that step loads it; None
    for an operand that comes ephemerally from the chain."""
    tw, th = tile
    _, kind, own_k, lhs, depth = read
    if kind is None:
        return (row, col, -1), th * tw, step == 0
    if kind == "lhs_head":
        return ((row, -1, -1), th * own_k, step == 0) if lhs else ((-1, -1, step),
                                                                  own_k * depth, True)
    if kind == "rhs_head":
        return ((-1, -1, step), depth * own_k, True) if lhs else ((-1, col, -1),
                                                                 own_k * tw, step == 0)
    if (kind == "lhs_tail" and lhs) or (kind == "rhs_tail" and not lhs):
        return None
    return ((row, -1, step), th * depth, True) if lhs else ((-1, col, step), depth * tw, True)


def operand_loads(kind: str, lhs: bool, grid: tuple[int, int], own_k: int, reduced: int,
                  tiles: tuple[int, int] = (1, 1)) -> int:
    """Elements a loaded MatMul operand moves over ``grid`` (width, height) as ``_operand``
    keys and sizes its slices, for a MatMul of role ``kind`` with its own K and the K its
    steps add up to (``reduced``): each slice loaded once, which every tile, ``k`` and
    order moves at least. Under split K every slice a step reads is keyed by the step, so
    each tile loads its strips again: over ``tiles`` (columns, rows) a standalone's or a
    tail's LHS moves once per tile column, its RHS once per tile row, a head's streamed
    operand once per tile; a head's held strip (keyed by tile row or column only) moves
    once whatever the tiles. An operand the chain makes moves nothing."""
    columns, rows = tiles
    if (kind == "lhs_tail" and lhs) or (kind == "rhs_tail" and not lhs):
        return 0
    if kind == "lhs_head":
        return grid[1] * own_k if lhs else columns * rows * own_k * reduced
    if kind == "rhs_head":
        return columns * rows * reduced * own_k if lhs else grid[0] * own_k
    return (columns * grid[1] if lhs else rows * grid[0]) * reduced


def strip_changes(own_k: int, area: int, tile: tuple[int, int]) -> Fraction:
    """Elements a standalone MatMul with both operands loaded moves at least with one
    k-step over a grid of ``area``: its LHS strip is keyed by the tile row and its RHS
    strip by the column, so every tile after the first changes one and loads it, at least
    ``own_k`` times the tile's smaller side: over the grid, ``own_k`` times its area over
    the tile's larger side."""
    return Fraction(own_k * area, max(tile))


def latency(g: FusionGraph, sg: Subgraph, gran: tuple[int, int, int], kinds: TileKinds,
            resident: frozenset[int], grid: tuple[int, int]) -> Fraction:
    """Sum over tiles and k-steps of max(compute, (loads + writes) / bandwidth), the tiles
    in the order whose ``tile_kinds`` are given.

    Compute depends on the k-step only. A tile's loads depend on the tile before it only
    (every cached slice is re-keyed in the tile's first step), through whether it stays in
    the same tile row and column, and on its own extent; tiles alike in those are priced
    once and counted, and so are k-steps alike (``step_classes``)."""
    k = gran[2]
    bandwidth = exact(g.problem.slow_memory_bandwidth)
    classes, computes, moved_at = step_pricing(sg, k)
    steps = [step for step, _ in classes]
    moved = 0
    compute_bound = [0] * len(classes)
    for prior, at, n in kinds:
        loaded: dict[int, Slice] = {}
        if prior is not None:
            _tile_traffic(g, sg, gran, prior, _extent(gran, grid, prior), resident, loaded,
                          steps)
        traffics = _tile_traffic(g, sg, gran, at, _extent(gran, grid, at), resident, loaded,
                                 steps)
        for i, ((_, alike), traffic) in enumerate(zip(classes, traffics, strict=True)):
            if traffic * moved_at[i][1] >= moved_at[i][0]:
                moved += n * alike * traffic
            else:
                compute_bound[i] += n * alike
    return moved / bandwidth + sum((n * c for n, c in zip(compute_bound, computes, strict=True)),
                                   Fraction(0))


@kept_per_subgraph
def step_pricing(sg: Subgraph, k: int
                 ) -> tuple[list[tuple[int, int]], list[Fraction], list[tuple[int, int]]]:
    """``step_classes``, the compute of one step of each, and the elements a step of each
    moves at least to wait on slow memory (as the numerator and denominator of a ratio:
    compared with every tile kind's traffic, Fraction's own comparison took a tenth of the
    time). They depend on the subgraph and ``k`` only: the search prices every tile and
    traversal at one k of an op set, and counting K = 4,096 in steps of 1 took a fifth of a
    greedy solve's time."""
    p = sg.g.problem
    base = {q: exact(p.base_costs[q]) for q in sg.ops}
    pointwise = sum((base[q] for q in sg.ops if q not in sg.roles), Fraction(0))
    classes = step_classes(sg, k)
    computes = [(pointwise if step == 0 else Fraction(0))
                + sum((base[q] * sg.depth(q, k, step) / sg.reduced_over(q)
                       for q in sg.matmuls), Fraction(0)) for step, _ in classes]
    moved_at = [c * exact(p.slow_memory_bandwidth) for c in computes]
    return classes, computes, [(m.numerator, m.denominator) for m in moved_at]


TileKinds = tuple[tuple[tuple[int, int] | None, tuple[int, int], int], ...]
"""Classes of the tiles of an order that load alike: (the tile before the first of a class,
that first tile, how many), each (row, column)."""


def tile_kinds(tile: tuple[int, int], grid: tuple[int, int], tiles: Sequence[int]
               ) -> TileKinds:
    """The tiles of an order in classes that load alike, a class being the tile's extent
    and whether it starts the order, stays in the row or stays in the column of the tile
    before it. The same for every op set of one grid, tile and order: the search keeps
    them per traversal (``teamkorea_config.order_kinds``)."""
    columns = ceil_div(grid[0], tile[0])
    widths = [_extent((*tile, 0), grid, (0, col))[0] for col in range(columns)]
    heights = [_extent((*tile, 0), grid, (row, 0))[1]
               for row in range(ceil_div(grid[1], tile[1]))]
    counts: dict[tuple[int, int, bool, bool, bool], list] = {}  # kind -> [prior, first, n]
    before = (-1, -1)
    for idx in tiles:
        row, col = divmod(idx, columns)
        kind = (widths[col], heights[row], before[0] < 0, before[0] == row, before[1] == col)
        if kind not in counts:
            counts[kind] = [None if before[0] < 0 else before, (row, col), 0]
        counts[kind][2] += 1
        before = (row, col)
    return tuple((prior, at, n) for prior, at, n in counts.values())


def _extent(gran: tuple[int, int, int], grid: tuple[int, int],
            at: tuple[int, int]) -> tuple[int, int]:
    """(width, height) of the tile at (row, column): the last of a row or column may be
    cut short by the grid."""
    row, col = at
    return min(gran[0], grid[0] - col * gran[0]), min(gran[1], grid[1] - row * gran[1])


def step_classes(sg: Subgraph, k: int) -> list[tuple[int, int]]:
    """(first step, number of steps) of each class of k-steps that compute and move alike,
    in step order. The first step and the last are classes of their own (the first loads
    what the tile reuses, the last writes); a step between them loads only slices keyed by
    its own step, which no earlier step cached, so its compute and traffic follow from its
    MatMuls' depths alone."""
    last = sg.k_steps(k) - 1
    found: dict[object, list[int]] = {}
    for step in range(last + 1):
        key = ("edge", step) if step in (0, last) else \
            tuple(sg.depth(q, k, step) for q in sg.matmuls)
        found.setdefault(key, [step, 0])[1] += 1
    return [(step, alike) for step, alike in found.values()]


def _tile_traffic(g: FusionGraph, sg: Subgraph, gran: tuple[int, int, int],
                  at: tuple[int, int], extent: tuple[int, int], resident: frozenset[int],
                  loaded: dict[int, Slice], steps: Sequence[int]) -> list[int]:
    """Elements moved in each of ``steps`` (k-steps, in order) of one tile; ``loaded`` (the
    slice cached per tensor) is updated as the tile goes."""
    k = gran[2]
    row, col = at
    last = sg.k_steps(k) - 1
    out = []
    for step in steps:
        moved = 0
        for read in _reads(sg, k, step):
            t = read[0]
            if t in resident:
                continue
            found = _operand(read, row, col, step, extent)
            if found is None:
                continue
            key, size, loads = found
            if loads and loaded.get(t) != key:
                moved += size
                loaded[t] = key
        if step == last:
            moved += len(sg.written) * extent[0] * extent[1]
        out.append(moved)
    return out


def _check_available(g: FusionGraph, sg: Subgraph, i: int, slow: set[int],
                     resident: frozenset[int]) -> None:
    """S4.2 (this project's addition): a boundary input is in slow memory or resident."""
    p = g.problem
    for q in sg.ops:
        for t in p.inputs[q]:
            if g.producer.get(t) in sg.members or t in slow or t in resident:
                continue
            raise Rejected(("subgraphs", i), "available",
                           f"Subgraph {i}: op {q} reads tensor {t}, which no earlier subgraph "
                           "wrote to slow memory and the previous one did not retain")


def run(problem: FusionProblem | FusionGraph, solution: FusionSolution,
        latencies: list[Fraction], mismatches: list[tuple[int, Fraction, Fraction]],
        strict: bool = False) -> None:
    """Append every subgraph's latency under this reading to ``latencies`` and each
    non-zero claim off by more than 1e-6 to ``mismatches`` (an error with ``strict``);
    raises ``Rejected`` at the first rule broken. Zero claims mean "not given"."""
    g = problem if isinstance(problem, FusionGraph) else FusionGraph(problem)
    runs_in: dict[int, list[tuple[int, ...]]] = {q: [] for q in range(g.problem.num_ops)}
    for ops in solution.subgraphs:
        for q in ops:
            runs_in[q].append(tuple(ops))
    slow = set(g.graph_inputs)
    resident: frozenset[int] = frozenset()
    orders = solution.traversal_orders or [None] * len(solution.subgraphs)
    for i, ops in enumerate(solution.subgraphs):
        sg = Subgraph(g, tuple(ops), frozenset(solution.tensors_to_retain[i]))
        w, h, k = solution.granularities[i]
        found = evaluate_subgraph(g, sg, i, (w, h, k), orders[i], resident, runs_in)
        _check_available(g, sg, i, slow, resident)
        latencies.append(found)
        claimed = exact(solution.subgraph_latencies[i])
        if claimed and abs(claimed - found) > CLAIM_TOLERANCE * max(Fraction(1), found):
            if strict:
                raise Rejected(("subgraph_latencies", i), "claimed",
                               f"Subgraph {i}: reported latency {float(claimed)} does not "
                               f"match computed {float(found)}")
            mismatches.append((i, claimed, found))
        slow.update(sg.written)
        resident = sg.retain
