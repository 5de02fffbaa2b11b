"""The CP-SAT fusion solver: optimal over its decision space, never worse than greedy,
always valid, and within its time limit."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from fractions import Fraction
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from benchmarks.fusion_generate import suite
from models.fusion import parse_problem
from solver.fusion import cpsat as cpsat_module
from solver.fusion.bound.roles import never_together
from solver.fusion.candidates import connected_op_sets
from solver.fusion.cpsat import (
    LEAST_SOLVE_S,
    LEVELS_LEAST_OPS,
    WHOLE_GRAPH_BUDGET,
    WINDOW_BUDGET,
    SearchResult,
    _levels,
    _linkable,
    _pick_window,
    _score_waiting,
    _solve_window,
    _whole_graph,
    _window_time,
    as_planned,
    as_variants,
    cpsat_search,
    relink,
    total,
)
from solver.fusion.cpsat_model import LinkCount, Window, build_model, frame
from solver.fusion.evaluate import evaluate
from solver.fusion.greedy import greedy
from solver.fusion.pool import halves
from solver.fusion.problem import Rules
from solver.fusion.schedule import to_solution
from solver.fusion.score import ScoringContext, ScoringTimeout
from solver.fusion.unfused import unfused
from solver.fusion.variants import Variant
from tests.conftest import MLSYS
from tests.fusion_cases import FORK_JOIN_IN_ONE, QUICK, greedy_windows, problems
from tests.fusion_oracle import optimum

MODES = ["per_native_k", "per_op"]


def search(raw: dict, mode: str, seconds: float = 10.0, every_tile: bool = False):
    ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost=mode), every_tile=every_tile)
    return ctx, cpsat_search(ctx, time.monotonic() + seconds, seed=0, workers=1)


def assert_valid(ctx: ScoringContext, schedule) -> None:
    """The evaluator accepts the schedule and agrees with the latencies it was built from."""
    verdict = evaluate(ctx.problem, to_solution(ctx, as_planned(schedule)), ctx.rules)
    assert verdict.valid, verdict.error
    assert verdict.total == total(schedule)


@pytest.mark.parametrize("mode", MODES)
@QUICK
@given(raw=problems(max_ops=4))
def test_optimum_equals_exhaustive_search_on_tiny_graphs(raw, mode):
    ctx, found = search(raw, mode)
    assert found.optimal
    assert total(found.schedule) == optimum(ctx, extra=as_variants(ctx, greedy(ctx)))
    assert_valid(ctx, found.schedule)


@pytest.mark.parametrize("every_tile", [False, True], ids=["powers_of_two", "every_tile"])
@pytest.mark.parametrize("mode", MODES)
@QUICK
@given(raw=problems(max_ops=7))
def test_never_worse_than_greedy_and_always_valid(raw, mode, every_tile):
    """With ``every_tile`` (as ``solve`` runs it) against the powers-of-two greedy."""
    ctx, found = search(raw, mode, seconds=3.0, every_tile=every_tile)
    baseline = ScoringContext(ctx.graph, ctx.rules)
    assert total(found.schedule) <= total(as_variants(baseline, greedy(baseline)))
    assert_valid(ctx, found.schedule)


# Graphs where the greedy is provably wrong: the exhaustive search finds less than greedy.
FORK = {  # T1 feeds three MatMuls: fuse the producer with two, retain T1 for the third
    "widths": [16, 16, 16, 48, 48, 16], "heights": [16, 16, 16, 16, 16, 16],
    "inputs": [[0, 0], [1, 0], [1, 3], [1, 1]], "outputs": [[1], [2], [4], [5]],
    "base_costs": [12.5, 12.5, 12.5, 999.9], "op_types": ["MatMul"] * 4,
    "fast_memory_capacity": 5000, "slow_memory_bandwidth": 1, "native_granularity": [32, 64]}
RECOMPUTE = {  # MatMul op 2 is cheaper to run twice than to write and reload T7
    "widths": [48, 48, 64, 64, 64, 24, 32, 32, 32, 32, 16, 16],
    "heights": [64, 64, 64, 64, 64, 48, 24, 48, 64, 48, 64, 64],
    "inputs": [[0, 0], [2, 3, 2], [5, 6], [0, 7], [7, 7], [2, 10]],
    "outputs": [[1], [4], [7], [8], [9], [11]], "base_costs": [1, 486, 0.1, 73, 1792, 0.1],
    "op_types": ["Pointwise", "Pointwise", "MatMul", "MatMul", "Pointwise", "MatMul"],
    "fast_memory_capacity": 2000, "slow_memory_bandwidth": 10, "native_granularity": [32, 64]}
RETENTION = {  # T1 forks; fusing its producer with one consumer and retaining it pays
    "widths": [48, 48, 24, 24, 40, 40, 48, 24, 24], "heights": [16, 16, 48, 16, 16, 16, 16, 16, 16],
    "inputs": [[0, 0], [1, 2], [4], [1], [7]], "outputs": [[1], [3], [5], [6], [8]],
    "base_costs": [4, 254, 272, 254, 236],
    "op_types": ["Pointwise", "MatMul", "Pointwise", "Pointwise", "Pointwise"],
    "fast_memory_capacity": 2000, "slow_memory_bandwidth": 1, "native_granularity": [32, 32]}


@pytest.mark.parametrize("raw", [FORK, RECOMPUTE, RETENTION],
                         ids=["fork", "recompute", "retention"])
def test_beats_greedy_where_greedy_is_provably_wrong(raw):
    ctx, found = search(raw, "per_native_k")
    best = optimum(ctx)
    assert best < total(as_variants(ctx, greedy(ctx)))
    assert found.optimal and total(found.schedule) == best
    assert_valid(ctx, found.schedule)


def test_a_model_optimum_the_evaluator_refuses_proves_nothing_of_the_incumbent(monkeypatch):
    """Every model answers a faster schedule that leaves an op unrun, proven optimal: the
    evaluator refuses it, the search keeps greedy's, and does not call that optimal."""
    ctx = ScoringContext(parse_problem(FORK), Rules(reduction_cost="per_native_k"))
    greedy_total = total(as_variants(ctx, greedy(ctx)))

    def unrun(ctx, window, sets, incumbent, *rest, **options):
        return list(incumbent)[1:], True

    monkeypatch.setattr(cpsat_module, "_solve_window", unrun)
    found = cpsat_search(ctx, time.monotonic() + 10)
    assert total(found.schedule) == greedy_total
    assert not found.optimal
    assert_valid(ctx, found.schedule)


