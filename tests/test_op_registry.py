"""Every layout op type has every part: its graph-format spec (shape rule, attributes,
arity: ``models/layout_ops.py: SPECS``), its op-library family (legality, configurations,
cost, scratch: ``solver/layout/ops.py: FAMILIES``), vector cycles where it computes
elementwise, and a row in the op table of docs/layout-format.md; and the import mapping
the registry declares (``OpSpec.onnx``) is the one the importer has. The checks are
functions so that a registry with a part missing is shown to fail them."""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from models.layout_ops import OP_TYPES, SPECS, Activation, Attrs, OpSpec
from solver.layout.ops import FAMILIES, SFPU_CYCLES, Eltwise, Family
from solver.onnx_import.mapping import MAPPERS
from solver.onnx_import.patterns import MATCHERS
from tests.test_layout_import import N, run, types, w

DOC = Path(__file__).resolve().parents[1] / "docs" / "layout-format.md"
PATTERNS = [m.__name__ for m in MATCHERS]


def documented_types(doc: str) -> set[str]:
    """The op types named in the first column of the doc's op table."""
    table = doc.split("Op types, their operands and attributes", 1)[1].split("\n\n", 2)[1]
    return {name for row in table.splitlines()[2:]
            for name in re.findall(r"[a-z_0-9]+", row.split("|")[1])}


def missing_parts(specs: Mapping[str, OpSpec], families: Mapping[str, Family],
                  cycles: Mapping[str, int], doc: str) -> list[str]:
    """What each op type lacks, as 'type: part' lines (empty when complete)."""
    documented = documented_types(doc)
    missing = []
    for t in sorted(set(specs) | set(families)):
        spec = specs.get(t)
        if spec is None or not callable(spec.infer) or not issubclass(spec.attrs, Attrs):
            missing.append(f"{t}: graph-format spec (shape rule, attributes, arity)")
        if t not in families:
            missing.append(f"{t}: op-library family (legality, configurations, cost, scratch)")
        elif isinstance(families[t], Eltwise) and t not in cycles:
            missing.append(f"{t}: vector cycles per tile")
        if t not in documented:
            missing.append(f"{t}: a row in the op table of docs/layout-format.md")
    missing += [f"activation {a}: vector cycles per tile"
                for a in typing.get_args(Activation) if a not in cycles]
    missing += [f"{key}: vector cycles per tile (used by reductions and pooling)"
                for key in ("reduce", "add") if key not in cycles]
    return missing


def test_every_op_type_has_every_part() -> None:
    assert OP_TYPES == tuple(SPECS)
    assert missing_parts(SPECS, FAMILIES, SFPU_CYCLES, DOC.read_text()) == []


@pytest.mark.parametrize("part", ["spec", "family", "cycles", "doc"])
def test_a_type_with_a_part_missing_is_reported(part: str) -> None:
    specs, families, cycles = dict(SPECS), dict(FAMILIES), dict(SFPU_CYCLES)
    doc = DOC.read_text()
    if part == "spec":
        del specs["tanh"]
    elif part == "family":
        del families["tanh"]
    elif part == "cycles":
        del cycles["tanh"]
    else:
        doc = doc.replace(" tanh ", " ")
    (line,) = missing_parts(specs, families, cycles, doc)
    assert line.startswith("tanh: ")


def test_the_doc_table_is_read_whole() -> None:
    assert {"relu", "max_pool2d", "avg_pool2d", "layernorm", "rmsnorm", "opaque",
            "reduce_max"} <= documented_types(DOC.read_text())


def import_mismatches(specs: Mapping[str, OpSpec], mappers: Mapping[str, object],
                      patterns: list[str]) -> list[str]:
    """Where the registry's import mapping and the importer's disagree: an operator or
    pattern a type claims that the importer lacks, or one the importer has that no type
    claims (empty when they agree)."""
    claimed = {name for spec in specs.values() for name in spec.onnx}
    known = set(mappers) | {f"pattern:{p}" for p in patterns}
    return ([f"{t}: claims {name}, which the importer does not map"
             for t, spec in specs.items() for name in spec.onnx if name not in known]
            + [f"{name}: mapped by the importer, claimed by no op type"
               for name in sorted(known - claimed)])


def test_the_registry_declares_the_importers_mapping() -> None:
    assert import_mismatches(SPECS, MAPPERS, PATTERNS) == []
    # no import makes these: transpose (Transpose becomes permute), rsqrt (inside rmsnorm's
    # pattern), opaque (the fallback for every operator without a mapper)
    assert {t for t, spec in SPECS.items() if not spec.onnx} == {"transpose", "rsqrt", "opaque"}


def test_an_import_mapping_out_of_step_is_reported() -> None:
    renamed = {**SPECS, "relu": replace(SPECS["relu"], onnx=("ReLU", "Clip"))}
    assert import_mismatches(renamed, MAPPERS, PATTERNS) == [
        "relu: claims ReLU, which the importer does not map",
        "Relu: mapped by the importer, claimed by no op type"]
    assert import_mismatches(SPECS, MAPPERS, [*PATTERNS, "swish"]) == [
        "pattern:swish: mapped by the importer, claimed by no op type"]


# The one-to-one import mapping, stated here independently of the registry: dropping an
# operator from ``OpSpec.onnx`` (which the importer's tables are built from) fails below.
ONE_TO_ONE = {
    "Relu": "relu", "Gelu": "gelu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp",
    "Log": "log", "Sqrt": "sqrt", "Reciprocal": "reciprocal", "Neg": "neg", "Abs": "abs",
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "maximum", "Min": "minimum",
    "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max", "ReduceSum": "reduce_sum",
    "MaxPool": "max_pool2d", "AveragePool": "avg_pool2d",
}


@pytest.mark.parametrize(("operator", "op_type"), sorted(ONE_TO_ONE.items()))
def test_a_one_node_model_imports_as_its_registered_type(operator: str, op_type: str) -> None:
    x = {"x": [1, 4, 32, 32]}
    if op_type in {t for t, s in SPECS.items() if s.inputs == (2, 2)}:
        graph, _ = run([N(operator, ["x", "c"], ["y"])], x, ["y"], {"c": w(1, 4, 32, 32)})
    elif operator == "ReduceSum":  # opset 13+: axes as an input
        graph, _ = run([N(operator, ["x", "axes"], ["y"])], x, ["y"],
                       {"axes": np.array([3], dtype=np.int64)})
    elif operator.startswith("Reduce"):
        graph, _ = run([N(operator, ["x"], ["y"], axes=[3])], x, ["y"])
    elif operator.endswith("Pool"):
        graph, _ = run([N(operator, ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], x, ["y"])
    else:
        graph, _ = run([N(operator, ["x"], ["y"])], x, ["y"], opset=20)
    assert op_type in types(graph) and "opaque" not in types(graph), types(graph)
    assert operator in SPECS[op_type].onnx
