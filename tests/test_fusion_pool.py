"""The pool of op sets around an incumbent (``solver/fusion/pool.py``) and the whole-graph
set partition over it that ends the search (``cpsat.relink``)."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from hypothesis import given

from models.fusion import parse_problem
from solver.fusion import cpsat
from solver.fusion.candidates import is_connected
from solver.fusion.cpsat import as_variants, relink, total
from solver.fusion.pool import halves, merged, pool, reshaped
from solver.fusion.problem import Rules
from solver.fusion.score import ScoringContext
from solver.fusion.unfused import unfused
from tests.fusion_cases import problems
from tests.test_fusion_cpsat import MODES, QUICK, assert_valid


def _pointwise(edges: list[tuple[list[int], list[int]]], tensors: int, side: int = 128,
               capacity: int = 100_000) -> ScoringContext:
    raw = {"widths": [side] * tensors, "heights": [side] * tensors,
           "inputs": [i for i, _ in edges], "outputs": [o for _, o in edges],
           "base_costs": [100] * len(edges), "op_types": ["Pointwise"] * len(edges),
           "fast_memory_capacity": capacity, "slow_memory_bandwidth": 10,
           "native_granularity": [128, 128]}
    return ScoringContext(parse_problem(raw))


def _diamond() -> ScoringContext:
    """0 -> {1, 2} -> 3, and op 4 apart (reads a graph input of its own)."""
    return _pointwise([([0], [1]), ([1], [2]), ([1], [3]), ([2, 3], [4]), ([5], [6])], 7)


def test_halves_are_the_connected_parts_of_every_cut_of_the_op_order():
    """Ops 0 and 1 both feed op 2 and nothing else joins them: {0, 1} is not offered."""
    ctx = _pointwise([([0], [1]), ([2], [3]), ([1, 3], [4])], 5)
    assert halves(ctx.graph, [(0, 1, 2)]) == {(0,), (1, 2), (2,)}


def test_merges_join_exactly_the_subgraphs_that_exchange_a_tensor():
    ctx = _diamond()
    schedule = [(0,), (1,), (4,), (2,), (3,)]
    assert merged(ctx.graph, schedule) == {(0, 1), (0, 2), (1, 3), (2, 3)}


def test_reshapes_move_one_op_out_or_one_neighbour_in():
    ctx = _diamond()
    found = reshaped(ctx.graph, [(0, 1, 3), (4,)])
    # out: 0 or 3 (1 alone joins them; without it {0, 3} is not connected)
    assert {(1, 3), (0, 1)} <= found and (0, 3) not in found
    # in: op 2 is the only op adjacent to {0, 1, 3}; op 4 has no neighbour
    assert (0, 1, 2, 3) in found
    assert found == {(1, 3), (0, 1), (0, 1, 2, 3)}


def test_the_pool_keeps_the_incumbent_first_and_stays_within_its_budget():
    ctx = _diamond()
    schedule = [(0,), (1,), (4,), (2,), (3,)]
    everything = pool(ctx.graph, schedule, 1000)
    assert everything[:5] == schedule
    assert len(set(everything)) == len(everything)
    assert set(merged(ctx.graph, schedule)) <= set(everything)
    assert pool(ctx.graph, schedule, 6) == everything[:6]
    assert pool(ctx.graph, schedule, 2) == schedule  # the incumbent whatever the budget


def _far_apart() -> tuple[ScoringContext, list]:
    """Chain 0 -> 2 of 512 x 512 Pointwise ops, op 1 apart, run 0, 1, 2. The chain's middle
    tensor (262,144 elements) cannot be retained in a 49,152-element fast memory, but both
    ops fused run 128 x 128 tiles through it and never write it: only a merge of the two
    subgraphs gets there, and they are not neighbours in the schedule."""
    ctx = _pointwise([([0], [1]), ([3], [4]), ([1], [2])], 5, side=512,
                     capacity=3 * 128 * 128)
    return ctx, as_variants(ctx, unfused(ctx))


def test_the_set_partition_over_the_pool_merges_subgraphs_run_apart(monkeypatch):
    ctx, schedule = _far_apart()
    assert [v.ops for v in schedule] == [(0,), (1,), (2,)]
    offered: list = []
    found = relink(ctx, schedule, time.monotonic() + 10, 0, 1, on_better=offered.append)
    assert_valid(ctx, found)
    assert any({0, 2} <= set(v.ops) for v in found)
    # each better schedule is offered as it comes, the last one is the answer
    assert offered and offered[-1] == found
    assert all(total(a) > total(b) for a, b in zip([schedule, *offered[:-1]], offered, strict=True))
    # the tensor's write and load (2 x 262,144 / 10) saved, less nothing: the ops' compute
    # is hidden under their traffic either way
    assert total(schedule) - total(found) == Fraction(2 * 512 * 512, 10)
    # the incumbent's own op sets alone, reordered and relinked, cannot do it
    monkeypatch.setattr(cpsat, "pool", lambda graph, own, budget: sorted(set(own)))
    alone = relink(ctx, schedule, time.monotonic() + 10, 0, 1)
    assert total(alone) == total(schedule)


@pytest.mark.parametrize("mode", MODES)
@QUICK
@given(raw=problems(max_ops=7))
def test_relinking_over_the_pool_is_valid_and_never_worse_on_random_graphs(raw, mode):
    """From the unfused schedule: every pool set is connected, listed in topological
    order and offered once, and the set partition's answer passes the evaluator."""
    ctx = ScoringContext(parse_problem(raw), Rules(reduction_cost=mode), every_tile=True)
    schedule = as_variants(ctx, unfused(ctx))
    sets = pool(ctx.graph, [v.ops for v in schedule], 600)
    order = ctx.graph.topological_order
    assert len(set(sets)) == len(sets)
    for ops in sets:
        assert is_connected(ctx.graph, ops)
        assert list(ops) == sorted(ops, key=order.index)
    found = relink(ctx, schedule, time.monotonic() + 5, 0, 1)
    assert total(found) <= total(schedule)
    assert_valid(ctx, found)
