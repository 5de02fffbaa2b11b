"""The ``cpsat`` layout solver: optimal over its decision space on tiny graphs (checked by
exhaustive enumeration), valid and never worse than any baseline on every example graph."""

from __future__ import annotations

import itertools
import time

import pytest

from models.layout import parse_graph
from solver.layout import BASELINE_POLICIES, BASELINES, lns, solve
from solver.layout.evaluate import evaluate
from solver.layout.plan import Assignment, build_plan
from solver.layout.problem import analyze, resolve_device
from tests.conftest import ROOT
from tests.layout_fixtures import (
    EXAMPLES,
    PRESET_PAIR,
    load,
    op,
    tensor,
    tiny,
    with_usable_l1,
)

ROUNDING_US = 0.01
LLAMA_LAYER = ROOT / "benchmarks" / "layout" / "models" / "llama-3.2-1b-prefill128-l1.json"
"""The model's objective is in whole nanoseconds; totals may differ by the rounding."""


def exhaustive_best(graph, device: str, max_configs: int) -> float:
    """The least plan total over every configuration, read and spill choice (a spill of an
    L1 home after any step from its producer's to the one before its last consumer) that
    the evaluator accepts: the model's decision space, enumerated."""
    problem = analyze(graph, resolve_device(graph, device), max_configs)
    order = problem.order
    step = {op: k for k, op in enumerate(order)}
    best = float("inf")
    for combo in itertools.product(*[problem.ops[name].candidates for name in order]):
        configs = dict(zip(order, combo, strict=True))
        spill_options = []
        for name, t in problem.tensors.items():
            if t.producer and configs[t.producer].output.is_l1 and t.consumers:
                last = max(step[user] for user, _ in t.consumers)
                spill_options.append([(name, None)] + [(name, k) for k in
                                                       range(step[t.producer], last)])
        choices = [list(itertools.product(*[sorted(acc, key=lambda m: m.key)
                                            for acc in c.accepts])) for c in combo]
        for reads in itertools.product(*choices):
            for spills in itertools.product(*spill_options):
                a = Assignment(list(order), configs,
                               {name: list(rs) for name, rs in zip(order, reads, strict=True)},
                               {t: k for t, k in spills if k is not None})
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


RESIDUAL_SHAPE = [1, 256, 1024]
RESIDUAL = {  # t1 lives across b and c: keep it in L1, spill it, or never put it there
    "format": "layoutsat-graph", "version": 1, "name": "residual",
    "tensors": [tensor(n, RESIDUAL_SHAPE, "input" if n == "x" else "activation")
                for n in ("x", "t1", "t2", "t3", "out")],
    "ops": [op("a", "relu", ["x"], ["t1"]), op("b", "gelu", ["t1"], ["t2"]),
            op("c", "relu", ["t2"], ["t3"]), op("d", "add", ["t3", "t1"], ["out"])],
    "outputs": ["out"]}


@pytest.mark.parametrize("usable_l1", [14_000, 18_000, 22_000, 40_000])
def test_optimum_equals_exhaustive_search_under_l1_pressure(usable_l1):
    """A residual fork on devices from barely-fitting to roomy: the optimal plan changes
    with the capacity, and always equals the enumeration (spills included)."""
    graph = parse_graph(RESIDUAL)
    device = with_usable_l1(graph, usable_l1)
    plan = solve(graph, "cpsat", device, time_limit_s=20, max_configs=3)
    assert plan.status == "optimal"
    assert plan.total_latency_us == pytest.approx(exhaustive_best(graph, device, 3),
                                                  abs=ROUNDING_US)


@pytest.mark.parametrize("device", PRESET_PAIR)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_valid_and_never_worse_than_any_baseline(path, device):
    graph = parse_graph(load(path))
    plan = solve(graph, "cpsat", device, time_limit_s=3, workers=2)
    assert plan.status in {"optimal", "feasible"} and not plan.violations
    for baseline in BASELINES:
        assert plan.total_latency_us <= solve(graph, baseline, device).total_latency_us + 1e-9


BASELINE_OPTIMAL = {("inception-concat", "wormhole_n150"), ("mlp-block", "wormhole_n150"),
                    ("resnet50-bottleneck", "blackhole_p150")}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_is_proven_optimal_at_the_default_limit(path):
    """Issue 6's bar: each example graph (4-42 ops) on both presets, default 10 s limit
    (BENCHMARKS.md: proofs within a few seconds on the 2-core machine). Where a baseline's
    plan is itself optimal (resnet50-bottleneck's single chain on a Blackhole: DF sharding's
    and greedy's; greedy's on a Wormhole for inception-concat and mlp-block, where
    interleaved DRAM at 0.64 of its bandwidth makes L1 wherever it fits the best plan), the
    proof says so; everywhere else the optimum is strictly faster."""
    graph = parse_graph(load(path))
    for device in PRESET_PAIR:
        plan = solve(graph, "cpsat", device)
        assert plan.status == "optimal" and plan.stats.gap == 0
        best = min(solve(graph, b, device).total_latency_us for b in BASELINES)
        if (path.stem, device) in BASELINE_OPTIMAL:
            assert plan.total_latency_us == pytest.approx(best, abs=1e-9)
        else:
            assert plan.total_latency_us < best


