"""Cross-field rules of a layout graph: names, references, roles, arity, attributes,
dtypes, shapes and acyclicity. Each fault is an ``Issue`` with its JSON path.

Reference faults are found first; when any exists the op-level checks that need the
referenced tensors are skipped for that op only, so one typo does not hide the rest.
"""

from __future__ import annotations

import graphlib
import math
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import ValidationError

from models.errors import Issue, issues_from_pydantic
from models.layout_ops import ShapeError, arity, attrs_model, infer_shape
from models.mesh import MESH_PRESETS
from models.tx8 import DEVICE_PRESETS

if TYPE_CHECKING:
    from models.layout import LayoutGraph, OpDecl, TensorDecl

# Ops that move data without arithmetic keep the element type.
DTYPE_PRESERVING = frozenset({"reshape", "permute", "transpose", "slice", "concat"})


def graph_issues(g: LayoutGraph) -> list[Issue]:
    """Every cross-field fault of a schema-valid graph."""
    tensors = {t.name: t for t in g.tensors}
    issues = list(_name_issues(g)) + list(_device_issues(g)) + list(_role_issues(g, tensors))
    for i, op in enumerate(g.ops):
        issues += _op_issues(i, op, tensors)
    issues += _cycle_issues(g)
    issues += _measured_issues(g, tensors)
    return issues


def _name_issues(g: LayoutGraph) -> Iterator[Issue]:
    for what, items in (("tensors", g.tensors), ("ops", g.ops)):
        seen: dict[str, int] = {}
        for i, item in enumerate(items):
            if item.name in seen:
                yield Issue((what, i, "name"), f"name '{item.name}' is already used by "
                            f"{what}[{seen[item.name]}]; names must be unique", "names.duplicate")
            seen.setdefault(item.name, i)
    for name, n in Counter(g.outputs).items():
        if n > 1:
            yield Issue(("outputs",), f"'{name}' is listed {n} times", "outputs.duplicate")


def _device_issues(g: LayoutGraph) -> Iterator[Issue]:
    if isinstance(g.device, str) and g.device not in DEVICE_PRESETS:
        yield Issue(("device",), f"unknown device preset '{g.device}'; presets are "
                    f"{list(DEVICE_PRESETS)} (or give a full device spec)", "device.unknown")
    if isinstance(g.mesh, str) and g.mesh not in MESH_PRESETS:
        yield Issue(("mesh",), f"unknown mesh preset '{g.mesh}'; presets are "
                    f"{sorted(MESH_PRESETS)} (or give a full mesh spec)", "mesh.unknown")


def _role_issues(g: LayoutGraph, tensors: dict[str, TensorDecl]) -> Iterator[Issue]:
    producer: dict[str, tuple[int, int]] = {}
    for i, op in enumerate(g.ops):
        for j, name in enumerate(op.outputs):
            t = tensors.get(name)
            if t is None:
                continue  # reported with the op's references
            if t.kind != "activation":
                yield Issue(("ops", i, "outputs", j), f"'{name}' is a graph {t.kind}; only "
                            "activations are produced by ops", "graph.produced_input")
            elif name in producer:
                yield Issue(("ops", i, "outputs", j), f"'{name}' is already produced by "
                            f"ops[{producer[name][0]}]; every tensor has one producer",
                            "graph.single_producer")
            else:
                producer[name] = (i, j)
    for k, t in enumerate(g.tensors):
        if t.kind == "activation" and t.name not in producer:
            yield Issue(("tensors", k), f"activation '{t.name}' is produced by no op; declare "
                        "it kind 'input' or 'constant', or add its producer", "graph.no_producer")
    for k, name in enumerate(g.outputs):
        t = tensors.get(name)
        if t is None:
            yield Issue(("outputs", k), f"unknown tensor '{name}'", "ref.tensor")
        elif t.kind != "activation":
            yield Issue(("outputs", k), f"graph output '{name}' is a graph {t.kind}; outputs "
                        "must be activations produced by ops", "outputs.kind")


