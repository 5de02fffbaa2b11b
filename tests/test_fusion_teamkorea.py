"""The TeamKorea reading (``semantics=teamkorea``): their evaluator's verdicts on the
fixtures, hand-computed cases of each rule where it differs from ours, and solves that
search that reading."""

from __future__ import annotations

import json
import random
import time
from fractions import Fraction
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from app.cli import cli
from app.main import create_app
from app.settings import Settings
from models.fusion import parse_problem, parse_solution
from solver.fusion import cpsat, recompute, teamkorea
from solver.fusion.candidates import connected_op_sets
from solver.fusion.cpsat import accepted_whole, as_planned, as_variants, total
from solver.fusion.cpsat_model import Window, frame, recomputes
from solver.fusion.evaluate import evaluate
from solver.fusion.greedy import greedy
from solver.fusion.problem import (
    DEFAULT_RULES,
    FusionGraph,
    exact,
    least_teamkorea_load,
    lower_bounds,
)
from solver.fusion.schedule import Planned, to_solution
from solver.fusion.score import ScoringContext, best_config
from solver.fusion.simulate import NAMED_ORDERS
from solver.fusion.solvers import solve
from solver.fusion.variants import Variant, make_variant, variant
from tests.conftest import MLSYS, POINTWISE_CHAIN, solution
from tests.fusion_cases import (
    QUICK,
    connected_ops,
    detour_problems,
    head_chain_problems,
    problems,
    split_chain_problems,
)

FIXTURES = MLSYS / "teamkorea"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
PUBLISHED = {"1": 322_008, "2": 48_738, "3": 65_982, "5": 492_614, "7": 115_853,
             "9": 20_411_920, "13": 15_297_786, "17": 4_966_400}
"""TeamKorea's published totals (their evaluator, their solver), from the fixtures README;
each is the floor of their evaluator's total."""


def benchmark(number: str):
    return parse_problem(json.loads((MLSYS / "benchmarks" / f"mlsys-2026-{number}.json")
                                    .read_text()))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_fixture_gets_their_evaluators_verdict(name):
    """Validity, error message and total (to 1e-6) of each of the 32 schedules, with the
    claimed latencies zeroed as the fixtures were taken."""
    doc = json.loads((FIXTURES / "solutions" / f"{name}.json").read_text())
    doc["subgraph_latencies"] = [0.0] * len(doc["subgraphs"])
    verdict = evaluate(benchmark(name.split(".")[0]), parse_solution(doc),
                       semantics="teamkorea")
    expected = EXPECTED[name]
    assert verdict.valid == expected["valid"]
    assert (verdict.error.msg if verdict.error else None) == expected["error"]
    if expected["valid"]:
        assert float(verdict.total) == pytest.approx(expected["total_latency"], rel=1e-9)


def matmul(k: int, capacity: int = 10**6) -> dict:
    """One MatMul of a 128 x ``k`` LHS and a ``k`` x 128 RHS, base cost 1000, bandwidth 10."""
    return {"widths": [k, 128, 128], "heights": [128, k, 128], "inputs": [[0, 1]],
            "outputs": [[2]], "base_costs": [1000], "op_types": ["MatMul"],
            "fast_memory_capacity": capacity, "slow_memory_bandwidth": 10,
            "native_granularity": [128, 128]}


def tk(problem: dict, subgraphs, grans, **kw):
    return evaluate(parse_problem(problem), parse_solution(solution(subgraphs, grans, **kw)),
                    semantics="teamkorea")


def test_k_may_reach_the_whole_reduction():
    """K = 256 at k = 256: one k-step costing the whole base cost (k/K = 1) and moving
    both 128 x 256 strips and the 128 x 128 output: max(1000, 81,920 / 10) = 8,192. At
    k = 128: 3,276.8 (32,768 loaded) + 4,915.2 (32,768 loaded + 16,384 written) = 8,192.
    Our reading refuses k above native (128)."""
    whole = tk(matmul(256), [[0]], [[128, 128, 256]])
    assert whole.valid and whole.total == Fraction(8192)
    halves = tk(matmul(256), [[0]], [[128, 128, 128]])
    assert halves.total == Fraction(8192)
    ours = evaluate(parse_problem(matmul(256)), parse_solution(solution([[0]],
                                                                        [[128, 128, 256]])))
    assert not ours.valid


