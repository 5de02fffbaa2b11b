"""Decomposed operators the exporters emit, recognised and fused back into one op:
GELU (the erf form), SiLU (``x * sigmoid(x)``), LayerNorm and RMSNorm."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from solver.onnx_import.load import LoadedModel


@dataclass(frozen=True)
class Fused:
    """One op replacing ``nodes`` (indices), emitted where the last of them was."""

    label: str
    op_type: str
    inputs: tuple[str, ...]
    output: str
    nodes: tuple[int, ...]
    attrs: dict[str, Any] = field(default_factory=dict)


class Graph:
    """Producer and consumer lookups over the ONNX nodes."""

    def __init__(self, loaded: LoadedModel):
        self.loaded = loaded
        self.nodes = list(loaded.model.graph.node)
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = defaultdict(list)
        for i, n in enumerate(self.nodes):
            for o in n.output:
                self.producer[o] = i
            for x in n.input:
                self.consumers[x].append(i)
        self.graph_outputs = {o.name for o in loaded.model.graph.output}

    def node(self, name: str, op_type: str) -> tuple[int, onnx.NodeProto] | None:
        """The producer of ``name`` if it is an ``op_type`` node."""
        i = self.producer.get(name)
        if i is None or self.nodes[i].op_type != op_type:
            return None
        return i, self.nodes[i]

    def only_use(self, name: str, op_type: str) -> tuple[int, onnx.NodeProto] | None:
        """The single consumer of ``name`` if it is an ``op_type`` node (and ``name`` is no
        graph output, which fusing would hide)."""
        users = self.consumers.get(name, [])
        if len(users) != 1 or name in self.graph_outputs:
            return None
        i = users[0]
        return (i, self.nodes[i]) if self.nodes[i].op_type == op_type else None

    def scalar(self, name: str) -> float | None:
        value = self.loaded.constants.get(name)
        if value is None or value.size != 1:
            return None
        return float(np.asarray(value).reshape(-1)[0])

    def other(self, node: onnx.NodeProto, name: str) -> str | None:
        """The other input of a two-input node that has ``name`` as one input."""
        if len(node.input) != 2 or name not in node.input:
            return None
        a, b = node.input
        return b if a == name else a

    def last_axis(self, node: onnx.NodeProto, rank: int | None) -> bool:
        """Does this Reduce* node reduce exactly the last axis (keeping it)?"""
        axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
        if axes is None and len(node.input) > 1:
            value = self.loaded.constants.get(node.input[1])
            axes = None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]
        keep = next((a.i for a in node.attribute if a.name == "keepdims"), 1)
        return bool(keep) and axes is not None and rank is not None and \
            [a % rank for a in axes] == [rank - 1]


def _close(value: float | None, target: float) -> bool:
    return value is not None and math.isclose(value, target, rel_tol=1e-3)


def silu(g: Graph, i: int, n: onnx.NodeProto) -> Fused | None:
    """Sigmoid(x) whose only use is Mul(x, ·)."""
    if n.op_type != "Sigmoid":
        return None
    x = n.input[0]
    mul = g.only_use(n.output[0], "Mul")
    if mul is None or g.other(mul[1], n.output[0]) != x:
        return None
    return Fused("silu", "silu", (x,), mul[1].output[0], (i, mul[0]))


def gelu(g: Graph, i: int, n: onnx.NodeProto) -> Fused | None:
    """x * 0.5 * (1 + erf(x / sqrt(2))) in the orders exporters write it, from the Erf."""
    if n.op_type != "Erf":
        return None
    div = g.node(n.input[0], "Div") or g.node(n.input[0], "Mul")
    if div is None:
        return None
    x = div[1].input[0]
    k = g.scalar(div[1].input[1])
    if not (_close(k, math.sqrt(2)) if div[1].op_type == "Div" else _close(k, 1 / math.sqrt(2))):
        return None
    add = g.only_use(n.output[0], "Add")
    if add is None or not _close(g.scalar(g.other(add[1], n.output[0]) or ""), 1.0):
        return None
    mul = g.only_use(add[1].output[0], "Mul")
    if mul is None:
        return None
    partner = g.other(mul[1], add[1].output[0])
    half = g.node(partner or "", "Mul")
    if partner == x:  # (x * (1 + erf)) * 0.5
        last = g.only_use(mul[1].output[0], "Mul")
        if last is None or not _close(g.scalar(g.other(last[1], mul[1].output[0]) or ""), 0.5):
            return None
        return Fused("gelu", "gelu", (x,), last[1].output[0], (div[0], i, add[0], mul[0], last[0]))
    if half and x in half[1].input and _close(g.scalar(g.other(half[1], x) or ""), 0.5) \
            and g.only_use(half[1].output[0], "Mul"):  # (x * 0.5) * (1 + erf)
        return Fused("gelu", "gelu", (x,), mul[1].output[0], (div[0], half[0], i, add[0], mul[0]))
    return None


def _norm_tail(g: Graph, ve_add: tuple[int, onnx.NodeProto], v_name: str
               ) -> tuple[float, int, onnx.NodeProto] | None:
    """Add(var, eps) -> Sqrt: the epsilon and the Sqrt node."""
    eps = g.scalar(g.other(ve_add[1], v_name) or "")
    sqrt = g.only_use(ve_add[1].output[0], "Sqrt")
    if eps is None or eps <= 0 or sqrt is None:
        return None
    return eps, sqrt[0], sqrt[1]


def _affine(g: Graph, name: str, width: int, with_shift: bool
            ) -> tuple[str, list[str], list[int]]:
    """Optional Mul(·, gamma) and Add(·, beta) after a normalisation: output, params, nodes."""
    params: list[str] = []
    nodes: list[int] = []
    for op_type in ("Mul", "Add") if with_shift else ("Mul",):
        nxt = g.only_use(name, op_type)
        if nxt is None:
            break
        p = g.other(nxt[1], name)
        value = g.loaded.constants.get(p or "")
        if value is None or value.size != width:
            break
        params.append(p)
        nodes.append(nxt[0])
        name = nxt[1].output[0]
    return name, params, nodes


def layernorm(g: Graph, i: int, n: onnx.NodeProto) -> Fused | None:
    """Sub(x, ReduceMean(x)) -> Pow 2 -> ReduceMean -> Add eps -> Sqrt -> Div [-> Mul, Add]."""
    if n.op_type != "Sub":
        return None
    x, m = n.input
    shape = g.loaded.shape(x)
    mean = g.node(m, "ReduceMean")
    if mean is None or mean[1].input[0] != x or not shape or not g.last_axis(mean[1], len(shape)):
        return None
    users = g.consumers[n.output[0]]
    pow_ = next(((j, g.nodes[j]) for j in users if g.nodes[j].op_type == "Pow"), None)
    div = next(((j, g.nodes[j]) for j in users if g.nodes[j].op_type == "Div"), None)
    if len(users) != 2 or pow_ is None or div is None or not _close(g.scalar(pow_[1].input[1]), 2):
        return None
    var = g.only_use(pow_[1].output[0], "ReduceMean")
    if var is None or not g.last_axis(var[1], len(shape)):
        return None
    add = g.only_use(var[1].output[0], "Add")
    tail = add and _norm_tail(g, add, var[1].output[0])
    if not tail or div[1].input[1] != tail[2].output[0] or len(g.consumers[m]) != 1:
        return None
    out, params, affine = _affine(g, div[1].output[0], shape[-1], with_shift=True)
    nodes = (mean[0], i, pow_[0], var[0], add[0], tail[1], div[0], *affine)
    return Fused("layernorm", "layernorm", (x, *params), out, nodes, {"epsilon": tail[0]})


def rmsnorm(g: Graph, i: int, n: onnx.NodeProto) -> Fused | None:
    """Pow(x, 2) -> ReduceMean -> Add eps -> Sqrt -> (Reciprocal or 1/· -> Mul x | Div x)
    [-> Mul gamma]."""
    if n.op_type != "Pow" or not _close(g.scalar(n.input[1]), 2):
        return None
    x = n.input[0]
    shape = g.loaded.shape(x)
    var = g.only_use(n.output[0], "ReduceMean")
    if var is None or not shape or not g.last_axis(var[1], len(shape)):
        return None
    add = g.only_use(var[1].output[0], "Add")
    tail = add and _norm_tail(g, add, var[1].output[0])
    if not tail:
        return None
    s = tail[2].output[0]
    rec = g.only_use(s, "Reciprocal")
    one_over = g.only_use(s, "Div")
    if rec is None and one_over is not None and one_over[1].input[1] == s and \
            _close(g.scalar(one_over[1].input[0]), 1.0):  # rsqrt exported as 1 / sqrt
        rec = one_over
    if rec is not None:
        mul = g.only_use(rec[1].output[0], "Mul")
        if mul is None or g.other(mul[1], rec[1].output[0]) != x:
            return None
        core = (rec[0], mul[0])
        normed = mul[1].output[0]
    else:
        div = g.only_use(s, "Div")
        if div is None or div[1].input[0] != x:
            return None
        core = (div[0],)
        normed = div[1].output[0]
    out, params, affine = _affine(g, normed, shape[-1], with_shift=False)
    nodes = (i, var[0], add[0], tail[1], *core, *affine)
    return Fused("rmsnorm", "rmsnorm", (x, *params), out, nodes, {"epsilon": tail[0]})


MATCHERS = (layernorm, rmsnorm, gelu, silu)


def find(g: Graph) -> dict[int, Fused]:
    """Non-overlapping fusions, keyed by the index of the node they replace last."""
    taken: set[int] = set()
    found: dict[int, Fused] = {}
    for i, n in enumerate(g.nodes):
        if i in taken:
            continue
        for matcher in MATCHERS:
            fused = matcher(g, i, n)
            if fused and not taken & set(fused.nodes):
                taken |= set(fused.nodes)
                found[max(fused.nodes)] = fused
                break
    return found
