"""ONNX import fixes of issue 25, each on a small model built with onnx.helper: inverse layout
ops cancel, Conv1d and constant-index Gather map, a dimension option that changes nothing
warns, and a Reshape whose element counts disagree is rejected (import and validate)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from app.cli import cli  # noqa: E402
from models.errors import InputValidationError  # noqa: E402
from solver.layout import solve  # noqa: E402
from solver.onnx_import import ImportOptions, import_onnx  # noqa: E402
from tests.test_layout_import import F, N, onnx_bytes, run, shape, types, w  # noqa: E402

runner = CliRunner()


def op(graph, op_type: str):
    return next(o for o in graph.ops if o.type == op_type)


# ----------------------------------------------------------------------------- permutes


def convnext_block(out: str = "y") -> list:
    """Conv (NHWC in the graph), then channels-last LayerNorm/Linear/ReLU/Linear through
    ONNX Transposes, then back to NCHW for the layer scale and the residual add."""
    return [N("Conv", ["x", "dw"], ["c"], pads=[1, 1, 1, 1], group=8),
            N("Transpose", ["c"], ["cl"], perm=[0, 2, 3, 1]),
            N("LayerNormalization", ["cl", "g", "be"], ["n"], axis=-1),
            N("MatMul", ["n", "w1"], ["h"]), N("Relu", ["h"], ["r"]),
            N("MatMul", ["r", "w2"], ["o"]),
            N("Transpose", ["o"], ["back"], perm=[0, 3, 1, 2]),
            N("Mul", ["back", "scale"], ["scaled"]), N("Add", ["scaled", "x"], [out])]


CONVNEXT_WEIGHTS = {"dw": w(8, 1, 3, 3), "g": w(8), "be": w(8), "w1": w(8, 32), "w2": w(32, 8),
                    "scale": w(8, 1, 1)}


def test_inverse_permute_pairs_around_channels_last_ops_cancel():
    graph, report = run(convnext_block(), {"x": [1, 8, 6, 6]}, ["y"], CONVNEXT_WEIGHTS)
    assert types(graph) == ["conv2d", "layernorm", "linear", "linear", "mul", "add"]
    assert op(graph, "layernorm").inputs[0] == op(graph, "conv2d").outputs[0]
    mul = op(graph, "mul")  # the layer scale runs channels-last, its [C, 1, 1] as [1, 1, 1, C]
    assert mul.inputs[0] == "o" and shape(graph, mul.inputs[1]) == [1, 1, 1, 8]
    assert "scale" not in {t.name for t in graph.tensors}
    assert op(graph, "add").inputs == [mul.outputs[0], "x"] and shape(graph, "y") == [1, 6, 6, 8]
    assert report["permutes_inserted"] == 2 and report["permutes_cancelled"] == 4


def test_a_graph_output_made_by_cancelling_permutes_is_kept():
    """Conv (channels-last in the graph), back to NCHW, then ONNX's Transpose to NHWC as the
    graph output: the pair cancels but ``y`` stays, now a reshape of the conv's output."""
    nodes = [N("Conv", ["x", "w"], ["c"]), N("Transpose", ["c"], ["y"], perm=[0, 2, 3, 1])]
    graph, report = run(nodes, {"x": [1, 3, 4, 5]}, ["y"], {"w": w(8, 3, 1, 1)})
    assert types(graph) == ["conv2d", "reshape"]
    assert graph.outputs == ["y"] and shape(graph, "y") == [1, 4, 5, 8]
    assert graph.ops[1].inputs == graph.ops[0].outputs
    assert report["permutes_cancelled"] == 1 and report["permutes_as_reshape"] == 1


