"""The ``cpsat`` layout solver: optimal over its decision space on tiny graphs (checked by
exhaustive enumeration), valid and never worse than any baseline on every example graph."""

from __future__ import annotations

import itertools

import pytest

from models.layout import parse_graph
from solver.layout import BASELINES, solve
from solver.layout.evaluate import evaluate
from solver.layout.plan import Assignment, build_plan
from solver.layout.problem import analyze, resolve_device
from tests.layout_fixtures import EXAMPLES, PRESET_PAIR, load, tiny

ROUNDING_US = 0.01
"""The model's objective is in whole nanoseconds; totals may differ by the rounding."""


def exhaustive_best(graph, device: str, max_configs: int) -> float:
    """The least plan total over every (configuration, read) choice without solver spills
    that the evaluator accepts: the model's decision space, enumerated."""
    problem = analyze(graph, resolve_device(graph, device), max_configs)
    order = problem.order
    best = float("inf")
    for combo in itertools.product(*[problem.ops[op].candidates for op in order]):
        choices = [list(itertools.product(*[sorted(acc, key=lambda m: m.key)
                                            for acc in c.accepts])) for c in combo]
        for reads in itertools.product(*choices):
            a = Assignment(list(order), dict(zip(order, combo, strict=True)),
                           {op: list(rs) for op, rs in zip(order, reads, strict=True)})
            plan = build_plan(problem, a, "exhaustive", 0.0)
            if plan.total_latency_us < best and evaluate(problem, plan).valid:
                best = plan.total_latency_us
    return best


@pytest.mark.parametrize("device", PRESET_PAIR)
@pytest.mark.parametrize("max_configs", [2, 3, 4])
def test_optimum_equals_exhaustive_search_on_a_tiny_graph(device, max_configs):
    graph = parse_graph(tiny())
    plan = solve(graph, "cpsat", device, time_limit_s=20, max_configs=max_configs)
    assert plan.status == "optimal"
    assert plan.total_latency_us == pytest.approx(exhaustive_best(graph, device, max_configs),
                                                  abs=ROUNDING_US)
    assert plan.stats.objective == pytest.approx(plan.total_latency_us, abs=ROUNDING_US)


@pytest.mark.parametrize("device", PRESET_PAIR)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_valid_and_never_worse_than_any_baseline(path, device):
    graph = parse_graph(load(path))
    plan = solve(graph, "cpsat", device, time_limit_s=3, workers=2)
    assert plan.status in {"optimal", "feasible"} and not plan.violations
    for baseline in BASELINES:
        assert plan.total_latency_us <= solve(graph, baseline, device).total_latency_us + 1e-9


@pytest.mark.parametrize("name", ["mlp-block", "resnet50-bottleneck"])
def test_small_examples_are_proven_optimal_and_beat_every_baseline(name):
    graph = parse_graph(load(next(p for p in EXAMPLES if p.stem == name)))
    for device in PRESET_PAIR:
        plan = solve(graph, "cpsat", device)
        assert plan.status == "optimal" and plan.stats.gap == 0
        best = min(solve(graph, b, device).total_latency_us for b in BASELINES)
        assert plan.total_latency_us < best


def test_the_l1_capacity_binds_on_a_small_device():
    """With L1 shrunk the plan changes, and every step still fits (the evaluator checks)."""
    graph = parse_graph(load(next(p for p in EXAMPLES if p.stem == "resnet50-bottleneck")))
    roomy = solve(graph, "cpsat", "wormhole_n150")
    spec = resolve_device(graph, "wormhole_n150")
    peak = max(s.bytes_per_core for s in roomy.l1_timeline)
    floor = max(s.bytes_per_core for s in solve(graph, "dram", "wormhole_n150").l1_timeline)
    assert floor < peak
    small = spec.model_copy(update={
        "name": "small-l1", "l1_usage_cap": 1.0,
        "l1_size_bytes": spec.l1_unreserved_base_bytes + (floor + peak) // 2})
    tight = solve(graph, "cpsat", small)
    assert not tight.violations
    assert max(s.bytes_per_core for s in tight.l1_timeline) < peak
    assert tight.total_latency_us >= roomy.total_latency_us


def test_beyond_the_model_size_the_best_baseline_is_returned(monkeypatch):
    monkeypatch.setattr("solver.layout.cpsat.MAX_MODEL_OPS", 3)
    graph = parse_graph(load(next(p for p in EXAMPLES if p.stem == "bert-base-layer")))
    plan = solve(graph, "cpsat", "wormhole_n150")
    best = min(solve(graph, b, "wormhole_n150").total_latency_us for b in BASELINES)
    assert plan.status == "feasible" and plan.total_latency_us == best
