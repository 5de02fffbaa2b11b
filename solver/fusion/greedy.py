"""The ``greedy`` baseline: the seed team's Greedy Fusion Solver under the final rules.

Start unfused; repeatedly merge the two subgraphs connected by a tensor whose merge saves
the most latency, skipping merges that would close a dependency cycle, leave a new
ephemeral tensor needed outside the merged subgraph (SEMANTICS.md S4.2: nobody would
write it), or fit at no legal granularity; then keep merging at zero benefit (every such
merge makes the connecting tensors ephemeral). Each subgraph takes its best legal
granularity and traversal (``best_config``: larger tiles on ties, snake for multi-tile
MatMul subgraphs unless another order is faster). Finally, walking the subgraphs in order, an
output whose every consumer is in the next subgraph is retained when both subgraphs
still fit and neither gets slower. Under a short limit the ops the unfused start meets late
take a quick config (``unfused``), and a merge round cut short applies the best merge it
scored.
"""

from __future__ import annotations

import networkx as nx

from solver.deadline import now
from solver.fusion.schedule import Planned, offer
from solver.fusion.score import Config, ScoringContext, ScoringTimeout, best_config
from solver.fusion.unfused import unfused

Group = frozenset[int]


UNFUSED_SHARE = 0.5
"""Share of the time to ``deadline`` the unfused start may spend on each op's best config
(the ops after take a quick one), leaving the rest to merges."""


def greedy(ctx: ScoringContext, deadline: float = float("inf")) -> list[Planned]:
    """A valid schedule no slower than ``unfused``; merging stops early at ``deadline``
    (a ``deadline.now()`` value), and the schedule found so far is returned. The unfused
    start is offered as the solve's first answer (``schedule.offer``)."""
    start = unfused(ctx, "greedy", now() + UNFUSED_SHARE * (deadline - now()))
    offer(ctx, start)
    merger = _Merger(ctx, start)
    with ctx.searching_until(deadline):
        for allow_zero in (False, True):  # positive merges first, then zero-benefit ones
            while now() < deadline and merger.merge_best(allow_zero, deadline):
                pass
        return _retain(ctx, [Planned(merger.ops(group), merger.configs[group])
                             for group in merger.ordered()], deadline)


class _Merger:
    """Groups of ops with their best configurations, and the quotient DAG between them."""

    def __init__(self, ctx: ScoringContext, start: list[Planned]):
        self.ctx = ctx
        self.g = ctx.graph
        self.position = {q: i for i, q in enumerate(self.g.topological_order)}
        self.configs: dict[Group, Config] = {frozenset(item.ops): item.config
                                             for item in start}
        self.group_of = {q: group for group in self.configs for q in group}

    def ops(self, group: Group) -> tuple[int, ...]:
        return tuple(sorted(group, key=self.position.__getitem__))

    def quotient(self) -> nx.DiGraph:
        dag = nx.DiGraph()
        dag.add_nodes_from(self.configs)
        dag.add_edges_from((self.group_of[a], self.group_of[b]) for a, b in self.g.dag.edges
                           if self.group_of[a] != self.group_of[b])
        return dag

    def ordered(self) -> list[Group]:
        return list(nx.lexicographical_topological_sort(
            self.quotient(), key=lambda group: min(self.position[q] for q in group)))

    def merge_best(self, allow_zero: bool, deadline: float = float("inf")) -> bool:
        """Apply the legal merge of highest positive (or, if allowed, zero) benefit; False
        when there is none. When ``deadline`` passes (or a config search inside
        ``ctx.searching_until`` stops) before every merge is scored, the best of those
        scored: on a large graph the first round alone may outlast a short limit."""
        dag = self.quotient()
        candidates = []
        for a, b in dag.edges:
            if now() > deadline:
                break
            merged = a | b
            if not self._ephemerals_stay_inside(merged):
                continue
            apart = self.configs[a].latency + self.configs[b].latency
            try:
                config = best_config(self.ctx, self.ops(merged), at_most=apart)
            except ScoringTimeout:
                break
            if config is None:
                continue  # no config fits, or none is as fast as the two apart
            benefit = apart - config.latency
            if benefit > 0 or (allow_zero and benefit == 0):
                key = (min(self.position[q] for q in a), min(self.position[q] for q in b))
                candidates.append((-benefit, key, a, b, config))
        for _, _, a, b, config in sorted(candidates, key=lambda c: c[:2]):
            if _closes_cycle(dag, a, b):
                continue
            merged = a | b
            del self.configs[a], self.configs[b]
            self.configs[merged] = config
            for q in merged:
                self.group_of[q] = merged
            return True
        return False

    def _ephemerals_stay_inside(self, merged: Group) -> bool:
        """Every tensor the merge makes ephemeral has all its consumers in the merge."""
        shape = self.ctx.shape(self.ops(merged))
        return all(c in merged for t in shape.ephemerals for c in self.g.consumers[t])


def _closes_cycle(dag: nx.DiGraph, a: Group, b: Group) -> bool:
    """Whether b is reachable from a through some third group (the merge would close a cycle)."""
    todo = [s for s in dag.successors(a) if s != b]
    seen = set(todo)
    while todo:
        node = todo.pop()
        if node == b:
            return True
        for s in dag.successors(node):
            if s not in seen:
                seen.add(s)
                todo.append(s)
    return False


def _retain(ctx: ScoringContext, schedule: list[Planned],
            deadline: float = float("inf")) -> list[Planned]:
    """Retain outputs into the next subgraph when both still fit and neither gets slower
    (walking in order until ``deadline``)."""
    g = ctx.graph
    out = list(schedule)
    for i in range(len(out) - 1):
        if now() > deadline:
            break
        producer, consumer = out[i], out[i + 1]
        shape = ctx.shape(producer.ops)
        members = set(consumer.ops)
        resident = out[i - 1].retained if i else frozenset()
        candidates = sorted((t for t in shape.outputs
                             if g.consumers[t] and set(g.consumers[t]) <= members),
                            key=lambda t: (-g.size(t), t))
        for t in candidates:
            kept = producer.retained | {t}
            try:
                first = best_config(ctx, producer.ops, resident, kept)
                second = best_config(ctx, consumer.ops, kept, consumer.retained)
            except ScoringTimeout:  # past ``ctx.deadline``: what was kept so far stands
                out[i], out[i + 1] = producer, consumer
                return out
            if first is None or second is None:
                continue
            if first.latency + second.latency <= producer.config.latency + consumer.config.latency:
                producer = Planned(producer.ops, first, kept)
                consumer = Planned(consumer.ops, second, consumer.retained)
        out[i], out[i + 1] = producer, consumer
    return out