def test_a_permute_of_size_1_dims_only_becomes_a_reshape():
    graph, report = run([N("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]),
                         N("Relu", ["t"], ["y"])], {"x": [2, 1, 8, 16]}, ["y"])
    assert types(graph) == ["reshape", "relu"] and shape(graph, "t") == [2, 8, 1, 16]
    assert report["permutes_as_reshape"] == 1


def test_cli_summary_counts_the_cancelled_permutes(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(onnx_bytes(convnext_block(), {"x": [1, 8, 6, 6]}, ["y"], CONVNEXT_WEIGHTS))
    result = runner.invoke(cli, ["import", str(model), "-o", str(tmp_path / "g.json")])
    assert result.exit_code == 0, result.output
    assert "layout ops: 4 permutes cancelled" in result.stdout


# ----------------------------------------------------------------------------- Conv1d


def test_conv1d_maps_to_conv2d_with_a_1_by_k_kernel():
    graph, report = run([N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1], strides=[2])],
                        {"x": [1, 8, 32]}, ["y"], {"w": w(16, 8, 3), "b": w(16)})
    assert types(graph) == ["reshape", "permute", "conv2d", "permute", "reshape"]
    conv = op(graph, "conv2d")
    assert conv.attrs["stride"] == [1, 2] and conv.attrs["padding"] == [0, 1]
    assert shape(graph, conv.inputs[0]) == [1, 1, 32, 8] and shape(graph, conv.inputs[1]) == \
        [16, 8, 1, 3]
    assert shape(graph, "y") == [1, 16, 16]
    assert report["mapped"] == {"Conv": 1} and not report["opaque"]


def test_conv1d_chain_keeps_channels_last_between_the_convs():
    """Whisper's stem: Conv1d, activation, Conv1d; the layout ops between cancel and the
    activation fuses into the first conv."""
    nodes = [N("Conv", ["x", "w1"], ["c1"], pads=[1, 1]), N("Relu", ["c1"], ["r"]),
             N("Conv", ["r", "w2"], ["y"], pads=[1, 1], strides=[2])]
    graph, report = run(nodes, {"x": [1, 8, 20]}, ["y"], {"w1": w(12, 8, 3), "w2": w(12, 12, 3)})
    assert types(graph) == ["reshape", "permute", "conv2d", "conv2d", "permute", "reshape"]
    assert graph.ops[2].attrs["activation"] == "relu" and shape(graph, "y") == [1, 12, 10]
    assert report["permutes_cancelled"] == 2 and report["reshapes_cancelled"] == 2


def test_conv1d_then_a_transpose_to_channels_last_folds_to_one_reshape():
    """Whisper's stem into its encoder: Conv1d, GELU, Transpose(0, 2, 1), MatMul. Back to
    channels-first, to [N, C, L], the activation, and the transpose to [N, L, C] keep the
    conv's channels-last element order: one reshape, the activation on [N, L, C]."""
    nodes = [N("Conv", ["x", "w"], ["c"], pads=[1, 1]), N("Relu", ["c"], ["r"]),
             N("Transpose", ["r"], ["t"], perm=[0, 2, 1]), N("MatMul", ["t", "m"], ["y"])]
    graph, report = run(nodes, {"x": [1, 8, 20]}, ["y"], {"w": w(12, 8, 3), "m": w(12, 16)})
    assert types(graph) == ["reshape", "permute", "conv2d", "reshape", "linear"]
    conv, back = op(graph, "conv2d"), graph.ops[3]
    assert conv.attrs["activation"] == "relu" and back.inputs == conv.outputs
    assert shape(graph, conv.outputs[0]) == [1, 1, 20, 12]
    assert shape(graph, back.outputs[0]) == [1, 20, 12] and shape(graph, "y") == [1, 20, 16]
    assert op(graph, "linear").inputs[0] == back.outputs[0]
    assert report["permutes_as_reshape"] == 1 and report["permutes_cancelled"] == 1


def test_whisper_stem_with_an_erf_gelu_folds_too():
    """Whisper's exporters write GELU as x * 0.5 * (1 + erf(x / sqrt(2))): fused into one
    gelu first, it folds like any activation and ends up in the conv."""
    nodes = [N("Conv", ["x", "w"], ["c"], pads=[1, 1]), N("Div", ["c", "s2"], ["d"]),
             N("Erf", ["d"], ["e"]), N("Add", ["e", "one"], ["p"]), N("Mul", ["c", "p"], ["q"]),
             N("Mul", ["q", "half"], ["g"]), N("Transpose", ["g"], ["t"], perm=[0, 2, 1]),
             N("MatMul", ["t", "m"], ["y"])]
    scalars = {"s2": np.array(np.sqrt(2), np.float32), "one": np.array(1, np.float32),
               "half": np.array(0.5, np.float32)}
    graph, _ = run(nodes, {"x": [1, 8, 20]}, ["y"],
                   {"w": w(12, 8, 3), "m": w(12, 16), **scalars})
    assert types(graph) == ["reshape", "permute", "conv2d", "reshape", "linear"]
    assert op(graph, "conv2d").attrs["activation"] == "gelu"


