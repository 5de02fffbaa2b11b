"""Seeded MLSys 2026 fusion problems in the image of the official benchmarks, as a
development suite: the public 8 are too few to tell a gain that generalizes from one
tuned to them, and the 16 official benchmarks we do not have are graphs of the same kinds.

Six families, each the shape of some official benchmarks: ``transformer`` (attention and
MLP blocks with norms and residuals, like 9), ``gated-mlp`` (SwiGLU stacks),
``attention`` (heads sharing their weights, like 13), ``conv`` (convolutions as
MatMuls: 1x1, taps of shifted inputs, inverted and basic residual blocks),
``residual`` (random DAGs with skip connections, like 5) and ``forkjoin`` (branches
joined by Pointwise ops, like 2 and 7). Each family spans 5 to 160 ops (log-spaced) and
fast-memory capacities from tight to ample; ``residual`` and ``forkjoin`` also span
MatMul shares from 0 to 0.75. Dimensions are mostly multiples of 128, with some
feature-map and channel sizes that are not (196, 784, 64, 96, ...); base costs and
bandwidths are the official ones' values; the native granularity is 128 x 128.

    .venv/bin/python benchmarks/fusion_generate.py [--seed 0] [--count 66] [--ops N] [--out DIR]

The capacity is a multiple (0.5 to 16) of the largest working set an op alone needs at the
native granularity: even at 0.5 every op fits alone at half the native tile, so every
problem is solvable. A problem depends only on the seed, its family, its index and how
many problems its family has (its size and MatMul share are spread over them).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.arguments import at_least  # noqa: E402

NATIVE = 128
MIN_OPS, MAX_OPS = 5, 160
MAX_MATMUL_SHARE = 0.75
DEFAULT_COUNT = 66
"""Eleven problems per family."""
MATMUL_COSTS = (500, 1000, 1500, 2000, 3000, 5000, 10000)
POINTWISE_COSTS = (100, 200, 500, 800, 1000, 1500)
BANDWIDTHS = (10, 15, 20, 25, 50, 100)
"""The values the public benchmarks use."""
TIERS = {"tight": (0.5, 0.95), "medium": (1.0, 3.0), "ample": (3.0, 16.0)}
"""Capacity over the largest op-alone working set at the native tile. The public
benchmarks have 0.61 (3, 5) to 12.2 (13)."""
ODD_ROWS = (196, 200, 784, 1000)
ODD_COLS = (64, 96, 192, 320, 448)
"""Dimensions that are not multiples of 128 (partial and sub-native tiles)."""
ODD_SHARE = 0.3
"""Share of problems allowed such dimensions."""

Problem = dict[str, Any]


@dataclass
class Graph:
    """A problem under construction: ops append in a topological order, so any prefix of
    the ops is a valid graph (``problem`` cuts it at the target size)."""

    rng: random.Random
    shapes: list[tuple[int, int]] = field(default_factory=list)
    """(height, width) of each tensor."""
    ops: list[tuple[str, list[int], int, int]] = field(default_factory=list)
    """(type, inputs, output, base cost)."""
    costs: dict[str, int] = field(default_factory=dict)
    """Base cost of each role, drawn on first use."""
    palette: dict[str, tuple[int, ...]] = field(init=False)
    """The base costs this problem draws from: two neighbouring MatMul values, three
    Pointwise ones."""

    def __post_init__(self) -> None:
        top = self.rng.randrange(1, len(MATMUL_COSTS))
        self.palette = {"MatMul": MATMUL_COSTS[top - 1:top + 1],
                        "Pointwise": tuple(self.rng.sample(POINTWISE_COSTS, 3))}

    def _cost(self, kind: str, role: str) -> int:
        if role not in self.costs:
            self.costs[role] = self.rng.choice(self.palette[kind])
        return self.costs[role]

    def _tensor(self, rows: int, cols: int) -> int:
        self.shapes.append((rows, cols))
        return len(self.shapes) - 1

    def input(self, rows: int, cols: int) -> int:
        return self._tensor(rows, cols)

    def rows(self, t: int) -> int:
        return self.shapes[t][0]

    def cols(self, t: int) -> int:
        return self.shapes[t][1]

    def matmul(self, lhs: int, rhs: int, role: str) -> int:
        assert self.cols(lhs) == self.rows(rhs), (self.shapes[lhs], self.shapes[rhs])
        out = self._tensor(self.rows(lhs), self.cols(rhs))
        self.ops.append(("MatMul", [lhs, rhs], out, self._cost("MatMul", role)))
        return out

    def weight(self, lhs: int, cols: int, role: str) -> int:
        """``lhs`` times a new weight input with ``cols`` columns."""
        return self.matmul(lhs, self.input(self.cols(lhs), cols), role)

    def pointwise(self, inputs: list[int], role: str) -> int:
        assert len(set(inputs)) == len(inputs)
        assert len({self.shapes[t] for t in inputs}) == 1, [self.shapes[t] for t in inputs]
        out = self._tensor(*self.shapes[inputs[0]])
        self.ops.append(("Pointwise", inputs, out, self._cost("Pointwise", role)))
        return out

    def problem(self, ops: int, factor: float) -> Problem:
        """The contest JSON of the first ``ops`` ops, tensors renumbered (graph inputs
        first, then outputs in op order, as the official files do), at a capacity of
        ``factor`` times the largest op-alone working set at the native tile."""
        kept = self.ops[:ops]
        produced = [out for _, _, out, _ in kept]
        inputs = [t for _, ins, _, _ in kept for t in ins if t not in set(produced)]
        number = {t: i for i, t in enumerate(dict.fromkeys(inputs + produced))}
        shapes = [self.shapes[t] for t in number]
        raw = {
            "widths": [c for _, c in shapes],
            "heights": [r for r, _ in shapes],
            "inputs": [[number[t] for t in ins] for _, ins, _, _ in kept],
            "outputs": [[number[out]] for _, _, out, _ in kept],
            "base_costs": [cost for _, _, _, cost in kept],
            "op_types": [kind for kind, _, _, _ in kept],
            "fast_memory_capacity": 0,
            "slow_memory_bandwidth": self.rng.choice(BANDWIDTHS),
            "native_granularity": [NATIVE, NATIVE],
        }
        raw["fast_memory_capacity"] = _two_digits(factor * native_working_set(raw))
        return raw


def native_working_set(raw: Problem) -> int:
    """The largest working set of one op alone at the native tile (``[128, 128, 128]``,
    clipped to the op's tensors; SEMANTICS.md S12): the capacity's unit."""
    def clip(extent: int) -> int:
        return min(extent, NATIVE)

    largest = 0
    for kind, ins, outs in zip(raw["op_types"], raw["inputs"], raw["outputs"], strict=True):
        out = outs[0]
        tile = clip(raw["heights"][out]) * clip(raw["widths"][out])
        if kind == "MatMul":
            k = clip(raw["widths"][ins[0]])
            need = tile + k * clip(raw["heights"][out]) + k * clip(raw["widths"][out])
        else:
            need = tile * (len(set(ins)) + len(outs))
        largest = max(largest, need)
    return largest


def _two_digits(value: float) -> int:
    """``value`` to two significant digits, as the official capacities are written."""
    step = 10 ** max(0, int(math.log10(value)) - 1)
    return max(step, round(value / step) * step)


def matmul_share(raw: Problem) -> float:
    return raw["op_types"].count("MatMul") / len(raw["op_types"])


# --- the families -----------------------------------------------------------------------
# Each builds at least ``ops`` ops; ``share`` is the target MatMul share for the two
# families that take one (the others have their own, 0.4 to 0.7).

def _dim(rng: random.Random, aligned: tuple[int, ...], odd: tuple[int, ...],
         allow_odd: bool) -> int:
    return rng.choice(odd) if allow_odd and rng.random() < 0.5 else rng.choice(aligned)


def _mlp(g: Graph, x: int, hidden: int, norm: bool, gated: bool, residual: bool) -> int:
    """Norm, up projection (SwiGLU: gate and up), activation, down projection, residual."""
    h = g.pointwise([x], "norm") if norm else x
    act = g.pointwise([g.weight(h, hidden, "up")], "act")
    if gated:
        act = g.pointwise([act, g.weight(h, hidden, "up")], "mul")
    down = g.weight(act, g.cols(x), "down")
    return g.pointwise([down, x], "add") if residual else down


def transformer(g: Graph, ops: int, share: float, odd: bool) -> None:
    """Pre-norm blocks: Q, K^T, V, scores, softmax, attention, output projection, residual,
    then an MLP (gated in some problems). K^T is ``W_k^T X^T`` with ``X^T`` an input of
    its own: the format has no transpose."""
    rng = g.rng
    s = _dim(rng, (128, 256, 512, 1024), ODD_ROWS, odd)
    d = _dim(rng, (128, 256, 512), ODD_COLS, odd)
    hidden = d * rng.choice((2, 4))
    norm, gated = rng.random() < 0.7, rng.random() < 0.4
    x = g.input(s, d)
    if not norm:
        x = g.pointwise([x], "embed")
    while len(g.ops) < ops:
        h = g.pointwise([x], "norm") if norm else x
        kt = g.matmul(g.input(d, d), g.input(d, s), "proj")
        p = g.pointwise([g.matmul(g.weight(h, d, "proj"), kt, "score")], "softmax")
        attended = g.weight(g.matmul(p, g.weight(h, d, "proj"), "score"), d, "proj")
        x = g.pointwise([attended, x], "add")
        x = _mlp(g, x, hidden, norm, gated, residual=True)


def gated_mlp(g: Graph, ops: int, share: float, odd: bool) -> None:
    """A stack of SwiGLU MLPs, with or without norms and residuals."""
    rng = g.rng
    s = _dim(rng, (128, 256, 512, 1024, 2048), ODD_ROWS, odd)
    d = _dim(rng, (128, 256, 512, 1024), ODD_COLS, odd)
    hidden = min(4096, d * rng.choice((2, 3, 4)))
    norm, residual = rng.random() < 0.5, rng.random() < 0.6
    x = g.input(s, d)
    while len(g.ops) < ops:
        x = _mlp(g, x, hidden, norm, gated=True, residual=residual)


def attention(g: Graph, ops: int, share: float, odd: bool) -> None:
    """Heads that share their weights (every head's MatMuls read the same weight tensors,
    as in benchmark 13), each on its own (normed) input, summed by Pointwise joins. Either
    Q/K^T/V attention or, as in 13, a chain of shared projections and a head matrix."""
    rng = g.rng
    s = _dim(rng, (128, 256, 512), ODD_ROWS, odd)
    d = rng.choice((512, 1024, 2048))
    head = _dim(rng, (128, 256), ODD_COLS, odd)
    if rng.random() < 0.5:
        wq, wk, wv = g.input(d, head), g.input(head, d), g.input(d, head)

        def one_head(x: int) -> int:
            kt = g.matmul(wk, g.input(d, s), "proj")
            p = g.pointwise([g.matmul(g.matmul(x, wq, "proj"), kt, "score")], "softmax")
            return g.matmul(p, g.matmul(x, wv, "proj"), "score")
    else:
        w0, w1 = g.input(d, d), g.input(d, d)

        def one_head(x: int) -> int:
            chained = g.matmul(g.matmul(x, w0, "proj"), w1, "proj")
            return g.weight(chained, head, "head")

    total = None
    while len(g.ops) < ops:
        out = one_head(g.pointwise([g.input(s, d)], "norm"))
        total = out if total is None else g.pointwise([total, out], "add")


def conv(g: Graph, ops: int, share: float, odd: bool) -> None:
    """Convolutions as MatMuls over a feature map of ``pixels`` rows and one column per
    channel: 1x1 convolutions, 3-tap convolutions (a MatMul per tap over a shifted input,
    summed), MobileNet inverted residuals (the depthwise filter is Pointwise) and ResNet
    basic blocks, each with its normalization and activation."""
    rng = g.rng
    pixels = _dim(rng, (256, 512, 1024, 2048), (196, 784), odd)
    channels = (64, 96, 128, 192, 256, 384, 512) if odd else (128, 256, 384, 512)
    x = g.input(pixels, rng.choice(channels))
    while len(g.ops) < ops:
        c, kind = g.cols(x), rng.choice(("1x1", "taps", "inverted", "basic"))
        if kind == "1x1":
            x = g.pointwise([g.weight(x, rng.choice(channels), "conv")], "bn-relu")
        elif kind == "taps":
            out = rng.choice(channels)
            taps = [g.weight(x if tap == 1 else g.pointwise([x], "shift"), out, "conv")
                    for tap in range(3)]
            x = g.pointwise(taps, "bn-relu")
        elif kind == "inverted":
            expanded = g.pointwise([g.weight(x, c * rng.choice((2, 4)), "conv")], "bn-relu")
            filtered = g.pointwise([expanded], "depthwise")
            x = g.pointwise([g.weight(filtered, c, "conv"), x], "add")
        else:
            y = g.pointwise([g.weight(x, c, "conv")], "bn-relu")
            x = g.pointwise([g.weight(y, c, "conv"), x], "add")


def _take_matmul(g: Graph, share: float) -> bool:
    """Whether the next op is a MatMul: only while the share stays at most ``share``, so
    that every prefix of the ops keeps it, and then most of the time."""
    matmuls = sum(kind == "MatMul" for kind, _, _, _ in g.ops)
    return matmuls + 1 <= share * (len(g.ops) + 1) and g.rng.random() < 0.85


def residual(g: Graph, ops: int, share: float, odd: bool) -> None:
    """A random DAG with skip connections: each op reads the newest tensor, and a Pointwise
    op sometimes also one or two of the last eight of its shape (or the graph input, which
    many ops then read, as in benchmark 5). MatMuls keep the width or switch between the
    model width and the hidden width."""
    rng = g.rng
    s = _dim(rng, (128, 256, 512, 1024), ODD_ROWS, odd)
    d = _dim(rng, (128, 256, 512), ODD_COLS, odd)
    hidden = d * rng.choice((2, 4))
    first = g.input(s, d)
    recent = [first]
    while len(g.ops) < ops:
        x = recent[-1]
        if _take_matmul(g, share):
            out = g.weight(x, rng.choice((d, hidden)) if g.cols(x) == d else d, "proj")
        else:
            peers = list(dict.fromkeys(t for t in [*recent[-9:-1], first]
                                       if t != x and g.shapes[t] == g.shapes[x]))
            extra = min(len(peers), rng.choice((0, 0, 1, 1, 2)))
            out = g.pointwise([x, *rng.sample(peers, extra)], "pw")
        recent.append(out)


def forkjoin(g: Graph, ops: int, share: float, odd: bool) -> None:
    """Stages that fork the stem into 2-4 branches of 0-4 ops (a branch of 0 is a skip;
    some branches start from the graph input instead, as in benchmark 5), joined by one
    Pointwise op over all branch ends or a chain of two-input joins (as in 7)."""
    rng = g.rng
    s = _dim(rng, (128, 256, 512, 1024), ODD_ROWS, odd)
    d = _dim(rng, (128, 256, 512), ODD_COLS, odd)
    first = stem = g.input(s, d)
    while len(g.ops) < ops:
        ends = []
        for _ in range(rng.choice((2, 3, 4))):
            x = first if stem != first and rng.random() < 0.2 else stem
            for _ in range(rng.randrange(5)):
                x = g.weight(x, d, "proj") if _take_matmul(g, share) else \
                    g.pointwise([x], "pw")
            ends.append(x)
        ends = list(dict.fromkeys(ends))
        if len(ends) == 1 or rng.random() < 0.5:
            stem = g.pointwise(ends, "join")
        else:
            stem = ends[0]
            for end in ends[1:]:
                stem = g.pointwise([stem, end], "join")


Builder = Callable[[Graph, int, float, bool], None]
FAMILIES: dict[str, Builder] = {
    "transformer": transformer, "gated-mlp": gated_mlp, "attention": attention,
    "conv": conv, "residual": residual, "forkjoin": forkjoin,
}


def family(name: str) -> str:
    """The family of a suite problem, from its name (``gen-gated-mlp-03`` -> ``gated-mlp``)."""
    return name.removeprefix("gen-").rsplit("-", 1)[0]


def _sizes(count: int, rng: random.Random) -> list[int]:
    """``count`` op counts log-spaced over MIN_OPS..MAX_OPS, the ends exact, the others
    within 10%."""
    if count == 1:
        return [MIN_OPS]
    out = []
    for i in range(count):
        size = MIN_OPS * (MAX_OPS / MIN_OPS) ** (i / (count - 1))
        if 0 < i < count - 1:
            size *= rng.uniform(0.9, 1.1)
        out.append(min(MAX_OPS, max(MIN_OPS, round(size))))
    return out


def suite(seed: int = 0, count: int = DEFAULT_COUNT,
          ops: int | None = None) -> list[tuple[str, Problem]]:
    """The development suite: ``count`` problems, the families in turn, each family's
    problems from the smallest to the largest, named ``gen-FAMILY-NN``; with ``ops``, every
    problem of that many ops (a scale run) instead."""
    names = list(FAMILIES)
    out = []
    for f, name in enumerate(names):
        members = len(range(f, count, len(names)))
        rng = random.Random(f"fusion-suite/{seed}/{name}")
        sizes = _sizes(members, rng) if ops is None else [ops] * members
        shares = [MAX_MATMUL_SHARE * j / max(1, members - 1) for j in range(members)]
        rng.shuffle(shares)
        for i in range(members):
            tier = list(TIERS)[(i + f) % len(TIERS)]
            out.append((f + i * len(names), f"gen-{name}-{i:02d}",
                        _problem(seed, name, i, sizes[i], shares[i], tier)))
    return [(label, raw) for _, label, raw in sorted(out, key=lambda item: item[0])]


def _problem(seed: int, name: str, index: int, ops: int, share: float, tier: str) -> Problem:
    rng = random.Random(f"fusion-suite/{seed}/{name}/{index}")
    g = Graph(rng)
    FAMILIES[name](g, ops, share, rng.random() < ODD_SHARE)
    low, high = TIERS[tier]
    return g.problem(ops, math.exp(rng.uniform(math.log(low), math.log(high))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=at_least(1), default=DEFAULT_COUNT)
    parser.add_argument("--ops", type=at_least(MIN_OPS), default=None,
                        help="every problem of this many ops (default: 5 to 160, log-spaced)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write each problem to DIR/NAME.json (default: list them only)")
    args = parser.parse_args()
    list_problems(suite(args.seed, args.count, args.ops), args.out)


def list_problems(problems: Iterable[tuple[str, Problem]], out: Path | None) -> None:
    """Print a line per problem (size, MatMul share, capacity against one op's need at the
    native tile) and, with ``out``, write each to ``out/NAME.json``."""
    if out:
        out.mkdir(parents=True, exist_ok=True)
    for name, raw in problems:
        factor = raw["fast_memory_capacity"] / native_working_set(raw)
        print(f"{name}: {len(raw['op_types'])} ops, MatMul share {matmul_share(raw):.2f}, "
              f"capacity {raw['fast_memory_capacity']:,} ({factor:.2f}x)")
        if out:
            (out / f"{name}.json").write_text(json.dumps(raw) + "\n")
    if out:
        print(f"written to {out}")


if __name__ == "__main__":
    main()
