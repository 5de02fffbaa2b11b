"""The mesh planner on graphs whose answers are known by hand, its baselines, its
independent evaluator, and how the service, the command line and bad input reach it."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from models.errors import InputValidationError
from models.layout import LayoutGraph, LayoutPlan, parse_graph
from models.mesh import MESH_PRESETS
from solver import mesh
from solver.deadline import Deadline
from solver.iopddl.elimination import eliminate
from solver.iopddl.evaluate import evaluate as evaluate_strategies
from solver.layout.family import FAMILY, LayoutOptions
from solver.mesh import _decisions, _strategy_us
from solver.mesh.evaluate import evaluate_mesh
from solver.mesh.problem import analyze_mesh, strategy_problem
from tests.layout_fixtures import SMALL_EXAMPLE, op, tensor

ROOT = Path(__file__).resolve().parents[1]
N300 = MESH_PRESETS["n300"]


def mlp(d: int, ff: int, layers: int = 1, tokens: int = 32, pinned: bool = True) -> dict:
    """``layers`` residual MLP blocks: x + fc2(relu(fc1(x))), bf16 weights [d, ff] and
    [ff, d]; the host sends x and takes the output replicated when ``pinned``."""
    ts = [tensor("x", [1, tokens, d], "input")]
    ops: list[dict] = []
    x = "x"
    for i in range(layers):
        ts += [tensor(f"w1_{i}", [d, ff], "constant"), tensor(f"w2_{i}", [ff, d], "constant"),
               tensor(f"h_{i}", [1, tokens, ff]), tensor(f"a_{i}", [1, tokens, ff]),
               tensor(f"y_{i}", [1, tokens, d]), tensor(f"o_{i}", [1, tokens, d])]
        ops += [op(f"fc1_{i}", "linear", [x, f"w1_{i}"], [f"h_{i}"]),
                op(f"act_{i}", "relu", [f"h_{i}"], [f"a_{i}"]),
                op(f"fc2_{i}", "linear", [f"a_{i}", f"w2_{i}"], [f"y_{i}"]),
                op(f"res_{i}", "add", [x, f"y_{i}"], [f"o_{i}"])]
        x = f"o_{i}"
    graph: dict[str, Any] = {"format": "layoutsat-graph", "version": 1, "name": "mlp",
                             "tensors": ts, "ops": ops, "outputs": [x]}
    if pinned:
        graph["mesh_inputs"] = {"x": ["R", "R"]}
        graph["mesh_outputs"] = {x: ["R", "R"]}
    return graph


def plan_of(graph: dict, solver: str = "cpsat", seconds: float = 10.0) -> LayoutPlan:
    return mesh.solve(parse_graph(graph), N300, solver, deadline=Deadline.after(seconds))


@pytest.fixture(scope="module")
def megatron_case() -> tuple[LayoutGraph, LayoutPlan]:
    graph = mlp(4096, 8192)
    return parse_graph(graph), plan_of(graph)


def test_a_wide_mlp_on_two_chips_is_column_then_row_parallel_with_one_all_reduce(
        megatron_case: tuple[LayoutGraph, LayoutPlan]) -> None:
    """Weights of 64 MiB each dominate (233 us to read one from DRAM): halving them saves
    more than the one all_reduce of the [1, 32, 4096] output (about 39 us) costs, and the
    replicated residual add needs the full sum, so the Megatron pattern is optimal."""
    graph, plan = megatron_case
    m = plan.mesh
    assert m is not None and plan.status in ("optimal", "feasible")
    assert {op: s[1] for op, s in m.strategies.items()} == {
        "fc1_0": "column", "act_0": "split2", "fc2_0": "row", "res_0": "replicated"}
    assert m.placements["w1_0"] == ["R", "S1"] and m.placements["w2_0"] == ["R", "S0"]
    assert m.placements["y_0"] == ["R", "P"]
    (reduce,) = m.collectives
    assert (reduce.kind, reduce.tensor, reduce.axis, reduce.consumers) == \
        ("all_reduce", "y_0", 1, ["res_0"])
    assert reduce.bytes_per_chip == 32 * 4096 * 2
    assert reduce.latency_us == pytest.approx(9.07 + 5.82 + 32 * 4096 * 2 / 10.9e3)
    assert plan.stats.best_bound is not None and plan.stats.best_bound <= plan.total_latency_us
    assert evaluate_mesh(graph, plan).valid


def test_every_baseline_is_valid_and_none_beats_cpsat(
        megatron_case: tuple[LayoutGraph, LayoutPlan]) -> None:
    graph, plan = megatron_case
    totals = {}
    for name in ("replicate", "megatron", "autoshard"):
        base = mesh.solve(graph, N300, name, deadline=Deadline.after(5))
        verdict = evaluate_mesh(graph, base)
        assert verdict.valid, verdict.violations
        assert verdict.total_latency_us == pytest.approx(base.total_latency_us)
        totals[name] = base.total_latency_us
    assert plan.total_latency_us <= min(totals.values())
    # replicate: the batch of one cannot split, so every chip runs everything
    rep = mesh.solve(graph, N300, "replicate", deadline=Deadline.after(5))
    assert rep.mesh is not None and rep.mesh.collectives == []
    assert set(s[1] for s in rep.mesh.strategies.values()) == {"replicated"}


def test_weights_beyond_one_chips_dram_must_be_split() -> None:
    """Four blocks of two 2 GiB weights: 16 GiB, more than a Wormhole chip's 12 GiB, so a
    replicated plan does not fit and the planner splits every weight over the two chips."""
    graph = mlp(16384, 65536, layers=4)
    with pytest.raises(InputValidationError) as refused:
        plan_of(graph, "replicate", 5)
    (issue,) = refused.value.issues
    assert issue.rule == "mesh.dram_capacity" and "17,18" in issue.msg
    plan = plan_of(graph, "cpsat", 20)
    m = plan.mesh
    assert m is not None and plan.status != "invalid"
    assert m.memory.weight_bytes <= 12 * 2**30 < 16 * 2**30
    weights = [t for t in m.placements if t.startswith("w")]
    assert len(weights) == 8 and all("S0" in m.placements[w] or "S1" in m.placements[w]
                                     for w in weights)
    assert evaluate_mesh(parse_graph(graph), plan).valid


def test_weights_beyond_the_whole_mesh_are_refused_naming_the_rule() -> None:
    """Eight blocks: 32 GiB of weights, more than both chips hold together."""
    with pytest.raises(InputValidationError) as refused:
        plan_of(mlp(16384, 65536, layers=8), "cpsat", 10)
    (issue,) = refused.value.issues
    assert issue.rule == "mesh.dram_capacity" and issue.loc == ("mesh",)


def test_a_small_model_stays_replicated_when_collectives_would_dominate() -> None:
    """[1, 32, 64] activations are one tile wide: splitting saves nothing on a chip and any
    collective costs microseconds, so every op runs whole on both chips."""
    plan = plan_of(mlp(64, 128), "cpsat", 5)
    m = plan.mesh
    assert m is not None
    assert set(s[1] for s in m.strategies.values()) == {"replicated"}
    assert m.collectives == [] and m.collective_latency_us == 0
    assert plan.total_latency_us == m.chip_latency_us


def test_the_evaluator_catches_every_tampered_decision(
        megatron_case: tuple[LayoutGraph, LayoutPlan]) -> None:
    graph, plan = megatron_case
    m = plan.mesh
    assert m is not None

    def kinds(changed: dict) -> set[str]:
        tampered = plan.model_copy(update={"mesh": m.model_copy(update=changed)})
        verdict = evaluate_mesh(graph, tampered)
        assert not verdict.valid
        return {v.kind for v in verdict.violations}

    assert "strategy.illegal" in kinds(
        {"strategies": {**m.strategies, "fc2_0": ["replicated", "sideways"]}})
    assert "placement.mismatch" in kinds(
        {"strategies": {**m.strategies, "fc2_0": ["replicated", "column"]}})
    assert "placement.illegal" in kinds({"placements": {**m.placements, "w1_0": ["R", "S7"]}})
    assert "collectives.mismatch" in kinds({"collectives": []})
    cheap = [c.model_copy(update={"latency_us": 1.0}) for c in m.collectives]
    assert "collectives.latency" in kinds({"collectives": cheap, "collective_latency_us": 1.0})
    short = plan.model_copy(update={"total_latency_us": plan.total_latency_us - 5})
    assert "total.mismatch" in {v.kind for v in evaluate_mesh(graph, short).violations}
    # the residual add cannot read partial sums of what ops make whole
    assert "collectives.impossible" in kinds(
        {"strategies": {**m.strategies, "res_0": ["replicated", "partial"]},
         "placements": {**m.placements, "o_0": ["R", "P"]}})
    fast = m.mesh.model_copy(update={"axes": [a.model_copy(update={"link_gbps": 1e4})
                                              for a in m.mesh.axes]})
    assert "mesh.mismatch" in kinds({"mesh": fast})
    assert "memory.mismatch" in kinds(
        {"memory": m.memory.model_copy(update={"weight_bytes": 1})})


def test_the_family_refuses_what_a_mesh_cannot_take() -> None:
    graph = parse_graph(mlp(64, 128, pinned=False))

    def rules(**options: Any) -> set[str]:
        with pytest.raises(InputValidationError) as refused:
            FAMILY.admit(graph, LayoutOptions(**options))
        return {i.rule for i in refused.value.issues}

    assert rules(mesh="n300", solver="dram") == {"solver.mesh"}
    assert rules(solver="megatron") == {"solver.needs_mesh"}
    assert rules(mesh="n300", device="wormhole_n150") == {"device.with_mesh"}
    assert rules(mesh="n300", explain=True) == {"explain.with_mesh"}
    with pytest.raises(ValueError, match="unknown mesh preset"):
        LayoutOptions(mesh="t9000")
    FAMILY.admit(graph, LayoutOptions(mesh="t3000", solver="autoshard"))


@pytest.mark.parametrize(("field", "value", "rule"), [
    ("mesh_inputs", {"y_0": ["R", "R"]}, "mesh_inputs.unknown"),
    ("mesh_inputs", {"x": ["R"]}, "mesh_inputs.arity"),
    ("mesh_inputs", {"x": ["R", "P"]}, "mesh_inputs.partial"),
    ("mesh_inputs", {"x": ["R", "S0"]}, "mesh_inputs.uneven"),
    ("mesh_outputs", {"x": ["R", "R"]}, "mesh_outputs.unknown"),
    ("mesh_outputs", {"o_0": ["P", "R"]}, "mesh_outputs.partial"),
])
def test_pinned_placements_are_checked_against_the_mesh(field: str, value: dict,
                                                        rule: str) -> None:
    graph = {**mlp(64, 128, pinned=False), field: value}
    with pytest.raises(InputValidationError) as refused:
        FAMILY.admit(parse_graph(graph), LayoutOptions(mesh="n300"))
    (issue,) = refused.value.issues
    assert issue.rule == rule and issue.loc == (field, next(iter(value)))


def test_an_unknown_mesh_preset_in_the_graph_is_named() -> None:
    with pytest.raises(InputValidationError) as refused:
        parse_graph({**mlp(64, 128, pinned=False), "mesh": "t9000"})
    assert {i.rule for i in refused.value.issues} == {"mesh.unknown"}


def test_the_api_plans_a_mesh_and_checks_the_plan(tmp_path: Path) -> None:
    graph = mlp(64, 128, pinned=False)
    with TestClient(create_app(Settings(data_dir=tmp_path, pool_workers=1))) as client:
        solved = client.post("/v1/layout/solve?mesh=t3000&solver=megatron&time_limit_s=5",
                             json=graph)
        assert solved.status_code == 200, solved.text
        plan = solved.json()
        assert plan["mesh"]["mesh"]["name"] == "t3000" and plan["solver"] == "megatron"
        checked = client.post("/v1/layout/evaluate", json={"graph": graph, "plan": plan})
        assert checked.status_code == 200, checked.text
        assert checked.json()["valid"] is True
        wrong = client.post("/v1/layout/solve?mesh=n300&solver=greedy", json=graph)
        assert wrong.status_code == 422
        assert wrong.json()["errors"][0]["rule"] == "solver.mesh"
        unknown = client.post("/v1/layout/solve?mesh=t9000", json=graph)
        assert unknown.status_code == 422
        assert unknown.json()["errors"][0]["rule"] == "mesh.unknown"
        bad_spec = client.post("/v1/jobs", json={"kind": "layout", "payload": graph, "options": {
            "mesh": {"name": "m", "chip": "wormhole_n300", "axes": [{"size": 0}]}}})
        assert bad_spec.status_code == 422, bad_spec.text
        pinned = client.post("/v1/layout/solve?mesh=n300",
                             json={**graph, "mesh_inputs": {"x": ["R", "P"]}})
        assert pinned.status_code == 422
        assert pinned.json()["errors"][0]["rule"] == "mesh_inputs.partial"
        again = client.post("/v1/layout/solve?mesh=n300&time_limit_s=5", json=graph)
        assert again.status_code == 200, again.text


def test_the_command_line_plans_on_a_mesh_preset(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("layoutsat")), "layout", "solve",
         str(SMALL_EXAMPLE), "--mesh", "n300", "--time-limit", "5", "-o", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "mesh n300 (1x2 wormhole_n300)" in done.stdout
    plan = json.loads(out.read_text())
    assert plan["mesh"]["strategies"].keys() == {"ln", "fc1", "fc2", "residual"}


def test_a_custom_mesh_spec_is_planned_and_deterministic_solves_repeat() -> None:
    """A 1x4 Blackhole ring given as a spec (as a request's options carry it); with the
    deterministic option two solves give the same plan byte for byte."""
    spec = {"name": "bh-ring", "chip": "blackhole_p150",
            "axes": [{"size": 4, "topology": "ring", "links": 2, "link_gbps": 50.0,
                      "hop_latency_us": 0.52}]}
    options = LayoutOptions(mesh=spec, solver="cpsat", time_limit_s=5, deterministic=True)
    graph = parse_graph({**mlp(4096, 8192), "mesh_inputs": {"x": ["R"]},
                         "mesh_outputs": {"o_0": ["R"]}})
    FAMILY.admit(graph, options)
    first, second = (FAMILY.solve(graph, options, Deadline.after(5, deterministic=True))
                     for _ in range(2))
    assert first.answer == second.answer
    plan = first.result
    assert plan.mesh is not None and plan.mesh.mesh.name == "bh-ring"
    assert plan.device.name == "blackhole_p150" and plan.stats.deterministic
    assert {c.kind for c in plan.mesh.collectives} <= {"all_reduce", "all_gather",
                                                       "reduce_scatter", "slice"}


def test_the_strategy_problem_is_solved_exactly_and_its_optimum_is_the_bound() -> None:
    """Every assignment of the small MLP's strategy problem enumerated: with each reader
    paying its share of a collective the problem never costs more than the assignment
    does (one chain per tensor and placement), elimination finds its least, and that is
    the plan's bound."""
    graph = parse_graph(mlp(4096, 8192, pinned=False))
    problem = analyze_mesh(graph, N300)
    shared = strategy_problem(problem, shared=True)
    least = None
    for choice in itertools.product(*(range(len(c)) for c in shared.costs)):
        cost = evaluate_strategies(shared, list(choice)).cost
        assert cost is not None
        d = _decisions(problem, list(choice))
        assert cost / 1000 <= _strategy_us(problem, d) + 1e-9
        least = cost if least is None else min(least, cost)
    exact = eliminate(shared, time.monotonic() + 10)
    assert exact is not None and exact.cost == least
    plan = mesh.solve(graph, N300, "cpsat", deadline=Deadline.after(10))
    assert plan.stats.best_bound == pytest.approx(least / 1000)
    assert plan.total_latency_us >= plan.stats.best_bound


def test_a_collective_read_by_several_ops_is_paid_once_and_the_bound_stays_below() -> None:
    """x arrives split by columns and three linears need it whole: one all_gather serves
    them all, so charging each reader the whole gather would put the bound above the plan
    (and call a plan optimal that is not proven)."""
    ts = [tensor("x", [1, 32, 256], "input")]
    ops = []
    for i in range(3):
        ts += [tensor(f"w{i}", [256, 256], "constant"), tensor(f"y{i}", [1, 32, 256])]
        ops.append(op(f"fc{i}", "linear", ["x", f"w{i}"], [f"y{i}"]))
    ts.append(tensor("s", [1, 32, 256]))
    ts.append(tensor("out", [1, 32, 256]))
    ops += [op("sum", "add", ["y0", "y1"], ["s"]), op("out", "add", ["s", "y2"], ["out"])]
    graph = {"format": "layoutsat-graph", "version": 1, "name": "fan-out", "tensors": ts,
             "ops": ops, "outputs": ["out"], "mesh_inputs": {"x": ["R", "S2"]}}
    plan = plan_of(graph, "cpsat", 5)
    m = plan.mesh
    assert m is not None and plan.stats.best_bound is not None
    assert plan.stats.best_bound <= plan.total_latency_us
    gathers = [c for c in m.collectives if c.tensor == "x"]
    assert len(gathers) <= 1
    if gathers:
        assert set(gathers[0].consumers) == {"fc0", "fc1", "fc2"} & set(gathers[0].consumers)


@pytest.mark.parametrize("preset", sorted(MESH_PRESETS))
def test_every_mesh_preset_plans_the_shipped_example(preset: str) -> None:
    graph = parse_graph(json.loads(SMALL_EXAMPLE.read_text()))
    plan = mesh.solve(graph, MESH_PRESETS[preset], "cpsat", deadline=Deadline.after(5))
    assert plan.status in ("optimal", "feasible") and plan.mesh is not None
    assert plan.device.name == MESH_PRESETS[preset].chip
    assert evaluate_mesh(graph, plan).valid


def test_an_output_pinned_where_some_placements_cannot_reach_is_planned_around() -> None:
    """[4, 4] pinned [S1, S0] on a 2x4 mesh: a plan whose relu ends split otherwise may
    have no collective path there; such strategies are priced out, none crashes."""
    graph = {"format": "layoutsat-graph", "version": 1, "name": "pin",
             "tensors": [tensor("x", [4, 4], "input"), tensor("y", [4, 4])],
             "ops": [op("r", "relu", ["x"], ["y"])], "outputs": ["y"],
             "mesh_outputs": {"y": ["S1", "S0"]}}
    plan = mesh.solve(parse_graph(graph), MESH_PRESETS["t3000"], "cpsat",
                      deadline=Deadline.after(5))
    assert plan.status != "invalid" and plan.mesh is not None


def test_megatron_runs_column_then_row_on_a_one_by_two_mesh(
        megatron_case: tuple[LayoutGraph, LayoutPlan]) -> None:
    graph, _ = megatron_case
    plan = mesh.solve(graph, N300, "megatron", deadline=Deadline.after(5))
    assert plan.mesh is not None
    assert plan.mesh.strategies["fc1_0"] == ["replicated", "column"]
    assert plan.mesh.strategies["fc2_0"] == ["replicated", "row"]


def test_a_one_chip_plan_of_a_graph_that_names_a_mesh_is_refused() -> None:
    doc = json.loads(SMALL_EXAMPLE.read_text())
    one_chip = FAMILY.solve(parse_graph(doc), LayoutOptions(solver="dram", time_limit_s=5),
                            Deadline.after(5))
    with pytest.raises(InputValidationError) as refused:
        FAMILY.evaluate(parse_graph({**doc, "mesh": "n300"}), one_chip.answer,
                        FAMILY.evaluate_options())
    assert {i.rule for i in refused.value.issues} == {"mesh.missing"}


def test_a_plan_for_the_mesh_asked_over_the_graphs_own_is_checked_against_that_mesh() -> None:
    graph = parse_graph({**mlp(64, 128, pinned=False), "mesh": "n300"})
    solved = FAMILY.solve(graph, LayoutOptions(mesh="t3000", time_limit_s=5),
                          Deadline.after(5))
    asked = FAMILY.evaluate(graph, solved.answer, FAMILY.evaluate_options(mesh="t3000"))
    assert asked.valid, asked.errors
    own = FAMILY.evaluate(graph, solved.answer, FAMILY.evaluate_options())
    assert not own.valid and any("mesh.mismatch" in e for e in own.errors)
