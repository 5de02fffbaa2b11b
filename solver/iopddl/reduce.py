"""Exact reductions: the optimum of the reduced problem, unfolded, is an optimum of the
original (under the same usage limit).

- **Dominance.** Strategy b of node i goes when another strategy a costs no more in every
  context: ``cost[a] + sum over edges of max over the neighbour's strategies of
  (edge[a, t] - edge[b, t]) <= cost[b]``, and, where i's choice matters to memory, a uses
  no more than b.
- **Folding** (the XLA and toulbar2 eliminations), for nodes whose choice cannot matter to
  memory (one usage for every strategy left, or live only at steps that cannot bind): a
  node of one strategy becomes unary costs on its neighbours; a node of degree 0 takes its
  cheapest strategy; degree 1 folds into its neighbour's costs; degree 2 becomes an edge
  between its two neighbours. Each fold records how to recover the node's strategy.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from solver import deadline as clock
from solver.iopddl.work import FORBIDDEN, Work

MAX_DOMINANCE_WORK = 4_000_000
"""Entries compared to test one node's strategies for dominance (strategies^2 x the
neighbours' strategies); a larger node keeps its strategies."""
MAX_FOLD_WORK = 8_000_000
MAX_FOLD_ENTRIES = 262_144
"""Largest edge a degree-2 fold may create (pairs of the two neighbours' strategies)."""
EXACT = 2.0**50
"""Dominance compares float sums; it is skipped where a finite cost reaches this (sums of
such numbers could round)."""
CLIP = 2.0**52


def _dominance_keep(work: Work, i: int) -> np.ndarray | None:
    """The positions of node i's strategies that no other dominates (None: all stay)."""
    cost = work.cost[i]
    s = len(cost)
    if s == 1:
        return None
    blocks = [work.edges[e].toward(i) for e in work.adjacent[i].values()]
    width = sum(b.shape[1] for b in blocks)
    if s * s * max(width, 1) > MAX_DOMINANCE_WORK:
        return None
    values = np.concatenate([b.ravel() for b in blocks] + [cost])
    finite = values[values < FORBIDDEN]
    if finite.size and finite.max() >= EXACT:
        return None
    worst = np.zeros((s, s))
    for block in blocks:
        clipped = np.minimum(block, CLIP)
        worst += (clipped[:, None, :] - clipped[None, :, :]).max(axis=2)
    base = np.minimum(cost, CLIP)
    var = work.var(i) if work.memory_relevant(i) else np.zeros(s, dtype=np.int64)
    # beats[a, b]: a costs no more than b in every context and uses no more memory
    beats = (base[:, None] + worst <= base[None, :]) & (var[:, None] <= var[None, :])
    np.fill_diagonal(beats, False)
    if not beats.any():
        return None
    kept = np.ones(s, dtype=bool)
    for b in np.argsort(-base, kind="stable"):
        if (beats[:, b] & kept).any():
            kept[b] = False
    return None if kept.all() else np.flatnonzero(kept)


def _remove_dominated(work: Work, nodes: set[int], deadline_at: float) -> set[int]:
    """Dominated strategies removed at ``nodes`` (until the deadline: a pass over A's
    35,000 nodes takes seconds); the nodes whose context changed (the neighbours of those
    that lost strategies), to be looked at again."""
    touched: set[int] = set()
    for k, i in enumerate(sorted(nodes)):
        if k % 256 == 0 and clock.now() >= deadline_at:
            break
        if not work.alive[i]:
            continue
        rows = _dominance_keep(work, i)
        if rows is not None:
            work.keep(i, rows)
            touched.update(work.adjacent[i])
    return touched


def _fix(work: Work, i: int) -> None:
    """Node i of one strategy (or the cheapest, at degree 0) leaves the model."""
    pos = int(np.argmin(work.cost[i]))
    for j, e in list(work.adjacent[i].items()):
        work.cost[j] = work.cost[j] + work.edges[e].toward(j)[:, pos]
        work.drop_edge(e)
    work.offset += float(work.cost[i][pos])
    work.folds.append(("fix", i, int(work.strategies[i][pos])))
    work.alive[i] = False


def _fold_leaf(work: Work, v: int) -> None:
    (u, e), = work.adjacent[v].items()
    total = work.edges[e].toward(u) + work.cost[v][None, :]
    best = total.argmin(axis=1)
    work.cost[u] = work.cost[u] + total[np.arange(len(best)), best]
    work.folds.append(("leaf", v, u, work.strategies[u].copy(), work.strategies[v][best]))
    work.drop_edge(e)
    work.alive[v] = False


def _fold_pair(work: Work, v: int) -> bool:
    (u, eu), (w, ew) = work.adjacent[v].items()
    su, sv, sw = len(work.cost[u]), len(work.cost[v]), len(work.cost[w])
    if su * sv * sw > MAX_FOLD_WORK or su * sw > MAX_FOLD_ENTRIES:
        return False
    left = work.edges[eu].toward(u) + work.cost[v][None, :]
    right = work.edges[ew].toward(v)
    total = left[:, :, None] + right[None, :, :]
    best = total.argmin(axis=1)
    merged = np.take_along_axis(total, best[:, None, :], axis=1)[:, 0, :]
    work.folds.append(("pair", v, u, w, work.strategies[u].copy(), work.strategies[w].copy(),
                       work.strategies[v][best]))
    work.drop_edge(eu)
    work.drop_edge(ew)
    work.alive[v] = False
    work.add_edge(u, w, merged)
    return True


def _fold(work: Work, deadline_at: float) -> set[int]:
    """Fold every node it can, neighbours re-examined as their degrees fall; the nodes whose
    costs or edges changed."""
    queue = deque(int(i) for i in work.live_nodes)
    changed: set[int] = set()
    while queue:
        if clock.now() >= deadline_at:
            break
        i = queue.popleft()
        if not work.alive[i] or work.memory_relevant(i):
            continue
        neighbours = list(work.adjacent[i])
        degree = len(neighbours)
        if len(work.cost[i]) == 1 or degree == 0:
            _fix(work, i)
        elif degree == 1:
            _fold_leaf(work, i)
        elif degree == 2:
            if not _fold_pair(work, i):
                continue
        else:
            continue
        changed.update(neighbours)
        queue.extend(neighbours)
    return changed


def reduce(work: Work, deadline_at: float, rounds: int = 8) -> None:
    """Apply the reductions until none applies (or ``rounds`` passes, or the deadline)."""
    look = {int(i) for i in work.live_nodes}
    for _ in range(rounds):
        if clock.now() >= deadline_at or not look:
            return
        touched = _remove_dominated(work, look, deadline_at)
        work.refresh_caps()
        look = touched | _fold(work, deadline_at)


def unfold(work: Work, chosen: dict[int, int]) -> list[int]:
    """The full solution (original strategy indices) from the live nodes' ``chosen``
    original strategies, recovering folded nodes in reverse order."""
    solution = dict(chosen)
    for record in reversed(work.folds):
        kind, v = record[0], record[1]
        if kind == "fix":
            solution[v] = record[2]
        elif kind == "leaf":
            _, _, u, u_ids, v_ids = record
            solution[v] = int(v_ids[np.searchsorted(u_ids, solution[u])])
        else:
            _, _, u, w, u_ids, w_ids, table = record
            a = np.searchsorted(u_ids, solution[u])
            b = np.searchsorted(w_ids, solution[w])
            solution[v] = int(table[a, b])
    return [solution[i] for i in range(work.problem.n)]
