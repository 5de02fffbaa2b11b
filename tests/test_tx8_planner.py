"""The TX8 planner: the cost model pinned to hand-computed numbers (docs/tx8.md), the
seed's baseline, the joint model, the service around them."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from models.errors import InputValidationError
from models.layout import parse_graph
from models.tx8 import TX8_PRESETS, Tx8Spec
from solver import tx8
from solver.deadline import Deadline, now
from solver.layout.family import FAMILY, LayoutOptions
from solver.tx8.configs import cheapest, cpsat_space, seed_split_sequence
from solver.tx8.cost import costs, single
from solver.tx8.cpsat import price, solve_groups
from solver.tx8.evaluate import evaluate_tx8
from solver.tx8.groupcost import groupcost, seed_choice, seed_groups, seed_layouts
from solver.tx8.ops import aligned_extent
from solver.tx8.plan import Chosen, build_plan
from solver.tx8.problem import build_problem
from tests.layout_fixtures import SMALL_EXAMPLE, op, tensor

ROOT = Path(__file__).resolve().parents[1]
TX8 = TX8_PRESETS["tx8"]


def graph_of(tensors: list[dict], ops: list[dict], outputs: list[str]) -> dict:
    return {"format": "layoutsat-graph", "version": 1, "name": "g", "device": "tx8",
            "tensors": tensors, "ops": ops, "outputs": outputs}


def one_matmul(m: int, k: int, n: int) -> dict:
    return graph_of([tensor("a", [m, k], "input"), tensor("b", [k, n], "constant"),
                     tensor("c", [m, n])], [op("mm", "matmul", ["a", "b"], ["c"])], ["c"])


def group_latency(graph: dict, names: list[str], layout: str, **config: Any) -> Any:
    p = build_problem(parse_graph(graph), TX8)
    return costs(p.shape_of(names), layout, TX8, single(**config))


# ----------------------------------------------------------------------------- cost model


def test_one_matmul_on_16_tiles_four_by_four_against_sixteen_by_one_and_a_split_k() -> None:
    """[64, 256] x [256, 512] bf16, one slice, no double buffer (docs/tx8.md by hand):
    8e6 FLOP/us per tile, DDR 2e5 B/us shared by 16 tiles, 0.5 us per DMA, 2 us per group.
    4x4: slices A [16, 256] 8,192 B, B [256, 128] 65,536 B, C [16, 128] 4,096 B; load
    1 + 16 x 73,728 / 2e5 = 6.89824, store 0.5 + 0.32768, compute 2 x 16 x 256 x 128 / 8e6 =
    0.131072: 9.856992. 16x1: A [4, 256] 2,048 B, B whole 262,144 B, C [4, 512] 4,096 B;
    load 1 + 16 x 264,192 / 2e5 = 22.13536, compute pads M 4 -> 8: 2 x 8 x 256 x 512 / 8e6
    = 0.262144: 25.225184. 4x1 with K over 4 tiles: A [16, 64] 2,048 B, B [64, 512] 65,536
    B, C a quarter of [16, 512] after the reduce-scatter, 4,096 B; load 6.40672, compute
    0.131072, reduce-scatter 3 x (4 x 8,192 / 4 / 128,000 + 0.05) = 0.342: 9.707472."""
    graph = one_matmul(64, 256, 512)
    common = dict(split=(1, 1), reduce_split=1, double_buffer=False, resident=False)
    four = group_latency(graph, ["mm"], "aligned", sharding=(4, 4), reduce_sharding=1, **common)
    rows = group_latency(graph, ["mm"], "aligned", sharding=(16, 1), reduce_sharding=1, **common)
    split_k = group_latency(graph, ["mm"], "aligned", sharding=(4, 1), reduce_sharding=4,
                            **common)
    assert four.latency_us[0] == pytest.approx(9.856992, abs=1e-9)
    assert four.spm_bytes[0] == 8192 + 65536 + 4096
    assert rows.latency_us[0] == pytest.approx(25.225184, abs=1e-9)
    assert split_k.reduce_us[0] == pytest.approx(0.342, abs=1e-12)
    assert split_k.latency_us[0] == pytest.approx(9.707472, abs=1e-9)
    assert split_k.spm_bytes[0] == 2048 + 65536 + 4096 + 16 * 512 * 4  # psum in f32
    p = build_problem(parse_graph(graph), TX8)
    best = cheapest(p.shape_of(["mm"]), "aligned", TX8, cpsat_space(p.shape_of(["mm"]), 16))
    assert best is not None and best.latency_us <= 9.707472 + 1e-9


def test_an_operand_beyond_spm_forces_a_temporal_split() -> None:
    """[256, 4096] x [4096, 4096]: on 1x16 tiles one slice needs A 2 MiB + B [4096, 256]
    2 MiB + C [256, 256] 128 KiB = 4,325,376 B, over the 3 MiB SPM; every plan splits."""
    graph = one_matmul(256, 4096, 4096)
    whole = group_latency(graph, ["mm"], "aligned", sharding=(1, 16), reduce_sharding=1,
                          split=(1, 1), reduce_split=1, double_buffer=False, resident=False)
    assert whole.spm_bytes[0] == 4_325_376 > TX8.spm_bytes
    for solver in ("groupcost", "cpsat"):
        plan = tx8.solve(parse_graph(graph), TX8, solver, deadline=Deadline.after(10))
        assert plan.status != "invalid", plan.violations
        (group,) = plan.tx8.groups
        assert int(np.prod(group.split)) * group.reduce_split > 1
        assert group.spm_peak_bytes <= TX8.spm_bytes


def test_double_buffering_overlaps_each_slice_dma_with_compute() -> None:
    """[1024, 1024] x [1024, 1024] on 4x4 tiles in 2x2 slices: per slice A [128, 1024] and
    B [1024, 128] 262,144 B each, load 1 + 16 x 524,288 / 2e5 = 42.94304, store 0.5 + 16 x
    32,768 / 2e5 = 3.12144, compute 2 x 128 x 1024 x 128 / 8e6 = 4.194304. Serial: 2 + 4 x
    50.258784 = 203.035136; double-buffered: 2 + 50.258784 + 3 x max(4.194304, 46.06448) =
    190.452224, the compute of three slices hidden under their DMA."""
    graph = one_matmul(1024, 1024, 1024)
    common = dict(sharding=(4, 4), reduce_sharding=1, split=(2, 2), reduce_split=1,
                  resident=False)
    serial = group_latency(graph, ["mm"], "aligned", double_buffer=False, **common)
    overlapped = group_latency(graph, ["mm"], "aligned", double_buffer=True, **common)
    assert serial.latency_us[0] == pytest.approx(203.035136, abs=1e-9)
    assert overlapped.latency_us[0] == pytest.approx(190.452224, abs=1e-9)
    assert overlapped.spm_bytes[0] == 2 * (262144 + 262144 + 32768)


def test_the_joint_choice_at_a_group_boundary_beats_each_groups_own_best() -> None:
    """matmul -> relu -> matmul on 100 channels: alone, the relu is cheapest compact (the
    aligned layout pads 100 to 128), but then its input and its output each need a
    conversion, 2 + 1 + (12,800 + 16,384) / 2e5 = 3.14592 us each, more than the padding
    costs; cpsat keeps the relu aligned."""
    graph = graph_of(
        [tensor("x", [64, 100], "input"), tensor("w1", [100, 100], "constant"),
         tensor("w2", [100, 100], "constant"), tensor("h", [64, 100]), tensor("r", [64, 100]),
         tensor("y", [64, 100])],
        [op("mm1", "matmul", ["x", "w1"], ["h"]), op("act", "relu", ["h"], ["r"]),
         op("mm2", "matmul", ["r", "w2"], ["y"])], ["y"])
    p = build_problem(parse_graph(graph), TX8)
    own = {layout: cheapest(p.shape_of(["act"]), layout, TX8, cpsat_space(p.shape_of(["act"]),
                                                                            16))
           for layout in ("compact", "aligned")}
    assert own["compact"].latency_us < own["aligned"].latency_us
    assert p.conversion("h", "compact") == (12800 + 16384, pytest.approx(3.14592))
    singles = {n: cheapest(p.shape_of([n]), "aligned", TX8, cpsat_space(p.shape_of([n]), 16))
               for n in ("mm1", "mm2")}
    each_best = build_plan(p, [Chosen(("mm1",), "aligned", singles["mm1"]),
                               Chosen(("act",), "compact", own["compact"]),
                               Chosen(("mm2",), "aligned", singles["mm2"])], "own", "feasible")
    assert {(c.tensor, c.to) for c in each_best.tx8.conversions} == {
        ("x", "aligned"), ("h", "compact"), ("r", "aligned"), ("y", "compact")}
    joint = tx8.solve(parse_graph(graph), TX8, "cpsat", deadline=Deadline.after(10))
    assert joint.status == "optimal"
    assert joint.tx8.tensor_layouts["r"] == "aligned"
    assert joint.total_latency_us < each_best.total_latency_us
    assert evaluate_tx8(parse_graph(graph), each_best, TX8).valid


def test_the_cx_width_is_whole_blocks_and_a_padded_rest() -> None:
    """The seed's Cx: 64-channel blocks, the rest padded to 4, 8, 16, 32 or a whole block;
    widths of one aligned block lie the same in both layouts."""
    widths = np.array([3, 16, 33, 64, 65, 80, 100, 300, 768, 1000])
    assert aligned_extent(widths, 64).tolist() == [4, 16, 64, 64, 68, 80, 128, 320, 768, 1024]
    graph = graph_of([tensor(f"x{w}", [2, int(w)], "input") for w in widths],
                     [op("r", "relu", ["x3"], ["y"])], ["y"])
    graph["tensors"].append(tensor("y", [2, 3]))
    p = build_problem(parse_graph(graph), TX8)
    assert [p.same_in_both_layouts(f"x{w}") for w in widths] == [
        False, True, False, True, False, False, False, False, False, False]


def test_a_pooling_window_and_a_reduce_split_price_as_worked_by_hand() -> None:
    """max_pool2d 3x3 (stride 1, padding 1) on [1, 8, 8, 16], one tile: input slice
    [1, 10, 10, 16] 3,200 B, output 2,048 B; compute 1,024 x 9 / 64,000 = 0.144; load
    0.5 + 3,200 / 2e5 = 0.516, store 0.5 + 2,048 / 2e5 = 0.51024: 3.17024.
    matmul [64, 256] x [256, 512] then gelu, 4x4 tiles, K in 2 slices: A [16, 128] 4,096 B,
    B [128, 128] 32,768 B, stores 4,096 B once per output slice; compute per slice the
    matmul 2 x 16 x 128 x 128 / 8e6 = 0.065536 and half the gelu (it runs once per output
    slice) 2,048 x 2 / 64,000 / 2 = 0.032; load 0.82768 + 3.12144, store 0.82768 / 2:
    2 + 2 x (3.94912 + 0.097536 + 0.41384) = 10.920992."""
    pool = graph_of([tensor("x", [1, 8, 8, 16], "input"), tensor("y", [1, 8, 8, 16])],
                    [op("mp", "max_pool2d", ["x"], ["y"], kernel_size=[3, 3], stride=[1, 1],
                        padding=[1, 1])], ["y"])
    one_tile = dict(sharding=(1, 1, 1, 1), reduce_sharding=1, split=(1, 1, 1, 1),
                    reduce_split=1, double_buffer=False, resident=False)
    assert group_latency(pool, ["mp"], "compact", **one_tile).latency_us[0] == pytest.approx(
        3.17024, abs=1e-9)
    mm_gelu = one_matmul(64, 256, 512)
    mm_gelu["tensors"].append(tensor("g", [64, 512]))
    mm_gelu["ops"].append(op("act", "gelu", ["c"], ["g"]))
    mm_gelu["outputs"] = ["g"]
    split_k = group_latency(mm_gelu, ["mm", "act"], "aligned", sharding=(4, 4),
                            reduce_sharding=1, split=(1, 1), reduce_split=2,
                            double_buffer=False, resident=False)
    assert split_k.compute_us[0] == pytest.approx(0.097536, abs=1e-12)
    assert split_k.latency_us[0] == pytest.approx(10.920992, abs=1e-9)


# ----------------------------------------------------------------------------- the solvers


def test_the_seed_split_search_stops_at_the_pe_arrays_k_and_n() -> None:
    """[64, 64] x [64, 128] on 16x1 tiles (each [4, 128], K 64): K halves to 16 (three
    steps), then the last dim to 8 columns, then the rows to one."""
    p = build_problem(parse_graph(one_matmul(64, 64, 128)), TX8)
    seq = seed_split_sequence(p.shape_of(["mm"]), (16, 1), 1, (8, 16, 8))
    assert [rp for _, rp in seq[:3]] == [1, 2, 4] and max(rp for _, rp in seq) == 4
    assert seq[-1] == ((4, 16), 4) and ((1, 32), 4) not in seq


def test_groupcost_falls_back_to_single_ops_where_its_search_fits_nothing() -> None:
    """On a 4 KiB SPM a matmul with its four adds fits no configuration as one pattern
    group, so each op is a group (GroupOptimizationPass); a 7x7 conv the seed's split search
    cannot fit (K stops at 16 channels) takes cpsat's cheapest."""
    tiny = Tx8Spec(**{**TX8.model_dump(), "name": "tiny", "spm_bytes": 4096,
                      "spm_alignment_bytes": 512})
    ts = [tensor("a", [64, 64], "input"), tensor("w", [64, 64], "constant"),
          tensor("h0", [64, 64])]
    ops = [op("mm", "matmul", ["a", "w"], ["h0"])]
    for i in range(4):
        ts += [tensor(f"e{i}", [64, 64], "input"), tensor(f"h{i + 1}", [64, 64])]
        ops.append(op(f"add{i}", "add", [f"h{i}", f"e{i}"], [f"h{i + 1}"]))
    chain = parse_graph(graph_of(ts, ops, ["h4"]))
    p = build_problem(chain, tiny)
    assert seed_groups(p, seed_layouts(p))[0] == ("mm", "add0", "add1", "add2", "add3")
    plan = tx8.solve(chain, tiny, "groupcost", deadline=Deadline.after(10))
    assert plan.status == "feasible" and [g.ops for g in plan.tx8.groups] == [
        ["mm"], ["add0"], ["add1"], ["add2"], ["add3"]]
    conv = parse_graph(graph_of(
        [tensor("x", [1, 14, 14, 64], "input"), tensor("k", [64, 64, 7, 7], "constant"),
         tensor("y", [1, 14, 14, 64])], [op("cv", "conv2d", ["x", "k"], ["y"], padding=[3, 3])],
        ["y"]))
    small = Tx8Spec(**{**tiny.model_dump(), "spm_alignment_bytes": 256})
    shape = build_problem(conv, small).shape_of(["cv"])
    assert seed_choice(shape, "aligned", build_problem(conv, small)) is None
    base = tx8.solve(conv, small, "groupcost", deadline=Deadline.after(10))
    best = tx8.solve(conv, small, "cpsat", deadline=Deadline.after(10))
    assert base.status == "feasible" and base.total_latency_us == pytest.approx(
        best.total_latency_us)


