"""The iopddl solvers: two baselines and the anytime ``cpsat`` search.

- ``cheapest``: each node's cheapest strategy, then repaired until every step fits.
- ``greedy``: dynamic programming over a spanning forest, improved one node at a time in
  the neighbours' context (ignoring memory), repaired, then improved again under the
  caps: what most contest teams shipped.
- ``cpsat``: the exact reductions, a valid incumbent at once (each node's smallest usage,
  which fits whenever anything does), that answer improved by moves of units (groups of
  nodes that decide each other, and the other nodes; ``coarse.py``), the greedy's
  answer, the priced search of ``lagrange.py`` over units, then CP-SAT over units
  (``merged.py``): on the whole problem when its model is small enough (its bound is the
  answer's), else the whole problem over narrowed domains (``narrowed.py``), compound
  unit moves, then neighbourhoods of units around the incumbent until the deadline (the
  bound then is the Lagrangian one of ``lagrange.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from solver import deadline as clock
from solver import progress
from solver.iopddl.coarse import UnitGraph, UnitState
from solver.iopddl.groups import find_groups
from solver.iopddl.lagrange import priced_bound, priced_search, tree_start
from solver.iopddl.merged import (
    BUILD_S_PER_ENTRY,
    MAX_ENTRIES,
    Units,
    solve_whole,
    unit_adjacency,
    unit_region,
    units_of,
    whole_size,
)
from solver.iopddl.narrowed import narrowed_rounds
from solver.iopddl.problem import Problem
from solver.iopddl.reduce import reduce, unfold
from solver.iopddl.state import State
from solver.iopddl.work import FORBIDDEN, NO_LIMIT, Work, build

REDUCE_SHARE = 0.5
"""Most of the time the reductions may take (they take 3 s on 35,000 nodes)."""
BOUND_SHARE = 0.1
PRICED_SHARE = 0.2
PRICED_SHARE_LNS = 0.4
"""Share of the time for the priced search: less when the whole problem fits one model."""
NARROWED_SHARE = 0.55
"""Share of the time left after the priced search and the bound for the narrowed
whole-problem models (``narrowed.py``)."""
KICK_SHARE = 0.6
"""Share of the time left after those for compound unit moves (the rest goes to
neighbourhoods re-solved by CP-SAT). The narrowed models come first: on S they took the
priced search's 1.5796e9 to 1.5580e9 in 61 s, where the compound moves first took it to
1.5745e9 in 33 s and the narrowed models after them to 1.5644e9 (M: 50.23e9 either
way)."""
TREE_S_PER_NODE = 1e-4
"""Seconds the forest dynamic programming takes per node (1-2.4 s on A's 23,000 nodes
left after the reductions, on the 2-core machine)."""
UNITS_S_PER_NODE = 2e-4
"""Seconds finding the groups and building the units' graph take per node, with margin
(3.5 s on S's 25,900 nodes left after the reductions, 3.5 s on A's 23,200)."""
START_SIZE = 60
TIGHT_UNITS = 400
CHEAPEST = 3
"""A memory neighbourhood: at most this many units, each with its current position, its
3 cheapest in context and its 3 cheapest among those using less at the step chosen."""
MIN_SIZE, MAX_SIZE = 8, 3_000
STEP_SECONDS = 3.0


@dataclass
class Outcome:
    solution: list[int] | None
    status: str
    bound: float | None = None
    work: Work | None = None
    rounds: int = 0
    improvements: int = 0
    first_incumbent_at: float | None = None
    notes: list[str] = field(default_factory=list)


class Infeasible(Exception):
    """Even each node's smallest usage exceeds the limit at some step."""


def _working(problem: Problem) -> Work:
    """The working problem; without the "infinite" strategies when a solution fits
    without them."""
    work = build(problem)
    if work.refresh_caps():
        return work
    work = build(problem, forbid=False)
    if not work.refresh_caps():
        raise Infeasible
    return work


def _positions(work: Work, pick: Callable[[int], int]) -> dict[int, int]:
    return {int(i): pick(int(i)) for i in work.live_nodes}


def _smallest_usage(work: Work) -> State:
    """Each node's smallest usage (its cheapest among those): fits whenever anything does."""
    def pick(i: int) -> int:
        return int(np.lexsort((work.cost[i], work.use[i]))[0])
    return State(work, _positions(work, pick))


