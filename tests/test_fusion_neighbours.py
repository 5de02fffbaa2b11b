"""The pass that runs neighbouring subgraphs as one where that is faster (``neighbours.py``)."""

from __future__ import annotations

from typing import Any

from models.fusion import parse_problem
from solver.deadline import now
from solver.fusion import teamkorea
from solver.fusion.cpsat import _better, as_planned, as_variants, total
from solver.fusion.evaluate import evaluate
from solver.fusion.neighbours import merged_neighbours
from solver.fusion.problem import DEFAULT_RULES
from solver.fusion.schedule import to_solution
from solver.fusion.score import ScoringContext
from solver.fusion.unfused import unfused
from solver.fusion.variants import Variant, make_variant
from tests.conftest import POINTWISE_CHAIN

TWO_APART: dict[str, Any] = {
    "widths": [128] * 4, "heights": [128] * 4,
    "inputs": [[0], [1]], "outputs": [[2], [3]],
    "base_costs": [5_000, 10], "op_types": ["Pointwise", "Pointwise"],
    "fast_memory_capacity": 100_000, "slow_memory_bandwidth": 10,
    "native_granularity": [128, 128]}
"""Two Pointwise ops that share nothing: op 0 waits on compute (5,000 against 3,276.8 of
traffic), op 1 on slow memory (10 against 3,276.8). Apart they take 8,276.8; as one
subgraph each step takes the larger of their summed compute and summed traffic (6,553.6),
which the TeamKorea reading allows and SEMANTICS.md does not (S2.4: not connected)."""

FORK: dict[str, Any] = {
    "widths": [128] * 4, "heights": [128] * 4,
    "inputs": [[0], [1], [1]], "outputs": [[1], [2], [3]],
    "base_costs": [100, 100, 100], "op_types": ["Pointwise"] * 3,
    "fast_memory_capacity": 100_000, "slow_memory_bandwidth": 10,
    "native_granularity": [128, 128]}
"""Op 0 makes tensor 1, which ops 1 and 2 read."""


def context(raw: dict[str, Any], semantics: str = "default") -> ScoringContext:
    rules = teamkorea.RULES if semantics == "teamkorea" else DEFAULT_RULES
    return ScoringContext(parse_problem(raw), rules, semantics=semantics)


def one_op_each(ctx: ScoringContext) -> list[Variant]:
    return as_variants(ctx, unfused(ctx))


def merged(ctx: ScoringContext) -> list[Variant]:
    return merged_neighbours(ctx, one_op_each(ctx), now() + 10)


def valid_total(ctx: ScoringContext, schedule: list[Variant]) -> float:
    verdict = evaluate(ctx.graph, to_solution(ctx, as_planned(schedule)), ctx.rules,
                       semantics=ctx.semantics)
    assert verdict.valid, verdict.error
    return float(verdict.total)


def test_a_chain_run_op_by_op_becomes_one_subgraph():
    """PROBLEM.md Example 1 run op by op writes and reloads the middle tensor (6,553.6);
    as one subgraph it does not (the example's 3,276.8)."""
    ctx = context(POINTWISE_CHAIN)
    before = one_op_each(ctx)
    after = merged(ctx)
    assert [v.ops for v in after] == [(0, 1)]
    assert total(after) < total(before)
    assert valid_total(ctx, after) == float(total(after)) == 3_276.8


def test_ops_that_share_nothing_merge_only_under_the_teamkorea_reading():
    default = context(TWO_APART)
    assert [v.ops for v in merged(default)] == [(0,), (1,)]
    tk = context(TWO_APART, "teamkorea")
    assert float(total(one_op_each(tk))) == 8_276.8
    after = merged(tk)
    assert [v.ops for v in after] == [(0, 1)]
    assert valid_total(tk, after) == float(total(after)) == 6_553.6


def test_no_merge_leaves_a_tensor_ephemeral_that_a_later_subgraph_reads():
    """Merging [0] and [1] of the fork would keep tensor 1 inside while op 2, run alone
    after, reads it from slow memory: neither reading allows that. Under the TeamKorea
    reading [1] and [2] merge instead (both read tensor 1, loaded once); under SEMANTICS.md
    they may not (they exchange no tensor), so nothing merges."""
    tk = context(FORK, "teamkorea")
    after = merged(tk)
    assert [v.ops for v in after] == [(0,), (1, 2)]
    assert valid_total(tk, after) == float(total(after)) == 3_276.8 + 4_915.2
    default = context(FORK)
    assert [v.ops for v in merged(default)] == [(0,), (1,), (2,)]


def test_neighbours_that_both_run_an_op_merge_into_one_run_of_it_in_order():
    """Op 0 recomputed by both subgraphs of the fork, ``[0, 1]`` then ``[0, 2]``: merged,
    op 0 runs once, listed before its readers (the pair's ops strung together listed it
    twice, which the evaluator refuses; a 60-op generated graph hit this)."""
    for semantics in ("default", "teamkorea"):
        ctx = context(FORK, semantics)
        recomputed = [make_variant(ctx, ops, frozenset(), frozenset())
                      for ops in ((0, 1), (0, 2))]
        after = merged_neighbours(ctx, recomputed, now() + 10)
        assert [v.ops for v in after] == [(0, 1, 2)]
        assert valid_total(ctx, after) == float(total(after)) < valid_total(ctx, recomputed)


def test_the_search_keeps_no_schedule_its_reading_refuses():
    """The fork's ops strung together as one subgraph, op 0 listed twice (what merging
    ``[0, 1]`` and ``[0, 2]`` once made): priced below the two subgraphs, but the
    evaluator refuses it, so the search does not take it for the incumbent, in either
    reading (under SEMANTICS.md it once trusted the model and took it)."""
    for semantics in ("default", "teamkorea"):
        ctx = context(FORK, semantics)
        incumbent = [make_variant(ctx, ops, frozenset(), frozenset())
                     for ops in ((0, 1), (0, 2))]
        listed_twice = [make_variant(ctx, (0, 1, 0, 2), frozenset(), frozenset())]
        assert total(listed_twice) < total(incumbent)
        assert not _better(ctx, listed_twice, incumbent)
        assert _better(ctx, merged_neighbours(ctx, incumbent, now() + 10), incumbent)
