"""From a mesh plan's decisions to the graph each chip runs, and the collectives between.

Every chip of a mesh runs the same program on its shards (SPMD), so one per-chip graph
describes them all: each tensor with its local shard shape; where an op needs an operand
placed otherwise than it was made, a chain of collectives (``collectives.conversion``)
makes a new tensor, which the per-chip graph takes as a DRAM input (collectives read and
write DRAM), shared by every op that needs the same placement. That graph then goes
through the one-chip layout model like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.layout import GRAPH_FORMAT, LayoutGraph, parse_graph
from models.mesh import ChipMemory, CollectiveStep
from solver.layout.dram_capacity import dram_need
from solver.layout.problem import LayoutProblem
from solver.mesh.placement import Placement, local_shape
from solver.mesh.problem import MeshProblem

HOST = "(host)"
"""The consumer named for the reduction of a graph output left partial."""


@dataclass(frozen=True)
class Decisions:
    """A mesh plan's choices: a placement per source (input or weight), a strategy index
    per op."""

    sources: dict[str, Placement]
    strategies: dict[str, int]

    def as_choice(self, problem: MeshProblem) -> dict[str, int]:
        choice = {name: problem.options[name].index(p) for name, p in self.sources.items()}
        return {**choice, **self.strategies}


def collective_name(tensor: str, p: Placement) -> str:
    return f"{tensor}@{','.join(p)}"


def placements_of(problem: MeshProblem, d: Decisions) -> dict[str, Placement]:
    """Every tensor's placement: a source's as chosen, an op output's by its strategy."""
    found = dict(d.sources)
    for name, op in problem.ops.items():
        s = problem.strategies[name][d.strategies[name]]
        for t in op.outputs:
            found[t] = s.output
    return found


def collectives_of(problem: MeshProblem, d: Decisions) -> list[CollectiveStep]:
    """The collectives the decisions need, in op order, one chain per (tensor, placement
    needed), then those handing graph outputs to the host (partial sums reduced, or as
    ``mesh_outputs`` asks)."""
    where = placements_of(problem, d)
    chains: dict[tuple[str, Placement], list[CollectiveStep]] = {}

    def need(t: str, p: Placement, consumer: str) -> None:
        if where[t] == p:
            return
        chain = chains.get((t, p))
        if chain is None:
            chains[t, p] = _chain(problem, t, where[t], p, [consumer])
        else:
            chain[-1] = _with_consumer(chain[-1], consumer)

    for name, op in problem.ops.items():
        s = problem.strategies[name][d.strategies[name]]
        for t, p in zip(op.inputs, s.inputs, strict=True):
            need(t, p, name)
    for t in problem.graph.outputs:
        need(t, problem.handed_over(t, where[t]), HOST)
    return [step for chain in chains.values() for step in chain]


def _with_consumer(step: CollectiveStep, op: str) -> CollectiveStep:
    if op in step.consumers:
        return step
    return step.model_copy(update={"consumers": [*step.consumers, op]})


def _chain(problem: MeshProblem, tensor: str, src: Placement, dst: Placement,
           consumers: list[str]) -> list[CollectiveStep]:
    found = problem.steps(tensor, src, dst)
    if found is None:
        raise ValueError(f"no collective turns {tensor} {src} into {dst}")
    out = collective_name(tensor, dst)
    return [CollectiveStep(tensor=tensor, kind=s.kind, axis=s.axis, from_=list(s.before),
                           to=list(s.after), bytes_per_chip=s.bytes_per_chip,
                           latency_us=s.latency_us, local=out,
                           consumers=consumers if k == len(found) - 1 else [])
            for k, s in enumerate(found)]


def local_graph(problem: MeshProblem, d: Decisions) -> LayoutGraph:
    """The graph every chip runs under the decisions (validated like any graph)."""
    where = placements_of(problem, d)
    mesh_shape = problem.mesh.shape
    tensors: dict[str, dict] = {}  # type: ignore[type-arg]

    def declare(name: str, of: str, p: Placement, kind: str) -> None:
        shape = local_shape(problem.shapes[of], p, mesh_shape)
        assert shape is not None
        tensors.setdefault(name, {"name": name, "shape": list(shape),
                                  "dtype": problem.dtypes[of], "kind": kind})

    ops = []
    read: set[str] = set()
    for name, op in problem.ops.items():
        s = problem.strategies[name][d.strategies[name]]
        inputs = []
        for t, need in zip(op.inputs, s.inputs, strict=True):
            if where[t] == need:
                inputs.append(t)
                read.add(t)
            else:
                local = collective_name(t, need)  # a weight resharded is still a weight
                declare(local, t, need, "constant" if problem.kinds[t] == "constant"
                        else "input")
                inputs.append(local)
        for t in op.outputs:
            declare(t, t, s.output, "activation")
        ops.append({"name": name, "type": op.type, "inputs": inputs,
                    "outputs": list(op.outputs), "attrs": dict(op.attrs)})
    for t in problem.sources:
        if t in read:
            declare(t, t, where[t], problem.kinds[t])
    produced = {t for op in problem.ops.values() for t in op.outputs}
    outputs = list(problem.graph.outputs) + sorted(t for t in produced - read
                                                   if t not in problem.graph.outputs)
    order = {t.name: i for i, t in enumerate(problem.graph.tensors)}
    declared = sorted(tensors.values(), key=lambda t: order.get(t["name"], len(order)))
    return parse_graph({"format": GRAPH_FORMAT, "version": 1,
                        "name": f"{problem.graph.name}@{problem.mesh.name}",
                        "device": problem.chip.name, "tensors": declared, "ops": ops,
                        "outputs": outputs})


def chip_memory(chip: LayoutProblem) -> ChipMemory:
    """What one chip's DRAM holds: its weights throughout, and at the fullest step of its
    graph every input, weight and live activation (``dram_capacity.dram_need``)."""
    return ChipMemory(dram_peak_bytes=max(dram_need(chip), default=0),
                      dram_capacity_bytes=chip.device.dram_size_bytes,
                      weight_bytes=sum(t.stored_bytes for t in chip.tensors.values()
                                       if t.kind == "constant"))
