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

    def take(self, mask: np.ndarray) -> Configs:
        return Configs(self.sharding[mask], self.reduce_sharding[mask], self.split[mask],
                       self.reduce_split[mask], self.double_buffer[mask], self.resident[mask])


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
    prologue_us: np.ndarray
    latency_us: np.ndarray
    loads: dict[str, np.ndarray]
    stores: dict[str, np.ndarray]


def costs(group: GroupShape, layout: str, device: Tx8Spec, c: Configs) -> Costs:
    """Every quantity of docs/tx8.md for each configuration row."""
    out = np.array(group.out_shape, dtype=np.int64)
    rs, rp = c.reduce_sharding, c.reduce_split
    per_tile = ceil_div(out, c.sharding)
    e = ceil_div(per_tile, c.split)
    whole = per_tile  # a resident weight's extents: no temporal split
    tiles = np.where((c.sharding.prod(axis=1) == 1) & (rs == 1), 1, device.tile_count)
    aligned = layout == "aligned"
    last_index = len(group.ops) - 1
    db_copies = np.where(c.double_buffer, 2, 1)
    nslices = c.split.prod(axis=1) * rp

    def k_of(op_index: int, resident: bool = False) -> np.ndarray:
        k_total = group.ops[op_index].reduce_k
        split_k = ceil_div(k_total, rs)
        return split_k if resident else ceil_div(split_k, rp)

    def elements(extents: list[np.ndarray], activation: bool, shared: bool) -> np.ndarray:
        ext = list(extents)
        if aligned and activation:
            ext[-1] = aligned_extent(ext[-1], device.channel_alignment)
        n = np.prod(np.stack(ext, axis=1), axis=1)
        return n if shared else ceil_div(n, rs)

    buffers: list[BufferSizes] = []
    load_us = np.zeros(len(c))
    prologue = np.zeros(len(c))
    loads: dict[str, np.ndarray] = {}
    def slice_bytes(t: LoadedTensor, ext_rows: np.ndarray, resident: bool) -> np.ndarray:
        """The largest slice any reader takes of ``t``."""
        operands = [(r.op, group.ops[r.op].operands[r.operand]) for r in t.readers]
        sizes = [elements(o.extents(ext_rows, k_of(i, resident)), t.role == "input", o.ne_input)
                 for i, o in operands]
        return np.ceil(np.max(np.stack(sizes), axis=0) * t.element_bytes).astype(np.int64)

    for t in group.loaded:
        per_slice = slice_bytes(t, e, False)
        end = max(r.op for r in t.readers)
        weight_resident = c.resident & (t.role == "weight")
        size = np.where(weight_resident, slice_bytes(t, whole, True), per_slice)
        copies = np.where(weight_resident, 1, db_copies)
        buffers.append(BufferSizes(t.name, t.role, size, copies, np.zeros(len(c), np.int64),
                                   np.where(c.double_buffer, last_index, end)))
        w = np.where(t.ne_read, 1.0, 1.0 / rp)
        moved = device.dma_latency_us + tiles * size / device.ddr_bytes_per_us
        load_us += np.where(weight_resident, 0.0, w * moved)
        prologue += np.where(weight_resident, moved, 0.0)
        per_group = c.split.prod(axis=1) * np.where(t.ne_read, rp, 1)
        loads[t.name] = np.where(weight_resident, tiles * size, tiles * size * per_group)
    store_us = np.zeros(len(c))
    stores: dict[str, np.ndarray] = {}
    for t in group.produced:
        size = np.ceil(elements(list(e.T), True, False) * t.element_bytes).astype(np.int64)
        if t.stored:
            buffers.append(BufferSizes(t.name, "output", size, db_copies,
                                       np.where(c.double_buffer, 0, t.producer),
                                       np.full(len(c), last_index)))
            store_us += (device.dma_latency_us + tiles * size / device.ddr_bytes_per_us) / rp
            stores[t.name] = tiles * size * c.split.prod(axis=1)
        else:
            buffers.append(BufferSizes(t.name, "intermediate", size, np.ones(len(c), np.int64),
                                       np.full(len(c), t.producer),
                                       np.full(len(c), t.last_reader)))
    compute = np.zeros(len(c))
    reduce = np.zeros(len(c))
    pe = (device.pe_array[0], device.pe_array[1], device.pe_array[2])
    slice_elements = np.prod(e, axis=1)
    for i, op in enumerate(group.ops):
        if op.kind == "ne":
            assert op.macs is not None
            compute += 2.0 * op.macs(e, k_of(i), pe) / device.tile_flops_per_us
            reduce += np.where(rs > 1, (rs - 1) * (PSUM_BYTES * slice_elements / rs
                                                   / device.noc_bytes_per_us
                                                   + device.noc_hop_us), 0.0)
            needs_psum = (rs > 1) | (rp > 1)
            buffers.append(BufferSizes(
                op.output, "psum", np.where(needs_psum, slice_elements * int(PSUM_BYTES), 0),
                np.ones(len(c), np.int64), np.full(len(c), i), np.full(len(c), i)))
        else:
            assert op.vector_elements is not None
            compute += (ceil_div(op.vector_elements(e), rs) * op.passes
                        / device.vector_elements_per_us)
    spm = np.zeros(len(c), dtype=np.int64)
    for b in buffers:
        spm += b.copies * pad(b.bytes, device.spm_alignment_bytes)
    stage = load_us + compute + reduce + store_us
    steady = np.maximum(compute + reduce, load_us + store_us)
    latency = device.group_launch_us + prologue + np.where(
        c.double_buffer, stage + (nslices - 1) * steady, nslices * stage)
    return Costs(buffers, spm, nslices, compute, reduce, load_us, store_us, prologue, latency,
                 loads, stores)


def single(sharding: tuple[int, ...], reduce_sharding: int, split: tuple[int, ...],
           reduce_split: int, double_buffer: bool, resident: bool) -> Configs:
    return Configs(np.array([sharding], dtype=np.int64), np.array([reduce_sharding]),
                   np.array([split], dtype=np.int64), np.array([reduce_split]),
                   np.array([double_buffer]), np.array([resident]))
