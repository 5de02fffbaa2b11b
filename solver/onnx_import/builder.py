"""Assemble the layoutsat graph: tensors with their dtypes and (NHWC) shapes, ops checked
against the op library as they are added, permutes where layouts meet, and the report.

Convolution chains run channels-last (NHWC) as on the device; ONNX is channels-first. A
4-D tensor is *channels-last* when a conv, pool or layout-agnostic op produced it; ops
that care about element order get an explicit ``permute`` back, which is a real cost.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from models.layout_ops import ShapeError, attrs_model, infer_shape
from solver.onnx_import.load import LoadedModel

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
               onnx.TensorProto.DOUBLE}


def nhwc_shape(shape: list[int]) -> list[int]:
    return [shape[i] for i in TO_NHWC]


def nhwc_axis(axis: int, rank: int = 4) -> int:
    """The NHWC position of NCHW axis ``axis``."""
    return TO_NHWC.index(axis % rank)


@dataclass
class Report:
    """What became of every ONNX node, counted per ONNX op type."""

    mapped: Counter = field(default_factory=Counter)
    fused: Counter = field(default_factory=Counter)
    absorbed: Counter = field(default_factory=Counter)
    folded: Counter = field(default_factory=Counter)
    opaque: Counter = field(default_factory=Counter)
    permutes_inserted: int = 0
    permutes_cancelled: int = 0
    permutes_as_reshape: int = 0
    reshapes_cancelled: int = 0
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Builder:
    def __init__(self, loaded: LoadedModel, dtype: str, weight_dtype: str):
        self.loaded = loaded
        self.dtype, self.weight_dtype = dtype, weight_dtype
        self.tensors: dict[str, dict[str, Any]] = {}
        self.ops: list[dict[str, Any]] = []
        self.op_names: set[str] = set()
        self.nhwc: set[str] = set()
        self.alias: dict[str, str] = {}
        self.converted: dict[tuple[str, bool], str] = {}
        self.report = Report()

    # ------------------------------------------------------------------ tensors

    def resolve(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def is_const(self, name: str) -> bool:
        return self.resolve(name) in self.loaded.constants

    def onnx_shape(self, name: str) -> list[int] | None:
        shape = self.loaded.shape(self.resolve(name))
        return None if shape is None else [int(d) for d in shape] or [1]

    def is_float(self, name: str) -> bool:
        return self.loaded.elem_types.get(self.resolve(name), onnx.TensorProto.FLOAT) \
            in FLOAT_TYPES

    def _dtype(self, name: str, weight: bool = False) -> str:
        if not self.is_float(name):
            return "uint32"
        return self.weight_dtype if weight else self.dtype

    def declare(self, name: str, shape: list[int], kind: str, dtype: str) -> str:
        if name not in self.tensors:
            self.tensors[name] = {"name": name, "shape": [max(1, int(d)) for d in shape] or [1],
                                  "dtype": dtype, "kind": kind}
        return name

    def input(self, name: str, channels_last: bool) -> None:
        shape = self.onnx_shape(name)
        if channels_last:
            self.nhwc.add(name)
            shape = nhwc_shape(shape)
        self.declare(name, shape, "input", self._dtype(name))

    def constant(self, name: str, shape: list[int] | None = None, weight: bool = False) -> str:
        """A constant operand (a weight, a bias, a scalar), declared with ``shape``."""
        name = self.resolve(name)
        if shape is None:
            shape = list(self.loaded.constants[name].shape) or [1]
        key = name if name not in self.tensors or self.tensors[name]["shape"] == shape \
            else f"{name}:{'x'.join(map(str, shape))}"
        return self.declare(key, shape, "constant", self._dtype(name, weight))

    def shape(self, name: str) -> list[int]:
        return self.tensors[name]["shape"]

    def in_layout(self, name: str, channels_last: bool) -> str:
        """``name`` as a graph tensor in the wanted layout, permuting when it differs."""
        name = self.resolve(name)
        if name in self.loaded.constants and name not in self.tensors:
            return self.constant(name)
        if (name in self.nhwc) == channels_last or len(self.shape(name)) != 4:
            return name
        key = (name, channels_last)
        if key not in self.converted:
            out = f"{name}.{'nhwc' if channels_last else 'nchw'}"
            perm = list(TO_NHWC if channels_last else TO_NCHW)
            shape = [self.shape(name)[p] for p in perm]
            self.declare(out, shape, "activation", self.tensors[name]["dtype"])
            if channels_last:
                self.nhwc.add(out)
            self._append(f"{out}.permute", "permute", [name], [out], {"perm": perm})
            self.report.permutes_inserted += 1
            self.converted[key] = out
        return self.converted[key]

    # ------------------------------------------------------------------ ops

    def _append(self, name: str, op_type: str, inputs: list[str], outputs: list[str],
                attrs: dict[str, Any]) -> None:
        unique, k = name, 1
        while unique in self.op_names:
            k += 1
            unique = f"{name}#{k}"
        self.op_names.add(unique)
        self.ops.append({"name": unique, "type": op_type, "inputs": inputs,
                         "outputs": outputs, "attrs": attrs})

    def fits(self, op_type: str, inputs: list[str], out_shape: list[int],
             attrs: dict[str, Any]) -> bool:
        """Would the op library accept this op (attributes, dtypes, output shape)?"""
        try:
            parsed = attrs_model(op_type).model_validate(attrs)
            shapes = [self.shape(i) for i in inputs]
            expected = infer_shape(op_type, parsed, shapes)
        except (ShapeError, ValueError):
            return False
        if expected is None:  # reshape: element counts must agree
            expected_ok = math.prod(shapes[0]) == math.prod(out_shape)
        else:
            expected_ok = list(expected) == list(out_shape)
        dtypes = [self.tensors[i]["dtype"] for i in inputs]
        index_ok = [op_type == "embedding" and j == 0 for j in range(len(inputs))]
        return expected_ok and all((d == "uint32") == ok for d, ok in zip(dtypes, index_ok,
                                                                            strict=True))

    def add(self, name: str, op_type: str, inputs: list[str], output: str,
            attrs: dict[str, Any], channels_last: bool = False) -> bool:
        """Add a mapped op producing ONNX value ``output``; False (nothing added) when the
        op library would reject it, so the caller can fall back."""
        shape = self.onnx_shape(output)
        if shape is None:
            return False
        if channels_last and len(shape) == 4:
            shape = nhwc_shape(shape)
        if not self.is_float(output) or not self.fits(op_type, inputs, shape, attrs):
            return False
        self.declare(output, shape, "activation", self.dtype)
        if channels_last and len(shape) == 4:
            self.nhwc.add(output)
        self._append(name, op_type, inputs, [output], attrs)
        return True

    def add_internal(self, name: str, op_type: str, inputs: list[str], output: str,
                     shape: list[int], attrs: dict[str, Any], channels_last: bool = False) -> str:
        """An op producing ``output``, a tensor with no ONNX value behind it (the 4-D view
        around a 1-D conv); the caller has checked that the op fits."""
        self.declare(output, shape, "activation", self.dtype)
        if channels_last:
            self.nhwc.add(output)
        self._append(name, op_type, inputs, [output], attrs)
        return output

    def opaque(self, node: onnx.NodeProto, name: str) -> None:
        """The node as it is: real shapes, DRAM in and out. 4-D values stay channels-last
        when an input is (an upsample between convs needs no permutes)."""
        inputs = [n for n in node.input if n]
        channels_last = any(self.resolve(n) in self.nhwc for n in inputs)
        operands = []
        for n in inputs:
            r = self.resolve(n)
            if r in self.loaded.constants and r not in self.tensors:
                operands.append(self.constant(r))
            elif r in self.tensors:
                operands.append(r)
        outputs = []
        for o in node.output:
            if not o:
                continue
            shape = self.onnx_shape(o)
            if shape is None:
                raise UnknownShape(o, node)
            if channels_last and len(shape) == 4:
                shape = nhwc_shape(shape)
                self.nhwc.add(o)
            outputs.append(self.declare(o, shape, "activation", self._dtype(o)))
        attrs = {"onnx_op": node.op_type, **_plain_attrs(node)}
        self._append(name, "opaque", list(dict.fromkeys(operands)), outputs, attrs)
        self.report.opaque[node.op_type] += 1


class UnknownShape(Exception):
    def __init__(self, value: str, node: onnx.NodeProto):
        super().__init__(value)
        self.value, self.node = value, node

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.value, self.node))


def _plain_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """Small, JSON-friendly ONNX attributes kept on an opaque op for the reader."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        value = onnx.helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        if isinstance(value, (int, float, str)) or (
                isinstance(value, list) and len(value) <= 16
                and all(isinstance(v, (int, float)) for v in value)):
            out[re.sub(r"\W", "_", a.name)] = value
    return out


def ints(values: Any) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]
