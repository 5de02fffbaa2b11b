"""Starts that respect both the edges and the memory limit, by pricing memory.

The limit at each step t is moved into the objective with a price ``lam[t] >= 0``: node i's
strategy s then costs ``cost[i][s] + var[i][s] * (sum of lam over i's live steps)``, and the
problem left is a pure pairwise one over units (``coarse.py``), solved by message passing
(``messages.py``). Prices rise where the answer overflows and decay where it has room (a
subgradient method); an answer that still overflows gets targeted rises, then unit moves
that free memory; every answer that fits is improved by unit moves under the caps, the
cheapest is the search's answer and the ``ELITE`` cheapest distinct ones are handed to the
narrowed models. ``tree_start`` (dynamic programming over a spanning forest)
gives the greedy its start. The same prices give a lower bound (``bound.diffusion`` of the priced
problem, less the prices times the caps).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from solver import deadline as clock
from solver.iopddl.coarse import UnitGraph, UnitState
from solver.iopddl.messages import MessagePassing
from solver.iopddl.state import State
from solver.iopddl.work import FORBIDDEN, NO_LIMIT, Work

ROUNDS = 200
FIRST_REPAIR_SHARE = 0.25
"""Share of the time left a repair may take while no answer of the search fits yet."""
PASSES = 3
"""Message passes per priced solve (each yields an assignment; the cheapest is kept)."""
GROW = 4.0
"""Price step growth per round until a priced answer fits for the first time, and per
targeted rise."""
SHRINK = 0.85
"""Price step shrink each time the answers switch between fitting and not."""
FIT_TRIES = 4
"""Rounds of price rises where an answer overflows, before a repair by unit moves."""
ELITE = 8
"""Cheapest distinct fitting answers kept for the narrowed models (on M's first narrowed
round: none 50.46e9, four 50.19e9, eight 50.13e9, sixteen the same)."""


def _forest(work: Work) -> dict[int, list[tuple[int, int]]]:
    """A spanning forest that keeps the most constraining edges (those with the largest
    share of "infinite" pairs, then the widest spread of costs): Kruskal on that weight."""
    weight = []
    for e, edge in work.edges.items():
        forbidden = float((edge.cost >= FORBIDDEN).mean())
        finite = edge.cost[edge.cost < FORBIDDEN]
        spread = float(np.ptp(finite)) if finite.size else 0.0
        weight.append((-forbidden, -spread, e))
    weight.sort()
    root = {int(i): int(i) for i in work.live_nodes}

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    tree: dict[int, list[tuple[int, int]]] = {i: [] for i in root}
    for _, _, e in weight:
        edge = work.edges[e]
        a, b = find(edge.u), find(edge.v)
        if a != b:
            root[a] = b
            tree[edge.u].append((edge.v, e))
            tree[edge.v].append((edge.u, e))
    return tree


def tree_start(work: Work, unary: dict[int, np.ndarray],
               tree: dict[int, list[tuple[int, int]]] | None = None) -> dict[int, int]:
    """The optimum of ``unary`` plus the edges of a spanning forest (exact dynamic
    programming; the other edges ignored): a start that keeps long chains of compatible
    strategies, which single-node moves cannot find."""
    tree = tree if tree is not None else _forest(work)
    order: list[int] = []
    parent: dict[int, tuple[int, int]] = {}
    seen: set[int] = set()
    for start in tree:
        if start in seen:
            continue
        seen.add(start)
        queue = [start]
        for i in queue:
            order.append(i)
            for j, e in tree[i]:
                if j not in seen:
                    seen.add(j)
                    parent[j] = (i, e)
                    queue.append(j)
    message = {i: unary[i].copy() for i in order}
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


def _initial_price(work: Work, relevant: list[int]) -> float:
    """A price per unit of usage per step at which a typical node's cheapest and smallest
    strategies cost about the same."""
    ratios = []
    for i in relevant:
        var = work.var(i)
        finite = work.cost[i] < FORBIDDEN
        spread = float(np.ptp(work.cost[i][finite])) if finite.any() else 0.0
        steps = int(work.last[i] - work.first[i])
        if spread > 0 and var.max() > 0 and steps > 0:
            ratios.append(spread / (float(var.max()) * steps))
    return float(np.median(ratios)) if ratios else 1.0


def _extra(work: Work, relevant: list[int], lam: np.ndarray) -> dict[int, np.ndarray]:
    """Each memory-relevant node's priced usage: var x (sum of the prices over its steps)."""
    cum = np.concatenate([[0.0], np.cumsum(lam)])
    return {i: work.var(i) * (cum[work.last[i]] - cum[work.first[i]]) for i in relevant}


class Priced(NamedTuple):
    best: State
    """The cheapest fitting answer found (the start if none is cheaper)."""
    prices: np.ndarray
    """The prices whose answer scored the highest Lagrangian value (for a bound: the last
    round's prices gave S bounds from 3.3e8 to 1.3e9, run to run)."""
    beliefs: list[np.ndarray] | None
    """Each unit's priced costs plus the messages into it at the last prices (None when no
    priced problem was solved)."""
    elite: list[np.ndarray]
    """The unit positions of the cheapest distinct fitting answers found, cheapest first
    (at most ``ELITE``)."""


