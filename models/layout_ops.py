"""The op types of the layout graph format: their attributes, arity and shape inference.

Shape inference lives in ``models`` because a graph whose declared shapes disagree
with its ops is bad input, reported with the other schema faults; the solver's op
library (costs, legal memory configurations) starts from a graph that passed here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from models.device import Fidelity

UNARY_TYPES = ("relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt",
               "reciprocal", "neg", "abs")
BINARY_TYPES = ("add", "sub", "mul", "div", "maximum", "minimum")
REDUCE_TYPES = ("reduce_sum", "reduce_mean", "reduce_max")
POOL_TYPES = ("max_pool2d", "avg_pool2d")

Activation = Literal["relu", "gelu", "silu"]
Pair = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=2, max_length=2)]
PositivePair = Annotated[list[Annotated[int, Field(gt=0)]], Field(min_length=2, max_length=2)]


class Attrs(BaseModel):
    """Base of every attribute model: strict, unknown keys are faults."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class NoAttrs(Attrs):
    pass


FIDELITY_DOC = ("math fidelity; null picks it from the operand dtypes as TT model code does: "
                "LoFi with bfp4, HiFi2 with bfp8, else HiFi4")


class MatmulAttrs(Attrs):
    transpose_b: bool = Field(default=False, description="RHS given as [..., N, K]")
    activation: Activation | None = Field(default=None, description="fused activation")
    math_fidelity: Fidelity | None = Field(default=None, description=FIDELITY_DOC)


class Conv2dAttrs(Attrs):
    stride: PositivePair = [1, 1]
    padding: Pair = [0, 0]
    dilation: PositivePair = [1, 1]
    groups: Annotated[int, Field(gt=0)] = 1
    activation: Activation | None = None
    math_fidelity: Fidelity | None = Field(default=None, description=FIDELITY_DOC)


class SoftmaxAttrs(Attrs):
    dim: int = -1


class NormAttrs(Attrs):
    epsilon: Annotated[float, Field(gt=0)] = 1e-5


class ReduceAttrs(Attrs):
    dims: list[int] = Field(min_length=1)
    keepdim: bool = True


class ConcatAttrs(Attrs):
    dim: int


class PermuteAttrs(Attrs):
    perm: list[int] = Field(min_length=1)


class TransposeAttrs(Attrs):
    dim0: int
    dim1: int


class SliceAttrs(Attrs):
    starts: list[int]
    ends: list[int]
    steps: list[Annotated[int, Field(gt=0)]] | None = None


class PoolAttrs(Attrs):
    kernel_size: PositivePair
    stride: PositivePair | None = Field(default=None, description="defaults to kernel_size")
    padding: Pair = [0, 0]


class OpaqueAttrs(Attrs):
    """Anything the importer could not map; free-form, kept for the user."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class ShapeError(ValueError):
    """An op's input shapes or attributes do not fit together; the message says how."""


Shape = list[int]


def infer_shape(op_type: str, attrs: Attrs, inputs: Sequence[Shape]) -> Shape | None:
    """The output shape the op produces from these inputs; None when it is not checked."""
    return SPECS[op_type].infer(attrs, inputs)


def attrs_model(op_type: str) -> type[Attrs]:
    """The attribute model of an op type."""
    return SPECS[op_type].attrs


def arity(op_type: str) -> tuple[tuple[int, int | None], tuple[int, int | None]]:
    """((min, max) inputs, (min, max) outputs); None means unbounded."""
    spec = SPECS[op_type]
    return spec.inputs, spec.outputs


def normalize_dim(dim: int, rank: int, what: str = "dim") -> int:
    if not -rank <= dim < rank:
        raise ShapeError(f"{what} {dim} is out of range for rank {rank}")
    return dim % rank


def _same_as_first(attrs: Attrs, inputs: Sequence[Shape]) -> Shape:
    x = inputs[0]
    if isinstance(attrs, SoftmaxAttrs):
        normalize_dim(attrs.dim, len(x))
    if isinstance(attrs, NormAttrs):
        for i, p in enumerate(inputs[1:], 1):
            if p[-1] != x[-1] or math.prod(p) != x[-1]:
                raise ShapeError(f"input {i} (scale/shift) has shape {p}; it must hold "
                                 f"{x[-1]} values along the last dim to match input {x}")
    return list(x)


def _matmul(attrs: MatmulAttrs, inputs: Sequence[Shape], linear: bool) -> Shape:
    a, b = inputs[0], inputs[1]
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"matmul operands need rank >= 2, got {a} and {b}")
    if linear and len(b) != 2:
        raise ShapeError(f"linear weight must be 2-D, got {b}")
    k_b, n = (b[-1], b[-2]) if attrs.transpose_b else (b[-2], b[-1])
    if a[-1] != k_b:
        raise ShapeError(f"reduction dims differ: LHS {a} has K={a[-1]}, RHS {b} has K={k_b}"
                         + (" (transpose_b)" if attrs.transpose_b else ""))
    if len(b) > 2 and b[:-2] != a[:-2]:
        raise ShapeError(f"batched RHS {b} must have the LHS batch dims {a[:-2]}")
    if len(inputs) == 3:
        bias = inputs[2]
        if bias[-1] != n or math.prod(bias) != n:
            raise ShapeError(f"bias {bias} must hold N={n} values along its last dim")
    return [*a[:-1], n]


