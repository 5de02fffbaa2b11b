"""The TeamKorea reading's bound from what MatMuls pay (``bound/split_k.py``): hand-computed
cases, and the per-subgraph claim it adds up checked against the reading's own latency of
every op set, retention, resident set, tile, k and traversal it accepts."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.fusion import parse_problem
from solver.fusion import teamkorea, teamkorea_config
from solver.fusion.bound.split_k import Claims, split_k_bound
from solver.fusion.context import ScoringContext
from solver.fusion.problem import FusionGraph, exact, lower_bounds
from solver.fusion.simulate import NAMED_ORDERS
from solver.fusion.solvers import solve
from tests.fusion_cases import (
    QUICK,
    TEAMKOREA_SOURCES,
    connected_ops,
    split_k_problems,
    teamkorea_case,
    teamkorea_granularities,
)
from tests.test_fusion_teamkorea import EXPECTED, benchmark, tk


def one_matmul(capacity: int, bandwidth: int = 1) -> dict:
    """``X @ W``: X 8 rows x K = 32, W 32 x 16, native 8 x 8, base 100, all graph tensors."""
    return {"widths": [32, 16, 16], "heights": [8, 32, 8], "inputs": [[0, 1]],
            "outputs": [[2]], "base_costs": [100], "op_types": ["MatMul"],
            "fast_memory_capacity": capacity, "slow_memory_bandwidth": bandwidth,
            "native_granularity": [8, 8]}


def test_a_matmul_whose_strips_do_not_fit_pays_its_reloads():
    """Capacity 200: with one k-step the strips take 32 (h + w), so h + w <= 6 and the
    16 x 8 output needs 16 tiles at least (4 x 2, or 2 x 4): 1,600, loading at least
    K x 128 / 4 = 1,024 (every tile after the first loads a strip at least 32 x its
    shorter side); or 32 tiles (1 x 5 or 5 x 1), loading 32 x 128 / 5. Split, every one
    of the 2 tiles of 8 x 8 loads its whole strips, 8 x 32 of X and 32 x 8 of W: 1,024,
    and the output is written: 1,152 in all, which the solver's schedule meets. The
    compute and I/O bound sees 200 and 896 (each tensor moved once)."""
    problem = parse_problem(one_matmul(200))
    claims = Claims.of(FusionGraph(problem))
    assert (claims.compute, claims.io, claims.split) == ([200], [128], {0: 1_152})
    assert claims.unsplit == {0: [(1_600, 1_024), (3_200, Fraction(32 * 128, 5))]}
    assert claims.bound(mixed=False) == 1_152  # at lam = 0
    # mixed: split 1,152 - 952 lam meets 947.2 + 2,252.8 lam (32 tiles) at lam = 128 / 2,003
    assert 0 <= Fraction(2_185_600, 2_003) - claims.bound(mixed=True) < Fraction(1, 1000)
    assert split_k_bound(FusionGraph(problem)) == 1_152
    assert lower_bounds(problem, "per_op", "teamkorea").total == 896
    result = solve(problem, "cpsat", time_limit_s=5, semantics="teamkorea")
    assert result.total_latency == 1_152 and result.bound == 1_152
    assert result.status == "optimal" and result.lower_bounds.forced == 1_152


def test_where_whole_strips_fit_the_claims_are_the_compute_or_each_tensor_once():
    """Capacity 600 holds 8 x 32 + 32 x 8 for an 8 x 8 tile: one k-step at the 2 native
    tiles (200), each strip loaded once (one tile row: X once, W's two columns once each),
    768, and the output written (128): the claims reach the compute and I/O bounds, no
    more."""
    claims = Claims.of(FusionGraph(parse_problem(one_matmul(600))))
    assert claims.unsplit == {0: [(200, 768)]}
    assert (claims.bound(mixed=False), claims.bound(mixed=True)) == (200, 896)


def test_a_pointwise_prologue_frees_the_strip_only_without_split_k():
    """``relu(X) @ W`` with K = 32 above the native 8: split K would need an 8-wide tile
    to span K (the reading's alignment rule), so a split subgraph loads X's strips; with
    one k-step the Pointwise op feeds the MatMul tile by tile and only W's strip (32 w)
    is held, so at capacity 200, w <= 6 and the 16 x 8 output takes 3 x 1 tiles, W's
    columns loaded once each (512). X, the Pointwise output, is larger than the capacity
    (it cannot be resident). The Pointwise op loads X over the MatMul's 16 x 8 grid."""
    raw = {"widths": [32, 16, 32, 16], "heights": [8, 32, 8, 8], "inputs": [[0], [2, 1]],
           "outputs": [[2], [3]], "base_costs": [10, 100], "op_types": ["Pointwise", "MatMul"],
           "fast_memory_capacity": 200, "slow_memory_bandwidth": 1,
           "native_granularity": [8, 8]}
    claims = Claims.of(FusionGraph(parse_problem(raw)))
    assert claims.unsplit == {1: [(300, 512)]} and claims.io == [128, 128]
    assert claims.split == {1: 2 * 8 * 32 + 16 * 32 + 128}


def test_a_split_subgraph_follows_no_other_matmul_and_a_head_only_its_tail():
    """``(X @ W1) @ W2``: X 8 x 32, W1 32 x 16, W2 16 x 4, native 8, capacity 200, bases
    100 and 50. Op 0 alone under split K has its own 16 x 8 grid (2 columns): X's strips
    2 x 8 x 32 and W1's 16 x 32, 1,024; as the head of op 1 the grid may be op 1's 4 x 8,
    one tile: X once per row (8 x 32) and W1 whole per tile (512), 768. With one k-step
    (K = 32 above the native 8, so at most one more MatMul: op 1's grid) the strips take
    32 (h + w) of the 200, over 4 x 8 at least 4 tiles (400), loading each strip once
    (32 x (8 + 4) = 384); as a head W1 whole does not fit. Op 1 (its LHS small enough to
    be resident): W2's strip 4 x 16 = 64 and its output written (32), 96 split; one tile
    (50) and the same 96 unsplit. Claiming compute alone where K is not split, op 0
    claims 400 below lam = 368 / 668: 450; claiming the mix there too, 384 + 96 at
    lam = 0."""
    raw = {"widths": [32, 16, 16, 4, 4], "heights": [8, 32, 8, 16, 8],
           "inputs": [[0, 1], [2, 3]], "outputs": [[2], [4]], "base_costs": [100, 50],
           "op_types": ["MatMul", "MatMul"], "fast_memory_capacity": 200,
           "slow_memory_bandwidth": 1, "native_granularity": [8, 8]}
    problem = parse_problem(raw)
    g = FusionGraph(problem)
    claims = Claims.of(g)
    assert claims.split == {0: 768, 1: 96}
    assert claims.unsplit == {0: [(400, 384)], 1: [(50, 64)]}
    assert (claims.bound(mixed=False), claims.bound(mixed=True)) == (450, 480)
    assert split_k_bound(g) == 480
    assert solve(problem, "cpsat", time_limit_s=5, semantics="teamkorea").total_latency >= 480


def test_readers_of_one_tensor_in_one_subgraph_share_its_loads_and_their_claims():
    """``X @ W1`` and ``X @ W2`` (X 8 x 32, W 32 x 8, 8 x 8 graph outputs) run as one
    subgraph at one 8 x 8 tile with one k-step: X's strip is one slice for both, so it
    moves once: 256 + 256 + 256 and the two outputs, 896 (bases 1). Alone, each would load
    X and its W (512) and write (64): 576, split or not. Two MatMuls read X, so each
    claims half of its one-step loads (256) and its write: 320. Likewise two Pointwise
    readers of one input in one subgraph load each tile once, and each claims half."""
    raw = {"widths": [32, 8, 8, 8, 8], "heights": [8, 32, 32, 8, 8],
           "inputs": [[0, 1], [0, 2]], "outputs": [[3], [4]], "base_costs": [1, 1],
           "op_types": ["MatMul", "MatMul"], "fast_memory_capacity": 1_200,
           "slow_memory_bandwidth": 1, "native_granularity": [8, 8]}
    claims = Claims.of(FusionGraph(parse_problem(raw)))
    assert claims.split == {0: 576, 1: 576}
    assert claims.unsplit == {0: [(1, 256)], 1: [(1, 256)]} and claims.io == [64, 64]
    together = tk(raw, [[0, 1]], [[8, 8, 32]])
    assert together.total == 896 >= sum(claims.at(Fraction(0), mixed=True))
    pointwise = {"widths": [16, 16, 16], "heights": [8, 8, 8], "inputs": [[0], [0]],
                 "outputs": [[1], [2]], "base_costs": [1, 1],
                 "op_types": ["Pointwise", "Pointwise"], "fast_memory_capacity": 1_000,
                 "slow_memory_bandwidth": 1, "native_granularity": [8, 8]}
    claims = Claims.of(FusionGraph(parse_problem(pointwise)))
    assert claims.io == [64 + 128, 64 + 128]
    assert tk(pointwise, [[0, 1]], [[8, 8, 1]]).total == 384 == sum(claims.at(0, mixed=True))


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e["valid"]))
def test_every_schedule_the_reading_accepts_is_at_or_above_the_claims(name):
    """Their solver's schedules (k up to K on 4,096-deep MatMuls, prologues, narrow tiles)
    and the others the reading accepts on the public benchmarks."""
    bound = split_k_bound(FusionGraph(benchmark(name.split(".")[0])))
    assert EXPECTED[name]["total_latency"] >= float(bound) * (1 - 1e-12)


