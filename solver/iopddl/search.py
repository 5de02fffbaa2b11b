"""The iopddl solvers: two baselines and the anytime ``cpsat`` search.

- ``cheapest``: each node's cheapest strategy, then repaired until every step fits.
- ``greedy``: the cheapest strategies, improved one node at a time in their neighbours'
  context (ignoring memory), repaired, then improved again under the caps: what most
  contest teams shipped.
- ``cpsat``: the exact reductions, a valid incumbent at once (each node's smallest usage,
  which fits whenever anything does), the greedy's answer, then CP-SAT: on the whole
  reduced problem when it is small (which proves the optimum), else on neighbourhoods of
  the incumbent (graph regions and the nodes live at the fullest steps) until the
  deadline. The bound is CP-SAT's on the whole problem, or the min-sum diffusion bound of
  ``bound.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from solver import deadline as clock
from solver import progress
from solver.iopddl import bound as lower_bound
from solver.iopddl.neighbourhood import improve
from solver.iopddl.problem import Problem
from solver.iopddl.reduce import reduce, unfold
from solver.iopddl.state import State
from solver.iopddl.work import Work, build

WHOLE_MODEL_STRATEGIES = 6_000
"""A reduced problem with at most this many strategies is given to CP-SAT whole."""
REDUCE_SHARE = 0.25
BOUND_SHARE = 0.1
START_SIZE = 300
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


def _tree(work: Work) -> dict[int, int]:
    """The optimum over a breadth-first spanning forest of the graph (exact dynamic
    programming; the other edges ignored): a start that keeps long chains of compatible
    strategies, which single-node moves cannot find."""
    order: list[int] = []
    parent: dict[int, tuple[int, int]] = {}
    seen: set[int] = set()
    for root in (int(i) for i in work.live_nodes):
        if root in seen:
            continue
        seen.add(root)
        queue = [root]
        for i in queue:
            order.append(i)
            for j, e in work.adjacent[i].items():
                if j not in seen:
                    seen.add(j)
                    parent[j] = (i, e)
                    queue.append(j)
    message = {i: work.cost[i].copy() for i in order}
    choice: dict[int, np.ndarray] = {}
    for i in reversed(order):
        if i in parent:
            p, e = parent[i]
            total = work.edges[e].toward(p) + message[i][None, :]
            choice[i] = total.argmin(axis=1)
            message[p] += total[np.arange(total.shape[0]), choice[i]]
    pos: dict[int, int] = {}
    for i in order:
        pos[i] = int(choice[i][pos[parent[i][0]]]) if i in parent else int(np.argmin(message[i]))
    return pos


def _greedy(work: Work, until: float, start: dict[int, int] | None = None) -> State:
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
    state.repair()
    state.descend(state.nodes, until, clock.now)
    return state


def _solution(work: Work, state: State) -> list[int]:
    return unfold(work, {i: int(work.strategies[i][p]) for i, p in state.pos.items()})


def cheapest(problem: Problem, until: float, seed: int, workers: int) -> Outcome:
    work = _working(problem)
    state = State(work, _positions(work, lambda i: int(np.argmin(work.cost[i]))))
    state.repair()
    return Outcome(_solution(work, state), "feasible", work=work)


def greedy(problem: Problem, until: float, seed: int, workers: int) -> Outcome:
    work = _working(problem)
    return Outcome(_solution(work, _greedy(work, until)), "feasible", work=work)


def cpsat(problem: Problem, until: float, seed: int, workers: int) -> Outcome:
    started = clock.now()
    work = _working(problem)
    reduce(work, started + REDUCE_SHARE * (until - started))
    best = _smallest_usage(work)
    outcome = Outcome(None, "feasible", work=work, first_incumbent_at=clock.now() - started)
    best_cost = best.cost()
    progress.report(best_cost)
    greedy_state = _greedy(work, until, _tree(work))
    if greedy_state.cost() < best_cost:
        best, best_cost = greedy_state, greedy_state.cost()
        progress.report(best_cost)
    nodes = best.nodes
    strategies = sum(len(work.cost[i]) for i in nodes)
    if nodes and strategies <= WHOLE_MODEL_STRATEGIES:
        improved, proven, cp_bound = improve(best, nodes, max(0.05, until - clock.now()),
                                             seed, workers, whole=True)
        outcome.bound = None if cp_bound is None else cp_bound + work.offset
        if proven:
            outcome.status = "optimal"
        outcome.rounds = 1
        outcome.improvements = int(improved)
    elif nodes:
        outcome.bound = lower_bound.diffusion(work, started + BOUND_SHARE * (until - started)
                                              + (clock.now() - started))
        _lns(best, outcome, until, seed, workers)
    else:
        outcome.bound = best.cost()
        outcome.status = "optimal"
    outcome.solution = _solution(work, best)
    return outcome


def _lns(state: State, outcome: Outcome, until: float, seed: int, workers: int) -> None:
    """Neighbourhood moves until the deadline; the neighbourhood grows while CP-SAT proves
    its moves optimal and shrinks while it cannot."""
    rng = random.Random(seed)
    work = state.work
    size = START_SIZE
    nodes = state.nodes
    while clock.now() < until - 0.05:
        outcome.rounds += 1
        if outcome.rounds % 2:
            chosen = _region(work, rng.choice(nodes), size, rng)
        else:
            chosen = _fullest(state, size, rng)
        seconds = min(STEP_SECONDS, until - clock.now())
        improved, proven, _ = improve(state, chosen, seconds, rng.randrange(2**31), workers)
        if improved:
            outcome.improvements += 1
            progress.report(state.cost(), outcome.bound)
        size = min(MAX_SIZE, int(size * 1.15) + 1) if proven else max(MIN_SIZE, int(size * 0.8))


def _region(work: Work, start: int, size: int, rng: random.Random) -> list[int]:
    """A connected set of about ``size`` nodes grown from ``start`` (breadth first,
    neighbours shuffled)."""
    seen = {start}
    frontier = [start]
    while frontier and len(seen) < size:
        nxt = []
        for i in frontier:
            neighbours = list(work.adjacent[i])
            rng.shuffle(neighbours)
            for j in neighbours:
                if j not in seen and len(seen) < size:
                    seen.add(j)
                    nxt.append(j)
        frontier = nxt
    return sorted(seen)


def _fullest(state: State, size: int, rng: random.Random) -> list[int]:
    """Nodes live at one of the fullest steps (those whose usage can move), half of them
    with their neighbours."""
    work = state.work
    low = np.flatnonzero(state.slack <= np.quantile(state.slack, 0.02))
    t = int(rng.choice(low.tolist())) if low.size else 0
    nodes = np.array(state.nodes)
    live = nodes[(work.first[nodes] <= t) & (t < work.last[nodes])].tolist()
    live = [i for i in live if work.var(i).any()]
    rng.shuffle(live)
    chosen = set(live[:max(1, size // 2)])
    for i in list(chosen):
        for j in work.adjacent[i]:
            if len(chosen) >= size:
                break
            chosen.add(j)
    return sorted(chosen)


SOLVERS: dict[str, Callable[[Problem, float, int, int], Outcome]] = {
    "cpsat": cpsat, "greedy": greedy, "cheapest": cheapest}