def test_recomputation_is_what_wins_on_the_recompute_case():
    ctx, found = search(RECOMPUTE, "per_native_k")
    assert optimum(ctx, recompute=False) > total(found.schedule)
    assert sum(len(v.ops) for v in found.schedule) > ctx.problem.num_ops


@pytest.mark.parametrize("seconds", [1.0, 4.0])
def test_time_limit_is_honoured_on_a_large_benchmark(seconds):
    """Even when greedy itself cannot finish, the answer is the best found so far: valid,
    and no worse than running every op alone."""
    raw = json.loads((MLSYS / "benchmarks" / "mlsys-2026-13.json").read_text())
    started = time.monotonic()
    ctx, found = search(raw, "per_op", seconds)
    assert time.monotonic() - started < seconds + 2
    assert not found.optimal
    assert total(found.schedule) <= total(as_variants(ctx, unfused(ctx)))
    assert_valid(ctx, found.schedule)


def test_time_limit_holds_when_scoring_one_op_set_is_slow(monkeypatch):
    """The window's scoring stops inside one op set's config search, not only between op
    sets: each candidate config scored for a window's variant is made to take 0.3 s."""
    import solver.fusion.cpsat as fusion_cpsat
    import solver.fusion.score as score

    making: list[tuple] = []
    real_make, real_score = fusion_cpsat.make_variant, score.score_subgraph

    def make(ctx, *key):
        making.append(key)
        try:
            return real_make(ctx, *key)
        finally:
            making.pop()

    def slow(*args, **kwargs):
        if making:
            time.sleep(0.3)
        return real_score(*args, **kwargs)

    monkeypatch.setattr(fusion_cpsat, "make_variant", make)
    monkeypatch.setattr(score, "score_subgraph", slow)
    raw = json.loads((MLSYS / "benchmarks" / "mlsys-2026-1.json").read_text())
    started = time.monotonic()
    ctx, found = search(raw, "per_native_k", seconds=2.0)
    assert time.monotonic() - started < 2.0 + 2  # 6.9 s when the search was not stopped
    assert total(found.schedule) <= total(as_variants(ctx, greedy(ctx)))
    assert_valid(ctx, found.schedule)


