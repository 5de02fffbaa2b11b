"""The shortest path through a window's states (``solver.fusion.sequence``)."""

from __future__ import annotations

import time
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given

from benchmarks.fusion_generate import suite
from models.fusion import parse_problem
from solver.fusion import cpsat as cpsat_module
from solver.fusion.candidates import connected_op_sets
from solver.fusion.cpsat import _whole_graph, as_planned, as_variants, total
from solver.fusion.cpsat_model import frame
from solver.fusion.evaluate import evaluate
from solver.fusion.greedy import greedy
from solver.fusion.problem import Rules
from solver.fusion.schedule import to_solution
from solver.fusion.score import ScoringContext
from solver.fusion.sequence import shortest_sequence
from solver.fusion.variants import make_variant, variants_of
from tests.fusion_cases import QUICK, greedy_windows, problems
from tests.fusion_oracle import all_variants, optimum

MODES = ["per_native_k", "per_op"]


def _pointwise(inputs: list[list[int]]) -> ScoringContext:
    """Three Pointwise ops on 128 x 128 tensors, each op ``q`` writing tensor ``q + 1`` and
    reading ``inputs[q]``, with room for all of them in fast memory."""
    raw = {"widths": [128] * 4, "heights": [128] * 4, "inputs": inputs,
           "outputs": [[1], [2], [3]], "base_costs": [100, 100, 100],
           "op_types": ["Pointwise"] * 3, "fast_memory_capacity": 10**6,
           "slow_memory_bandwidth": 10, "native_granularity": [128, 128]}
    return ScoringContext(parse_problem(raw), Rules())


def _valid_total(ctx: ScoringContext, schedule) -> Fraction:
    verdict = evaluate(ctx.problem, to_solution(ctx, as_planned(schedule)), ctx.rules)
    assert verdict.valid, verdict.error
    return verdict.total


@pytest.mark.parametrize("mode", MODES)
@QUICK
@given(raw=problems(max_ops=4))
def test_the_path_lies_between_the_optima_with_and_without_recomputation(raw, mode):
    """Every schedule that runs each op once is a path (its reads are all of tensors an op
    not yet run consumes), and every path is a schedule: so the path's total lies between
    the exhaustive optimum with recomputation and the one without, and the evaluator
    agrees with it."""
    ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost=mode))
    path = shortest_sequence(ctx, _whole_graph(ctx), all_variants(ctx), time.monotonic() + 60)
    assert path is not None
    assert optimum(ctx) <= total(path) <= optimum(ctx, recompute=False)
    assert _valid_total(ctx, path) == total(path)


@QUICK
@given(case=greedy_windows())
def test_a_window_path_meets_the_window_and_is_no_worse_than_what_it_frees(case):
    """Greedy runs each op once, so the subgraphs a window frees are one of its paths: the
    path found keeps the window's boundary (``Window.holds``) at no more than their total."""
    ctx, schedule, a, b = case
    window, inside = frame(ctx, schedule, a, b)
    sets = connected_op_sets(ctx.graph, {q for v in inside for q in v.ops}, 10**6).sets
    variants = inside + [v for ops in sets
                         for v in variants_of(ctx, ops, [window.resident], [window.handoff])]
    path = shortest_sequence(ctx, window, variants, time.monotonic() + 60)
    assert path is not None
    assert window.holds(path)
    assert total(path) <= total(inside)
    whole = schedule[:a] + path + schedule[b:]
    assert _valid_total(ctx, whole) == total(whole)


def test_the_search_gives_up_past_its_state_budget():
    """A budget of one state (the start) leaves no room for a step: nothing, not a partial
    schedule."""
    raw = {"widths": [128, 128, 128], "heights": [128, 128, 128], "inputs": [[0], [1]],
           "outputs": [[1], [2]], "base_costs": [1000, 1000],
           "op_types": ["Pointwise", "Pointwise"], "fast_memory_capacity": 50000,
           "slow_memory_bandwidth": 10, "native_granularity": [128, 128]}
    ctx = ScoringContext(parse_problem(raw), Rules())
    variants = all_variants(ctx)
    assert shortest_sequence(ctx, _whole_graph(ctx), variants, time.monotonic() + 60) \
        is not None
    assert shortest_sequence(ctx, _whole_graph(ctx), variants, time.monotonic() + 60,
                             most_states=1) is None


