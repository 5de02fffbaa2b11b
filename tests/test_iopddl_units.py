"""The problem over units (``coarse.py``), message passing (``messages.py``) and the priced
search on them (``lagrange.py``): each checked against the node-level state, brute force or
the evaluator."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from benchmarks.iopddl_generate import generate
from solver import deadline as clock
from solver.iopddl.coarse import UnitGraph, UnitState
from solver.iopddl.evaluate import evaluate
from solver.iopddl.groups import find_groups
from solver.iopddl.lagrange import priced_bound, priced_search
from solver.iopddl.merged import units_of
from solver.iopddl.messages import MessagePassing
from solver.iopddl.problem import parse_problem
from solver.iopddl.reduce import reduce, unfold
from solver.iopddl.search import _by_units, _smallest_usage, _working, cpsat
from solver.iopddl.state import State
from solver.iopddl.work import FORBIDDEN


def _graph(nodes: int, seed: int, tightness: float) -> tuple[UnitGraph, State]:
    work = _working(parse_problem(generate(nodes, seed, tightness=tightness)))
    reduce(work, clock.now() + 30)
    start = _smallest_usage(work)
    return UnitGraph(start, units_of(work, find_groups(work))), start


def _allowed_positions(graph: UnitGraph, rng: np.random.Generator) -> list[int]:
    return [int(rng.choice(np.flatnonzero(graph.units.allowed[u]))) for u in range(graph.count)]


@pytest.mark.parametrize("seed", range(6))
def test_unit_state_agrees_with_node_state(seed: int) -> None:
    """Random unit assignments and moves: the unit state's cost, slack and local costs are
    those of the node assignment they stand for, recomputed from scratch."""
    graph, _ = _graph(300, seed, 0.5)
    assert graph.count < len(graph.work.live_nodes)  # groups were found
    rng = np.random.default_rng(seed)
    state = UnitState(graph, _allowed_positions(graph, rng))
    for _ in range(200):
        u = int(rng.integers(graph.count))
        state.move(u, int(rng.choice(np.flatnonzero(graph.units.allowed[u]))))
    nodes = State(graph.work, graph.nodes(state.pos))
    if nodes.cost() < FORBIDDEN:  # no soft penalty in play: the costs are the same sum
        assert state.cost() + graph.work.offset == pytest.approx(nodes.cost(), rel=1e-12)
    assert np.array_equal(state.slack, nodes.slack)
    fresh = UnitState(graph, state.pos)
    for u in range(graph.count):
        assert np.allclose(state.local[u], fresh.local[u], rtol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_fitting_moves_never_make_a_step_worse(seed: int) -> None:
    graph, _ = _graph(300, seed, 0.7)
    rng = np.random.default_rng(seed)
    state = UnitState(graph, _allowed_positions(graph, rng))
    for u in rng.permutation(graph.count)[:80].tolist():
        before = state.slack.copy()
        for k in np.flatnonzero(state.fitting(u)).tolist():
            old = state.pos[u]
            state.move(u, k)
            assert (state.slack >= np.minimum(before, 0)).all()
            state.move(u, old)
        assert np.array_equal(state.slack, before)


@pytest.mark.parametrize("seed", range(4))
def test_repair_and_descend_keep_the_limit(seed: int) -> None:
    """From each unit's cheapest position (over the limit at tightness 0.8), the repair fits
    every step; moves under the caps then only lower the cost and keep the fit; the node
    solution they stand for passes the evaluator."""
    graph, _ = _graph(400, seed, 0.8)
    state = UnitState(graph, [int(np.argmin(c)) for c in graph.unary])
    assert state.repair(clock.now() + 30, clock.now)
    assert state.feasible()
    before = state.cost()
    state.descend(clock.now() + 30, clock.now)
    assert state.feasible() and state.cost() <= before
    work = graph.work
    nodes = {i: int(work.strategies[i][p]) for i, p in graph.nodes(state.pos).items()}
    assert evaluate(work.problem, unfold(work, nodes)).valid


def _tree(seed: int) -> UnitGraph:
    """Seven nodes of 2-4 strategies on a random tree, every pair finite (so no groups), no
    limit, left unreduced: seven units joined by six matrices."""
    rng = np.random.default_rng(seed)
    n = 7
    k = rng.integers(2, 5, n).tolist()
    pairs = [[int(rng.integers(i)), i] for i in range(1, n)]
    doc = {"problem": {
        "nodes": {"intervals": [[0, 1]] * n, "usages": [[0] * c for c in k],
                  "costs": [rng.integers(0, 50, c).tolist() for c in k]},
        "edges": {"nodes": pairs,
                  "costs": [rng.integers(0, 50, k[u] * k[v]).tolist() for u, v in pairs]}}}
    problem = parse_problem(doc)
    work = _working(problem)  # unreduced: the tree as it is
    return UnitGraph(_smallest_usage(work), units_of(work, find_groups(work)))


@pytest.mark.parametrize("seed", range(4))
def test_unit_moves_from_the_smallest_usage_fit_and_lower_the_cost(seed: int) -> None:
    """The start ``cpsat`` takes before the greedy: each node's smallest usage, groups at
    their roots' positions, unit moves under the caps. It fits, passes the evaluator and
    is cheaper than the smallest usage it came from."""
    graph, start = _graph(600, seed, 0.7)
    found = _by_units(start, graph, clock.now() + 30, kicks=False)
    assert found.feasible() and found.cost() < start.cost()
    work = graph.work
    solution = unfold(work, {i: int(work.strategies[i][p]) for i, p in found.pos.items()})
    report = evaluate(work.problem, solution)
    assert report.valid and report.cost == pytest.approx(found.cost(), rel=1e-12)


def test_a_problem_without_a_binding_step_fits_as_units() -> None:
    graph = _tree(0)
    assert not graph.binding.any()
    assert UnitState(graph, [int(np.argmax(c)) for c in graph.unary]).feasible()


@pytest.mark.parametrize("seed", range(8))
def test_message_passing_is_exact_on_a_tree(seed: int) -> None:
    graph = _tree(seed)
    assert graph.count == 7 and len(graph.pairs) == 6
    unary = graph.unary

    def cost(pos: tuple[int, ...]) -> float:
        return (sum(float(unary[u][p]) for u, p in enumerate(pos))
                + sum(float(m[pos[a], pos[b]]) for (a, b), m in graph.pairs.items()))

    best = min(itertools.product(*(range(len(c)) for c in unary)), key=cost)
    found = MessagePassing(graph).solve(unary, 4, clock.now() + 30)
    assert found is not None and cost(tuple(found)) == pytest.approx(cost(best))


@pytest.mark.parametrize("seed", range(3))
def test_priced_search_fits_and_never_worsens(seed: int) -> None:
    graph, start = _graph(1500, seed, 0.6)
    began = time.monotonic()
    best, lam, _, _ = priced_search(graph.work, graph, clock.now() + 3.0, start)
    assert time.monotonic() - began < 4.0
    assert best.feasible() and best.cost() <= start.cost()
    assert (lam >= 0).all() and len(lam) == len(graph.work.cap)


@pytest.mark.parametrize("seed", range(3))
def test_the_priced_bound_never_exceeds_the_optimum(seed: int) -> None:
    """The prices the priced search returns (those whose answer scored the highest
    Lagrangian value) give a bound no higher than the optimum CP-SAT proves."""
    problem = parse_problem(generate(80, seed, tightness=0.85))
    exact = cpsat(problem, time.monotonic() + 20, 0, 2)
    assert exact.status == "optimal"
    optimum = evaluate(problem, exact.solution).cost
    graph, start = _graph(80, seed, 0.85)
    _, lam, _, _ = priced_search(graph.work, graph, clock.now() + 1.0, start)
    assert lam.any()  # the limit binds: the bound is not the pairwise one alone
    assert priced_bound(graph.work, lam, clock.now() + 1.0) <= optimum + 1e-6 * abs(optimum)
