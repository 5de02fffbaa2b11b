"""The evaluator: every number of PROBLEM.md's examples, and one failing input per rule."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from models.fusion import parse_problem, parse_solution
from solver.fusion.evaluate import evaluate
from solver.fusion.problem import Rules
from tests.conftest import (
    DIAMOND,
    LARGE_CHAIN,
    MATMUL_CHAIN,
    POINTWISE_CHAIN,
    SINGLE_MATMUL,
    solution,
)

F = Fraction


def run(problem: dict, sol: dict, **options: Any):
    return evaluate(parse_problem(problem), parse_solution(sol), **options)


# (problem, solution, subgraph latencies, total): PROBLEM.md, Examples 1-5
EXAMPLES = {
    "1A": (POINTWISE_CHAIN, solution([[0], [1]], [[128, 128, 1]] * 2),
           [F("3276.8"), F("3276.8")], F("6553.6")),
    "1B": (POINTWISE_CHAIN, solution([[0, 1]], [[128, 128, 1]]), [F("3276.8")], F("3276.8")),
    "1C": (POINTWISE_CHAIN, solution([[0, 1]], [[64, 64, 1]]), [F(4400)], F(4400)),
    "2A": (LARGE_CHAIN, solution([[0], [1]], [[128, 128, 1]] * 2),
           [F("13107.2"), F("13107.2")], F("26214.4")),
    "2B": (LARGE_CHAIN, solution([[0, 1]], [[128, 128, 1]]), [F("13107.2")], F("13107.2")),
    "3A": (DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 3),
           [F("3276.8"), F("3276.8"), F("4915.2")], F("11468.8")),
    "3B": (DIAMOND, solution([[0, 1], [0, 2]], [[128, 128, 1]] * 2, [[2], []]),
           [F(3000), F("3276.8")], F("6276.8")),
    "3C": (DIAMOND, solution([[0], [1, 2]], [[128, 128, 1]] * 2, [[1], []]),
           [F("1638.4"), F(3000)], F("4638.4")),
    "4A": (SINGLE_MATMUL, solution([[0]], [[64, 64, 128]]), [F(7096)], F(7096)),
    "4B": (SINGLE_MATMUL, solution([[0]], [[64, 64, 128]], orders=[[0, 1, 3, 2]]),
           [F(6548)], F(6548)),
    "5B": (MATMUL_CHAIN, solution([[0, 1]], [[128, 128, 32]]), [F("6915.2")], F("6915.2")),
}


@pytest.mark.parametrize("mode", ["per_native_k", "per_op"])
@pytest.mark.parametrize("engine", ["fast", "reference"])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_problem_md_examples_exactly(name, engine, mode):
    problem, sol, latencies, total = EXAMPLES[name]
    result = run(problem, sol, rules=Rules(reduction_cost=mode), engine=engine)
    assert result.valid, result.error
    assert result.subgraph_latencies == latencies
    assert result.total == total


@pytest.mark.parametrize(("name", "steps"), [
    ("4A", [2048, 1500, 2048, 1500]),
    ("4B", [2048, 1500, 1500, 1500]),
    ("5B", [F("2457.6"), 1000, 1000, F("2457.6")]),
])
def test_per_step_latencies_of_examples_4_and_5(name, steps):
    problem, sol, _, _ = EXAMPLES[name]
    result = run(problem, sol, details=True)
    assert [s.latency for s in result.steps[0]] == steps


def test_example_5b_working_set_is_40960_in_every_step():
    problem, sol, _, _ = EXAMPLES["5B"]
    result = run(problem, sol, details=True)
    assert [s.working_set for s in result.steps[0]] == [40960] * 4


def test_example_5a_is_rejected_as_out_of_memory():
    result = run(MATMUL_CHAIN, solution([[0], [1]], [[128, 128, 128]] * 2))
    assert not result.valid
    assert result.error.rule == "S12.capacity"
    assert "working set 49152 exceeds fast_memory_capacity 45000" in result.error.msg
    assert "subgraph 0" in result.error.msg and "k-step 0" in result.error.msg
    assert result.error.path == "$.granularities[0]"


def test_example_5_fused_at_full_depth_is_out_of_memory_too():
    result = run(MATMUL_CHAIN, solution([[0, 1]], [[128, 128, 128]]))
    assert "working set 65536 exceeds" in result.error.msg


def test_report_is_the_json_of_s13():
    problem, sol, _, _ = EXAMPLES["3B"]
    sol = {**sol, "subgraph_latencies": [3000, 3276.8]}
    report = run(problem, sol).report()
    assert report.model_dump(exclude={"details"}) == {
        "valid": True, "error": None, "error_detail": None, "total_latency": 6276.8,
        "subgraph_latencies": [3000.0, 3276.8], "claimed_match": True,
        "claimed_mismatches": [], "warnings": [], "semantics": "default",
        "reduction_cost": "per_native_k",
        "retained_output_ws": "accumulate", "pointwise_epilogue_step": "last"}


def test_claimed_latencies_are_compared_within_one_millionth():
    problem, sol, _, _ = EXAMPLES["1A"]
    close = run(problem, {**sol, "subgraph_latencies": [3276.8 * (1 + 9e-7), 3276.8]})
    assert close.claimed_match
    off = run(problem, {**sol, "subgraph_latencies": [3276.8 * (1 + 2e-6), 3276.8]})
    assert off.valid and off.claimed_match is False
    assert [(i, float(c)) for i, c, _ in off.claimed_mismatches] == [(0, 3276.8 * (1 + 2e-6))]
    strict = run(problem, {**sol, "subgraph_latencies": [1, 3276.8]}, strict=True)
    assert strict.error.rule == "S13.1.claimed" and "claimed latency 1.0" in strict.error.msg


def test_invalid_solution_reports_latencies_computed_before_the_error():
    result = run(DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 3, [[1], [], []]))
    assert not result.valid and result.total is None and result.claimed_match is None
    assert result.subgraph_latencies == [F("1638.4"), F("1638.4")]


def test_warnings_for_masked_outputs_and_long_matmul_chains():
    masked = {  # a Pointwise chain and a MatMul sharing T1: outputs 128x128 and 128x64
        "widths": [128, 128, 128, 128, 128], "heights": [128, 128, 128, 64, 64],
        "inputs": [[0], [1], [4, 1]], "outputs": [[1], [2], [3]], "base_costs": [1, 1, 1],
        "op_types": ["Pointwise", "Pointwise", "MatMul"], "fast_memory_capacity": 10**6,
        "slow_memory_bandwidth": 1, "native_granularity": [128, 128]}
    result = run(masked, solution([[0, 1, 2]], [[128, 128, 128]]))
    assert result.valid
    assert any("outputs of different shapes (128x64, 128x128, w x h)" in w
               for w in result.warnings)
    chain = {
        "widths": [64] * 7, "heights": [64] * 7,
        "inputs": [[0, 1], [4, 2], [5, 3]], "outputs": [[4], [5], [6]],
        "base_costs": [10, 10, 10], "op_types": ["MatMul"] * 3,
        "fast_memory_capacity": 10**6, "slow_memory_bandwidth": 1,
        "native_granularity": [64, 64],
    }
    result = run(chain, solution([[0, 1, 2]], [[64, 64, 16]]))
    assert result.valid
    assert any("chain of 3 MatMuls (op 0 -> op 1 -> op 2)" in w for w in result.warnings)


# One failing solution per validity rule of SEMANTICS.md, with the rule and the message.
NEGATIVE = [
    ("S2.1.lengths", DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 2),
     "$", "granularities has 2"),
    ("S2.1.lengths", DIAMOND, {**solution([[0], [1], [2]], [[128, 128, 1]] * 3),
                               "traversal_orders": [None]}, "$", "traversal_orders has 1"),
    ("S2.1.coverage", DIAMOND, solution([[0], [1]], [[128, 128, 1]] * 2),
     "$.subgraphs", "op 2 is in no subgraph"),
    ("S2.2.empty", DIAMOND, solution([[0], [], [1, 2]], [[128, 128, 1]] * 3),
     "$.subgraphs[1]", "subgraph 1 is empty"),
    ("S2.2.op_range", DIAMOND, solution([[0], [1, 2, 9]], [[128, 128, 1]] * 2),
     "$.subgraphs[1][2]", "lists op 9, out of range: there are 3 ops"),
    ("S2.2.op_repeat", DIAMOND, solution([[0], [1, 2, 1]], [[128, 128, 1]] * 2),
     "$.subgraphs[1][2]", "lists op 1 twice"),
    ("S4.2.order", DIAMOND, solution([[0], [2], [1]], [[128, 128, 1]] * 3),
     "$.subgraphs[1]", "op 2 needs tensor 2, but its producer op 1 runs in no earlier"),
    ("S4.2.ephemeral", DIAMOND, solution([[0, 1], [2]], [[128, 128, 1]] * 2),
     "$.subgraphs[1]", "tensor 1, which is ephemeral in subgraph 0"),
    ("S4.2.expired", DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 3, [[1], [], []]),
     "$.subgraphs[2]", "subgraph 0 retained but never wrote to slow memory"),
    ("S2.3.order", DIAMOND, solution([[0], [2, 1]], [[128, 128, 1]] * 2),
     "$.subgraphs[1][0]", "op 2 consumes tensor 2, produced by op 1 listed at position 1"),
    ("S2.4.connected", {**DIAMOND, "inputs": [[0], [0], [1, 2]]},
     solution([[0, 1], [2]], [[128, 128, 1]] * 2),
     "$.subgraphs[0]", "not connected through tensors its ops produce and consume"),
    ("S2.5.k_depth", {**MATMUL_CHAIN, "native_granularity": [256, 256]},
     solution([[0, 1]], [[128, 128, 256]]), "$.granularities[0][2]",
     "k = 256 exceeds the reduction length K = 128 of MatMul op 0"),
    ("S9.bounds", DIAMOND, solution([[0], [1], [2]], [[128, 256, 1]] + [[128, 128, 1]] * 2),
     "$.granularities[0][1]", "granularity h = 256 exceeds the native h = 128"),
    ("S9.bounds", MATMUL_CHAIN, solution([[0, 1]], [[128, 128, 0]]),
     "$.granularities[0][2]", "granularity k = 0 must be a positive integer"),
    ("S9.bounds", DIAMOND, solution([[0], [1], [2]], [[128, 128, 1], [128, 128, 129],
                                                       [128, 128, 1]]),
     "$.granularities[1][2]", "granularity k = 129 exceeds the native k = 128"),
    ("S5.1.range", DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 3, [[7], [], []]),
     "$.tensors_to_retain[0][0]", "retains tensor 7, out of range"),
    ("S5.1.repeat", DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 3, [[1, 1], [], []]),
     "$.tensors_to_retain[0][1]", "lists tensor 1 twice"),
    ("S5.2.not_produced", DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 3,
                                            [[0], [], []]),
     "$.tensors_to_retain[0][0]", "cannot retain tensor 0: it is a graph input"),
    ("S5.2.not_produced", DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 3,
                                            [[1], [1], []]),
     "$.tensors_to_retain[1][0]", "only resident from the previous subgraph"),
    ("S5.2.not_produced", DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 3,
                                            [[], [3], []]),
     "$.tensors_to_retain[1][0]", "no op of this subgraph produces it"),
    ("S6.4.prologue", {
        "widths": [128, 128, 128, 128], "heights": [128, 128, 128, 128],
        "inputs": [[0], [1, 2]], "outputs": [[1], [3]], "base_costs": [1, 1],
        "op_types": ["Pointwise", "MatMul"], "fast_memory_capacity": 10**6,
        "slow_memory_bandwidth": 1, "native_granularity": [128, 128]},
     solution([[0, 1]], [[64, 128, 32]]), "$.granularities[0]",
     "its LHS tensor 1 is produced by Pointwise op 0 of the same subgraph; that needs w >= 128"),
    ("S7.3.traversal", SINGLE_MATMUL, solution([[0]], [[64, 64, 128]], orders=[[0, 1, 1, 2]]),
     "$.traversal_orders[0]", "permutation of the 4 tile indices 0..3 of its 2x2 grid"),
    ("S12.capacity", SINGLE_MATMUL, solution([[0]], [[128, 128, 128]]),
     "$.granularities[0]", "working set 49152 exceeds fast_memory_capacity 25000"),
    ("S12.capacity", DIAMOND, solution([[0], [1], [2]], [[64, 64, 1]] * 3, [[1], [], []]),
     "$.granularities[0]", "at tile 3 (row 1, column 1), k-step 0: retained in 0 + inputs "
     "4096 + outputs 4096 + retained out 12288"),
    ("S4.4.output", DIAMOND, solution([[0], [1], [2]], [[128, 128, 1]] * 3, [[], [], [3]]),
     "$.tensors_to_retain[2]", "graph output tensor 3 is never written to slow memory"),
]


@pytest.mark.parametrize(("rule", "problem", "sol", "path", "fragment"), NEGATIVE,
                         ids=[f"{n[0]}-{i}" for i, n in enumerate(NEGATIVE)])
def test_each_validity_rule_is_reported(rule, problem, sol, path, fragment):
    if rule == "S12.capacity" and "retained out" in fragment:
        problem = {**problem, "fast_memory_capacity": 20479}  # S12 "accumulate": 20,480
    result = run(problem, sol)
    assert not result.valid
    assert result.error.rule == rule, result.error
    assert result.error.path == path
    assert fragment in result.error.msg, result.error.msg
    report = result.report()
    assert report.valid is False and report.total_latency is None and rule in report.error


def test_retained_output_working_set_readings():
    """SEMANTICS.md probe: an output retained by its own subgraph, produced in 4 tiles, at
    capacity 20,479 overflows under "accumulate" (20,480 at the last tile), not "slice"."""
    problem = {**DIAMOND, "fast_memory_capacity": 20479}
    sol = solution([[0], [1, 2]], [[64, 64, 1], [64, 32, 1]], [[1], []])
    overflow = run(problem, sol)
    assert overflow.error.rule == "S12.capacity" and "working set 20480" in overflow.error.msg
    assert run(problem, sol, rules=Rules(retained_output_ws="slice")).valid


def test_epilogue_step_first_loads_the_pointwise_inputs_in_k_step_0():
    """MatMul + Pointwise(x, y) at k < K: the epilogue input y loads with the last k-step by
    default and with the first under epilogue step "first" (TK's placement)."""
    problem = {
        "widths": [128, 128, 128, 128, 128], "heights": [128, 128, 128, 128, 128],
        "inputs": [[0, 1], [2, 3]], "outputs": [[2], [4]], "base_costs": [100, 100],
        "op_types": ["MatMul", "Pointwise"], "fast_memory_capacity": 10**6,
        "slow_memory_bandwidth": 1, "native_granularity": [128, 128]}
    sol = solution([[0, 1]], [[128, 128, 64]])
    last = run(problem, sol, details=True).steps[0]
    first = run(problem, sol, details=True, rules=Rules(epilogue_step="first")).steps[0]
    assert [s.loaded for s in last] == [2 * 8192, 2 * 8192 + 16384]
    assert [s.loaded for s in first] == [2 * 8192 + 16384, 2 * 8192]
    assert last[1].stored == first[1].stored == 16384


def test_per_op_and_per_native_k_differ_for_long_reductions():
    """SEMANTICS.md probe: a 2-MatMul chain with K_tail = 256 fused at [128,128,128] costs
    3000 (per_op) and 4000 (per_native_k), bases 1000/1000."""
    problem = {  # T2 = T0 @ T1 is 128 rows x 256 columns: the head's output, K_tail = 256
        "widths": [128, 256, 256, 128, 128], "heights": [128, 128, 128, 256, 128],
        "inputs": [[0, 1], [2, 3]], "outputs": [[2], [4]], "base_costs": [1000, 1000],
        "op_types": ["MatMul", "MatMul"], "fast_memory_capacity": 10**7,
        "slow_memory_bandwidth": 10**6, "native_granularity": [128, 128]}
    sol = solution([[0, 1]], [[128, 128, 128]])
    per_op = run(problem, sol, rules=Rules(reduction_cost="per_op"), details=True)
    per_k = run(problem, sol, details=True)
    assert sum(s.compute for s in per_op.steps[0]) == 3000
    assert sum(s.compute for s in per_k.steps[0]) == 4000
