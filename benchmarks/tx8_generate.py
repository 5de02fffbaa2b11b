"""A seeded suite of layout graphs for the TX8 planner, in the image of the model suite but
of random sizes: transformer blocks (attention and gated MLPs), convolution stacks with
residuals and pooling, MLP chains with norms, and residual DAGs of elementwise forks and
joins; widths include ones that are not multiples of the channel alignment (100, 300,
1000), where the aligned layout pads.

    .venv/bin/python benchmarks/tx8_generate.py [--count 24] [--seed 0] [--write DIR]

prints each graph's name and size, and with ``--write`` saves them as JSON in ``DIR`` (for
``benchmarks/tx8.py --graphs DIR``).
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

WIDTHS = (100, 256, 300, 384, 512, 768, 1000, 1024)


def transformer(rng: random.Random, g: Graph) -> str:
    seq, d = rng.choice([1, 32, 128, 384]), rng.choice([256, 384, 512, 768, 1024])
    heads = rng.choice([h for h in (4, 8, 12, 16) if d % h == 0])
    x = g.input("x", [1, seq, d])
    for i in range(rng.randint(1, 3)):
        h = g.norm(rng.choice(["layernorm", "rmsnorm"]), f"b{i}.ln1", x)
        qkv = [g.permute(f"b{i}.{n}.t", g.reshape(f"b{i}.{n}.r", g.linear(f"b{i}.{n}", h, d),
                                                   [1, seq, heads, d // heads]), [0, 2, 1, 3])
               for n in ("q", "k", "v")]
        kt = g.permute(f"b{i}.kT", qkv[1], [0, 1, 3, 2])
        s = g.op("matmul", f"b{i}.qk", [qkv[0], kt], [1, heads, seq, seq])
        p = g.op("softmax", f"b{i}.sm", [s], [1, heads, seq, seq])
        o = g.op("matmul", f"b{i}.pv", [p, qkv[2]], [1, heads, seq, d // heads])
        o = g.reshape(f"b{i}.o.r", g.permute(f"b{i}.o.t", o, [0, 2, 1, 3]), [1, seq, d])
        x = g.binary("add", f"b{i}.res1", x, g.linear(f"b{i}.o", o, d))
        h = g.norm("rmsnorm", f"b{i}.ln2", x)
        ff = rng.choice([2, 3, 4]) * d
        gate = g.unary("silu", f"b{i}.act", g.linear(f"b{i}.gate", h, ff, bias=False))
        up = g.linear(f"b{i}.up", h, ff, bias=False)
        x = g.binary("add", f"b{i}.res2", x,
                     g.linear(f"b{i}.down", g.binary("mul", f"b{i}.glu", gate, up), d))
    return x


def convs(rng: random.Random, g: Graph) -> str:
    size, c = rng.choice([14, 28, 56, 112]), rng.choice([16, 48, 64, 100])
    x = g.input("x", [rng.choice([1, 4]), size, size, c])
    for i in range(rng.randint(2, 10)):
        kind = rng.random()
        if kind < 0.5:
            x = g.conv(f"c{i}", x, rng.choice([c, 2 * c, 100, 128]), rng.choice([1, 3]))
        elif kind < 0.8:
            y = g.conv(f"c{i}.a", x, g.shapes[x][3], 3)
            y = g.conv(f"c{i}.b", y, g.shapes[x][3], 3, relu=False)
            x = g.unary("relu", f"c{i}.relu", g.binary("add", f"c{i}.res", x, y))
        elif g.shapes[x][1] >= 4:
            n, h, w, ch = g.shapes[x]
            x = g.op("max_pool2d", f"p{i}", [x], [n, h // 2, w // 2, ch], kernel_size=[2, 2])
    return x


def mlp_chain(rng: random.Random, g: Graph) -> str:
    rows = rng.choice([1, 16, 64, 256, 1024])
    x = g.input("x", [rows, rng.choice(WIDTHS)])
    for i in range(rng.randint(2, 12)):
        x = g.linear(f"fc{i}", x, rng.choice(WIDTHS),
                     **({"activation": "gelu"} if rng.random() < 0.3 else {}))
        if rng.random() < 0.5:
            x = g.unary(rng.choice(["relu", "gelu", "sigmoid", "tanh"]), f"act{i}", x)
        if rng.random() < 0.3:
            x = g.norm("layernorm", f"ln{i}", x)
    return x


def residual_dag(rng: random.Random, g: Graph) -> str:
    rows, width = rng.choice([64, 256, 2048]), rng.choice(WIDTHS)
    live = [g.input("x", [rows, width])]
    for i in range(rng.randint(4, 30)):
        if rng.random() < 0.3:
            live.append(g.linear(f"fc{i}", rng.choice(live[-4:]), width))
        elif rng.random() < 0.5:
            live.append(g.binary(rng.choice(["add", "mul", "sub"]), f"j{i}",
                                 rng.choice(live[-4:]), rng.choice(live[-4:])))
        else:
            live.append(g.unary(rng.choice(["relu", "exp", "neg", "sigmoid"]), f"u{i}",
                                rng.choice(live[-4:])))
    read = {t for op in g.ops for t in op["inputs"]}
    ends = [t for t in live[1:] if t not in read]
    return g.binary("add", "out", ends[-2], ends[-1]) if len(ends) > 1 else live[-1]


FAMILIES = (transformer, convs, mlp_chain, residual_dag)


def graph(seed: int) -> dict:
    rng = random.Random(seed)
    family = FAMILIES[seed % len(FAMILIES)]
    g = Graph(f"tx8-{family.__name__.replace('_', '-')}-{seed:03d}")
    out = family(rng, g)
    read = {t for op in g.ops for t in op["inputs"]}
    outputs = sorted({out} | {t["name"] for t in g.tensors
                              if t["kind"] == "activation" and t["name"] not in read})
    return {**g.document(outputs), "device": "tx8"}


def suite(count: int = 24, seed: int = 0) -> list[dict]:
    return [graph(seed + i) for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=at_least(1), default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    if args.write and args.write.is_file():
        parser.error(f"--write: {args.write} is a file, not a directory")
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
    for doc in suite(args.count, args.seed):
        print(f"{doc['name']}: {len(doc['ops'])} ops, {len(doc['tensors'])} tensors")
        if args.write:
            (args.write / f"{doc['name']}.json").write_text(json.dumps(doc))


if __name__ == "__main__":
    main()