@settings(QUICK, max_examples=150)
@given(raw=TEAMKOREA_SOURCES, data=st.data())
def test_no_subgraph_pays_less_than_the_claims_of_its_ops(raw, data):
    """Whatever op set (connected or not), retention, resident inputs, tile, k and
    traversal the reading accepts within the capacity, the subgraph's latency is at least
    the sum of its ops' claims, at any ``lam``, either way of claiming: what
    ``split_k_bound`` adds up."""
    g, ops, kept, resident = teamkorea_case(raw, data)
    p = g.problem
    sg = teamkorea.Subgraph(g, ops, kept)
    gran = data.draw(teamkorea_granularities(g, sg))
    name = data.draw(st.sampled_from(sorted(NAMED_ORDERS)))
    if data.draw(st.booleans()):  # the search's best, where a claim may come close
        ctx = ScoringContext(p, teamkorea.RULES, semantics="teamkorea")
        found = teamkorea_config.best(ctx, ops, resident, kept)
        if found is not None:
            gran, name = found[0], found[1]
    try:
        grid = teamkorea.subgraph_grid(g, sg)
        teamkorea._check_chains(0, sg, gran)
    except teamkorea.Rejected:
        return
    if teamkorea.working_set(g, sg, gran, resident) > exact(p.fast_memory_capacity):
        return
    order = NAMED_ORDERS[name](-(-grid[1] // gran[1]), -(-grid[0] // gran[0]))
    latency = teamkorea.latency(g, sg, gran, teamkorea.tile_kinds(gran[:2], grid, order),
                                resident, grid)
    claims = Claims.of(g)
    at = claims.at(data.draw(st.fractions(0, 1, max_denominator=16)), data.draw(st.booleans()))
    assert latency >= sum((at[q] for q in ops), Fraction(0))


@settings(QUICK, max_examples=150)
@given(raw=split_k_problems(), data=st.data())
def test_at_the_best_tile_of_each_op_set_the_claims_come_close_and_hold(raw, data):
    """The same claim at the configuration the search picks for each connected op set of
    a MatMul with a large K, where a subgraph splits K or holds few tiles: the claims are
    tight there, so a bound that claimed a little more would fail here."""
    g = FusionGraph(parse_problem(raw))
    ops = data.draw(connected_ops(g))
    ctx = ScoringContext(g.problem, teamkorea.RULES, semantics="teamkorea")
    found = teamkorea_config.best(ctx, ops, frozenset(), frozenset())
    if found is None:
        return
    claims = Claims.of(g)
    for mixed in (False, True):
        for lam in (Fraction(i, 8) for i in range(9)):
            assert found[2] >= sum((claims.at(lam, mixed)[q] for q in ops), Fraction(0))
