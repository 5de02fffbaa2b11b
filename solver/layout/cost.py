"""The analytical roofline of DESIGN.md 2.2, in microseconds.

An op costs ``max(compute, memory) + fixed`` (``fixed_us``: host dispatch and the
device's op latency). Memory time adds DRAM bytes over the DRAM bandwidth the op's cores
reach and, per core, L1 bytes over the local L1 bandwidth and NoC bytes over the NoC
bandwidth. The memory time of an operand depends only on the
operand's own memory configuration and the op configuration's grid, which is what lets
the CP-SAT model write an op's latency as a per-configuration term plus one term per
operand (see ``Candidate``).
"""

from __future__ import annotations

from models.device import DeviceSpec
from solver.layout.memory import Geometry, MemConfig, cores_of

BYTES_PER_US_PER_GBPS = 1e3  # 1 GB/s = 1e9 B/s = 1e3 B/us
CYCLES_PER_US_PER_GHZ = 1e3


def dram_us(device: DeviceSpec, nbytes: float, cores: int) -> float:
    """DRAM time of ``nbytes`` of an interleaved tensor moved by ``cores`` cores: at the
    share of the bandwidth interleaved traffic reaches, of which each core reaches at most
    one bank's part, so fewer cores than banks leave banks idle."""
    share = min(1.0, cores / device.dram_banks) * device.dram_interleaved_efficiency
    return nbytes / (device.dram_bandwidth_gbps * share * BYTES_PER_US_PER_GBPS)


def dram_sharded_us(device: DeviceSpec, nbytes: float) -> float:
    """DRAM time of ``nbytes`` sharded over every bank, each bank read by the core next to
    it (TT-NN's DRAM-sharded matmul weights); the device must have
    ``dram_sharded_efficiency``."""
    assert device.dram_sharded_efficiency is not None
    return nbytes / (device.dram_bandwidth_gbps * device.dram_sharded_efficiency
                     * BYTES_PER_US_PER_GBPS)


def noc_us(device: DeviceSpec, bytes_per_core: float) -> float:
    return bytes_per_core / (device.noc_bytes_per_cycle * device.clock_ghz * CYCLES_PER_US_PER_GHZ)


def l1_us(device: DeviceSpec, bytes_per_core: float) -> float:
    return bytes_per_core / (device.l1_bytes_per_cycle * device.clock_ghz * CYCLES_PER_US_PER_GHZ)


def cycles_us(device: DeviceSpec, cycles: float) -> float:
    return cycles / (device.clock_ghz * CYCLES_PER_US_PER_GHZ)


def access_us(device: DeviceSpec, geom: Geometry, cfg: MemConfig, cores: int) -> float:
    """Time for an op running on ``cores`` cores to read (or write) a whole tensor held
    in ``cfg``.

    DRAM: all bytes over the DRAM bandwidth those cores reach (``dram_us``).
    L1-interleaved: each core's share over the NoC (pages sit round-robin on every core).
    Sharded: each core's shard from its own L1.
    """
    if not cfg.is_l1:
        return dram_us(device, geom.total_bytes, cores)
    per_core = geom.bytes_per_core(cfg, device.cores)
    return l1_us(device, per_core) if cfg.is_sharded else noc_us(device, per_core)


def working_cores(device: DeviceSpec, geom: Geometry, cfg: MemConfig) -> int:
    """Cores that handle a tensor held in ``cfg``: its grid when sharded, else one core per
    tile up to every core."""
    return cores_of(cfg, device.cores) if cfg.is_sharded else min(device.cores, geom.tiles)


def copy_us(device: DeviceSpec, geom: Geometry, src: MemConfig, dst: MemConfig) -> float:
    """A reshard, spill or reload: every byte is read from ``src`` and written to ``dst``.

    DRAM sides move all bytes through the DRAM bandwidth that the L1 side's cores reach;
    L1 sides move each core's share of the bytes over the NoC, so the grids on both
    sides set the time. The copy is a separate op and pays the fixed cost of one (``fixed_us``).
    """
    t = fixed_us(device)
    movers = min((working_cores(device, geom, cfg) for cfg in (src, dst) if cfg.is_l1),
                 default=working_cores(device, geom, src))
    for cfg in (src, dst):
        if cfg.is_l1:
            t += noc_us(device, geom.bytes_per_core(cfg, device.cores))
        else:
            t += dram_us(device, geom.total_bytes, movers)
    return t


def matmul_cycles(device: DeviceSpec, tile_matmuls_per_core: float, fidelity: str,
                  operand_tile_bytes: int) -> float:
    """Cycles of the matrix unit on one core at the realistic utilisation: each tile
    matmul takes its fidelity's cycles, or the time to unpack its two operand tiles
    (``operand_tile_bytes``) when that is longer."""
    per_tile: float = device.tile_matmul_cycles[fidelity]  # type: ignore[index]
    if device.unpack_bytes_per_cycle is not None:
        per_tile = max(per_tile, operand_tile_bytes / device.unpack_bytes_per_cycle)
    return tile_matmuls_per_core * per_tile / device.matmul_utilization


def fixed_us(device: DeviceSpec) -> float:
    """What every op and every copy costs besides its roofline: host dispatch plus the
    device's fixed op latency."""
    return device.dispatch_overhead_us + device.op_latency_us