def priced_search(work: Work, graph: UnitGraph, until: float, best: State) -> Priced:
    """Rounds of prices, each solving the priced problem over units by message passing
    (``messages.py``), so whole groups change together."""
    relevant = [int(i) for i in work.live_nodes if work.memory_relevant(int(i))]
    binding = work.cap < NO_LIMIT
    lam = np.zeros(len(work.cap))
    if not relevant or not binding.any() or not graph.count:
        return Priced(best, lam, None, [])
    scale = np.where(binding, np.abs(work.cap).clip(1), 1).astype(np.float64)
    step = _initial_price(work, relevant)
    passes = MessagePassing(graph)
    best_units: UnitState | None = None
    best_cost = best.cost()
    fitted_once = False  # a priced answer fitted (before any repair)
    found_fit = False  # an answer fitted (after its repair)
    previous_fit: bool | None = None
    elite: list[tuple[float, np.ndarray]] = []

    caps = np.where(binding, work.cap, 0).astype(np.float64)
    dual_value, dual_lam = -np.inf, lam
    solved: list[np.ndarray] | None = None  # the unary costs the messages last saw

    def priced(prices: np.ndarray) -> tuple[UnitState | None, np.ndarray]:
        nonlocal dual_value, dual_lam, solved
        unary = graph.priced(prices)
        pos = passes.solve(unary, PASSES, until)
        if pos is None:
            return None, prices
        solved = unary
        extra = [p - u for p, u in zip(unary, graph.unary, strict=True)]
        state = UnitState(graph, pos)
        state.descend(until, clock.now, extra, capped=False)
        # the Lagrangian value at these prices, estimated by the answer found
        value = (state.total + sum(float(e[k]) for e, k in zip(extra, state.pos, strict=True))
                 - float(np.dot(prices, caps)))
        if value > dual_value:
            dual_value, dual_lam = value, prices
        return state, np.where(binding, -state.slack, 0).astype(np.float64)

    took = 0.0  # the last priced solve's seconds: one starts only if it can end in time
    for _ in range(ROUNDS):
        if clock.now() + took >= until:
            break
        began = clock.now()
        state, over = priced(lam)
        took = clock.now() - began
        if state is None:
            break
        fits = state.feasible()
        # the subgradient step on the dual, from this round's answer
        next_lam = np.maximum(0.0, lam + step * np.clip(over / scale, -1, 1))
        raised, rise = lam, step
        for _ in range(FIT_TRIES):
            if state.feasible() or clock.now() + took >= until:
                break
            # raise the prices only where the answer overflows, until it fits
            raised = raised + rise * (over > 0)
            rise *= GROW
            tried, tried_over = priced(raised)
            if tried is None:
                break
            state, over = tried, tried_over
        # until an answer first fits, the prices keep their rises (the first price is a
        # guess that can be orders of magnitude low: 1/100 on S)
        lam = next_lam if fitted_once else np.maximum(next_lam, raised)
        fitted_once |= state.feasible()
        if not fitted_once:
            step *= GROW
        elif previous_fit is not None and fits != previous_fit:
            step *= SHRINK
        previous_fit = fits
        # until one fits, a repair may take longer than a round: from a priced answer over
        # the limit by 4.5e7 (S, its first round), the repair takes 4 s, a priced solve 1-2 s
        budget = took if found_fit else max(took, FIRST_REPAIR_SHARE * (until - clock.now()))
        if not state.feasible() and not state.repair(min(until, clock.now() + budget), clock.now):
            continue
        found_fit = True
        state.descend(until, clock.now)
        cost = state.cost() + work.offset
        if state.feasible():
            _keep(elite, cost, np.asarray(state.pos))
            if cost < best_cost:
                best_units, best_cost = state, cost
    if best_units is not None:
        found = State(work, graph.nodes(best_units.pos))
        if found.feasible() and found.cost() < best.cost():
            best = found
    return Priced(best, dual_lam, passes.beliefs(solved) if solved is not None else None,
                  [pos for _, pos in elite])


def _keep(elite: list[tuple[float, np.ndarray]], cost: float, pos: np.ndarray) -> None:
    """Add an answer to the ``ELITE`` cheapest distinct ones (kept sorted by cost)."""
    if any(np.array_equal(pos, p) for _, p in elite):
        return
    elite.append((cost, pos))
    elite.sort(key=lambda e: e[0])
    del elite[ELITE:]


def priced_bound(work: Work, lam: np.ndarray, until: float) -> float:
    """A lower bound from prices ``lam >= 0``: the bound of the priced pairwise problem less
    the prices times the caps (the Lagrangian dual value, itself bounded below by
    diffusion)."""
    from solver.iopddl.bound import diffusion

    relevant = [int(i) for i in work.live_nodes if work.memory_relevant(int(i))]
    binding = work.cap < NO_LIMIT
    lam = np.where(binding, lam, 0.0)
    paid = float(np.dot(lam, np.where(binding, work.cap, 0).astype(np.float64)))
    return diffusion(work, until, _extra(work, relevant, lam)) - paid
