"""The collective cost model, pinned to the published fits (DESIGN.md section 6), and the
placement algebra it runs on."""

from __future__ import annotations

import pytest

from models.device import PRESETS
from models.mesh import MESH_PRESETS, MeshAxis, MeshSpec
from solver.mesh.collectives import collective_us, conversion, slice_us, step_kind
from solver.mesh.placement import local_bytes, local_shape, placements

MB = 1_000_000
LINE2 = MeshAxis(size=2)
LINE8 = MeshAxis(size=8)
RING8 = MeshAxis(size=8, topology="ring")


@pytest.mark.parametrize(("kind", "axis", "nbytes", "expected"), [
    # all_gather line: 4.47 + 1.91 (N - 1) + (N - 1) B / 11.8 GB/s
    ("all_gather", LINE2, MB, 4.47 + 1.91 + MB / 11.8e3),
    ("all_gather", LINE8, MB, 4.47 + 1.91 * 7 + 7 * MB / 11.8e3),
    # all_gather ring: 4.47 + 2.50 N / 2 + (N - 1) B / 20.8 GB/s
    ("all_gather", RING8, MB, 4.47 + 2.50 * 4 + 7 * MB / 20.8e3),
    # reduce_scatter line: 3.23 + 3.97 (N - 1) + (N - 1) / N B / 11.1 GB/s
    ("reduce_scatter", LINE8, MB, 3.23 + 3.97 * 7 + 7 / 8 * MB / 11.1e3),
    # all_reduce line: 9.07 + 5.82 (N - 1) + 2 (N - 1) / N B / 10.9 GB/s
    ("all_reduce", LINE2, MB, 9.07 + 5.82 + MB / 10.9e3),
    ("all_reduce", LINE8, 4 * MB, 9.07 + 5.82 * 7 + 2 * 7 / 8 * 4 * MB / 10.9e3),
])
def test_collectives_cost_the_published_fits(kind: str, axis: MeshAxis, nbytes: int,
                                             expected: float) -> None:
    assert collective_us(kind, axis, nbytes) == pytest.approx(expected, rel=1e-12)


def test_the_wormhole_line_fits_by_hand() -> None:
    """The same numbers written out: 2 chips, 1 MB each, one link."""
    assert collective_us("all_gather", LINE2, MB) == pytest.approx(91.1257627, rel=1e-8)
    assert collective_us("all_reduce", LINE2, MB) == pytest.approx(106.6331193, rel=1e-8)


def test_links_multiply_bandwidth_and_hops_scale_latency() -> None:
    four = MeshAxis(size=8, links=4)
    assert collective_us("all_gather", four, MB) == pytest.approx(
        4.47 + 1.91 * 7 + 7 * MB / (4 * 11.8e3))
    blackhole = MeshAxis(size=2, link_gbps=50.0, hop_latency_us=0.52)
    assert collective_us("all_gather", blackhole, MB) == pytest.approx(
        4.47 + 1.91 * 0.52 / 0.71 + MB / (11.8e3 * 4))
    assert collective_us("all_gather", MeshAxis(size=1), MB) == 0.0


def test_all_to_all_is_an_all_gather_of_the_part_that_moves() -> None:
    assert collective_us("all_to_all", LINE8, MB) == pytest.approx(
        4.47 + 1.91 * 7 + 7 / 8 * MB / 11.8e3)


def test_which_collective_joins_two_entries() -> None:
    assert step_kind("S0", "R") == "all_gather"
    assert step_kind("P", "R") == "all_reduce"
    assert step_kind("P", "S1") == "reduce_scatter"
    assert step_kind("S0", "S1") == "all_to_all"
    assert step_kind("R", "S0") == "slice"
    assert step_kind("S0", "S0") is None
    with pytest.raises(ValueError, match="partial"):
        step_kind("R", "P")


def test_a_local_slice_reads_and_writes_its_part_through_dram() -> None:
    chip = PRESETS["wormhole_n300"]
    rate = 288.0 * 0.64 * 1e3
    assert slice_us(chip, MB) == pytest.approx(2.0 + 4.0 + 2 * MB / rate)


def test_local_shards_split_evenly_or_not_at_all() -> None:
    mesh = (2, 4)
    assert local_shape([8, 64, 4096], ("S0", "S2"), mesh) == (4, 64, 1024)
    assert local_shape([8, 64, 4096], ("S2", "S2"), mesh) == (8, 64, 512)
    assert local_shape([6, 64], ("R", "S0"), mesh) is None
    assert local_shape([6, 64], ("P", "R"), mesh) == (6, 64)
    assert local_bytes([32, 64], "bf16", ("R", "S1"), mesh) == 32 * 32 * 2
    found = set(placements([4, 6], mesh))
    assert ("S0", "R") in found and ("R", "S0") in found and ("R", "S1") not in found


def test_a_two_axis_conversion_takes_the_cheaper_order() -> None:
    t3000 = MESH_PRESETS["t3000"]
    shape = [1, 32, 8192]
    steps = conversion(shape, "bf16", ("S2", "S2"), ("R", "R"), t3000)
    assert steps is not None and [s.kind for s in steps] == ["all_gather", "all_gather"]
    # gathering the small axis first moves the 4-way shards once, then the 2-way halves
    by_order = {}
    for first in (0, 1):
        mid = tuple("R" if a == first else "S2" for a in range(2))
        a = collective_us("all_gather", t3000.axes[first],
                          local_bytes(shape, "bf16", ("S2", "S2"), t3000.shape))
        b = collective_us("all_gather", t3000.axes[1 - first],
                          local_bytes(shape, "bf16", mid, t3000.shape))
        by_order[first] = a + b
    assert sum(s.latency_us for s in steps) == pytest.approx(min(by_order.values()))
    assert conversion(shape, "bf16", ("R", "R"), ("P", "R"), t3000) is None


def test_a_dim_split_by_both_axes_changes_on_the_minor_axis_only() -> None:
    """Axis 0 splits first: gathering axis 1's sub-blocks joins each chip's axis-0 block,
    gathering axis 0 first would leave every chip's data out of order."""
    t3000 = MESH_PRESETS["t3000"]
    shape = [64, 256]
    inner = conversion(shape, "bf16", ("S1", "S1"), ("S1", "R"), t3000)
    assert inner is not None and [(s.kind, s.axis) for s in inner] == [("all_gather", 1)]
    assert conversion(shape, "bf16", ("S1", "S1"), ("R", "S1"), t3000) is None
    whole = conversion(shape, "bf16", ("S1", "S1"), ("R", "R"), t3000)
    assert whole is not None and [s.axis for s in whole] == [1, 0]


def test_a_mesh_needs_two_chips_and_presets_match_their_sources() -> None:
    with pytest.raises(ValueError, match="at least two chips"):
        MeshSpec(name="one", chip="wormhole_n150", axes=[MeshAxis(size=1)])
    assert MESH_PRESETS["n300"].shape == (1, 2)
    assert MESH_PRESETS["t3000"].shape == (2, 4)
    galaxy = MESH_PRESETS["galaxy"]
    assert galaxy.shape == (8, 4) and galaxy.chips == 32
    assert all(a.links == 4 and a.link_gbps == 12.5 for a in galaxy.axes)
    assert MESH_PRESETS["p150x4"].axes[1].link_gbps == 50.0