def test_pricing_cut_by_the_deadline_keeps_the_baseline_and_claims_no_bound() -> None:
    graph = parse_graph(json.loads((ROOT / "benchmarks/layout/models/resnet50-b1.json")
                                   .read_text()))
    p = build_problem(graph, TX8)
    seeded = groupcost(p)
    late = price(p, now() - 1.0, seeded)
    assert not late.complete
    assert set(late.groups) == {c.ops for c in seeded}
    chosen, bound, proven = solve_groups(p, late, seeded, now() + 5, 0, 1)
    assert bound is None and not proven
    assert build_plan(p, chosen, "cpsat", "feasible").total_latency_us <= build_plan(
        p, seeded, "groupcost", "feasible").total_latency_us + 1e-9




def test_groupcost_groups_a_matmul_with_its_elementwise_tail_and_reuses_templates() -> None:
    """Two identical blocks x -> linear -> gelu -> add(x): each a pattern group (the NE op
    and its only reader's elementwise chain), every op aligned by the layout passes; the
    second block reuses the first's configuration."""
    ts, ops, x = [tensor("x0", [128, 256], "input")], [], "x0"
    for i in range(2):
        ts += [tensor(f"w{i}", [256, 256], "constant"), tensor(f"h{i}", [128, 256]),
               tensor(f"g{i}", [128, 256]), tensor(f"x{i + 1}", [128, 256])]
        ops += [op(f"fc{i}", "linear", [x, f"w{i}"], [f"h{i}"]),
                op(f"act{i}", "gelu", [f"h{i}"], [f"g{i}"]),
                op(f"res{i}", "add", [f"g{i}", x], [f"x{i + 1}"])]
        x = f"x{i + 1}"
    graph = graph_of(ts, ops, [x])
    p = build_problem(parse_graph(graph), TX8)
    layouts = seed_layouts(p)
    assert set(layouts.values()) == {"aligned"}
    assert seed_groups(p, layouts) == [("fc0", "act0", "res0"), ("fc1", "act1", "res1")]
    plan = tx8.solve(parse_graph(graph), TX8, "groupcost", deadline=Deadline.after(10))
    first, second = plan.tx8.groups
    assert second.template == first.name and first.template is None
    assert (second.sharding, second.split) == (first.sharding, first.split)
    assert plan.tx8.conversions[0].tensor == "x0"  # the host's compact input, once
    assert plan.tx8.conversions[0].consumers == [first.name]


