"""A layout graph analysed for a mesh: every op's strategies with their per-chip cost,
every graph input's and weight's placements, and the strategy problem they make.

The strategy problem is an ``iopddl`` problem (one node per op and per graph input or
weight, a strategy per choice, resharding as edge costs, per-chip DRAM as the usage limit
over the op order), so the ``iopddl`` family's search and bound plan a mesh. An op's cost
under a strategy is the least latency any configuration of it has on one chip with its
local shard shapes (``least_us``): a lower bound on what the per-chip plan will pay for
it, so the strategy problem's bound is a bound on every mesh plan's latency.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from models.device import PRESETS, DeviceSpec
from models.errors import InputValidationError, Issue
from models.layout import LayoutGraph, OpDecl
from models.layout_ops import attrs_model
from models.mesh import MESH_PRESETS, PLACEMENT_RE, MeshSpec
from solver.iopddl.problem import Problem
from solver.layout.memory import DRAM
from solver.layout.ops import DEFAULT_MAX_CONFIGS, FAMILIES, OperandSig, OpSig, candidates
from solver.mesh.collectives import Step, conversion
from solver.mesh.placement import (
    PARTIAL,
    REPLICATED,
    Placement,
    local_bytes,
    local_shape,
    placements,
)
from solver.mesh.strategies import Strategy, op_strategies

NS_PER_US = 1000
"""The strategy problem's integer unit: nanoseconds, each cost rounded down so its bound
stays a bound in microseconds."""
MAX_OP_ISSUES = 10
"""Ops named when none of their strategies fits a chip (a repeated block repeats them)."""
FORBIDDEN_NS = 10**18
"""A pair of strategies no collective joins (a partial sum needed where none is made), or
an op no configuration of fits: the ``iopddl`` family's "infinite" cost, never chosen
where a finite one exists."""


def resolve_mesh(graph: LayoutGraph, override: str | MeshSpec | None) -> MeshSpec | None:
    """The mesh to plan for: the option, else the graph's own; None for one chip."""
    chosen = override if override is not None else graph.mesh
    if chosen is None or isinstance(chosen, MeshSpec):
        return chosen
    if chosen not in MESH_PRESETS:
        raise InputValidationError([Issue(("mesh",), f"unknown mesh preset '{chosen}'; "
                                          f"presets are {sorted(MESH_PRESETS)}",
                                          "mesh.unknown")], "mesh")
    return MESH_PRESETS[chosen]


@dataclass
class MeshProblem:
    """``sources`` (graph inputs and weights, then ops) are the strategy problem's nodes
    in that order: ``options[name]`` the placements of a source, ``strategies[op]`` an
    op's, ``op_us[op][s]`` the least per-chip latency of strategy ``s``."""

    graph: LayoutGraph
    mesh: MeshSpec
    chip: DeviceSpec
    ops: dict[str, OpDecl]
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str]
    kinds: dict[str, str]
    producer: dict[str, str]
    consumers: dict[str, list[tuple[str, int]]]
    sources: list[str]
    options: dict[str, list[Placement]]
    delivered: dict[str, Placement]
    """Graph outputs the host takes in a placement of its choosing (``mesh_outputs``)."""
    strategies: dict[str, list[Strategy]]
    op_us: dict[str, list[float]]
    max_configs: int = DEFAULT_MAX_CONFIGS
    _least: dict[OpSig, float] = field(default_factory=dict, repr=False)
    _edges: dict[tuple[object, ...], np.ndarray] = field(default_factory=dict, repr=False)
    _steps: dict[tuple[object, ...], list[Step] | None] = field(default_factory=dict,
                                                                repr=False)

    @property
    def nodes(self) -> list[str]:
        return [*self.sources, *self.ops]

    def steps(self, tensor: str, src: Placement, dst: Placement) -> list[Step] | None:
        """The collectives that take ``tensor`` from ``src`` to ``dst`` (None: none can),
        worked out once per shape, type and pair of placements."""
        key = (self.shapes[tensor], self.dtypes[tensor], src, dst)
        if key not in self._steps:
            self._steps[key] = conversion(key[0], key[1], src, dst, self.mesh)
        return self._steps[key]

    def reshard_us(self, tensor: str, src: Placement, dst: Placement) -> float | None:
        found = self.steps(tensor, src, dst)
        return None if found is None else sum(s.latency_us for s in found)

    def handed_over(self, tensor: str, src: Placement) -> Placement:
        """The placement the host takes graph output ``tensor`` in when it is made ``src``:
        as pinned in ``mesh_outputs``, else as made with partial sums reduced."""
        return self.delivered.get(tensor) or tuple(REPLICATED if e == PARTIAL else e
                                                    for e in src)

    def resolve_us(self, tensor: str, src: Placement) -> float:
        """The collectives that hand a graph output made ``src`` to the host (inf when
        none can: a pinned placement out of reach of this one)."""
        us = self.reshard_us(tensor, src, self.handed_over(tensor, src))
        return math.inf if us is None else us


