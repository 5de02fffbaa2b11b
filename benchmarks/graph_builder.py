"""A small builder for the ``layoutsat-graph`` format, shared by the graph generators
(``benchmarks/layout/generate.py``, ``benchmarks/layout_order_suite.py``)."""

from __future__ import annotations

import math


class Graph:
    """A tiny builder for the ``layoutsat-graph`` format."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tensors: list[dict] = []
        self.ops: list[dict] = []
        self.shapes: dict[str, list[int]] = {}

    def tensor(self, name: str, shape: list[int], kind: str, dtype: str = "bf16") -> str:
        self.tensors.append({"name": name, "shape": shape, "dtype": dtype, "kind": kind})
        self.shapes[name] = shape
        return name

    def input(self, name: str, shape: list[int], dtype: str = "bf16") -> str:
        return self.tensor(name, shape, "input", dtype)

    def const(self, name: str, shape: list[int], dtype: str = "bf16") -> str:
        return self.tensor(name, shape, "constant", dtype)

    def op(self, op_type: str, name: str, inputs: list[str], shape: list[int], **attrs) -> str:
        self.tensor(name, shape, "activation")
        self.ops.append({"name": name, "type": op_type, "inputs": inputs, "outputs": [name],
                         **({"attrs": attrs} if attrs else {})})
        return name

    def linear(self, name: str, x: str, n: int, bias: bool = True, **attrs) -> str:
        k = self.shapes[x][-1]
        w = self.const(f"{name}.w", [k, n], "bfp8")
        ins = [x, w] + ([self.const(f"{name}.b", [n])] if bias else [])
        return self.op("linear", name, ins, [*self.shapes[x][:-1], n], **attrs)

    def norm(self, kind: str, name: str, x: str) -> str:
        d = self.shapes[x][-1]
        ins = [x, self.const(f"{name}.gamma", [d])]
        if kind == "layernorm":
            ins.append(self.const(f"{name}.beta", [d]))
        return self.op(kind, name, ins, self.shapes[x])

    def conv(self, name: str, x: str, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
        n, h, w, c = self.shapes[x]
        pad = k // 2
        weight = self.const(f"{name}.w", [cout, c, k, k], "bfp8")
        ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        attrs = {"stride": [stride, stride], "padding": [pad, pad]}
        if relu:
            attrs["activation"] = "relu"
        return self.op("conv2d", name, [x, weight, self.const(f"{name}.b", [cout])],
                       [n, ho, wo, cout], **attrs)

    def unary(self, op_type: str, name: str, x: str) -> str:
        return self.op(op_type, name, [x], self.shapes[x])

    def binary(self, op_type: str, name: str, a: str, b: str) -> str:
        sa, sb = self.shapes[a], self.shapes[b]
        rank = max(len(sa), len(sb))
        pa, pb = [1] * (rank - len(sa)) + sa, [1] * (rank - len(sb)) + sb
        return self.op(op_type, name, [a, b], [max(x, y) for x, y in zip(pa, pb, strict=True)])

    def reshape(self, name: str, x: str, shape: list[int]) -> str:
        assert math.prod(shape) == math.prod(self.shapes[x])
        return self.op("reshape", name, [x], shape)

    def permute(self, name: str, x: str, perm: list[int]) -> str:
        return self.op("permute", name, [x], [self.shapes[x][p] for p in perm], perm=perm)

    def document(self, outputs: list[str]) -> dict:
        return {"format": "layoutsat-graph", "version": 1, "name": self.name,
                "tensors": self.tensors, "ops": self.ops, "outputs": outputs}