def _greedy(work: Work, until: float, start: dict[int, int] | None = None) -> State | None:
    """The greedy answer, or None when the clock passes ``until`` before it fits."""
    state = State(work, start or _positions(work, lambda i: int(np.argmin(work.cost[i]))))
    for _ in range(20):
        moved = 0
        for i in state.nodes:
            best = int(np.argmin(state.local[i]))
            if state.local[i][best] < state.local[i][state.pos[i]]:
                state.move(i, best)
                moved += 1
        if not moved or clock.now() >= until:
            break
    if not state.repair(until, clock.now):
        return None
    state.descend(state.nodes, until, clock.now)
    return state


def _solution(work: Work, state: State) -> list[int]:
    return unfold(work, {i: int(work.strategies[i][p]) for i, p in state.pos.items()})


def _fallback(work: Work, state: State | None) -> State:
    """``state``, or each node's smallest usage when the clock stopped it from fitting."""
    return state if state is not None else _smallest_usage(work)


def cheapest(problem: Problem, until: float, seed: int, workers: int) -> Outcome:
    work = _working(problem)
    state: State | None = State(work, _positions(work, lambda i: int(np.argmin(work.cost[i]))))
    if state is not None and not state.repair(until, clock.now):
        state = None
    return Outcome(_solution(work, _fallback(work, state)), "feasible", work=work)


def greedy(problem: Problem, until: float, seed: int, workers: int) -> Outcome:
    work = _working(problem)
    state = _greedy(work, until, tree_start(work, dict(enumerate(work.cost))))
    return Outcome(_solution(work, _fallback(work, state)), "feasible", work=work)


def _trivial_bound(work: Work) -> float:
    """Every node's and every edge's cheapest entry, summed: a bound in no time."""
    return work.offset + sum(float(work.cost[int(i)].min()) for i in work.live_nodes) + sum(
        float(e.cost.min()) for e in work.edges.values())


def cpsat(problem: Problem, until: float, seed: int, workers: int) -> Outcome:
    started = clock.now()
    work = _working(problem)
    reduce(work, started + REDUCE_SHARE * (until - started))
    best = _smallest_usage(work)
    outcome = Outcome(None, "feasible", work=work, first_incumbent_at=clock.now() - started,
                      bound=_trivial_bound(work))
    progress.report(best.cost(), outcome.bound)
    # building the units and the forest dynamic programming are not interruptible: each
    # starts only if it can end
    graph: UnitGraph | None = None
    if clock.now() + UNITS_S_PER_NODE * len(work.live_nodes) < until:
        graph = UnitGraph(best, units_of(work, find_groups(work)))
        best = _by_units(best, graph, until, kicks=False)
        progress.report(best.cost(), outcome.bound)
    tree_s = TREE_S_PER_NODE * len(work.live_nodes)
    if clock.now() + tree_s >= until:
        return _finish(outcome, work, best)
    greedy_state = _greedy(work, until, tree_start(work, dict(enumerate(work.cost))))
    if greedy_state is not None and greedy_state.cost() < best.cost():
        best = greedy_state
        progress.report(best.cost(), outcome.bound)
    if graph is None or clock.now() + tree_s >= until:
        return _finish(outcome, work, best)
    size = whole_size(work, graph.units)
    whole = size <= MAX_ENTRIES
    share = PRICED_SHARE if whole else PRICED_SHARE_LNS
    best, lam, beliefs, elite = priced_search(work, graph,
                                              clock.now() + share * (until - clock.now()), best)
    progress.report(best.cost(), outcome.bound)
    if not best.nodes:
        outcome.bound = best.cost()
    elif whole and clock.now() + BUILD_S_PER_ENTRY * size < until:
        result = solve_whole(best, graph.units, until, seed, workers)
        if result.bound is not None:
            outcome.bound = max(outcome.bound, result.bound)
            outcome.rounds = 1
    elif clock.now() < until:
        bound_until = clock.now() + BOUND_SHARE * (until - started)
        outcome.bound = max(outcome.bound, priced_bound(work, lam, bound_until))
        narrowed_rounds(best, graph, beliefs, clock.now() + NARROWED_SHARE * (until - clock.now()),
                        seed, workers, elite)
        progress.report(best.cost(), outcome.bound)
        best = _by_units(best, graph, clock.now() + KICK_SHARE * (until - clock.now()),
                         kicks=True)
        progress.report(best.cost(), outcome.bound)
        _lns(best, graph, outcome, until, seed, workers)
    return _finish(outcome, work, best)