def analyze_mesh(graph: LayoutGraph, mesh: MeshSpec, max_configs: int = DEFAULT_MAX_CONFIGS,
                 priced: bool = True) -> MeshProblem:
    """Strategies, placements and (``priced``) per-chip costs of a validated graph on
    ``mesh``; the evaluator and admission need no prices."""
    if graph.measured.ops or graph.measured.reshards:
        raise InputValidationError([Issue(("measured",), "measured costs name one chip's "
                                          "configurations; a mesh plan prices shards of "
                                          "other shapes: remove them or plan one chip",
                                          "mesh.measured")], "layout graph")
    chip = PRESETS[mesh.chip]
    shapes = {t.name: tuple(t.shape) for t in graph.tensors}
    producer = {t: op.name for op in graph.ops for t in op.outputs}
    consumers: dict[str, list[tuple[str, int]]] = {t.name: [] for t in graph.tensors}
    for op in graph.ops:
        for j, t in enumerate(op.inputs):
            consumers[t].append((op.name, j))
    sources = [t.name for t in graph.tensors if t.name not in producer and consumers[t.name]]
    problem = MeshProblem(graph, mesh, chip, {op.name: op for op in graph.ops}, shapes,
                          {t.name: t.dtype for t in graph.tensors},
                          {t.name: t.kind for t in graph.tensors}, producer, consumers,
                          sources, {}, _pinned(graph, mesh, shapes, "mesh_outputs"), {}, {},
                          max_configs)
    pinned = _pinned(graph, mesh, shapes, "mesh_inputs")
    for name in sources:
        problem.options[name] = [pinned[name]] if name in pinned else \
            list(placements(shapes[name], mesh.shape))
    issues = []
    # ops alike (a repeated block's) share their strategies and prices
    alike: dict[tuple[object, ...], tuple[list[Strategy], list[float]]] = {}
    for index, op in enumerate(graph.ops):
        key = (op.type, json.dumps(op.attrs, sort_keys=True),
               *((shapes[t], problem.dtypes[t], problem.kinds[t]) for t in op.inputs),
               *((shapes[t], problem.dtypes[t]) for t in op.outputs))
        if key not in alike:
            found = _strategies(op, [shapes[t] for t in op.inputs], shapes, mesh)
            alike[key] = found, [least_us(problem, op, s) for s in found] if priced else []
        problem.strategies[op.name], prices = alike[key]
        if not priced:
            continue
        problem.op_us[op.name] = prices
        if all(math.isinf(u) for u in prices):
            issues.append(Issue(("ops", index), f"op '{op.name}' ({op.type}) has no "
                                f"configuration whose scratch fits one {chip.name} under "
                                "any of its strategies", "mesh.op_too_large"))
    if issues:
        more = len(issues) - MAX_OP_ISSUES
        shown = issues[:MAX_OP_ISSUES] + ([Issue(("ops",), f"and {more} more ops like these",
                                                 "mesh.op_too_large")] if more > 0 else [])
        raise InputValidationError(shown, "layout graph")
    return problem


def _strategies(op: OpDecl, ins: list[tuple[int, ...]], shapes: dict[str, tuple[int, ...]],
                mesh: MeshSpec) -> list[Strategy]:
    """An op's strategies; an op of several outputs (opaque) runs replicated only."""
    found = op_strategies(op, ins, shapes[op.outputs[0]], mesh.shape) \
        if len(op.outputs) == 1 else []
    return found or [Strategy(("replicated",) * len(mesh.shape),
                              tuple((REPLICATED,) * len(mesh.shape) for _ in ins),
                              (REPLICATED,) * len(mesh.shape))]


