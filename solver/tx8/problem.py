"""A layout graph as the TX8 planner sees it: ops in run order, who reads what, which
ops may share a group, and the costs that do not depend on a group's configuration (DDR
ops, conversions)."""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from models.errors import InputValidationError, Issue
from models.layout import LayoutGraph, OpDecl
from models.tx8 import Tx8Spec
from solver.tx8.group import GroupShape, group_shape
from solver.tx8.ops import Op, Tensor, aligned_extent, build_ops, tensor_bytes

HOST = "host"
"""The consumer of a conversion that gives the host a graph output in compact layout."""


@dataclass
class Tx8Problem:
    graph: LayoutGraph
    device: Tx8Spec
    tensors: dict[str, Tensor]
    ops: list[Op]
    index: dict[str, int]
    producer: dict[str, int]
    readers: dict[str, list[str]]
    """per tensor, the ops that read it, in run order (a fixed order keeps solves
    repeatable)."""
    outputs: set[str]
    decls: dict[str, OpDecl]
    descendants: list[int] = field(default_factory=list)
    """per op, a bit mask of the ops reachable from it."""

    def shape_of(self, names: list[str]) -> GroupShape:
        ops = sorted((self.ops[self.index[n]] for n in names), key=lambda op: self.index[op.name])
        return group_shape(ops, self.tensors, self.readers, self.outputs)

    def neighbours(self, name: str) -> list[str]:
        """The ops that produce what ``name`` reads or read what it produces, in run order."""
        op = self.ops[self.index[name]]
        near = {self.ops[self.producer[o.tensor]].name for o in op.operands
                if o.tensor in self.producer}
        near.update(r for out in self.decls[name].outputs for r in self.readers.get(out, ()))
        return sorted(near, key=self.index.__getitem__)

    def layouts(self, names: list[str]) -> tuple[str, ...]:
        """The DDR layouts a group may use: NE ops need aligned, DDR ops compact."""
        kinds = {self.ops[self.index[n]].kind for n in names}
        if "ddr" in kinds:
            return ("compact",)
        return ("aligned",) if "ne" in kinds else ("compact", "aligned")

    def ddr_traffic(self, op: Op) -> tuple[dict[str, int], dict[str, int], float]:
        """A DDR op run by the LSU: bytes read per input, written per output, and latency
        (a reshape is a view: nothing moves; an embedding reads only the rows it gathers)."""
        if op.type == "reshape":
            return {}, {}, 0.0
        decl = self.decls[op.name]
        whole = {t: tensor_bytes(self.tensors[t], "compact", 1)
                 for t in (*decl.inputs, *decl.outputs)}
        read: dict[str, int] = {}
        if op.type == "embedding":
            indices, table = decl.inputs
            read = {indices: whole[indices], table: sum(whole[t] for t in decl.outputs)}
        else:
            for t in decl.inputs:
                read[t] = read.get(t, 0) + whole[t]
        written: dict[str, int] = {}
        for t in decl.outputs:
            written[t] = written.get(t, 0) + whole[t]
        d = self.device
        moved = sum(read.values()) + sum(written.values())
        return read, written, (d.group_launch_us + 2 * d.dma_latency_us
                               + moved / d.ddr_bytes_per_us)

    def ddr_latency_us(self, op: Op) -> float:
        return self.ddr_traffic(op)[2]

    def same_in_both_layouts(self, tensor: str) -> bool:
        """A last dim of at most one Cx block that is already aligned lies the same way in
        both layouts: such a tensor never needs a conversion."""
        width, align = self.tensors[tensor].shape[-1], self.device.channel_alignment
        return width <= align and int(aligned_extent(np.array([width]), align)[0]) == width

    def conversion(self, tensor: str, to: str) -> tuple[int, float]:
        """Bytes moved and latency of converting a tensor to the other layout."""
        t, d = self.tensors[tensor], self.device
        moved = (tensor_bytes(t, "compact", d.channel_alignment)
                 + tensor_bytes(t, "aligned", d.channel_alignment))
        return moved, d.group_launch_us + 2 * d.dma_latency_us + moved / d.ddr_bytes_per_us


def build_problem(graph: LayoutGraph, device: Tx8Spec) -> Tx8Problem:
    """The graph's ops in a run order (the given one where it is topological), readers,
    reachability; refuses a graph whose tensors exceed the chip's DDR."""
    tensors, ops = build_ops(graph)
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(ops)))
    producer: dict[str, int] = {}
    for i, decl in enumerate(graph.ops):
        for t in decl.outputs:
            producer[t] = i
    reading: dict[str, set[str]] = {}
    for i, decl in enumerate(graph.ops):
        for t in decl.inputs:
            reading.setdefault(t, set()).add(decl.name)
            if t in producer:
                dag.add_edge(producer[t], i)
    order = list(nx.lexicographical_topological_sort(dag))
    ops = [ops[i] for i in order]
    index = {op.name: i for i, op in enumerate(ops)}
    readers = {t: sorted(names, key=index.__getitem__) for t, names in reading.items()}
    producer = {t: index[graph.ops[i].name] for t, i in producer.items()}
    problem = Tx8Problem(graph, device, tensors, ops, index, producer, readers,
                         set(graph.outputs), {d.name: d for d in graph.ops})
    problem.descendants = _descendants(problem)
    _check_ddr(problem)
    return problem


def _descendants(p: Tx8Problem) -> list[int]:
    masks = [0] * len(p.ops)
    for i in reversed(range(len(p.ops))):
        for out in p.decls[p.ops[i].name].outputs:
            for reader in p.readers.get(out, ()):
                j = p.index[reader]
                masks[i] |= (1 << j) | masks[j]
    return masks


def _check_ddr(p: Tx8Problem) -> None:
    total = sum(tensor_bytes(t, "compact", 1) for t in p.tensors.values())
    if total > p.device.ddr_bytes:
        raise InputValidationError([Issue(
            ("device", "ddr_bytes"), f"the graph's tensors take {total:,} bytes; the chip's "
            f"DDR holds {p.device.ddr_bytes:,}", "tx8.ddr_capacity")], "layout graph")
