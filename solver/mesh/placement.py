"""Placements of a tensor on a mesh, and the shard each chip holds.

A placement is a tuple with one entry per mesh axis: ``"R"`` replicated along that axis,
``"S<d>"`` tensor dim ``d`` split evenly over its chips, ``"P"`` a partial sum along it.
A dim may be split by both axes (its chips then hold ``size / (rows x cols)``); a split
must be even, as TT-NN's ``ShardTensorToMesh`` makes it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from solver.layout.memory import Geometry

Placement = tuple[str, ...]
REPLICATED = "R"
PARTIAL = "P"


def shard(dim: int) -> str:
    return f"S{dim}"


def split_dim(entry: str) -> int | None:
    """The tensor dim an entry splits; None for R and P."""
    return int(entry[1:]) if entry.startswith("S") else None


def local_shape(shape: Sequence[int], placement: Placement,
                mesh_shape: Sequence[int]) -> tuple[int, ...] | None:
    """The shard one chip holds; None when a split is uneven or names no dim of ``shape``."""
    local = list(shape)
    for entry, chips in zip(placement, mesh_shape, strict=True):
        d = split_dim(entry)
        if d is None or chips == 1:
            continue
        if d >= len(local) or local[d] % chips:
            return None
        local[d] //= chips
    return tuple(local)


def local_bytes(shape: Sequence[int], dtype: str, placement: Placement,
                mesh_shape: Sequence[int]) -> int:
    """Bytes of one chip's shard as tiles (TT-NN stores activations and weights tiled)."""
    local = local_shape(shape, placement, mesh_shape)
    assert local is not None, f"{placement} does not split {list(shape)} evenly"
    return Geometry.of(local, dtype).total_bytes


def axis_entries(shape: Sequence[int], chips: int, partial: bool) -> list[str]:
    """Every entry one axis of ``chips`` chips may give a tensor of ``shape``."""
    if chips == 1:
        return [REPLICATED]
    entries = [REPLICATED] + [shard(d) for d, size in enumerate(shape) if size % chips == 0]
    return entries + [PARTIAL] if partial else entries


def placements(shape: Sequence[int], mesh_shape: Sequence[int],
               partial: bool = False) -> Iterator[Placement]:
    """Every placement of ``shape`` whose splits are even (with ``P`` when ``partial``)."""
    per_axis = [axis_entries(shape, chips, partial) for chips in mesh_shape]
    for combo in itertools.product(*per_axis):
        if local_shape(shape, combo, mesh_shape) is not None:
            yield combo
