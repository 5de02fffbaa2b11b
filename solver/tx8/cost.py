"""The TX8 cost of a group under many configurations at once (docs/tx8.md, "The cost
model"): slice extents, SPM buffers, per-slice times and the pipelined latency, computed
with numpy over a table of configurations (one row each), so a solver can price every
sharding x split x buffering of a group in one pass."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.tx8 import Tx8Spec
from solver.tx8.group import GroupShape, LoadedTensor
from solver.tx8.ops import aligned_extent, ceil_div, pad

PSUM_BYTES = 4.0


@dataclass
class Configs:
    """Configurations of one group, one row each: sharding, reduce sharding, split,
    reduce split, double buffering, weights resident."""

    sharding: np.ndarray  # (n, rank)
    reduce_sharding: np.ndarray  # (n,)
    split: np.ndarray  # (n, rank)
    reduce_split: np.ndarray  # (n,)
    double_buffer: np.ndarray  # (n,) bool
    resident: np.ndarray  # (n,) bool

    def __len__(self) -> int:
        return len(self.reduce_sharding)

    def row(self, i: int) -> Configs:
        return Configs(self.sharding[i:i + 1], self.reduce_sharding[i:i + 1],
                       self.split[i:i + 1], self.reduce_split[i:i + 1],
                       self.double_buffer[i:i + 1], self.resident[i:i + 1])


@dataclass
class BufferSizes:
    """One SPM buffer of the group per configuration."""

    tensor: str
    role: str
    bytes: np.ndarray
    copies: np.ndarray
    start: np.ndarray
    end: np.ndarray


@dataclass
class Costs:
    """Per configuration: buffers, SPM need, per-slice times, latency, DDR traffic."""

    buffers: list[BufferSizes]
    spm_bytes: np.ndarray
    slices: np.ndarray
    compute_us: np.ndarray
    reduce_us: np.ndarray
    load_us: np.ndarray
    store_us: np.ndarray
    latency_us: np.ndarray
    loads: dict[str, np.ndarray]
    stores: dict[str, np.ndarray]


@dataclass
class _Slices:
    """The slice geometry of every configuration row of one group in one layout."""

    group: GroupShape
    layout: str
    device: Tx8Spec
    c: Configs

    def __post_init__(self) -> None:
        self.rs, self.rp = self.c.reduce_sharding, self.c.reduce_split
        self.whole = ceil_div(np.array(self.group.out_shape, dtype=np.int64), self.c.sharding)
        """each tile's part of the output: a resident weight's extents (no split)."""
        self.e = ceil_div(self.whole, self.c.split)
        self.n = len(self.c)
        self.tiles = np.where((self.c.sharding.prod(axis=1) == 1) & (self.rs == 1), 1,
                              self.device.tile_count)
        self.last = len(self.group.ops) - 1
        self.db_copies = np.where(self.c.double_buffer, 2, 1)

    def k(self, op_index: int, resident: bool = False) -> np.ndarray:
        """An NE op's reduce extent per slice (resident: over all reduce slices)."""
        split_k = ceil_div(self.group.ops[op_index].reduce_k, self.rs)
        return split_k if resident else ceil_div(split_k, self.rp)

    def elements(self, extents: list[np.ndarray], activation: bool, ne_read: bool
                 ) -> np.ndarray:
        """Elements of a slice: an activation's last dim padded in the aligned layout, and
        ``1/rs`` of it unless an NE op reads it."""
        ext = list(extents)
        if self.layout == "aligned" and activation:
            ext[-1] = aligned_extent(ext[-1], self.device.channel_alignment)
        n = np.prod(np.stack(ext, axis=1), axis=1)
        return n if ne_read else ceil_div(n, self.rs)

    def moved_us(self, size: np.ndarray) -> np.ndarray:
        """One DMA of ``size`` bytes on every working tile, sharing the DDR."""
        return self.device.dma_latency_us + self.tiles * size / self.device.ddr_bytes_per_us


def costs(group: GroupShape, layout: str, device: Tx8Spec, c: Configs) -> Costs:
    """Every quantity of docs/tx8.md for each configuration row."""
    sl = _Slices(group, layout, device, c)
    buffers: list[BufferSizes] = []
    load_us, prologue, loads = _loads(sl, buffers)
    store_us, stores = _stores(sl, buffers)
    compute, reduce = _compute(sl, buffers)
    spm = np.zeros(sl.n, dtype=np.int64)
    for b in buffers:
        spm += b.copies * pad(b.bytes, device.spm_alignment_bytes)
    slices = c.split.prod(axis=1) * sl.rp
    stage = load_us + compute + reduce + store_us
    steady = np.maximum(compute + reduce, load_us + store_us)
    latency = device.group_launch_us + prologue + np.where(
        c.double_buffer, stage + (slices - 1) * steady, slices * stage)
    return Costs(buffers, spm, slices, compute, reduce, load_us, store_us, latency, loads,
                 stores)


