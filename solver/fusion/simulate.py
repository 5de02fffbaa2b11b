"""The literal step-by-step simulation of one subgraph: the reference for every latency.

It follows SEMANTICS.md S6-S12 as written, one step (a tile and one of its k-steps) at a
time, with concrete slices and firings, and nothing cached between steps except what the
semantics carry over (the previous step's slices). It is slow on purpose: the fast scorer
(``score.py``) must agree with it, and the tests check that they do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from solver.fusion.problem import FusionGraph, Rules, SubgraphShape, ceil_div, exact, k_steps

Interval = tuple[int, int]
# A slice is (tensor,) when it covers the whole tensor (role-less, S11.1), otherwise
# (tensor, rows, cols, role) with role in {"lhs", "rhs", "pw"}.
SliceKey = tuple
Flags = tuple[bool, bool]  # (rows streamed, columns streamed), S8.2


@dataclass(frozen=True)
class Step:
    """What one step costs and occupies (S8.4, S11, S12)."""

    tile: int
    row: int
    col: int
    k_step: int
    compute: Fraction
    loaded: int
    stored: int
    latency: Fraction
    ws_retained_in: int
    ws_inputs: int
    ws_outputs: int
    ws_retained_out: int

    @property
    def working_set(self) -> int:
        return self.ws_retained_in + self.ws_inputs + self.ws_outputs + self.ws_retained_out


@dataclass
class Trace:
    """The outcome of simulating a subgraph: latency, peak working set, first overflow."""

    latency: Fraction = Fraction(0)
    ws_peak: int = 0
    first_overflow: Step | None = None
    fired: set[int] = field(default_factory=set)
    op_compute: dict[int, Fraction] = field(default_factory=dict)
    """Compute of every op's firings over all steps (S8.1), for checks of per-op floors."""
    steps: list[Step] = field(default_factory=list)


def raster_order(ntr: int, ntc: int) -> list[int]:
    return list(range(ntr * ntc))


def snake_order(ntr: int, ntc: int) -> list[int]:
    """Row-major with every odd row reversed (PROBLEM.md Example 4B's zig-zag)."""
    return [r * ntc + (c if r % 2 == 0 else ntc - 1 - c) for r in range(ntr) for c in range(ntc)]


def column_order(ntr: int, ntc: int) -> list[int]:
    """Column-major: down each column, columns left to right (a MatMul's RHS strip stays
    put along a column as its LHS strip does along a row)."""
    return [r * ntc + c for c in range(ntc) for r in range(ntr)]


def column_snake_order(ntr: int, ntc: int) -> list[int]:
    """Column-major with every odd column walked upwards."""
    return [(r if c % 2 == 0 else ntr - 1 - r) * ntc + c for c in range(ntc) for r in range(ntr)]


TraversalName = Literal["raster", "snake", "column", "column_snake"]
NAMED_ORDERS: dict[TraversalName, Callable[[int, int], list[int]]] = {
    "raster": raster_order, "snake": snake_order,
    "column": column_order, "column_snake": column_snake_order,
}


def simulate(
    g: FusionGraph,
    shape: SubgraphShape,
    gran: tuple[int, int, int],
    order: Sequence[int],
    retained_in: frozenset[int],
    retained_out: frozenset[int],
    rules: Rules,
    *,
    record: bool = False,
    stop_at_overflow: bool = False,
) -> Trace:
    """Run every step of a structurally valid subgraph in ``order`` (tile indices).

    ``retained_in`` is everything the previous subgraph retained; ``retained_out`` what
    this one retains. With ``stop_at_overflow`` the run ends at the first step whose
    working set exceeds the capacity.
    """
    sim = _Simulation(g, shape, gran, retained_in, retained_out, rules)
    trace = Trace()
    capacity = exact(g.problem.fast_memory_capacity)
    previous: dict[SliceKey, int] = {}
    completed = 0  # area of retained outputs already completed (S12 "accumulate")
    for tile in order:
        tr, tc = divmod(tile, sim.ntc)
        for j in range(sim.nks):
            step, previous = sim.step(tile, tr, tc, j, previous, completed, trace.fired,
                                      trace.op_compute)
            trace.latency += step.latency
            trace.ws_peak = max(trace.ws_peak, step.working_set)
            if record:
                trace.steps.append(step)
            if step.working_set > capacity and trace.first_overflow is None:
                trace.first_overflow = step
                if stop_at_overflow:
                    return trace
        completed += sum(sim.tile_area(t, tr, tc) for t in sim.retained_outputs)
    return trace


