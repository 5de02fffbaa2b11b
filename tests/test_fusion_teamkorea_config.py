"""The config search under the TeamKorea reading (``teamkorea_config``) and the schedules a
short time limit gets from it: its floors never exceed what the reading charges, so
pricing candidates in their order and stopping at the best finds what pricing every one
finds; the quick config (``first``) fits; and ops met after a deadline still get one, in
either reading."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.fusion_generate import suite
from models.fusion import parse_problem
from solver.deadline import now
from solver.fusion import teamkorea, teamkorea_config
from solver.fusion.context import ScoringContext
from solver.fusion.evaluate import evaluate
from solver.fusion.greedy import greedy
from solver.fusion.problem import FusionGraph, ceil_div, exact
from solver.fusion.schedule import to_solution
from solver.fusion.score import quick_config
from solver.fusion.simulate import NAMED_ORDERS
from solver.fusion.solvers import reading_rules
from solver.fusion.unfused import unfused
from tests.fusion_cases import (
    QUICK,
    TEAMKOREA_SOURCES,
    narrowing_chain_problems,
    teamkorea_case,
    teamkorea_granularities,
)


@settings(QUICK, max_examples=200)
@given(raw=TEAMKOREA_SOURCES, data=st.data())
def test_no_tile_costs_less_than_its_floor(raw, data):
    """At any tile and k the reading accepts within the capacity, in any order of the
    tiles, the latency is at least the floor the search orders candidates by (with what a
    split K, or a tile's change of row or column, reloads)."""
    g, ops, kept, resident = teamkorea_case(raw, data)
    _check_floor(g, teamkorea.Subgraph(g, ops, kept), resident, data)


@settings(QUICK, max_examples=100)
@given(raw=narrowing_chain_problems(), data=st.data())
def test_no_tile_costs_less_than_its_floor_where_the_grid_narrows(raw, data):
    """The first MatMul of a narrowing chain with the first narrower one (and the
    Pointwise op between them, if any) as one subgraph: its grid is the narrower output,
    over which the reading computes the first MatMul too, so its weight moves only the
    grid's width of columns; the floor must not charge it whole. Sometimes with room for
    every tile."""
    if data.draw(st.booleans()):
        raw = raw | {"fast_memory_capacity": 10**6}
    g = FusionGraph(parse_problem(raw))
    narrower = next(q for q in range(1, g.problem.num_ops) if g.is_matmul(q))
    sg = teamkorea.Subgraph(g, tuple(range(narrower + 1)), frozenset())
    _check_floor(g, sg, frozenset(), data)


def _check_floor(g: FusionGraph, sg: teamkorea.Subgraph, resident: frozenset[int],
                 data: st.DataObject) -> None:
    """The floor of ``sg`` at a granularity drawn is at most the latency in an order drawn,
    and at least its compute part (nothing checked where the reading refuses the
    granularity or it does not fit)."""
    gran = data.draw(teamkorea_granularities(g, sg))
    try:
        grid = teamkorea.subgraph_grid(g, sg)
        teamkorea.check_crossed(sg)
        teamkorea._check_chains(0, sg, gran)
    except teamkorea.Rejected:
        return
    if teamkorea.working_set(g, sg, gran, resident) > exact(g.problem.fast_memory_capacity):
        return
    rows, columns = ceil_div(grid[1], gran[1]), ceil_div(grid[0], gran[0])
    order = data.draw(st.permutations(range(rows * columns))) if rows * columns <= 24 else \
        NAMED_ORDERS[data.draw(st.sampled_from(sorted(NAMED_ORDERS)))](rows, columns)
    latency = teamkorea.latency(g, sg, gran, teamkorea.tile_kinds(gran[:2], grid, order),
                                resident, grid)
    floor = teamkorea_config.Floor(sg, grid, resident)
    assert latency * floor.scale >= floor(gran) >= floor.compute(gran)


def test_a_split_head_tail_pair_moves_exactly_its_floor():
    """``X @ W1 @ W2`` as one subgraph (X 8 x 32, W1 32 x 32, W2 32 x 8; native 8, base 1,
    bandwidth 1) at 4 x 4 tiles and k = 8: four tiles of four k-steps. X is held per tile
    row (256 in all, X once); the head streams all of W1 in every tile (4 x 1,024); the
    tail loads its W2 slices every step, 8 x 4 each (4 x 128); 4 x 16 written: 4,928,
    and the floor sees all of it (the least loads 1,536 and writes 64, and what W1 and W2
    move beyond them, 3,072 and 256)."""
    raw = {"widths": [32, 32, 32, 8, 8], "heights": [8, 32, 8, 32, 8],
           "inputs": [[0, 1], [2, 3]], "outputs": [[2], [4]], "base_costs": [1, 1],
           "op_types": ["MatMul", "MatMul"], "fast_memory_capacity": 100_000,
           "slow_memory_bandwidth": 1, "native_granularity": [8, 8]}
    g = FusionGraph(parse_problem(raw))
    sg = teamkorea.Subgraph(g, (0, 1), frozenset())
    grid, gran, nothing = (8, 8), (4, 4, 8), frozenset()
    assert teamkorea.subgraph_grid(g, sg) == grid
    assert [sg.roles[q].kind for q in (0, 1)] == ["lhs_head", "lhs_tail"]
    kinds = teamkorea.tile_kinds(gran[:2], grid, NAMED_ORDERS["raster"](2, 2))
    assert teamkorea.latency(g, sg, gran, kinds, nothing, grid) == 4_928
    floor = teamkorea_config.Floor(sg, grid, nothing)
    assert floor.least == {0: 256, 1: 1_024, 3: 256} and floor.traffic == 1_600
    assert floor.scale == 1 and floor(gran) == 4_928


@settings(QUICK, max_examples=300)
@given(tile=st.tuples(st.integers(1, 9), st.integers(1, 9)),
       grid=st.tuples(st.integers(1, 40), st.integers(1, 40)),
       name=st.sampled_from(teamkorea_config.TRAVERSALS))
def test_tile_classes_worked_out_run_by_run_are_those_of_every_tile(tile, grid, name):
    """``order_kinds`` (each run of a named order: its first tile and up to three stretches
    alike) gives exactly the classes, first tiles, counts and order of
    ``teamkorea.tile_kinds`` walking every tile of that order, ragged grids included."""
    columns, rows = ceil_div(grid[0], tile[0]), ceil_div(grid[1], tile[1])
    walked = teamkorea.tile_kinds(tile, grid, NAMED_ORDERS[name](rows, columns))
    assert teamkorea_config.order_kinds(tile, grid, name) == walked
    assert sum(n for _, _, n in walked) == rows * columns


def _every_candidate(ctx: ScoringContext, sg: teamkorea.Subgraph, grid: tuple[int, int],
                     resident: frozenset[int]) -> list[tuple[tuple, tuple]]:
    """((latency, rank, traversal position), the config) of every candidate at every named
    traversal whose tile classes no earlier one has: the search's answer is the least."""
    every = []
    for gran, ws in teamkorea_config.candidates(ctx, sg, grid, resident):
        rank = (ceil_div(grid[0], gran[0]) * ceil_div(grid[1], gran[1]), -gran[2], -gran[0],
                gran)
        seen = set()
        for position, name in enumerate(teamkorea_config.TRAVERSALS):
            kinds = teamkorea_config.order_kinds(gran[:2], grid, name)
            if kinds not in seen:
                seen.add(kinds)
                latency = teamkorea.latency(sg.g, sg, gran, kinds, resident, grid)
                every.append(((latency, rank, position), (gran, name, latency, ws)))
    return every


@settings(QUICK, max_examples=150)
@given(raw=TEAMKOREA_SOURCES, data=st.data())
def test_the_search_finds_what_pricing_every_candidate_finds(raw, data):
    """The best of every candidate and named traversal, priced one by one, ties to the
    fewest tiles, largest k, widest tile, then the first traversal: what ``best`` returns
    though it stops once the floors pass its best. And its ``first`` answer fits and is
    priced as the reading prices it."""
    g, ops, kept, resident = teamkorea_case(raw, data)
    sg = teamkorea.Subgraph(g, ops, kept)
    ctx = ScoringContext(g.problem, teamkorea.RULES, semantics="teamkorea")
    found = teamkorea_config.best(ctx, ops, resident, kept)
    quick = teamkorea_config.best(ctx, ops, resident, kept, first=True)
    try:
        grid = teamkorea.subgraph_grid(g, sg)
        teamkorea.check_crossed(sg)
    except teamkorea.Rejected:
        assert found is None and quick is None
        return
    every = _every_candidate(ctx, sg, grid, resident)
    assert found == (min(every)[1] if every else None)
    if quick is not None:
        gran, name, latency, ws = quick
        assert ws <= g.problem.fast_memory_capacity and latency >= found[2]
        assert any(entry == quick for _, entry in every)


def test_a_matmul_computed_over_a_narrower_grid_loads_only_its_columns():
    """``X @ W0 -> Pointwise -> @ W2 -> (4 wide)`` and more (X 16 x 16, W0 24 wide): the
    subgraph of the first three ops has the last one's 4 x 16 grid, over which the reading
    computes the first MatMul too, loading 4 columns of W0 (4 x 16 = 64), not all 384 of
    it. A floor that charged W0 whole stopped before the best tile, (2, 2, 24) at 704 (it
    took (2, 3, 24) at 720); the search now finds what pricing every candidate finds."""
    raw = {"widths": [16, 24, 24, 24, 4, 4, 4, 4], "heights": [16, 16, 16, 16, 24, 16, 4, 16],
           "inputs": [[0, 1], [2], [3, 4], [5, 6]], "outputs": [[2], [3], [5], [7]],
           "op_types": ["MatMul", "Pointwise", "MatMul", "MatMul"], "base_costs": [1, 2, 4, 3],
           "fast_memory_capacity": 139, "slow_memory_bandwidth": 1, "native_granularity": [8, 8]}
    g = FusionGraph(parse_problem(raw))
    ctx = ScoringContext(g.problem, teamkorea.RULES, semantics="teamkorea")
    nothing: frozenset[int] = frozenset()
    sg = teamkorea.Subgraph(g, (0, 1, 2), nothing)
    grid = teamkorea.subgraph_grid(g, sg)
    assert grid == (4, 16)
    assert teamkorea_config.Floor(sg, grid, nothing).least == {0: 256, 1: 64, 4: 96}
    found = teamkorea_config.best(ctx, (0, 1, 2), nothing, nothing)
    assert found[:3] == ((2, 2, 24), "column_snake", 704)
    assert found == min(_every_candidate(ctx, sg, grid, nothing))[1]


def test_the_middle_of_a_three_matmul_chain_loads_its_weight_over_the_grid_only():
    """``X @ W1 @ W2 @ W3`` (8 x 8 each but W3, 2 wide) as one subgraph: the grid is the
    output's 2 x 8, and the middle MatMul's W2 slices are as wide as a tile of it, so W2
    moves 8 x 2 = 16, not its 64 (a floor that charged 64 was above every tile's latency,
    176 at one k-step); at one k-step the floor is that latency exactly."""
    raw = {"widths": [8, 8, 8, 8, 8, 2, 2], "heights": [8, 8, 8, 8, 8, 8, 8],
           "inputs": [[0, 1], [2, 3], [4, 5]], "outputs": [[2], [4], [6]],
           "base_costs": [1, 1, 1], "op_types": ["MatMul"] * 3,
           "fast_memory_capacity": 100_000, "slow_memory_bandwidth": 1,
           "native_granularity": [8, 8]}
    g = FusionGraph(parse_problem(raw))
    nothing: frozenset[int] = frozenset()
    sg = teamkorea.Subgraph(g, (0, 1, 2), nothing)
    grid = teamkorea.subgraph_grid(g, sg)
    floor = teamkorea_config.Floor(sg, grid, nothing)
    assert grid == (2, 8) and floor.least == {0: 64, 1: 64, 3: 16, 5: 16}
    for h in (8, 4, 2, 1):
        gran = (8, h, 8)
        order = NAMED_ORDERS["raster"](ceil_div(8, h), 1)
        latency = teamkorea.latency(g, sg, gran, teamkorea.tile_kinds(gran[:2], grid, order),
                                    nothing, grid)
        assert latency == 176 == floor(gran)


def test_a_tie_goes_to_the_better_rank_whatever_order_the_floors_price_them(monkeypatch):
    """One Pointwise op waiting on slow memory at every tile: every tile costs the same
    (its 256 elements in and out), so the fewest tiles win (8 x 8). Floors that put every
    other candidate first (0) still give that tile: the search goes on past a best whose
    latency a waiting floor ties, while that candidate's rank is better."""
    raw = {"widths": [16, 16], "heights": [16, 16], "inputs": [[0]], "outputs": [[1]],
           "base_costs": [1], "op_types": ["Pointwise"], "fast_memory_capacity": 100_000,
           "slow_memory_bandwidth": 1, "native_granularity": [8, 8]}
    g = FusionGraph(parse_problem(raw))
    nothing: frozenset[int] = frozenset()

    def search():
        ctx = ScoringContext(g.problem, teamkorea.RULES, semantics="teamkorea")
        return teamkorea_config.best(ctx, (0,), nothing, nothing)

    found = search()
    assert found[:3] == ((8, 8, 1), "raster", 512)
    sg = teamkorea.Subgraph(g, (0,), nothing)
    ctx = ScoringContext(g.problem, teamkorea.RULES, semantics="teamkorea")
    tiles = [gran for gran, _ in teamkorea_config.candidates(ctx, sg, (16, 16), nothing)]
    assert len(tiles) > 1
    real = teamkorea_config.Floor.__call__
    monkeypatch.setattr(teamkorea_config.Floor, "__call__",
                        lambda self, gran: real(self, gran) if gran == found[0] else 0)
    assert search() == found


@pytest.mark.parametrize("semantics", ["default", "teamkorea"])
def test_ops_met_after_the_deadline_take_a_quick_config_and_the_schedule_holds(semantics):
    """``unfused`` past its deadline: every op takes ``quick_config`` (in either reading),
    and the schedule, and greedy's from it with no time to merge, are valid; bests found
    before are kept, and a config search deadline set outside is kept too."""
    problem = parse_problem(dict(suite(seed=31, count=12, ops=40))["gen-residual-00"])
    rules = reading_rules("per_op", semantics)
    ctx = ScoringContext(problem, rules, every_tile=True, semantics=semantics)
    schedule = unfused(ctx, deadline=now() - 1)
    assert [item.config for item in schedule] == [quick_config(ctx, item.ops)
                                                  for item in schedule]
    for planned in (schedule, greedy(ctx, now())):
        verdict = evaluate(problem, to_solution(ctx, planned), rules, context=ctx,
                           semantics=semantics)
        assert verdict.valid, verdict.error
    best = unfused(ctx)  # every op's best, searched to the end
    assert unfused(ctx, deadline=now() - 1) == best  # once found, kept past a deadline
    fresh = ScoringContext(problem, rules, every_tile=True, semantics=semantics)
    with fresh.searching_until(now() - 1):  # a search deadline set outside, passed
        assert unfused(fresh, deadline=now() + 60) == schedule