def test_skipping_variants_no_neighbour_can_link_keeps_the_window_optimum():
    """A window scores only the retention variants ``_linkable`` admits; scoring every one
    gives the same proven optimum, on random windows of random problems, one in twenty or
    more of which do skip some (39 of these 200; 8 of 100 drawn at random)."""
    skipped: list[bool] = []

    @settings(QUICK, max_examples=200)
    @given(case=greedy_windows())
    def check(case):
        ctx, incumbent, a, b = case
        window, inside = frame(ctx, incumbent, a, b)
        sets = connected_op_sets(ctx.graph, {q for v in inside for q in v.ops},
                                 WINDOW_BUDGET).sets
        verdicts: list[bool] = []

        def recorded(*args) -> bool:
            verdicts.append(_linkable(*args))
            return verdicts[-1]

        def solved() -> tuple[Fraction, bool]:
            found, optimal = _solve_window(ctx, window, sets, inside, time.monotonic() + 20,
                                           0, 1)
            assert found is not None
            return total(found), optimal

        with patch("solver.fusion.cpsat._linkable", recorded):
            pruned = solved()
        with patch("solver.fusion.cpsat._linkable", return_value=True):
            everything = solved()
        assert pruned[1] and everything[1]
        assert pruned[0] == everything[0]
        skipped.append(not all(verdicts))

    check()
    assert sum(skipped) * 20 >= len(skipped)


def test_a_model_solved_with_op_sets_unscored_goes_back_to_scoring(monkeypatch):
    """With scoring cut short after every 100 keys, the whole-graph model of a generated
    13-op convolution stack, solved to optimality over what was scored, goes back to
    scoring the rest, round after round, until every key is scored: the answer is then
    proven optimal and as fast as one scoring pass gives. A window (no ``rescore``)
    stops after its first round."""
    problem = parse_problem(next(raw for name, raw in suite() if name == "gen-conv-03"))

    def solved(rescore: bool) -> tuple[list[Variant] | None, bool]:
        ctx = ScoringContext(problem, Rules(reduction_cost="per_op"), every_tile=True)
        incumbent = as_variants(ctx, greedy(ctx, time.monotonic() + 20))
        sets = connected_op_sets(ctx.graph, range(problem.num_ops), WHOLE_GRAPH_BUDGET).sets
        return _solve_window(ctx, _whole_graph(ctx), sets, incumbent, time.monotonic() + 60,
                             0, 1, rescore=rescore)

    whole, proven = solved(rescore=True)
    left: list[int] = []

    def by_hundreds(ctx, waiting, *rest, plain_only: bool = False) -> int:
        part = waiting[-100:]
        del waiting[-100:]
        dropped = _score_waiting(ctx, part, *rest, plain_only=plain_only)
        waiting.extend(part)
        if not plain_only:  # a round's last scoring (after its plain and guided keys)
            left.append(len(waiting))
        return dropped

    monkeypatch.setattr(cpsat_module, "_score_waiting", by_hundreds)
    found, optimal = solved(rescore=True)
    assert whole is not None and found is not None and proven and optimal
    assert len(left) > 2 and left[-1] == 0
    assert total(found) == total(whole)
    left.clear()
    assert solved(rescore=False)[1] is False
    assert len(left) == 1 and left[0] > 0


