"""Meshes of Tensix chips for the layout family: presets, the schema of a custom mesh, and
the mesh section of a plan.

A mesh is a 1-D or 2-D grid of identical chips (TT-Metalium's MeshDevice, rows x cols);
each axis has its topology (a line or a ring), Ethernet links per neighbouring pair, a
per-link bandwidth and a per-hop latency. Each chip is a single-chip ``DeviceSpec``
preset. Every constant carries its public source next to it; values marked *model
assumption* are not published and are our choice, overridable by a custom mesh.

A tensor's placement on a mesh is one entry per mesh axis, as TT-NN's ``MeshMapperConfig``
placements: ``R`` (replicated along that axis), ``S<d>`` (tensor dim ``d`` split evenly
over the chips of that axis) or ``P`` (each chip holds a partial sum that a reduction must
complete, the output of a row-parallel matmul).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from models.errors import PRESET_TAG, SPEC_TAG

Topology = Literal["linear", "ring"]
PLACEMENT_PATTERN = r"R|P|S[0-7]"
PLACEMENT_RE = re.compile(rf"^(?:{PLACEMENT_PATTERN})$")
PlacementText = Annotated[str, Field(pattern=rf"^(?:{PLACEMENT_PATTERN})$")]
MAX_AXIS = 64
"""Chips per mesh axis: a Galaxy is 8 x 4; 64 leaves room for multi-Galaxy meshes."""


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class MeshAxis(_Strict):
    """One axis of a mesh: how many chips, and how neighbouring chips are joined."""

    size: Annotated[int, Field(ge=1, le=MAX_AXIS)] = Field(description="chips along this axis")
    topology: Topology = Field(
        default="linear", description="linear: chips in a line; ring: the ends are joined too")
    links: Annotated[int, Field(ge=1, le=16)] = Field(
        default=1, description="Ethernet links between each neighbouring pair of chips")
    link_gbps: Annotated[float, Field(ge=0.1, le=10_000, allow_inf_nan=False)] = Field(
        default=12.5, description="one link's bandwidth per direction, GB/s")
    hop_latency_us: Annotated[float, Field(ge=0, le=1_000, allow_inf_nan=False)] = Field(
        default=0.71, description="latency of one chip-to-chip hop, microseconds")


class MeshSpec(_Strict):
    """A mesh of identical chips: its axes (rows first) and the chip preset each one is."""

    name: str = Field(min_length=1, max_length=100)
    chip: Literal["wormhole_n300", "wormhole_n150", "blackhole_p150"] = Field(
        description="the single-chip device preset every chip of the mesh is")
    axes: list[MeshAxis] = Field(min_length=1, max_length=2,
                                 description="one entry per mesh axis, rows first")

    @model_validator(mode="after")
    def _several_chips(self) -> MeshSpec:
        if self.chips < 2:
            raise ValueError("a mesh needs at least two chips; plan one chip with a device")
        return self

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    @property
    def chips(self) -> int:
        n = 1
        for a in self.axes:
            n *= a.size
        return n


# Wormhole Ethernet: 12.5 GB/s per link per direction (100 Gb/s, about 96% of it payload)
# and about 0.71 us per hop on a 1-D line (DESIGN.md section 6, from tt-metal's tech
# reports on CCL bandwidth, EthernetMultichip/CclDeveloperGuide). n300: two chips on one
# card; T3000 (QuietBox): 2x4 with 1-2 links per pair (we take 1: the published collective
# timings were fitted on single-link lines); Galaxy: 8x4 with 4 links per pair, both axes
# closed into rings (tt-metal's Galaxy Llama demos run ring collectives on both axes).
_WH_LINK = dict(link_gbps=12.5, hop_latency_us=0.71)
# Blackhole: 50 GB/s line rate per link (400G Ethernet) and about 0.52 us per hop
# (DESIGN.md section 6). A Blackhole QuietBox holds four p150 cards; how they are cabled
# is a *model assumption*: a 1x4 line with 2 links per pair.
_BH_LINK = dict(link_gbps=50.0, hop_latency_us=0.52)

MESH_PRESETS: dict[str, MeshSpec] = {
    "n300": MeshSpec(name="n300", chip="wormhole_n300",
                     axes=[MeshAxis(size=1, **_WH_LINK), MeshAxis(size=2, **_WH_LINK)]),
    "t3000": MeshSpec(name="t3000", chip="wormhole_n300",
                      axes=[MeshAxis(size=2, **_WH_LINK), MeshAxis(size=4, **_WH_LINK)]),
    "galaxy": MeshSpec(name="galaxy", chip="wormhole_n300",
                       axes=[MeshAxis(size=8, topology="ring", links=4, **_WH_LINK),
                             MeshAxis(size=4, topology="ring", links=4, **_WH_LINK)]),
    "p150x4": MeshSpec(name="p150x4", chip="blackhole_p150",
                       axes=[MeshAxis(size=1, **_BH_LINK),
                             MeshAxis(size=4, links=2, **_BH_LINK)]),
}


# ----------------------------------------------------------------------------- plan


class CollectiveStep(_Strict):
    """One collective on one mesh axis: it turns a tensor's placement on that axis from
    ``from`` to ``to`` for the ops that read it so."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)

    tensor: str
    kind: Literal["all_gather", "reduce_scatter", "all_reduce", "all_to_all", "slice"]
    axis: int
    from_: list[PlacementText] = Field(alias="from", description="placement per axis before")
    to: list[PlacementText] = Field(description="placement per axis after")
    bytes_per_chip: int = Field(description="bytes of the tensor each chip holds before it")
    latency_us: float
    local: str = Field(description="the tensor of the per-chip graph it produces")
    consumers: list[str] = Field(description="ops that read its result")


class ChipMemory(_Strict):
    dram_peak_bytes: int = Field(description="most DRAM one chip holds at once: its weights "
                                 "plus the activations live at the busiest step")
    dram_capacity_bytes: int | None
    weight_bytes: int = Field(description="weights (constants) each chip holds")


class MeshSection(_Strict):
    """What a mesh plan adds to a one-chip plan: the plan's ops and tensors are those of
    the per-chip graph every chip runs (``graph``), and this says how it came from the
    whole graph."""

    mesh: MeshSpec
    placements: dict[str, list[PlacementText]] = Field(
        description="every tensor of the whole graph: its placement per mesh axis")
    strategies: dict[str, list[str]] = Field(
        description="every op: its parallel strategy per mesh axis")
    collectives: list[CollectiveStep]
    collective_latency_us: float
    chip_latency_us: float = Field(description="the per-chip plan's latency (ops, copies)")
    memory: ChipMemory


def mesh_kind(value: object) -> str:
    """A mesh preset's name or a mesh spec: the tag of its member of the union."""
    return PRESET_TAG if isinstance(value, str) else SPEC_TAG


MeshField = Annotated[
    Annotated[Annotated[str, Field(min_length=1)], Tag(PRESET_TAG)]
    | Annotated[MeshSpec, Tag(SPEC_TAG)], Discriminator(mesh_kind)]
"""A mesh: a preset's name or a full mesh spec."""