def random_graph(seed: int) -> dict:
    """A random chain-with-branches of matmuls, elementwise ops, norms and reshapes."""
    rng = random.Random(seed)
    rows, width = rng.choice([32, 64, 128]), rng.choice([64, 100, 256])
    ts = [tensor("t0", [rows, width], "input")]
    ops: list[dict] = []
    live = ["t0"]
    for i in range(rng.randint(4, 12)):
        kind = rng.choice(["matmul", "matmul", "relu", "add", "layernorm", "softmax", "mul"])
        src = rng.choice(live[-3:])
        out = f"t{i + 1}"
        if kind == "matmul":
            ts += [tensor(f"w{i}", [width, width], "constant"), tensor(out, [rows, width])]
            ops.append(op(f"op{i}", "matmul", [src, f"w{i}"], [out]))
        elif kind in ("add", "mul"):
            ts.append(tensor(out, [rows, width]))
            ops.append(op(f"op{i}", kind, [src, rng.choice(live)], [out]))
        else:
            ts.append(tensor(out, [rows, width]))
            ops.append(op(f"op{i}", kind, [src], [out]))
        live.append(out)
    read = {t for o in ops for t in o["inputs"]}
    return graph_of(ts, ops, [t for t in live[1:] if t not in read] or [live[-1]])


