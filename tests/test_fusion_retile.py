"""``retile``: a schedule's subgraphs at the fastest of every integer granularity."""

from __future__ import annotations

import itertools

import pytest

from models.fusion import parse_problem
from solver.fusion import retile as retile_module
from solver.fusion.bound.pricing import least
from solver.fusion.context import ScoringContext
from solver.fusion.cpsat import as_planned, total
from solver.fusion.evaluate import evaluate
from solver.fusion.retile import SPLITS, retile
from solver.fusion.schedule import to_solution
from solver.fusion.score import best_config, config_at
from solver.fusion.variants import make_variant


def resident_weight(capacity: int) -> dict:
    """A Pointwise op makes a 32 x 16 weight (T1) and keeps it for a MatMul of a 32 x 32
    LHS (T0) by it, under native 16 x 16 tiles: with the weight resident (512 elements)
    the MatMul's slices share what is left of ``capacity``."""
    return {"widths": [32, 16, 16, 16], "heights": [32, 32, 32, 32],
            "inputs": [[0, 1], [3]], "outputs": [[2], [1]], "base_costs": [1000, 100],
            "op_types": ["MatMul", "Pointwise"], "fast_memory_capacity": capacity,
            "slow_memory_bandwidth": 10, "native_granularity": [16, 16]}


@pytest.mark.parametrize("capacity", [625, 640, 700])
def test_retiling_finds_the_fastest_of_every_integer_granularity(capacity):
    """With 113-188 elements of room, the config search's candidates (powers of two,
    caps, narrowings of the cheapest three that do not fit) miss the best tile:
    ``retile`` reaches the least latency over all 16 x 16 x 16 granularities and named
    traversals, and the schedule it returns is valid at the latency it claims."""
    ctx = ScoringContext(parse_problem(resident_weight(capacity)), every_tile=True)
    weight = frozenset({1})
    maker = make_variant(ctx, (1,), frozenset(), weight)
    user = make_variant(ctx, (0,), weight, frozenset())
    assert maker is not None and user is not None
    shape = ctx.shape((0,))
    fastest = min(found.latency for gran in itertools.product(range(1, 17), repeat=3)
                  if (found := config_at(ctx, shape, gran, weight, frozenset())) is not None)
    assert fastest < user.latency  # the search's own best misses it
    schedule = retile(ctx, [maker, user], deadline=float("inf"))
    assert schedule[1].latency == fastest
    assert best_config(ctx, (0,), weight, frozenset()) == schedule[1].config  # remembered
    verdict = evaluate(ctx.problem, to_solution(ctx, as_planned(schedule)), ctx.rules)
    assert verdict.valid and verdict.total == total(schedule)


def test_a_walk_asked_for_something_faster_stops_where_nothing_waiting_is():
    """``least(..., below=...)``: the walk answers None as soon as the least floor waiting
    is not below the latency asked to beat, and otherwise what it answers without."""
    ctx = ScoringContext(parse_problem(resident_weight(700)), every_tile=True)
    shape, weight = ctx.shape((0,)), frozenset({1})
    found = least(ctx, shape, weight, frozenset(), False, SPLITS)
    assert found is not None and found[1]
    assert least(ctx, shape, weight, frozenset(), False, SPLITS, below=found[0]) is None
    assert least(ctx, shape, weight, frozenset(), False, SPLITS, below=found[0] + 1) == found


def test_twin_subgraphs_share_one_walk(monkeypatch):
    """Two copies of the resident-weight pair (a repeated layer): each kind of subgraph is
    walked once, and the twin gets the tile found, scored on its own ops."""
    one = resident_weight(640)
    raw = {key: one[key] * 2 for key in ("widths", "heights", "base_costs", "op_types")}
    raw["inputs"] = one["inputs"] + [[t + 4 for t in ins] for ins in one["inputs"]]
    raw["outputs"] = one["outputs"] + [[t + 4 for t in outs] for outs in one["outputs"]]
    raw.update({key: one[key] for key in ("fast_memory_capacity", "slow_memory_bandwidth",
                                          "native_granularity")})
    ctx = ScoringContext(parse_problem(raw), every_tile=True)
    schedule = [make_variant(ctx, (1,), frozenset(), frozenset({1})),
                make_variant(ctx, (0,), frozenset({1}), frozenset()),
                make_variant(ctx, (3,), frozenset(), frozenset({5})),
                make_variant(ctx, (2,), frozenset({5}), frozenset())]
    walks = []
    monkeypatch.setattr(retile_module, "least",
                        lambda *args, **kwargs: walks.append(args[1].ops) or least(*args, **kwargs))
    out = retile(ctx, schedule, deadline=float("inf"))
    assert sorted(walks) == [(0,), (1,)]
    assert out[1].latency == out[3].latency < schedule[3].latency
    assert out[3].config.gran == out[1].config.gran
    verdict = evaluate(ctx.problem, to_solution(ctx, as_planned(out)), ctx.rules)
    assert verdict.valid and verdict.total == total(out)
