"""DRAM capacity (``solver/layout/dram_capacity.py``): the most any plan can hold in DRAM,
pinned to hand-computed bytes, and graphs that could exceed the device's DRAM rejected with
the numbers (CLI exit 1, API 422) and accepted on a device with enough."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from models.device import PRESETS
from models.errors import InputValidationError
from models.layout import TimelineStep, parse_graph
from solver.layout import solve
from solver.layout.dram_capacity import dram_need
from solver.layout.evaluate import evaluate
from solver.layout.memory import DRAM
from solver.layout.problem import analyze, resolve_device

ROOT = Path(__file__).resolve().parents[1]
LLAMA_8B = ROOT / "benchmarks" / "layout" / "models" / "llama-3.1-8b-prefill128-l32.json"

# x [32, 64] bf16: 2 tiles of 2,048 B = 4,096 B; w [64, 32]: 4,096 B; y and z [32, 32]:
# 2,048 B each. Step 0 (mm): x + w + y = 10,240. Step 1 (act): x + w, y (read there) and
# z (a graph output) = 12,288.
GRAPH = {
    "format": "layoutsat-graph", "version": 1, "name": "two-ops",
    "tensors": [{"name": "x", "shape": [32, 64], "dtype": "bf16", "kind": "input"},
                {"name": "w", "shape": [64, 32], "dtype": "bf16", "kind": "constant"},
                {"name": "y", "shape": [32, 32], "dtype": "bf16"},
                {"name": "z", "shape": [32, 32], "dtype": "bf16"}],
    "ops": [{"name": "mm", "type": "matmul", "inputs": ["x", "w"], "outputs": ["y"]},
            {"name": "act", "type": "relu", "inputs": ["y"], "outputs": ["z"]}],
    "outputs": ["z"],
}


def _device(dram: int | None) -> dict:
    spec = PRESETS["wormhole_n150"].model_dump()
    return {**spec, "name": "small-dram", "dram_size_bytes": dram}


def test_the_dram_need_is_the_hand_computed_bytes_per_step() -> None:
    graph = parse_graph(GRAPH)
    assert dram_need(analyze(graph, resolve_device(graph))) == [10_240, 12_288]


def test_a_device_one_byte_short_rejects_the_graph_with_the_numbers() -> None:
    graph = parse_graph({**GRAPH, "device": _device(12_287)})
    with pytest.raises(InputValidationError) as caught:
        analyze(graph, resolve_device(graph))
    (issue,) = caught.value.issues
    assert issue.rule == "device.dram_capacity" and issue.loc == ("device",)
    for text in ("12,288 bytes of DRAM at step 1", "op 'act'", "8,192 of constants and "
                 "inputs", "4,096 of activations", "small-dram has 12,287", "'x' (input, 4,096 B)"):
        assert text in issue.msg
    exact = parse_graph({**GRAPH, "device": _device(12_288)})
    assert solve(exact, "greedy").status == "feasible"
    unchecked = parse_graph({**GRAPH, "device": _device(None)})
    assert solve(unchecked, "greedy").status == "feasible"


def test_llama_8b_is_rejected_on_a_wormhole_and_fits_a_blackhole(tmp_path: Path) -> None:
    """14.0 GB of bf16 weights: more than a Wormhole's 12 GiB, less than a p150's 32 GiB
    (the graph names the p150 as its device)."""
    out = tmp_path / "plan.json"
    rejected = subprocess.run(
        [str(Path(sys.executable).with_name("layoutsat")), "layout", "solve", str(LLAMA_8B),
         "--device", "wormhole_n150", "-o", str(out)], capture_output=True, text=True,
        timeout=120, cwd=ROOT)
    assert rejected.returncode == 1 and not out.exists()
    assert "13,992,001,536 bytes of DRAM" in rejected.stderr + rejected.stdout
    assert "wormhole_n150 has 12,884,901,888" in rejected.stderr + rejected.stdout
    graph = parse_graph(json.loads(LLAMA_8B.read_text()))
    assert max(dram_need(analyze(graph, resolve_device(graph)))) <= 32 * 2**30


def test_the_api_answers_422_naming_the_rule(tmp_path: Path) -> None:
    client = TestClient(create_app(Settings(data_dir=tmp_path, pool_workers=1)))
    with client:
        answer = client.post("/v1/layout/solve", json={**GRAPH, "device": _device(10_000)})
        assert answer.status_code == 422
        (error,) = answer.json()["errors"]
        assert error["rule"] == "device.dram_capacity" and error["path"] == "$.device"
        ok = client.post("/v1/layout/solve?solver=greedy", json={**GRAPH,
                                                                 "device": _device(2**30)})
        assert ok.status_code == 200, ok.text


# Two chains from x [32, 2048] (131,072 B): relu to a same-size tensor, then a reduction to
# one tile (2,048 B), joined by an add. In the graph's order (p1 p2 q1 q2 c) the fullest
# step holds x, Q and the two small tensors: 266,240 B. A plan that runs both relus first
# holds x, P and Q at once (393,216 B), and p too at its next step (395,264 B).
CHAINS = {
    "format": "layoutsat-graph", "version": 1, "name": "two-chains",
    "tensors": [{"name": "x", "shape": [32, 2048], "dtype": "bf16", "kind": "input"},
                *({"name": n, "shape": [32, 2048], "dtype": "bf16"} for n in ("P", "Q")),
                *({"name": n, "shape": [32, 1], "dtype": "bf16"} for n in ("p", "q", "out"))],
    "ops": [{"name": "p1", "type": "relu", "inputs": ["x"], "outputs": ["P"]},
            {"name": "p2", "type": "reduce_sum", "inputs": ["P"], "outputs": ["p"],
             "attrs": {"dims": [1]}},
            {"name": "q1", "type": "relu", "inputs": ["x"], "outputs": ["Q"]},
            {"name": "q2", "type": "reduce_sum", "inputs": ["Q"], "outputs": ["q"],
             "attrs": {"dims": [1]}},
            {"name": "c", "type": "add", "inputs": ["p", "q"], "outputs": ["out"]}],
    "outputs": ["out"],
}


def test_the_evaluator_checks_a_plans_dram_on_its_own_schedule() -> None:
    graph = parse_graph({**CHAINS, "device": _device(266_240)})
    problem = analyze(graph, resolve_device(graph))
    assert max(dram_need(problem)) == 266_240
    plan = solve(graph, "dram")
    assert plan.status == "feasible" and evaluate(problem, plan).valid
    order = ["p1", "q1", "p2", "q2", "c"]
    by_op = {s.op: s.bytes_per_core for s in plan.l1_timeline}
    reordered = plan.model_copy(update={"schedule": order, "l1_timeline": [
        TimelineStep(step=k, op=op, bytes_per_core=by_op[op]) for k, op in enumerate(order)]})
    verdict = evaluate(problem, reordered)
    assert [(v.kind, v.where) for v in verdict.violations] == [("dram.exceeded", "step 1")]
    assert "DRAM holds 393,216 bytes while 'q1' runs; small-dram has 266,240" in (
        verdict.violations[0].msg)
    roomy = parse_graph({**CHAINS, "device": _device(395_264)})
    assert evaluate(analyze(roomy, resolve_device(roomy)), reordered.model_copy(
        update={"device": resolve_device(roomy)})).violations == []


def test_conv_weights_take_their_prepared_size_in_dram():
    """A 3x3 conv from 64 to 64 bfp8 channels: TT-NN stores its weights as a [576, 64]
    matrix, 18 x 2 tiles of 1,088 B (39,168 B), not the [64, 64, 3, 3] tensor collapsed to
    12,288 x 3 and padded to 384 x 1 tiles (417,792 B); the weight read and the DRAM need
    both use the prepared size."""
    graph = parse_graph({
        "format": "layoutsat-graph", "version": 1, "name": "conv",
        "tensors": [{"name": "x", "shape": [1, 56, 56, 64], "dtype": "bf16", "kind": "input"},
                    {"name": "w", "shape": [64, 64, 3, 3], "dtype": "bfp8", "kind": "constant"},
                    {"name": "y", "shape": [1, 56, 56, 64], "dtype": "bf16"}],
        "ops": [{"name": "conv", "type": "conv2d", "inputs": ["x", "w"], "outputs": ["y"],
                 "attrs": {"padding": [1, 1]}}],
        "outputs": ["y"]})
    problem = analyze(graph, PRESETS["wormhole_n150"])
    assert problem.tensors["w"].stored_bytes == 18 * 2 * 1088
    assert problem.tensors["w"].geom.total_bytes == 384 * 1088
    x_and_y = 2 * 98 * 2 * 2048  # 3,136 rows x 64 channels: 98 x 2 tiles each
    assert dram_need(problem) == [18 * 2 * 1088 + x_and_y]
    dram = next(c for c in problem.ops["conv"].candidates if c.output.key == "dram:interleaved")
    assert dram.accepts[1][DRAM] == pytest.approx(18 * 2 * 1088 / (288_000 * 0.64))