@pytest.mark.parametrize("seed", range(12))
def test_cpsat_is_valid_and_never_worse_than_groupcost_on_random_graphs(seed: int) -> None:
    graph = parse_graph(random_graph(seed))
    base = tx8.solve(graph, TX8, "groupcost", deadline=Deadline.after(10))
    best = tx8.solve(graph, TX8, "cpsat", deadline=Deadline.after(10))
    assert base.status == "feasible" and best.status != "invalid", best.violations
    assert best.total_latency_us <= base.total_latency_us + 1e-9
    assert best.stats.best_bound is not None
    assert best.stats.best_bound <= best.total_latency_us + 1e-6
    assert evaluate_tx8(graph, best, TX8).total_latency_us == pytest.approx(
        best.total_latency_us, rel=1e-9)


@pytest.mark.parametrize(("model", "fuses"), [
    ("resnet50-b1", True), ("bert-base-s384", True), ("llama-3.2-1b-prefill128-l1", True),
    ("unet", False)])  # UNet's convs feed pools, concats and opaque upsampling: none fuse
def test_shipped_models_plan_valid_and_cpsat_beats_the_seed_compiler(model: str,
                                                                     fuses: bool) -> None:
    graph = json.loads((ROOT / "benchmarks/layout/models" / f"{model}.json").read_text())
    graph = parse_graph({**graph, "device": "tx8"})
    base = tx8.solve(graph, TX8, "groupcost", deadline=Deadline.after(30))
    best = tx8.solve(graph, TX8, "cpsat", deadline=Deadline.after(30))
    assert base.status == "feasible" and best.status in ("optimal", "feasible")
    assert best.total_latency_us < base.total_latency_us
    assert any(len(g.ops) > 1 for g in best.tx8.groups) == fuses


