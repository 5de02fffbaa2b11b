"""The narrowed whole-problem models (``narrowed.py``): they keep the answer fitting, never
raise its cost, and widen until they reach the optimum CP-SAT proves on the whole."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from benchmarks.iopddl_generate import generate
from solver import deadline as clock
from solver.iopddl import narrowed
from solver.iopddl.coarse import UnitGraph, UnitState
from solver.iopddl.evaluate import evaluate
from solver.iopddl.groups import find_groups
from solver.iopddl.lagrange import ELITE, priced_search
from solver.iopddl.merged import solve_whole, units_of
from solver.iopddl.messages import MessagePassing
from solver.iopddl.narrowed import narrowed_rounds
from solver.iopddl.problem import parse_problem
from solver.iopddl.reduce import reduce, unfold
from solver.iopddl.search import _smallest_usage, _working, cpsat
from solver.iopddl.state import State


def _start(nodes: int, seed: int, tightness: float) -> tuple[UnitGraph, State]:
    work = _working(parse_problem(generate(nodes, seed, tightness=tightness)))
    reduce(work, clock.now() + 30)
    start = _smallest_usage(work)
    return UnitGraph(start, units_of(work, find_groups(work))), start


def _beliefs(graph: UnitGraph, passes: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Beliefs of the plain problem after ``passes`` passes, and each unit's allowed
    positions ranked by them."""
    messages = MessagePassing(graph)
    assert messages.solve(graph.unary, passes, clock.now() + 10) is not None
    beliefs = messages.beliefs(graph.unary)
    allowed = graph.units.allowed
    return beliefs, [np.argsort(np.where(allowed[u], b, np.inf), kind="stable")
                     for u, b in enumerate(beliefs)]


def _cost(state: State) -> int:
    work = state.work
    report = evaluate(work.problem, unfold(
        work, {i: int(work.strategies[i][p]) for i, p in state.pos.items()}))
    assert report.valid
    return report.cost


@pytest.mark.parametrize("seed", range(3))
def test_narrowed_rounds_widen_to_the_proven_optimum(seed: int) -> None:
    """From each node's smallest usage, rounds proven optimal for their width widen until
    every position is in: the answer is then the optimum CP-SAT proves on the whole."""
    problem = parse_problem(generate(80, seed, tightness=0.85))
    exact = cpsat(problem, time.monotonic() + 20, 0, 2)
    assert exact.status == "optimal"
    optimum = evaluate(problem, exact.solution).cost
    graph, start = _start(80, seed, 0.85)
    assert _cost(start) > optimum  # the rounds have something to do
    rounds = narrowed_rounds(start, graph, None, clock.now() + 20, seed, 2)
    assert rounds >= 1
    assert _cost(start) == optimum


@pytest.mark.parametrize("seed", range(3))
def test_narrowed_rounds_keep_the_fit_and_never_raise_the_cost(seed: int) -> None:
    """On larger problems, with the priced search's beliefs and a short clock."""
    graph, start = _start(1500, seed, 0.7)
    found, _, beliefs, _ = priced_search(graph.work, graph, clock.now() + 2.0, start)
    assert beliefs is not None and [len(b) for b in beliefs] == [len(c) for c in graph.unary]
    before = _cost(found)
    began = time.monotonic()
    assert narrowed_rounds(found, graph, beliefs, clock.now() + 3.0, seed, 2) >= 1
    assert time.monotonic() - began < 4.5
    assert found.feasible() and _cost(found) <= before


def test_the_elite_answers_are_distinct_fitting_and_cheapest_first() -> None:
    graph, start = _start(300, 0, 0.7)
    found, _, _, elite = priced_search(graph.work, graph, clock.now() + 5.0, start)
    assert 1 <= len(elite) <= ELITE
    states = [State(graph.work, graph.nodes(list(pos))) for pos in elite]
    assert all(s.feasible() for s in states)
    costs = [s.cost() for s in states]
    assert costs == sorted(costs) and costs[0] >= found.cost()
    assert len({tuple(pos.tolist()) for pos in elite}) == len(elite)


