"""The normalized fusion problem: derived graph structure and the problem-wide lower bounds.

Everything here is a pure function of a validated ``FusionProblem``; values that the
evaluator and the solvers compare exactly are kept as ``Fraction``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import networkx as nx

from models.fusion import FusionProblem, ReductionCost


def exact(x: int | float) -> Fraction:
    """An exact rational for a JSON number: ints stay exact, floats via their shortest repr."""
    return Fraction(x) if isinstance(x, int) else Fraction(repr(x))


@dataclass(frozen=True)
class FusionGraph:
    """Producers, consumers and graph boundary of a validated problem."""

    problem: FusionProblem

    @cached_property
    def producer(self) -> dict[int, int]:
        return {t: k for k, outs in enumerate(self.problem.outputs) for t in outs}

    @cached_property
    def consumers(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {t: [] for t in range(self.problem.num_tensors)}
        for k, ins in enumerate(self.problem.inputs):
            for t in dict.fromkeys(ins):
                out[t].append(k)
        return out

    @cached_property
    def graph_inputs(self) -> list[int]:
        """Tensors no op produces but some op consumes (SEMANTICS.md S1.2)."""
        return [t for t, cs in self.consumers.items() if cs and t not in self.producer]

    @cached_property
    def graph_outputs(self) -> list[int]:
        """Tensors some op produces and no op consumes."""
        return [t for t in sorted(self.producer) if not self.consumers[t]]

    @cached_property
    def unused_tensors(self) -> list[int]:
        """Tensors neither produced nor consumed; ignored by the semantics (S1.2)."""
        return [t for t, cs in self.consumers.items() if not cs and t not in self.producer]

    @cached_property
    def dag(self) -> nx.DiGraph:
        """Op-level DAG: an edge p -> c for every tensor p produces and c consumes."""
        g = nx.DiGraph()
        g.add_nodes_from(range(self.problem.num_ops))
        for t, cs in self.consumers.items():
            if t in self.producer:
                g.add_edges_from((self.producer[t], c) for c in cs)
        return g

    def size(self, t: int) -> int:
        return self.problem.widths[t] * self.problem.heights[t]

    def reduction_length(self, op: int) -> int:
        """K of a MatMul: the width of its LHS."""
        return self.problem.widths[self.problem.inputs[op][0]]


@dataclass(frozen=True)
class LowerBounds:
    """Bounds no valid solution can beat: total compute, and slow-memory traffic."""

    compute: Fraction
    io: Fraction

    @property
    def total(self) -> Fraction:
        return max(self.compute, self.io)


def native_sizes(problem: FusionProblem) -> tuple[int, int, int]:
    """(nw, nh, nk): the native k equals the native w unless given (SEMANTICS.md S1.6)."""
    g = problem.native_granularity
    return g[0], g[1], g[2] if len(g) > 2 else g[0]


def lower_bounds(problem: FusionProblem, mode: ReductionCost = "per_native_k") -> LowerBounds:
    """Compute and I/O lower bounds of SEMANTICS.md "Public benchmarks".

    Every op fires at least once over its whole output and a firing never costs less
    than its area share; every consumed graph input and every graph output crosses the
    slow-memory boundary at least once.
    """
    g = FusionGraph(problem)
    nw, nh, nk = native_sizes(problem)
    compute = Fraction(0)
    for k, op in enumerate(problem.op_types):
        area = Fraction(g.size(problem.outputs[k][0]), nw * nh)
        cost = exact(problem.base_costs[k]) * area
        if op == "MatMul" and mode == "per_native_k":
            cost *= Fraction(g.reduction_length(k), nk)
        compute += cost
    traffic = sum(g.size(t) for t in g.graph_inputs) + sum(g.size(t) for t in g.graph_outputs)
    return LowerBounds(compute=compute, io=Fraction(traffic) / exact(problem.slow_memory_bandwidth))


def summarize(problem: FusionProblem) -> dict[str, object]:
    """A short description of a valid problem: sizes, boundary and lower bounds in both modes."""
    g = FusionGraph(problem)
    bounds = {mode: lower_bounds(problem, mode) for mode in ("per_native_k", "per_op")}
    return {
        "ops": problem.num_ops,
        "ops_by_type": dict(sorted(Counter(problem.op_types).items())),
        "tensors": problem.num_tensors,
        "graph_inputs": g.graph_inputs,
        "graph_outputs": g.graph_outputs,
        "unused_tensors": g.unused_tensors,
        "fast_memory_capacity": problem.fast_memory_capacity,
        "slow_memory_bandwidth": problem.slow_memory_bandwidth,
        "native_granularity": list(native_sizes(problem)),
        "lower_bounds": {
            mode: {
                "compute": float(b.compute),
                "io": float(b.io),
                "total": float(b.total),
            }
            for mode, b in bounds.items()
        },
    }
