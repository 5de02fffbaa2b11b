"""Zones (bound/zones.py): ops S6.4 keeps apart cut the graph, no subgraph spans the cut, and
the cover's fillers pay per zone."""

from __future__ import annotations

import time

import pytest

from models.fusion import FusionSolution, parse_problem
from solver.fusion.bound import cover
from solver.fusion.bound.roles import always_split_root, never_together
from solver.fusion.bound.zones import priced_zones, zones
from solver.fusion.candidates import Attempted, connected_op_sets
from solver.fusion.cpsat import as_variants
from solver.fusion.evaluate import evaluate
from solver.fusion.greedy import greedy
from solver.fusion.problem import Rules
from solver.fusion.score import ScoringContext
from tests.fusion_oracle import optimum

MODES = ["per_native_k", "per_op"]


def _split_chain(head: bool = False) -> dict:
    """``MatMul -> Pointwise -> MatMul(K 32)``, native 16: a cheap MatMul, a Pointwise op
    costing 5,000 a tile, then a cheap split-K root whose LHS that op makes and whose
    operands are reloaded (bandwidth 1); with ``head``, a fourth MatMul reads the root's
    output directly, so it may run as a head and S6.4 no longer binds it."""
    raw = {"widths": [16, 32, 32, 32, 16, 16], "heights": [16, 16, 16, 16, 32, 16],
           "inputs": [[0, 1], [2], [3, 4]], "outputs": [[2], [3], [5]],
           "base_costs": [1, 5000, 1], "op_types": ["MatMul", "Pointwise", "MatMul"],
           "fast_memory_capacity": 1000, "slow_memory_bandwidth": 1,
           "native_granularity": [16, 16]}
    if head:
        raw["widths"] += [16, 16]
        raw["heights"] += [16, 16]
        raw["inputs"].append([5, 6])
        raw["outputs"].append([7])
        raw["base_costs"].append(1)
        raw["op_types"].append("MatMul")
    return raw


def test_a_pointwise_op_and_the_split_root_whose_operand_it_makes_are_never_together():
    raw = _split_chain()
    problem = parse_problem(raw)
    ctx = ScoringContext(problem)
    assert always_split_root(ctx, 2)
    assert never_together(ctx) == {frozenset({1, 2})}
    assert zones(ctx) == (0, 0, 1)
    # the evaluator refuses them together (S6.4: the tile cannot span K = 32)
    together = FusionSolution.model_validate({
        "subgraphs": [[0], [1, 2]], "granularities": [[16, 16, 16], [16, 16, 16]],
        "tensors_to_retain": [[], []], "subgraph_latencies": [0, 0]})
    assert "w >= 32" in evaluate(problem, together).error.msg
    sets = connected_op_sets(ctx.graph, range(3), 100, never_together(ctx))
    assert sets.complete and sorted(sets.sets) == [(0,), (0, 1), (1,), (2,)]
    assert len(connected_op_sets(ctx.graph, range(3), 100).sets) == 6


def test_a_split_k_matmul_that_may_be_a_head_splits_nothing():
    ctx = ScoringContext(parse_problem(_split_chain(head=True)))
    assert not always_split_root(ctx, 2)
    assert never_together(ctx) == frozenset()
    assert zones(ctx) == (0, 0, 0, 0)


def test_a_zone_whose_op_sets_were_all_priced_leaves_nothing_to_fillers():
    ctx = ScoringContext(parse_problem(_split_chain()))
    assert priced_zones(ctx, Attempted.of([(2,)])) == {1}
    assert priced_zones(ctx, Attempted.of([(0,), (1,)])) == set()  # (0, 1) is not priced
    assert priced_zones(ctx, Attempted.of([(0,), (1,), (0, 1), (2,)])) == {0, 1}
    compute = cover.make_fillers(ctx, [(2,)]).compute
    assert compute[2] is None and None not in compute[:2]


@pytest.mark.parametrize("mode", MODES)
def test_fillers_pay_per_zone_and_stay_below_the_optimum(mode, monkeypatch):
    """With nothing priced, the fillers alone: the Pointwise op's compute (zone 0) cannot
    hide the split root's reloads (zone 1), so the cover pays both, above what one row
    over the whole graph charges and below the best schedule there is."""
    ctx = ScoringContext(parse_problem(_split_chain()), Rules(reduction_cost=mode))
    fillers = cover.make_fillers(ctx, [])
    zoned = cover._solve_cover(ctx, [], fillers, time.monotonic() + 10)[0]
    monkeypatch.setattr(cover, "zones", lambda c: (0,) * c.problem.num_ops)
    whole = cover._solve_cover(ctx, [], fillers, time.monotonic() + 10)[0]
    best = optimum(ctx, extra=as_variants(ctx, greedy(ctx)))
    assert whole < zoned <= best
