"""The evaluator on planted violations: one test per violation kind, and all at once."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

import pytest

from models.device import PRESETS
from models.layout import LayoutPlan, parse_graph
from solver.layout import solve
from solver.layout.evaluate import evaluate
from solver.layout.problem import analyze
from tests.conftest import ROOT
from tests.layout_fixtures import load, tiny

GRAPH = parse_graph(tiny())
PROBLEM = analyze(GRAPH, PRESETS["wormhole_n150"])
# The greedy plan of `tiny`: fc and act sharded in L1, res in L1 and spilled (graph output).
PLAN = solve(GRAPH, "greedy", "wormhole_n150")


def planted(change: Callable[[dict], None]) -> set[str]:
    data = copy.deepcopy(PLAN.model_dump(by_alias=True))
    change(data)
    verdict = evaluate(PROBLEM, LayoutPlan.model_validate(data))
    assert not verdict.valid
    return {v.kind for v in verdict.violations}


def test_the_unmodified_plan_is_valid_and_the_total_recomputes():
    assert PLAN.status == "feasible"
    assert PLAN.tensors["h"].buffer == "l1" and PLAN.tensors["y"].layout.endswith("sharded")
    assert [s.tensor for s in PLAN.spills] == ["out"]
    assert PLAN.l1_allocation == "address"
    assert PLAN.tensors["h"].l1_offset is not None and PLAN.tensors["y"].l1_offset is not None
    verdict = evaluate(PROBLEM, PLAN)
    assert verdict.valid and verdict.violations == []
    assert verdict.total_latency_us == pytest.approx(PLAN.total_latency_us)


def sharded_config_with_other_grid(data: dict) -> None:
    data["ops"]["act"]["config"] = "l1:height_sharded:1x2"


def swap_schedule(d):
    d["schedule"][0], d["schedule"][1] = d["schedule"][1], d["schedule"][0]


CASES: list[tuple[str, Callable[[dict], None]]] = [
    ("schedule.order", swap_schedule),
    ("schedule.missing", lambda d: d["schedule"].pop()),
    ("schedule.duplicate", lambda d: d["schedule"].append("fc")),
    ("schedule.unknown", lambda d: d["schedule"].append("ghost")),
    ("op.missing", lambda d: d["ops"].pop("act")),
    ("op.unknown", lambda d: d["ops"].__setitem__("ghost", d["ops"]["act"])),
    ("op.config_illegal", lambda d: d["ops"]["fc"].update(config="l1:interleaved/in0_block_w=8")),
    ("op.input_not_accepted", lambda d: d["ops"]["act"]["inputs"].__setitem__(
        0, "l1:width_sharded:1x8")),
    ("op.input_unavailable", lambda d: d["ops"]["act"]["inputs"].__setitem__(
        0, "l1:interleaved")),
    ("op.latency", lambda d: d["ops"]["act"].update(latency_us=d["ops"]["act"]["latency_us"] / 2)),
    ("op.cb", lambda d: d["ops"]["act"].update(cb_bytes_per_core=0)),
    ("tensor.missing", lambda d: d["tensors"].pop("y")),
    ("tensor.placement", sharded_config_with_other_grid),
    ("tensor.fixed_home", lambda d: d["tensors"]["x"].update(buffer="l1")),
    ("tensor.shard_shape", lambda d: d["tensors"]["h"].update(shard_shape=[16, 256])),
    ("tensor.bytes_per_core", lambda d: d["tensors"]["h"].update(bytes_per_core=1)),
    ("spill.not_l1", lambda d: d["spills"].append({"tensor": "x", "step": 0, "latency_us": 1.0})),
    ("spill.step", lambda d: d["spills"][0].update(step=99)),
    ("spill.latency", lambda d: d["spills"][0].update(latency_us=0.0)),
    ("spill.duplicate", lambda d: d["spills"].append(dict(d["spills"][0]))),
    ("output.not_in_dram", lambda d: d["spills"].clear()),
    ("copy.noop", lambda d: d["reshards"].append({
        "tensor": "h", "from": d["ops"]["fc"]["config"].split("/")[0],
        "to": d["ops"]["fc"]["config"].split("/")[0], "consumers": ["act"], "step": 1,
        "latency_us": 1.0})),
    ("copy.consumer", lambda d: d["reshards"].append({
        "tensor": "h", "from": d["ops"]["fc"]["config"].split("/")[0], "to": "dram:interleaved",
        "consumers": ["res"], "step": 1, "latency_us": 1.0})),
    ("copy.step", lambda d: d["reshards"].append({
        "tensor": "h", "from": d["ops"]["fc"]["config"].split("/")[0], "to": "dram:interleaved",
        "consumers": ["act"], "step": 0, "latency_us": 1.0})),
    ("copy.source_unavailable", lambda d: d["reshards"].append({
        "tensor": "h", "from": "dram:interleaved", "to": "l1:interleaved",
        "consumers": ["act"], "step": 1, "latency_us": 1.0})),
    ("copy.kind", lambda d: d["reloads"].append({
        "tensor": "x", "from": "dram:interleaved", "to": "l1:interleaved",
        "consumers": ["res"], "step": 2, "latency_us": 1.0})),
    ("copy.latency", lambda d: d["reshards"].append({
        "tensor": "x", "from": "dram:interleaved", "to": "l1:interleaved",
        "consumers": ["res"], "step": 2, "latency_us": 1.0})),
    ("timeline.mismatch", lambda d: d["l1_timeline"][0].update(bytes_per_core=0)),
    ("address.missing", lambda d: d["tensors"]["h"].update(l1_offset=None)),
    ("address.alignment", lambda d: d["tensors"]["h"].update(
        l1_offset=d["tensors"]["h"]["l1_offset"] - 16)),
    ("address.range", lambda d: d["tensors"]["h"].update(
        l1_offset=d["l1_capacity_bytes_per_core"] - 32)),
    ("address.overlap", lambda d: d["tensors"]["h"].update(
        l1_offset=d["tensors"]["y"]["l1_offset"])),
    ("address.cb_clash", lambda d: d["tensors"]["h"].update(l1_offset=0)),
    ("capacity.mismatch", lambda d: d.update(l1_capacity_bytes_per_core=1)),
    ("total.mismatch", lambda d: d.update(total_latency_us=d["total_latency_us"] + 1)),
]


@pytest.mark.parametrize(("kind", "change"), CASES, ids=[c[0] for c in CASES])
def test_each_planted_violation_is_found(kind, change):
    assert kind in planted(change)


def test_l1_overflow_is_found_at_the_step_where_it_happens():
    graph = parse_graph(load(ROOT / "benchmarks" / "layout" / "inception-concat.json"))
    roomy = solve(graph, "greedy", "wormhole_n150")
    small = PRESETS["wormhole_n150"].model_copy(update={"l1_size_bytes": 400_000})
    problem = analyze(graph, small)
    verdict = evaluate(problem, roomy)
    over = {v.where for v in verdict.violations if v.kind == "capacity.exceeded"}
    expected = {f"step {s.step}" for s in roomy.l1_timeline
                if s.bytes_per_core > problem.usable_l1}
    assert over and over == expected


def test_every_violation_is_reported_not_only_the_first():
    def many(d):
        swap_schedule(d)
        d["ops"]["act"]["cb_bytes_per_core"] = 0
        d["tensors"]["h"]["bytes_per_core"] = 1
        d["spills"].clear()
        d["total_latency_us"] += 1
    assert {"schedule.order", "op.cb", "tensor.bytes_per_core", "output.not_in_dram",
            "total.mismatch"} <= planted(many)


def test_the_evaluator_calls_no_solver():
    tree = ast.parse((ROOT / "solver" / "layout" / "evaluate.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"solver.layout.greedy", "solver.layout.dfsharding",
                           "solver.layout.dram", "solver.layout.plan", "solver.layout",
                           "solver.layout.address"}
