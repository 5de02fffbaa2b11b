"""Random fusion problems wired any way, to run the solvers on what no suite family builds.

The development suite (``fusion_generate.py``) builds graphs from model blocks; a user's
graph, or a contest's unseen one, may wire ops in ways no block does. Here each problem is
a random DAG: MatMuls of a fresh weight or of two tensors already made (a tensor times
itself among them), Pointwise ops of up to four tensors of one shape, several graph
outputs, sizes from 64 to 4,096 (odd ones included: 96, 200, 384, 1,000), 3 to 90 ops,
capacities from what the largest op needs alone at the native tile to 16 times it. So a
problem is always solvable. A problem depends only on the seed and its index.

    .venv/bin/python benchmarks/fusion_fuzz.py [--count 40] [--seed 0] [--out DIR]

Then, e.g., ``benchmarks/process_time.py DIR --time-limit 2``: every solve must end in
time with an answer the evaluator accepts, in both readings (BENCHMARKS.md, "Random
graphs at 2 s").
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.arguments import at_least  # noqa: E402
from benchmarks.fusion_generate import NATIVE, list_problems, native_working_set  # noqa: E402

SIZES = (64, 96, 128, 200, 256, 384, 512, 1000, 1024, 2048, 4096)
OPS = (3, 6, 10, 15, 20, 30, 45, 60, 90)
CAPACITY_FACTORS = (1.0, 1.2, 2.0, 4.0, 16.0)


def random_problem(seed: int, index: int) -> dict[str, Any]:
    """One random problem (the ``index``-th of the seed's)."""
    rng = random.Random(f"fusion-fuzz/{seed}/{index}")
    widths: list[int] = []
    heights: list[int] = []
    inputs: list[list[int]] = []
    outputs: list[list[int]] = []
    op_types: list[str] = []
    base_costs: list[int] = []

    def tensor(width: int, height: int) -> int:
        widths.append(width)
        heights.append(height)
        return len(widths) - 1

    made = [tensor(rng.choice(SIZES), rng.choice(SIZES)) for _ in range(rng.randint(1, 4))]
    matmul_share_wanted = rng.choice((0.2, 0.5, 0.7))
    for _ in range(rng.choice(OPS)):
        recent = made[-6:] if rng.random() < 0.8 else made
        lhs = rng.choice(recent)
        if rng.random() < matmul_share_wanted:
            depth = widths[lhs]
            operands = [t for t in made if heights[t] == depth]  # K rows: may be the RHS
            if heights[lhs] == depth and rng.random() < 0.3:
                rhs = lhs  # a square tensor times itself
            elif operands and rng.random() < 0.4:
                rhs = rng.choice(operands)
            else:
                rhs = tensor(rng.choice(SIZES), depth)
            ins, out = [lhs, rhs], (widths[rhs], heights[lhs])
            op_types.append("MatMul")
            base_costs.append(rng.choice((500, 1000, 2000, 5000)))
        else:
            alike = [t for t in made if t != lhs and (widths[t], heights[t]) ==
                     (widths[lhs], heights[lhs])]
            ins = [lhs, *rng.sample(alike, min(len(alike), rng.choice((0, 0, 1, 2, 3))))]
            out = (widths[lhs], heights[lhs])
            op_types.append("Pointwise")
            base_costs.append(rng.choice((50, 100, 200, 500, 1000)))
        inputs.append(ins)
        made.append(tensor(*out))
        outputs.append([made[-1]])
    raw: dict[str, Any] = {
        "widths": widths, "heights": heights, "inputs": inputs,
        "outputs": outputs,
        "base_costs": base_costs, "op_types": op_types,
        "fast_memory_capacity": 0,
        "slow_memory_bandwidth": rng.choice((10, 15, 20, 25, 50, 100)),
        "native_granularity": [NATIVE, NATIVE],
    }
    raw["fast_memory_capacity"] = round(rng.choice(CAPACITY_FACTORS) * native_working_set(raw))
    return raw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=at_least(1), default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None,
                        help="write each problem to DIR/fuzz-NN.json (default: list them only)")
    args = parser.parse_args()
    list_problems(((f"fuzz-{i:02d}", random_problem(args.seed, i)) for i in range(args.count)),
                  args.out)


if __name__ == "__main__":
    main()
