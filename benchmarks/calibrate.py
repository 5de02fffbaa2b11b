"""The layout cost model against published TT-NN matmul timings.

    .venv/bin/python benchmarks/calibrate.py [--out benchmarks/results/calibration.json]

Each row of ``benchmarks/calibration/ttnn_matmul.csv`` is one matmul measured by
Tenstorrent (M, K, N, data type, math fidelity, where in0 and the output live, and the
device utilisation it reached; source in ``benchmarks/calibration/README.md``). The
measured device time follows from the report's own definition, utilisation = ideal
cycles / actual cycles with ideal cycles = M*K*N / 32^3 x cycles per tile / cores. The
model prices the same op in the same configuration with the same cost code the solvers
use (``solver.layout.ops.build_candidate``), without the host dispatch overhead, which
the device time does not include; a hand-tuned row is priced at the ``in0_block_w`` its
run used (TT-NN's own choice for the other rows is not published: the model's default).
Prints one line per group and the geometric-mean ratio model / measured; the JSON (with
``meta``) is rendered into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.meta import meta, write_results  # noqa: E402
from benchmarks.render import geomean  # noqa: E402
from models.device import PRESETS, DeviceSpec  # noqa: E402
from models.layout_ops import attrs_model  # noqa: E402
from solver.layout.memory import DRAM, MemConfig, sharded  # noqa: E402
from solver.layout.ops import FAMILIES, Candidate, OperandSig, OpSig, build_candidate  # noqa: E402

TABLE = ROOT / "benchmarks" / "calibration" / "ttnn_matmul.csv"
TILE_MACS = 32 ** 3


@dataclass(frozen=True)
class Measured:
    device: str
    m: int
    k: int
    n: int
    dtype: str
    fidelity: str
    source: str
    config: str
    utilization_pct: float
    in0_block_w: int | None = None

    @property
    def group(self) -> str:
        return f"{self.device} {self.source} {self.config} {self.dtype}/{self.fidelity}"

    def device_us(self, device: DeviceSpec) -> float:
        ideal = (self.m * self.k * self.n / TILE_MACS
                 * device.tile_matmul_cycles[self.fidelity] / device.cores)  # type: ignore[index]
        return ideal / (self.utilization_pct / 100) / (device.clock_ghz * 1e3)


def read_table(path: Path = TABLE) -> list[Measured]:
    with path.open() as f:
        return [Measured(r["device"], int(r["m"]), int(r["k"]), int(r["n"]), r["dtype"],
                         r["math_fidelity"], r["source"], r["config"],
                         float(r["device_utilization_pct"]),
                         int(r["in0_block_w"]) if r["in0_block_w"] else None)
                for r in csv.DictReader(f)]


def model_us(row: Measured, device: DeviceSpec) -> float:
    """The model's device time of ``row``'s matmul: in1 from DRAM, in0 and the output
    from DRAM or block-sharded over the whole grid, the default program knobs."""
    def operand(shape: tuple[int, int], constant: bool) -> OperandSig:
        return OperandSig(shape, row.dtype, constant)
    sig = OpSig.of("matmul", attrs_model("matmul").model_validate(
        {"math_fidelity": row.fidelity}),
        [operand((row.m, row.k), False), operand((row.k, row.n), True)],
        [operand((row.m, row.n), False)])
    out: MemConfig = DRAM if row.config == "dram" else sharded("block_sharded", *device.grid_rc)
    matmul = FAMILIES["matmul"]
    cand = build_candidate(sig, out, matmul.knob_options(sig, out, device)[0], device)
    if not isinstance(cand, Candidate):
        raise ValueError(f"{row}: the model rejects this configuration: {cand}")
    if row.in0_block_w is not None:  # a block width the model does not offer: price it directly
        cand = dataclasses.replace(cand, compute_us=matmul.compute_us(
            sig, out, {"in0_block_w": row.in0_block_w}, device))
    return cand.latency_us((out if out.is_sharded else DRAM, DRAM)) - device.dispatch_overhead_us


def compare(rows: list[Measured]) -> list[dict]:
    records = []
    for row in rows:
        device = PRESETS[row.device]
        measured, model = row.device_us(device), model_us(row, device)
        records.append({"group": row.group, "device": row.device, "m": row.m, "k": row.k,
                        "n": row.n, "measured_us": measured, "model_us": model,
                        "ratio": model / measured})
    return records


def summary(records: list[dict]) -> list[dict]:
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r["group"], []).append(r)
    groups["all"] = records
    return [{"group": name, "count": len(rs), "geomean_ratio": geomean([r["ratio"] for r in rs]),
             "min_ratio": min(r["ratio"] for r in rs), "max_ratio": max(r["ratio"] for r in rs)}
            for name, rs in groups.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--out", type=Path, help="write the results JSON here")
    parser.add_argument("--rows", action="store_true", help="print every row, not only groups")
    args = parser.parse_args()
    if not args.table.is_file():
        parser.error(f"no calibration table at {args.table}")
    started = meta()
    records = compare(read_table(args.table))
    if args.rows:
        for r in records:
            print(f"{r['group']:45s} {r['m']:6d} {r['k']:6d} {r['n']:6d} "
                  f"measured {r['measured_us']:11.1f} model {r['model_us']:11.1f} "
                  f"ratio {r['ratio']:.2f}")
    groups = summary(records)
    for g in groups:
        print(f"{g['group']:45s} n={g['count']:3d} geomean {g['geomean_ratio']:.2f} "
              f"[{g['min_ratio']:.2f}, {g['max_ratio']:.2f}]")
    if args.out:
        write_results(args.out, started, records, summary=groups)


if __name__ == "__main__":
    main()
