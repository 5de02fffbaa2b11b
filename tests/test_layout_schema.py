"""Validation of layout graphs: one failing input per rule, all faults at once, the schema file."""

from __future__ import annotations

import json
from typing import Any

import pytest

from models.errors import InputValidationError
from models.family import detect_family
from models.layout import LayoutGraph, LayoutPlan, parse_graph
from tests.conftest import ROOT
from tests.layout_fixtures import EXAMPLES, SMALL_EXAMPLE, load, op, tensor, tiny


def issues_of(data: Any) -> list:
    with pytest.raises(InputValidationError) as info:
        parse_graph(data)
    return info.value.issues


@pytest.mark.parametrize("path", [*EXAMPLES, SMALL_EXAMPLE], ids=lambda p: p.name)
def test_every_example_graph_validates_and_is_detected_as_layout(path):
    data = load(path)
    assert detect_family(data) == "layout"
    assert len(parse_graph(data).ops) == len(data["ops"])


@pytest.mark.parametrize(("model", "name", "flag"), [(LayoutGraph, "graph", ""),
                                                      (LayoutPlan, "plan", " --answer")])
def test_the_published_json_schemas_are_current(model, name, flag):
    on_disk = json.loads((ROOT / "docs" / f"layout-{name}.schema.json").read_text())
    assert on_disk == model.model_json_schema(by_alias=True), (
        f"regenerate with: layoutsat layout schema{flag} > docs/layout-{name}.schema.json")


def mutate(change) -> dict:
    g = tiny()
    change(g)
    return g


def add_op(g: dict, new_op: dict, *tensors: dict) -> None:
    g["tensors"] += list(tensors)
    g["ops"].append(new_op)


CASES = [
    ("duplicate tensor name", lambda g: g["tensors"].append(tensor("x", [4], "input")),
     "names.duplicate", "$.tensors[6].name"),
    ("duplicate op name",
     lambda g: add_op(g, op("fc", "relu", ["out"], ["z"]), tensor("z", [1, 128, 256])),
     "names.duplicate", "$.ops[3].name"),
    ("unknown tensor", lambda g: g["ops"][1].update(inputs=["hh"]), "ref.tensor",
     "$.ops[1].inputs[0]"),
    ("two producers", lambda g: add_op(g, op("again", "relu", ["x"], ["h"])),
     "graph.single_producer", "$.ops[3].outputs[0]"),
    ("op writes an input", lambda g: g["ops"][1].update(outputs=["x"]), "graph.produced_input",
     "$.ops[1].outputs[0]"),
    ("activation without producer", lambda g: g["tensors"].append(tensor("z", [4])),
     "graph.no_producer", "$.tensors[6]"),
    ("graph output is an input", lambda g: g["outputs"].append("x"), "outputs.kind",
     "$.outputs[1]"),
    ("arity", lambda g: g["ops"][2].update(inputs=["y"]), "add.arity", "$.ops[2].inputs"),
    ("unknown attribute", lambda g: g["ops"][1].update(attrs={"alpha": 1}),
     "schema.extra_forbidden", "$.ops[1].attrs.alpha"),
    ("bad attribute value", lambda g: g["ops"][0].update(attrs={"math_fidelity": "HiFi9"}),
     "schema.literal_error", "$.ops[0].attrs.math_fidelity"),
    ("integer tensor in a float op", lambda g: g["tensors"][4].update(dtype="uint32"),
     "dtype.kind", "$.ops[1].outputs[0]"),
    ("matmul K mismatch", lambda g: g["tensors"][1].update(shape=[128, 256]), "linear.shape",
     "$.ops[0]"),
    ("declared output shape wrong", lambda g: g["tensors"][4].update(shape=[1, 128, 255]),
     "relu.shape", "$.ops[1].outputs[0]"),
    ("no broadcast", lambda g: g["tensors"][4].update(shape=[1, 64, 256]), "add.shape",
     "$.ops[2]"),
    ("cycle", lambda g: g["ops"][0].update(inputs=["out", "w", "b"]), "graph.acyclic", "$.ops"),
    ("unknown device", lambda g: g.update(device="tpu_v9"), "device.unknown", "$.device"),
    ("measured unknown op", lambda g: g.update(measured={"ops": [
        {"op": "nope", "config": "dram:interleaved", "latency_us": 1.0}]}), "ref.op",
     "$.measured.ops[0].op"),
    ("measured no-op reshard", lambda g: g.update(measured={"reshards": [
        {"tensor": "h", "from": "dram:interleaved", "to": "dram:interleaved", "latency_us": 1}]}),
     "measured.noop", "$.measured.reshards[0]"),
    ("measured bad config text", lambda g: g.update(measured={"ops": [
        {"op": "fc", "config": "l1:diagonal", "latency_us": 1.0}]}),
     "schema.string_pattern_mismatch",
     "$.measured.ops[0].config"),
    ("wrong version", lambda g: g.update(version=2), "schema.literal_error", "$.version"),
    ("missing format", lambda g: g.pop("format"), "schema.missing", "$.format"),
]


