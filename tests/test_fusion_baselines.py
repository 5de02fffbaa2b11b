"""The ``unfused`` and ``greedy`` baselines: valid everywhere, greedy never worse, honest
latencies, and a clear error when no schedule exists."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings

from models.errors import NoSolutionError
from models.fusion import parse_problem
from solver.fusion.evaluate import evaluate
from solver.fusion.problem import Rules, lower_bounds
from solver.fusion.solvers import solve
from tests.conftest import BENCHMARKS, load
from tests.fusion_cases import problems

MODES = ["per_native_k", "per_op"]


def check(problem, result, mode):
    """The evaluator accepts the solution, claimed latencies included (strict), and the
    total respects the lower bound."""
    verdict = evaluate(problem, result.solution, Rules(reduction_cost=mode), strict=True)
    assert verdict.valid, verdict.error
    assert float(verdict.total) == result.total_latency
    assert verdict.total >= lower_bounds(problem, mode).total


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(raw=problems(max_ops=7))
def test_baselines_on_random_graphs(raw, mode):
    problem = parse_problem(raw)
    try:
        alone = solve(problem, "unfused", reduction_cost=mode)
    except NoSolutionError:
        assume(False)
    fused = solve(problem, "greedy", reduction_cost=mode)
    check(problem, alone, mode)
    check(problem, fused, mode)
    assert fused.total_latency <= alone.total_latency


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.stem)
def test_baselines_on_every_public_benchmark(path, mode):
    problem = parse_problem(load(path))
    alone = solve(problem, "unfused", reduction_cost=mode)
    fused = solve(problem, "greedy", reduction_cost=mode)
    check(problem, alone, mode)
    check(problem, fused, mode)
    assert fused.total_latency <= alone.total_latency


def test_an_op_that_fits_nowhere_is_a_clear_error():
    raw = {"widths": [128, 128, 128], "heights": [128, 128, 128], "inputs": [[0, 1]],
           "outputs": [[2]], "base_costs": [1], "op_types": ["Pointwise"],
           "fast_memory_capacity": 2, "slow_memory_bandwidth": 1,
           "native_granularity": [128, 128]}
    for solver in ("unfused", "greedy", "cpsat"):
        with pytest.raises(NoSolutionError) as info:
            solve(parse_problem(raw), solver)
        assert info.value.issues[0].rule == "solve.op_does_not_fit"
        assert "op 0 alone does not fit" in info.value.issues[0].msg
