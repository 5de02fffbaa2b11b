"""The import pipeline: read, pin dimensions, fold, fuse patterns, map, cancel layout ops,
check, stack."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from models.errors import InputValidationError, Issue
from models.layout import LayoutGraph, parse_graph
from solver.onnx_import.builder import Builder, UnknownShape, ints
from solver.onnx_import.cancel import cancel_layout_ops
from solver.onnx_import.load import (
    LoadedModel,
    evaluate_node,
    infer,
    opset_of,
    pin_dimensions,
    read_model,
)
from solver.onnx_import.mapping import ALIASES, MAPPERS, attr
from solver.onnx_import.patterns import Fused, Graph, find
from solver.onnx_import.stack import stack

ACTIVATIONS = ("relu", "gelu", "silu")
FUSES_ACTIVATION = ("conv2d", "linear", "matmul")


@dataclass(frozen=True)
class ImportOptions:
    batch: int | None = None
    seq_len: int | None = None
    dims: dict[str, int] = field(default_factory=dict)
    dtype: str = "bf16"
    weight_dtype: str | None = None
    repeat: int = 1
    name: str | None = None


@dataclass
class ImportResult:
    graph: LayoutGraph
    report: dict[str, Any]


def _fold_constants(loaded: LoadedModel) -> set[int]:
    """Evaluate every node whose inputs are all known (constants, or the shape of a value
    whose shape is known); their outputs become constants. Returns the folded nodes."""
    opset = opset_of(loaded.model)
    folded = set()
    for i, node in enumerate(loaded.model.graph.node):
        inputs = [n for n in node.input if n]
        if node.op_type == "Shape" and loaded.shapes.get(inputs[0]) is not None \
                and not node.attribute:
            loaded.constants[node.output[0]] = np.array(loaded.shapes[inputs[0]], dtype=np.int64)
            folded.add(i)
            continue
        if not all(n in loaded.constants for n in inputs):
            continue
        if not inputs and node.op_type not in ("Constant", "ConstantOfShape", "Range"):
            continue
        values = evaluate_node(node, [loaded.constants[n] for n in inputs], opset)
        if values is None:
            continue
        for name, value in zip(node.output, values, strict=False):
            loaded.constants[name] = value
            loaded.elem_types.setdefault(name, onnx.helper.np_dtype_to_tensor_dtype(value.dtype))
        folded.add(i)
    return folded


def _with_constants_folded(loaded: LoadedModel, folded: set[int]) -> LoadedModel:
    """Shape inference again, with the folded values as initializers: shapes that depended
    on shape arithmetic (Expand, Reshape from Shape) become known."""
    if all(loaded.shapes.get(o) is not None for n in loaded.model.graph.node for o in n.output
           if o):
        return loaded
    model = onnx.ModelProto()
    model.CopyFrom(loaded.model)
    keep = [n for i, n in enumerate(model.graph.node) if i not in folded]
    produced = {o for i, n in enumerate(model.graph.node) if i in folded for o in n.output}
    del model.graph.node[:]
    del model.graph.value_info[:]
    model.graph.node.extend(keep)
    model.graph.initializer.extend(onnx.numpy_helper.from_array(np.asarray(loaded.constants[o]), o)
                                   for o in produced if o in loaded.constants)
    return infer(model)


def _unused_dimension_options(options: ImportOptions, used: set[str]) -> list[str]:
    """A --batch, --seq-len or --dim that set no input dimension (the model's are static,
    or named otherwise) changed nothing; the user should hear it rather than trust it."""
    given = [("batch", f"--batch {options.batch}", options.batch),
             ("seq_len", f"--seq-len {options.seq_len}", options.seq_len),
             *((f"dim:{k}", f"--dim {k}={v}", v) for k, v in options.dims.items())]
    return [f"{flag} changed nothing: no input has a dynamic dimension it applies to (static "
            "dimensions keep their exported values; export with a dynamic axis to set them)"
            for key, flag, value in given if value is not None and key not in used]


def _declare_inputs(b: Builder, g: Graph) -> None:
    """Graph inputs a Conv reads directly arrive channels-last, as the device wants them."""
    for value in b.loaded.model.graph.input:
        if value.name in b.loaded.constants or not g.consumers.get(value.name):
            continue
        shape = b.onnx_shape(value.name)
        if shape is None:
            raise InputValidationError([Issue(("inputs", value.name), f"input '{value.name}' "
                                              "has no known shape", "onnx.unknown_shape")],
                                       "ONNX model")
        conv_reads = any(g.nodes[j].op_type == "Conv" for j in g.consumers[value.name])
        b.input(value.name, len(shape) == 4 and conv_reads)


def _emit_fused(b: Builder, f: Fused, name: str) -> bool:
    keeps_layout = f.op_type in ACTIVATIONS
    cl = keeps_layout and b.resolve(f.inputs[0]) in b.nhwc
    x = b.in_layout(f.inputs[0], cl)
    params = [b.constant(p, [int(b.loaded.constants[p].size)]) for p in f.inputs[1:]]
    return b.add(name, f.op_type, [x, *params], f.output, f.attrs, cl)


def _node_name(node: onnx.NodeProto, i: int) -> str:
    return node.name or f"{node.op_type}_{i}"


def _reshape_target(spec: list[int], src: list[int], allowzero: bool) -> list[int]:
    """The shape ONNX Reshape makes of ``spec`` for an input of shape ``src``: 0 copies the
    input dim, -1 takes what is left (stays -1 when the rest does not divide it)."""
    dims = [src[k] if d == 0 and not allowzero and k < len(src) else d
            for k, d in enumerate(spec)]
    rest = math.prod(d for d in dims if d != -1)
    if dims.count(-1) == 1 and rest and math.prod(src) % rest == 0:
        dims[dims.index(-1)] = math.prod(src) // rest
    return dims


def _check_reshape(b: Builder, node: onnx.NodeProto, name: str) -> None:
    """A Reshape must keep the element count; one that does not (a dimension baked into the
    exported target shape while --batch/--seq-len pinned another) is a bad model, never an
    op with a wrong shape."""
    src = b.onnx_shape(node.input[0])
    out = b.onnx_shape(node.output[0])
    spec = b.loaded.constants.get(b.resolve(node.input[1])) if len(node.input) > 1 else None
    if out is None and spec is not None and src is not None:
        out = _reshape_target(ints(spec), src, bool(attr(node, "allowzero", 0)))
    if src is None or out is None or math.prod(src) == math.prod(out):
        return
    count = f"{math.prod(out)} elements" if -1 not in out else \
        f"no whole number of elements ({math.prod(src)} is no multiple of " \
        f"{math.prod(d for d in out if d != -1)})"
    raise InputValidationError([Issue(
        ("nodes", name), f"Reshape node '{name}' turns input '{node.input[0]}' of shape {src} "
        f"({math.prod(src)} elements) into output '{node.output[0]}' of shape {out} ({count}); "
        "the element counts must agree (was a dimension fixed at export while "
        "--batch/--seq-len/--dim set another value?)", "onnx.reshape_elements")], "ONNX model")


def _plain(b: Builder, node: onnx.NodeProto, i: int) -> None:
    """Map one node, alias it away, or keep it opaque."""
    if node.op_type == "Reshape":
        _check_reshape(b, node, _node_name(node, i))
    if node.op_type in ALIASES and node.input and b.resolve(node.input[0]) in b.tensors:
        b.alias[node.output[0]] = b.resolve(node.input[0])
        b.report.folded[node.op_type] += 1
        return
    mapper = MAPPERS.get(node.op_type)
    known = all(b.onnx_shape(n) is not None for n in [*node.input, *node.output] if n)
    if mapper is not None and known and mapper(b, node, _node_name(node, i)):
        b.report.mapped[node.op_type] += 1
        return
    b.opaque(node, _node_name(node, i))


def _bias(b: Builder, op: dict, user: dict) -> str | None:
    """The constant a linear's only reader adds: its bias when it holds N values."""
    if op["type"] != "linear" or len(op["inputs"]) != 2 or user["type"] != "add":
        return None
    out = op["outputs"][0]
    other = next((t for t in user["inputs"] if t != out), None)
    n = b.shape(out)[-1]
    if other is None or b.tensors[other]["kind"] != "constant" or \
            b.shape(other)[-1] != n or math.prod(b.shape(other)) != n:
        return None
    return other