def test_working_set_counts_a_buffer_per_input_position():
    """A Pointwise op reading tensor 0 twice holds two 128 x 128 input buffers and its
    output: 49,152 > 40,960, while our reading counts tensor 0 once (32,768 fits)."""
    problem = {**POINTWISE_CHAIN, "inputs": [[0, 0], [1]], "fast_memory_capacity": 40960}
    verdict = tk(problem, [[0], [1]], [[128, 128, 1], [128, 128, 1]])
    assert verdict.error.msg == ("RESOURCE_EXHAUSTED: Subgraph 0: working set 49152 exceeds "
                                 "capacity 40960")
    assert evaluate(parse_problem(problem), parse_solution(solution(
        [[0], [1]], [[128, 128, 1], [128, 128, 1]]))).valid


def test_split_k_refuses_two_standalone_matmuls_and_one_k_step_does_not():
    """Two MatMuls sharing only their LHS (no chain, not connected: allowed here) split
    over K = 256 at k = 128 are refused; at k = 256 they run, each costing its base cost
    once per tile: compute 2,000, loads 128x256 + 2 x 256x128, writes 2 x 128x128:
    131,072 / 10 = 13,107.2."""
    problem = {"widths": [256, 128, 128, 128, 128], "heights": [128, 256, 256, 128, 128],
               "inputs": [[0, 1], [0, 2]], "outputs": [[3], [4]],
               "base_costs": [1000, 1000], "op_types": ["MatMul", "MatMul"],
               "fast_memory_capacity": 10**6, "slow_memory_bandwidth": 10,
               "native_granularity": [128, 128]}
    split = tk(problem, [[0, 1]], [[128, 128, 128]])
    assert split.error.msg == ("INVALID_ARGUMENT: Two MMs without chain not allowed with "
                               "split-K")
    whole = tk(problem, [[0, 1]], [[128, 128, 256]])
    assert whole.valid and whole.total == Fraction(131_072, 10)


def test_a_graph_output_cannot_be_retained_and_a_claim_of_zero_is_not_a_claim():
    problem = parse_problem(POINTWISE_CHAIN)
    retained = evaluate(problem, parse_solution(solution([[0, 1]], [[128, 128, 1]], [[2]])),
                        semantics="teamkorea")
    assert "which is a graph output" in retained.error.msg
    claimed = evaluate(problem, parse_solution(solution([[0, 1]], [[128, 128, 1]],
                                                        latencies=[0.0])),
                       semantics="teamkorea")
    assert claimed.valid and claimed.claimed_match
    wrong = evaluate(problem, parse_solution(solution([[0, 1]], [[128, 128, 1]],
                                                      latencies=[1.0])),
                     semantics="teamkorea", strict=True)
    assert "does not match computed" in wrong.error.msg


