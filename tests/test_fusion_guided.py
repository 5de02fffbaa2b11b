"""Variants scored in the order a shortest path over placeholders picks them
(``solver.fusion.guided``): op sets at their floors, retention variants at estimates."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from hypothesis import given

from models.fusion import parse_problem
from solver.fusion import cpsat as cpsat_module
from solver.fusion.candidates import connected_op_sets
from solver.fusion.cpsat import _whole_graph, total
from solver.fusion.cpsat_model import LinkCount
from solver.fusion.floors import op_set_roofline
from solver.fusion.guided import (
    estimate,
    floor_placeholder,
    placeholder,
    score_along_paths,
    score_plain_along_paths,
)
from solver.fusion.problem import Rules
from solver.fusion.score import ScoringContext, least_floor
from solver.fusion.sequence import shortest_sequence
from solver.fusion.variants import make_variant, retention_options
from tests.fusion_cases import QUICK, problems

MODES = ["per_native_k", "per_op"]


def _chain() -> ScoringContext:
    """Three Pointwise ops in a chain on 128 x 128 tensors (op ``q`` reads tensor ``q`` and
    writes ``q + 1``), base cost 100, bandwidth 10, room for all of them."""
    raw = {"widths": [128] * 4, "heights": [128] * 4, "inputs": [[0], [1], [2]],
           "outputs": [[1], [2], [3]], "base_costs": [100, 100, 100],
           "op_types": ["Pointwise"] * 3, "fast_memory_capacity": 10**6,
           "slow_memory_bandwidth": 10, "native_granularity": [128, 128]}
    return ScoringContext(parse_problem(raw), Rules())


def test_an_estimate_saves_one_load_per_retained_input_and_one_write_per_retained_output():
    """The middle op alone, one native tile: loading tensor 1 and writing tensor 2 take
    16,384 / 10 = 1,638.4 each, above its compute of 100, so it costs 3,276.8. Keeping
    tensor 1 resident saves the load (1,638.4); keeping tensor 2 as well leaves only the
    compute (100, not 0). Here each estimate is also the exact score."""
    ctx = _chain()
    plain = make_variant(ctx, (1,), frozenset(), frozenset())
    assert plain is not None and plain.latency == Fraction(32768, 10)
    cases = [(frozenset({1}), frozenset(), Fraction(16384, 10)),
             (frozenset({1}), frozenset({2}), Fraction(100))]
    for retained_in, retained_out, expected in cases:
        assert estimate(ctx, plain, retained_in, retained_out) == expected
        exact = make_variant(ctx, (1,), retained_in, retained_out)
        assert exact is not None and exact.latency == expected


def _keys(ctx: ScoringContext, largest: int | None = None) -> tuple[list, list]:
    """The plain variant of every op set (of at most ``largest`` ops) that fits, and every
    retention key of those op sets."""
    sets = [ops for ops in connected_op_sets(ctx.graph, range(ctx.problem.num_ops), 10**6).sets
            if largest is None or len(ops) <= largest]
    plain = [v for ops in sets if (v := make_variant(ctx, ops, frozenset(), frozenset()))]
    keys = [(v.ops, r_in, r_out) for v in plain
            for r_in, r_out in retention_options(ctx, v.ops) if r_in or r_out]
    return plain, keys


def _recorder(ctx: ScoringContext, variants: list) -> tuple:
    """A ``score`` callback that adds each key's variant (if it fits) to ``variants``, and
    the list of the keys it was given."""
    scored: list = []

    def score(key) -> None:
        scored.append(key)
        found = make_variant(ctx, *key)
        if found is not None:
            variants.append(found)

    return score, scored


@pytest.mark.parametrize("mode", MODES)
@QUICK
@given(raw=problems(max_ops=4))
def test_guided_scoring_stops_only_when_the_path_needs_no_estimate(raw, mode):
    """When it ends, the shortest path over what it scored is the shortest over that and
    every retention variant still unscored at its estimate: no estimate could still
    shorten the path. Where every estimate left is at most its exact latency, that is the
    shortest path over every variant (what scoring all of them gives). It scores only
    keys it was given, each once."""
    ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost=mode))
    window = _whole_graph(ctx)
    plain, keys = _keys(ctx)
    variants = list(plain)
    score, scored = _recorder(ctx, variants)

    fits = {v.ops for v in plain}
    done = score_along_paths(ctx, window, variants, keys, fits, score, time.monotonic() + 60)
    assert sorted(done, key=repr) == sorted(scored, key=repr) and len(done) == len(scored)
    assert done <= set(keys)
    by_ops = {v.ops: v for v in plain}
    left = [placeholder(ctx, by_ops[k[0]], k[1], k[2]) for k in keys if k not in done]
    found = shortest_sequence(ctx, window, variants, time.monotonic() + 60)
    relaxed = shortest_sequence(ctx, window, variants + left, time.monotonic() + 60)
    assert found is not None and relaxed is not None
    assert total(found) == total(relaxed)
    exact = [make_variant(ctx, *k) for k in keys if k not in done]
    if all(v is None or guess.latency <= v.latency for guess, v in zip(left, exact, strict=True)):
        everything = shortest_sequence(ctx, window, plain + [v for v in exact if v] +
                                       variants[len(plain):], time.monotonic() + 60)
        assert everything is not None and total(everything) == total(found)


def test_the_keys_scored_along_paths_leave_the_waiting_list_and_the_rest_keep_their_order():
    """``cpsat._score_guided`` takes out of the waiting list exactly the keys it scored,
    adds their variants, and leaves the others in their order for the usual scoring. Each
    op of the chain alone (no fused set scored) costs 3,276.8; handing each tensor on
    costs 1,638.4 + 100 + 1,638.4 by the estimates (and exactly), so the path takes
    retention variants."""
    ctx = _chain()
    window = _whole_graph(ctx)
    plain, keys = _keys(ctx, largest=1)
    variants = list(plain)
    waiting = list(reversed(keys))
    fits = {v.ops for v in plain}
    dropped = cpsat_module._score_guided(ctx, window, waiting, variants, {}, fits,
                                         LinkCount(window), time.monotonic() + 60)
    assert dropped == 0
    scored = [k for k in keys if k not in waiting]
    assert scored, "the path over estimates takes some retention variant of this chain"
    assert waiting == [k for k in reversed(keys) if k not in scored]
    assert {(v.ops, v.retained_in, v.retained_out) for v in variants[len(plain):]} == set(scored)


def test_the_floors_of_one_op_are_its_loads_and_writes_when_they_outweigh_its_compute():
    """The middle op of the chain alone: one load and one write of 16,384 elements at
    bandwidth 10 (3,276.8) outweigh its compute (100), and one native tile fits, so its
    roofline, its least floor and its exact latency are all 3,276.8."""
    ctx = _chain()
    expected = Fraction(32768, 10)
    assert ctx.latency(op_set_roofline(ctx, ctx.shape((1,)))) == expected
    assert least_floor(ctx, (1,)) == expected
    plain = make_variant(ctx, (1,), frozenset(), frozenset())
    assert plain is not None and plain.latency == expected


@pytest.mark.parametrize("mode", MODES)
@QUICK
@given(raw=problems(max_ops=4))
def test_an_op_sets_floors_are_at_most_its_best_latency(raw, mode):
    """The roofline and the least floor never exceed what ``best_config`` finds for the
    op set with nothing retained, with and without every tile; an op set with no
    candidate has no config either."""
    for every_tile in (False, True):
        ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost=mode),
                             every_tile=every_tile)
        for ops in connected_op_sets(ctx.graph, range(ctx.problem.num_ops), 10**6).sets:
            best = make_variant(ctx, ops, frozenset(), frozenset())
            floor = least_floor(ctx, ops)
            if floor is None:
                assert best is None
                continue
            if best is not None:
                assert ctx.latency(op_set_roofline(ctx, ctx.shape(ops))) <= best.latency
                assert floor <= best.latency, (ops, every_tile)


@pytest.mark.parametrize("mode", MODES)
@QUICK
@given(raw=problems(max_ops=4))
def test_op_sets_scored_along_paths_give_the_path_over_every_op_set(raw, mode):
    """When it ends, the shortest path over the op sets it scored is the shortest over
    every op set scored: each one left stands at a floor, at most its latency, and no
    path over those took one. It scores only op sets it was given, each once."""
    ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost=mode), every_tile=True)
    window = _whole_graph(ctx)
    sets = connected_op_sets(ctx.graph, range(ctx.problem.num_ops), 10**6).sets
    waiting = [(ops, frozenset(), frozenset()) for ops in sets]
    singles = [v for ops in sets if len(ops) == 1
               if (v := make_variant(ctx, ops, frozenset(), frozenset()))]
    variants = list(singles)
    score, scored = _recorder(ctx, variants)

    done = score_plain_along_paths(ctx, window, variants, waiting, score,
                                   time.monotonic() + 60)
    assert sorted(done, key=repr) == sorted(scored, key=repr) and len(done) == len(scored)
    assert done <= set(waiting)
    everything = [v for ops in sets if (v := make_variant(ctx, ops, frozenset(), frozenset()))]
    found = shortest_sequence(ctx, window, variants, time.monotonic() + 60)
    best = shortest_sequence(ctx, window, everything, time.monotonic() + 60)
    assert (found is None) == (best is None)
    if best is not None:
        assert total(found) == total(best)


def test_a_floor_placeholder_is_raised_once_a_path_takes_it():
    """On the chain with room for all of it, the path over roofline placeholders takes
    the whole chain (one load and one write, 3,276.8, against 3,276.8 per op alone); the
    raised placeholder is never below the roofline one, and both are made once."""
    ctx = _chain()
    low = floor_placeholder(ctx, (0, 1, 2), False)
    high = floor_placeholder(ctx, (0, 1, 2), True)
    assert low is not None and high is not None
    assert low.latency == Fraction(32768, 10) and high.latency >= low.latency
    assert low.config is None and high.config is None
    assert floor_placeholder(ctx, (0, 1, 2), True) is high