@pytest.mark.parametrize("hard_end_after_s", [0.0, 1.4])
def test_a_model_built_to_the_last_moment_is_solved_only_if_it_ends_by_the_hard_end(
        monkeypatch, hard_end_after_s):
    """A build that takes all the time it is given (a sleep to its deadline): when the
    search's hard end is the model's deadline (the whole-graph model at the search's end),
    the build ends ``LEAST_SOLVE_S`` before it and CP-SAT, which would load past it, is not
    run; when the hard end lies later (a window mid-search), the build keeps the window's
    deadline and CP-SAT runs with its floor, ending before the hard end."""
    problem = parse_problem(next(raw for name, raw in suite() if name == "gen-conv-03"))
    ctx = ScoringContext(problem, Rules(reduction_cost="per_op"))
    incumbent = as_variants(ctx, greedy(ctx, time.monotonic() + 20))
    sets = connected_op_sets(ctx.graph, range(problem.num_ops), 200).sets
    real = cpsat_module.build_model
    built: list[float] = []
    limits: list[tuple[float, float]] = []

    def slow(window, variants, scale, deadline, demands):
        model = real(window, variants, scale, float("inf"), demands)
        time.sleep(max(0.0, deadline - time.monotonic()))
        built.append(deadline)
        return model

    def stopped(solver, model, callback=None):
        limits.append((time.monotonic(), solver.parameters.max_time_in_seconds))
        return cp_model.UNKNOWN

    monkeypatch.setattr(cpsat_module, "build_model", slow)
    monkeypatch.setattr(cpsat_module, "run_cpsat", stopped)
    deadline = time.monotonic() + 0.6
    hard_end = deadline + hard_end_after_s
    _solve_window(ctx, _whole_graph(ctx), sets, incumbent, deadline, 0, 1, hard_end=hard_end)
    assert len(built) == 1
    if hard_end_after_s:
        assert built[0] == deadline
        assert len(limits) == 1
        started, limit = limits[0]
        assert limit == pytest.approx(LEAST_SOLVE_S) and started + limit < hard_end
    else:
        assert built[0] == pytest.approx(deadline - LEAST_SOLVE_S)
        assert limits == []


def test_a_search_stopped_by_the_scoring_deadline_leaves_its_key_waiting(monkeypatch):
    """The key whose config search the scoring deadline stops is scored in the next round,
    not dropped."""
    problem = parse_problem(next(raw for name, raw in suite() if name == "gen-conv-01"))
    ctx = ScoringContext(problem, every_tile=True)
    keys = [((q,), frozenset(), frozenset()) for q in range(problem.num_ops)]
    waiting = keys[::-1]
    variants: list[Variant] = []
    score = cpsat_module.make_variant
    calls: list[tuple] = []

    def stopped_once(ctx, *key):
        calls.append(key)
        if len(calls) == 2:
            raise ScoringTimeout
        return score(ctx, *key)

    monkeypatch.setattr(cpsat_module, "make_variant", stopped_once)
    args = (variants, {}, set(), LinkCount(_whole_graph(ctx)), time.monotonic() + 20)
    assert _score_waiting(ctx, waiting, *args) == 0
    assert waiting == keys[1:][::-1]
    assert _score_waiting(ctx, waiting, *args) == 0
    assert not waiting and calls[1] == calls[2] == keys[1]
    assert len(variants) == problem.num_ops


def test_a_window_skips_retention_it_cannot_link():
    """Chain 0 -> 1 -> 2 -> 3, window {1, 2}: op 1 cannot find op 0's output resident (op 0
    is outside, the window starts with nothing resident), op 2 cannot keep its output for
    op 3 (outside, not handed on); both become linkable when the window's boundary says so."""
    raw = {"widths": [16] * 5, "heights": [16] * 5, "inputs": [[0], [1], [2], [3]],
           "outputs": [[1], [2], [3], [4]], "base_costs": [10] * 4,
           "op_types": ["Pointwise"] * 4, "fast_memory_capacity": 5000,
           "slow_memory_bandwidth": 1, "native_granularity": [16, 16]}
    ctx = ScoringContext(parse_problem(raw), Rules())
    universe = {1, 2}
    window = Window(cover=frozenset(universe), available=frozenset({0, 1}))
    assert not _linkable(ctx, window, universe, (1,), frozenset({1}), frozenset())
    assert not _linkable(ctx, window, universe, (2,), frozenset(), frozenset({3}))
    assert _linkable(ctx, window, universe, (1,), frozenset(), frozenset({2}))
    assert _linkable(ctx, window, universe, (2,), frozenset({2}), frozenset())
    bounded = Window(cover=window.cover, available=window.available,
                     resident=frozenset({1}), handoff=frozenset({3}))
    assert _linkable(ctx, bounded, universe, (1,), frozenset({1}), frozenset())
    assert _linkable(ctx, bounded, universe, (2,), frozenset(), frozenset({3}))


