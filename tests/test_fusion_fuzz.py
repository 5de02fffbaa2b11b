"""The random problems of ``benchmarks/fusion_fuzz.py``: seeded, valid, wired in the ways
no suite family is (a tensor times itself, Pointwise ops of several inputs, weights read
again by a later MatMul), and solvable in both readings: greedy's schedule passes the
evaluator."""

from __future__ import annotations

import pytest

from benchmarks.fusion_fuzz import random_problem
from benchmarks.fusion_generate import native_working_set
from models.fusion import parse_problem, parse_solution
from solver.fusion.evaluate import evaluate
from solver.fusion.solvers import reading_rules, solve

PROBLEMS = [random_problem(0, i) for i in range(40)]


def test_problems_are_seeded_and_deterministic():
    assert [random_problem(0, i) for i in range(40)] == PROBLEMS
    assert all(random_problem(1, i) != raw for i, raw in enumerate(PROBLEMS))


def test_problems_are_valid_and_wired_unlike_the_suite():
    for raw in PROBLEMS:
        parse_problem(raw)
        assert raw["fast_memory_capacity"] >= native_working_set(raw)
    ops = [(kind, ins) for raw in PROBLEMS
           for kind, ins in zip(raw["op_types"], raw["inputs"], strict=True)]
    assert any(kind == "MatMul" and ins[0] == ins[1] for kind, ins in ops)
    assert any(kind == "Pointwise" and len(ins) >= 3 for kind, ins in ops)
    sizes = {d for raw in PROBLEMS for d in raw["widths"] + raw["heights"]}
    assert {96, 1000, 4096} <= sizes
    assert max(len(raw["op_types"]) for raw in PROBLEMS) >= 60


@pytest.mark.parametrize("semantics", ["default", "teamkorea"])
def test_greedy_schedules_every_problem_validly(semantics):
    mode = "per_op" if semantics == "teamkorea" else "per_native_k"
    for i, raw in enumerate(PROBLEMS[:20]):
        problem = parse_problem(raw)
        result = solve(problem, "greedy", reduction_cost=mode, semantics=semantics,
                       time_limit_s=0.25)
        verdict = evaluate(problem, parse_solution(result.solution.model_dump()),
                           reading_rules(mode, semantics), semantics=semantics)
        assert verdict.valid, f"fuzz-{i:02d}: {verdict.error}"
