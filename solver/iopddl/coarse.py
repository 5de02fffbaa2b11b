"""The problem over units (groups of nodes that decide each other, and the other nodes),
kept ready for moves that change a whole group at once.

Single-node moves cannot leave a group (its equalities would break), and on the contest's
larger graphs the memory limit sits far below what the cheapest strategies use (M: a
third), so a search that fits the limit has to move groups. ``UnitGraph`` holds each
unit's costs, the cost matrices between units and each unit's usage per time segment;
``UnitState`` an assignment of units with its slack per step and each unit's cost in its
neighbours' context.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from solver.iopddl.merged import MergedModel, Units
from solver.iopddl.state import State, descend
from solver.iopddl.work import NO_LIMIT

KICK_SWEEPS = 2
"""Best-response sweeps over a kicked unit's neighbours."""
KICK_REPAIR_S = 0.5
"""Longest a compound move may spend restoring the fit (else it is undone)."""
BARRED = 1e16
"""The cost of a unit position its group's equalities rule out (above every soft cost)."""


class UnitGraph:
    """Costs and usages over units: ``unary[u][p]``, ``neighbours[u]`` (unit, matrix with
    u's positions as rows), and per unit its time segments ``cuts[u]`` (a unit's members
    start and end there) with the variable usage of each segment under each position,
    ``usage[u]`` (segments x positions)."""

    def __init__(self, state: State, units: Units):
        merged = MergedModel(state, units)
        work = self.work = state.work
        self.units = units
        self.count = merged.count
        self.unary = [np.where(units.allowed[u], merged.unary[u], BARRED)
                      for u in range(self.count)]
        self.pairs = merged.pairs
        self.neighbours: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(self.count)]
        for (a, b), m in merged.pairs.items():
            self.neighbours[a].append((b, m))
            self.neighbours[b].append((a, m.T))
        members: list[list[int]] = [[] for _ in range(self.count)]
        for v in merged.nodes.tolist():
            if work.first[v] < work.last[v] and work.var(v).any():
                members[units.unit[v]].append(v)
        self.cuts: list[np.ndarray] = []
        self.usage: list[np.ndarray] = []
        for u in range(self.count):
            vs = members[u]
            cuts = np.unique(np.concatenate(
                [work.first[vs], work.last[vs]])) if vs else np.zeros(0, dtype=np.int64)
            usage = np.zeros((max(len(cuts) - 1, 0), len(self.unary[u])), dtype=np.int64)
            for v in vs:
                a, b = np.searchsorted(cuts, [work.first[v], work.last[v]])
                usage[a:b] += work.var(v)[units.image[v]]
            self.cuts.append(cuts)
            self.usage.append(usage)
        self.binding = work.cap < NO_LIMIT
        """The compressed steps that can overflow (the others are never checked)."""
        self.span_start = np.array([c[0] if len(c) > 1 else -1 for c in self.cuts])
        self.span_end = np.array([c[-1] if len(c) > 1 else -1 for c in self.cuts])
        """Each unit's variable usage lies on steps ``span_start <= t < span_end``."""

    def priced(self, lam: np.ndarray) -> list[np.ndarray]:
        """Each unit's costs with its usage priced at ``lam`` per step."""
        cum = np.concatenate([[0.0], np.cumsum(lam)])
        out = []
        for u in range(self.count):
            cuts = self.cuts[u]
            if len(cuts) < 2:
                out.append(self.unary[u])
                continue
            weight = cum[cuts[1:]] - cum[cuts[:-1]]
            out.append(self.unary[u] + weight @ self.usage[u])
        return out

    def nodes(self, pos: list[int]) -> dict[int, int]:
        """The node positions of a unit assignment."""
        units = self.units
        return {v: int(units.image[v][pos[u]]) for v, u in units.unit.items()}

    def of(self, state: State) -> list[int]:
        """The unit positions of a node assignment (each unit through its root)."""
        units = self.units
        return [int(np.flatnonzero(units.image[r] == state.pos[r])[0]) for r in units.roots]