@given(sizes=st.lists(st.integers(1, 6), min_size=2, max_size=30),
       size=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_a_window_holds_its_size_wherever_it_starts(sizes, size, seed):
    """A window starting near the schedule's end grows backwards: it holds at least
    ``size`` ops (or the whole schedule) and at least two subgraphs, and one subgraph less
    at one end or the other holds fewer than ``size``."""
    schedule = [Variant(tuple(range(n)), frozenset(), frozenset(), frozenset(), frozenset(),
                        Fraction(1), None) for n in sizes]
    a, b = _pick_window(schedule, size, random.Random(seed))
    ops = sum(sizes[a:b])
    assert 0 <= a < b <= len(sizes) and b - a >= 2
    assert ops >= min(size, sum(sizes))
    shorter = [sum(sizes[a + 1:b]), sum(sizes[a:b - 1])]  # one subgraph less at either end
    assert b - a == 2 or min(shorter) < size


@dataclass
class WindowRun:
    """What a search with stubbed windows did (``windows_answered``)."""

    sizes: list[int] = field(default_factory=list)  # asked of each window picked
    picks: list[tuple[int, int]] = field(default_factory=list)  # (start, end)
    solved: list[tuple[int, int]] = field(default_factory=list)  # those solved
    seconds: list[float] = field(default_factory=list)  # each solved one was given
    timed: list[int] = field(default_factory=list)  # earlier tries each was timed with
    relinked: list[float] = field(default_factory=list)  # seconds the relinking was given


def windows_answered(monkeypatch, answer) -> tuple[SearchResult, WindowRun]:
    """A search of ``gen-residual-07`` (53 ops: windows of 6, 12, 24 and 48 at least) with
    a far deadline, whose windows ``answer(inside, a)`` gives (``a``: where the window
    starts), no path before them and a relinking that returns its schedule: its result and
    what it did."""
    raw = dict(suite())["gen-residual-07"]
    ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost="per_op"))
    run = WindowRun()
    pick, window_time = cpsat_module._pick_window, cpsat_module._window_time

    def picked(schedule, size, rng):
        run.sizes.append(size)
        run.picks.append(pick(schedule, size, rng))
        return run.picks[-1]

    def timing(reach, tries, left):
        run.timed.append(tries)
        return window_time(reach, tries, left)

    def solve(ctx, window, sets, inside, deadline, *args, **kwargs):
        run.seconds.append(deadline - time.monotonic())
        run.solved.append(run.picks[-1])
        return answer(inside, run.picks[-1][0])

    def relink(ctx, schedule, deadline, *args, **kwargs):
        run.relinked.append(deadline - time.monotonic())
        return list(schedule)

    monkeypatch.setattr(cpsat_module, "_pick_window", picked)
    monkeypatch.setattr(cpsat_module, "_window_time", timing)
    monkeypatch.setattr(cpsat_module, "_solve_window", solve)
    monkeypatch.setattr(cpsat_module, "_levels", lambda *args: None)
    monkeypatch.setattr(cpsat_module, "relink", relink)
    return cpsat_search(ctx, time.monotonic() + 600), run


def test_spent_windows_give_way_to_wider_longer_ones_then_to_relinking(monkeypatch):
    """When a round of windows (twice as many as the schedule has subgraphs) improves
    nothing, the next round's windows hold twice the ops and get twice the time; once the
    smallest would hold the whole graph, the search goes on to relinking, long before its
    deadline. Windows here never improve (they answer nothing at once), so the schedule
    never changes and one freeing the same stretch as an earlier one gets twice that one's
    time (up to ``RETRY_DOUBLINGS`` times; the deadline is far enough for
    ``RETRY_SHARE`` not to bind)."""
    found, run = windows_answered(monkeypatch, lambda inside, a: (None, False))
    per_round = 2 * len(found.schedule)
    assert found.windows == 4 * per_round + 1 and len(run.solved) == 4 * per_round
    earlier = [run.solved[:i].count(window) for i, window in enumerate(run.solved)]
    assert any(earlier)  # some windows came round again
    for reach in range(4):
        this_round = slice(reach * per_round, (reach + 1) * per_round)
        assert all(size >= cpsat_module.WINDOW_OPS[0] << reach for size in run.sizes[this_round])
        assert all(size <= cpsat_module.WINDOW_OPS[1] << reach for size in run.sizes[this_round])
        for s, tries in zip(run.seconds[this_round], earlier[this_round], strict=True):
            # 0.3, 0.6, 1.2, 2.4 on a first try, twice as much on each of up to three more
            seconds = cpsat_module.WINDOW_S * (1 << reach) \
                * (1 << min(tries, cpsat_module.RETRY_DOUBLINGS))
            assert seconds - 0.2 < s <= seconds
    assert len(run.relinked) == 1 and run.relinked[0] > 400