def test_a_op_that_fits_no_configuration_is_refused_naming_it() -> None:
    """A softmax over 2M bf16 values cannot split its normalized dim: 4 MiB per slice."""
    graph = graph_of([tensor("x", [1, 2**21], "input"), tensor("y", [1, 2**21])],
                     [op("sm", "softmax", ["x"], ["y"])], ["y"])
    with pytest.raises(InputValidationError) as refused:
        FAMILY.admit(parse_graph(graph), LayoutOptions(device="tx8"))
    (issue,) = refused.value.issues
    assert issue.rule == "tx8.spm_fit" and "sm" in issue.msg


def test_a_custom_chip_is_planned_and_deterministic_solves_repeat() -> None:
    """A 2x2-tile chip with 256 KiB of SPM given as a spec (as a request's options carry
    it): more slices than on the preset; with the deterministic option two solves give
    the same plan byte for byte."""
    small = {**TX8.model_dump(), "name": "tx8-2x2", "tiles": [2, 2], "spm_bytes": 1 << 18}
    options = LayoutOptions(device=small, solver="cpsat", time_limit_s=5, deterministic=True)
    graph = parse_graph(one_matmul(256, 1024, 1024))
    FAMILY.admit(graph, options)
    first, second = (FAMILY.solve(graph, options, Deadline.after(5, deterministic=True))
                     for _ in range(2))
    assert first.answer == second.answer
    plan = first.result
    assert plan.device.name == "tx8-2x2" and plan.stats.deterministic
    (group,) = plan.tx8.groups
    assert np.prod(group.sharding) * group.reduce_sharding in (1, 4)
    assert group.spm_peak_bytes <= 1 << 18
    preset = tx8.solve(graph, TX8, "cpsat", deadline=Deadline.after(5))
    assert preset.total_latency_us < plan.total_latency_us


