"""Read an ONNX model, pin its symbolic dimensions, infer shapes and fold constants."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

from models.errors import InputValidationError, Issue

BATCH_NAMES = ("batch", "batch_size", "n", "b", "bs")
SEQ_NAMES = ("seq", "seq_len", "sequence", "sequence_length", "seqlen", "tokens", "s", "l")
FOLD_MAX_ELEMENTS = 1 << 26


def _fault(msg: str, rule: str, *loc: str | int) -> InputValidationError:
    return InputValidationError([Issue(loc, msg, rule)], "ONNX model")


def read_model(data: bytes) -> onnx.ModelProto:
    """Parse the bytes, or say clearly that they are no ONNX model."""
    if not data:
        raise _fault("the file is empty", "onnx.empty")
    try:
        model = onnx.load_from_string(data)
    except Exception as exc:  # protobuf raises a DecodeError with little context
        raise _fault(f"not an ONNX model (protobuf could not parse it: {exc})",
                     "onnx.corrupt") from None
    if not model.graph.node:
        raise _fault("the model's graph has no nodes (is this an ONNX model?)", "onnx.corrupt")
    return model


def _pick(name: str, index: int, dims: Mapping[str, int], batch: int | None,
          seq_len: int | None) -> tuple[str, int] | None:
    """The option a symbolic dimension takes its value from (``dim:NAME``, ``batch`` or
    ``seq_len``) and the value: named explicitly, else by its name, else the leading
    dimension is the batch."""
    if name in dims:
        return f"dim:{name}", dims[name]
    low = name.lower()
    if batch is not None and (low in BATCH_NAMES or "batch" in low or (not name and index == 0)):
        return "batch", batch
    if seq_len is not None and (low in SEQ_NAMES or "seq" in low or "token" in low):
        return "seq_len", seq_len
    if batch is not None and index == 0:
        return "batch", batch
    return None


def pin_dimensions(model: onnx.ModelProto, dims: Mapping[str, int], batch: int | None,
                   seq_len: int | None) -> set[str]:
    """Replace every symbolic input dimension with a value, or raise naming the input.
    Returns the options that set a dimension, so one that changed nothing can be told."""
    initializers = {t.name for t in model.graph.initializer}
    used = set()
    for i, value in enumerate(model.graph.input):
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        for j, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                continue
            chosen = _pick(dim.dim_param, j, dims, batch, seq_len)
            if chosen is None:
                label = f"'{dim.dim_param}'" if dim.dim_param else "unnamed"
                raise _fault(f"input '{value.name}' dimension {j} is dynamic ({label}) and no "
                             "value was given: pass --batch, --seq-len or --dim "
                             f"{dim.dim_param or 'NAME'}=VALUE", "onnx.dynamic_dim",
                             "inputs", i, j)
            used.add(chosen[0])
            dim.Clear()
            dim.dim_value = chosen[1]
    return used


@dataclass
class LoadedModel:
    """The model after shape inference: every value's shape and element type, constants."""

    model: onnx.ModelProto
    shapes: dict[str, list[int] | None] = field(default_factory=dict)
    elem_types: dict[str, int] = field(default_factory=dict)
    constants: dict[str, np.ndarray] = field(default_factory=dict)

    def shape(self, name: str) -> list[int] | None:
        if name in self.constants:
            return list(self.constants[name].shape)
        return self.shapes.get(name)


def _record(loaded: LoadedModel, values: Any) -> None:
    for v in values:
        if not v.type.HasField("tensor_type"):
            continue
        tt = v.type.tensor_type
        loaded.elem_types[v.name] = tt.elem_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            loaded.shapes[v.name] = [d.dim_value for d in tt.shape.dim]
        else:
            loaded.shapes.setdefault(v.name, None)


def infer(model: onnx.ModelProto) -> LoadedModel:
    """Shapes of every value (data propagation resolves shape arithmetic)."""
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:
        raise _fault(f"ONNX shape inference failed: {exc}", "onnx.shape_inference") from None
    loaded = LoadedModel(inferred)
    g = inferred.graph
    for t in g.initializer:
        loaded.constants[t.name] = numpy_helper.to_array(t)
        loaded.elem_types[t.name] = t.data_type
    _record(loaded, [*g.input, *g.value_info, *g.output])
    return loaded


def evaluate_node(node: onnx.NodeProto, inputs: list[np.ndarray],
                  opset: int) -> list[np.ndarray] | None:
    """Run one node on constant inputs with ONNX's reference implementation; None when it
    cannot (an operator the reference lacks, or a result too large to keep)."""
    from onnx.reference import ReferenceEvaluator

    try:
        graph = onnx.helper.make_graph(
            [node], "fold",
            [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
             for n in node.input if n],
            [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
             for n in node.output])
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        feeds = {n: v for n, v in zip([n for n in node.input if n], inputs, strict=True)}
        outputs = ReferenceEvaluator(model).run(None, feeds)
    except Exception:
        return None
    arrays = [np.asarray(o) for o in outputs]
    if any(a.size > FOLD_MAX_ELEMENTS for a in arrays):
        return None
    return arrays


def opset_of(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
