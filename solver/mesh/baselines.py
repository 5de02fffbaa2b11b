"""How mesh plans are made today, under our cost model: three baselines.

- ``replicate``: data parallel. Every weight on every chip; each op splits its output's
  first dim (the batch) over every axis it can, else runs whole.
- ``megatron``: tensor parallel as TT-NN's Llama demos: a matmul with a weight reads its
  activation split along K when the activation comes split that way (row-parallel,
  partial output), else splits the weight by N (column-parallel); attention follows by
  heads, and a partial sum is all-reduced where an op cannot take it (once per block).
- ``autoshard``: tt-mlir's automatic sharding: per-argument placements (graph inputs and
  weights) on one mesh axis, propagated through the graph, the variant of least volume
  kept (bytes beyond a chip's DRAM first, then bytes moved by collectives plus bytes of
  arguments and activations per chip), found by trying each argument's placements in turn
  (arguments alike, a repeated block's weights, together) until the time share ends.

Each op not fixed by its rule takes, among the strategies the baseline allows, the one of
least per-chip cost plus resharding from where its operands are (``propagate``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from solver.deadline import now
from solver.mesh.local import Decisions, placements_of
from solver.mesh.placement import REPLICATED, Placement, local_bytes, split_dim
from solver.mesh.problem import MeshProblem
from solver.mesh.strategies import Strategy

Allowed = Callable[[str, int, Strategy], bool]


def _reshard_us(problem: MeshProblem, tensor: str, src: Placement, dst: Placement) -> float:
    us = problem.reshard_us(tensor, src, dst)
    return math.inf if us is None else us


def propagate(problem: MeshProblem, sources: dict[str, Placement],
              allowed: Allowed = lambda *_: True,
              preferred: Callable[[str, dict[str, Placement]], int | None] =
              lambda *_: None) -> Decisions:
    """Ops in order, each taking ``preferred(op, where operands are)`` or its cheapest
    allowed strategy given where its operands are; a weight or input not placed yet
    (``sources`` lacks it) is placed as its first reader needs it."""
    placed = dict(sources)
    where = dict(sources)
    chosen: dict[str, int] = {}
    for name, op in problem.ops.items():
        strategies = problem.strategies[name]
        pick = preferred(name, where)
        if pick is None:
            best = math.inf
            for k, s in enumerate(strategies):
                if not allowed(name, k, s):
                    continue
                us = problem.op_us[name][k]
                for t, need in zip(op.inputs, s.inputs, strict=True):
                    if t in where:
                        us += _reshard_us(problem, t, where[t], need)
                    elif need not in problem.options[t]:
                        us = math.inf
                if us < best:
                    best, pick = us, k
            if pick is None:  # nothing allowed is finite: the cheapest of all
                pick = min(range(len(strategies)), key=problem.op_us[name].__getitem__)
        chosen[name] = pick
        s = strategies[pick]
        for t, need in zip(op.inputs, s.inputs, strict=True):
            if t not in where:
                p = need if need in problem.options[t] else problem.options[t][0]
                placed[t] = where[t] = p
        for t in op.outputs:
            where[t] = s.output
    return Decisions(placed, chosen)


def replicate(problem: MeshProblem, until: float) -> Decisions:
    """Weights whole on every chip, inputs split by their first dim where they can be."""
    sources = {}
    for name in problem.sources:
        options = problem.options[name]
        if problem.kinds[name] == "constant":
            sources[name] = options[0] if len(options) == 1 else \
                tuple(REPLICATED for _ in problem.mesh.shape)
        else:
            sources[name] = max(options, key=lambda p: sum(split_dim(e) == 0 for e in p))

    def data_parallel(name: str, _k: int, s: Strategy) -> bool:
        op = problem.ops[name]
        return all(e in (REPLICATED, "S0") for e in s.output) and all(
            all(e == REPLICATED for e in need) for t, need in zip(op.inputs, s.inputs,
                                                                  strict=True)
            if problem.kinds[t] == "constant")

    return propagate(problem, sources, data_parallel)


def megatron(problem: MeshProblem, until: float) -> Decisions:
    """Column-parallel unless the activation arrives split along K, then row-parallel;
    inputs replicated, each weight placed as its first reader needs it."""
    replicated = tuple(REPLICATED for _ in problem.mesh.shape)
    inputs = {n: replicated for n in problem.sources
              if problem.kinds[n] != "constant" and replicated in problem.options[n]}

    def preferred(name: str, where: dict[str, Placement]) -> int | None:
        op = problem.ops[name]
        if op.type not in ("matmul", "linear") or op.inputs[0] not in where or \
                problem.kinds[op.inputs[1]] != "constant":
            return None
        last = f"S{len(problem.shapes[op.inputs[0]]) - 1}"
        want = tuple("replicated" if chips == 1 else "row" if e == last else "column"
                     for e, chips in zip(where[op.inputs[0]], problem.mesh.shape, strict=True))
        return next((k for k, s in enumerate(problem.strategies[name])
                     if s.name == want and not math.isinf(problem.op_us[name][k])), None)

    return propagate(problem, inputs, preferred=preferred)


def autoshard(problem: MeshProblem, until: float) -> Decisions:
    """Per-argument placements on the longest axis, the least-volume variant."""
    axis = max(range(len(problem.mesh.shape)), key=lambda a: (problem.mesh.shape[a], a))

    def on_axis(p: Placement) -> bool:
        return all(e == REPLICATED for a, e in enumerate(p) if a != axis)

    def single_axis(_name: str, _k: int, s: Strategy) -> bool:
        return on_axis(s.output) and all(on_axis(p) for p in s.inputs)

    # arguments alike (a repeated block's weights: same shape, type, role and first
    # reader's type) vary together, so a deep stack costs what one block does
    groups: dict[tuple[tuple[int, ...], str, str, str], list[str]] = {}
    for name in problem.sources:
        reader = problem.ops[problem.consumers[name][0][0]].type
        key = (problem.shapes[name], problem.dtypes[name], problem.kinds[name], reader)
        groups.setdefault(key, []).append(name)
    order = sorted(groups, key=lambda k: -math.prod(k[0]) * len(groups[k]))
    options = {k: [p for p in problem.options[groups[k][0]] if on_axis(p)
                   and all(p in problem.options[n] for n in groups[k])]
               or problem.options[groups[k][0]][:1] for k in order}
    current = {k: options[k][0] for k in order}

    def run(chosen: dict[tuple[tuple[int, ...], str, str, str], Placement]) -> Decisions:
        return propagate(problem, {n: chosen[k] for k in order for n in groups[k]},
                         single_axis)

    best = run(current)
    best_volume = volume(problem, best)
    improved = True
    while improved and now() < until:
        improved = False
        for key in order:
            for p in options[key]:
                if p == current[key] or now() >= until:
                    continue
                trial = {**current, key: p}
                found = run(trial)
                v = volume(problem, found)
                if v < best_volume:
                    best, best_volume, current, improved = found, v, trial, True
    return best


def volume(problem: MeshProblem, d: Decisions) -> tuple[float, float]:
    """autoshard's score: first the bytes of weights and inputs one chip holds beyond its
    DRAM, then the bytes moved by collectives plus bytes per chip of weights, inputs and
    op outputs (inf when some operand cannot be resharded as an op needs)."""
    where = placements_of(problem, d)
    total = 0.0
    for name, op in problem.ops.items():
        s = problem.strategies[name][d.strategies[name]]
        for t, need in zip(op.inputs, s.inputs, strict=True):
            steps = problem.steps(t, where[t], need)
            if steps is None:
                return math.inf, math.inf
            total += sum(st.bytes_per_chip for st in steps if st.kind != "slice")
        for t in op.outputs:
            total += local_bytes(problem.shapes[t], problem.dtypes[t], s.output,
                                 problem.mesh.shape)
    held = sum(local_bytes(problem.shapes[t], problem.dtypes[t], where[t], problem.mesh.shape)
               for t in problem.sources)
    capacity = problem.chip.dram_size_bytes
    return max(0.0, held - capacity) if capacity is not None else 0.0, total + held


BASELINES: dict[str, Callable[[MeshProblem, float], Decisions]] = {
    "replicate": replicate,
    "megatron": megatron,
    "autoshard": autoshard,
}
