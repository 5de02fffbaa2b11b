"""Memory configurations and the shard arithmetic of DESIGN.md 2.2.

A tensor is collapsed to 2-D ``[prod(leading dims) x H, W]`` and padded to whole 32x32
tiles. A memory configuration says where it lives (DRAM or L1) and how it is spread
over cores (interleaved, or height/width/block sharded over a grid). Everything here
is pure arithmetic on small frozen values, cached, so the candidate generator and the
CP-SAT model can call it for thousands of ops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from models.layout import MEMCFG_RE

TILE = 32
# Bytes of one 32x32 tile per dtype (DESIGN.md 2.2); bfp formats carry one shared
# exponent byte per 16 values: 1024 + 64 and 512 + 64.
TILE_BYTES = {"bf16": 2048, "f32": 4096, "bfp8": 1088, "bfp4": 576, "uint32": 4096}
SHARDED_LAYOUTS = ("block_sharded", "height_sharded", "width_sharded")
ALIGNMENT = 32
"""Bytes an L1 buffer's offset is a multiple of: the Tensix allocator alignment in
tt-metal's ``core_config.h`` (32 on Grayskull, a multiple of later chips' L1 alignment);
every tile size is a multiple of it."""


@dataclass(frozen=True, order=True)
class MemConfig:
    """Where a tensor lives: buffer, layout and (when sharded) the core grid [rows, cols]."""

    buffer: str
    layout: str
    grid: tuple[int, int] | None = None

    @property
    def is_l1(self) -> bool:
        return self.buffer == "l1"

    @property
    def is_sharded(self) -> bool:
        return self.grid is not None

    @property
    def key(self) -> str:
        base = f"{self.buffer}:{self.layout}"
        return f"{base}:{self.grid[0]}x{self.grid[1]}" if self.grid else base

    def __str__(self) -> str:
        return self.key

    @staticmethod
    def parse(text: str) -> MemConfig:
        """The inverse of ``key``; raises ValueError on anything else."""
        if not MEMCFG_RE.fullmatch(text):
            raise ValueError(f"'{text}' is not a memory configuration")
        parts = text.split(":")
        if len(parts) == 2:
            return MemConfig(parts[0], parts[1])
        rows, cols = parts[2].split("x")
        return sharded(parts[1], int(rows), int(cols))


DRAM = MemConfig("dram", "interleaved")
L1_INTERLEAVED = MemConfig("l1", "interleaved")


@cache
def sharded(layout: str, rows: int, cols: int) -> MemConfig:
    return MemConfig("l1", layout, (rows, cols))


@dataclass(frozen=True)
class Geometry:
    """A tensor as the hardware stores it: tile rows and columns and bytes per tile."""

    rows: int
    cols: int
    tile_bytes: int

    @staticmethod
    def of(shape: list[int] | tuple[int, ...], dtype: str) -> Geometry:
        rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
        return Geometry(rows, shape[-1], TILE_BYTES[dtype])

    @property
    def ht(self) -> int:
        return -(-self.rows // TILE)

    @property
    def wt(self) -> int:
        return -(-self.cols // TILE)

    @property
    def tile_shape(self) -> tuple[int, int]:
        """[Ht, Wt]: tensors of equal tile shape shard identically whatever their dtype."""
        return self.ht, self.wt

    @property
    def tiles(self) -> int:
        return self.ht * self.wt

    @property
    def total_bytes(self) -> int:
        return self.tiles * self.tile_bytes

    def shard_tiles(self, cfg: MemConfig) -> tuple[int, int] | None:
        """[h, w] of one shard in tiles; None when not sharded."""
        if cfg.grid is None:
            return None
        n = cfg.grid[0] * cfg.grid[1]
        if cfg.layout == "height_sharded":
            return -(-self.ht // n), self.wt
        if cfg.layout == "width_sharded":
            return self.ht, -(-self.wt // n)
        return -(-self.ht // cfg.grid[0]), -(-self.wt // cfg.grid[1])

    def shard_shape(self, cfg: MemConfig) -> tuple[int, int] | None:
        """[h, w] of one shard in elements (whole tiles)."""
        st = self.shard_tiles(cfg)
        return None if st is None else (st[0] * TILE, st[1] * TILE)

    def tiles_per_core(self, cfg: MemConfig, device_cores: int) -> int:
        """L1 tiles one core holds: the shard, or ceil(tiles / cores) when L1-interleaved."""
        if not cfg.is_l1:
            return 0
        st = self.shard_tiles(cfg)
        return -(-self.tiles // device_cores) if st is None else st[0] * st[1]

    def bytes_per_core(self, cfg: MemConfig, device_cores: int) -> int:
        return self.tiles_per_core(cfg, device_cores) * self.tile_bytes

    def fits_grid(self, cfg: MemConfig) -> bool:
        """Every core of the grid holds at least one tile along each sharded dim."""
        st = self.shard_tiles(cfg)
        if st is None:
            return True
        rows, cols = cfg.grid  # type: ignore[misc]
        along_h, along_w = {"height_sharded": (rows * cols, 1), "width_sharded": (1, rows * cols),
                            "block_sharded": (rows, cols)}[cfg.layout]
        return -(-self.ht // st[0]) == along_h and -(-self.wt // st[1]) == along_w


def one_d_grids(device_grid: tuple[int, int]) -> list[tuple[int, int]]:
    """1-D sharding runs on the first n cores in row-major order; its grid is written [1, n]."""
    return [(1, n) for n in range(1, device_grid[0] * device_grid[1] + 1)]


@cache
def sharded_configs(geom: Geometry, device_grid: tuple[int, int]) -> tuple[MemConfig, ...]:
    """Every sharded L1 configuration of a tensor, one per distinct shard shape, largest first.

    Grids whose cores would not all hold a tile are dropped, which also deduplicates:
    among grids giving the same shard shape only the one with no idle core survives.
    """
    found: list[MemConfig] = []
    for rows, cols in one_d_grids(device_grid):
        found += [sharded(layout, rows, cols) for layout in ("height_sharded", "width_sharded")]
    # A block grid with one row or column repeats a 1-D shard shape, so it starts at 2x2.
    found += [sharded("block_sharded", r, c)
              for r in range(2, device_grid[0] + 1) for c in range(2, device_grid[1] + 1)]
    legal = [cfg for cfg in found if geom.fits_grid(cfg)]
    return tuple(sorted(legal, key=lambda c: (-c.grid[0] * c.grid[1],  # type: ignore[index]
                                              SHARDED_LAYOUTS.index(c.layout), c.grid)))


def cores_of(cfg: MemConfig, device_cores: int) -> int:
    """Cores a configuration spreads over (all of them when interleaved)."""
    return cfg.grid[0] * cfg.grid[1] if cfg.grid else device_cores
