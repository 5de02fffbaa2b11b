"""Twins: subgraphs alike up to the names of their ops and tensors share one config search
and one price."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.fusion_generate import suite
from models.fusion import parse_problem
from solver.fusion import score as score_module
from solver.fusion.bound import pricing
from solver.fusion.bound.pricing import QUICK_SPLITS, price
from solver.fusion.candidates import connected_op_sets
from solver.fusion.context import ScoringContext
from solver.fusion.problem import DEFAULT_RULES
from solver.fusion.score import best_config
from solver.fusion.twins import floor_signature, signature
from solver.fusion.variants import retention_options


def _generated(name: str) -> dict:
    return next(raw for found, raw in suite() if found == name)


def _sign(ctx: ScoringContext, ops: tuple[int, ...], resident: frozenset[int] = frozenset(),
          kept: frozenset[int] = frozenset()) -> tuple:
    return signature(ctx, ctx.shape(ops), resident, kept,
                     sum(ctx.graph.size(t) for t in resident))


def _as_found(config) -> tuple | None:
    return None if config is None else (config.latency, config.gran, config.traversal,
                                        config.ws_peak)


@pytest.mark.parametrize("mode", ["per_op", "per_native_k"])
def test_twins_have_the_same_best_config_when_each_is_searched_alone(mode):
    """On a generated transformer of repeated layers, every pair of op sets and retentions
    with one signature gets the same config from a search of its own (a fresh context),
    and a context that searched one answers the other from it, at the same config."""
    problem = parse_problem(_generated("gen-transformer-06"))
    rules = replace(DEFAULT_RULES, reduction_cost=mode)
    ctx = ScoringContext(problem, rules, every_tile=True)
    by_signature: dict[tuple, list] = {}
    for ops in connected_op_sets(ctx.graph, range(problem.num_ops), 200).sets:
        for resident, kept in retention_options(ctx, ops):
            by_signature.setdefault(_sign(ctx, ops, resident, kept), []).append(
                (ops, resident, kept))
    pairs = [members[:2] for members in by_signature.values() if len(members) > 1]
    assert len(pairs) >= 20  # the layers repeat
    shared = ScoringContext(problem, rules, every_tile=True)
    for first, second in pairs:
        alone = [_as_found(best_config(ScoringContext(problem, rules, every_tile=True), *s))
                 for s in (first, second)]
        assert alone[0] == alone[1]
        assert [_as_found(best_config(shared, *s)) for s in (first, second)] == alone


def test_a_twin_is_answered_without_a_search(monkeypatch):
    """The second copy of a layer's op set costs one re-score, not a search."""
    problem = parse_problem(_generated("gen-transformer-06"))
    ctx = ScoringContext(problem, every_tile=True)
    by_signature: dict[tuple, list[tuple[int, ...]]] = {}
    for ops in connected_op_sets(ctx.graph, range(problem.num_ops), 40).sets:
        by_signature.setdefault(_sign(ctx, ops), []).append(ops)
    first, second = next(m for m in by_signature.values() if len(m) > 1 and
                         any(ctx.graph.is_matmul(q) for q in m[0]))[:2]
    searched = []
    search = score_module._search
    monkeypatch.setattr(score_module, "_search", lambda c, shape, *rest:
                        searched.append(shape.ops) or search(c, shape, *rest))
    assert _as_found(best_config(ctx, first)) == _as_found(best_config(ctx, second)) \
        is not None
    assert searched == [first]


def test_a_false_twin_whose_tile_scores_otherwise_is_searched(monkeypatch):
    """Were every subgraph a twin of every other, each would get the first one's tile
    only where that tile is legal and scores there as it did on the first; every other
    subgraph is searched, and answers as its own search does."""
    problem = parse_problem(_generated("gen-residual-05"))
    ctx = ScoringContext(problem, every_tile=True)
    sets = connected_op_sets(ctx.graph, range(problem.num_ops), 30).sets
    monkeypatch.setattr(score_module, "signature", lambda *args: ("everything alike",))
    answers = [_as_found(best_config(ctx, ops)) for ops in sets]
    own = [_as_found(best_config(ScoringContext(problem, every_tile=True), ops))
           for ops in sets]
    first = answers[0]
    assert first is not None
    searched = [i for i, found in enumerate(answers) if found is None or found[:2] != first[:2]]
    assert len(searched) > len(sets) // 2
    assert all(answers[i] == own[i] for i in searched)


def test_the_signature_tells_what_scoring_reads():
    """A tensor read twice is not two alike tensors; residency, retention and the room
    resident tensors take each tell twins apart."""
    raw = {"widths": [64, 64, 64, 64, 64], "heights": [64, 64, 64, 64, 64],
           "inputs": [[0, 0], [1, 2], [3]], "outputs": [[3], [4], [1]],
           "base_costs": [100, 100, 100], "op_types": ["Pointwise"] * 3,
           "fast_memory_capacity": 50000, "slow_memory_bandwidth": 10,
           "native_granularity": [64, 64]}
    ctx = ScoringContext(parse_problem(raw))
    # op 0 reads T0 twice, op 1 reads T1 and T2 (T1 made by op 2): same types and extents
    assert _sign(ctx, (0,)) != _sign(ctx, (1,))
    one = frozenset({1})
    assert _sign(ctx, (1,), one) != _sign(ctx, (1,))
    assert _sign(ctx, (2,), kept=one) != _sign(ctx, (2,))
    assert _sign(ctx, (1,), one) == _sign(ctx, (1,), one)
    assert signature(ctx, ctx.shape((1,)), one, frozenset(), 4096) != \
        signature(ctx, ctx.shape((1,)), one, frozenset(), 8192)


@pytest.mark.parametrize("mode", ["per_op", "per_native_k"])
def test_twins_share_prices_that_match_each_priced_alone(mode, monkeypatch):
    """The cover's prices: every op set of up to three ops of a generated transformer gets
    in one shared context (twins answered from one another) the prices it gets priced
    alone, with fewer floors searched than arrivals priced. Its op sets (24, 25) and
    (26, 27, 29) have twins under ``signature`` whose least extents differ (a dimension
    some subgraph streams there only): keyed without them, they took lower prices."""
    problem = parse_problem(_generated("gen-transformer-05"))
    rules = replace(DEFAULT_RULES, reduction_cost=mode)
    ctx = ScoringContext(problem, rules)
    sets = [ops for ops in connected_op_sets(ctx.graph, range(problem.num_ops), 3000).sets
            if len(ops) <= 3]
    searched = []
    least = pricing.least
    monkeypatch.setattr(pricing, "least", lambda *args, **kw: searched.append(1) or
                        least(*args, **kw))
    shared = [price(ctx, ops, QUICK_SPLITS) for ops in sets]
    searches = len(searched)
    alone = [price(ScoringContext(problem, rules), ops, QUICK_SPLITS) for ops in sets]
    assert shared == alone
    assert searches < len(searched) - searches  # each fresh context searches every arrival
    for ops in ((24, 25), (26, 27, 29)):
        alike = [other for other in sets if other != ops and
                 _sign(ctx, other) == _sign(ctx, ops)]
        assert any(floor_signature(ctx, ctx.shape(other), frozenset(), frozenset()) !=
                   floor_signature(ctx, ctx.shape(ops), frozenset(), frozenset())
                   for other in alike)
