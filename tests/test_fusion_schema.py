"""Structural validation of fusion problems and solutions: one failing input per rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from models.errors import InputValidationError
from models.fusion import parse_problem, parse_solution
from tests.conftest import BAD_FILES, BENCHMARKS, DIAMOND, MATMUL_CHAIN, load


def issues_of(data: Any, parse=parse_problem) -> list:
    with pytest.raises(InputValidationError) as info:
        parse(data)
    return info.value.issues


def mutated(base: dict, **changes: Any) -> dict:
    data = copy.deepcopy(base)
    data.update(changes)
    return data


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_every_public_benchmark_validates(path):
    problem = parse_problem(load(path))
    assert problem.num_ops == len(load(path)["op_types"])


def test_bad_file_17_names_length_mismatch_and_out_of_range_indices():
    data = load(next(p for p in BAD_FILES if "17" in p.name))
    issues = issues_of(data)
    rules = {i.rule for i in issues}
    assert rules == {"length.ops", "index.tensor"}
    length = next(i for i in issues if i.rule == "length.ops")
    assert length.loc == ("inputs",)
    assert "inputs has 99 entries but op_types has 103" in length.msg
    out_of_range = [i for i in issues if i.rule == "index.tensor"]
    assert {i.path for i in out_of_range} >= {"$.inputs[95][0]", "$.outputs[102][0]"}
    assert all("out of range" in i.msg and "155 tensors" in i.msg for i in out_of_range)


def test_bad_file_13_names_each_pointwise_shape_mismatch():
    data = load(next(p for p in BAD_FILES if "13" in p.name))
    issues = issues_of(data)
    assert {i.rule for i in issues} == {"pointwise.shape"}
    assert {i.loc[:2] for i in issues} == {("inputs", 48), ("inputs", 49), ("inputs", 50)}
    assert "tensor 36 is 128x128 (w x h) but output tensor 82 is 4096x128" in issues[0].msg


@pytest.mark.parametrize(
    ("changes", "rule", "path", "fragment"),
    [
        ({"heights": [128, 128, 128]}, "length.tensors", "$.heights",
         "heights has 3 entries but widths has 4"),
        ({"base_costs": [1, 2]}, "length.ops", "$.base_costs",
         "base_costs has 2 entries but op_types has 3"),
        ({"outputs": [[1], [2]]}, "length.ops", "$.outputs", "outputs has 2 entries"),
        ({"inputs": [[0], [7], [1, 2]]}, "index.tensor", "$.inputs[1][0]",
         "tensor index 7 of op 1 is out of range"),
        ({"outputs": [[1], [-1], [3]]}, "index.tensor", "$.outputs[1][0]",
         "tensor index -1 of op 1 is out of range"),
        ({"widths": [128, 0, 128, 128]}, "positive.dim", "$.widths[1]",
         "must be positive, got 0"),
        ({"heights": [128, 128, -4, 128]}, "positive.dim", "$.heights[2]",
         "must be positive, got -4"),
        ({"base_costs": [1500, -1, 1500]}, "nonneg.cost", "$.base_costs[1]",
         "must be >= 0, got -1"),
        ({"fast_memory_capacity": 0}, "positive.hardware", "$.fast_memory_capacity",
         "fast_memory_capacity must be positive"),
        ({"slow_memory_bandwidth": -10}, "positive.hardware", "$.slow_memory_bandwidth",
         "slow_memory_bandwidth must be positive"),
        ({"native_granularity": [128, 0]}, "positive.native", "$.native_granularity[1]",
         "must be positive"),
        ({"outputs": [[1], [1], [3]], "inputs": [[0], [0], [1, 0]]}, "graph.single_producer",
         "$.outputs[1][0]", "tensor 1 is produced by op 0 and again by op 1"),
        ({"inputs": [[3], [1], [1, 2]]}, "graph.acyclic", "$.inputs",
         "the op graph has a cycle"),
        ({"inputs": [[0], [2], [1, 2]]}, "graph.acyclic", "$.inputs", "op 1 -> op 1"),
        ({"widths": [128, 128, 64, 128]}, "pointwise.shape", "$.inputs[1][0]",
         "all tensors of a Pointwise op must have the same shape"),
        ({"inputs": [[0], [], [1, 2]]}, "pointwise.arity", "$.inputs[1]",
         "needs at least one input"),
        ({"outputs": [[1], [], [3]], "inputs": [[0], [1], [1]]}, "pointwise.arity",
         "$.outputs[1]", "needs at least one output"),
    ],
)
def test_each_structural_rule_is_reported(changes, rule, path, fragment):
    issues = issues_of(mutated(DIAMOND, **changes))
    match = [i for i in issues if i.rule == rule]
    assert match, f"expected rule {rule}, got {[str(i) for i in issues]}"
    assert any(i.path == path and fragment in i.msg for i in match), [str(i) for i in match]


@pytest.mark.parametrize(
    ("changes", "path", "fragment"),
    [
        ({"inputs": [[0], [3, 2]]}, "$.inputs[0]", "needs exactly 2 inputs [LHS, RHS], got 1"),
        ({"inputs": [[0, 1, 2], [3, 2]]}, "$.inputs[0]", "got 3"),
        ({"outputs": [[3, 1], [4]]}, "$.outputs[0]", "needs exactly 1 output, got 2"),
        ({"widths": [64, 128, 128, 128, 128]}, "$.inputs[0]",
         "LHS tensor 0 width 64 must equal RHS tensor 1 height 128"),
        ({"heights": [128, 128, 128, 256, 128]}, "$.outputs[0][0]",
         "output tensor 3 is 128x256 (w x h) but must be 128x128"),
    ],
)
def test_matmul_rules(changes, path, fragment):
    issues = issues_of(mutated(MATMUL_CHAIN, **changes))
    assert any(i.path == path and fragment in i.msg and i.rule.startswith("matmul.")
               for i in issues), [str(i) for i in issues]


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        (mutated(DIAMOND, op_types=["Pointwise", "Conv", "Pointwise"]), "$.op_types[1]",
         "'MatMul' or 'Pointwise'"),
        ({k: v for k, v in DIAMOND.items() if k != "native_granularity"},
         "$.native_granularity", "required field 'native_granularity' is missing"),
        (mutated(DIAMOND, widths=[128, "128", 128, 128]), "$.widths[1]", "integer"),
        (mutated(DIAMOND, widths=[128, 12.5, 128, 128]), "$.widths[1]", "integer"),
        (mutated(DIAMOND, fast_memory_capacity=True), "$.fast_memory_capacity", "a number"),
        (mutated(DIAMOND, slow_memory_bandwidth="10"), "$.slow_memory_bandwidth", "a number"),
        (mutated(DIAMOND, base_costs=[1, float("nan"), 1]), "$.base_costs[1]", "finite"),
        (mutated(DIAMOND, native_granularity=[128]), "$.native_granularity", "at least 2"),
        ([1, 2, 3], "$", "expected a JSON object"),
    ],
)
def test_schema_errors_carry_their_json_path(data, path, fragment):
    issues = issues_of(data)
    assert any(i.path == path and fragment in i.msg for i in issues), [str(i) for i in issues]


def test_all_faults_are_reported_at_once():
    data = mutated(DIAMOND, widths=[128, 0, 128, 128], base_costs=[1500, -1, 1500],
                   slow_memory_bandwidth=0)
    assert {i.rule for i in issues_of(data)} == {"positive.dim", "nonneg.cost",
                                                 "positive.hardware"}


def test_floats_are_accepted_for_costs_capacity_and_bandwidth():
    problem = parse_problem(mutated(DIAMOND, base_costs=[1500.5, 1, 2],
                                    slow_memory_bandwidth=12.5, fast_memory_capacity=5e4))
    assert problem.slow_memory_bandwidth == 12.5


def test_native_granularity_may_give_k():
    assert parse_problem(mutated(DIAMOND, native_granularity=[128, 128, 64]))


def test_solution_shape_errors():
    good = {"subgraphs": [[0, 1]], "granularities": [[128, 128, 1]],
            "tensors_to_retain": [[]], "subgraph_latencies": [3276.8]}
    assert parse_solution(good).traversal_orders is None
    issues = issues_of({**good, "granularities": [[128, 128]]}, parse_solution)
    assert issues[0].path == "$.granularities[0]"
    issues = issues_of({k: v for k, v in good.items() if k != "subgraph_latencies"},
                       parse_solution)
    assert issues[0].msg == "required field 'subgraph_latencies' is missing"
