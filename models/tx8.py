"""The TX8 target of the layout family: the chip's description and the TX8 section of a plan.

A TX8 chip (Tsingmicro; ``../shared/seeds/tx8-backend.md``) is a 4x4 mesh of tiles; each
tile computes out of its own scratchpad (SPM) and moves data between the chip's DDR and its
SPM with its LSU. A plan partitions the graph's ops into groups whose intermediates never
leave SPM, and gives each group a sharding over the tiles, a temporal split, double
buffering or not, and SPM offsets. Every constant carries its source: *seed* for the seed
notes, *model assumption* for a value no public source gives (SPM size, NoC bandwidth and
clock are not published), overridable by a custom spec (``"target": "tx8"``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from models.device import PRESETS, DeviceSpec
from models.errors import PRESET_TAG, SPEC_TAG, TX8_TAG

DdrLayout = Literal["compact", "aligned"]
"""How a tensor lies in DDR: ``compact`` (the seed's Tensor/NTensor, dense) or ``aligned``
(Cx/NCx: the last dim padded to the NPU's channel alignment, what the neural engine reads)."""
Rate = Annotated[float, Field(ge=1e-3, le=1e7, allow_inf_nan=False)]
Micros = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)


def device_kind(value: object) -> str:
    """Which form of a device a value is (a preset's name, a Tensix spec, a TX8 spec): the
    tag of its member of the union, so a faulty one is reported against that form only."""
    if isinstance(value, Tx8Spec) or isinstance(value, dict) and value.get("target") == "tx8":
        return TX8_TAG
    return PRESET_TAG if isinstance(value, str) else SPEC_TAG


class Tx8Spec(_Strict):
    """One TX8 chip as the TX8 cost model and the SPM rules see it."""

    target: Literal["tx8"] = Field(description="marks a TX8 spec (a Tensix spec has none)")
    name: str = Field(min_length=1, max_length=100)
    tiles: Annotated[list[Annotated[int, Field(ge=1, le=16)]],
                     Field(min_length=2, max_length=2)] = Field(
        description="tile mesh [rows, cols]; a group shards its work over all of them")
    pe_array: Annotated[list[Annotated[int, Field(ge=1, le=1024)]],
                        Field(min_length=3, max_length=3)] = Field(
        description="the PE array's matmul block per step [M, K, N]: a tile's matmul "
        "dims are padded up to multiples of it")
    peak_tflops: Rate = Field(description="peak bf16 matmul TFLOPS of the whole chip")
    vector_elements_per_cycle: Rate = Field(
        description="elements the CGRA vector unit of one tile processes per cycle")
    clock_ghz: Rate = Field(description="tile clock, GHz (vector unit and fixed costs)")
    spm_bytes: Annotated[int, Field(ge=4096, le=2**34)] = Field(
        description="scratchpad (SPM) bytes per tile")
    spm_alignment_bytes: Annotated[int, Field(ge=1, le=65536)] = Field(
        description="every SPM buffer starts at a multiple of this")
    channel_alignment: Annotated[int, Field(ge=8, le=1024)] = Field(
        description="channels of one Cx block: an aligned tensor's last dim lies as whole "
        "blocks and a rest padded to the next power of two from 4 (a whole block when over "
        "half of one)")
    ddr_gbps: Rate = Field(description="DDR bandwidth of the chip, GB/s, shared by all tiles")
    ddr_bytes: Annotated[int, Field(ge=1, le=2**50)] = Field(description="DDR capacity")
    noc_link_gbps: Rate = Field(description="one NoC link's bandwidth between neighbouring "
                                "tiles, GB/s (cross-tile reductions)")
    noc_hop_us: Micros = Field(description="latency of one NoC hop, microseconds")
    dma_latency_us: Micros = Field(description="set-up time of one DMA (load or store) of "
                                   "one slice, microseconds")
    group_launch_us: Micros = Field(description="fixed time of one group: instruction issue "
                                    "and the barrier that ends it, microseconds")

    @model_validator(mode="after")
    def _alignment_fits(self) -> Tx8Spec:
        if self.spm_alignment_bytes > self.spm_bytes:
            raise ValueError("spm_alignment_bytes must be at most spm_bytes")
        return self

    @property
    def tile_count(self) -> int:
        return self.tiles[0] * self.tiles[1]

    @property
    def tile_flops_per_us(self) -> float:
        return self.peak_tflops * 1e6 / self.tile_count

    @property
    def ddr_bytes_per_us(self) -> float:
        return self.ddr_gbps * 1e3

    @property
    def noc_bytes_per_us(self) -> float:
        return self.noc_link_gbps * 1e3

    @property
    def vector_elements_per_us(self) -> float:
        return self.vector_elements_per_cycle * self.clock_ghz * 1e3


TX8_PRESETS: dict[str, Tx8Spec] = {
    "tx8": Tx8Spec(
        target="tx8",
        name="tx8",
        # Seed ("TX8 Hardware Overview"): 4x4 = 16 tiles per chip joined by a mesh NoC.
        tiles=[4, 4],
        # Seed ("Neural Engine"): the PE array computes an 8x16x8 matrix product per step.
        pe_array=[8, 16, 8],
        # Seed (table of the TX8 card): 128 TFLOPS BF16, DDR 200 GB/s, 64 GB.
        peak_tflops=128.0,
        ddr_gbps=200.0,
        ddr_bytes=64 * 10**9,
        # Seed ("CGRA Tensor"): the VuV instructions work on 64-element unit vectors; model
        # assumption: one such vector per cycle.
        vector_elements_per_cycle=64.0,
        # Model assumption: no public clock; 1 GHz.
        clock_ghz=1.0,
        # Model assumption: no public SPM size per tile; 3 MiB.
        spm_bytes=3 * 2**20,
        # Seed ("Tensor Layout"): batch start addresses aligned to 2048 bits = 256 bytes.
        spm_alignment_bytes=256,
        # Seed ("Tensor Layout"): bf16 channels wider than 32 are laid out in 64-element
        # Cx blocks.
        channel_alignment=64,
        # Model assumption: no public NoC figures; 128 GB/s per link, 0.05 us per hop.
        noc_link_gbps=128.0,
        noc_hop_us=0.05,
        # Model assumption: 0.5 us to set up one DMA, 2 us per group (issue and barrier).
        dma_latency_us=0.5,
        group_launch_us=2.0,
    ),
}


DEVICE_PRESETS: tuple[str, ...] = tuple(sorted([*PRESETS, *TX8_PRESETS]))
"""Every device preset a graph or a request may name: the Tensix chips and the TX8."""


# ----------------------------------------------------------------------------- plan


class Tx8Buffer(_Strict):
    """One SPM buffer of a group on every tile, at the same offset on each."""

    tensor: str
    role: Literal["input", "weight", "output", "intermediate", "psum"]
    bytes: int = Field(description="bytes of one copy")
    copies: Literal[1, 2] = Field(description="2 when double-buffered")
    offset: int = Field(description="first SPM byte of the first copy")
    start: int = Field(description="first op (index in the group) that needs it")
    end: int = Field(description="last op (index in the group) that needs it")


class Tx8Group(_Strict):
    """A group: ops whose intermediates stay in SPM, run over all tiles slice by slice."""

    name: str
    ops: list[str] = Field(min_length=1, description="in execution order")
    kind: Literal["spm", "ddr"] = Field(
        description="spm: loads, computes in SPM, stores; ddr: a data-movement op the LSU "
        "runs DDR to DDR (reshape, permute, slice, concat, embedding, opaque)")
    layout: DdrLayout = Field(description="the DDR layout it loads its activations in and "
                              "stores its outputs in")
    sharding: list[int] = Field(description="tiles per dim of the output (product with "
                                "reduce_sharding = all tiles, or all 1 for one tile)")
    reduce_sharding: int = Field(default=1, description="tiles the reduce dim of the "
                                 "group's matmul or conv is split over (a NoC reduction)")
    split: list[int] = Field(description="slices per dim of each tile's output, in time")
    reduce_split: int = Field(default=1, description="slices of the reduce dim in time "
                              "(partial sums accumulate in SPM)")
    double_buffer: bool
    resident: list[str] = Field(default_factory=list,
                                description="weights loaded once and kept for every slice")
    loads: dict[str, int] = Field(description="DDR bytes each input tensor brings in")
    stores: dict[str, int] = Field(description="DDR bytes each output tensor writes")
    buffers: list[Tx8Buffer]
    spm_peak_bytes: int
    compute_us: float = Field(description="one slice on the PE array or vector unit")
    load_us: float = Field(description="one slice's loads")
    store_us: float = Field(description="one slice's stores")
    reduce_us: float = Field(description="one slice's cross-tile reduction")
    latency_us: float
    template: str | None = Field(default=None,
                                 description="the earlier identical group it reuses")


class Tx8Conversion(_Strict):
    """A DDR-to-DDR relayout of a tensor (the seed's channelNorm), shared by its readers."""

    tensor: str
    from_: DdrLayout = Field(alias="from")
    to: DdrLayout
    consumers: list[str] = Field(min_length=1, description="groups that read the copy")
    bytes: int
    latency_us: float


class Tx8Section(_Strict):
    """What a TX8 plan says: its groups in run order, conversions, and where time went."""

    groups: list[Tx8Group]
    conversions: list[Tx8Conversion]
    tensor_layouts: dict[str, DdrLayout] = Field(
        description="every activation: the layout its producer stores it in (inputs: as "
        "the host sends it, compact)")
    group_latency_us: float
    conversion_latency_us: float
    spm_peak_bytes: int = Field(description="the largest group's SPM use per tile")


DeviceField = Annotated[
    Annotated[Annotated[str, Field(min_length=1)], Tag(PRESET_TAG)]
    | Annotated[DeviceSpec, Tag(SPEC_TAG)] | Annotated[Tx8Spec, Tag(TX8_TAG)],
    Discriminator(device_kind)]
"""A device: a preset's name (a Tensix chip or ``tx8``), a Tensix spec or a TX8 spec."""
