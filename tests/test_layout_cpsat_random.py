"""Randomized cross-checks of the layout ``cpsat`` solver (hypothesis): on tiny random graphs
its proven optimum equals exhaustive enumeration, and the model prices any valid plan
exactly as the plan does; on larger random graphs its plan passes the evaluator, which
recomputes the same total, and is never worse than a baseline."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from models.errors import InputValidationError
from models.layout import parse_graph
from solver.layout import BASELINES, cpsat_model, solve
from solver.layout.evaluate import evaluate
from solver.layout.plan import Assignment, build_plan
from solver.layout.problem import analyze
from tests.layout_fixtures import op, tensor, with_usable_l1
from tests.test_layout_cpsat import ROUNDING_US, exhaustive_best

SHAPES = ([1, 64, 128], [1, 128, 256], [1, 256, 1024], [1, 512, 512])
UNARY = ("relu", "gelu", "silu", "exp")
BINARY = ("add", "mul", "sub")


@st.composite
def graphs(draw: st.DrawFn, max_ops: int) -> dict[str, Any]:
    """A random DAG of elementwise ops on one shape: each op reads one or two earlier
    tensors (forks and joins appear naturally); tensors nobody reads are outputs."""
    shape = draw(st.sampled_from(SHAPES))
    names = ["x"]
    ops = []
    read: set[str] = set()
    for k in range(draw(st.integers(2, max_ops))):
        binary = len(names) > 1 and draw(st.booleans())
        if binary:
            a, b = draw(st.lists(st.sampled_from(names), min_size=2, max_size=2, unique=True))
            ops.append(op(f"o{k}", draw(st.sampled_from(BINARY)), [a, b], [f"t{k}"]))
            read |= {a, b}
        else:
            a = draw(st.sampled_from(names))
            ops.append(op(f"o{k}", draw(st.sampled_from(UNARY)), [a], [f"t{k}"]))
            read.add(a)
        names.append(f"t{k}")
    return {"format": "layoutsat-graph", "version": 1, "name": "random",
            "tensors": [tensor(n, shape, "input" if n == "x" else "activation")
                        for n in names],
            "ops": ops, "outputs": [n for n in names[1:] if n not in read]}


def pressed(graph, usable_l1: int):
    """The n150 preset with only ``usable_l1`` bytes of L1 per core, so spills matter; a
    graph with an op whose scratch alone does not fit is not an example (assumed away)."""
    device = with_usable_l1(graph, usable_l1)
    try:
        analyze(graph, device)
    except InputValidationError as exc:
        if any(i.rule != "device.too_small" for i in exc.issues):
            raise
        assume(False)
    return device


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=graphs(max_ops=3), max_configs=st.integers(2, 3),
       usable_l1=st.sampled_from([12_000, 24_000, 64_000, 1_000_000]))
def test_random_tiny_graphs_optimum_equals_exhaustive_search(doc, max_configs, usable_l1):
    graph = parse_graph(doc)
    device = pressed(graph, usable_l1)
    plan = solve(graph, "cpsat", device, time_limit_s=20, max_configs=max_configs)
    assert plan.status == "optimal", plan.stats
    assert plan.total_latency_us == pytest.approx(
        exhaustive_best(graph, device, max_configs), abs=ROUNDING_US)


def model_price_us(problem, a: Assignment) -> float | None:
    """The model's cheapest objective with ``a``'s decisions fixed (None: it excludes them)."""
    lm = cpsat_model.build(problem)
    for (name, j), var in lm.x.items():
        lm.model.add(var == int(problem.ops[name].candidates[j] is a.configs[name]))
    for (name, i, cfg), var in lm.r.items():
        lm.model.add(var == int(a.reads[name][i] == cfg))
    for (name, k), var in lm.spill_at.items():
        lm.model.add(var == int(a.spills.get(name) == k))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 20
    if solver.solve(lm.model) != cp_model.OPTIMAL:
        return None
    return solver.objective_value / cpsat_model.UNITS_PER_US


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=graphs(max_ops=5), usable_l1=st.sampled_from([12_000, 24_000, 1_000_000]),
       data=st.data())
def test_the_model_prices_every_valid_plan_as_the_plan_does(doc, usable_l1, data):
    """Random decisions (configurations, reads, late spills) that make a valid plan are a
    solution of the model at the plan's own total: no redundant row cuts a plan off or
    overcharges it (a row that charged a copy for a DRAM read after a spill did)."""
    graph = parse_graph(doc)
    problem = analyze(graph, pressed(graph, usable_l1), 3)
    order = problem.order
    step = {name: k for k, name in enumerate(order)}
    configs = {name: data.draw(st.sampled_from(problem.ops[name].candidates)) for name in order}
    reads = {name: [data.draw(st.sampled_from(sorted(acc, key=lambda m: m.key)))
                    for acc in configs[name].accepts] for name in order}
    spills = {}
    for name, t in problem.tensors.items():
        if t.producer and configs[t.producer].output.is_l1 and t.consumers:
            last = max(step[user] for user, _ in t.consumers)
            k = data.draw(st.sampled_from([None, *range(step[t.producer], last)]))
            if k is not None:
                spills[name] = k
    a = Assignment(list(order), configs, reads, spills)
    plan = build_plan(problem, a, "random", 0.0)
    assume(evaluate(problem, plan).valid)
    assert model_price_us(problem, a) == pytest.approx(plan.total_latency_us, abs=ROUNDING_US)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=graphs(max_ops=12), usable_l1=st.sampled_from([24_000, 200_000, 1_000_000]))
def test_random_graphs_plans_pass_the_evaluator_and_beat_no_baseline(doc, usable_l1):
    graph = parse_graph(doc)
    device = pressed(graph, usable_l1)
    plan = solve(graph, "cpsat", device, time_limit_s=2)
    verdict = evaluate(analyze(graph, device), plan)
    assert verdict.valid and plan.status in ("optimal", "feasible")
    assert verdict.total_latency_us == pytest.approx(plan.total_latency_us, abs=1e-9)
    assert plan.stats.best_bound <= plan.total_latency_us + ROUNDING_US
    for baseline in BASELINES:
        assert plan.total_latency_us <= solve(graph, baseline, device).total_latency_us + 1e-9
