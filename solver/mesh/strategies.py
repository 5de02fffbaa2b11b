"""The parallel strategies an op may run with on one mesh axis, by op type.

A strategy on one axis says which entry (``R``, ``S<d>``, ``P``) each operand must have on
that axis and which entry the output gets: matmuls column-parallel (weight split by N),
row-parallel (K split, partial output), batch- or row-parallel over the activation;
elementwise ops, permutes and reshapes follow their inputs; norms, softmax and reductions
never split the dim they work along (a split reduced dim gives a partial sum for sums);
an op with a fused activation or a bias never leaves a partial sum; concat never splits
its own dim; attention's batched matmuls split by batch or head; embeddings by vocabulary
(partial) or hidden; opaque ops run replicated. On a 2-D mesh an op's strategy is one such
choice per axis (``op_strategies``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from models.layout import OpDecl
from models.layout_ops import UNARY_TYPES, attrs_model, normalize_dim
from solver.mesh.placement import PARTIAL, REPLICATED, Placement, local_shape, shard

LINEAR_PASS = frozenset({"reshape", "permute", "transpose", "add", "sub", "concat",
                         "reduce_sum", "reduce_mean"})
"""Ops that map partial sums to partial sums (linear in every operand that is partial)."""


@dataclass(frozen=True)
class AxisChoice:
    """One op's strategy on one axis: what it needs of each operand, what it produces."""

    name: str
    inputs: tuple[str, ...]
    output: str


@dataclass(frozen=True)
class Strategy:
    """One choice per mesh axis; ``inputs[j]`` and ``output`` are whole placements."""

    name: tuple[str, ...]
    inputs: tuple[Placement, ...]
    output: Placement


Shape = Sequence[int]


def _follow(name: str, maps: Sequence[Sequence[int | None]], out_rank: int,
            shapes: Sequence[Shape], out: Shape, chips: int,
            forbidden: frozenset[int] = frozenset(), strict: bool = False) -> list[AxisChoice]:
    """Split output dim d and each operand's dim ``maps[j][d]``: operands without it, or
    broadcast along it, stay replicated; with ``strict`` (a reshape) an output dim no
    operand dim maps to is never split."""
    choices = [AxisChoice("replicated", (REPLICATED,) * len(shapes), REPLICATED)]
    for d in range(out_rank):
        if d in forbidden or out[d] % chips:
            continue
        ins = []
        for j, shape in enumerate(shapes):
            k = maps[j][d]
            if k is None and strict:
                break
            if k is None or shape[k] == 1:
                ins.append(REPLICATED)
            elif shape[k] % chips:
                break
            else:
                ins.append(shard(k))
        else:
            choices.append(AxisChoice(f"{name}{d}", tuple(ins), shard(d)))
    return choices


def _identity(rank: int) -> list[int | None]:
    return list(range(rank))


def _broadcast_map(shape: Shape, out_rank: int) -> list[int | None]:
    offset = out_rank - len(shape)
    return [d - offset if d >= offset else None for d in range(out_rank)]


def _reshape_map(src: Shape, dst: Shape, chips: int) -> list[int | None]:
    """Output dim j follows input dim i when both start at the same flat offset (equal
    products of the dims before them) and both split evenly: each chip's block is then the
    same run of elements in both shapes."""
    before_src = {math.prod(src[:i]): i for i in range(len(src)) if src[i] % chips == 0}
    return [before_src.get(math.prod(dst[:j])) if dst[j] % chips == 0 else None
            for j in range(len(dst))]


def _partial_pass(op_type: str, n_inputs: int) -> list[AxisChoice]:
    """Partial sums in, a partial sum out, for ops linear in every operand."""
    if op_type in LINEAR_PASS:
        return [AxisChoice("partial", (PARTIAL,) * n_inputs, PARTIAL)]
    return []


