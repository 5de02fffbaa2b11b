"""One large-neighbourhood move: re-choose the strategies of a set of nodes with CP-SAT,
every other node fixed, under the exact memory caps that the fixed nodes leave.

The model is the local-polytope one: a Boolean per (node, strategy), exactly one per node;
per edge inside the set a Boolean per pair of strategies whose row and column sums equal
the nodes' Booleans (its LP relaxation is the classical MRF relaxation); "infinite" costs
become a large finite ``PENALTY``; the matrix is first reparametrized (row and column minima moved
into the nodes' costs, which leaves the optimum unchanged). An edge to a fixed node is a
cost on the free node's strategies.
Memory: one constraint per stretch of time over which the same free nodes are live, with
the least room the fixed nodes leave over it.
"""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from solver import deadline as clock
from solver.iopddl.state import State
from solver.iopddl.work import FORBIDDEN, NO_LIMIT

MAX_OBJECTIVE = 2.0**60
"""A neighbourhood whose costs could sum past this is skipped (CP-SAT sums in int64)."""
PENALTY = 1e13
"""What an "infinite" strategy or pair costs in a neighbourhood model: soft, so that a
model around an incumbent that still uses some is feasible and removes them."""


def _soft(values: np.ndarray) -> np.ndarray:
    return np.where(values >= FORBIDDEN, PENALTY, values)


def _unary(state: State, i: int, inside: set[int]) -> np.ndarray:
    work = state.work
    total = _soft(work.cost[i])
    for j, e in work.adjacent[i].items():
        if j not in inside:
            total += _soft(work.edges[e].toward(i)[:, state.pos[j]])
    return total


def _memory(state: State, nodes: list[int], x: dict[int, list]) -> list[tuple[list, int]]:
    """(terms, room) per stretch of time with the same free nodes live where they could
    exceed the room the fixed nodes leave."""
    work = state.work
    events: dict[int, list[int]] = {}
    for i in nodes:
        a, b = int(work.first[i]), int(work.last[i])
        if a < b and np.any(work.var(i)):
            events.setdefault(a, []).append(i)
            events.setdefault(b, []).append(~i)
    if not events:
        return []
    room = state.slack.copy()
    for i in nodes:
        a, b = work.first[i], work.last[i]
        if a < b:
            room[a:b] += int(work.var(i)[state.pos[i]])
    points = sorted(events)
    live: set[int] = set()
    out: dict[frozenset[int], int] = {}
    for k, t in enumerate(points[:-1]):
        for i in events[t]:
            if i >= 0:
                live.add(i)
            else:
                live.discard(~i)
        if not live:
            continue
        least = int(room[t:points[k + 1]].min())
        if least >= NO_LIMIT // 2:
            continue
        if sum(int(work.var(i).max()) for i in live) <= least:
            continue
        key = frozenset(live)
        out[key] = min(least, out.get(key, least))
    constraints = []
    for group, least in out.items():
        terms = [(int(work.var(i)[k]), x[i][k]) for i in group for k in range(len(x[i]))
                 if work.var(i)[k]]
        constraints.append((terms, least))
    return constraints


def improve(state: State, nodes: list[int], seconds: float, seed: int, workers: int = 1,
            whole: bool = False) -> tuple[bool, bool, float | None]:
    """Re-solve ``nodes``; apply the answer when it is cheaper. Returns (improved, proven
    optimal for this neighbourhood, CP-SAT's lower bound on the neighbourhood's cost: with
    ``whole`` (every live node) a bound on the problem's optimum)."""
    work = state.work
    inside = set(nodes)
    model = cp_model.CpModel()
    unary = {i: _unary(state, i, inside) for i in nodes}
    pairs = []
    for i in nodes:
        for j, e in work.adjacent[i].items():
            if j in inside and i < j:
                m = _soft(work.edges[e].toward(i))
                rows = m.min(axis=1)
                m = m - rows[:, None]
                cols = m.min(axis=0)
                m = m - cols[None, :]
                unary[i] = unary[i] + rows
                unary[j] = unary[j] + cols
                pairs.append((i, j, m))
    x: dict[int, list] = {}
    objective = []
    total = 0.0
    for i in nodes:
        lits = []
        for c in unary[i]:
            lit = model.new_bool_var("")
            lits.append(lit)
            if c:
                objective.append((int(round(c)), lit))
        total += float(unary[i].max())
        model.add_exactly_one(lits)
        x[i] = lits
    hints = []
    for i, j, m in pairs:
        rows: list[list] = [[] for _ in range(m.shape[0])]
        cols: list[list] = [[] for _ in range(m.shape[1])]
        for (a, b), c in np.ndenumerate(m):
            y = model.new_bool_var("")
            rows[a].append(y)
            cols[b].append(y)
            if c:
                objective.append((int(round(c)), y))
            hints.append((y, a == state.pos[i] and b == state.pos[j]))
        for a, ys in enumerate(rows):
            model.add(sum(ys) == x[i][a])
        for b, ys in enumerate(cols):
            model.add(sum(ys) == x[j][b])
        total += float(m.max(initial=0))
    if total >= MAX_OBJECTIVE:
        return False, False, None
    for terms, least in _memory(state, nodes, x):
        model.add(sum(c * lit for c, lit in terms) <= least)
    model.minimize(sum(c * lit for c, lit in objective))
    for i in nodes:
        for k, lit in enumerate(x[i]):
            model.add_hint(lit, k == state.pos[i])
    for y, value in hints:
        model.add_hint(y, bool(value))
    current = sum(float(unary[i][state.pos[i]]) for i in nodes) + sum(
        float(m[state.pos[i], state.pos[j]]) for i, j, m in pairs)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    clock.limit_cpsat(solver.parameters, clock.now() + seconds, floor_s=0.05)
    status = clock.run_cpsat(solver, model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return False, False, None
    proven = status == cp_model.OPTIMAL
    # CP-SAT reports its objective and bound as floats, which can sit above the integers
    found = sum(c for c, lit in objective if solver.boolean_value(lit))
    bound = float(found) if proven else \
        float(np.floor(solver.best_objective_bound * (1 - 1e-9)) - 1)
    if found >= current - 0.5:
        return False, proven, bound
    for i in nodes:
        new = next(k for k, lit in enumerate(x[i]) if solver.boolean_value(lit))
        state.move(i, new)
    return True, proven, bound