def test_a_window_tried_again_gets_longer_up_to_a_share_of_what_is_left():
    """A window's time: ``WINDOW_S`` doubled per reach and per earlier try without a gain
    (at most ``RETRY_DOUBLINGS`` times), no more than ``RETRY_SHARE`` of the loop's time
    left unless that is less than a first try's."""
    first = cpsat_module.WINDOW_S
    assert _window_time(0, 0, 100.0) == pytest.approx(first)
    assert _window_time(2, 0, 100.0) == pytest.approx(4 * first)
    assert [_window_time(0, tries, 100.0) for tries in range(1, 6)] == pytest.approx(
        [2 * first, 4 * first, 8 * first, 8 * first, 8 * first])
    assert _window_time(1, 1, 100.0) == pytest.approx(4 * first)
    assert _window_time(0, 3, 4.0) == pytest.approx(cpsat_module.RETRY_SHARE * 4.0)
    assert _window_time(0, 3, 0.4) == pytest.approx(first)  # never less than a first try
    assert _window_time(0, 0, 0.4) == pytest.approx(first)  # a first try is not capped


def test_a_window_proven_optimal_as_it_stands_is_not_solved_again(monkeypatch):
    """Windows never improve here, so the schedule never changes; those starting at an even
    position are proven optimal, the others find nothing. A proven one is skipped when it
    comes round again and counts as spent; each other one is asked again with one more
    earlier try than the last time it was asked."""
    found, run = windows_answered(monkeypatch, lambda inside, a: (list(inside), a % 2 == 0))
    proven = [w for w in run.solved if w[0] % 2 == 0]
    assert len(proven) == len(set(proven)) > 0  # each solved once
    assert len(run.picks) > len(run.solved)  # the rest were skipped
    assert len(run.picks) == 4 * 2 * len(found.schedule)  # four rounds, skips in them
    assert found.windows == len(run.solved) + 1
    for i, window in enumerate(run.solved):
        assert run.timed[i] == (0 if window[0] % 2 == 0 else run.solved[:i].count(window))


def test_a_window_whose_optimum_the_evaluator_refuses_is_tried_again(monkeypatch):
    """A model's optimum faster than the incumbent that the evaluator refuses (here: no
    subgraph at all) proves nothing of the incumbent: the window is tried again, with more
    time, and never skipped."""
    _, run = windows_answered(monkeypatch, lambda inside, a: ([], True))
    assert run.picks == run.solved
    assert any(run.timed)
    for i, window in enumerate(run.solved):
        assert run.timed[i] == run.solved[:i].count(window)


def test_relinking_retains_what_greedy_sends_through_slow_memory_on_benchmark_13():
    """Greedy runs some ``x_i @ W0`` (4,096 x 128 result) away from the ``@ W1 @ V_i``
    that reads it, so the result is written and loaded back (10,485.76 each way); windows
    free only neighbouring subgraphs. Reordering and relinking greedy's own op sets over
    the whole graph puts each producer just before its reader and retains the result:
    16,385,638.4 -> 16,284,057.6, 0.06% above the cover bound (16,273,899.52)."""
    raw = json.loads((MLSYS / "benchmarks" / "mlsys-2026-13.json").read_text())
    ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost="per_op"), every_tile=True)
    schedule = as_variants(ctx, greedy(ScoringContext(ctx.graph, ctx.rules)))
    assert total(schedule) == Fraction("16385638.4")
    found = relink(ctx, schedule, time.monotonic() + 10, 0, 1)
    assert_valid(ctx, found)
    assert total(found) <= Fraction("16284057.6")


