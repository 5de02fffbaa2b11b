"""A group of ops as the TX8 cost model sees it: its iteration space, the SPM buffers it
needs, and which ops read each (docs/tx8.md, "Groups" and "Buffers")."""

from __future__ import annotations

from dataclasses import dataclass

from solver.tx8.ops import Op, Tensor


@dataclass(frozen=True)
class Reader:
    op: int
    """index of the reading op in the group's run order."""
    operand: int
    """index of the operand in that op's operand list."""


@dataclass(frozen=True)
class LoadedTensor:
    name: str
    role: str  # input | weight
    readers: tuple[Reader, ...]
    element_bytes: float
    ne_read: bool
    """some NE op reads it: loaded once per reduce slice (else once per output slice) and
    whole even after a reduce-scatter."""


@dataclass(frozen=True)
class ProducedTensor:
    name: str
    producer: int
    last_reader: int
    stored: bool
    element_bytes: float


@dataclass(frozen=True)
class GroupShape:
    """Everything the cost of a group depends on but its configuration and layout."""

    ops: tuple[Op, ...]
    out_shape: tuple[int, ...]
    normalized: frozenset[int]
    loaded: tuple[LoadedTensor, ...]
    produced: tuple[ProducedTensor, ...]
    min_k: int
    """the smallest reduce dim of its NE ops (1 without NE ops or with a grouped conv)."""
    has_ne: bool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.ops)

    def signature(self) -> tuple:
        """Equal for groups that cost the same under every configuration (the template)."""
        return (tuple(op.key for op in self.ops),
                tuple((t.role, t.element_bytes, t.ne_read,
                       tuple((r.op, r.operand) for r in t.readers)) for t in self.loaded),
                tuple((t.producer, t.last_reader, t.stored, t.element_bytes)
                      for t in self.produced))


def group_shape(ops: list[Op], tensors: dict[str, Tensor], readers_of: dict[str, set[str]],
                outputs: set[str]) -> GroupShape:
    """The group of these ops (already in a valid run order)."""
    index = {op.name: i for i, op in enumerate(ops)}
    produced_here = {op.output: i for i, op in enumerate(ops)}
    loaded: dict[str, list[Reader]] = {}
    last_reader: dict[str, int] = {}
    ne_readers: dict[str, list[bool]] = {}
    for i, op in enumerate(ops):
        for j, operand in enumerate(op.operands):
            if operand.tensor in produced_here:
                last_reader[operand.tensor] = i
            else:
                loaded.setdefault(operand.tensor, []).append(Reader(i, j))
                ne_readers.setdefault(operand.tensor, []).append(operand.ne_input)
    loads = tuple(LoadedTensor(
        name, "weight" if tensors[name].kind == "constant" else "input", tuple(rs),
        tensors[name].element_bytes, any(ne_readers[name]))
        for name, rs in loaded.items())
    produced = []
    for op in ops:
        name, i = op.output, produced_here[op.output]
        stored = name in outputs or any(r not in index for r in readers_of.get(name, ()))
        produced.append(ProducedTensor(name, i, last_reader.get(name, i), stored,
                                       tensors[name].element_bytes))
    ne = [op for op in ops if op.kind == "ne"]
    return GroupShape(tuple(ops), ops[0].out_shape,
                      frozenset().union(*(op.normalized for op in ops)), loads, tuple(produced),
                      min((op.reduce_k for op in ne), default=1), bool(ne))