@pytest.mark.parametrize(("label", "change", "rule", "path"), CASES, ids=[c[0] for c in CASES])
def test_each_rule_names_its_path(label, change, rule, path):
    issues = issues_of(mutate(change))
    assert (rule, path) in {(i.rule, i.path) for i in issues}, [i.as_dict() for i in issues]


SHAPE_CASES = [
    ("conv2d", [tensor("i", [1, 16, 16, 32], "input"), tensor("cw", [64, 32, 3, 3], "constant"),
                tensor("o", [1, 16, 16, 64])], {"padding": [0, 0]}, [1, 14, 14, 64]),
    ("max_pool2d", [tensor("i", [1, 16, 16, 32], "input"), tensor("o", [1, 16, 16, 32])],
     {"kernel_size": [2, 2]}, [1, 8, 8, 32]),
    ("concat", [tensor("i", [1, 8, 32], "input"), tensor("j", [1, 8, 16], "input"),
                tensor("o", [1, 8, 32])], {"dim": -1}, [1, 8, 48]),
    ("permute", [tensor("i", [2, 8, 32], "input"), tensor("o", [2, 8, 32])],
     {"perm": [0, 2, 1]}, [2, 32, 8]),
    ("slice", [tensor("i", [8, 64], "input"), tensor("o", [8, 64])],
     {"starts": [0, 16], "ends": [8, 48]}, [8, 32]),
    ("reduce_mean", [tensor("i", [8, 64], "input"), tensor("o", [8, 64])],
     {"dims": [-1], "keepdim": False}, [8]),
    ("embedding", [tensor("i", [1, 16], "input", "uint32"),
                   tensor("tab", [1000, 64], "constant"), tensor("o", [1, 16, 32])], {},
     [1, 16, 64]),
]


@pytest.mark.parametrize(("op_type", "tensors", "attrs", "expected"), SHAPE_CASES,
                         ids=[c[0] for c in SHAPE_CASES])
def test_shape_inference_reports_the_shape_the_op_produces(op_type, tensors, attrs, expected):
    g = {"format": "layoutsat-graph", "version": 1, "tensors": tensors,
         "ops": [op("o", op_type, [t["name"] for t in tensors[:-1]], ["o"], **attrs)],
         "outputs": ["o"]}
    issues = issues_of(g)
    assert [i.rule for i in issues] == [f"{op_type}.shape"]
    assert f"produces {expected}" in issues[0].msg
    tensors[-1]["shape"] = expected
    parse_graph(g)


def test_reshape_must_keep_the_element_count_and_dtype():
    g = mutate(lambda g: add_op(g, op("rs", "reshape", ["out"], ["z"]),
                                tensor("z", [128, 255], dtype="f32")))
    rules = {i.rule for i in issues_of(g)}
    assert rules == {"reshape.shape", "dtype.preserve"}


def test_all_faults_are_reported_at_once():
    g = tiny()
    g["tensors"].append(tensor("x", [1], "input"))
    g["ops"][1]["inputs"] = ["nope"]
    g["ops"][2]["attrs"] = {"bogus": True}
    g["device"] = "nowhere"
    rules = {i.rule for i in issues_of(g)}
    assert {"names.duplicate", "ref.tensor", "schema.extra_forbidden", "device.unknown"} <= rules


@pytest.mark.parametrize("data", [[], "graph", 3])
def test_non_objects_are_rejected(data):
    assert issues_of(data)[0].rule == "schema.type"
