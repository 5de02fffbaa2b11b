"""Repeated blocks: carry one window's new decisions to every window built the same way.

Real models repeat their blocks (a transformer's layers, a CNN's stages): the 16-layer
Llama is one layer sixteen times. When the segment search improves a window of one layer,
the same decisions usually improve each copy, but the search would reach the copies only
one round at a time, and a large graph's time limit runs out long before (measured in
BENCHMARKS.md). A *twin* of a window is another stretch of the schedule, as long, whose
ops have the same signatures (so the same candidates) and are wired alike: an input made
inside the window is made at the same distance inside the twin, one made outside is made
outside the twin too. Trying the decisions there costs one plan and one evaluation; the
evaluator and the price decide, never this module.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable

from solver.layout.plan import Assignment
from solver.layout.problem import LayoutProblem


class Twins:
    """Per schedule position, what must agree for two windows to be twins."""

    def __init__(self, problem: LayoutProblem):
        self.order = problem.order
        pos = {op: k for k, op in enumerate(self.order)}
        kinds: dict[Hashable, int] = {}
        self.kind: list[int] = []  # the op's signature, numbered
        self.dist: list[tuple[int | None, ...]] = []  # per input: steps back to its producer
        self.at: dict[int, list[int]] = defaultdict(list)
        for k, op in enumerate(self.order):
            info = problem.ops[op]
            kind = kinds.setdefault(info.sig, len(kinds))
            self.kind.append(kind)
            self.at[kind].append(k)
            producers = (problem.tensors[t].producer for t in info.inputs)
            self.dist.append(tuple(None if p is None else k - pos[p] for p in producers))

    def key(self, lo: int, hi: int) -> tuple:
        """Equal for two windows exactly when they are twins (module doc)."""
        return tuple((self.kind[k], tuple(d if d is not None and d <= k - lo else None
                                          for d in self.dist[k]))
                     for k in range(lo, hi))

    def of(self, lo: int, hi: int) -> list[int]:
        """Offsets ``d`` at which steps ``lo + d .. hi - 1 + d`` are a twin of ``lo .. hi - 1``,
        pairwise disjoint and disjoint from the window itself, nearest first."""
        size, key = hi - lo, self.key(lo, hi)
        taken = [(lo, hi)]
        found = []
        for start in sorted(self.at[self.kind[lo]], key=lambda s: abs(s - lo)):
            if start + size > len(self.order) or any(start < b and a < start + size
                                                     for a, b in taken):
                continue
            if self.key(start, start + size) == key:
                found.append(start - lo)
                taken.append((start, start + size))
        return found


def batches(offsets: list[int]) -> list[list[int]]:
    """The order twins are tried in: all at once (one plan to price), then one by one."""
    return ([offsets] if len(offsets) > 1 else []) + [[d] for d in offsets]


def transplant(problem: LayoutProblem, target: Assignment, source: Assignment, lo: int,
               hi: int, offsets: list[int]) -> Assignment | None:
    """``target`` with steps ``lo .. hi - 1`` of ``source`` copied onto each twin at
    ``offsets``: configurations (by id), reads, and spills of the tensors the window
    touches. None when a twin's op lacks the configuration or the tensors do not map."""
    order = problem.order
    configs, reads, spills = dict(target.configs), dict(target.reads), dict(target.spills)
    for d in offsets:
        tensor_map: dict[str, str] = {}
        for k in range(lo, hi):
            op, twin = problem.ops[order[k]], problem.ops[order[k + d]]
            wanted = source.configs[op.name].id
            chosen = next((c for c in twin.candidates if c.id == wanted), None)
            if chosen is None:
                return None
            configs[twin.name] = chosen
            reads[twin.name] = list(source.reads[op.name])
            for mine, theirs in ((op.inputs, twin.inputs), (op.outputs, twin.outputs)):
                for t, u in zip(mine, theirs, strict=True):
                    if tensor_map.setdefault(t, u) != u:
                        return None
        for t, u in tensor_map.items():
            # the window decides the spills made at its steps (as a segment does, lns.py)
            if u in spills and lo - 1 <= spills[u] - d < hi - 1:
                del spills[u]
            if t in source.spills and lo - 1 <= source.spills[t] < hi - 1:
                spills[u] = source.spills[t] + d
    return Assignment(list(target.schedule), configs, reads, spills)