def test_a_folded_chain_may_end_in_a_graph_output():
    nodes = [N("Conv", ["x", "w"], ["c"], pads=[1, 1]), N("Relu", ["c"], ["r"]),
             N("Transpose", ["r"], ["y"], perm=[0, 2, 1])]
    graph, _ = run(nodes, {"x": [1, 8, 20]}, ["y"], {"w": w(12, 8, 3)})
    assert types(graph) == ["reshape", "permute", "conv2d", "reshape"]
    assert graph.outputs == ["y"] and shape(graph, "y") == [1, 20, 12]


def test_layout_ops_that_reorder_elements_do_not_fold():
    """A Conv1d whose [N, C, L] output a MatMul reads over L (no transpose back to
    channels-last): the permute to channels-first and the reshape stay."""
    nodes = [N("Conv", ["x", "w"], ["c"], pads=[1, 1]), N("MatMul", ["c", "m"], ["y"])]
    graph, _ = run(nodes, {"x": [1, 8, 20]}, ["y"], {"w": w(12, 8, 3), "m": w(20, 16)})
    assert types(graph) == ["reshape", "permute", "conv2d", "permute", "reshape", "linear"]


# ----------------------------------------------------------------------------- Gather


@pytest.mark.parametrize(("index", "expected", "out_shape", "starts"), [
    (np.array(0, np.int64), ["slice", "reshape"], [2, 16], [0, 0, 0]),
    (np.array(-1, np.int64), ["slice", "reshape"], [2, 16], [0, 4, 0]),
    (np.array([3], np.int64), ["slice"], [2, 1, 16], [0, 3, 0]),
    (np.array([1, 2, 3], np.int64), ["slice"], [2, 3, 16], [0, 1, 0]),
], ids=["scalar", "negative", "one-element", "consecutive"])
def test_gather_of_constant_positions_is_a_slice(index, expected, out_shape, starts):
    graph, report = run([N("Gather", ["x", "i"], ["y"], axis=1)], {"x": [2, 5, 16]}, ["y"],
                        {"i": index})
    assert types(graph) == expected and shape(graph, "y") == out_shape
    assert op(graph, "slice").attrs["starts"] == starts
    assert report["mapped"] == {"Gather": 1}


def test_gather_of_scattered_constant_positions_stays_opaque():
    graph, _ = run([N("Gather", ["x", "i"], ["y"], axis=1)], {"x": [2, 5, 16]}, ["y"],
                   {"i": np.array([0, 2], np.int64)})
    assert types(graph) == ["opaque"] and shape(graph, "y") == [2, 2, 16]


def test_gather_with_computed_indices_on_a_table_stays_an_embedding():
    graph, _ = run([N("Gather", ["table", "ids"], ["y"])], {"ids": [1, 7]}, ["y"],
                   {"table": w(100, 16)}, int_inputs=("ids",))
    assert types(graph) == ["embedding"]


# ----------------------------------------------------------------------------- options


def static_model() -> bytes:
    return onnx_bytes([N("Relu", ["x"], ["y"])], {"x": [1, 8, 16]}, ["y"])


