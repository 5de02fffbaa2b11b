"""CP-SAT on the whole problem, one variable per group (``groups.py``) and per node outside
every group, memory constraints added as they are found violated.

A group's members cost, use memory and join other nodes through its root's strategy, so
its literals are the root's; an edge between two units becomes one matrix over their
positions (parallel edges summed), an edge inside a group a cost on the root. The memory
limit has one constraint per compressed time step (tens of thousands, each over every
unit live then), often too many to state; the model then starts with the steps where the
incumbent has least room, a solve that has run a third of its time stops at an answer
that overflows a step left out, and the steps its answers overflowed are added, until the
answers fit every step. Each model is a
relaxation of the problem, so its bound is a lower bound of the optimum; an answer that
fits and is proven optimal for the model is optimal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from solver import deadline as clock
from solver.iopddl.groups import Group
from solver.iopddl.state import State
from solver.iopddl.work import FORBIDDEN, NO_LIMIT, Work

MAX_OBJECTIVE = 2.0**60
"""A model whose costs could sum past this is not built (CP-SAT sums in int64)."""
PENALTY = 1e13
"""What an "infinite" strategy or pair costs in a model: soft, so that a model around an
incumbent that still uses some is feasible and removes them."""
MAX_ENTRIES = 400_000
"""Largest model (pair entries plus unit strategies) given to CP-SAT whole."""
BUILD_S_PER_ENTRY = 5e-5
"""Seconds building a merged model takes per entry, with margin (34 µs measured on A's
48,000 entries): it is not interruptible, so it starts only when it can end."""
STEPS_PER_ROUND = 80
MAX_UPFRONT_TERMS = 300_000
"""Memory constraints are all stated at once when their terms number at most this (a
second solve repeats CP-SAT's presolve: 3.4 s on 3,400 units); else added as violated."""
FINISH_S = 0.05
FINISH_S_PER_ENTRY = 3e-6
"""Time kept, out of a solve's end, for CP-SAT to stop and for its answer to be read and
applied (0.13 s for a 62,000-entry model, beyond CP-SAT's own 0.09 s)."""
ROUND_SHARE = 0.34
"""Share of the time left a solve runs before it may stop at an answer that overflows a
step left out of the model."""


@dataclass
class Units:
    """The problem seen through its groups: ``unit[v]`` and ``image[v]`` (v's position for
    each of its unit's positions)."""

    roots: list[int]
    unit: dict[int, int]
    image: dict[int, np.ndarray]
    allowed: list[np.ndarray]


def units_of(work: Work, groups: list[Group]) -> Units:
    roots: list[int] = []
    unit: dict[int, int] = {}
    image: dict[int, np.ndarray] = {}
    allowed: list[np.ndarray] = []
    for g in groups:
        for v, m in g.maps.items():
            unit[v] = len(roots)
            image[v] = m
        roots.append(g.root)
        allowed.append(g.allowed)
    for i in (int(i) for i in work.live_nodes):
        if i not in unit:
            unit[i] = len(roots)
            image[i] = np.arange(len(work.cost[i]))
            roots.append(i)
            allowed.append(np.ones(len(work.cost[i]), dtype=bool))
    return Units(roots, unit, image, allowed)


def _soft(values: np.ndarray) -> np.ndarray:
    return np.where(values >= FORBIDDEN, PENALTY, values)


class MergedModel:
    """The model over ``free`` units (default: all), every other unit fixed at ``state``:
    edges to fixed nodes become costs on the free units, and each step's memory room is
    what the fixed nodes leave. ``domains`` (per free unit, its positions the model may
    take; default all) keeps a model over many units small."""

    def __init__(self, state: State, units: Units, free: list[int] | None = None,
                 domains: dict[int, np.ndarray] | None = None):
        self.state = state
        self.units = units
        work = state.work
        self.free = list(range(len(units.roots))) if free is None else sorted(free)
        local = {u: k for k, u in enumerate(self.free)}
        self.local = local
        domains = domains or {}
        self.domains = [domains.get(u, np.arange(len(units.allowed[u]))) for u in self.free]
        members = [v for v, u in units.unit.items() if u in local]
        self.unary = [np.zeros(len(d)) for d in self.domains]
        pairs: dict[tuple[int, int], np.ndarray] = {}
        for v in members:
            k = local[units.unit[v]]
            image = self.image(v)
            self.unary[k] += _soft(work.cost[v][image])
            for j, e in work.adjacent[v].items():
                edge = work.edges[e]
                kj = local.get(units.unit[j])
                if kj is None:
                    self.unary[k] += _soft(edge.toward(v)[image, state.pos[j]])
                elif edge.u == v:
                    m = _soft(edge.cost[np.ix_(image, self.image(j))])
                    if kj == k:
                        self.unary[k] += np.diagonal(m)
                    elif k < kj:
                        pairs[k, kj] = pairs.get((k, kj), 0) + m
                    else:
                        pairs[kj, k] = pairs.get((kj, k), 0) + m.T
        self.pairs = pairs
        self.size = sum(m.size for m in pairs.values()) + sum(len(x) for x in self.unary)
        self.count = len(self.free)
        self.nodes = np.array(members, dtype=np.int64)
        self.first = work.first[self.nodes]
        self.last = work.last[self.nodes]
        # per step, what the fixed nodes leave the free ones (huge where no limit binds)
        self.room = state.slack + self.load(state.pos)

    def image(self, v: int) -> np.ndarray:
        """Member v's position for each model position of its unit."""
        return self.units.image[v][self.domains[self.local[self.units.unit[v]]]]

    def build(self) -> None:
        model = cp_model.CpModel()
        self.model = model
        self.x = []
        objective: list[tuple[int, cp_model.IntVar]] = []
        unary = [u.copy() for u in self.unary]
        reparam = []
        for (a, b), m in self.pairs.items():
            rows = m.min(axis=1)
            m = m - rows[:, None]
            cols = m.min(axis=0)
            m = m - cols[None, :]
            unary[a] += rows
            unary[b] += cols
            reparam.append((a, b, m))
        total = 0.0
        for u in range(self.count):
            lits = [model.new_bool_var("") for _ in unary[u]]
            for k, lit in enumerate(lits):
                if not self.units.allowed[self.free[u]][self.domains[u][k]]:
                    model.add(lit == 0)
                elif unary[u][k]:
                    objective.append((int(round(unary[u][k])), lit))
            total += float(unary[u].max(initial=0))
            model.add_exactly_one(lits)
            self.x.append(lits)
        self.y: list[tuple[int, int, np.ndarray]] = []
        for a, b, m in reparam:
            rows: list[list] = [[] for _ in range(m.shape[0])]
            cols: list[list] = [[] for _ in range(m.shape[1])]
            ys = np.empty(m.shape, dtype=object)
            self.y.append((a, b, ys))
            for (i, j), c in np.ndenumerate(m):
                y = ys[i, j] = model.new_bool_var("")
                rows[i].append(y)
                cols[j].append(y)
                if c:
                    objective.append((int(round(c)), y))
            for i, row in enumerate(rows):
                model.add(sum(row) == self.x[a][i])
            for j, col in enumerate(cols):
                model.add(sum(col) == self.x[b][j])
            total += float(m.max(initial=0))
        self.fits_int64 = total < MAX_OBJECTIVE
        self.objective = objective
        model.minimize(sum(c * lit for c, lit in objective))
        self.added: set[int] = set()

    def add_step(self, t: int) -> None:
        """The memory constraint of compressed step t, over the units live then."""
        work = self.state.work
        live = np.flatnonzero((self.first <= t) & (t < self.last))
        coefficient: dict[int, np.ndarray] = {}
        self.added.add(t)
        if self.room[t] >= NO_LIMIT // 2:
            return
        for k in live:
            v = int(self.nodes[k])
            var = work.var(v)
            if var.any():
                u = self.local[self.units.unit[v]]
                coefficient[u] = coefficient.get(u, 0) + var[self.image(v)]
        terms = [(int(c), self.x[u][k]) for u, vec in coefficient.items()
                 for k, c in enumerate(vec) if c]
        if terms:
            self.model.add(sum(c * lit for c, lit in terms) <= int(self.room[t]))

    def terms(self, steps: np.ndarray) -> int:
        """About how many terms the memory constraints of ``steps`` hold (live members
        times their strategies, summed)."""
        strategies = np.array([len(self.state.work.cost[int(v)]) for v in self.nodes],
                              dtype=np.int64)
        live = np.zeros(len(self.room) + 1, dtype=np.int64)
        np.add.at(live, self.first, strategies)
        np.add.at(live, self.last, -strategies)
        return int(np.cumsum(live)[:-1][steps].sum())

    def positions(self, value: Callable[[cp_model.IntVar], bool]) -> dict[int, int]:
        """The free nodes' positions in an answer (``value`` of a solver or callback)."""
        chosen = [next(k for k, lit in enumerate(lits) if value(lit)) for lits in self.x]
        return {int(v): int(self.image(int(v))[chosen[self.local[self.units.unit[int(v)]]]])
                for v in self.nodes}

    def load(self, pos: dict[int, int]) -> np.ndarray:
        """The free nodes' variable usage at each compressed step under ``pos``."""
        work = self.state.work
        load = np.zeros(len(work.cap) + 1, dtype=np.int64)
        for v, a, b in zip(self.nodes.tolist(), self.first.tolist(), self.last.tolist(),
                           strict=True):
            if a < b:
                amount = int(work.var(v)[pos[v]])
                load[a] += amount
                load[b] -= amount
        return np.cumsum(load)[:-1]

    def overflow(self, positions: dict[int, int]) -> np.ndarray:
        """How far each compressed step is over its cap with the free nodes at
        ``positions`` and the others as they are (<= 0 where it fits): only the free
        nodes are summed, against ``room``."""
        return self.load(positions) - self.room

    def hint(self, pos: dict[int, int]) -> None:
        """Every Boolean hinted from ``pos`` (a complete hint CP-SAT takes as it is)."""
        self.model.clear_hints()
        chosen = []
        for k, u in enumerate(self.free):
            root = self.units.roots[u]
            same = np.flatnonzero(self.image(root) == pos[root])
            at = int(same[0]) if same.size else 0
            chosen.append(at)
            for position, lit in enumerate(self.x[k]):
                self.model.add_hint(lit, position == at)
        for a, b, ys in self.y:
            for (i, j), y in np.ndenumerate(ys):
                self.model.add_hint(y, i == chosen[a] and j == chosen[b])


@dataclass
class Solve:
    proven: bool
    """The answer kept is optimal (for the free units, the others fixed)."""
    bound: float | None
    """A lower bound: of the problem when every unit was free (the optimum's cost when
    ``proven``), else of the free part's model objective (unused)."""
    build_s: float
    """Seconds spent building the model (before any search)."""


class _Watch(cp_model.CpSolverSolutionCallback):
    """Watches a solve's answers for steps left out of the model: keeps the cheapest answer
    that fits every step, gathers the overflow of those that do not, and, once the solve
    has run ``patience`` seconds, stops it at an answer that overflows (a restart repeats
    CP-SAT's presolve, seconds at 20,000 units, so each adds the steps of many answers).
    Answers are read on the 1st, 2nd, 4th, ... and every 16th (one costs ~10 ms at 3,000
    units), and every one after ``patience``."""

    def __init__(self, merged: MergedModel, patience: float):
        super().__init__()
        self.merged = merged
        self.patience = patience
        self.elapsed = clock.cpsat_elapsed()
        self.count = 0
        self.over: np.ndarray | None = None
        self.fitting: dict[int, int] | None = None
        self.fitting_objective = float("inf")

    def on_solution_callback(self) -> None:
        self.count += 1
        late = self.elapsed(self) >= self.patience
        if not late and self.count & (self.count - 1) and self.count % 16:
            return
        positions = self.merged.positions(self.boolean_value)
        over = self.merged.overflow(positions)
        if (over > 0).any():
            self.over = over if self.over is None else np.maximum(self.over, over)
            if late:
                self.stop_search()
        elif self.objective_value < self.fitting_objective:
            self.fitting, self.fitting_objective = positions, self.objective_value


def _adopt(state: State, positions: dict[int, int]) -> None:
    """Move ``state`` to ``positions`` (which fit) when that lowers its cost."""
    old = state.cost()
    before = {v: state.pos[v] for v in positions}
    for v, p in positions.items():
        state.move(v, p)
    if state.cost() > old:
        for v, p in before.items():
            state.move(v, p)


def solve_whole(state: State, units: Units, until: float, seed: int, workers: int,
                free: list[int] | None = None, domains: dict[int, np.ndarray] | None = None
                ) -> Solve:
    """Improve ``state`` with the merged model over ``free`` units (default: all; their
    positions restricted to ``domains``) until ``until``; ``state`` keeps the best fitting
    answer found."""
    began = clock.now()
    merged = MergedModel(state, units, free, domains)
    if merged.size > MAX_ENTRIES:
        return Solve(False, None, clock.now() - began)
    merged.build()
    if not merged.fits_int64:
        return Solve(False, None, clock.now() - began)
    work = state.work
    binding = np.flatnonzero(merged.room < NO_LIMIT // 2)
    if binding.size:
        tight = binding if merged.terms(binding) <= MAX_UPFRONT_TERMS else binding[
            np.argsort(merged.room[binding], kind="stable")[:STEPS_PER_ROUND]]
        for t in tight.tolist():
            if clock.now() >= until:
                break
            merged.add_step(t)
    built = clock.now() - began
    until -= FINISH_S + FINISH_S_PER_ENTRY * merged.size
    bound: float | None = None
    while clock.now() < until:
        merged.hint(state.pos)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = workers
        solver.parameters.random_seed = seed
        clock.limit_cpsat(solver.parameters, until, floor_s=0.05)
        watch = _Watch(merged, ROUND_SHARE * (until - clock.now()))
        status = clock.run_cpsat(solver, merged.model, watch)
        if status == cp_model.INFEASIBLE:
            return Solve(False, bound, built)
        relaxed = float(np.floor(solver.best_objective_bound * (1 - 1e-9)) - 1) + (
            work.offset if free is None else 0.0)
        bound = relaxed if bound is None else max(bound, relaxed)
        if status != cp_model.OPTIMAL and status != cp_model.FEASIBLE:
            break
        positions = merged.positions(solver.boolean_value)
        over = merged.overflow(positions)
        if (over <= 0).all():
            _adopt(state, positions)
            return Solve(status == cp_model.OPTIMAL, state.cost() if
                         status == cp_model.OPTIMAL else bound, built)
        if watch.fitting is not None:
            _adopt(state, watch.fitting)
        if watch.over is not None:
            over = np.maximum(over, watch.over)
        for t in np.argsort(-over, kind="stable")[:STEPS_PER_ROUND].tolist():
            if clock.now() >= until:
                break
            if over[t] > 0 and t not in merged.added:
                merged.add_step(t)
    return Solve(False, bound, built)


def whole_size(work: Work, units: Units) -> int:
    """The size ``MergedModel`` would have over every unit (pair entries and strategies)."""
    pairs: dict[tuple[int, int], int] = {}
    for edge in work.edges.values():
        a, b = sorted((units.unit[edge.u], units.unit[edge.v]))
        if a != b:
            pairs[a, b] = len(units.allowed[a]) * len(units.allowed[b])
    return sum(pairs.values()) + sum(len(a) for a in units.allowed)


def unit_adjacency(work: Work, units: Units) -> list[set[int]]:
    adjacent: list[set[int]] = [set() for _ in units.roots]
    for edge in work.edges.values():
        a, b = units.unit[edge.u], units.unit[edge.v]
        if a != b:
            adjacent[a].add(b)
            adjacent[b].add(a)
    return adjacent


def unit_region(adjacent: list[set[int]], start: int, size: int,
                rng: np.random.Generator) -> list[int]:
    """About ``size`` units grown breadth first from ``start`` (neighbours shuffled)."""
    seen = {start}
    frontier = [start]
    while frontier and len(seen) < size:
        grown = []
        for u in frontier:
            for w in rng.permutation(sorted(adjacent[u])).tolist():
                if w not in seen and len(seen) < size:
                    seen.add(w)
                    grown.append(w)
        frontier = grown
    return sorted(seen)