def test_a_path_over_a_640_op_graph_gives_up_soon_after_its_deadline():
    """Relinking a 640-op transformer's greedy schedule (400 subgraphs) over the whole
    graph, with the deadline already passed: the path gives up at its first check. Each
    state used to look again at every tensor slow memory held, and the first check came
    after 256 states: 0.66 s, which took a 5-s solve of that graph to 5.7 s."""
    # of the scale run ``fusion_generate.py --count 6 --ops 640 --seed 41``
    problem = parse_problem(dict(suite(seed=41, count=6, ops=640))["gen-transformer-00"])
    ctx = ScoringContext(problem, Rules())
    schedule = as_variants(ctx, greedy(ctx, time.monotonic() + 60))
    started = time.monotonic()
    assert shortest_sequence(ctx, _whole_graph(ctx), schedule, started) is None
    assert time.monotonic() - started < 0.25


def test_a_path_found_by_the_search_beats_greedy_on_a_chain():
    """On a Pointwise chain with room for all of it, the path runs it as one subgraph where
    greedy's schedule, given as variants too, is the other path; the cheaper wins."""
    ctx = _pointwise([[0], [1], [2]])
    path = shortest_sequence(ctx, _whole_graph(ctx),
                             all_variants(ctx) + as_variants(ctx, greedy(ctx)),
                             time.monotonic() + 60)
    assert path is not None
    assert [v.ops for v in path] == [(0, 1, 2)]
    # one load of the input and one write of the output, each 128 x 128 / 10
    assert total(path) == Fraction(2 * 128 * 128, 10)


def test_a_window_path_leaves_in_slow_memory_what_later_subgraphs_read():
    """Op 0's output feeds op 1 in the window and op 2 after it. Running ops 0 and 1 as
    one subgraph would be cheaper, but leaves that tensor ephemeral, never written, where
    op 2 reads it from slow memory: the path writes it."""
    ctx = _pointwise([[0], [1], [1]])
    unfused = [make_variant(ctx, (q,), frozenset(), frozenset()) for q in range(3)]
    window, inside = frame(ctx, unfused, 0, 2)
    assert 1 in window.needed
    fused = make_variant(ctx, (0, 1), frozenset(), frozenset())
    assert fused is not None and fused.latency < total(inside)
    path = shortest_sequence(ctx, window, [*inside, fused], time.monotonic() + 60)
    assert path is not None and window.holds(path)
    assert path == inside


def test_cp_sat_starts_from_the_path_when_it_beats_the_hint(monkeypatch):
    """``_solve_variants`` hints the model with the path, not the incumbent it was given,
    when the path is cheaper; and it answers the path when the model finds nothing."""
    ctx = _pointwise([[0], [1], [2]])
    incumbent = [make_variant(ctx, (q,), frozenset(), frozenset()) for q in range(3)]
    variants = incumbent + all_variants(ctx)
    hints: list[list[int]] = []

    def model(window, variants, hinted, *args):
        hints.append(list(hinted))
        return None

    monkeypatch.setattr(cpsat_module, "_solve_model", model)
    ends = time.monotonic() + 10
    found, optimal = cpsat_module._solve_variants(ctx, _whole_graph(ctx), variants, incumbent,
                                                  ends, ends, 0, 1)
    assert [v.ops for v in found] == [(0, 1, 2)] and not optimal
    assert [variants[i].ops for i in hints[0]] == [(0, 1, 2)]


def test_a_resident_set_no_variant_reads_leaves_no_path_and_no_error():
    """A window that starts with a tensor resident which none of its variants expects finds
    no path (every subgraph must find exactly what the one before kept), and says so."""
    ctx = _pointwise([[0], [1], [2]])
    variants = [v for v in all_variants(ctx) if not v.retained_in]
    window = replace(_whole_graph(ctx), resident=frozenset({1}))
    assert shortest_sequence(ctx, window, variants, time.monotonic() + 10) is None


def test_a_hint_that_runs_a_variant_twice_takes_its_next_copy():
    """A schedule running one variant twice (recomputation that hands a kept tensor to each
    consumer) is hinted at two different positions of the model's list, the variant and its
    copy (``_repeats`` appends the same object), not twice at the first."""
    ctx = _pointwise([[0], [1], [1]])
    keep, use_1, use_2 = (make_variant(ctx, (0,), frozenset(), frozenset({1})),
                          make_variant(ctx, (1,), frozenset({1}), frozenset()),
                          make_variant(ctx, (2,), frozenset({1}), frozenset()))
    variants = [keep, use_1, use_2, keep]
    assert cpsat_module._indices(variants, [keep, use_1, keep, use_2]) == [0, 1, 3, 2]
