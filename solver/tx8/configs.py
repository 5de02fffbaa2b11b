"""The configurations of a group: every legal sharding over the tiles (docs/tx8.md,
"Sharding"), the split spaces the two solvers search, and the cheapest fitting choice."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from models.tx8 import Tx8Spec
from solver.tx8.cost import Configs, Costs, costs
from solver.tx8.group import GroupShape
from solver.tx8.ops import ceil_div

MAX_SLICES = 256
"""Most slices cpsat's split space gives a tile: beyond it DMA set-up dominates."""
MAX_SPLIT_DIMS = 2
"""Output dims cpsat splits in time at once (plus the reduce dim)."""


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def shardings(group: GroupShape, tiles: int) -> list[tuple[tuple[int, ...], int]]:
    """(sharding, reduce sharding) pairs: all ones, or a product of exactly ``tiles`` with
    each factor within its dim, normalized dims whole, a reduce sharding only with NE ops."""
    rank = len(group.out_shape)
    reduce_options = [r for r in divisors(tiles) if r <= group.min_k] if group.has_ne else [1]
    found: list[tuple[tuple[int, ...], int]] = [((1,) * rank, 1)]
    for rs in reduce_options:
        for s in _factorizations(tiles // rs, group.out_shape, group.normalized):
            if (s, rs) != found[0]:
                found.append((s, rs))
    return found


def _factorizations(total: int, shape: tuple[int, ...], fixed: frozenset[int]
                    ) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []

    def walk(i: int, left: int, prefix: tuple[int, ...]) -> None:
        if i == len(shape):
            if left == 1:
                out.append(prefix)
            return
        for d in divisors(left):
            if d == 1 or (i not in fixed and d <= shape[i]):
                walk(i + 1, left // d, (*prefix, d))
    walk(0, total, ())
    return out


def _powers(limit: int) -> list[int]:
    out, p = [], 1
    while p <= limit:
        out.append(p)
        p *= 2
    return out


def cpsat_space(group: GroupShape, tiles: int) -> Configs:
    """Every sharding; splits of up to two output dims and the reduce dim in powers of two,
    at most MAX_SLICES slices; double buffering and weight residency on and off."""
    rows_s, rows_rs, rows_p, rows_rp = [], [], [], []
    rank = len(group.out_shape)
    free = [i for i in range(rank) if i not in group.normalized]
    for s, rs in shardings(group, tiles):
        per_tile = ceil_div(np.array(group.out_shape), np.array(s))
        reduce_splits = _powers(group.min_k // rs) if group.has_ne else [1]
        options = {i: _powers(int(per_tile[i])) for i in free}
        for dims in _split_dims(free):
            for values in itertools.product(*(options[i][1:] for i in dims)):
                p = [1] * rank
                for i, v in zip(dims, values, strict=True):
                    p[i] = v
                base = int(np.prod(p))
                for rp in reduce_splits:
                    if base * rp > MAX_SLICES:
                        break
                    rows_s.append(s)
                    rows_rs.append(rs)
                    rows_p.append(p)
                    rows_rp.append(rp)
    n = len(rows_rs)
    has_weights = any(t.role == "weight" for t in group.loaded)
    flags = [(db, res) for db in (False, True) for res in ((False, True) if has_weights
                                                             else (False,))]
    s_arr, p_arr = np.array(rows_s, dtype=np.int64), np.array(rows_p, dtype=np.int64)
    rs_arr, rp_arr = np.array(rows_rs, dtype=np.int64), np.array(rows_rp, dtype=np.int64)
    return Configs(np.tile(s_arr, (len(flags), 1)), np.tile(rs_arr, len(flags)),
                   np.tile(p_arr, (len(flags), 1)), np.tile(rp_arr, len(flags)),
                   np.repeat([f[0] for f in flags], n), np.repeat([f[1] for f in flags], n))


def _split_dims(free: list[int]) -> list[tuple[int, ...]]:
    return [dims for r in range(MAX_SPLIT_DIMS + 1) for dims in itertools.combinations(free, r)]


def seed_split_sequence(group: GroupShape, sharding: tuple[int, ...], reduce_sharding: int,
                        pe: tuple[int, int, int]) -> list[tuple[tuple[int, ...], int]]:
    """DS_TileSplitPass's order: the reduce dim first, then the output dims from the last,
    each split doubled, from no split on, while its slice stays at least its minimum
    (``sliceShapeMin``; not given by the seed, taken as the PE array's K and N: ``pe[1]``
    along the reduce dim, ``pe[2]`` along an NE group's last dim, else one element)."""
    rank = len(group.out_shape)
    per_tile = ceil_div(np.array(group.out_shape), np.array(sharding))
    p, rp = [1] * rank, 1
    seq = [(tuple(p), rp)]
    if group.has_ne:
        k = -(-group.min_k // reduce_sharding)
        while rp * 2 * reduce_sharding <= group.min_k and -(-k // (rp * 2)) >= pe[1]:
            rp *= 2
            seq.append((tuple(p), rp))
    for i in reversed(range(rank)):
        least = pe[2] if group.has_ne and i == rank - 1 else 1
        if i in group.normalized:
            continue
        while p[i] * 2 <= per_tile[i] and -(-int(per_tile[i]) // (p[i] * 2)) >= least:
            p[i] *= 2
            seq.append((tuple(p), rp))
    return seq


@dataclass
class Choice:
    """A group's configuration and what it costs."""

    configs: Configs
    costs: Costs

    @property
    def latency_us(self) -> float:
        return float(self.costs.latency_us[0])


def cheapest(group: GroupShape, layout: str, device: Tx8Spec, space: Configs) -> Choice | None:
    """The fitting row of least latency (ties: the first), or None when none fits."""
    table = costs(group, layout, device, space)
    ok = table.spm_bytes <= device.spm_bytes
    if not ok.any():
        return None
    best = int(np.argmin(np.where(ok, table.latency_us, np.inf)))
    row = space.row(best)
    return Choice(row, costs(group, layout, device, row))