def _fuse_epilogues(b: Builder, outputs: set[str]) -> None:
    """A linear's bias add, then a relu/gelu/silu after conv2d/linear/matmul, run inside the
    producing op, as TTNN programs do."""
    for step in ("bias", "activation"):
        readers: dict[str, list[dict]] = {}
        for op in b.ops:
            for t in op["inputs"]:
                readers.setdefault(t, []).append(op)
        dropped = set()
        for op in b.ops:
            out = op["outputs"][0]
            users = readers.get(out, [])
            if len(users) != 1 or out in outputs or id(op) in dropped:
                continue
            user = users[0]
            if step == "bias" and (bias := _bias(b, op, user)) is not None:
                op["inputs"] = [*op["inputs"], bias]
            elif step == "activation" and op["type"] in FUSES_ACTIVATION and \
                    "activation" not in op["attrs"] and user["type"] in ACTIVATIONS:
                op["attrs"] = {**op["attrs"], "activation": user["type"]}
            else:
                continue
            op["outputs"] = user["outputs"]
            dropped.add(id(user))
            del b.tensors[out]
            b.report.fused[f"{op['type']}+{'bias' if step == 'bias' else user['type']}"] += 1
        b.ops = [op for op in b.ops if id(op) not in dropped]


def _outputs(b: Builder) -> list[str]:
    outs = []
    for value in b.loaded.model.graph.output:
        name = b.resolve(value.name)
        if b.tensors.get(name, {}).get("kind") == "activation" and name not in outs:
            outs.append(name)
        else:
            b.report.notes.append(f"graph output '{value.name}' is not computed by an op "
                                  "(an input or a constant) and is left out")
    if not outs:
        raise InputValidationError([Issue(("outputs",), "no graph output is computed by an op",
                                          "onnx.no_outputs")], "ONNX model")
    return outs


