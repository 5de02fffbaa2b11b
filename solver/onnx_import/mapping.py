"""ONNX operators to op-library ops, one node at a time. Each mapper returns False when the
node falls outside what the library op expresses; the importer then keeps it ``opaque``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from models.layout_ops import (
    BINARY_TYPES,
    POOL_TYPES,
    REDUCE_TYPES,
    SPECS,
    UNARY_TYPES,
    ShapeError,
    attrs_model,
    infer_shape,
)
from solver.onnx_import.builder import Builder, ints, nhwc_axis, nhwc_shape

Mapper = Callable[[Builder, onnx.NodeProto, str], bool]

OWN_MAPPER = ("Clip", "Pow", "GlobalAveragePool")
"""Operators that make a unary, binary or reduction type through a mapper of their own."""


def one_to_one(types: tuple[str, ...]) -> dict[str, str]:
    """ONNX operator -> layout type, for the operators the op registry
    (``models/layout_ops.py: SPECS``, ``OpSpec.onnx``) maps one to one onto ``types``."""
    return {name: t for t in types for name in SPECS[t].onnx
            if name not in OWN_MAPPER and not name.startswith("pattern:")}


UNARY = one_to_one(UNARY_TYPES)
BINARY = one_to_one(BINARY_TYPES)
REDUCE = one_to_one(REDUCE_TYPES)
POOL = one_to_one(POOL_TYPES)


def attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _const_ints(b: Builder, name: str) -> list[int] | None:
    value = b.loaded.constants.get(b.resolve(name)) if name else None
    return None if value is None else ints(value)


def _channels_last(b: Builder, names: list[str]) -> bool:
    return any(b.resolve(n) in b.nhwc for n in names)


def unary(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    cl = _channels_last(b, [node.input[0]])
    x = b.in_layout(node.input[0], cl)
    return b.add(name, UNARY[node.op_type], [x], node.output[0], {}, cl)


def clip(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    """Clip(x, 0, max) is ReLU6-style: a relu for layout and cost purposes."""
    low = b.loaded.constants.get(b.resolve(node.input[1])) if len(node.input) > 1 and \
        node.input[1] else attr(node, "min")
    if low is None or float(np.asarray(low).reshape(-1)[0]) != 0.0:
        return False
    cl = _channels_last(b, [node.input[0]])
    return b.add(name, "relu", [b.in_layout(node.input[0], cl)], node.output[0], {}, cl)


def pow_(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    """x^2 is x*x and x^0.5 is sqrt(x); other powers stay opaque."""
    exponent = b.loaded.constants.get(b.resolve(node.input[1]))
    if exponent is None or exponent.size != 1:
        return False
    e = float(exponent.reshape(-1)[0])
    cl = _channels_last(b, [node.input[0]])
    x = b.in_layout(node.input[0], cl)
    if e == 2.0:
        return b.add(name, "mul", [x, x], node.output[0], {}, cl)
    if e == 0.5:
        return b.add(name, "sqrt", [x], node.output[0], {}, cl)
    return False


def _broadcast_constant(b: Builder, name: str, channels_last: bool) -> str:
    """A constant operand of a binary op, its shape made to broadcast against NHWC."""
    shape = list(b.loaded.constants[b.resolve(name)].shape) or [1]
    if channels_last and len(shape) <= 4 and len(shape) > 1:
        padded = [1] * (4 - len(shape)) + shape
        return b.constant(name, nhwc_shape(padded))
    return b.constant(name, shape)


def binary(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    if len(node.input) != 2:
        return False
    cl = _channels_last(b, list(node.input))
    operands = [(_broadcast_constant(b, n, cl) if b.is_const(n) else b.in_layout(n, cl))
                for n in node.input]
    return b.add(name, BINARY[node.op_type], operands, node.output[0], {}, cl)


def _weight(b: Builder, name: str, shape: list[int]) -> str:
    return b.constant(name, shape, weight=True)


def matmul(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    a_name, w_name = node.input
    a = b.in_layout(a_name, False)
    if b.is_const(w_name):
        w_shape = list(b.loaded.constants[b.resolve(w_name)].shape)
        if len(w_shape) == 2:
            return b.add(name, "linear", [a, _weight(b, w_name, w_shape)], node.output[0], {})
        return b.add(name, "matmul", [a, _weight(b, w_name, w_shape)], node.output[0], {})
    return b.add(name, "matmul", [a, b.in_layout(w_name, False)], node.output[0], {})


def gemm(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    if attr(node, "transA", 0) or not b.is_const(node.input[1]):
        return False
    w_shape = list(b.loaded.constants[b.resolve(node.input[1])].shape)
    if attr(node, "transB", 0):
        w_shape = w_shape[::-1]
    inputs = [b.in_layout(node.input[0], False), _weight(b, node.input[1], w_shape)]
    if len(node.input) > 2 and node.input[2]:
        if not b.is_const(node.input[2]):
            return False
        inputs.append(b.constant(node.input[2], [w_shape[1]]))
    return b.add(name, "linear", inputs, node.output[0], {})


def _symmetric_pads(node: onnx.NodeProto) -> list[int] | None:
    pads = list(attr(node, "pads", [0, 0, 0, 0]))
    if attr(node, "auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET") or len(pads) != 4:
        return None
    return pads[:2] if pads[:2] == pads[2:] else None


def conv(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    w = b.loaded.constants.get(b.resolve(node.input[1]))
    if w is not None and w.ndim == 3:
        return conv1d(b, node, name)
    pads = _symmetric_pads(node)
    if w is None or w.ndim != 4 or pads is None:
        return False
    inputs = [b.in_layout(node.input[0], True), _weight(b, node.input[1], list(w.shape))]
    if len(node.input) > 2 and node.input[2]:
        inputs.append(b.constant(node.input[2]))
    attrs = {"stride": list(attr(node, "strides", [1, 1])), "padding": pads,
             "dilation": list(attr(node, "dilations", [1, 1])), "groups": attr(node, "group", 1)}
    return b.add(name, "conv2d", inputs, node.output[0], attrs, True)


def _conv2d_shape(shapes: list[list[int]], attrs: dict) -> list[int] | None:
    try:
        return infer_shape("conv2d", attrs_model("conv2d").model_validate(attrs), shapes)
    except (ShapeError, ValueError):
        return None


def conv1d(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    """Conv over [N, C, L] as conv2d over [N, 1, L, C] with a [1, k] kernel: a reshape to
    [N, C, 1, L] (same element order), then the permutes any conv2d gets, and back."""
    w = b.loaded.constants[b.resolve(node.input[1])]
    pads = list(attr(node, "pads", [0, 0]))
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    if attr(node, "auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET") or len(pads) != 2 or \
            pads[0] != pads[1] or b.is_const(node.input[0]) or (bias and not b.is_const(bias)) \
            or not (b.is_float(node.input[0]) and b.is_float(node.output[0])):
        return False
    n, c, length = b.onnx_shape(node.input[0])
    _, cout, out_len = b.onnx_shape(node.output[0])
    kernel = [w.shape[0], w.shape[1], 1, w.shape[2]]
    attrs = {"stride": [1, *attr(node, "strides", [1])], "padding": [0, pads[0]],
             "dilation": [1, *attr(node, "dilations", [1])], "groups": attr(node, "group", 1)}
    out4 = [n, 1, out_len, cout]
    bias_shape = [[int(b.loaded.constants[b.resolve(bias)].size)]] if bias else []
    if _conv2d_shape([[n, 1, length, c], kernel, *bias_shape], attrs) != out4:
        return False
    x = b.add_internal(f"{name}.to2d", "reshape", [b.in_layout(node.input[0], False)],
                       f"{node.output[0]}.in2d", [n, c, 1, length], {})
    inputs = [b.in_layout(x, True), _weight(b, node.input[1], kernel)]
    if bias:
        inputs.append(b.constant(bias))
    y = b.add_internal(name, "conv2d", inputs, f"{node.output[0]}.2d", out4, attrs, True)
    return b.add(f"{name}.to1d", "reshape", [b.in_layout(y, False)], node.output[0], {})


def pool(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    pads = _symmetric_pads(node)
    kernel = list(attr(node, "kernel_shape", []))
    if pads is None or len(kernel) != 2 or attr(node, "ceil_mode", 0) or \
            any(d != 1 for d in attr(node, "dilations", [1, 1])):
        return False
    attrs = {"kernel_size": kernel, "stride": list(attr(node, "strides", kernel)),
             "padding": pads}
    return b.add(name, POOL[node.op_type], [b.in_layout(node.input[0], True)], node.output[0],
                 attrs, True)


def global_pool(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    x = b.in_layout(node.input[0], True)
    if len(b.shape(x)) != 4:
        return False
    return b.add(name, "reduce_mean", [x], node.output[0], {"dims": [1, 2], "keepdim": True},
                 True)


def softmax(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    shape = b.onnx_shape(node.input[0])
    axis = attr(node, "axis", -1) % len(shape)
    cl = _channels_last(b, [node.input[0]]) and len(shape) == 4
    dim = nhwc_axis(axis) if cl else axis
    return b.add(name, "softmax", [b.in_layout(node.input[0], cl)], node.output[0],
                 {"dim": dim}, cl)


def layer_norm(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    rank = len(b.onnx_shape(node.input[0]))
    if attr(node, "axis", -1) % rank != rank - 1 or len(node.output) > 1 and any(node.output[1:]):
        return False
    x = b.in_layout(node.input[0], False)
    params = [b.constant(p) for p in node.input[1:] if p and b.is_const(p)]
    return b.add(name, "layernorm", [x, *params], node.output[0],
                 {"epsilon": float(attr(node, "epsilon", 1e-5))})


def reduce(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    shape = b.onnx_shape(node.input[0])
    axes = attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = _const_ints(b, node.input[1])
        if axes is None:
            return False
    axes = [a % len(shape) for a in (axes or range(len(shape)))]
    keep = bool(attr(node, "keepdims", 1))
    cl = _channels_last(b, [node.input[0]]) and len(shape) == 4
    if cl and not keep:  # the kept dims must come out in the same order either way
        kept_nchw = [d for d in range(4) if d not in axes]
        cl = kept_nchw == sorted(kept_nchw, key=nhwc_axis)
    dims = [nhwc_axis(a) for a in axes] if cl else axes
    return b.add(name, REDUCE[node.op_type], [b.in_layout(node.input[0], cl)], node.output[0],
                 {"dims": sorted(dims), "keepdim": keep}, cl and keep)


def concat(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    shape = b.onnx_shape(node.output[0])
    axis = attr(node, "axis") % len(shape)
    cl = _channels_last(b, list(node.input)) and len(shape) == 4
    inputs = [b.constant(n) if b.is_const(n) and not cl else b.in_layout(n, cl)
              for n in node.input]
    return b.add(name, "concat", inputs, node.output[0],
                 {"dim": nhwc_axis(axis) if cl else axis}, cl)


def tile(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    """A Tile that repeats one dim r times is a concat of r copies along it (how
    ``repeat_interleave`` exports the shared KV heads of grouped-query attention); other
    tilings stay opaque."""
    repeats = _const_ints(b, node.input[1])
    grown = [d for d, r in enumerate(repeats or []) if r != 1]
    if repeats is None or len(grown) != 1 or repeats[grown[0]] < 2:
        return False
    x = b.in_layout(node.input[0], False)
    return b.add(name, "concat", [x] * repeats[grown[0]], node.output[0], {"dim": grown[0]})


def reshape(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    """Reshape, Flatten, Squeeze, Unsqueeze: a channels-last input is put back in NCHW order
    first unless its spatial dims are 1 (then both orders hold the same elements)."""
    x = b.resolve(node.input[0])
    if x in b.nhwc and b.shape(x)[1:3] != [1, 1]:
        x = b.in_layout(x, False)
    return b.add(name, "reshape", [x], node.output[0], {})


def transpose(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    rank = len(b.onnx_shape(node.input[0]))
    perm = list(attr(node, "perm", list(range(rank))[::-1]))
    return b.add(name, "permute", [b.in_layout(node.input[0], False)], node.output[0],
                 {"perm": perm})


def slice_(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    shape = b.onnx_shape(node.input[0])
    if len(node.input) > 1:
        parts = [_const_ints(b, n) if n else None for n in node.input[1:5]] + [None] * 4
        starts, ends, axes, steps = parts[:4]
        if starts is None or ends is None:
            return False
    else:
        starts, ends, axes, steps = (attr(node, "starts"), attr(node, "ends"),
                                     attr(node, "axes"), None)
    axes = [a % len(shape) for a in (axes or range(len(starts)))]
    steps = steps or [1] * len(axes)
    full_s, full_e, full_st = [0] * len(shape), list(shape), [1] * len(shape)
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        if st <= 0:
            return False
        size = shape[a]
        full_s[a] = max(0, min(s + size if s < 0 else s, size))
        full_e[a] = max(0, min(e + size if e < 0 else e, size))
    cl = _channels_last(b, [node.input[0]]) and len(shape) == 4
    if cl:
        full_s, full_e, full_st = (nhwc_shape(v) for v in (full_s, full_e, full_st))
    return b.add(name, "slice", [b.in_layout(node.input[0], cl)], node.output[0],
                 {"starts": full_s, "ends": full_e, "steps": full_st}, cl)


def split(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    """Split becomes one slice per output (the pieces along ``axis``)."""
    shape = b.onnx_shape(node.input[0])
    axis = attr(node, "axis", 0) % len(shape)
    pieces = [b.onnx_shape(out) for out in node.output]
    if any(p is None for p in pieces):
        return False
    x = b.in_layout(node.input[0], False)
    slices, start = [], 0
    for out, piece in zip(node.output, pieces, strict=True):
        starts, ends = [0] * len(shape), list(shape)
        starts[axis], ends[axis] = start, start + piece[axis]
        start += piece[axis]
        attrs = {"starts": starts, "ends": ends}
        if not b.fits("slice", [x], piece, attrs):
            return False
        slices.append((out, attrs))
    return all(b.add(f"{name}.{k}", "slice", [x], out, attrs)
               for k, (out, attrs) in enumerate(slices))


def _gather_positions(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    """Constant, consecutive indices (``x[:, 0]``, ``x[:, 2:5]`` as a list) pick a slice;
    a scalar index also drops the axis, which a reshape after the slice does."""
    shape = b.onnx_shape(node.input[0])
    axis = attr(node, "axis", 0) % len(shape)
    index = b.loaded.constants[b.resolve(node.input[1])]
    picks = ints(index)
    if index.ndim > 1 or not picks or not all(-shape[axis] <= i < shape[axis] for i in picks):
        return False
    first = picks[0] % shape[axis]
    if [i % shape[axis] for i in picks] != list(range(first, first + len(picks))):
        return False
    starts, ends = [0] * len(shape), list(shape)
    starts[axis], ends[axis] = first, first + len(picks)
    if index.ndim == 1:  # the axis stays: a slice alone, in whichever layout x has
        cl = _channels_last(b, [node.input[0]]) and len(shape) == 4
        if cl:
            starts, ends = nhwc_shape(starts), nhwc_shape(ends)
        return b.add(name, "slice", [b.in_layout(node.input[0], cl)], node.output[0],
                     {"starts": starts, "ends": ends}, cl)
    x = b.in_layout(node.input[0], False)
    attrs = {"starts": starts, "ends": ends}
    picked = [e - s for s, e in zip(starts, ends, strict=True)]
    if not b.is_float(node.output[0]) or not b.fits("slice", [x], picked, attrs):
        return False
    part = b.add_internal(f"{name}.slice", "slice", [x], f"{node.output[0]}.picked", picked,
                          attrs)
    return b.add(name, "reshape", [part], node.output[0], {})


def gather(b: Builder, node: onnx.NodeProto, name: str) -> bool:
    """An embedding lookup: a constant [vocab, dim] table indexed along axis 0 by computed
    indices; or constant positions of an activation (a slice)."""
    if b.is_const(node.input[1]) and not b.is_const(node.input[0]):
        return _gather_positions(b, node, name)
    table = b.loaded.constants.get(b.resolve(node.input[0]))
    if table is None or table.ndim != 2 or attr(node, "axis", 0) != 0 or b.is_const(node.input[1]):
        return False
    idx = b.in_layout(node.input[1], False)
    return b.add(name, "embedding", [idx, _weight(b, node.input[0], list(table.shape))],
                 node.output[0], {})


MAPPERS: dict[str, Mapper] = {
    **{t: unary for t in UNARY}, **{t: binary for t in BINARY}, **{t: reduce for t in REDUCE},
    **{t: pool for t in POOL}, "Pow": pow_, "Clip": clip, "MatMul": matmul, "Gemm": gemm,
    "Conv": conv,
    "GlobalAveragePool": global_pool, "Softmax": softmax, "LayerNormalization": layer_norm,
    "Concat": concat, "Reshape": reshape, "Flatten": reshape, "Squeeze": reshape,
    "Unsqueeze": reshape, "Transpose": transpose, "Slice": slice_, "Split": split,
    "Gather": gather, "Tile": tile,
}
# Nodes that only rename a value (or change its numeric type): the output is the input.
ALIASES = {"Identity", "Cast", "Dropout", "CastLike"}