def test_the_domains_hold_every_elite_position() -> None:
    graph, start = _start(300, 1, 0.7)
    current = UnitState(graph, graph.of(start))
    _, ranked = _beliefs(graph, 4)
    rng = np.random.default_rng(0)
    allowed = graph.units.allowed
    elite = [np.array([int(rng.choice(np.flatnonzero(allowed[u]))) for u in range(graph.count)])
             for _ in range(3)]
    with_elite = narrowed._domains(graph, current, ranked, 1, elite)
    without = narrowed._domains(graph, current, ranked, 1)
    for u, kept in with_elite.items():
        assert set(without[u]) | {int(e[u]) for e in elite} == set(kept.tolist())


def test_elite_answers_are_dropped_before_the_beliefs_when_too_large(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A model too large with the elite answers' positions is built with the cheapest half
    of them (halved until it fits), at the first width, rather than not at all."""
    graph, start = _start(300, 0, 0.7)
    beliefs, ranked = _beliefs(graph, 20)
    current = UnitState(graph, graph.of(start))
    allowed = graph.units.allowed
    every = [np.array([int(np.flatnonzero(allowed[u])[k % int(allowed[u].sum())])
                       for u in range(graph.count)]) for k in range(4)]
    plain = narrowed._size(graph, narrowed._domains(graph, current, ranked, narrowed.FIRST_WIDTH))
    halved = narrowed._domains(graph, current, ranked, narrowed.FIRST_WIDTH, every[:2])
    assert plain < narrowed._size(graph, halved) < narrowed._size(graph, narrowed._domains(
        graph, current, ranked, narrowed.FIRST_WIDTH, every))
    monkeypatch.setattr(narrowed, "MAX_ENTRIES", narrowed._size(graph, halved))
    built: list[dict[int, np.ndarray]] = []

    def recording(*args: object, **kwargs: Any) -> object:
        built.append(kwargs["domains"])
        return solve_whole(*args, **kwargs)

    monkeypatch.setattr(narrowed, "solve_whole", recording)
    before = _cost(start)
    assert narrowed_rounds(start, graph, beliefs, clock.now() + 5, 0, 2, every) >= 1
    assert {u: d.tolist() for u, d in built[0].items()} == {
        u: d.tolist() for u, d in halved.items()}
    assert start.feasible() and _cost(start) <= before


def test_a_model_too_large_for_any_width_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    graph, start = _start(300, 0, 0.7)
    monkeypatch.setattr(narrowed, "MAX_ENTRIES", 10)
    before = dict(start.pos)
    assert narrowed_rounds(start, graph, None, clock.now() + 5, 0, 2) == 0
    assert start.pos == before


def test_the_domains_hold_the_current_and_the_best_positions_only() -> None:
    graph, start = _start(300, 1, 0.7)
    current = UnitState(graph, graph.of(start))
    beliefs, ranked = _beliefs(graph, 4)
    allowed = graph.units.allowed
    domains = narrowed._domains(graph, current, ranked, 1)
    for u, kept in domains.items():
        assert allowed[u][kept].all() and current.pos[u] in kept
        best_belief = int(np.argmin(np.where(allowed[u], beliefs[u], np.inf)))
        best_here = int(np.argmin(np.where(allowed[u], current.local[u], np.inf)))
        assert best_belief in kept and best_here in kept and len(kept) <= 3
    assert narrowed._size(graph, domains) < narrowed._size(
        graph, {u: np.flatnonzero(allowed[u]) for u in range(graph.count)})


def test_rounds_end_when_the_next_width_is_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    """A width proven optimal whose successor's model would exceed the limit ends the rounds
    (it is not solved again and again until the deadline)."""
    graph, start = _start(80, 0, 0.85)
    beliefs, ranked = _beliefs(graph, 50)
    current = UnitState(graph, graph.of(start))
    first = narrowed._size(graph, narrowed._domains(graph, current, ranked, narrowed.FIRST_WIDTH))
    monkeypatch.setattr(narrowed, "MAX_ENTRIES", first)
    began = time.monotonic()
    rounds = narrowed_rounds(start, graph, beliefs, clock.now() + 20, 0, 2)
    assert 1 <= rounds <= 3  # a round may leave an answer whose next width still fits
    assert time.monotonic() - began < 10