class _Simulation:
    """The fixed data of one subgraph at one granularity, and the step rule."""

    def __init__(self, g: FusionGraph, shape: SubgraphShape, gran: tuple[int, int, int],
                 retained_in: frozenset[int], retained_out: frozenset[int], rules: Rules):
        p = g.problem
        self.g, self.p, self.shape, self.rules = g, p, shape, rules
        self.w, self.h, self.k = gran
        self.nw, self.nh, self.nk = g.native
        self.bandwidth = exact(p.slow_memory_bandwidth)
        self.base = [exact(c) for c in p.base_costs]
        self.retained_in = retained_in
        self.ntr, self.ntc = shape.grid(self.w, self.h)
        self.nkq = k_steps(g, shape, self.k)
        self.nks = max(self.nkq.values(), default=1)
        self.epilogue = self.nks - 1 if rules.epilogue_step == "last" else 0
        self.written = [t for t in shape.outputs if t not in retained_out]
        accumulate = rules.retained_output_ws == "accumulate"
        self.retained_outputs = ([t for t in shape.outputs if t in retained_out]
                                 if accumulate else [])
        self.ws_retained_in = sum(g.size(t) for t in retained_in)
        self.ws_retained_ephemerals = sum(
            g.size(t) for t in retained_out if t in shape.ephemerals) if accumulate else 0

    def rows(self, t: int, tr: int) -> Interval:
        return tr * self.h, min((tr + 1) * self.h, self.p.heights[t])

    def cols(self, t: int, tc: int) -> Interval:
        return tc * self.w, min((tc + 1) * self.w, self.p.widths[t])

    def tile_area(self, t: int, tr: int, tc: int) -> int:
        (r0, r1), (c0, c1) = self.rows(t, tr), self.cols(t, tc)
        return max(r1 - r0, 0) * max(c1 - c0, 0)

    def factor(self, span: Interval, native: int, streamed: bool) -> Fraction | int:
        """S8.2: a spatial dimension pays whole native tiles, a streamed one its share."""
        n = span[1] - span[0]
        return Fraction(n, native) if streamed else ceil_div(n, native)

    def reduction(self, q: int, depth: int) -> Fraction:
        """S8.3: the reduction factor of a MatMul firing of depth ``depth``."""
        return Fraction(depth, self.g.covered_depth(q, self.rules))

    def step(self, tile: int, tr: int, tc: int, j: int, previous: dict[SliceKey, int],
             completed: int, fired: set[int], op_compute: dict[int, Fraction]
             ) -> tuple[Step, dict[SliceKey, int]]:
        p = self.p
        firings: dict[tuple, Fraction] = {}
        loads: dict[SliceKey, int] = {}

        def fire(key: tuple, cost: Fraction) -> bool:
            if key in firings:  # S8.1: identical firings in one step are charged once
                return False
            firings[key] = cost
            fired.add(key[0])
            return True

        def require(t: int, rows: Interval, cols: Interval, role: str, flags: Flags) -> None:
            """S10.3: a requirement is loaded, provided by an accumulator, or computed."""
            if t not in self.shape.produced:
                if t in self.retained_in:
                    return
                whole = rows == (0, p.heights[t]) and cols == (0, p.widths[t])
                key = (t,) if whole else (t, rows, cols, role)
                loads[key] = (rows[1] - rows[0]) * (cols[1] - cols[0])
                return
            q = self.shape.producer[t]
            if q in self.shape.roots:
                return
            spatial = self.factor(rows, self.nh, flags[0]) * self.factor(cols, self.nw, flags[1])
            if not self.g.is_matmul(q):
                if fire((q, rows, cols, None), self.base[q] * spatial):
                    for u in p.inputs[q]:
                        require(u, rows, cols, "pw", flags)
                return
            big_k = self.g.reduction_length(q)
            if fire((q, rows, cols, (0, big_k)), self.base[q] * spatial * self.reduction(q, big_k)):
                lhs, rhs = p.inputs[q]
                require(lhs, rows, (0, big_k), "lhs", (flags[0], False))
                require(rhs, (0, big_k), cols, "rhs", (False, flags[1]))

        for q in self.shape.roots:  # S10.1: root seeds
            if j >= self.nkq[q]:
                continue
            out = p.outputs[q][0]
            rows, cols = self.rows(out, tr), self.cols(out, tc)
            if rows[0] >= rows[1] or cols[0] >= cols[1]:
                continue
            kb = j * self.k
            ke = min(kb + self.k, self.g.reduction_length(q))
            spatial = self.factor(rows, self.nh, False) * self.factor(cols, self.nw, False)
            fire((q, rows, cols, (kb, ke)), self.base[q] * spatial * self.reduction(q, ke - kb))
            lhs, rhs = p.inputs[q]
            require(lhs, rows, (kb, ke), "lhs", (False, True))
            require(rhs, (kb, ke), cols, "rhs", (True, False))
        if j == self.epilogue:  # S10.2: tile-level seeds
            for t in self.shape.outputs:
                if self.g.is_matmul(self.shape.producer[t]):
                    continue
                rows, cols = self.rows(t, tr), self.cols(t, tc)
                if rows[0] < rows[1] and cols[0] < cols[1]:
                    require(t, rows, cols, "pw", (False, False))

        current = self.deduplicate(loads, previous)
        loaded = sum(size for key, size in current.items() if key not in previous)
        last = j == self.nks - 1
        stored = sum(self.tile_area(t, tr, tc) for t in self.written) if last else 0
        compute = sum(firings.values(), Fraction(0))
        for key, cost in firings.items():
            op_compute[key[0]] = op_compute.get(key[0], Fraction(0)) + cost
        step = Step(
            tile=tile, row=tr, col=tc, k_step=j, compute=compute, loaded=loaded, stored=stored,
            latency=max(compute, Fraction(loaded + stored) / self.bandwidth),
            ws_retained_in=self.ws_retained_in,
            ws_inputs=sum(current.values()),
            ws_outputs=sum(self.tile_area(t, tr, tc) for t in self.shape.outputs),
            ws_retained_out=completed + self.ws_retained_ephemerals,
        )
        return step, current

    def deduplicate(self, loads: dict[SliceKey, int], previous: dict[SliceKey, int]
                    ) -> dict[SliceKey, int]:
        """S11.2-S11.3: a full slice serves every partial slice of its tensor, in this step
        and, when it was resident in the previous step, in this one too (it stays full)."""
        full = {key[0] for key in loads if len(key) == 1}
        full |= {key[0] for key in loads if len(key) > 1 and (key[0],) in previous}
        current = {key: size for key, size in loads.items() if key[0] not in full}
        current.update({(t,): self.g.size(t) for t in full})
        return current
