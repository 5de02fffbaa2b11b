"""ONNX import: every mapped operator and pattern on graphs built with onnx.helper, the
opaque fallback, stacking, the error cases (CLI and API), and the committed model graphs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from app.cli import cli  # noqa: E402
from app.main import create_app  # noqa: E402
from models.layout import parse_graph  # noqa: E402
from solver.layout import solve  # noqa: E402
from solver.onnx_import import ImportOptions, import_onnx  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

MODELS = sorted((ROOT / "benchmarks" / "layout" / "models").glob("*.json"))
F = TensorProto.FLOAT


def onnx_bytes(nodes: list, inputs: dict[str, list], outputs: list[str],
               inits: dict[str, np.ndarray] | None = None, opset: int = 17,
               int_inputs: tuple[str, ...] = ()) -> bytes:
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.INT64 if n in int_inputs else F, s)
         for n, s in inputs.items()],
        [helper.make_tensor_value_info(o, F, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v, dtype=np.int64 if v.dtype.kind == "i"
                                            else np.float32), k)
         for k, v in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]) \
        .SerializeToString()


def run(nodes: list, inputs: dict[str, list], outputs: list[str], inits=None,
        **kwargs: Any) -> tuple[Any, dict]:
    opset = kwargs.pop("opset", 17)
    int_inputs = kwargs.pop("int_inputs", ())
    result = import_onnx(onnx_bytes(nodes, inputs, outputs, inits, opset, int_inputs),
                         ImportOptions(**kwargs))
    return result.graph, result.report


def types(graph) -> list[str]:
    return [op.type for op in graph.ops]


def shape(graph, name: str) -> list[int]:
    return next(t.shape for t in graph.tensors if t.name == name)


def w(*s: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(s).astype(np.float32)


N = helper.make_node

# (id, nodes, inputs, initializers, op types expected, output, its declared shape)
CASES = [
    ("conv-nhwc", [N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
     {"x": [1, 3, 16, 16]}, {"w": w(8, 3, 3, 3), "b": w(8)}, ["conv2d"], "y", [1, 8, 8, 8]),
    ("conv-relu-fused", [N("Conv", ["x", "w"], ["c"]), N("Relu", ["c"], ["y"])],
     {"x": [1, 3, 8, 8]}, {"w": w(4, 3, 1, 1)}, ["conv2d"], "y", [1, 8, 8, 4]),
    ("gemm-transb-bias", [N("Gemm", ["x", "w", "b"], ["y"], transB=1)],
     {"x": [2, 16]}, {"w": w(32, 16), "b": w(32)}, ["linear"], "y", [2, 32]),
    ("matmul-weight-bias", [N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "b"], ["y"])],
     {"x": [1, 8, 16]}, {"w": w(16, 32), "b": w(32)}, ["linear"], "y", [1, 8, 32]),
    ("matmul-activations", [N("MatMul", ["a", "b"], ["y"])],
     {"a": [2, 4, 8, 16], "b": [2, 4, 16, 8]}, {}, ["matmul"], "y", [2, 4, 8, 8]),
    ("binary-broadcast", [N("Add", ["x", "c"], ["a"]), N("Sub", ["a", "x"], ["s"]),
                          N("Mul", ["s", "c"], ["m"]), N("Div", ["m", "k"], ["y"])],
     {"x": [2, 8, 16]}, {"c": w(16), "k": np.array(2.0, dtype=np.float32)},
     ["add", "sub", "mul", "div"], "y", [2, 8, 16]),
    ("unary", [N("Relu", ["x"], ["a"]), N("Sigmoid", ["a"], ["b"]), N("Tanh", ["b"], ["y"])],
     {"x": [4, 32]}, {}, ["relu", "sigmoid", "tanh"], "y", [4, 32]),
    ("silu-pattern", [N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["y"])],
     {"x": [4, 32]}, {}, ["silu"], "y", [4, 32]),
    ("gelu-erf-pattern", [N("Div", ["x", "r2"], ["d"]), N("Erf", ["d"], ["e"]),
                          N("Add", ["e", "one"], ["a"]), N("Mul", ["x", "a"], ["m"]),
                          N("Mul", ["m", "half"], ["y"])],
     {"x": [4, 32]}, {"r2": np.array(1.4142135, np.float32), "one": np.array(1.0, np.float32),
                      "half": np.array(0.5, np.float32)}, ["gelu"], "y", [4, 32]),
    ("softmax", [N("Softmax", ["x"], ["y"], axis=-1)], {"x": [2, 8, 8]}, {}, ["softmax"], "y",
     [2, 8, 8]),
    ("layernorm-op", [N("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-6)],
     {"x": [1, 8, 32]}, {"g": w(32), "b": w(32)}, ["layernorm"], "y", [1, 8, 32]),
    ("layernorm-pattern",
     [N("ReduceMean", ["x"], ["m"], axes=[-1]), N("Sub", ["x", "m"], ["d"]),
      N("Pow", ["d", "two"], ["p"]), N("ReduceMean", ["p"], ["v"], axes=[-1]),
      N("Add", ["v", "eps"], ["ve"]), N("Sqrt", ["ve"], ["s"]), N("Div", ["d", "s"], ["n"]),
      N("Mul", ["n", "g"], ["gn"]), N("Add", ["gn", "b"], ["y"])],
     {"x": [1, 8, 32]}, {"two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
                         "g": w(32), "b": w(32)}, ["layernorm"], "y", [1, 8, 32]),
    ("rmsnorm-pattern",
     [N("Pow", ["x", "two"], ["p"]), N("ReduceMean", ["p"], ["v"], axes=[-1]),
      N("Add", ["v", "eps"], ["ve"]), N("Sqrt", ["ve"], ["s"]),
      N("Reciprocal", ["s"], ["r"]), N("Mul", ["x", "r"], ["n"]), N("Mul", ["n", "g"], ["y"])],
     {"x": [1, 8, 32]}, {"two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
                         "g": w(32)}, ["rmsnorm"], "y", [1, 8, 32]),
    ("rmsnorm-one-over-sqrt",
     [N("Pow", ["x", "two"], ["p"]), N("ReduceMean", ["p"], ["v"], axes=[-1]),
      N("Add", ["v", "eps"], ["ve"]), N("Sqrt", ["ve"], ["s"]),
      N("Div", ["one", "s"], ["r"]), N("Mul", ["x", "r"], ["y"])],
     {"x": [1, 8, 32]}, {"two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
                         "one": np.array(1.0, np.float32)}, ["rmsnorm"], "y", [1, 8, 32]),
    ("reduces", [N("ReduceMean", ["x"], ["a"], axes=[1], keepdims=1),
                 N("ReduceSum", ["a"], ["b"], axes=[2], keepdims=1),
                 N("ReduceMax", ["b"], ["y"], axes=[0], keepdims=0)],
     {"x": [2, 8, 16]}, {}, ["reduce_mean", "reduce_sum", "reduce_max"], "y", [1, 1]),
    ("concat", [N("Concat", ["a", "b"], ["y"], axis=1)], {"a": [2, 3, 4], "b": [2, 5, 4]}, {},
     ["concat"], "y", [2, 8, 4]),
    ("reshape-transpose", [N("Reshape", ["x", "shape"], ["r"]),
                           N("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3])],
     {"x": [1, 8, 64]}, {"shape": np.array([1, 8, 4, 16], np.int64)},
     ["reshape", "permute"], "y", [1, 4, 8, 16]),
    ("slice", [N("Slice", ["x", "st", "en", "ax"], ["y"])], {"x": [2, 16, 8]},
     {"st": np.array([2], np.int64), "en": np.array([10], np.int64),
      "ax": np.array([1], np.int64)}, ["slice"], "y", [2, 8, 8]),
    ("pools", [N("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2],
                 pads=[1, 1, 1, 1]),
               N("AveragePool", ["m"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
               N("GlobalAveragePool", ["a"], ["g"]), N("Flatten", ["g"], ["y"], axis=1)],
     {"x": [1, 8, 16, 16]}, {}, ["permute", "max_pool2d", "avg_pool2d", "reduce_mean",
                                 "reshape"], "y", [1, 8]),
    ("identity-cast-folded", [N("Identity", ["x"], ["i"]), N("Cast", ["i"], ["c"], to=F),
                              N("Relu", ["c"], ["y"])],
     {"x": [4, 4]}, {}, ["relu"], "y", [4, 4]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_mapped_operators_and_patterns(case):
    _, nodes, inputs, inits, expected, out, out_shape = case
    graph, report = run(nodes, inputs, [out], inits)
    assert types(graph) == expected
    assert shape(graph, out) == out_shape
    assert graph.outputs == [out] and not report["opaque"]


def test_gelu_operator_of_opset_20():
    graph, _ = run([N("Gelu", ["x"], ["y"])], {"x": [4, 32]}, ["y"], opset=20)
    assert types(graph) == ["gelu"] and shape(graph, "y") == [4, 32]


def test_embedding_reads_uint32_indices():
    graph, report = run([N("Gather", ["table", "ids"], ["y"])], {"ids": [1, 7]}, ["y"],
                        {"table": w(100, 16)}, int_inputs=("ids",))
    assert types(graph) == ["embedding"] and shape(graph, "y") == [1, 7, 16]
    assert next(t for t in graph.tensors if t.name == "ids").dtype == "uint32"
    assert report["mapped"] == {"Gather": 1}


def test_channels_last_layouts_meet_with_a_permute():
    """A conv output (NHWC) read by a Reshape gets an explicit permute back to NCHW."""
    graph, report = run([N("Conv", ["x", "w"], ["c"]), N("Reshape", ["c", "s"], ["y"])],
                        {"x": [1, 3, 4, 4]}, ["y"],
                        {"w": w(8, 3, 1, 1), "s": np.array([1, 8, 16], np.int64)})
    assert types(graph) == ["conv2d", "permute", "reshape"]
    assert report["permutes_inserted"] == 1 and shape(graph, "y") == [1, 8, 16]


def test_unknown_operator_becomes_opaque_with_real_shapes():
    graph, report = run([N("Relu", ["x"], ["r"]), N("Hardmax", ["r"], ["h"], axis=-1),
                         N("Relu", ["h"], ["y"])], {"x": [3, 5]}, ["y"])
    assert types(graph) == ["relu", "opaque", "relu"]
    opaque = graph.ops[1]
    assert opaque.attrs["onnx_op"] == "Hardmax" and shape(graph, "h") == [3, 5]
    assert report["opaque"] == {"Hardmax": 1}


def test_unmappable_form_of_a_mapped_operator_falls_back_to_opaque():
    """Asymmetric padding has no conv2d equivalent: the Conv is kept opaque, not dropped."""
    graph, report = run([N("Conv", ["x", "w"], ["y"], pads=[0, 0, 1, 1])],
                        {"x": [1, 3, 8, 8]}, ["y"], {"w": w(4, 3, 3, 3)})
    assert types(graph) == ["opaque"] and report["opaque"] == {"Conv": 1}


def test_shape_arithmetic_is_folded():
    """Reshape(x, Concat(Shape(x)[0:1], [-1])): the shape subgraph folds to a constant."""
    nodes = [N("Shape", ["x"], ["sh"]), N("Slice", ["sh", "z", "o"], ["b"]),
             N("Concat", ["b", "m1"], ["s"], axis=0), N("Reshape", ["x", "s"], ["y"])]
    graph, report = run(nodes, {"x": [2, 3, 4]}, ["y"],
                        {"z": np.array([0], np.int64), "o": np.array([1], np.int64),
                         "m1": np.array([-1], np.int64)})
    assert types(graph) == ["reshape"] and shape(graph, "y") == [2, 12]
    assert report["folded"] == {"Shape": 1, "Slice": 1, "Concat": 1}


def test_dynamic_dimensions_resolve_from_options():
    x = helper.make_tensor_value_info("x", F, ["batch", "seq", 16])
    graph = helper.make_graph([N("Relu", ["x"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", F, None)])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = data.SerializeToString()
    result = import_onnx(data, ImportOptions(batch=2, seq_len=384))
    assert shape(result.graph, "y") == [2, 384, 16]
    with pytest.raises(Exception) as err:
        import_onnx(data, ImportOptions(batch=2))
    assert "dimension 1 is dynamic ('seq')" in str(err.value)
    assert import_onnx(data, ImportOptions(dims={"batch": 1, "seq": 7})).graph.tensors[0].shape \
        == [1, 7, 16]


def test_stacking_chains_copies_through_the_hidden_state():
    block = onnx_bytes([N("MatMul", ["h", "w"], ["m"]), N("Relu", ["m"], ["o"])],
                       {"h": [1, 4, 8]}, ["o"], {"w": w(8, 8)})
    graph = import_onnx(block, ImportOptions(repeat=3)).graph
    assert len(graph.ops) == 3 and graph.outputs == ["L2.o"]
    assert [t.name for t in graph.tensors if t.kind == "input"] == ["L0.h"]
    assert graph.ops[1].inputs[0] == "L0.o" and graph.ops[2].inputs[0] == "L1.o"
    assert len([t for t in graph.tensors if t.kind == "constant"]) == 3


# ----------------------------------------------------------------------------- errors


def test_cli_import_writes_a_valid_graph(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(onnx_bytes(CASES[0][1], CASES[0][2], ["y"], CASES[0][3]))
    out = tmp_path / "g.json"
    result = CliRunner().invoke(cli, ["import", str(model), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "mapped: Conv 1" in result.output
    parse_graph(json.loads(out.read_text()))


@pytest.mark.parametrize("content,expected", [
    (b"", "the file is empty"),
    (b"\x08\x07garbage-not-protobuf\xff\xff", "not an ONNX model"),
])
def test_cli_and_api_reject_corrupt_files_clearly(tmp_path, content, expected):
    model = tmp_path / "bad.onnx"
    model.write_bytes(content)
    result = CliRunner().invoke(cli, ["import", str(model)])
    assert result.exit_code == 1 and expected in result.output
    assert "Traceback" not in result.output
    answer = TestClient(create_app()).post("/v1/layout/import", content=content)
    assert answer.status_code == 422 and expected in answer.json()["errors"][0]["msg"]


def test_cli_and_api_name_the_dynamic_dimension(tmp_path):
    x = helper.make_tensor_value_info("tokens", F, [1, "seq_len", 8])
    graph = helper.make_graph([N("Relu", ["tokens"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", F, None)])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model = tmp_path / "dyn.onnx"
    model.write_bytes(data.SerializeToString())
    result = CliRunner().invoke(cli, ["import", str(model)])
    assert result.exit_code == 1 and "'tokens' dimension 1 is dynamic" in result.output
    client = TestClient(create_app())
    answer = client.post("/v1/layout/import", content=model.read_bytes())
    assert answer.status_code == 422 and answer.json()["errors"][0]["rule"] == "onnx.dynamic_dim"
    ok = client.post("/v1/layout/import?seq_len=5", content=model.read_bytes())
    assert ok.status_code == 200 and ok.json()["graph"]["tensors"][0]["shape"] == [1, 5, 8]
    assert ok.json()["report"]["mapped"] == {"Relu": 1}


def test_api_rejects_a_malformed_dim_option():
    answer = TestClient(create_app()).post("/v1/layout/import?dim=seq", content=b"x")
    assert answer.status_code == 422 and answer.json()["errors"][0]["rule"] == "option.dim"


# ----------------------------------------------------------------------------- models


def test_the_model_suite_is_committed():
    names = {p.stem for p in MODELS}
    for expected in ("resnet50-b1", "resnet50-b8", "mobilenetv2", "unet", "yolo-backbone",
                     "bert-base-s384", "vit-b16", "segformer-block",
                     "llama-3.2-1b-prefill128-l1", "llama-3.2-1b-prefill128-l16",
                     "llama-3.2-1b-decode-kv1024-l1", "llama-3.2-1b-decode-kv1024-l16",
                     "llama-3.1-8b-prefill128-l32"):
        assert expected in names


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_every_committed_model_graph_validates_and_solves_with_greedy(path: Path):
    graph = parse_graph(json.loads(path.read_text()))
    plan = solve(graph, "greedy")
    assert plan.status == "feasible" and not plan.violations
    assert plan.total_latency_us > 0
