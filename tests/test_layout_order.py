"""Op order as a decision (``solver/layout/order.py``): an order that makes room in L1 for
the plan the layout wants, found by CP-SAT over every topological order."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.layout import parse_graph
from solver.deadline import now
from solver.layout import SOLVERS, SolveOptions, bound, order, solve
from solver.layout.cpsat import MAX_MODEL_OPS, latency_floor_us, solve_model
from solver.layout.dram import assign as all_in_dram
from solver.layout.evaluate import evaluate
from solver.layout.problem import analyze
from tests.layout_fixtures import op, repeated, tensor, with_usable_l1

# Two branches from x, each a wide elementwise op then a narrowing matmul, joined by an
# add. The graph lists them interleaved (a1, b1, a2, b2): both wide intermediates are live
# at once. With 40,000 usable L1 bytes per core one of them must then stay in DRAM; run
# one branch to its narrow end before the other and both fit.
BRANCHES = {
    "format": "layoutsat-graph", "version": 1, "name": "branches",
    "tensors": [tensor("x", [1, 512, 512], "input"), tensor("wa", [512, 64], "constant"),
                tensor("wb", [512, 64], "constant"), tensor("a1", [1, 512, 512]),
                tensor("b1", [1, 512, 512]), tensor("a2", [1, 512, 64]),
                tensor("b2", [1, 512, 64]), tensor("c", [1, 512, 64])],
    "ops": [op("a1", "gelu", ["x"], ["a1"]), op("b1", "relu", ["x"], ["b1"]),
            op("a2", "matmul", ["a1", "wa"], ["a2"]), op("b2", "matmul", ["b1", "wb"], ["b2"]),
            op("c", "add", ["a2", "b2"], ["c"])],
    "outputs": ["c"],
}
TIGHT_L1 = 40_000


def _is_topological(graph, schedule: list[str]) -> bool:
    step = {name: k for k, name in enumerate(schedule)}
    producer = {o.outputs[0]: o.name for o in graph.ops}
    return all(step[producer[t]] < step[o.name] for o in graph.ops for t in o.inputs
               if t in producer)


def test_a_reorder_brings_back_into_l1_what_the_given_order_forces_out():
    graph = parse_graph(BRANCHES)
    device = with_usable_l1(graph, TIGHT_L1)
    given = solve(graph, "cpsat", device, time_limit_s=10, workers=2)
    searched = solve(graph, "cpsat", device, time_limit_s=10, workers=2, order="search")
    assert given.schedule == ["a1", "b1", "a2", "b2", "c"]
    assert {given.tensors["a1"].buffer, given.tensors["b1"].buffer} == {"l1", "dram"}
    assert searched.schedule != given.schedule and _is_topological(graph, searched.schedule)
    assert searched.tensors["a1"].buffer == searched.tensors["b1"].buffer == "l1"
    assert searched.total_latency_us < given.total_latency_us - 1.0
    problem = analyze(graph, device)
    assert evaluate(problem, searched).valid
    # the plan the model wants with unlimited L1 (an order-free cost): the reorder reaches it
    unlimited = solve_model(order.without_capacity(problem), all_in_dram(problem), now() + 10,
                            0, 2)
    assert searched.total_latency_us == pytest.approx(unlimited.objective_us, abs=0.01)


# ``ta`` is read by b and b2 right after it is made and once more by c; the graph lists an
# unrelated chain of two ops on a tensor four times as large (y -> h1 -> h2) before c. On
# 150,000 usable L1 bytes per core the chain's two tensors leave no room for ``ta``: the
# best plan on the given order keeps ``ta`` in L1 for b and b2 and spills it before the
# chain (cheaper than making it in DRAM); run c before the chain and ``ta`` is dead by then.
SPILLED = {
    "format": "layoutsat-graph", "version": 1, "name": "spilled",
    "tensors": [tensor(n, [1, 1024, 1024], "input" if n == "x" else "activation")
                for n in ("x", "ta", "tb", "tb2", "tc")]
    + [tensor(n, [1, 4096, 1024], "input" if n == "y" else "activation")
       for n in ("y", "th1", "th2")],
    "ops": [op("a", "gelu", ["x"], ["ta"]), op("b", "relu", ["ta"], ["tb"]),
            op("b2", "mul", ["ta", "tb"], ["tb2"]), op("h1", "exp", ["y"], ["th1"]),
            op("h2", "relu", ["th1"], ["th2"]), op("c", "add", ["ta", "tb2"], ["tc"])],
    "outputs": ["tc", "th2"],
}


def test_a_reorder_removes_the_spill_the_given_order_forces():
    graph = parse_graph(SPILLED)
    device = with_usable_l1(graph, 150_000)
    given = solve(graph, "cpsat", device, time_limit_s=20, workers=2)
    searched = solve(graph, "cpsat", device, time_limit_s=20, workers=2, order="search")
    assert given.status == searched.status == "optimal"
    assert given.schedule == ["a", "b", "b2", "h1", "h2", "c"]
    assert [(s.tensor, s.step) for s in given.spills] == [("ta", 2)]
    assert searched.schedule.index("c") < searched.schedule.index("h1")
    assert _is_topological(graph, searched.schedule) and not searched.spills
    assert searched.tensors["ta"].buffer == "l1"
    assert searched.total_latency_us < given.total_latency_us - 10.0
    assert evaluate(analyze(graph, device), searched).valid


def test_the_order_model_shortens_what_the_plan_keeps_live():
    graph = parse_graph(BRANCHES)
    problem = analyze(graph, with_usable_l1(graph, TIGHT_L1))
    wanted = solve_model(order.without_capacity(problem), all_in_dram(problem), now() + 10, 0, 2)
    found = order.memory_order(problem, wanted.assignment, now() + 10, 2)
    assert found is not None and _is_topological(graph, found)
    # each wide intermediate is read right after it is made
    assert found.index("a2") == found.index("a1") + 1
    assert found.index("b2") == found.index("b1") + 1


def test_the_given_order_is_kept_when_capacity_costs_nothing():
    graph = parse_graph(BRANCHES)
    roomy = solve(graph, "cpsat", "wormhole_n150", time_limit_s=10, workers=2, order="search")
    assert roomy.schedule == ["a1", "b1", "a2", "b2", "c"] and roomy.status == "optimal"


def test_order_moves_reorder_graphs_beyond_the_order_model():
    # 22 copies of BRANCHES (110 ops): too many for one model, so the segment search
    # reorders windows; each copy run branch by branch saves what one copy saves alone
    graph = parse_graph(repeated(BRANCHES, 22))
    assert len(graph.ops) > MAX_MODEL_OPS
    device = with_usable_l1(graph, TIGHT_L1)
    one = parse_graph(BRANCHES)
    alone = [solve(one, "cpsat", with_usable_l1(one, TIGHT_L1), time_limit_s=10, workers=2,
                   order=o).total_latency_us for o in ("given", "search")]
    saving = alone[0] - alone[1]
    assert saving > 1.0
    given = solve(graph, "cpsat", device, time_limit_s=10, workers=2)
    searched = solve(graph, "cpsat", device, time_limit_s=10, workers=2, order="search")
    assert given.schedule == [o.name for o in graph.ops]
    assert searched.schedule != given.schedule and _is_topological(graph, searched.schedule)
    assert evaluate(analyze(graph, device), searched).valid
    assert searched.total_latency_us < given.total_latency_us - 4 * saving
    # never below what every copy reordered alone would cost; its bound is the parts'
    # relaxed again on the new order (``bound.rebound``, checked against a fresh bound
    # below), not the per-op floor every schedule shares
    assert searched.total_latency_us >= 22 * alone[1] - 1e-6
    floor = latency_floor_us(analyze(graph, device))
    assert searched.stats.best_bound is not None and searched.stats.best_bound > floor + 1.0
    moved = [i for i in range(22) if searched.schedule.index(f"a2_{i}")
             == searched.schedule.index(f"a1_{i}") + 1]
    assert len(moved) >= 4


def test_rebound_relaxes_again_only_the_parts_reordered():
    graph = parse_graph(repeated(BRANCHES, 3))
    problem = analyze(graph, with_usable_l1(graph, TIGHT_L1))
    found = bound.lower_bound(problem, now() + 30, sizes=((5, 5),))
    assert found.spans == [(0, 5), (5, 10), (10, 15)] and found.solved == 3
    # the middle copy run branch by branch
    moved = replace(problem, order=[*problem.order[:5], "a1_1", "a2_1", "b1_1", "b2_1", "c_1",
                                    *problem.order[10:]])
    again = bound.rebound(moved, found, {1}, now() + 30)
    fresh = bound.lower_bound(moved, now() + 30, sizes=((5, 5),))
    assert fresh.spans == found.spans and fresh.solved == 3
    assert again == pytest.approx(fresh.bound_us, abs=1e-6)
    assert fresh.values[0] == pytest.approx(found.values[0])
    assert fresh.values[2] == pytest.approx(found.values[2])
    assert fresh.values[1] < found.values[1] - 1.0  # the reorder made room
    optimum = solve_model(moved, all_in_dram(moved), now() + 30, 0, 2)
    assert optimum.optimal and again <= optimum.objective_us + 1e-6


def test_the_order_search_ends_by_the_deadline():
    graph = parse_graph(BRANCHES)
    problem = analyze(graph, with_usable_l1(graph, TIGHT_L1))
    started = now()
    outcome = SOLVERS["cpsat"](problem, SolveOptions(started + 0.5, 0, 1, "search"))
    assert _is_topological(graph, outcome.assignment.schedule)
    assert now() - started < 1.5
