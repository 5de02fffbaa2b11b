"""Seeded IOPDDL problems in the image of the contest's: layers of tensors whose sharding
strategies must agree along chains (bijective edges: finite cost on one matching pair per
strategy, 1e18 elsewhere), resharding edges with costs that grow with the mismatch, a few
"infinite" strategies, live intervals over a schedule and a usage limit between each
node's smallest usage and its largest.

    .venv/bin/python benchmarks/iopddl_generate.py --nodes 5000 --seed 3 -o /tmp/p.json.gz

The tests use ``generate`` for problems no file holds (a time limit at scale, solvers
against each other); it is not tuned to any benchmark.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.arguments import at_least, share  # noqa: E402

INFINITE = 10**18


def generate(nodes: int, seed: int = 0, strategies: int = 6, tightness: float = 0.3
             ) -> dict[str, Any]:
    """A problem of ``nodes`` nodes; ``tightness`` in [0, 1] places the usage limit between
    the peak of the smallest usages (1) and of the largest (0)."""
    rng = random.Random(seed)
    horizon = max(10, nodes // 2)
    intervals, costs, usages = [], [], []
    pairs: list[list[int]] = []
    edge_costs: list[list[int]] = []
    for i in range(nodes):
        start = min(horizon - 1, i // 2 + rng.randrange(3))
        intervals.append([start, min(horizon, start + rng.randrange(1, max(2, horizon // 8)))])
        k = rng.randint(1, strategies)
        size = rng.choice([2**14, 2**16, 2**18])
        costs.append([INFINITE if s and rng.random() < 0.05 else
                      rng.choice([0, 0, rng.randrange(1, 5000)]) for s in range(k)])
        usages.append([size // rng.choice([1, 2, 4, 8]) for _ in range(k)])
        if i == 0:
            continue
        for j in {rng.randrange(max(0, i - 8), i) for _ in range(1 + (rng.random() < 0.4))}:
            pairs.append([j, i])
            edge_costs.append(_edge(rng, len(costs[j]), k))
    low, high = _peaks(intervals, usages, horizon)
    limit = int(high - tightness * (high - low))
    return {"problem": {"name": f"generated-{nodes}-{seed}",
                        "nodes": {"intervals": intervals, "costs": costs, "usages": usages},
                        "edges": {"nodes": pairs, "costs": edge_costs},
                        "usage_limit": limit}}


def _edge(rng: random.Random, rows: int, cols: int) -> list[int]:
    """An edge's costs, row-major: an agreement (one matching per strategy, the rest
    "infinite") or a resharding (free when the strategies line up, dearer further apart)."""
    if rows == cols and rng.random() < 0.6:
        match = list(range(cols))
        rng.shuffle(match)
        flat = [INFINITE] * (rows * cols)
        for a in range(rows):
            flat[a * cols + match[a]] = rng.choice([0, 0, rng.randrange(1, 100)])
        return flat
    return [0 if a % cols == b % rows else rng.randrange(1, 50) * (1 + abs(a - b)) * 1000
            for a in range(rows) for b in range(cols)]


def _peaks(intervals: list[list[int]], usages: list[list[int]], horizon: int
           ) -> tuple[int, int]:
    """The peak over time of the smallest usages and of the largest."""
    low = [0] * (horizon + 1)
    high = [0] * (horizon + 1)
    for (start, end), use in zip(intervals, usages, strict=True):
        low[start] += min(use)
        low[end] -= min(use)
        high[start] += max(use)
        high[end] -= max(use)
    return max(itertools.accumulate(low)), max(itertools.accumulate(high))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=at_least(1), default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tightness", type=share, default=0.3,
                        help="where the usage limit lies: 0 at the peak of the largest "
                             "usages, 1 at that of the smallest")
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args()
    doc = json.dumps(generate(args.nodes, args.seed, tightness=args.tightness))
    data = gzip.compress(doc.encode()) if args.out.suffix == ".gz" else doc.encode()
    args.out.write_bytes(data)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
