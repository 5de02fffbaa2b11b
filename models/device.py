"""Device descriptions for the layout family: the presets and the schema of a custom device.

Pure data, so it lives in ``models``: the graph format accepts either a preset name or
a full spec, and every plan echoes the spec it was computed for. Each preset constant
carries its public source next to it; values marked *model assumption* are not
published by the vendor and are our choice, overridable by a custom device.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Fidelity = Literal["LoFi", "HiFi2", "HiFi3", "HiFi4"]
MAX_GRID = 64
"""Cores per grid axis: every shard grid of a tensor is enumerated per op, so the analysis
grows with the grid (64 x 64: 0.06 s for a small graph; 1024 x 1024: 16 s). A Tensix chip
is 8 x 8 (Wormhole) or 10 x 13 (Blackhole)."""
Rate = Annotated[float, Field(ge=1e-3, le=1e6, allow_inf_nan=False)]
Microseconds = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
"""A bandwidth or clock: bounded so no latency the model computes leaves float range or
overflows the solvers' integer units."""


class DeviceSpec(BaseModel):
    """One accelerator chip as the cost model and the capacity rules see it."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=100)
    grid: Annotated[list[Annotated[int, Field(gt=0, le=MAX_GRID)]],
                    Field(min_length=2, max_length=2)] = Field(
        description=f"worker grid [rows, cols], each at most {MAX_GRID}")
    l1_size_bytes: Annotated[int, Field(gt=0, le=2**40)] = Field(description="L1 SRAM per core")
    l1_unreserved_base_bytes: Annotated[int, Field(ge=0, le=2**40)] = Field(
        description="first L1 byte the allocator may use (firmware and kernels sit below)")
    l1_usage_cap: Annotated[float, Field(ge=0.01, le=1)] = Field(
        default=0.95, description="share of the unreserved L1 the optimizer may fill")
    dram_bandwidth_gbps: Rate = Field(description="DRAM bandwidth, GB/s (1e9 B/s)")
    dram_banks: Annotated[int, Field(gt=0, le=1024)] = Field(
        default=1, description="DRAM banks; one core reaches at most one bank's share of "
        "the bandwidth (1: any core reaches all of it)")
    dram_interleaved_efficiency: Annotated[float, Field(ge=0.01, le=1)] = Field(
        default=1.0, description="share of the DRAM bandwidth that interleaved reads and "
        "writes reach (pages round-robin over every bank, NoC routes crossing)")
    dram_sharded_efficiency: Annotated[float, Field(ge=0.01, le=1)] | None = Field(
        default=None, description="share of the DRAM bandwidth a DRAM-sharded matmul "
        "reaches, each bank read by a core next to it (null: no DRAM-sharded matmul)")
    dram_size_bytes: Annotated[int, Field(gt=0, le=2**50)] | None = Field(
        default=None, description="DRAM per chip; a graph that could need more is rejected "
        "(null: not checked)")
    clock_ghz: Rate = Field(description="AI clock, GHz")
    l1_bytes_per_cycle: Rate = Field(
        description="bytes one core reads or writes in its own L1 per cycle")
    noc_bytes_per_cycle: Rate = Field(
        description="bytes one core moves over the NoC per cycle")
    tile_matmul_cycles: dict[Fidelity, Annotated[int, Field(gt=0, le=10**6)]] = Field(
        description="cycles of one 32x32x32 tile matmul per math fidelity")
    matmul_utilization: Annotated[float, Field(ge=0.01, le=1)] = Field(
        default=0.7, description="share of peak matmul throughput reached in practice")
    k_block_sync_cycles: Annotated[int, Field(ge=0, le=10**6)] | None = Field(
        default=None, description="cycles a matmul pays per K block (in0_block_w tiles of "
        "K) to hand it over (null: 0.1 / in0_block_w of the compute time, as before)")
    unpack_bytes_per_cycle: Rate | None = Field(
        default=None, description="operand bytes the unpackers feed the matrix unit per "
        "cycle: a tile matmul takes at least (in0 + in1 tile bytes) / this many cycles "
        "(null: no such bound)")
    dispatch_overhead_us: Microseconds = Field(
        description="host time to launch one op (and one reshard or spill), microseconds")
    op_latency_us: Microseconds = Field(
        default=0.0, description="device time every op (and every reshard or spill) takes "
        "on top of its roofline: kernel start, buffer set-up, pipeline fill, microseconds")

    @model_validator(mode="after")
    def _consistent(self) -> DeviceSpec:
        if self.l1_unreserved_base_bytes >= self.l1_size_bytes:
            raise ValueError("l1_unreserved_base_bytes must be below l1_size_bytes")
        missing = {"LoFi", "HiFi2", "HiFi3", "HiFi4"} - self.tile_matmul_cycles.keys()
        if missing:
            raise ValueError(f"tile_matmul_cycles needs every fidelity; missing {sorted(missing)}")
        return self

    @property
    def grid_rc(self) -> tuple[int, int]:
        return self.grid[0], self.grid[1]

    @property
    def cores(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def usable_l1_bytes(self) -> int:
        """Per-core L1 the plan may fill: cap x (size - unreserved base), DESIGN.md 2.2."""
        return math.floor(self.l1_usage_cap * (self.l1_size_bytes - self.l1_unreserved_base_bytes))


# Tile-matmul cycles per fidelity, the same on Wormhole and Blackhole (tt-metal
# tech_reports/matrix_engine and GEMM_FLOPS: 8x16 x 16x16 per cycle, LoFi 16 cycles per
# 32x32x32 tile, HiFi2 32, HiFi3 48, HiFi4 64). Blackhole's higher throughput comes from
# its clock and its 130 worker cores (the p150's 774 TFLOPS BLOCKFP8 = 140 cores x 1.35
# GHz x 4096 FLOP per cycle, i.e. LoFi; its 372 "16-bit" TFLOPS is about the HiFi2 rate
# (387), where Wormhole's 74 FP16 TFLOPS per n150 is quoted at HiFi4).
_TILE_MATMUL_CYCLES: dict[Fidelity, int] = {"LoFi": 16, "HiFi2": 32, "HiFi3": 48, "HiFi4": 64}
# Fitted to tt-metal's published GEMM_FLOPS matmul timings (benchmarks/calibration,
# docs/layout-format.md section 9): tuned HiFi4 matmuls reach 92.4% of the matrix unit's
# peak on Wormhole and 94.9% on Blackhole (one value, 0.92, for both), and a tile matmul
# is bounded by unpacking its two operand tiles at about 96 B/cycle on Wormhole and 128
# B/cycle on Blackhole (bf16 at HiFi2 reaches 63-75% on Wormhole, up to 90% on Blackhole).
_MATMUL_UTILIZATION = 0.92
# Each matmul K block is read (or multicast) and handed over with a semaphore round trip:
# 400 cycles, fitted with the rest, every hand-tuned row priced at the in0_block_w its run
# used (2 to 16; 300, 500 and 600 fit worse, docs/layout-format.md section 9).
_K_BLOCK_SYNC_CYCLES = 400
# tt-metal #33758: a one-tile elementwise op (addcdiv) runs 3.85 us of device kernel time;
# every op and copy pays this device latency on top of its roofline and host dispatch.
_OP_LATENCY_US = 4.0

_WORMHOLE_CHIP = dict(
    # tt-mlir system descriptors (wormhole_b0): grid = 8x8, l1_size = 1499136,
    # l1_unreserved_base = 103712; DESIGN.md section 6 gives the same size and
    # ~101,000-104,000 for the base.
    grid=[8, 8],
    l1_size_bytes=1_499_136,
    l1_unreserved_base_bytes=103_712,
    l1_usage_cap=0.95,
    # docs.tenstorrent.com/aibs/wormhole/specifications: n150 288 GB/s, AI clock 1 GHz;
    # n300 576 GB/s for two ASICs, i.e. 288 GB/s per chip.
    dram_bandwidth_gbps=288.0,
    # tt-isa-documentation WormholeB0: 12 GiB of GDDR6 per ASIC (n150: one ASIC; n300: two,
    # 12 GiB each).
    dram_size_bytes=12 * 2**30,
    # tt-metal tech_reports/Saturating_DRAM_bandwidth: 12 DRAM banks; one reader core per
    # bank is needed to saturate the 288 GB/s (so one core reaches about 24 GB/s).
    dram_banks=12,
    # tt-metal #6729: interleaved DRAM reads by every core (interleaved_to_sharded, 4096 B
    # pages) reach about 185 GB/s of the 288, 0.64.
    dram_interleaved_efficiency=0.64,
    # tt-metal tech_reports/Saturating_DRAM_bandwidth: DRAM-sharded matmuls of Llama3-70B
    # and Mixtral decode read 239-261 GB/s of 288 (0.83-0.91), 0.86.
    dram_sharded_efficiency=0.86,
    clock_ghz=1.0,
    # tt-isa-documentation WormholeB0/NoC: 256-bit (32 B) flits, one flit per cycle per link.
    noc_bytes_per_cycle=32.0,
    # Model assumption: local L1 reads by the unpackers at twice the NoC link width.
    l1_bytes_per_cycle=64.0,
    tile_matmul_cycles=_TILE_MATMUL_CYCLES,
    matmul_utilization=_MATMUL_UTILIZATION,
    k_block_sync_cycles=_K_BLOCK_SYNC_CYCLES,
    unpack_bytes_per_cycle=96.0,
    # Model assumption: host dispatch of one cached program, microseconds.
    dispatch_overhead_us=2.0,
    op_latency_us=_OP_LATENCY_US,
)

PRESETS: dict[str, DeviceSpec] = {
    "wormhole_n150": DeviceSpec(name="wormhole_n150", **_WORMHOLE_CHIP),
    # One chip of the two on an n300 card: the same 8x8 worker grid and per-chip DRAM.
    "wormhole_n300": DeviceSpec(name="wormhole_n300", **_WORMHOLE_CHIP),
    "blackhole_p150": DeviceSpec(
        name="blackhole_p150",
        # DESIGN.md section 6: 10x13 worker grid (140 Tensix cores per
        # docs.tenstorrent.com/aibs/blackhole/specifications), 1,572,864 B of L1 per core
        # (tt-isa-documentation BlackholeA0: 1536 KiB), unreserved base 98,304 B.
        grid=[10, 13],
        l1_size_bytes=1_572_864,
        l1_unreserved_base_bytes=98_304,
        l1_usage_cap=0.95,
        # docs.tenstorrent.com/aibs/blackhole/specifications: p150 512 GB/s, up to 1.35 GHz.
        dram_bandwidth_gbps=512.0,
        # tt-isa-documentation BlackholeA0: 32 GiB of GDDR6 per ASIC (28 GiB on products
        # with some fused off; the p150 has all 32).
        dram_size_bytes=32 * 2**30,
        # tt-metal tech_reports/Blackhole/BlackholeBringUpProgrammingGuide: 8 DRAM banks.
        dram_banks=8,
        # Interleaved reads on one NoC by cores not next to their bank reach 344 of 512 GB/s
        # (0.67, tt-metal tech_reports/Saturating_DRAM_bandwidth/..._Blackhole.md; a single
        # NoC is capped near 70%, tt-metal #30780), bank-adjacent readers 0.98. Between
        # those, 0.8 puts the most published matmul timings (which read on both NoCs)
        # within 0.8-1.25x, 0.9 and 1.0 about as many (docs/layout-format.md section 9). The
        # DRAM-sharded matmul with two or three readers per bank reaches 90% (tt-metal
        # #54242; one reader per bank: 55%).
        dram_interleaved_efficiency=0.8,
        dram_sharded_efficiency=0.90,
        clock_ghz=1.35,
        # tt-isa-documentation BlackholeA0/NoC: 512-bit (64 B) flits, one per cycle per link.
        noc_bytes_per_cycle=64.0,
        # Model assumption: Blackhole doubles Wormhole's local L1 bandwidth
        # ("more L1 bandwidth", tt-isa-documentation BlackholeA0/TensixTile).
        l1_bytes_per_cycle=128.0,
        tile_matmul_cycles=_TILE_MATMUL_CYCLES,
        matmul_utilization=_MATMUL_UTILIZATION,
        k_block_sync_cycles=_K_BLOCK_SYNC_CYCLES,
        unpack_bytes_per_cycle=128.0,
        dispatch_overhead_us=2.0,  # model assumption, as for Wormhole
        op_latency_us=_OP_LATENCY_US,
    ),
}
DEFAULT_DEVICE = "wormhole_n150"