def _conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _conv2d(attrs: Conv2dAttrs, inputs: Sequence[Shape]) -> Shape:
    x, w = inputs[0], inputs[1]
    if len(x) != 4 or len(w) != 4:
        raise ShapeError(f"conv2d needs input [N, H, W, C] and weight [Cout, Cin/groups, kh, "
                         f"kw], got {x} and {w}")
    n, h, wd, c = x
    cout, cin_g, kh, kw = w
    if c % attrs.groups or cout % attrs.groups or cin_g * attrs.groups != c:
        raise ShapeError(f"weight {w} with groups={attrs.groups} does not fit {c} input channels")
    ho = _conv_out(h, kh, attrs.stride[0], attrs.padding[0], attrs.dilation[0])
    wo = _conv_out(wd, kw, attrs.stride[1], attrs.padding[1], attrs.dilation[1])
    if ho <= 0 or wo <= 0:
        raise ShapeError(f"kernel {kh}x{kw} does not fit the padded {h}x{wd} input")
    if len(inputs) == 3 and math.prod(inputs[2]) != cout:
        raise ShapeError(f"bias {inputs[2]} must hold Cout={cout} values")
    return [n, ho, wo, cout]


def _pool(attrs: PoolAttrs, inputs: Sequence[Shape]) -> Shape:
    x = inputs[0]
    if len(x) != 4:
        raise ShapeError(f"pooling needs input [N, H, W, C], got {x}")
    (kh, kw), stride = attrs.kernel_size, attrs.stride or attrs.kernel_size
    ho = _conv_out(x[1], kh, stride[0], attrs.padding[0], 1)
    wo = _conv_out(x[2], kw, stride[1], attrs.padding[1], 1)
    if ho <= 0 or wo <= 0:
        raise ShapeError(f"kernel {kh}x{kw} does not fit the padded {x[1]}x{x[2]} input")
    return [x[0], ho, wo, x[3]]


def _broadcast(_: Attrs, inputs: Sequence[Shape]) -> Shape:
    a, b = inputs
    rank = max(len(a), len(b))
    pa, pb = [1] * (rank - len(a)) + list(a), [1] * (rank - len(b)) + list(b)
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and 1 not in (x, y):
            raise ShapeError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return out


def _reduce(attrs: ReduceAttrs, inputs: Sequence[Shape]) -> Shape:
    x = inputs[0]
    dims = {normalize_dim(d, len(x)) for d in attrs.dims}
    if attrs.keepdim:
        return [1 if i in dims else s for i, s in enumerate(x)]
    return [s for i, s in enumerate(x) if i not in dims] or [1]


def _concat(attrs: ConcatAttrs, inputs: Sequence[Shape]) -> Shape:
    first = inputs[0]
    dim = normalize_dim(attrs.dim, len(first))
    for i, s in enumerate(inputs[1:], 1):
        if len(s) != len(first) or any(a != b for j, (a, b) in enumerate(zip(s, first, strict=True))
                                       if j != dim):
            raise ShapeError(f"input {i} has shape {s}; concat along dim {dim} needs every "
                             f"other dim equal to input 0 {first}")
    return [sum(s[dim] for s in inputs) if j == dim else d for j, d in enumerate(first)]


def _permute(attrs: PermuteAttrs, inputs: Sequence[Shape]) -> Shape:
    x = inputs[0]
    perm = [normalize_dim(p, len(x), "perm entry") for p in attrs.perm]
    if sorted(perm) != list(range(len(x))):
        raise ShapeError(f"perm {attrs.perm} is not a permutation of the {len(x)} dims")
    return [x[p] for p in perm]


def _transpose(attrs: TransposeAttrs, inputs: Sequence[Shape]) -> Shape:
    x = list(inputs[0])
    a, b = normalize_dim(attrs.dim0, len(x), "dim0"), normalize_dim(attrs.dim1, len(x), "dim1")
    x[a], x[b] = x[b], x[a]
    return x


