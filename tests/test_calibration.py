"""The layout cost model against Tenstorrent's published matmul timings (benchmarks/calibration)."""

from __future__ import annotations

import pytest

from benchmarks.calibrate import Measured, compare, read_table, summary
from benchmarks.render import geomean
from models.device import PRESETS

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


@pytest.mark.parametrize("device", ["wormhole_n150", "blackhole_p150"])
def test_tuned_matmuls_are_priced_within_a_tenth_on_average(device):
    ratios = [r["ratio"] for r, row in zip(RECORDS, ROWS, strict=True)
              if row.device == device and row.source == "tuned"]
    assert 0.9 <= geomean(ratios) <= 1.1
    assert all(2 / 3 <= x <= 1.5 for x in ratios), sorted(ratios)


def test_every_row_is_priced_and_the_whole_table_within_a_tenth():
    overall = next(g for g in summary(RECORDS) if g["group"] == "all")
    assert overall["count"] == len(ROWS)
    assert 0.9 <= overall["geomean_ratio"] <= 1.1
    assert all(r["model_us"] > 0 for r in RECORDS)
