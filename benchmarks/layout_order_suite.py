"""A seeded suite of layout graphs where the op order matters: parallel branches listed
interleaved, on activations large enough to fill L1.

    .venv/bin/python benchmarks/layout_order_suite.py [--count 16] [--seed 0] [--write DIR]

prints each graph's name and size, and with ``--write`` saves them as JSON in ``DIR`` (for
``benchmarks/order.py --graphs`` and ``benchmarks/proofs.py --graphs``).

Each graph is a chain of blocks. A block widens its input (a linear), runs ``k`` branches
side by side (one to three elementwise ops on the wide tensor, then a linear back to the
narrow width) and adds the branches' ends, with a residual from its input on some blocks.
The graph lists a block's branches interleaved (every branch's first op, then every
branch's second, ...) or in a random topological order, so up to ``k`` wide intermediates
are live at once where running one branch to its end first would hold one. A wide tensor
(2048-8192 x 1024-2048, bf16) sharded over every core takes 5-40% of a Wormhole n150's
usable L1 per core and 2-18% of a Blackhole p150's, so two to four of them, with the
ops' circular buffers and copies, fill it on the real presets, without changing the
device. Sizes run from about 10 to about 500 ops, so graphs fall on both sides of
what one model takes (``cpsat.fits_whole``): the order model, or order moves in the
segment search.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least  # noqa: E402
from benchmarks.graph_builder import Graph  # noqa: E402

ELEMENTWISE = ("gelu", "relu", "silu", "exp", "sigmoid")


def graph(seed: int) -> dict:
    """One graph of the suite, the same for the same seed."""
    rng = random.Random(seed)
    blocks = rng.choice((2, 4, 8, 16, 24, 32))
    branches = rng.choice((2, 3, 4))
    depth = rng.choice((1, 2, 3))
    seq = rng.choice((2048, 4096, 8192))
    wide = rng.choice((1024, 2048))
    narrow = rng.choice((256, 512))
    interleaved = rng.random() < 0.7
    g = Graph(f"order-{seed}-b{blocks}k{branches}d{depth}-s{seq}w{wide}")
    x = g.input("x", [1, seq, narrow])
    for b in range(blocks):
        h = g.linear(f"b{b}.up", x, wide, bias=False)
        ends: list[str | None] = [None] * branches
        chains = [[(f"b{b}.r{j}.{level}", rng.choice(ELEMENTWISE)) for level in range(depth)]
                  for j in range(branches)]
        steps = [(j, level) for level in range(depth + 1) for j in range(branches)]
        if not interleaved:
            steps = _random_topological(rng, branches, depth)
        last = [h] * branches
        for j, level in steps:
            if level < depth:
                name, kind = chains[j][level]
                last[j] = g.unary(kind, name, last[j])
            else:
                ends[j] = g.linear(f"b{b}.r{j}.down", last[j], narrow, bias=False)
        total = ends[0]
        for j in range(1, branches):
            total = g.binary("add", f"b{b}.join{j}", total, ends[j])
        if rng.random() < 0.5:
            total = g.binary("add", f"b{b}.residual", total, x)
        x = total
    return g.document([x])


def _random_topological(rng: random.Random, branches: int, depth: int) -> list[tuple[int, int]]:
    """Every branch's steps in order, the branches merged at random."""
    left = {j: 0 for j in range(branches)}
    out = []
    while left:
        j = rng.choice(sorted(left))
        out.append((j, left[j]))
        left[j] += 1
        if left[j] > depth:
            del left[j]
    return out


def suite(count: int = 16, seed: int = 0) -> list[dict]:
    return [graph(seed + k) for k in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=at_least(1), default=16, help="graphs in the suite")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first graph")
    parser.add_argument("--write", type=Path, default=None, help="a directory for the JSON")
    args = parser.parse_args()
    if args.write is not None:
        if args.write.exists() and not args.write.is_dir():
            parser.error(f"--write: {args.write} is a file, not a directory")
        args.write.mkdir(parents=True, exist_ok=True)
    for doc in suite(args.count, args.seed):
        print(f"{doc['name']}: {len(doc['ops'])} ops")
        if args.write is not None:
            (args.write / f"{doc['name']}.json").write_text(json.dumps(doc))


if __name__ == "__main__":
    main()
