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
from tests.conftest import BENCHMARKS, MLSYS, load
from tests.fusion_cases import problems

MODES = ["per_native_k", "per_op"]


def reference_table() -> dict[str, dict[str, float]]:
    """SEMANTICS.md's table of the reference implementation's baselines and bounds, per
    benchmark number and column ("single per_op", "slow-memory LB", ...), as published."""
    lines = (MLSYS / "SEMANTICS.md").read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| Benchmark | single"))
    columns = [c.strip() for c in lines[header].strip("|").split("|")]
    table = {}
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0]] = {name: float(cell.replace(",", "")) for name, cell
                           in zip(columns[1:-1], cells[1:-1], strict=True)}
    return table


REFERENCE = reference_table()


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
    for result in (alone, fused):  # the fast scorer equals the literal simulation here too
        fast, literal = (evaluate(problem, result.solution, Rules(reduction_cost=mode),
                                  engine=engine) for engine in ("fast", "reference"))
        assert fast.subgraph_latencies == literal.subgraph_latencies
    published = REFERENCE.get(path.stem.removeprefix("mlsys-2026-"))
    if published:  # one op per subgraph has a single best answer: the reference's
        assert abs(alone.total_latency - published[f"single {mode}"]) < 0.05
        assert fused.total_latency <= published[f"greedy {mode}"] + 0.05
        bounds = lower_bounds(problem, mode)
        assert abs(bounds.compute - published[f"compute LB {mode}"]) < 0.05
        assert abs(bounds.io - published["slow-memory LB"]) < 0.05


def test_the_published_reference_table_is_read_whole():
    assert len(REFERENCE) == 8 and all(len(row) == 7 for row in REFERENCE.values())
    assert REFERENCE["9"]["single per_op"] == 48_318_382.1


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