# ----------------------------------------------------------------------------- service


def test_the_family_refuses_tensix_options_with_a_tx8() -> None:
    graph = parse_graph(one_matmul(64, 64, 64))

    def rules(**options: Any) -> set[str]:
        with pytest.raises(InputValidationError) as refused:
            FAMILY.admit(graph, LayoutOptions(**options))
        return {i.rule for i in refused.value.issues}

    assert rules(solver="greedy") == {"solver.tx8"}
    assert rules(mesh="n300") == {"tx8.option"}
    assert rules(order="search") == {"tx8.option"}
    assert rules(device="tx8", explain=True) == {"tx8.option"}
    FAMILY.admit(graph, LayoutOptions(solver="groupcost"))
    assert FAMILY.solvers_for({"device": "tx8"}, {}) == ("cpsat", "groupcost")
    assert FAMILY.solvers_for({}, {"device": "tx8"}) == ("cpsat", "groupcost")


@pytest.mark.parametrize(("change", "where", "rule"), [
    ({"spm_bytes": 10}, ("device", "spm_bytes"), "schema.greater_than_equal"),
    ({"spm_bytes": 8192, "spm_alignment_bytes": 65536}, ("device",), "schema.value_error"),
    ({"tiles": [4]}, ("device", "tiles"), "schema.too_short"),
])
def test_a_faulty_tx8_spec_in_the_graph_is_one_fault_naming_its_field(
        change: dict, where: tuple, rule: str) -> None:
    with pytest.raises(InputValidationError) as refused:
        parse_graph({**one_matmul(64, 64, 64), "device": {**TX8.model_dump(), **change}})
    (issue,) = refused.value.issues
    assert (issue.loc, issue.rule) == (where, rule)