def _pinned(graph: LayoutGraph, mesh: MeshSpec, shapes: dict[str, tuple[int, ...]],
            field: str) -> dict[str, Placement]:
    """``mesh_inputs`` (how the host sends graph inputs) or ``mesh_outputs`` (how it takes
    graph outputs), checked against the mesh."""
    kinds = {t.name: t.kind for t in graph.tensors}
    allowed = {n for n, k in kinds.items() if k == "input"} if field == "mesh_inputs" \
        else set(graph.outputs)
    what = "a graph input (kind input)" if field == "mesh_inputs" else "a graph output"
    issues, pinned = [], {}
    for name, entries in getattr(graph, field).items():
        loc = (field, name)
        if name not in allowed:
            issues.append(Issue(loc, f"'{name}' is not {what}", f"{field}.unknown"))
            continue
        p = tuple(entries)
        if len(p) != len(mesh.shape) or not all(PLACEMENT_RE.match(e) for e in p):
            issues.append(Issue(loc, f"needs one entry per mesh axis ({len(mesh.shape)}), "
                                "each R or S<dim>", f"{field}.arity"))
        elif PARTIAL in p:
            issues.append(Issue(loc, "the host never holds a partial sum: use R or S<dim>",
                                f"{field}.partial"))
        elif local_shape(shapes[name], p, mesh.shape) is None:
            issues.append(Issue(loc, f"{list(p)} does not split {list(shapes[name])} evenly "
                                f"over the {list(mesh.shape)} mesh", f"{field}.uneven"))

        else:
            pinned[name] = p
    if issues:
        raise InputValidationError(issues, "layout graph")
    return pinned


def local_sig(problem: MeshProblem, op: OpDecl, s: Strategy) -> OpSig:
    """The op as each chip runs it under strategy ``s``: its operands' and output's shards."""
    shape = problem.mesh.shape

    def operand(name: str, p: Placement) -> OperandSig:
        local = local_shape(problem.shapes[name], p, shape)
        assert local is not None
        return OperandSig(local, problem.dtypes[name], problem.kinds[name] == "constant")

    attrs = attrs_model(op.type).model_validate(op.attrs)
    return OpSig.of(op.type, attrs, [operand(t, p) for t, p in zip(op.inputs, s.inputs,
                                                                    strict=True)],
                    [operand(t, s.output) for t in op.outputs])


def least_us(problem: MeshProblem, op: OpDecl, s: Strategy) -> float:
    """The least latency of any configuration of the local op, each operand read from its
    cheapest source (inf when none fits a chip, or none writes DRAM: every op of a chip's
    graph needs that fallback)."""
    sig = local_sig(problem, op, s)
    cached = problem._least.get(sig)
    if cached is None:
        found = candidates(sig, problem.chip, problem.max_configs)
        if not any(c.output == DRAM for c in found):
            found = []  # the one-chip analysis needs a DRAM fallback for every op
        cached = min((max(c.compute_us, c.write_us + sum(min(a.values()) for a in c.accepts))
                      + c.fixed_us for c in found), default=math.inf)
        problem._least[sig] = cached
    return cached


def stored_bytes(problem: MeshProblem, tensor: str, p: Placement) -> int:
    """DRAM bytes one chip holds at least of a graph input or weight placed ``p``: as its
    readers store it (a conv's prepared weights), each reader at its least over the
    strategies that read it so, the most over readers (its tiles when none reads it so)."""
    held = []
    for op_name, j in problem.consumers[tensor]:
        op = problem.ops[op_name]
        sizes = [FAMILIES[op.type].stored_bytes(local_sig(problem, op, s), j)
                 for s in problem.strategies[op_name] if s.inputs[j] == p]
        if sizes:
            held.append(min(sizes))
    return max(held) if held else local_bytes(problem.shapes[tensor], problem.dtypes[tensor],
                                              p, problem.mesh.shape)


def readers(problem: MeshProblem, tensor: str) -> int:
    """Ops reading ``tensor``, and the host when it is a graph output: one collective chain
    per placement needed serves them all."""
    return len(problem.consumers[tensor]) + (tensor in problem.graph.outputs)