def axis_choices(op: OpDecl, shapes: Sequence[Shape], out: Shape,
                 chips: int) -> list[AxisChoice]:
    """Every strategy of ``op`` on an axis of ``chips`` chips (global shapes)."""
    t = op.type
    attrs = attrs_model(t).model_validate(op.attrs)
    rank = len(out)
    if chips == 1:
        return [AxisChoice("replicated", (REPLICATED,) * len(shapes), REPLICATED)]
    if t in ("matmul", "linear"):
        return _matmul(shapes, out, chips, getattr(attrs, "transpose_b", False),
                       partial=getattr(attrs, "activation", None) is None)
    if t == "conv2d":
        return _conv(shapes, out, chips, getattr(attrs, "groups", 1),
                     partial=getattr(attrs, "activation", None) is None)
    if t == "embedding":
        return _embedding(shapes, out, chips)
    if t == "opaque":
        return [AxisChoice("replicated", (REPLICATED,) * len(shapes), REPLICATED)]
    if t in UNARY_TYPES:
        return _follow("split", [_identity(rank)], rank, shapes, out, chips)
    if t == "softmax":
        return _follow("split", [_identity(rank)], rank, shapes, out, chips,
                       frozenset({normalize_dim(attrs.dim, rank)}))
    if t in ("layernorm", "rmsnorm"):
        maps = [_identity(rank)] + [[None] * rank for _ in shapes[1:]]
        return _follow("split", maps, rank, shapes, out, chips, frozenset({rank - 1}))
    if t in ("add", "sub", "mul", "div", "maximum", "minimum"):
        maps = [_broadcast_map(s, rank) for s in shapes]
        return _follow("split", maps, rank, shapes, out, chips) + _partial_pass(t, 2)
    if t in ("reduce_sum", "reduce_mean", "reduce_max"):
        return _reduce(t, attrs, shapes[0], out, chips)
    if t in ("max_pool2d", "avg_pool2d"):
        return _follow("split", [_identity(rank)], rank, shapes, out, chips, frozenset({1, 2}))
    if t == "concat":
        dim = normalize_dim(attrs.dim, rank)
        maps = [_identity(rank) for _ in shapes]
        return _follow("split", maps, rank, shapes, out, chips, frozenset({dim})) + \
            _partial_pass(t, len(shapes))
    if t in ("permute", "transpose"):
        if t == "permute":
            perm = [normalize_dim(p, rank) for p in attrs.perm]
        else:
            perm = list(range(rank))
            a, b = normalize_dim(attrs.dim0, rank), normalize_dim(attrs.dim1, rank)
            perm[a], perm[b] = perm[b], perm[a]
        return _follow("split", [perm], rank, shapes, out, chips) + _partial_pass(t, 1)
    if t == "slice":
        src = shapes[0]
        steps = attrs.steps or [1] * rank
        whole = [d for d in range(rank) if attrs.starts[d] in (0, -src[d])
                 and (attrs.ends[d] >= src[d]) and steps[d] == 1]
        return _follow("split", [_identity(rank)], rank, shapes, out, chips,
                       frozenset(set(range(rank)) - set(whole)))
    if t == "reshape":
        return _follow("split", [_reshape_map(shapes[0], out, chips)], rank, shapes, out,
                       chips, strict=True) + _partial_pass(t, 1)
    return [AxisChoice("replicated", (REPLICATED,) * len(shapes), REPLICATED)]


def _matmul(shapes: Sequence[Shape], out: Shape, chips: int, transpose_b: bool,
            partial: bool) -> list[AxisChoice]:
    """``partial``: the op may leave a partial sum (no fused activation); never with a
    bias, which every chip would add."""
    a, b = shapes[0], shapes[1]
    rank = len(out)
    bias = len(shapes) == 3
    choices = [AxisChoice("replicated", (REPLICATED,) * len(shapes), REPLICATED)]

    def add(name: str, ia: str, ib: str, o: str, ic: str = REPLICATED) -> None:
        choices.append(AxisChoice(name, (ia, ib, ic) if bias else (ia, ib), o))

    b_n, b_k = (len(b) - 2, len(b) - 1) if transpose_b else (len(b) - 1, len(b) - 2)
    for d in range(rank - 2):  # batch dims: the weight splits too when it is batched
        if out[d] % chips == 0:
            if len(b) > 2:
                if b[d] % chips == 0:
                    add(f"batch{d}", shard(d), shard(d), shard(d))
            else:
                add(f"batch{d}", shard(d), REPLICATED, shard(d))
    if a[-2] % chips == 0:
        add("rows", shard(len(a) - 2), REPLICATED, shard(rank - 2))
    if b[b_n] % chips == 0:
        bias_entry = shard(len(shapes[2]) - 1) if bias and shapes[2][-1] % chips == 0 \
            else REPLICATED
        if not bias or bias_entry != REPLICATED:
            add("column", REPLICATED, shard(b_n), shard(rank - 1), bias_entry)
    if a[-1] % chips == 0 and partial and not bias:
        add("row", shard(len(a) - 1), shard(b_k), PARTIAL)
    return choices