def brute_force(g: FusionGraph, sg: teamkorea.Subgraph, gran, order, resident, grid):
    """Every tile simulated in turn with one cache: the definition ``latency`` shortcuts."""
    p = g.problem
    bandwidth = Fraction(p.slow_memory_bandwidth)
    columns = -(-grid[0] // gran[0])
    loaded: dict = {}
    total = Fraction(0)
    for idx in order:
        row, col = divmod(idx, columns)
        extent = (min(gran[0], grid[0] - col * gran[0]), min(gran[1], grid[1] - row * gran[1]))
        every_step = range(sg.k_steps(gran[2]))
        for step, moved in enumerate(teamkorea._tile_traffic(g, sg, gran, (row, col), extent,
                                                             resident, loaded, every_step)):
            compute = sum((Fraction(p.base_costs[q]) for q in sg.ops
                           if q not in sg.roles and step == 0), Fraction(0))
            compute += sum((Fraction(p.base_costs[q]) * sg.depth(q, gran[2], step)
                            / sg.reduced_over(q) for q in sg.matmuls), Fraction(0))
            total += max(compute, moved / bandwidth)
    return total


@pytest.mark.parametrize("number", ["1", "5", "9", "13"])
def test_tiles_priced_by_kind_equal_every_tile_simulated(number):
    """``latency`` prices each kind of tile and each class of k-steps once; on random
    subgraphs of the benchmarks, granularities and traversals it equals the tile-by-tile,
    step-by-step simulation."""
    problem = benchmark(number)
    g = FusionGraph(problem)
    rng = random.Random(int(number))
    order = g.topological_order
    for _ in range(6):
        a = rng.randrange(len(order))
        ops = tuple(order[a:a + rng.randint(1, 3)])
        sg = teamkorea.Subgraph(g, ops, frozenset())
        try:
            grid = teamkorea.subgraph_grid(g, sg)
        except teamkorea.Rejected:
            continue
        gran = (rng.choice([37, 64, 128]), rng.choice([50, 128]),
                rng.choice([1, 97, 512, sg.slicing_k or 1]))
        rows, cols = -(-grid[1] // gran[1]), -(-grid[0] // gran[0])
        for name, make in NAMED_ORDERS.items():
            tiles = make(rows, cols)
            kinds = teamkorea.tile_kinds(gran[:2], grid, tiles)
            assert teamkorea.latency(g, sg, gran, kinds, frozenset(), grid) == \
                brute_force(g, sg, gran, tiles, frozenset(), grid), (ops, gran, name)


@pytest.mark.parametrize("grid,tile", [((512, 384), (128, 128)), ((500, 300), (96, 128)),
                                       ((128, 128), (128, 128)), ((1000, 64), (7, 64))])
def test_tiles_of_an_order_fall_into_a_few_classes_that_hold_every_tile(grid, tile):
    """Each tile of an order is in one class (its extent; whether it starts the order,
    stays in the row or the column of the tile before), whose first tile and the tile
    before it ``latency`` prices; the classes count every tile once, a few at most."""
    rows, cols = -(-grid[1] // tile[1]), -(-grid[0] // tile[0])
    for name, make in NAMED_ORDERS.items():
        order = tuple(make(rows, cols))
        kinds = teamkorea.tile_kinds(tile, grid, order)
        assert sum(n for *_, n in kinds) == len(order), name
        assert kinds[0][:2] == (None, divmod(order[0], cols)) and kinds[0][2] == 1
        # two widths, two heights, three moves (along the row, the column, or neither)
        assert all(prior is not None for prior, *_ in kinds[1:]) and len(kinds) <= 2 * 2 * 3 + 1


def test_k_steps_alike_form_classes_with_the_first_and_last_alone():
    g = FusionGraph(benchmark("13"))
    sg = teamkorea.Subgraph(g, (1, 2), frozenset())  # a head-tail pair, K = 4096
    assert teamkorea.step_classes(sg, 4096) == [(0, 1)]
    assert teamkorea.step_classes(sg, 8) == [(0, 1), (1, 510), (511, 1)]
    assert teamkorea.step_classes(sg, 1000) == [(0, 1), (1, 3), (4, 1)]  # last: 96 deep


def test_a_head_tail_pair_over_wide_operands_is_found_at_a_small_k():
    """Benchmark 13's ``x @ W1 @ V`` pair fits at the native tile only at k <= 8 (working
    set 574,464 at k = 8, 608,256 at 16, capacity 600,000; their schedule runs it at
    k = 1): the search halves k until the native tile fits, and prices it as their
    evaluator does their subgraph (346,357.76 with the head's input retained)."""
    problem = benchmark("13")
    ctx = ScoringContext(problem, teamkorea.RULES, semantics="teamkorea")
    config = best_config(ctx, (1, 2), retained_in=(34,))
    assert config is not None
    assert config.gran[:2] == (128, 128) and config.gran[2] <= 8
    assert config.latency == Fraction("346357.76")


@pytest.mark.parametrize("number", ["1", "2", "3", "7", "17"])
def test_solves_under_the_reading_are_valid_there_and_beat_or_match_teamkorea(number):
    """On the public benchmarks our solve under their reading (greedy here, seconds) is
    valid under it and at or below their published total; benchmarks 5, 9 and 13 need
    the search time of ``benchmarks/teamkorea.py``."""
    problem = benchmark(number)
    result = solve(problem, "greedy", time_limit_s=20, semantics="teamkorea")
    assert result.semantics == "teamkorea"
    verdict = evaluate(problem, result.solution, semantics="teamkorea")
    assert verdict.valid
    assert float(verdict.total) == pytest.approx(result.total_latency)
    assert result.total_latency < PUBLISHED[number] + 1


FORK = {  # op 0 makes t1, which ops 1 and 2 each read
    "widths": [128] * 4, "heights": [128] * 4, "inputs": [[0], [1], [1]],
    "outputs": [[1], [2], [3]], "base_costs": [1_000] * 3,
    "op_types": ["Pointwise"] * 3, "fast_memory_capacity": 1_000_000,
    "slow_memory_bandwidth": 10, "native_granularity": [128, 128]}


def test_the_search_keeps_no_schedule_the_reading_refuses_as_a_whole():
    """[0], then [0, 1] (t1 ephemeral), then [2] reading the t1 that the first subgraph
    wrote: SEMANTICS.md accepts it, the teamkorea reading does not (op 2 runs with no copy
    of op 0). Under that reading the search neither keeps nor offers it, though it is
    faster; under SEMANTICS.md it does."""
    problem = parse_problem(FORK)

    def schedule(ctx: ScoringContext, subgraphs: list[tuple[int, ...]]):
        planned = [Planned(ops, best_config(ctx, ops)) for ops in subgraphs]
        return as_variants(ctx, planned)

    refused = [(0,), (0, 1), (2,)]
    for semantics, accepted in (("default", True), ("teamkorea", False)):
        rules = teamkorea.RULES if semantics == "teamkorea" else DEFAULT_RULES
        ctx = ScoringContext(problem, rules, semantics=semantics)
        found, slower = schedule(ctx, refused), schedule(ctx, [(0,), (1,), (2,), (0,)])
        verdict = evaluate(problem, to_solution(ctx, as_planned(found)), rules,
                           semantics=semantics)
        assert verdict.valid is accepted and accepted_whole(ctx, found) is accepted
        assert total(found) < total(slower)
        assert cpsat._better(ctx, found, slower) is accepted


def _fork_variants(ctx: ScoringContext, slow: dict[tuple[int, ...], int]) -> list[Variant]:
    """Plain variants of FORK's op sets, ``slow`` ones at the latency it gives them."""
    found = [make_variant(ctx, ops, frozenset(), frozenset())
             for ops in [(0,), (1,), (2,), (0, 1), (0, 2)]]
    return [variant(ctx, v.ops, v.retained_in, v.retained_out, Fraction(slow[v.ops]), v.config)
            if v.ops in slow else v for v in found]


def _model_answer(ctx: ScoringContext, window: Window, variants: list[Variant],
                  hint: list[int], demands: bool) -> list[tuple[int, ...]]:
    wanted = [recompute.demanded(ctx, v.ops, v.retained_out) if demands else frozenset()
              for v in variants]
    ends = time.monotonic() + 10
    found = cpsat._solve_model(window, variants, hint, ctx.unit, ends, ends, 0, 1, wanted)
    assert found is not None and found[1]
    return [v.ops for v in found[0]]


def test_the_model_runs_an_ephemeral_tensors_outside_consumer_with_its_producer():
    """With op 1 alone slow and no (0, 2) to choose, the fastest cover is [0], [0, 1], [2]
    (t1 ephemeral in [0, 1], op 2 reading the t1 [0] wrote), which the teamkorea reading
    refuses: [0, 1] demands that op 2 run with op 0. The model with its demands answers
    [0], [1], [2] instead; under SEMANTICS.md nothing is demanded."""
    for semantics in ("default", "teamkorea"):
        ctx = ScoringContext(parse_problem(FORK), teamkorea.RULES if semantics == "teamkorea"
                             else DEFAULT_RULES, semantics=semantics)
        variants = _fork_variants(ctx, {(1,): 10_000})[:4]
        assert recompute.demanded(ctx, (0, 1), frozenset()) == (
            {(2, 0)} if semantics == "teamkorea" else set())
        free = _model_answer(ctx, cpsat._whole_graph(ctx), variants, [0, 1, 2], demands=False)
        assert sorted(free) == [(0,), (0, 1), (2,)]
        held = _model_answer(ctx, cpsat._whole_graph(ctx), variants, [0, 1, 2], demands=True)
        assert held == (free if semantics == "default" else [(0,), (1,), (2,)])
        whole = cpsat._whole_graph(ctx)
        assert recomputes(ctx, whole, [v for v in variants if v.ops in held])
        assert recomputes(ctx, whole, [v for v in variants if v.ops in free]) is (
            semantics == "default")


def test_a_window_owes_what_the_subgraphs_around_it_demand():
    """Freeing [0, 2] of [0, 1], [0, 2]: the subgraph left around it, [0, 1], runs op 1
    with op 0 and demands that op 2 run with op 0, which only the window can now do. With
    [0, 2] made slow, [0], [2] is the window's fastest, but under the teamkorea reading the
    model keeps [0, 2], and the path's answer [0], [2] is known refused."""
    for semantics in ("default", "teamkorea"):
        ctx = ScoringContext(parse_problem(FORK), teamkorea.RULES if semantics == "teamkorea"
                             else DEFAULT_RULES, semantics=semantics)
        variants = _fork_variants(ctx, {(0, 2): 10_000})
        incumbent = [variants[3], variants[4]]
        window, inside = frame(ctx, incumbent, 1, 2)
        teamkorea_reading = semantics == "teamkorea"
        assert window.together == ({(1, 0)} if teamkorea_reading else set())
        assert window.owed == ({(2, 0)} if teamkorea_reading else set())
        options = [variants[0], variants[2], variants[4]]
        held = _model_answer(ctx, window, options, [2], demands=True)
        assert held == ([(0, 2)] if teamkorea_reading else [(0,), (2,)])
        assert recomputes(ctx, window, options[:2]) is not teamkorea_reading
        assert recomputes(ctx, window, inside)


@QUICK
@given(raw=detour_problems(max_ops=7), data=st.data())
def test_a_window_answers_only_schedules_the_reading_accepts_whole(raw, data):
    """Freeing any stretch of greedy's schedule of a graph of skips and forks, the window's
    answer (the path's or the model's), put back between the subgraphs around it, is a
    schedule the teamkorea reading accepts whole, at or below greedy's total. (Before the
    rule was in the model, one run of 100 such windows had one answer it refuses; the
    tests above pin that rule on hand-made cases.)"""
    ctx = ScoringContext(parse_problem(raw), teamkorea.RULES, semantics="teamkorea")
    incumbent = as_variants(ctx, greedy(ctx, time.monotonic() + 10))
    assert accepted_whole(ctx, incumbent)
    a = data.draw(st.integers(0, len(incumbent) - 1))
    b = data.draw(st.integers(a + 1, len(incumbent)))
    window, inside = frame(ctx, incumbent, a, b)
    sets = connected_op_sets(ctx.graph, {q for v in inside for q in v.ops}, 600).sets
    found, _ = cpsat._solve_window(ctx, window, sets, inside, time.monotonic() + 10, 0, 1)
    if found is not None:
        joined = incumbent[:a] + found + incumbent[b:]
        assert total(joined) <= total(incumbent)
        assert accepted_whole(ctx, joined)


def test_the_bound_under_the_reading_holds_where_the_default_one_does_not():
    """A Pointwise op on a 512 x 128 tensor feeding a MatMul to 128 x 128, one subgraph:
    under that reading the Pointwise op pays its base once per tile of the 128 x 128 grid
    (11,000 in all), below SEMANTICS.md's compute bound (4 native tiles: 41,000). The
    reading's bound is each op's base once per tile of the least grid its subgraph may have,
    here the MatMul's 128 x 128 output for both (11,000, reached), and the graph output's
    elements plus the least loads of the graph inputs over that grid: tensor 0 a 128 x 128
    tile's area, the RHS 512 deep x 128 wide (K x the grid's width): 98,304 elements.
    """
    problem = parse_problem({
        "widths": [512, 512, 128, 128], "heights": [128, 128, 512, 128],
        "inputs": [[0], [1, 2]], "outputs": [[1], [3]], "base_costs": [10_000, 1_000],
        "op_types": ["Pointwise", "MatMul"], "fast_memory_capacity": 1_000_000,
        "slow_memory_bandwidth": 1_000, "native_granularity": [128, 128]})
    verdict = evaluate(problem, parse_solution(solution([[0, 1]], [[128, 128, 512]])),
                       semantics="teamkorea")
    assert verdict.valid and verdict.total == 11_000
    assert lower_bounds(problem, "per_op").total == 41_000
    reading = lower_bounds(problem, "per_op", "teamkorea")
    assert (reading.compute, reading.io) == (11_000, Fraction(2 * 128 * 128 + 512 * 128, 1_000))
    result = solve(problem, "cpsat", time_limit_s=5, semantics="teamkorea")
    assert result.total_latency == 11_000 and result.bound == 11_000
    assert result.status == "optimal" and result.lower_bounds.compute == 11_000


def test_each_op_pays_its_base_per_tile_of_its_least_grid_downstream():
    """A Pointwise op 0 on 256 x 256 (4 native tiles) feeds a MatMul to 128 x 256 (2), then
    a Pointwise op to a graph output (2), and a Pointwise op 3 to a 256 x 256 graph output
    (4). A subgraph's grid is the shape of its outputs that are not ephemeral, so op 0 may
    run at the MatMul's 2 tiles, op 3 only at its own 4: the bound is 2 x (100 + 1,000 +
    10) + 4 x 50 = 2,420. Reaching it would take op 0 at 2 tiles without op 3 recomputing
    it, so the best schedule, [0], [1, 2], [3] (400 + 2,020 + 200), is above it. Traffic:
    tensor 0 over the 128 x 256 grid (32,768), the RHS 256 deep x 128 wide (32,768), and
    the outputs (32,768 + 65,536)."""
    problem = parse_problem({
        "widths": [256, 256, 128, 128, 128, 256], "heights": [256] * 6,
        "inputs": [[0], [1, 2], [3], [1]], "outputs": [[1], [3], [4], [5]],
        "base_costs": [100, 1_000, 10, 50],
        "op_types": ["Pointwise", "MatMul", "Pointwise", "Pointwise"],
        "fast_memory_capacity": 10**7, "slow_memory_bandwidth": 10**6,
        "native_granularity": [128, 128]})
    assert [grid.tiles for grid in FusionGraph(problem).least_grids] == [2, 2, 2, 4]
    bounds = lower_bounds(problem, "per_op", "teamkorea")
    assert (bounds.compute, bounds.io) == (2_420, Fraction(163_840, 10**6))
    result = solve(problem, "cpsat", time_limit_s=5, semantics="teamkorea")
    assert result.bound == 2_420 and result.total_latency == 2_620
    assert result.status == "feasible"


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e["valid"]))
def test_every_schedule_the_reading_accepts_is_at_or_above_its_bound(name):
    """Their solver's schedules (k up to K, prologues, tiles below native) and the others
    the reading accepts; TeamKorea's own benchmark 17 meets the bound, so it is optimal."""
    bound = lower_bounds(benchmark(name.split(".")[0]), "per_op", "teamkorea").total
    assert EXPECTED[name]["total_latency"] >= float(bound) * (1 - 1e-12)
    if name == "17.teamkorea":
        assert EXPECTED[name]["total_latency"] == float(bound)


@st.composite
def reader_paths(draw: st.DrawFn, g: FusionGraph) -> tuple[int, ...]:
    """An op and a path of readers from it: every output but the last op's is read inside,
    so the grid is that output's shape, the least the bound grants the first op."""
    path = [draw(st.integers(0, g.problem.num_ops - 1))]
    while (readers := sorted(g.dag.successors(path[-1]))) and draw(st.integers(0, 3)):
        path.append(draw(st.sampled_from(readers)))
    return tuple(q for q in g.topological_order if q in path)


@settings(QUICK, max_examples=100)
@given(raw=problems(max_ops=5), data=st.data())
def test_no_subgraph_computes_or_loads_below_its_least_grids(raw, data):
    """Whatever op set, retention, tile (any size up to native), k and traversal the
    reading accepts, a subgraph's latency is at least the sum over its ops of the base per
    tile of their ``least_grids``, and, with every base cost zero, the least loads of the
    graph inputs it reads over the bandwidth: the claims the bound adds up. Paths of
    readers, connected op sets and any set (the reading does not ask for connection)."""
    g = FusionGraph(parse_problem(raw))
    ops = data.draw(st.one_of(reader_paths(g), connected_ops(g), st.sets(
        st.sampled_from(range(g.problem.num_ops)), min_size=1).map(
            lambda chosen: tuple(q for q in g.topological_order if q in chosen))))
    _check_least_grids(raw, ops, data)


@settings(QUICK, max_examples=100)
@given(raw=st.one_of(split_chain_problems(), head_chain_problems()), data=st.data())
def test_where_outputs_read_inside_narrow_the_grid_no_subgraph_goes_below_it(raw, data):
    """The same on paths of readers through MatMul blocks whose last MatMul is narrower
    than the first, so that a wide MatMul and its operands move over a narrower grid."""
    _check_least_grids(raw, data.draw(reader_paths(FusionGraph(parse_problem(raw)))), data)


def _check_least_grids(raw: dict, ops: tuple[int, ...], data: st.DataObject) -> None:
    """Compute at the drawn bandwidth or one that hides every transfer (traffic would
    otherwise mask the compute claim); loads with every base cost zero."""
    fast = data.draw(st.booleans())
    g = FusionGraph(parse_problem(raw | {"slow_memory_bandwidth": 10**9} if fast else raw))
    p = g.problem
    kept = frozenset(data.draw(st.sets(st.sampled_from(
        [t for q in ops for t in p.outputs[q] if g.consumers[t]] or [-1])))) - {-1}
    sg = teamkorea.Subgraph(g, ops, kept)
    nw, nh, _ = g.native
    gran = (data.draw(st.one_of(st.just(nw), st.integers(1, nw))),  # native: fewest tiles
            data.draw(st.one_of(st.just(nh), st.integers(1, nh))),
            data.draw(st.one_of(st.just(max(sg.slicing_k, 1)),  # one k-step: two MatMuls
                                st.integers(1, max(sg.slicing_k, 1)))))
    try:
        grid = teamkorea.subgraph_grid(g, sg)
        teamkorea._check_chains(0, sg, gran)
    except teamkorea.Rejected:
        return
    name = data.draw(st.sampled_from(sorted(NAMED_ORDERS)))
    order = NAMED_ORDERS[name](-(-grid[1] // gran[1]), -(-grid[0] // gran[0]))
    kinds = teamkorea.tile_kinds(gran[:2], grid, order)
    latency = teamkorea.latency(g, sg, gran, kinds, frozenset(), grid)
    least = g.least_grids
    assert latency >= sum((exact(p.base_costs[q]) * least[q].tiles for q in ops), Fraction(0))
    idle = FusionGraph(parse_problem(raw | {"base_costs": [0] * p.num_ops}))
    moved = teamkorea.latency(idle, teamkorea.Subgraph(idle, ops, kept), gran, kinds,
                              frozenset(), grid) * exact(raw["slow_memory_bandwidth"])
    read = {t for q in ops for t in p.inputs[q]} & set(g.graph_inputs)
    assert moved >= sum(min(least_teamkorea_load(g, q, pos) for q in g.consumers[t]
                            for pos, u in enumerate(p.inputs[q]) if u == t) for t in read)


def test_cpsat_under_the_reading_reports_an_honest_bound():
    problem = benchmark("3")
    result = solve(problem, "cpsat", time_limit_s=5, semantics="teamkorea")
    assert result.semantics == "teamkorea"
    assert result.bound <= result.total_latency
    assert result.status == "feasible" or result.bound >= result.total_latency


def test_the_option_reaches_the_cli_and_the_api(tmp_path: Path):
    """Their schedule of benchmark 1 (k above native: refused by our reading) evaluated
    under theirs from the command line and the service, and solved there."""
    problem_file = MLSYS / "benchmarks" / "mlsys-2026-1.json"
    doc = json.loads((FIXTURES / "solutions" / "1.teamkorea.json").read_text())
    doc["subgraph_latencies"] = [0.0] * len(doc["subgraphs"])
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(doc))
    runner = CliRunner()
    ours = runner.invoke(cli, ["fusion", "evaluate", str(problem_file), str(answer)])
    theirs = runner.invoke(cli, ["fusion", "evaluate", str(problem_file), str(answer),
                                 "--semantics", "teamkorea", "--json"])
    assert ours.exit_code == 1
    assert theirs.exit_code == 0, theirs.output
    assert json.loads(theirs.output)["total_latency"] == pytest.approx(322008.0000000327)
    both = runner.invoke(cli, ["fusion", "evaluate", str(problem_file), str(answer),
                               "--semantics", "teamkorea", "--reduction-cost", "per_native_k"])
    assert both.exit_code == 2 and "reduction_cost" in both.output
    with TestClient(create_app(Settings(data_dir=tmp_path, pool_workers=1))) as client:
        body = {"problem": json.loads(problem_file.read_text()), "solution": doc}
        verdict = client.post("/v1/fusion/evaluate?semantics=teamkorea", json=body)
        assert verdict.status_code == 200, verdict.text
        assert verdict.json()["semantics"] == "teamkorea"
        solved = client.post("/v1/fusion/solve?solver=greedy&semantics=teamkorea",
                             json=body["problem"])
        assert solved.status_code == 200, solved.text
        assert solved.json()["semantics"] == "teamkorea"
        assert solved.json()["reduction_cost"] == "per_op"
        refused = client.post("/v1/fusion/evaluate?semantics=teamkorea&steps=true",
                              json=body)
        assert refused.status_code == 422 and "steps" in refused.text
        unknown = client.post("/v1/fusion/solve?semantics=korea", json=body["problem"])
        assert unknown.status_code == 422 and "semantics" in unknown.text
        mixed = client.post("/v1/fusion/solve?semantics=teamkorea&reduction_cost=per_native_k",
                            json=body["problem"])
        assert mixed.status_code == 422 and "reduction_cost" in mixed.text
        again = client.post("/v1/fusion/solve?solver=greedy&semantics=teamkorea",
                            json=body["problem"])
        assert again.status_code == 200 and again.json() == solved.json() | {
            "wall_time_s": again.json()["wall_time_s"]}
    bogus = runner.invoke(cli, ["fusion", "solve", str(problem_file), "--semantics", "korea"])
    assert bogus.exit_code == 2 and "semantics" in bogus.output