def _slice(attrs: SliceAttrs, inputs: Sequence[Shape]) -> Shape:
    x = inputs[0]
    steps = attrs.steps or [1] * len(x)
    if not len(attrs.starts) == len(attrs.ends) == len(steps) == len(x):
        raise ShapeError(f"starts, ends and steps need one entry per dim of {x}")
    out = []
    for d, (size, s, e, st) in enumerate(zip(x, attrs.starts, attrs.ends, steps, strict=True)):
        s, e = s + size if s < 0 else s, min(e + size if e < 0 else e, size)
        if not 0 <= s < e:
            raise ShapeError(f"dim {d}: slice [{s}:{e}] of size {size} is empty or out of range")
        out.append(-(-(e - s) // st))
    return out


def _reshape(_: Attrs, inputs: Sequence[Shape]) -> None:
    return None  # checked against the declared output by element count, see layout_rules


def _embedding(_: Attrs, inputs: Sequence[Shape]) -> Shape:
    idx, table = inputs
    if len(table) != 2:
        raise ShapeError(f"embedding table must be [vocab, dim], got {table}")
    return [*idx, table[1]]


def _unchecked(_: Attrs, inputs: Sequence[Shape]) -> None:
    return None  # opaque: its declared outputs are taken as they are


@dataclass(frozen=True)
class OpSpec:
    """What the graph format knows of one op type: its output shape from its inputs
    (``infer``; None when checked otherwise), its attributes and its arity ((min, max),
    None unbounded). The solver's op library (``solver/layout/ops.py: FAMILIES``) holds
    the rest; ``tests/test_op_registry.py`` checks every type has every part."""

    infer: Callable[[Any, Sequence[Shape]], Shape | None]
    attrs: type[Attrs] = NoAttrs
    inputs: tuple[int, int | None] = (1, 1)
    outputs: tuple[int, int | None] = (1, 1)
    onnx: tuple[str, ...] = ()
    """The ONNX operators ``layoutsat import`` maps to this type, and the node patterns it
    fuses into it (``pattern:<name>``); empty when no import makes it. For the unary,
    binary, reduction and pooling types an operator named here is mapped one to one, by
    this table (``solver/onnx_import/mapping.py``)."""


# What ``layoutsat import`` maps to each type (OpSpec.onnx). Clip (as ReLU6), Pow (square,
# square root) and GlobalAveragePool have mappers of their own.
_ONNX: dict[str, tuple[str, ...]] = {
    "relu": ("Relu", "Clip"), "gelu": ("Gelu", "pattern:gelu"), "silu": ("pattern:silu",),
    "sigmoid": ("Sigmoid",), "tanh": ("Tanh",), "exp": ("Exp",), "log": ("Log",),
    "sqrt": ("Sqrt", "Pow"), "reciprocal": ("Reciprocal",), "neg": ("Neg",), "abs": ("Abs",),
    "add": ("Add",), "sub": ("Sub",), "mul": ("Mul", "Pow"), "div": ("Div",),
    "maximum": ("Max",), "minimum": ("Min",),
    "reduce_sum": ("ReduceSum",), "reduce_mean": ("ReduceMean", "GlobalAveragePool"),
    "reduce_max": ("ReduceMax",), "max_pool2d": ("MaxPool",), "avg_pool2d": ("AveragePool",),
    "matmul": ("MatMul",), "linear": ("MatMul", "Gemm"), "conv2d": ("Conv",),
    "softmax": ("Softmax",), "layernorm": ("LayerNormalization", "pattern:layernorm"),
    "rmsnorm": ("pattern:rmsnorm",), "concat": ("Concat", "Tile"),
    "reshape": ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Gather"),
    "permute": ("Transpose",), "slice": ("Slice", "Split", "Gather"), "embedding": ("Gather",),
}


def _spec(op_type: str, infer: Callable[[Any, Sequence[Shape]], Shape | None],
          attrs: type[Attrs] = NoAttrs, inputs: tuple[int, int | None] = (1, 1),
          outputs: tuple[int, int | None] = (1, 1)) -> OpSpec:
    return OpSpec(infer, attrs, inputs, outputs, _ONNX.get(op_type, ()))


SPECS: dict[str, OpSpec] = {
    **{t: _spec(t, _same_as_first) for t in UNARY_TYPES},
    **{t: _spec(t, _broadcast, inputs=(2, 2)) for t in BINARY_TYPES},
    **{t: _spec(t, _reduce, ReduceAttrs) for t in REDUCE_TYPES},
    **{t: _spec(t, _pool, PoolAttrs) for t in POOL_TYPES},
    "matmul": _spec("matmul", partial(_matmul, linear=False), MatmulAttrs, (2, 2)),
    "linear": _spec("linear", partial(_matmul, linear=True), MatmulAttrs, (2, 3)),
    "conv2d": _spec("conv2d", _conv2d, Conv2dAttrs, (2, 3)),
    "softmax": _spec("softmax", _same_as_first, SoftmaxAttrs),
    "layernorm": _spec("layernorm", _same_as_first, NormAttrs, (1, 3)),
    "rmsnorm": _spec("rmsnorm", _same_as_first, NormAttrs, (1, 2)),
    "concat": _spec("concat", _concat, ConcatAttrs, (1, None)),
    "reshape": _spec("reshape", _reshape),
    "permute": _spec("permute", _permute, PermuteAttrs),
    "transpose": _spec("transpose", _transpose, TransposeAttrs),
    "slice": _spec("slice", _slice, SliceAttrs),
    "embedding": _spec("embedding", _embedding, inputs=(2, 2)),
    "opaque": _spec("opaque", _unchecked, OpaqueAttrs, (0, None), (1, None)),
}
OP_TYPES: tuple[str, ...] = tuple(SPECS)