def _by_units(best: State, graph: UnitGraph, until: float, kicks: bool) -> State:
    """``best`` with every group at its root's position, improved by unit moves under the
    caps (then compound moves, ``UnitState.kicks``, when ``kicks``) until ``until``; kept
    if it fits and is cheaper than ``best``. From each node's smallest usage this is a
    fitting start free of "infinite" pairs within a second where the greedy, whose
    single-node moves cannot leave a group, pays hundreds of them (A: 6.58e9 in 0.06 s,
    the greedy 1.21e20)."""
    state = UnitState(graph, graph.of(best))
    if not state.feasible():
        return best
    state.descend(until, clock.now)
    if kicks:
        state.kicks(until, clock.now)
    found = State(best.work, graph.nodes(state.pos))
    return found if found.feasible() and found.cost() < best.cost() else best


def _finish(outcome: Outcome, work: Work, best: State) -> Outcome:
    if outcome.bound is not None and outcome.bound >= best.cost() - 0.5:
        outcome.status = "optimal"
    outcome.solution = _solution(work, best)
    return outcome


def _lns(state: State, graph: UnitGraph, outcome: Outcome, until: float, seed: int,
         workers: int) -> None:
    """Neighbourhood moves over the units until the deadline, re-solved by the merged model
    with every other unit fixed: every other round a graph region of units (it grows
    while its moves are proven optimal and shrinks while they are not), else the units
    whose usage can change at one of the fullest steps, each kept to a few positions."""
    units = graph.units
    rng = np.random.default_rng(seed)
    adjacent = unit_adjacency(state.work, units)
    size = START_SIZE
    build_s = 0.0
    # a round starts only when the last one's model could be built again before the end
    while clock.now() < until - 0.05 - 1.5 * build_s:
        outcome.rounds += 1
        domains = None
        if outcome.rounds % 2 == 0:
            region, domains = _tight_units(state, graph, rng)
        else:
            broken = _broken_units(state, units) if outcome.rounds % 4 == 1 else []
            start = int(rng.choice(broken)) if broken else int(rng.integers(len(units.roots)))
            region = unit_region(adjacent, start, size, rng)
        before = state.cost()
        step_until = min(until, clock.now() + STEP_SECONDS)
        move = solve_whole(state, units, step_until, int(rng.integers(2**31)), workers,
                           free=region, domains=domains)
        build_s = move.build_s
        if state.cost() < before:
            outcome.improvements += 1
            progress.report(state.cost(), outcome.bound)
        if domains is None:
            size = (min(MAX_SIZE, int(size * 1.2) + 1) if move.proven
                    else max(MIN_SIZE, int(size * 0.8)))


def _tight_units(state: State, graph: UnitGraph, rng: np.random.Generator
                 ) -> tuple[list[int], dict[int, np.ndarray]]:
    """Up to ``TIGHT_UNITS`` units whose usage can change at one of the fullest steps,
    each kept to its current position, its ``CHEAPEST`` cheapest in context and the
    ``CHEAPEST`` cheapest of those using less there: the neighbourhoods where memory, not
    the edges, holds the answer back, wide enough to trade memory between many units."""
    work = state.work
    binding = np.flatnonzero(work.cap < NO_LIMIT)
    if not binding.size:
        return [int(rng.integers(graph.count))], {}
    fullest = binding[np.argsort(state.slack[binding], kind="stable")[:max(1, binding.size // 50)]]
    t = int(rng.choice(fullest))
    current = UnitState(graph, graph.of(state))
    found: dict[int, np.ndarray] = {}
    for u in np.flatnonzero((graph.span_start <= t) & (t < graph.span_end)).tolist():
        use = graph.usage[u][int(np.searchsorted(graph.cuts[u], t, side="right")) - 1]
        if np.ptp(use) == 0:
            continue
        cost = current.allowed_local(u)
        now = current.pos[u]
        smaller = np.flatnonzero((use < use[now]) & np.isfinite(cost))
        found[u] = np.unique(np.concatenate([
            [now], np.argsort(cost, kind="stable")[:CHEAPEST],
            smaller[np.argsort(cost[smaller], kind="stable")[:CHEAPEST]]]))
    if len(found) > TIGHT_UNITS:
        keep = rng.choice(sorted(found), size=TIGHT_UNITS, replace=False).tolist()
        found = {u: found[u] for u in keep}
    if not found:
        return [int(rng.integers(graph.count))], {}
    return sorted(found), found


def _broken_units(state: State, units: Units) -> list[int]:
    """Units at an end of an edge the answer pays an "infinite" cost on."""
    work = state.work
    return sorted({units.unit[e.u] for e in work.edges.values()
                   if e.cost[state.pos[e.u], state.pos[e.v]] >= FORBIDDEN})


SOLVERS: dict[str, Callable[[Problem, float, int, int], Outcome]] = {
    "cpsat": cpsat, "greedy": greedy, "cheapest": cheapest}