@pytest.mark.parametrize("mode", MODES)
@QUICK
@given(raw=problems(max_ops=5))
def test_the_path_over_the_smallest_op_sets_is_valid_and_no_slower_than_its_start(raw, mode):
    """``_levels`` from greedy's schedule, run whatever the size of its op sets: a
    schedule the evaluator accepts at the total it claims, never above greedy's (whose
    variants it runs over). As shipped, it does not run where no op set reaches
    ``LEVELS_LEAST_OPS`` ops."""
    ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost=mode), every_tile=True)
    start = as_variants(ctx, greedy(ctx))
    apart = never_together(ctx)
    with patch.object(cpsat_module, "LEVELS_LEAST_OPS", 1):
        found = _levels(ctx, start, apart, time.monotonic() + 60)
    assert found is not None
    assert_valid(ctx, found)
    assert total(found) <= total(start)
    if ctx.problem.num_ops < LEVELS_LEAST_OPS:
        assert _levels(ctx, start, apart, time.monotonic() + 60) is None


def test_the_path_over_the_smallest_op_sets_fuses_what_windows_miss_on_a_fork_join():
    """``gen-forkjoin-04`` ``per_op`` (19 ops, tight capacity): from greedy's 16,906.72,
    the path over its 622 op sets of up to six ops, scored lazily, reaches 14,513.815, what
    scoring every variant of them gives (``benchmarks/path_oracle.py --budget 700``, 68 s):
    a six-op subgraph keeps a tensor for a five-op one. Windows of a 10-s solve stayed at
    15,262.195."""
    raw = dict(suite())["gen-forkjoin-04"]
    ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost="per_op"), every_tile=True)
    start = as_variants(ctx, greedy(ctx))
    assert total(start) == Fraction("16906.72")
    found = _levels(ctx, start, never_together(ctx), time.monotonic() + 60)
    assert found is not None
    assert_valid(ctx, found)
    assert total(found) == Fraction("14513.815")


def test_relinking_may_cut_a_subgraph_in_two_along_its_op_order():
    """Relinking offers each subgraph's two halves at every cut of its (topological) op
    order, so an op fused with a far subgraph can leave it; a half that is not connected
    (S2.4: ops 0 and 1 both feed op 2 and nothing else joins them) is not offered."""
    raw = {"widths": [128] * 5, "heights": [128] * 5, "inputs": [[0], [2], [1, 3]],
           "outputs": [[1], [3], [4]], "base_costs": [100, 100, 100],
           "op_types": ["Pointwise"] * 3, "fast_memory_capacity": 100_000,
           "slow_memory_bandwidth": 10, "native_granularity": [128, 128]}
    ctx = ScoringContext(parse_problem(raw))
    assert halves(ctx.graph, [(0, 1, 2)]) == {(0,), (1, 2), (2,)}


def test_ample_capacity_fork_join_runs_as_one_subgraph_at_its_compute():
    """``FORK_JOIN_IN_ONE``: greedy's three subgraphs merge into one whose latency is the
    ops' compute, the problem's lower bound, so the search proves it optimal. The pool
    (merges of subgraphs that exchange a tensor) finds it in a fraction of a second; the
    whole-graph model alone had not, in 60 s."""
    ctx, found = search(FORK_JOIN_IN_ONE, "per_op", seconds=10)
    assert total(as_variants(ctx, greedy(ctx))) == Fraction("65242.88")
    assert_valid(ctx, found.schedule)
    assert total(found.schedule) == 4 * (11 * 800 + 2 * 1500 + 2 * 2000)
    assert found.optimal


@QUICK
@given(data=st.data())
def test_link_count_matches_the_links_the_model_builds(data):
    """``LinkCount`` (which caps the model's size) counts exactly the retention links
    ``build_model`` makes, window boundaries and copies included."""
    sets = st.sampled_from([frozenset(), frozenset({5}), frozenset({6}), frozenset({5, 6})])
    window = Window(cover=frozenset({0}), available=frozenset(), resident=data.draw(sets),
                    handoff=data.draw(sets))
    kinds = data.draw(st.lists(st.tuples(sets, sets, st.integers(1, 3)), max_size=12))
    count = LinkCount(window)
    variants = []
    for r_in, r_out, copies in kinds:
        count.add(r_in, r_out, copies)
        variants += [Variant((0,), r_in, r_out, frozenset(), frozenset(), Fraction(1), None)
                     ] * copies
    if not variants:
        variants = [Variant((0,), frozenset(), frozenset(), frozenset(), frozenset(),
                            Fraction(1), None)]
    _, mv = build_model(window, variants, Fraction(1))
    assert count.total == len(mv.links)
