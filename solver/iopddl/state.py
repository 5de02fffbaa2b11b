"""An assignment of the working problem kept ready for local moves: each live node's chosen
strategy, its cost in its neighbours' current context, and the slack left under the caps
at every step."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from solver.iopddl.work import Work


def descend(order: Iterable[int], best: Callable[[int], int], pos: Mapping[int, int] | list[int],
            move: Callable[[int, int], None], until: float, now: Callable[[], float]) -> int:
    """Sweeps of improving moves over ``order`` (``best(i)``: i's better position, or its
    own) until a sweep moves nothing or the clock passes ``until``; the moves made."""
    moves = 0
    improved = True
    while improved:
        improved = False
        for i in order:
            target = best(i)
            if target != pos[i]:
                move(i, target)
                moves += 1
                improved = True
        if now() >= until:
            break
    return moves


class State:
    def __init__(self, work: Work, pos: dict[int, int]):
        self.work = work
        self.nodes = [int(i) for i in work.live_nodes]
        self.pos = dict(pos)
        self.slack = work.cap.astype(np.int64).copy()
        for i in self.nodes:
            self._load(i, int(work.var(i)[self.pos[i]]))
        self.local: dict[int, np.ndarray] = {i: self._local(i) for i in self.nodes}

    def _load(self, i: int, amount: int) -> None:
        a, b = self.work.first[i], self.work.last[i]
        if a < b and amount:
            self.slack[a:b] -= amount

    def _local(self, i: int) -> np.ndarray:
        work = self.work
        total = work.cost[i].copy()
        for j, e in work.adjacent[i].items():
            total += work.edges[e].toward(i)[:, self.pos[j]]
        return total

    def room(self, i: int) -> int:
        """How much more node i may use at every step of its interval."""
        a, b = self.work.first[i], self.work.last[i]
        return int(self.slack[a:b].min()) if a < b else 2**62

    def feasible(self) -> bool:
        return bool(self.slack.size == 0 or self.slack.min() >= 0)

    def cost(self) -> float:
        work = self.work
        total = work.offset + sum(float(work.cost[i][self.pos[i]]) for i in self.nodes)
        return total + sum(float(edge.cost[self.pos[edge.u], self.pos[edge.v]])
                           for edge in work.edges.values())

    def move(self, i: int, new: int) -> None:
        old = self.pos[i]
        if new == old:
            return
        var = self.work.var(i)
        self._load(i, int(var[new]) - int(var[old]))
        self.pos[i] = new
        for j, e in self.work.adjacent[i].items():
            m = self.work.edges[e].toward(j)
            self.local[j] += m[:, new] - m[:, old]

    def best_move(self, i: int) -> int:
        """Node i's cheapest strategy that fits the slack (its current one if none is
        cheaper)."""
        var = self.work.var(i)
        room = self.room(i) + int(var[self.pos[i]])
        local = self.local[i]
        fits = var <= room
        candidates = np.where(fits, local, np.inf)
        best = int(np.argmin(candidates))
        return best if candidates[best] < local[self.pos[i]] else self.pos[i]

    def descend(self, order: list[int], until: float, now: Callable[[], float]) -> int:
        """Single-node improving moves until none improves (or the clock passes
        ``until``); the number of moves made."""
        return descend(order, self.best_move, self.pos, self.move, until, now)

    def repair(self, until: float, now: Callable[[], float]) -> bool:
        """Restore every step's fit (from any assignment): at the worst step, the live
        nodes give up usage where it costs least per byte freed. False when the clock
        passes ``until`` first."""
        work = self.work
        nodes = np.array(self.nodes, dtype=np.int64)
        while not self.feasible():
            if now() >= until:
                return False
            t = int(np.argmin(self.slack))
            live = nodes[(work.first[nodes] <= t) & (t < work.last[nodes])].tolist()
            offers = []
            for i in live:
                var = work.var(i)
                cur = self.pos[i]
                freed = int(var[cur]) - var
                ok = np.flatnonzero(freed > 0)
                if ok.size:
                    price = (self.local[i][ok] - self.local[i][cur]) / freed[ok]
                    k = int(np.argmin(price))
                    offers.append((float(price[k]), i, int(ok[k])))
            if not offers:
                raise RuntimeError("no usage left to free at an over-full step")
            offers.sort()
            for _, i, k in offers:
                if self.slack[t] >= 0:
                    break
                if int(work.var(i)[k]) < int(work.var(i)[self.pos[i]]):
                    self.move(i, k)
        return True