def _slice_bytes(sl: _Slices, t: LoadedTensor, resident: bool) -> np.ndarray:
    """The largest slice any reader of ``t`` takes (resident: over all slices)."""
    extents = sl.whole if resident else sl.e
    sizes = [sl.elements(o.extents(extents, sl.k(r.op, resident)), t.role == "input",
                         o.ne_input)
             for r in t.readers for o in (sl.group.ops[r.op].operands[r.operand],)]
    return np.ceil(np.max(np.stack(sizes), axis=0) * t.element_bytes).astype(np.int64)


def _loads(sl: _Slices, buffers: list[BufferSizes]
           ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Input and weight buffers; per-slice load time, the resident weights' prologue, and
    each tensor's DDR bytes over the group."""
    load_us, prologue = np.zeros(sl.n), np.zeros(sl.n)
    loads: dict[str, np.ndarray] = {}
    for t in sl.group.loaded:
        resident = sl.c.resident & (t.role == "weight")
        size = np.where(resident, _slice_bytes(sl, t, True), _slice_bytes(sl, t, False))
        end = max(r.op for r in t.readers)
        buffers.append(BufferSizes(t.name, t.role, size, np.where(resident, 1, sl.db_copies),
                                   np.zeros(sl.n, np.int64),
                                   np.where(sl.c.double_buffer, sl.last, end)))
        per_slice = np.where(t.ne_read, 1.0, 1.0 / sl.rp)  # vector operands: per output slice
        load_us += np.where(resident, 0.0, per_slice * sl.moved_us(size))
        prologue += np.where(resident, sl.moved_us(size), 0.0)
        times = sl.c.split.prod(axis=1) * np.where(t.ne_read, sl.rp, 1)
        loads[t.name] = sl.tiles * size * np.where(resident, 1, times)
    return load_us, prologue, loads


def _stores(sl: _Slices, buffers: list[BufferSizes]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Output and intermediate buffers; per-slice store time and each stored tensor's DDR
    bytes (one store per output slice)."""
    store_us = np.zeros(sl.n)
    stores: dict[str, np.ndarray] = {}
    for t in sl.group.produced:
        size = np.ceil(sl.elements(list(sl.e.T), True, False) * t.element_bytes).astype(np.int64)
        if t.stored:
            buffers.append(BufferSizes(t.name, "output", size, sl.db_copies,
                                       np.where(sl.c.double_buffer, 0, t.producer),
                                       np.full(sl.n, sl.last)))
            store_us += sl.moved_us(size) / sl.rp
            stores[t.name] = sl.tiles * size * sl.c.split.prod(axis=1)
        else:
            buffers.append(BufferSizes(t.name, "intermediate", size, np.ones(sl.n, np.int64),
                                       np.full(sl.n, t.producer), np.full(sl.n, t.last_reader)))
    return store_us, stores


def _compute(sl: _Slices, buffers: list[BufferSizes]) -> tuple[np.ndarray, np.ndarray]:
    """Per-slice compute (NE ops every slice, vector ops once per output slice) and the
    reduce-scatter of each NE op's partial sums (once per output slice), with the psums."""
    d = sl.device
    pe = (d.pe_array[0], d.pe_array[1], d.pe_array[2])
    ne, vector, reduce = np.zeros(sl.n), np.zeros(sl.n), np.zeros(sl.n)
    slice_elements = np.prod(sl.e, axis=1)
    for i, op in enumerate(sl.group.ops):
        if op.kind == "ne":
            assert op.macs is not None
            ne += 2.0 * op.macs(sl.e, sl.k(i), pe) / d.tile_flops_per_us
            reduce += np.where(sl.rs > 1, (sl.rs - 1) * (
                PSUM_BYTES * slice_elements / sl.rs / d.noc_bytes_per_us + d.noc_hop_us), 0.0)
            psum = np.where((sl.rs > 1) | (sl.rp > 1), slice_elements * int(PSUM_BYTES), 0)
            buffers.append(BufferSizes(op.output, "psum", psum, np.ones(sl.n, np.int64),
                                       np.full(sl.n, i), np.full(sl.n, i)))
        else:
            assert op.vector_elements is not None
            vector += (ceil_div(op.vector_elements(sl.e), sl.rs) * op.window * op.passes
                       / d.vector_elements_per_us)
    return ne + vector / sl.rp, reduce / sl.rp


def single(sharding: tuple[int, ...], reduce_sharding: int, split: tuple[int, ...],
           reduce_split: int, double_buffer: bool, resident: bool) -> Configs:
    return Configs(np.array([sharding], dtype=np.int64), np.array([reduce_sharding]),
                   np.array([split], dtype=np.int64), np.array([reduce_split]),
                   np.array([double_buffer]), np.array([resident]))
