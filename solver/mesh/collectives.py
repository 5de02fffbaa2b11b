"""What a collective costs on one mesh axis, and which collectives turn one placement into
another.

Published fits (DESIGN.md section 6, from tt-metal's CCL tech reports, Wormhole, one link
per pair; N chips on the axis, B bytes each chip holds before the collective):

- all_gather, line: 4.47 + 1.91 (N - 1) us + (N - 1) B / 11.8 GB/s
- all_gather, ring: 4.47 + 2.50 N / 2 us + (N - 1) B / 20.8 GB/s
- reduce_scatter, line: 3.23 + 3.97 (N - 1) us + (N - 1) / N B / 11.1 GB/s
- all_reduce, line: 9.07 + 5.82 (N - 1) us + 2 (N - 1) / N B / 10.9 GB/s

*Model assumptions* where nothing is published: reduce_scatter and all_reduce on a ring
take N / 2 hop steps and the ring's bandwidth gain of all_gather (20.8 / 11.8); all_to_all
costs an all_gather of the same topology moving (N - 1) / N B; an axis with ``links`` links
of ``link_gbps`` moves ``links x link_gbps / 12.5`` times the fitted bandwidth, and its
per-step latency scales with ``hop_latency_us / 0.71`` (Wormhole's measured hop).

Replicated to split is no collective: each chip keeps its part with a local slice, one op
on the chip reading its part from DRAM and writing it back (``slice_us``). A dim split by
both axes is split by axis 0 first; a step on axis 0 that would split or join such a dim
is not one collective and is not offered.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from models.device import PRESETS, DeviceSpec
from models.mesh import MeshAxis, MeshSpec
from solver.mesh.placement import (
    PARTIAL,
    REPLICATED,
    Placement,
    local_bytes,
    local_shape,
    split_dim,
)

WH_LINK_GBPS = 12.5
WH_HOP_US = 0.71
RING_GAIN = 20.8 / 11.8
"""all_gather's fitted ring bandwidth over its line bandwidth, applied to the reductions."""


@dataclass(frozen=True)
class Fit:
    """``fixed_us + step_us x steps + moved bytes / gbps``; steps and the bytes moved
    depend on the collective and the topology."""

    fixed_us: float
    step_us: float
    gbps: float


LINE_FITS = {
    "all_gather": Fit(4.47, 1.91, 11.8),
    "reduce_scatter": Fit(3.23, 3.97, 11.1),
    "all_reduce": Fit(9.07, 5.82, 10.9),
}
RING_FITS = {
    "all_gather": Fit(4.47, 2.50, 20.8),
    "reduce_scatter": Fit(3.23, 3.97, 11.1 * RING_GAIN),
    "all_reduce": Fit(9.07, 5.82, 10.9 * RING_GAIN),
}


def _moved(kind: str, chips: int, nbytes: float) -> float:
    """Bytes the fit's bandwidth term charges for (B = bytes per chip before)."""
    if kind == "all_gather":
        return (chips - 1) * nbytes
    if kind == "reduce_scatter":
        return (chips - 1) / chips * nbytes
    if kind == "all_reduce":
        return 2 * (chips - 1) / chips * nbytes
    raise ValueError(kind)


def slice_us(chip: DeviceSpec, nbytes: float) -> float:
    """A local slice keeping ``nbytes`` of each chip's copy: read and written once through
    DRAM at the interleaved rate, launched like any op."""
    rate = chip.dram_bandwidth_gbps * chip.dram_interleaved_efficiency * 1e3
    return chip.dispatch_overhead_us + chip.op_latency_us + 2 * nbytes / rate


def collective_us(kind: str, axis: MeshAxis, nbytes: float) -> float:
    """Microseconds of one collective over the ``axis.size`` chips of an axis, each holding
    ``nbytes`` before it."""
    n = axis.size
    if n == 1:
        return 0.0
    base = "all_gather" if kind == "all_to_all" else kind
    moved = (n - 1) / n * nbytes if kind == "all_to_all" else _moved(base, n, nbytes)
    ring = axis.topology == "ring"
    fit = (RING_FITS if ring else LINE_FITS)[base]
    steps = n / 2 if ring else n - 1
    gbps = fit.gbps * axis.links * axis.link_gbps / WH_LINK_GBPS
    return (fit.fixed_us + fit.step_us * steps * axis.hop_latency_us / WH_HOP_US
            + moved / (gbps * 1e3))


def step_kind(src: str, dst: str) -> str | None:
    """The collective that turns one axis entry into another (None: the same; "slice":
    local; raises ValueError when impossible: nothing makes a partial sum)."""
    if src == dst:
        return None
    if dst == PARTIAL:
        raise ValueError(f"no collective turns {src} into a partial sum")
    if src == PARTIAL:
        return "all_reduce" if dst == REPLICATED else "reduce_scatter"
    if src == REPLICATED:
        return "slice"
    return "all_gather" if dst == REPLICATED else "all_to_all"


@dataclass(frozen=True)
class Step:
    axis: int
    kind: str
    before: Placement
    after: Placement
    bytes_per_chip: int
    latency_us: float


def conversion(shape: Sequence[int], dtype: str, src: Placement, dst: Placement,
               mesh: MeshSpec) -> list[Step] | None:
    """The cheapest sequence of per-axis collectives from ``src`` to ``dst`` (axes taken in
    the best order, every intermediate split even); None when there is none."""
    changed = [a for a in range(len(src)) if src[a] != dst[a]]
    if not changed:
        return []
    if any(dst[a] == PARTIAL for a in changed):
        return None
    best: list[Step] | None = None
    best_us = float("inf")
    for order in itertools.permutations(changed):
        steps = _walk(shape, dtype, src, dst, order, mesh)
        if steps is not None and (us := sum(s.latency_us for s in steps)) < best_us:
            best, best_us = steps, us
    return best


def _walk(shape: Sequence[int], dtype: str, src: Placement, dst: Placement,
          order: Sequence[int], mesh: MeshSpec) -> list[Step] | None:
    steps: list[Step] = []
    now = src
    for a in order:
        after = tuple(dst[a] if i == a else e for i, e in enumerate(now))
        if local_shape(shape, after, mesh.shape) is None or _reorders(now, after, a):
            return None
        kind = step_kind(now[a], dst[a])
        assert kind is not None
        nbytes = local_bytes(shape, dtype, now, mesh.shape)
        us = slice_us(PRESETS[mesh.chip], local_bytes(shape, dtype, after, mesh.shape)) \
            if kind == "slice" else collective_us(kind, mesh.axes[a], nbytes)
        steps.append(Step(a, kind, now, after, nbytes, us))
        now = after
    return steps


def _reorders(before: Placement, after: Placement, a: int) -> bool:
    """A dim split by both axes is split by axis 0 first (its blocks), then within each
    block by axis 1. A collective on axis 0 that splits or joins a dim axis 1 also splits
    would have to reorder every chip's data: not one collective, so not offered."""
    if a != 0 or len(before) < 2:
        return False
    dims = {split_dim(before[0]), split_dim(after[0])} - {None}
    return split_dim(before[1]) in dims