def import_onnx(data: bytes, options: ImportOptions = ImportOptions()) -> ImportResult:
    """A validated layoutsat graph and the report of what became of every ONNX node."""
    model = read_model(data)
    used = pin_dimensions(model, options.dims, options.batch, options.seq_len)
    loaded = infer(model)
    folded = _fold_constants(loaded)
    fold_counts = Counter(loaded.model.graph.node[i].op_type for i in folded)
    refolded = _with_constants_folded(loaded, folded)
    if refolded is not loaded:  # the first pass's nodes are gone from the new model
        loaded = refolded
        folded = _fold_constants(loaded)
        fold_counts.update(loaded.model.graph.node[i].op_type for i in folded)
    g = Graph(loaded)
    b = Builder(loaded, options.dtype, options.weight_dtype or options.dtype)
    b.report.folded.update(fold_counts)
    b.report.warnings += _unused_dimension_options(options, used)
    _declare_inputs(b, g)
    fused = find(g)
    inside = {j for f in fused.values() for j in f.nodes}
    try:
        for i, node in enumerate(g.nodes):
            if i in folded:
                continue
            if i in fused:
                f = fused[i]
                if _emit_fused(b, f, _node_name(node, i)):
                    b.report.fused[f.label] += 1
                    b.report.absorbed.update(g.nodes[j].op_type for j in f.nodes)
                else:
                    for j in sorted(f.nodes):
                        _plain(b, g.nodes[j], j)
            elif i not in inside:
                _plain(b, node, i)
    except UnknownShape as exc:
        raise InputValidationError([Issue(("nodes", exc.node.name or exc.node.op_type),
                                          f"the shape of '{exc.value}' ({exc.node.op_type} node "
                                          f"'{exc.node.name}') cannot be inferred; give "
                                          "--batch/--seq-len/--dim or export with static shapes",
                                          "onnx.unknown_shape")], "ONNX model") from None
    outputs = _outputs(b)
    cancel_layout_ops(b, set(outputs))
    _fuse_epilogues(b, set(outputs))
    name = options.name or model.graph.name or "onnx-model"
    doc = {"format": "layoutsat-graph", "version": 1, "name": name,
           "tensors": list(b.tensors.values()), "ops": b.ops, "outputs": outputs}
    doc = stack(doc, options.repeat)
    graph = parse_graph(doc)
    r = b.report
    report = {"ops": len(graph.ops), "tensors": len(graph.tensors),
              "mapped": dict(r.mapped), "fused": dict(r.fused), "fused_nodes": dict(r.absorbed),
              "folded": dict(r.folded),
              "opaque": dict(r.opaque), "permutes_inserted": r.permutes_inserted,
              "permutes_cancelled": r.permutes_cancelled,
              "permutes_as_reshape": r.permutes_as_reshape,
              "reshapes_cancelled": r.reshapes_cancelled,
              "repeat": options.repeat, "notes": r.notes, "warnings": r.warnings}
    return ImportResult(graph, report)
