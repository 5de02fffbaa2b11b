"""What the TX8 cost model knows of each op of a layout graph: its kind (neural engine,
vector unit or DDR), the layout it needs, its iteration space, its reduce dim, and how
the slice of each operand follows from a slice of its output (docs/tx8.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from models.layout import LayoutGraph
from models.layout_ops import (
    BINARY_TYPES,
    POOL_TYPES,
    REDUCE_TYPES,
    UNARY_TYPES,
    normalize_dim,
)

OpKind = Literal["ne", "vector", "ddr"]
NE_TYPES = ("matmul", "linear", "conv2d")
DDR_TYPES = ("reshape", "permute", "transpose", "slice", "concat", "embedding", "opaque")
ELEMENT_BYTES = {"bf16": 2.0, "f32": 4.0, "bfp8": 1.0625, "bfp4": 0.5625, "uint32": 4.0}
TWO_PASS = {"gelu", "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "reciprocal",
            "div"}
PASSES = {"softmax": 4, "layernorm": 4, "rmsnorm": 3}

Extents = np.ndarray
"""Slice extents of configurations: one row per configuration, one column per output dim."""
ExtentFn = Callable[[Extents, np.ndarray], list[np.ndarray]]
"""(output extents, reduce extents) -> the operand's extent per dim, per configuration."""


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str  # input, constant, activation

    @property
    def element_bytes(self) -> float:
        return ELEMENT_BYTES[self.dtype]


@dataclass
class Operand:
    """One operand of an op, and how much of it one output slice reads."""

    tensor: str
    extents: ExtentFn
    ne_input: bool = False
    """read by the neural engine: a whole slice even after a reduce-scatter."""


@dataclass
class Op:
    name: str
    type: str
    kind: OpKind
    output: str
    out_shape: tuple[int, ...]
    operands: list[Operand] = field(default_factory=list)
    reduce_k: int = 1
    """the reduce dim an NE op may split (1: none, or a grouped conv's, not split)."""
    normalized: frozenset[int] = frozenset()
    """output dims never sharded or split (softmax dim, the norms' last dim)."""
    passes: int = 1
    macs: Callable[[Extents, np.ndarray, tuple[int, int, int]], np.ndarray] | None = None
    """padded MACs of one slice: (extents, reduce extents, the PE array's [M, K, N])."""
    vector_elements: Callable[[Extents], np.ndarray] | None = None
    window: int = 1
    """elements a pooling op reads per output element (its kernel), else 1."""
    head: bool = False
    """reads its operands only from DDR (NE ops, reductions, pooling)."""
    key: tuple = ()
    """what its costs depend on: type, shapes, dtypes, attributes (template reuse)."""