def strategy_problem(problem: MeshProblem, shared: bool = False) -> Problem:
    """The ``iopddl`` problem: costs in ns (rounded down), usage in DRAM bytes per chip (at
    least what the chip will hold: collective results are not counted).

    A collective chain is made once per tensor and placement and read by every op that
    needs it, which pairwise costs cannot say: by default each reader pays the whole
    conversion (exact when one reader needs it, too dear when several share it); with
    ``shared`` each pays its share (1 / the tensor's readers), never more than the plan
    will: that problem's optimum is a bound."""
    nodes = problem.nodes
    index = {name: i for i, name in enumerate(nodes)}
    steps = len(problem.ops)
    at = {op: k for k, op in enumerate(problem.ops)}
    outputs = set(problem.graph.outputs)
    starts, ends, costs, usages = [], [], [], []
    for name in problem.sources:
        starts.append(0)
        ends.append(steps + 1)
        costs.append(np.zeros(len(problem.options[name]), dtype=np.int64))
        usages.append(np.array([stored_bytes(problem, name, p)
                                for p in problem.options[name]], dtype=np.int64))
    for name, op in problem.ops.items():
        last = max((at[c] for t in op.outputs for c, _ in problem.consumers[t]),
                   default=at[name])
        starts.append(at[name] + 1)
        ends.append(steps + 1 if outputs & set(op.outputs) else last + 1)
        strategies = problem.strategies[name]
        node_cost = []
        for s, us in zip(strategies, problem.op_us[name], strict=True):
            us += sum(problem.resolve_us(t, s.output) / (readers(problem, t) if shared else 1)
                      for t in op.outputs if t in outputs)
            node_cost.append(FORBIDDEN_NS if math.isinf(us) else math.floor(us * NS_PER_US))
        costs.append(np.array(node_cost, dtype=np.int64))
        usages.append(np.array([sum(local_bytes(problem.shapes[t], problem.dtypes[t],
                                                s.output, problem.mesh.shape)
                                    for t in op.outputs) for s in strategies], dtype=np.int64))
    pairs: dict[tuple[int, int], np.ndarray] = {}
    for name, op in problem.ops.items():
        v = index[name]
        for j, t in enumerate(op.inputs):
            src = problem.producer.get(t, t)
            u = index[src]
            matrix = pairs.setdefault((u, v), np.zeros((len(costs[u]), len(costs[v])),
                                                       dtype=np.int64))
            edge = _edge(problem, t, src, name, j)
            if shared:
                edge = np.where(edge >= FORBIDDEN_NS, FORBIDDEN_NS, edge // readers(problem, t))
            np.minimum(matrix + edge, FORBIDDEN_NS, out=matrix)
    edge_u = np.array([u for u, _ in pairs], dtype=np.int64)
    edge_v = np.array([v for _, v in pairs], dtype=np.int64)
    return Problem(f"{problem.graph.name}@{problem.mesh.name}", np.array(starts, dtype=np.int64),
                   np.array(ends, dtype=np.int64), costs, usages, edge_u, edge_v,
                   list(pairs.values()), problem.chip.dram_size_bytes)


def _edge(problem: MeshProblem, tensor: str, src: str, op: str, j: int) -> np.ndarray:
    """Resharding costs (ns) from each placement the source may give ``tensor`` to what
    each strategy of ``op`` needs of operand ``j``."""
    made = tuple(problem.options[src] if src in problem.options else
                 [s.output for s in problem.strategies[src]])
    needed = tuple(s.inputs[j] for s in problem.strategies[op])
    key = (problem.shapes[tensor], problem.dtypes[tensor], made, needed)
    matrix = problem._edges.get(key)
    if matrix is None:
        prices: dict[tuple[Placement, Placement], int] = {}
        matrix = np.zeros((len(made), len(needed)), dtype=np.int64)
        for a, p in enumerate(made):
            for b, q in enumerate(needed):
                if (p, q) not in prices:
                    us = problem.reshard_us(tensor, p, q)
                    prices[p, q] = FORBIDDEN_NS if us is None else math.floor(us * NS_PER_US)
                matrix[a, b] = prices[p, q]
        problem._edges[key] = matrix
    return matrix
