"""The fast scorer against the literal simulation, and the search's floors against both."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.fusion import parse_problem
from solver.deadline import now
from solver.fusion import score as score_module
from solver.fusion.closed_form import plan_of, templates_of
from solver.fusion.evaluate import evaluate
from solver.fusion.floors import (
    firing_floors,
    first_step_floor,
    kept_by_last_step,
    least_first_step,
    load_floor,
)
from solver.fusion.problem import (
    FusionGraph,
    Rules,
    axis_candidates,
    legal_granularities,
    prologue_issue,
)
from solver.fusion.schedule import Planned, to_solution
from solver.fusion.score import (
    ScoringContext,
    ScoringTimeout,
    best_config,
    score_subgraph,
    tile_order,
)
from solver.fusion.simulate import NAMED_ORDERS, simulate
from tests.conftest import MATMUL_CHAIN, MLSYS, SINGLE_MATMUL
from tests.fusion_cases import FITS_ONLY_AT_A_DEEPER_K, shared_operand_cases, subgraph_cases

RULES = [Rules(), Rules(reduction_cost="per_op", epilogue_step="first", retained_output_ws="slice")]
HYPOTHESIS = settings(max_examples=120, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def reference(g, ops, gran, traversal, retained_in, retained_out, rules):
    ntr, ntc = g.shape(ops).grid(gran[0], gran[1])
    return simulate(g, g.shape(ops), gran, tile_order(traversal, ntr, ntc), retained_in,
                    retained_out, rules)


def assert_scorer_matches_reference(case, rules):
    g, ops, gran, traversal, retained_in, retained_out = case
    ctx = ScoringContext(g, rules)
    fast = score_subgraph(ctx, ops, gran, traversal, retained_in, retained_out)
    trace = reference(g, ops, gran, traversal, retained_in, retained_out, rules)
    assert (fast.latency, fast.ws_peak) == (trace.latency, trace.ws_peak)
    assert fast.fits == (trace.first_overflow is None)
    assert trace.fired == set(ops)  # S10.4 always holds (see evaluate.py)


@pytest.mark.parametrize("rules", RULES, ids=["defaults", "alternatives"])
@HYPOTHESIS
@given(case=subgraph_cases())
def test_scorer_equals_reference_on_random_subgraphs(case, rules):
    assert_scorer_matches_reference(case, rules)


@pytest.mark.parametrize("rules", RULES, ids=["defaults", "alternatives"])
@HYPOTHESIS
@given(case=shared_operand_cases())
def test_scorer_equals_reference_where_slices_may_coincide(case, rules):
    assert_scorer_matches_reference(case, rules)


def test_coincidence_cases_are_generated():
    """The second family really exercises prone axes (tile and k-step ranges that meet)."""
    found = []

    @settings(max_examples=40, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(case=shared_operand_cases())
    def collect(case):
        g, ops, gran, *_ = case
        plan = plan_of(ScoringContext(g), ops, gran)
        found.append(plan.prone_rows or plan.prone_cols)

    collect()
    assert sum(found) >= len(found) // 4


@HYPOTHESIS
@given(case=subgraph_cases())
def test_search_floors_never_exceed_the_truth(case):
    """best_config prunes with floors; they must be lower bounds, or it could miss the best."""
    g, ops, gran, traversal, retained_in, retained_out = case
    ctx = ScoringContext(g)
    shape = g.shape(ops)
    templates = templates_of(ctx, ops)
    trace = reference(g, ops, gran, traversal, retained_in, retained_out, ctx.rules)
    compute = sum(max(fl, 0) for fl in firing_floors(ctx, templates, gran).values())
    written = sum(g.size(t) for t in shape.outputs if t not in retained_out)
    loads = load_floor(ctx, templates, gran, retained_in)
    trace_units = trace.latency * ctx.unit
    assert compute <= trace_units
    assert (loads + written) * ctx.per_element <= trace_units
    first = reference(g, ops, gran, traversal, retained_in, retained_out, ctx.rules)
    held = sum(g.size(t) for t in retained_in)
    floor = held + first_step_floor(ctx, templates, gran, retained_in, retained_out)
    # the floor is of tile 0's first step, which every order visits (raster and snake, the
    # searched orders, start there): so no order that breaks it can fit, custom ones included
    ws_first = simulate(g, shape, gran, [0], retained_in, retained_out, ctx.rules,
                        record=True).steps[0].working_set
    assert floor <= ws_first
    assert floor <= trace.ws_peak
    # best_config and pricing rule a subgraph out when no granularity's first step fits
    assert held + least_first_step(ctx, templates, retained_in, retained_out) <= floor
    # ... and best_config when what it retains cannot all be whole in its last step
    assert held + kept_by_last_step(ctx, retained_out & shape.produced) <= trace.ws_peak
    assert first.latency == trace.latency


@pytest.mark.parametrize("problem", [MATMUL_CHAIN, SINGLE_MATMUL])
def test_best_config_is_the_best_legal_candidate(problem):
    """Exhaustive check on the examples: no legal candidate that fits is faster, and ties
    go to the larger tile."""
    g = FusionGraph(parse_problem(problem))
    ctx = ScoringContext(g)
    for ops in [(q,) for q in range(problem and g.problem.num_ops)] + [g.topological_order]:
        best = best_config(ctx, ops)
        scores = [(score_subgraph(ctx, ops, gran, trav), gran)
                  for gran in legal_granularities(g, g.shape(ops))
                  for trav in NAMED_ORDERS]
        fitting = [(s.latency, -gran[0] * gran[1]) for s, gran in scores if s.fits]
        assert best is not None and (best.latency, -best.gran[0] * best.gran[1]) == min(fitting)


def test_an_output_too_large_to_gather_whole_is_not_retained(monkeypatch):
    """A 256 x 256 Pointwise output (65,536) under a 20,000 capacity: its 64 x 64 tiles fit,
    but retained under the accumulate rule it is whole by the last step, so no granularity
    fits (every one scored agrees) and ``best_config`` says so before scoring any (the
    greedy's retention pass had scored every candidate of every such op set)."""
    problem = {"widths": [256, 256], "heights": [256, 256], "inputs": [[0]], "outputs": [[1]],
               "base_costs": [100], "op_types": ["Pointwise"], "fast_memory_capacity": 20000,
               "slow_memory_bandwidth": 10, "native_granularity": [128, 128]}
    g = FusionGraph(parse_problem(problem))
    ctx = ScoringContext(g)
    assert best_config(ctx, (0,)) is not None
    assert not any(score_subgraph(ctx, (0,), gran, "raster", (), {1}).fits
                   for gran in legal_granularities(g, g.shape((0,))))

    def unexpected(*_args):
        raise AssertionError("scored a candidate")

    monkeypatch.setattr(score_module, "_score", unexpected)
    assert best_config(ScoringContext(g), (0,), (), {1}) is None


@HYPOTHESIS
@given(case=subgraph_cases(), slack=st.sampled_from([-1, 0, 1, None]))
def test_a_search_capped_at_a_latency_finds_the_best_or_proves_it_slower(case, slack):
    """``at_most`` only stops the search sooner: a fresh context capped just below, at or
    above the best (one latency unit either way) returns the uncapped config when it is
    within the cap and None otherwise, and a capped miss does not stick."""
    g, ops, _, _, retained_in, retained_out = case
    best = best_config(ScoringContext(g), ops, retained_in, retained_out)
    ctx = ScoringContext(g)
    cap = Fraction(10**9) if best is None or slack is None \
        else best.latency + Fraction(slack, ctx.unit)
    capped = best_config(ctx, ops, retained_in, retained_out, at_most=cap)
    assert capped == (best if best is not None and best.latency <= cap else None)
    assert best_config(ctx, ops, retained_in, retained_out) == best


def test_a_subgraph_that_fits_only_at_a_deeper_k_gets_a_config():
    """``FITS_ONLY_AT_A_DEEPER_K``: nothing fits at 1 x 1 x 1, a run at 1 x 1 x 4 does; the
    search had ruled the subgraph out on the 1 x 1 x 1 first step alone."""
    ctx = ScoringContext(parse_problem(FITS_ONLY_AT_A_DEEPER_K))
    ops, resident = (3, 4, 5, 6), {2, 4, 6}
    assert not score_subgraph(ctx, ops, (1, 1, 1), "raster", resident, ()).fits
    found = best_config(ctx, ops, resident)
    assert found is not None and found.gran[2] == 4
    assert score_subgraph(ctx, ops, found.gran, found.traversal, resident, ()).fits


def test_example_4_snake_beats_raster_and_the_search_finds_better_still():
    """PROBLEM.md Example 4 at 64x64x128: raster 7,096, snake 6,548. The search also tries
    k < 128, where a whole 128x128 tile fits (128x32 + 32x128 + 128x128 = 24,576 <= 25,000):
    three k-steps of 819.2 and a last one of 819.2 + 1,638.4, 4,915.2 in all."""
    ctx = ScoringContext(parse_problem(SINGLE_MATMUL))
    assert score_subgraph(ctx, (0,), (64, 64, 128), "raster").latency == 7096
    assert score_subgraph(ctx, (0,), (64, 64, 128), "snake").latency == 6548
    best = best_config(ctx, (0,))
    assert (best.gran, best.latency, best.ws_peak) == ((128, 128, 32), Fraction(24576, 5), 24576)


# A tall MatMul (256 x 256 output, K = 128) on a native 128-wide, 64-high tile: at
# w = 128, h = 64 the grid is 4 rows x 2 columns, one step per tile, memory-bound (B = 1).
TALL_TILES = {
    "widths": [128, 256, 256], "heights": [256, 128, 256], "inputs": [[0, 1]],
    "outputs": [[2]], "base_costs": [1], "op_types": ["MatMul"],
    "fast_memory_capacity": 10**6, "slow_memory_bandwidth": 1, "native_granularity": [128, 64],
}


def test_a_column_order_keeps_the_wider_strip_and_wins():
    """Per tile: LHS strip 64x128 = 8,192, RHS strip 128x128 = 16,384, output 8,192.
    Raster reloads the RHS strip on every tile: 4 rows x (32,768 + 24,576) = 229,376.
    Snake keeps one RHS strip at each row turn: 57,344 + 3 x 40,960 = 180,224.
    Column keeps the RHS strip down a column: 2 x (32,768 + 3 x 16,384) = 163,840.
    Column snake also keeps the LHS strip at the turn: 81,920 + 24,576 + 3 x 16,384 =
    155,648. The search finds it, and the evaluator's literal simulation agrees."""
    ctx = ScoringContext(parse_problem(TALL_TILES))
    expected = {"raster": 229376, "snake": 180224, "column": 163840, "column_snake": 155648}
    for traversal, latency in expected.items():
        assert score_subgraph(ctx, (0,), (128, 64, 128), traversal).latency == latency
    best = best_config(ctx, (0,))
    assert best is not None and (best.traversal, best.latency) == ("column_snake", 155648)
    solution = to_solution(ctx, [Planned((0,), best)])
    assert solution.traversal_orders == [[0, 2, 4, 6, 7, 5, 3, 1]]
    for engine in ("fast", "reference"):
        result = evaluate(ctx.graph, solution, engine=engine)
        assert result.valid and result.total == 155648


def test_legal_granularities_respect_native_k_and_the_prologue_rule():
    prologue = {
        "widths": [256, 256, 128, 128], "heights": [128, 128, 256, 128],
        "inputs": [[0], [1, 2]], "outputs": [[1], [3]], "base_costs": [1, 1],
        "op_types": ["Pointwise", "MatMul"], "fast_memory_capacity": 10**6,
        "slow_memory_bandwidth": 1, "native_granularity": [128, 128]}
    g = FusionGraph(parse_problem(prologue))
    shape = g.shape((0, 1))
    grans = legal_granularities(g, shape)
    # K = 256 > native k: every k splits, so the Pointwise-fed LHS needs w >= 256: impossible
    assert grans == []
    assert prologue_issue(g, shape, (128, 128, 128)) is not None
    alone = legal_granularities(g, g.shape((1,)))
    assert {k for _, _, k in alone} == {1, 2, 4, 8, 16, 32, 64, 128}
    axis = [128, 64, 32, 16, 8, 4, 2, 1]
    assert legal_granularities(g, g.shape((0,))) == [(w, h, 1) for w in axis for h in axis]


# A MatMul (K = 128) and its Pointwise epilogue on a 256 x 256 output, capacity 30,000.
JUST_FITS = {
    "widths": [128, 256, 256, 256], "heights": [256, 128, 256, 256],
    "inputs": [[0, 1], [2]], "outputs": [[2], [3]], "base_costs": [1000, 100],
    "op_types": ["MatMul", "Pointwise"], "fast_memory_capacity": 30000,
    "slow_memory_bandwidth": 10, "native_granularity": [128, 128],
}


def test_every_tile_finds_the_tile_that_just_fits_with_a_whole_k():
    """With the whole K in one step, a 128-wide tile holds LHS h x 128, RHS 128 x 128 and
    its output h x 128: 256h + 16,384 <= 30,000 allows h = 53, no power of two above 32.
    At 128 x 53 x 128 the grid is 5 rows (4 x 53 + 44) by 2 columns, every step is
    memory-bound (1,100 compute against at least 1,356.8), and column snake loads each RHS
    column strip once (2 x 16,384), the LHS whole down the first column (32,768) and again
    up the second but for the row kept at the turn (32,768 - 44 x 128), and writes the
    65,536 outputs: 158,208 / 10 = 15,820.8, against 19,660.8 for the best power of two."""
    problem = parse_problem(JUST_FITS)
    plain = best_config(ScoringContext(problem), (0, 1))
    ctx = ScoringContext(problem, every_tile=True)
    wide = best_config(ctx, (0, 1))
    assert plain is not None and plain.latency == Fraction(98304, 5)
    assert wide is not None and (wide.gran, wide.traversal) == ((128, 53, 128), "column_snake")
    assert (wide.latency, wide.ws_peak) == (Fraction(158208, 10), 29952)
    result = evaluate(ctx.graph, to_solution(ctx, [Planned((0, 1), wide)]), engine="reference")
    assert result.valid and result.total == wide.latency


def test_every_tile_narrows_past_candidates_with_no_tile_that_fits():
    """A 128 x 128 output tile alone (16,384) overflows 15,000, so the cheapest candidates
    (128 x 128 at every k) have no tile within half of them that fits, and narrowing them
    must not use up the search's narrowings: the best tile comes from 128 x 128 x 16 cut to
    w = 89 (LHS 128 x 16 + RHS 16 x 89 + output 128 x 89 = 14,864; w = 90 needs 15,008).
    By hand, MatMul 256^3 + Pointwise epilogue, ``per_native_k``: 2 x 3 tiles (89, 89, 78
    wide), 16 k-steps each at 375 compute (3,000 x 16/128), more than the 347.2 they load;
    the last step also runs the Pointwise (500) and writes the tile, memory-bound:
    347.2 + 1,139.2 = 1,486.4 (329.6 + 998.4 = 1,328 for the 78-wide tile). Per row
    2 x (15 x 375 + 1,486.4) + (15 x 375 + 1,328) = 21,175.8; in all 42,351.6, where the
    best power of two (128 x 64 x 32, padding half of every native tile) costs 53,468.8."""
    raw = json.loads((MLSYS / "benchmarks" / "mlsys-2026-3.json").read_text())
    problem = parse_problem(raw | {"fast_memory_capacity": 15000})  # half of benchmark 3's
    plain = best_config(ScoringContext(problem), (0, 1))
    wide = best_config(ScoringContext(problem, every_tile=True), (0, 1))
    assert plain is not None and plain.latency == Fraction(534688, 10)
    assert wide is not None and wide.latency == Fraction(423516, 10)
    w, h, k = wide.gran  # the square problem ties rows and columns: 128 x 89 costs the same
    assert k == 16 and 128 in (w, h) and 86 <= min(w, h) <= 89  # any of 86-89 cuts 3 strips


RAGGED_ROWS = {
    "widths": [1024, 256, 256], "heights": [784, 1024, 784],
    "inputs": [[0, 1]], "outputs": [[2]], "base_costs": [1000], "op_types": ["MatMul"],
    "fast_memory_capacity": 200000, "slow_memory_bandwidth": 25,
    "native_granularity": [128, 128]}


def test_balanced_twins_join_the_axis_candidates_only_when_asked():
    """784 in pieces of at most 128 takes 7, of 112 each; an extent the cap divides, or
    one below the native size (the cap is the extent), gains nothing."""
    assert axis_candidates(128, 784) == [128, 64, 32, 16, 8, 4, 2, 1]
    assert axis_candidates(128, 784, balanced=True) == [128, 112, 64, 32, 16, 8, 4, 2, 1]
    assert axis_candidates(128, 200, balanced=True) == [128, 100, 64, 32, 16, 8, 4, 2, 1]
    assert axis_candidates(128, 512, balanced=True) == axis_candidates(128, 512)
    assert axis_candidates(128, 100, balanced=True) == axis_candidates(128, 100)


def test_every_tile_evens_out_a_ragged_last_row_of_tiles():
    """784 x 1,024 @ 1,024 x 256, ``per_native_k``, bandwidth 25: every k-step (8 per tile,
    no slice reused: each has another k-range, and a tile's first follows another's last)
    computes one native tile's 1,000. In 128-row tiles (6 whole rows and one of 16) a whole
    step loads 32,768 elements (1,310.72) and a tile's last also writes 16,384 (655.36):
    12 x (8 x 1,310.72 + 655.36) = 133,693.44; the 16-row tiles load 18,432 and write 2,048,
    below the compute, so 2 x 8 x 1,000. In all 149,693.44. In 112-row tiles (7 even
    rows) a step loads 30,720 (1,228.8) and a tile writes 14,336 (573.44): 14 x (8 x
    1,228.8 + 573.44) = 145,653.76."""
    problem = parse_problem(RAGGED_ROWS)
    plain = best_config(ScoringContext(problem), (0,))
    ctx = ScoringContext(problem, every_tile=True)
    even = best_config(ctx, (0,))
    assert plain is not None and (plain.gran, plain.latency) == ((128, 128, 128),
                                                                 Fraction("149693.44"))
    assert even is not None and (even.gran, even.latency) == ((128, 112, 128),
                                                              Fraction("145653.76"))
    result = evaluate(ctx.graph, to_solution(ctx, [Planned((0,), even)]), engine="reference")
    assert result.valid and result.total == even.latency


@HYPOTHESIS
@given(case=subgraph_cases())
def test_every_tile_search_is_never_worse_and_stays_legal(case):
    """Its tiles are legal (S9, S6.4) and score as the closed form does."""
    g, ops, _, _, retained_in, retained_out = case
    plain = best_config(ScoringContext(g), ops, retained_in, retained_out)
    ctx = ScoringContext(g, every_tile=True)
    wide = best_config(ctx, ops, retained_in, retained_out)
    if plain is not None:
        assert wide is not None and wide.latency <= plain.latency
    if wide is not None:
        w, h, k = wide.gran
        nw, nh, nk = g.native
        assert 1 <= w <= nw and 1 <= h <= nh and 1 <= k <= nk
        assert prologue_issue(g, g.shape(ops), wide.gran) is None
        score = score_subgraph(ctx, ops, wide.gran, wide.traversal, retained_in, retained_out)
        assert score.fits and score.latency == wide.latency


DEEP_MATMULS = {
    "widths": [2048, 2048, 2048, 96, 96, 2048], "heights": [2048] * 6,
    "inputs": [[0, 0], [1, 3], [2, 1]], "outputs": [[1], [4], [5]],
    "base_costs": [2000, 5000, 500], "op_types": ["MatMul"] * 3,
    "fast_memory_capacity": 98_304, "slow_memory_bandwidth": 100,
    "native_granularity": [128, 128]}
"""Three 2,048-deep MatMuls sharing one product, with little room: the narrowed tiles the
search tries (17 x 17 x 4 among them) have tens of thousands of step classes each for the
peak working-set check, 0.5-1.3 s a check; a generated problem's 2-s solve ended 0.3-0.4 s
late there, and scoring this op set to the end takes minutes."""


def test_a_config_search_narrowing_deep_matmuls_stops_at_its_deadline():
    ctx = ScoringContext(parse_problem(DEEP_MATMULS), Rules(), every_tile=True)
    limit = 0.3
    started = now()
    with pytest.raises(ScoringTimeout), ctx.searching_until(started + limit):
        best_config(ctx, (0, 1, 2))
    assert now() - started < limit + 0.25