def _conv(shapes: Sequence[Shape], out: Shape, chips: int, groups: int,
          partial: bool) -> list[AxisChoice]:
    bias = len(shapes) == 3
    rest = (REPLICATED,) if bias else ()
    choices = [AxisChoice("replicated", (REPLICATED,) * len(shapes), REPLICATED)]
    if out[0] % chips == 0:
        choices.append(AxisChoice("batch0", (shard(0), REPLICATED, *rest), shard(0)))
    if groups == 1:
        if out[3] % chips == 0 and (not bias or shapes[2][-1] % chips == 0):
            ends = (shard(len(shapes[2]) - 1),) if bias else ()
            choices.append(AxisChoice("out_channels", (REPLICATED, shard(0), *ends), shard(3)))
        if shapes[0][3] % chips == 0 and partial and not bias:
            choices.append(AxisChoice("in_channels", (shard(3), shard(1)), PARTIAL))
    return choices


def _embedding(shapes: Sequence[Shape], out: Shape, chips: int) -> list[AxisChoice]:
    idx, table = shapes
    choices = [AxisChoice("replicated", (REPLICATED, REPLICATED), REPLICATED)]
    for d in range(len(idx)):
        if idx[d] % chips == 0:
            choices.append(AxisChoice(f"split{d}", (shard(d), REPLICATED), shard(d)))
    if table[1] % chips == 0:
        choices.append(AxisChoice("hidden", (REPLICATED, shard(1)), shard(len(out) - 1)))
    if table[0] % chips == 0:
        choices.append(AxisChoice("vocabulary", (REPLICATED, shard(0)), PARTIAL))
    return choices


def _reduce(t: str, attrs: object, src: Shape, out: Shape, chips: int) -> list[AxisChoice]:
    rank = len(src)
    dims = {normalize_dim(d, rank) for d in attrs.dims}  # type: ignore[attr-defined]
    keep = attrs.keepdim  # type: ignore[attr-defined]
    kept = [d for d in range(rank) if d not in dims]
    # output dim of each kept input dim
    where = {d: d for d in kept} if keep else {d: i for i, d in enumerate(kept)}
    choices = [AxisChoice("replicated", (REPLICATED,), REPLICATED)]
    for d in kept:
        if src[d] % chips == 0 and where[d] < len(out) and out[where[d]] == src[d]:
            choices.append(AxisChoice(f"split{d}", (shard(d),), shard(where[d])))
    if t == "reduce_sum":  # a mean over a split dim would divide by the local count
        for d in sorted(dims):
            if src[d] % chips == 0:
                choices.append(AxisChoice(f"reduce{d}", (shard(d),), PARTIAL))
    return choices + _partial_pass(t, 1)


def op_strategies(op: OpDecl, shapes: Sequence[Shape], out: Shape,
                  mesh_shape: Sequence[int]) -> list[Strategy]:
    """Every combination of one choice per mesh axis whose shards are all even."""
    per_axis = [axis_choices(op, shapes, out, chips) for chips in mesh_shape]
    found = []
    for combo in itertools.product(*per_axis):
        inputs = tuple(tuple(c.inputs[j] for c in combo) for j in range(len(shapes)))
        output = tuple(c.output for c in combo)
        if local_shape(out, output, mesh_shape) is None or any(
                local_shape(s, p, mesh_shape) is None for s, p in zip(shapes, inputs,
                                                                        strict=True)):
            continue
        found.append(Strategy(tuple(c.name for c in combo), inputs, output))
    return found