def test_a_limit_too_short_for_any_search_still_answers_the_best_baseline():
    """1 ms leaves GLOP and CP-SAT no time to speak of: the answer is still a valid plan,
    never worse than a baseline, with a bound no higher than it."""
    graph = parse_graph(load(next(p for p in EXAMPLES if p.stem == "bert-base-layer")))
    started = time.perf_counter()
    plan = solve(graph, "cpsat", "wormhole_n150", time_limit_s=0.001)
    assert time.perf_counter() - started < 10
    assert plan.status in {"optimal", "feasible"} and not plan.violations
    best = min(solve(graph, b, "wormhole_n150").total_latency_us for b in BASELINES)
    assert plan.total_latency_us <= best + 1e-9
    assert plan.stats.best_bound <= plan.total_latency_us + ROUNDING_US


def test_the_l1_capacity_binds_on_a_small_device():
    """With L1 shrunk the plan changes, and every step still fits (the evaluator checks)."""
    graph = parse_graph(load(next(p for p in EXAMPLES if p.stem == "resnet50-bottleneck")))
    roomy = solve(graph, "cpsat", "wormhole_n150")
    peak = max(s.bytes_per_core for s in roomy.l1_timeline)
    floor = max(s.bytes_per_core for s in solve(graph, "dram", "wormhole_n150").l1_timeline)
    assert floor < peak
    tight = solve(graph, "cpsat", with_usable_l1(graph, (floor + peak) // 2))
    assert not tight.violations
    assert max(s.bytes_per_core for s in tight.l1_timeline) < peak
    assert tight.total_latency_us >= roomy.total_latency_us


def test_beyond_the_model_size_segments_never_lose_to_the_best_baseline(monkeypatch):
    monkeypatch.setattr("solver.layout.cpsat.MAX_MODEL_OPS", 3)
    graph = parse_graph(load(next(p for p in EXAMPLES if p.stem == "bert-base-layer")))
    plan = solve(graph, "cpsat", "wormhole_n150", time_limit_s=5.0)
    best = min(solve(graph, b, "wormhole_n150").total_latency_us for b in BASELINES)
    assert plan.status == "feasible" and not plan.violations
    assert plan.total_latency_us <= best
    assert 0 < plan.stats.best_bound <= plan.total_latency_us  # the parts' bound (bound.py)


def test_a_segment_is_the_incumbent_cut_out_and_put_back_unchanged():
    """Cutting steps 10-29 out of a decoder layer: tensors made before enter with their
    homes, tensors read after stay live and their producers keep their configuration, and
    the incumbent's own decisions, put back, price exactly as before."""
    problem = analyze(parse_graph(load(LLAMA_LAYER)), resolve_device(None, "wormhole_n150"))
    start = BASELINE_POLICIES["greedy"](problem)
    seg = lns.segment(problem, start, 10, 30)
    sub = seg.problem
    assert sub.order == problem.order[10:30]
    assert all(sub.tensors[t].producer is None for t in sub.fixed_homes)
    assert all(sub.fixed_homes[t] == start.configs[problem.tensors[t].producer].output
               for t in sub.fixed_homes)
    assert sub.live_out
    for t in sub.live_out:
        producer = problem.tensors[t].producer
        assert any(problem.order.index(op) >= 30 for op, _ in problem.tensors[t].consumers)
        if producer in sub.ops:
            (only,) = sub.ops[producer].candidates
            assert only.id == start.configs[producer].id
    assert len(sub.reserved_l1) == 20 and all(v >= 0 for v in sub.reserved_l1.values())
    back = lns.lift(problem, start, seg, seg.hint)
    assert build_plan(problem, back, "x", 0.0).total_latency_us == pytest.approx(
        build_plan(problem, start, "x", 0.0).total_latency_us)


def test_segments_cover_the_schedule_overlapping_by_half():
    assert lns.segments(10, 48) == [(0, 10)]
    spans = lns.segments(100, 40)
    assert spans[0] == (0, 40) and spans[-1] == (60, 100)
    assert all(b - a == 40 for a, b in spans)
    assert all(nxt[0] - cur[0] <= 20 for cur, nxt in zip(spans, spans[1:], strict=False))


def test_segment_search_improves_a_decoder_layer_and_keeps_it_valid():
    problem = analyze(parse_graph(load(LLAMA_LAYER)), resolve_device(None, "wormhole_n150"))
    start = BASELINE_POLICIES["greedy"](problem)
    before = build_plan(problem, start, "x", 0.0).total_latency_us
    found = lns.search(problem, start, time.perf_counter() + 20.0, seed=0, workers=2)
    plan = build_plan(problem, found.assignment, "x", 0.0)
    assert found.improved >= 1 and plan.total_latency_us == found.total_us < before
    assert evaluate(problem, plan).valid


def test_explanation_names_the_decisions_that_differ_from_the_best_baseline():
    graph = parse_graph(load(next(p for p in EXAMPLES if p.stem == "llama-decoder-layer")))
    plan = solve(graph, "cpsat", "wormhole_n150", explain=True)
    e = plan.explanation
    baselines = {b: solve(graph, b, "wormhole_n150") for b in BASELINES}
    best = min(baselines, key=lambda b: baselines[b].total_latency_us)
    assert e.baseline == best
    assert e.speedup_vs[best] == pytest.approx(baselines[best].total_latency_us
                                               / plan.total_latency_us)
    assert e.ops and all((d.config, d.inputs) != (d.baseline_config, d.baseline_inputs)
                         for d in e.ops)
    saved = e.op_time_saved_us + e.copy_and_spill_time_saved_us
    assert saved == pytest.approx(baselines[best].total_latency_us - plan.total_latency_us)
    assert f"vs {best}" in e.summary
    assert solve(graph, "cpsat", "wormhole_n150").explanation is None