def test_a_dimension_option_that_sets_nothing_warns():
    report = import_onnx(static_model(), ImportOptions(batch=4, seq_len=128,
                                                       dims={"heads": 2})).report
    assert [m.split(" changed nothing")[0] for m in report["warnings"]] == \
        ["--batch 4", "--seq-len 128", "--dim heads=2"]
    x = helper.make_tensor_value_info("x", F, ["batch", 16])
    graph = helper.make_graph([N("Relu", ["x"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", F, None)])
    dynamic = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    report = import_onnx(dynamic.SerializeToString(), ImportOptions(batch=4, seq_len=9)).report
    assert len(report["warnings"]) == 1 and report["warnings"][0].startswith("--seq-len 9")


def test_cli_prints_the_warning_on_stderr_and_succeeds(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(static_model())
    result = runner.invoke(cli, ["import", str(model), "--batch", "4",
                                 "-o", str(tmp_path / "g.json")])
    assert result.exit_code == 0, result.output
    assert "warning: --batch 4 changed nothing" in result.stderr
    assert "warning:" not in result.stdout


# ----------------------------------------------------------------------------- Reshape


@pytest.mark.parametrize(("source", "target", "fragments"), [
    ([1, 2, 6, 6], [1, 2, 6, 3], ["[1, 2, 6, 6] (72 elements)", "[1, 2, 6, 3] (36 elements)"]),
    ([2, 3, 4], [5, -1], ["[2, 3, 4] (24 elements)", "[5, -1]", "24 is no multiple of 5"]),
], ids=["counts-differ", "minus-one-does-not-divide"])
def test_an_inconsistent_reshape_is_rejected_with_shapes_and_counts(source, target, fragments):
    nodes = [N("Reshape", ["x", "s"], ["y"], name="attn_reshape")]
    with pytest.raises(InputValidationError) as err:
        run(nodes, {"x": source}, ["y"], {"s": np.array(target, np.int64)})
    issue = err.value.issues[0]
    assert issue.rule == "onnx.reshape_elements" and "Reshape node 'attn_reshape'" in issue.msg
    assert "input 'x'" in issue.msg and "output 'y'" in issue.msg
    assert all(f in issue.msg for f in fragments), issue.msg


def test_cli_import_of_an_inconsistent_reshape_exits_1(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(onnx_bytes([N("Reshape", ["x", "s"], ["y"])], {"x": [1, 2, 6, 6]}, ["y"],
                                 {"s": np.array([1, 2, 6, 3], np.int64)}))
    result = runner.invoke(cli, ["import", str(model)])
    assert result.exit_code == 1 and "72 elements" in result.stderr
    assert "Traceback" not in result.output


def test_validate_rejects_a_graph_whose_reshape_changes_the_element_count(tmp_path):
    t = [{"name": "x", "shape": [1, 6, 1500, 1500], "dtype": "bf16", "kind": "input"},
         {"name": "y", "shape": [1, 6, 1500, 500], "dtype": "bf16", "kind": "activation"}]
    doc = {"format": "layoutsat-graph", "version": 1, "tensors": t, "outputs": ["y"],
           "ops": [{"name": "r", "type": "reshape", "inputs": ["x"], "outputs": ["y"]}]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    result = runner.invoke(cli, ["validate", "--json", str(path)])
    assert result.exit_code == 1
    assert [e["rule"] for e in json.loads(result.stdout)["errors"]] == ["reshape.shape"]


@pytest.mark.parametrize("case", ["convnext", "conv1d-gather"])
def test_the_rewritten_graphs_are_planned(case):
    if case == "convnext":
        graph, _ = run(convnext_block(), {"x": [1, 8, 6, 6]}, ["y"], CONVNEXT_WEIGHTS)
    else:
        graph, _ = run([N("Conv", ["x", "w"], ["c"], pads=[1, 1]), N("Relu", ["c"], ["r"]),
                        N("Gather", ["r", "i"], ["y"], axis=2)], {"x": [1, 8, 20]}, ["y"],
                       {"w": w(12, 8, 3), "i": np.array(0, np.int64)})
    plan = solve(graph, "greedy")
    assert plan.status == "feasible" and not plan.violations


# ----------------------------------------------------------------------------- tile


def test_a_tile_of_one_dim_is_a_concat_of_its_copies_and_other_tilings_stay_opaque():
    """Grouped-query attention's ``repeat_interleave`` of the KV heads exports as
    Unsqueeze, Tile along the new dim, Reshape: the Tile becomes a concat, so a mesh plan
    can split the heads through it (an opaque op runs replicated)."""
    kv = [N("Unsqueeze", ["k", "ax"], ["u"]), N("Tile", ["u", "reps"], ["t"]),
          N("Reshape", ["t", "to"], ["y"])]
    consts = {"ax": np.array([2], np.int64), "to": np.array([1, 8, 16, 64], np.int64)}
    graph, report = run(kv, {"k": [1, 2, 16, 64]}, ["y"],
                        {**consts, "reps": np.array([1, 1, 4, 1, 1], np.int64)})
    cat = op(graph, "concat")
    assert cat.attrs == {"dim": 2} and len(cat.inputs) == 4 and len(set(cat.inputs)) == 1
    assert shape(graph, cat.outputs[0]) == [1, 2, 4, 16, 64] and not report["opaque"]
    graph, report = run(kv, {"k": [1, 2, 16, 64]}, ["y"],
                        {**consts, "ax": np.array([0], np.int64),
                         "reps": np.array([2, 1, 2, 1, 1], np.int64)})
    assert report["opaque"] == {"Tile": 1}