def _op_issues(i: int, op: OpDecl, tensors: dict[str, TensorDecl]) -> list[Issue]:
    issues: list[Issue] = []
    for field in ("inputs", "outputs"):
        for j, name in enumerate(getattr(op, field)):
            if name not in tensors:
                issues.append(Issue(("ops", i, field, j), f"op '{op.name}' refers to unknown "
                                    f"tensor '{name}'", "ref.tensor"))
    (in_lo, in_hi), (out_lo, out_hi) = arity(op.type)
    for field, lo, hi in (("inputs", in_lo, in_hi), ("outputs", out_lo, out_hi)):
        n = len(getattr(op, field))
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi else f"at least {lo}"
            issues.append(Issue(("ops", i, field), f"{op.type} op '{op.name}' needs {want} "
                                f"{field}, got {n}", f"{op.type}.arity"))
    try:
        attrs = attrs_model(op.type).model_validate(op.attrs)
    except ValidationError as exc:
        issues += issues_from_pydantic(exc, ("ops", i, "attrs"))
        return issues
    if issues:
        return issues
    ins = [tensors[n] for n in op.inputs]
    outs = [tensors[n] for n in op.outputs]
    issues += _dtype_issues(i, op, ins, outs)
    issues += _shape_issues(i, op, attrs, ins, outs)
    return issues


def _dtype_issues(i: int, op: OpDecl, ins: list[TensorDecl],
                  outs: list[TensorDecl]) -> Iterator[Issue]:
    if op.type == "opaque":
        return
    for field, ts in (("inputs", ins), ("outputs", outs)):
        for j, t in enumerate(ts):
            index_ok = op.type == "embedding" and field == "inputs" and j == 0
            if (t.dtype == "uint32") != index_ok:
                want = "uint32 indices" if index_ok else "a floating-point dtype"
                yield Issue(("ops", i, field, j), f"{op.type} op '{op.name}': tensor "
                            f"'{t.name}' is {t.dtype}; this operand needs {want}",
                            "dtype.kind")
    if op.type in DTYPE_PRESERVING:
        for j, t in enumerate(ins):
            if t.dtype != outs[0].dtype:
                yield Issue(("ops", i, "inputs", j), f"{op.type} op '{op.name}' moves data "
                            f"without converting it: input '{t.name}' is {t.dtype} but output "
                            f"'{outs[0].name}' is {outs[0].dtype}", "dtype.preserve")


def _shape_issues(i: int, op: OpDecl, attrs, ins: list[TensorDecl],
                  outs: list[TensorDecl]) -> Iterator[Issue]:
    try:
        expected = infer_shape(op.type, attrs, [t.shape for t in ins])
    except ShapeError as exc:
        yield Issue(("ops", i), f"{op.type} op '{op.name}': {exc}", f"{op.type}.shape")
        return
    out = outs[0]
    if op.type == "reshape" and math.prod(out.shape) != math.prod(ins[0].shape):
        yield Issue(("ops", i, "outputs", 0), f"reshape op '{op.name}': output '{out.name}' "
                    f"{out.shape} has {math.prod(out.shape)} elements but input "
                    f"{ins[0].shape} has {math.prod(ins[0].shape)}", "reshape.shape")
    if expected is not None and out.shape != expected:
        yield Issue(("ops", i, "outputs", 0), f"{op.type} op '{op.name}': output '{out.name}' "
                    f"is declared {out.shape} but the op produces {expected}",
                    f"{op.type}.shape")


def _cycle_issues(g: LayoutGraph) -> Iterator[Issue]:
    producer = {t: op.name for op in g.ops for t in op.outputs}
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for op in g.ops:
        sorter.add(op.name, *(producer[t] for t in op.inputs if t in producer))
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        path = " -> ".join(exc.args[1])
        yield Issue(("ops",), f"the op graph has a cycle: {path}; it must be acyclic",
                    "graph.acyclic")


def _measured_issues(g: LayoutGraph, tensors: dict[str, TensorDecl]) -> Iterator[Issue]:
    ops = {op.name for op in g.ops}
    seen: set[tuple[str, ...]] = set()
    for k, m in enumerate(g.measured.ops):
        if m.op not in ops:
            yield Issue(("measured", "ops", k, "op"), f"unknown op '{m.op}'", "ref.op")
        if (m.op, m.config) in seen:
            yield Issue(("measured", "ops", k), f"op '{m.op}' config '{m.config}' is measured "
                        "twice", "measured.duplicate")
        seen.add((m.op, m.config))
    for k, r in enumerate(g.measured.reshards):
        if r.tensor not in tensors:
            yield Issue(("measured", "reshards", k, "tensor"), f"unknown tensor '{r.tensor}'",
                        "ref.tensor")
        if r.from_ == r.to:
            yield Issue(("measured", "reshards", k), f"a reshard from '{r.from_}' to itself "
                        "moves nothing", "measured.noop")
        if (r.tensor, r.from_, r.to) in seen:
            yield Issue(("measured", "reshards", k), f"reshard of '{r.tensor}' from "
                        f"'{r.from_}' to '{r.to}' is measured twice", "measured.duplicate")
        seen.add((r.tensor, r.from_, r.to))