def test_the_api_plans_for_a_tx8_and_checks_the_plan(tmp_path: Path) -> None:
    graph = json.loads(SMALL_EXAMPLE.read_text())
    with TestClient(create_app(Settings(data_dir=tmp_path, pool_workers=1))) as client:
        solved = client.post("/v1/layout/solve?device=tx8&time_limit_s=5", json=graph)
        assert solved.status_code == 200, solved.text
        plan = solved.json()
        assert plan["device"]["name"] == "tx8" and plan["tx8"]["groups"]
        checked = client.post("/v1/layout/evaluate?device=tx8",
                              json={"graph": graph, "plan": plan})
        assert checked.status_code == 200, checked.text
        assert checked.json()["valid"] is True
        plan["tx8"]["groups"][0]["sharding"] = [3] * len(plan["tx8"]["groups"][0]["sharding"])
        tampered = client.post("/v1/layout/evaluate?device=tx8",
                               json={"graph": graph, "plan": plan})
        assert tampered.status_code == 200 and tampered.json()["valid"] is False
        wrong = client.post("/v1/layout/solve?device=tx8&solver=dram", json=graph)
        assert wrong.status_code == 422
        assert wrong.json()["errors"][0]["rule"] == "solver.tx8"
        custom = {**TX8.model_dump(), "name": "tx8-small-spm", "spm_bytes": 1 << 20}
        job = client.post("/v1/jobs", json={"kind": "layout", "payload": graph,
                                            "options": {"device": custom, "time_limit_s": 5}})
        assert job.status_code in (200, 201, 202), job.text
        bad = client.post("/v1/jobs", json={"kind": "layout", "payload": graph, "options": {
            "device": {**custom, "tiles": [0, 4]}}})
        assert bad.status_code == 422, bad.text
        assert bad.json()["errors"][0]["loc"] == ["options", "device", "tiles", 0]
        again = client.post("/v1/layout/solve?device=tx8&solver=groupcost&time_limit_s=5",
                            json=graph)
        assert again.status_code == 200 and again.json()["solver"] == "groupcost"


def test_the_command_line_plans_for_a_tx8(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("layoutsat")), "layout", "solve",
         str(SMALL_EXAMPLE), "--device", "tx8", "--time-limit", "5", "-o", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "on tx8:" in done.stdout and "groups" in done.stdout
    plan = json.loads(out.read_text())
    assert plan["status"] in ("optimal", "feasible") and plan["tx8"]["groups"]
    checked = subprocess.run(
        [str(Path(sys.executable).with_name("layoutsat")), "layout", "evaluate",
         str(SMALL_EXAMPLE), str(out), "--device", "tx8"],
        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