def ceil_div(a: int | np.ndarray, b: int | np.ndarray) -> np.ndarray:
    return -(-np.asarray(a) // np.asarray(b))


def pad(x: np.ndarray, m: int) -> np.ndarray:
    return ceil_div(x, m) * m


def aligned_extent(x: np.ndarray, alignment: int) -> np.ndarray:
    """The seed's Cx width of a last dim: whole blocks of the alignment, then the rest padded
    to the next power of two from 4 (a whole block when over half of one); a width of at
    most half a block is padded the same way."""
    x = np.asarray(x)
    blocks = np.where(2 * x > alignment, x // alignment, 0)
    rest = x - blocks * alignment
    small = np.maximum(4, 2 ** np.ceil(np.log2(np.maximum(rest, 1))).astype(np.int64))
    tail = np.where(rest == 0, 0, np.where(2 * rest > alignment, alignment, small))
    return blocks * alignment + tail


def build_ops(graph: LayoutGraph) -> tuple[dict[str, Tensor], list[Op]]:
    """Tensors and ops of a validated graph, in the graph's order."""
    tensors = {t.name: Tensor(t.name, tuple(t.shape), t.dtype, t.kind) for t in graph.tensors}
    return tensors, [_op(decl.name, decl.type, decl.inputs, decl.outputs, decl.attrs, tensors)
                     for decl in graph.ops]


def _op(name: str, type_: str, inputs: list[str], outputs: list[str], attrs: dict,
        tensors: dict[str, Tensor]) -> Op:
    op = _typed_op(name, type_, inputs, outputs, attrs, tensors)
    op.key = (type_, tuple((tensors[t].shape, tensors[t].dtype) for t in (*inputs, *outputs)),
              repr(sorted(attrs.items())))
    return op


def _typed_op(name: str, type_: str, inputs: list[str], outputs: list[str], attrs: dict,
              tensors: dict[str, Tensor]) -> Op:
    out = tensors[outputs[0]].shape
    if type_ in DDR_TYPES:
        return Op(name, type_, "ddr", outputs[0], out, [Operand(t, _whole(tensors[t].shape))
                                                        for t in inputs])
    op = Op(name, type_, "ne" if type_ in NE_TYPES else "vector", outputs[0], out)
    if type_ in ("matmul", "linear"):
        _matmul(op, inputs, attrs, tensors)
    elif type_ == "conv2d":
        _conv(op, inputs, attrs, tensors)
    elif type_ in REDUCE_TYPES:
        _reduction(op, inputs[0], attrs, tensors)
    elif type_ in POOL_TYPES:
        _pool(op, inputs[0], attrs, tensors)
    else:
        _elementwise(op, inputs, attrs, tensors)
    return op


def _whole(shape: tuple[int, ...]) -> ExtentFn:
    return lambda e, k: [np.full(len(e), d) for d in shape]


def _broadcast(shape: tuple[int, ...], out: tuple[int, ...]) -> ExtentFn:
    """Right-aligned: a dim equal to the output's follows its slice, a size-1 dim stays 1."""
    offset = len(out) - len(shape)

    def extents(e: Extents, k: np.ndarray) -> list[np.ndarray]:
        return [e[:, offset + i] if d == out[offset + i] and d != 1 else np.full(len(e), d)
                for i, d in enumerate(shape)]
    return extents


def _elementwise(op: Op, inputs: list[str], attrs: dict, tensors: dict[str, Tensor]) -> None:
    rank = len(op.out_shape)
    if op.type == "softmax":
        op.normalized = frozenset({normalize_dim(attrs.get("dim", -1), rank)})
    elif op.type in ("layernorm", "rmsnorm"):
        op.normalized = frozenset({rank - 1})
    op.passes = PASSES.get(op.type, 2 if op.type in TWO_PASS else 1)
    op.operands = [Operand(t, _broadcast(tensors[t].shape, op.out_shape)) for t in inputs]
    op.vector_elements = lambda e: np.prod(e, axis=1)
    assert op.type in (*UNARY_TYPES, *BINARY_TYPES, "softmax", "layernorm", "rmsnorm")


def _matmul(op: Op, inputs: list[str], attrs: dict, tensors: dict[str, Tensor]) -> None:
    """A (batched) matmul or linear: A ``[..., M, K]`` x B, reduce dim K, bias along N."""
    a, b = tensors[inputs[0]].shape, tensors[inputs[1]].shape
    transpose_b = bool(attrs.get("transpose_b", False))
    op.reduce_k = a[-1]
    op.head = True
    batch = len(op.out_shape) - 2

    def a_ext(e: Extents, k: np.ndarray) -> list[np.ndarray]:
        return [*(e[:, i] for i in range(batch)), e[:, batch], k]

    def b_ext(e: Extents, k: np.ndarray) -> list[np.ndarray]:
        lead = [e[:, i] for i in range(batch)] if len(b) > 2 else []
        return [*lead, *((e[:, batch + 1], k) if transpose_b else (k, e[:, batch + 1]))]

    op.operands = [Operand(inputs[0], a_ext, True), Operand(inputs[1], b_ext, True)]
    if len(inputs) == 3:
        bias = tensors[inputs[2]].shape
        op.operands.append(Operand(inputs[2], lambda e, k: [
            *(np.ones(len(e), dtype=np.int64) for _ in bias[:-1]), e[:, batch + 1]], True))

    def macs(e: Extents, k: np.ndarray, pe: tuple[int, int, int]) -> np.ndarray:
        lead = np.prod(e[:, :batch], axis=1) if batch else 1
        return lead * pad(e[:, batch], pe[0]) * pad(k, pe[1]) * pad(e[:, batch + 1], pe[2])
    op.macs = macs


def _conv(op: Op, inputs: list[str], attrs: dict, tensors: dict[str, Tensor]) -> None:
    """An NHWC conv: the input window a slice of output rows and columns needs, its input
    channels (the reduce dim, unless grouped) and the weight's output channels."""
    _, h, w, c = tensors[inputs[0]].shape
    cout, cin_g, kh, kw = tensors[inputs[1]].shape
    stride, padding = attrs.get("stride", [1, 1]), attrs.get("padding", [0, 0])
    dilation, groups = attrs.get("dilation", [1, 1]), attrs.get("groups", 1)
    op.head = True
    op.reduce_k = c if groups == 1 else 1

    def window(e: np.ndarray, size: int, i: int, k_: int) -> np.ndarray:
        return np.minimum(size + 2 * padding[i], (e - 1) * stride[i] + (k_ - 1) * dilation[i] + 1)

    def x_ext(e: Extents, k: np.ndarray) -> list[np.ndarray]:
        ch = k if groups == 1 else np.minimum(c, ceil_div(e[:, 3] * c, cout))
        return [e[:, 0], window(e[:, 1], h, 0, kh), window(e[:, 2], w, 1, kw), ch]

    def w_ext(e: Extents, k: np.ndarray) -> list[np.ndarray]:
        ones = np.ones(len(e), dtype=np.int64)
        return [e[:, 3], k if groups == 1 else ones * cin_g, ones * kh, ones * kw]

    op.operands = [Operand(inputs[0], x_ext, True), Operand(inputs[1], w_ext, True)]
    if len(inputs) == 3:
        rank = len(tensors[inputs[2]].shape)
        op.operands.append(Operand(inputs[2], lambda e, k: [
            *(np.ones(len(e), dtype=np.int64) for _ in range(rank - 1)), e[:, 3]], True))

    def macs(e: Extents, k: np.ndarray, pe: tuple[int, int, int]) -> np.ndarray:
        reduce = k * kh * kw if groups == 1 else np.full(len(e), cin_g * kh * kw)
        return pad(e[:, 0] * e[:, 1] * e[:, 2], pe[0]) * pad(reduce, pe[1]) * pad(e[:, 3], pe[2])
    op.macs = macs


def _reduction(op: Op, source: str, attrs: dict, tensors: dict[str, Tensor]) -> None:
    shape = tensors[source].shape
    dims = {normalize_dim(d, len(shape)) for d in attrs["dims"]}
    keepdim = attrs.get("keepdim", True)
    kept = [i for i in range(len(shape)) if i not in dims]
    op.head = True

    def ext(e: Extents, k: np.ndarray) -> list[np.ndarray]:
        out_dim = {i: (i if keepdim else kept.index(i)) for i in kept}
        if not keepdim and not kept:
            return [np.full(len(e), d) for d in shape]
        return [e[:, out_dim[i]] if i in out_dim else np.full(len(e), d)
                for i, d in enumerate(shape)]
    op.operands = [Operand(source, ext)]
    op.vector_elements = lambda e: np.prod(np.stack(ext(e, e[:, 0]), axis=1), axis=1)


def _pool(op: Op, source: str, attrs: dict, tensors: dict[str, Tensor]) -> None:
    _, h, w, _ = tensors[source].shape
    kh, kw = attrs["kernel_size"]
    stride = attrs.get("stride") or attrs["kernel_size"]
    padding = attrs.get("padding", [0, 0])
    op.head = True

    def ext(e: Extents, k: np.ndarray) -> list[np.ndarray]:
        return [e[:, 0], np.minimum(h + 2 * padding[0], (e[:, 1] - 1) * stride[0] + kh),
                np.minimum(w + 2 * padding[1], (e[:, 2] - 1) * stride[1] + kw), e[:, 3]]
    op.operands = [Operand(source, ext)]
    op.vector_elements = lambda e: np.prod(e, axis=1)
    op.window = kh * kw


def tensor_bytes(t: Tensor, layout: str, alignment: int) -> int:
    """Whole-tensor DDR bytes in a layout (aligned: the last dim padded as Cx)."""
    shape = list(t.shape)
    if layout == "aligned":
        shape[-1] = int(aligned_extent(np.array([shape[-1]]), alignment)[0])
    return math.ceil(math.prod(shape) * t.element_bytes)
