"""Repeated blocks in the segment search: twins are found exactly where a model repeats
itself, decisions move onto them op for op, and spreading an improvement prices and
checks the whole plan."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from models.layout import parse_graph
from solver.layout import BASELINE_POLICIES, cpsat, lns
from solver.layout.evaluate import evaluate
from solver.layout.plan import build_plan
from solver.layout.problem import LayoutProblem, analyze, resolve_device
from solver.layout.repeats import Twins, transplant
from solver.onnx_import.stack import stack
from tests.conftest import ROOT
from tests.layout_fixtures import load

LLAMA_LAYER = ROOT / "benchmarks" / "layout" / "models" / "llama-3.2-1b-prefill128-l1.json"


@pytest.fixture(scope="module")
def layer() -> LayoutProblem:
    graph = parse_graph(load(LLAMA_LAYER))
    return analyze(graph, resolve_device(graph, "wormhole_n150"))


@pytest.fixture(scope="module")
def three_layers() -> LayoutProblem:
    graph = parse_graph(stack(load(LLAMA_LAYER), 3))
    return analyze(graph, resolve_device(graph, "wormhole_n150"))


def local(op: str) -> str:
    """An op's name within its layer (``L1.L0./q/MatMul`` -> ``L0./q/MatMul``)."""
    return op.split(".", 1)[1]


def test_the_twins_of_a_window_are_its_copies_in_the_other_layers(three_layers):
    problem = three_layers
    period = len(problem.order) // 3
    lo, hi = period + 5, period + 17
    offsets = Twins(problem).of(lo, hi)
    assert sorted(offsets) == [-period, period]
    for d in offsets:
        assert [local(problem.order[k + d]) for k in range(lo, hi)] == \
            [local(problem.order[k]) for k in range(lo, hi)]


def test_a_window_is_no_twin_of_a_stretch_wired_otherwise(layer, three_layers):
    assert Twins(layer).of(0, len(layer.order)) == []
    twins = Twins(three_layers)
    period = len(three_layers.order) // 3
    # the same ops one step later are a different stretch of the layer
    assert twins.key(5, 17) != twins.key(6, 18)
    assert twins.key(5, 17) == twins.key(period + 5, period + 17)
    # whole layers: each reads the previous layer's output, made outside the window
    assert sorted(twins.of(period, 2 * period)) == [-period, period]


def test_transplant_moves_configurations_reads_and_spills_onto_each_twin(three_layers):
    problem = three_layers
    period = len(problem.order) // 3
    start = BASELINE_POLICIES["greedy"](problem)
    lo, hi = 5, 17
    made = problem.ops[problem.order[lo + 2]].output
    source = replace(BASELINE_POLICIES["dram"](problem), spills={made: lo + 4})
    moved = transplant(problem, start, source, lo, hi, [period, 2 * period])
    assert moved is not None
    for d in (period, 2 * period):
        assert moved.spills[problem.ops[problem.order[lo + 2 + d]].output] == lo + 4 + d
    assert moved.spills.get(made) == start.spills.get(made)  # the source layer is untouched
    for k, op in enumerate(problem.order):
        copied = k >= period and lo <= k % period < hi
        expected = source if copied else start
        assert moved.configs[op].id == expected.configs[op].id
        assert moved.reads[op] == expected.reads[op]
    # a twin whose op lacks the configuration is refused outright
    poor = next(k for k in range(lo, hi) if len(problem.ops[problem.order[k]].candidates) > 1)
    name = problem.order[poor + period]
    kept = problem.ops[name].candidates
    wanted = source.configs[problem.order[poor]].id
    problem.ops[name].candidates = [c for c in kept if c.id != wanted]
    try:
        assert transplant(problem, start, source, lo, hi, [period]) is None
    finally:
        problem.ops[name].candidates = kept


def test_an_improvement_found_in_one_layer_is_spread_to_the_others(three_layers):
    """Solve one segment of the middle layer; spreading its decisions to the first and last
    layer's copies of that segment makes the whole plan cheaper still, and valid."""
    problem = three_layers
    period = len(problem.order) // 3
    twins = Twins(problem)
    start = BASELINE_POLICIES["greedy"](problem)
    before = build_plan(problem, start, "x", 0.0).total_latency_us
    for lo in range(period, 2 * period - 8, 4):
        seg = lns.segment(problem, start, lo, lo + 8)
        found = cpsat.solve_segment(seg.problem, seg.hint, 2.0, 0, 2).assignment
        if found is None:
            continue
        improved = lns.lift(problem, start, seg, found)
        one = build_plan(problem, improved, "x", 0.0).total_latency_us
        if one < before - 1e-6 and evaluate(problem, build_plan(problem, improved, "x", 0.0)).valid:
            break
    else:
        pytest.fail("no segment of the middle layer improved on greedy")
    spread, total, taken = lns._spread(problem, improved, one, lo, lo + 8,
                                       twins.of(lo, lo + 8), time.perf_counter() + 30.0)
    plan = build_plan(problem, spread, "x", 0.0)
    assert total == pytest.approx(plan.total_latency_us) and total < one - 1e-6
    assert evaluate(problem, plan).valid
    assert taken
    for d in taken:
        assert all(spread.configs[problem.order[k + d]].id == improved.configs[problem.order[k]].id
                   for k in range(lo, lo + 8))
