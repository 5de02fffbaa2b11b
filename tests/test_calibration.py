"""The layout cost model against Tenstorrent's published matmul timings (benchmarks/calibration)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.calibrate import Measured, compare, model_us, read_table, summary
from benchmarks.render import geomean
from models.device import PRESETS

WH = PRESETS["wormhole_n150"]
ROWS = read_table()
RECORDS = compare(ROWS)


def test_the_table_covers_both_chips_configs_and_fidelities():
    assert len(ROWS) == 202
    assert {r.device for r in ROWS} == {"wormhole_n150", "blackhole_p150"}
    assert {r.config for r in ROWS} == {"dram", "l1_block"}
    assert {r.fidelity for r in ROWS} == {"LoFi", "HiFi2", "HiFi4"}


def test_measured_device_time_by_hand():
    """GEMM_FLOPS: utilisation = ideal cycles / actual cycles; 4096^3 bf16 HiFi2 on an 8x8
    Wormhole reached 59.49%: 128^3 tile matmuls x 32 cycles / 64 cores / 0.5949 at 1 GHz."""
    row = Measured("wormhole_n150", 4096, 4096, 4096, "bf16", "HiFi2", "tuned", "dram", 59.49)
    assert row.device_us(PRESETS["wormhole_n150"]) == pytest.approx(
        128 ** 3 * 32 / 64 / 0.5949 / 1000)


# Priced at the block width their runs used (4: 8 K blocks), the model takes 0.64-0.67 of
# the measured time of this shape at bf16 HiFi2 and bfp8 LoFi: the bf16 HiFi2 run reached
# 34% utilisation where 1024 x 1024 x 2048, twice its rows with the same K blocks, reached
# 54%; nothing in the model explains it (docs/layout-format.md section 9).
UNEXPLAINED = {("wormhole_n150", 512, 1024, 2048)}


@pytest.mark.parametrize("device", ["wormhole_n150", "blackhole_p150"])
def test_tuned_matmuls_are_priced_within_a_tenth_on_average(device):
    ratios = {(row.device, row.m, row.k, row.n, row.dtype, row.fidelity): r["ratio"]
              for r, row in zip(RECORDS, ROWS, strict=True)
              if row.device == device and row.source == "tuned"}
    assert 0.9 <= geomean(list(ratios.values())) <= 1.1
    floor = {key: 0.6 if key[:4] in UNEXPLAINED else 2 / 3 for key in ratios}
    assert all(floor[key] <= x <= 1.5 for key, x in ratios.items()), sorted(ratios.values())


def test_tuned_rows_are_priced_at_the_block_width_their_run_used():
    """3072 x 3072 x 3072 bf16 on a Wormhole ran with in0_block_w 3 (12 K tiles per grid
    column, in0_block_w_div 4): 96 K tiles in 32 blocks of 400 cycles, where the model's
    default width 2 makes 48."""
    row = next(r for r in ROWS if (r.device, r.m, r.k, r.n, r.dtype, r.fidelity, r.source)
               == ("wormhole_n150", 3072, 3072, 3072, "bf16", "HiFi4", "tuned"))
    assert row.in0_block_w == 3
    wide, default = model_us(row, WH), model_us(replace(row, in0_block_w=None), WH)
    assert default - wide == pytest.approx((48 - 32) * 400 / 1000)
    assert all((r.in0_block_w is None) == (r.source == "out_of_box") for r in ROWS)


def test_every_row_is_priced_and_the_whole_table_within_a_tenth():
    overall = next(g for g in summary(RECORDS) if g["group"] == "all")
    assert overall["count"] == len(ROWS)
    assert 0.9 <= overall["geomean_ratio"] <= 1.1
    assert all(r["model_us"] > 0 for r in RECORDS)