class UnitState:
    """An assignment of units with its slack per compressed step and each unit's cost in its
    neighbours' context (``local``)."""

    def __init__(self, graph: UnitGraph, pos: list[int]):
        self.graph = graph
        self.pos = list(pos)
        work = graph.work
        self.slack = work.cap.astype(np.int64).copy()
        for u in range(graph.count):
            self._load(u, graph.usage[u][:, self.pos[u]] if len(graph.cuts[u]) > 1 else None)
        self.local = [self._local(u) for u in range(graph.count)]
        self.total = self.cost()
        """The cost, kept up to date by ``move`` (``cost()`` recomputes it)."""
        self.journal: list[tuple[int, int]] | None = None
        """While not None, every move's unit and former position (to undo them)."""

    def _load(self, u: int, amounts: np.ndarray | None) -> None:
        if amounts is None or not amounts.any():
            return
        cuts = self.graph.cuts[u]
        self.slack[cuts[0]:cuts[-1]] -= np.repeat(amounts, np.diff(cuts))

    def _local(self, u: int) -> np.ndarray:
        total = self.graph.unary[u].copy()
        for w, m in self.graph.neighbours[u]:
            total += m[:, self.pos[w]]
        return total

    def allowed_local(self, u: int) -> np.ndarray:
        """Unit ``u``'s costs in context with the positions it may not take at infinity."""
        return np.where(self.graph.units.allowed[u], self.local[u], np.inf)

    def cost(self) -> float:
        g = self.graph
        return (sum(float(g.unary[u][self.pos[u]]) for u in range(g.count))
                + sum(float(m[self.pos[a], self.pos[b]]) for (a, b), m in g.pairs.items()))

    def feasible(self) -> bool:
        return not bool((self.slack[self.graph.binding] < 0).any())

    def move(self, u: int, new: int) -> None:
        old = self.pos[u]
        if new == old:
            return
        g = self.graph
        if len(g.cuts[u]) > 1:
            self._load(u, g.usage[u][:, new] - g.usage[u][:, old])
        if self.journal is not None:
            self.journal.append((u, old))
        self.total += float(self.local[u][new] - self.local[u][old])
        self.pos[u] = new
        for w, m in g.neighbours[u]:
            self.local[w] += m[new, :] - m[old, :]

    def _room(self, u: int) -> np.ndarray | None:
        """The smallest slack over each of u's segments (None: u uses no variable memory)."""
        cuts = self.graph.cuts[u]
        if len(cuts) < 2:
            return None
        return np.minimum.reduceat(self.slack[cuts[0]:cuts[-1]], cuts[:-1] - cuts[0])

    def fitting(self, u: int) -> np.ndarray:
        """Which of u's positions keep every step it touches fitting (or no worse where
        one already overflows)."""
        room = self._room(u)
        k = len(self.graph.unary[u])
        if room is None:
            return np.ones(k, dtype=bool)
        usage = self.graph.usage[u]
        after = room[:, None] + usage[:, [self.pos[u]]] - usage
        return (after >= np.minimum(room, 0)[:, None]).all(axis=0)

    def descend(self, until: float, now: Callable[[], float],
                extra: list[np.ndarray] | None = None, capped: bool = True,
                among: list[int] | None = None) -> int:
        """Moves of units (``among``, default all) that lower the cost (plus ``extra``)
        while fitting (when ``capped``), until none does or the clock passes ``until``; the
        number made."""
        def best(u: int) -> int:
            total = self.local[u] + extra[u] if extra is not None else self.local[u]
            if capped:
                total = np.where(self.fitting(u), total, np.inf)
            k = int(np.argmin(total))
            now_at = total[self.pos[u]]
            return k if total[k] < now_at - 1e-9 * abs(now_at) else self.pos[u]

        order = range(self.graph.count) if among is None else among
        return descend(order, best, self.pos, self.move, until, now)

    def repair(self, until: float, now: Callable[[], float]) -> bool:
        """Restore every step's fit: at the fullest step, the unit move that frees usage
        there at the least cost per unit freed, without making any step worse. False when
        the clock passes ``until`` first or no move frees usage there."""
        g = self.graph
        while not self.feasible():
            if now() >= until:
                return False
            t = int(np.argmin(np.where(g.binding, self.slack, NO_LIMIT)))
            best: tuple[float, int, int] | None = None
            for u in np.flatnonzero((g.span_start <= t) & (t < g.span_end)).tolist():
                cuts = g.cuts[u]
                seg = int(np.searchsorted(cuts, t, side="right")) - 1
                freed = g.usage[u][seg, self.pos[u]] - g.usage[u][seg]
                if not (freed > 0).any():
                    continue
                ok = (freed > 0) & self.fitting(u)
                if not ok.any():
                    continue
                price = np.where(ok, (self.local[u] - self.local[u][self.pos[u]])
                                 / np.maximum(np.minimum(freed, -self.slack[t]), 1), np.inf)
                k = int(np.argmin(price))
                if best is None or price[k] < best[0]:
                    best = (float(price[k]), u, k)
            if best is None:
                return False
            self.move(best[1], best[2])
        return True

    def kick(self, u: int, new: int, until: float, now: Callable[[], float]) -> bool:
        """A compound move: u to ``new``, its neighbours to their best response (memory
        left aside), the fit restored, then moves under the caps among them. Kept when the
        cost falls, else undone. Moves one unit at a time cannot cross the ridge this
        crosses: a unit joined to hundreds of others (on M, one of 342) changes only when
        its neighbours change with it."""
        ring = [w for w, _ in self.graph.neighbours[u]]
        before = self.total
        self.journal = []
        try:
            self.move(u, new)
            for _ in range(KICK_SWEEPS):
                for w in ring:
                    best = int(np.argmin(self.local[w]))
                    if self.local[w][best] < self.local[w][self.pos[w]]:
                        self.move(w, best)
            if self.feasible() or self.repair(min(until, now() + KICK_REPAIR_S), now):
                near = {u, *ring}
                near.update(x for w in ring for x, _ in self.graph.neighbours[w])
                self.descend(until, now, among=sorted(near))
            if self.feasible() and self.total < before - 1e-9 * abs(before):
                return True
            undo, self.journal = self.journal, None
            for w, old in reversed(undo):
                self.move(w, old)
            return False
        finally:
            self.journal = None

    def kicks(self, until: float, now: Callable[[], float]) -> int:
        """Compound moves of every unit to every allowed position, most connected units
        first, until none improves or the clock passes ``until``; the number kept."""
        g = self.graph
        order = sorted(range(g.count), key=lambda u: -len(g.neighbours[u]))
        kept = 0
        improved = True
        while improved:
            improved = False
            for u in order:
                for p in np.flatnonzero(g.units.allowed[u]).tolist():
                    if now() >= until:
                        return kept
                    if p != self.pos[u] and self.kick(u, p, until, now):
                        kept += 1
                        improved = True
        return kept
