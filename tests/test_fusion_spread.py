"""``spread``: a window's improvement copied onto the twin stretches of the schedule;
``copy_fastest``: a stretch given the subgraphs of a faster one that runs twin ops; and
``Window.holds``, the window's constraints checked on a given sequence."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from models.fusion import parse_problem
from solver.fusion import teamkorea
from solver.fusion.context import ScoringContext
from solver.fusion.cpsat import accepted_whole, as_planned, as_variants, total
from solver.fusion.cpsat_model import frame
from solver.fusion.evaluate import evaluate
from solver.fusion.greedy import greedy
from solver.fusion.problem import DEFAULT_RULES, Rules
from solver.fusion.schedule import to_solution
from solver.fusion.spread import MOST_SUBGRAPHS, copy_fastest, spread
from solver.fusion.variants import Variant, make_variant
from tests.fusion_cases import QUICK, greedy_windows, problems


def two_chains(reader_of_the_second: bool) -> dict:
    """Two copies of a three-op Pointwise chain on 256 x 256 tensors (T0-T3, T4-T7); with
    ``reader_of_the_second`` a seventh op reads the second chain's first intermediate (T5)."""
    ops = 7 if reader_of_the_second else 6
    inputs = [[0], [1], [2], [4], [5], [6], [5]][:ops]
    outputs = [[1], [2], [3], [5], [6], [7], [8]][:ops]
    return {"widths": [256] * (ops + 2), "heights": [256] * (ops + 2),
            "inputs": inputs, "outputs": outputs, "base_costs": [100] * ops,
            "op_types": ["Pointwise"] * ops, "fast_memory_capacity": 200_000,
            "slow_memory_bandwidth": 10, "native_granularity": [128, 128]}


def alone(ctx: ScoringContext, q: int) -> Variant:
    found = make_variant(ctx, (q,), frozenset(), frozenset())
    assert found is not None
    return found


def fused(ctx: ScoringContext, ops: tuple[int, ...]) -> Variant:
    found = make_variant(ctx, ops, frozenset(), frozenset())
    assert found is not None
    return found


def assert_valid(ctx: ScoringContext, schedule: list[Variant]) -> None:
    verdict = evaluate(ctx.problem, to_solution(ctx, as_planned(schedule)), ctx.rules)
    assert verdict.valid, verdict.errors
    assert verdict.total == total(schedule)


def test_a_window_that_fuses_one_chain_fuses_its_twin_too():
    ctx = ScoringContext(parse_problem(two_chains(False)), every_tile=True)
    unfused = [alone(ctx, q) for q in range(6)]
    old, new = unfused[:3], [fused(ctx, (0, 1, 2))]
    assert total(new) < total(old)
    out = spread(ctx, new + unfused[3:], old, new, 0)
    assert [v.ops for v in out] == [(0, 1, 2), (3, 4, 5)]
    assert out[1].latency == new[0].latency
    assert_valid(ctx, out)


def test_a_twin_whose_copy_would_drop_a_tensor_read_later_keeps_its_subgraphs():
    """The second chain's T5 is also read by op 6, after it: fused, the chain would not
    write T5, so the copy is refused there, and the schedule stays valid."""
    ctx = ScoringContext(parse_problem(two_chains(True)), every_tile=True)
    unfused = [alone(ctx, q) for q in range(7)]
    old, new = unfused[:3], [fused(ctx, (0, 1, 2))]
    out = spread(ctx, new + unfused[3:], old, new, 0)
    assert [v.ops for v in out] == [(0, 1, 2), (3,), (4,), (5,), (6,)]
    assert_valid(ctx, out)


def test_the_window_own_stretch_is_not_copied_onto_itself():
    """Only the other chain changes, whichever of the two the window freed."""
    ctx = ScoringContext(parse_problem(two_chains(False)), every_tile=True)
    unfused = [alone(ctx, q) for q in range(6)]
    old, new = unfused[3:], [fused(ctx, (3, 4, 5))]
    out = spread(ctx, unfused[:3] + new, old, new, 3)
    assert [v.ops for v in out] == [(0, 1, 2), (3, 4, 5)]
    assert_valid(ctx, out)


def two_forks() -> dict:
    """Twice FORK of ``test_fusion_teamkorea``: op 0 makes T1, read by ops 1 and 2; op 3
    makes T5, read by ops 4 and 5; every tensor 128 x 128."""
    return {"widths": [128] * 8, "heights": [128] * 8,
            "inputs": [[0], [1], [1], [4], [5], [5]], "outputs": [[1], [2], [3], [5], [6], [7]],
            "base_costs": [1_000] * 6, "op_types": ["Pointwise"] * 6,
            "fast_memory_capacity": 1_000_000, "slow_memory_bandwidth": 10,
            "native_granularity": [128, 128]}


def test_a_copy_the_teamkorea_reading_refuses_across_subgraphs_is_not_made():
    """[0, 1], [0], [2], [3], [3], [5], [4]; the window turns [0], [2] into [0, 2] (op 1
    already runs with op 0). Its twin [3], [5] as [3, 5] keeps T5 ephemeral while op 4,
    after, reads the T5 the first [3] wrote: the window's constraints hold (SEMANTICS.md
    makes the copy), but op 4 runs with no copy of op 3, which the teamkorea reading
    refuses, so there the twin stays as it was."""
    for semantics in ("default", "teamkorea"):
        rules = teamkorea.RULES if semantics == "teamkorea" else DEFAULT_RULES
        ctx = ScoringContext(parse_problem(two_forks()), rules, semantics=semantics)
        old, new = [alone(ctx, 0), alone(ctx, 2)], [fused(ctx, (0, 2))]
        rest = [alone(ctx, q) for q in (3, 3, 5, 4)]
        assert total(new) < total(old)
        out = spread(ctx, [fused(ctx, (0, 1)), *new, *rest], old, new, 1)
        copied = [(0, 1), (0, 2), (3,), (3, 5), (4,)]
        kept = [(0, 1), (0, 2), (3,), (3,), (5,), (4,)]
        assert [v.ops for v in out] == (copied if semantics == "default" else kept)
        assert accepted_whole(ctx, out)
        if semantics == "teamkorea":
            assert not accepted_whole(ctx, [fused(ctx, ops) for ops in copied])


def test_a_window_holds_a_sequence_exactly_when_the_evaluator_accepts_it():
    """Greedy's subgraphs inside any window of them, in any order: the window holds the
    order exactly when the whole schedule is valid (both happen among the examples)."""
    seen: set[bool] = set()

    @QUICK
    @given(case=greedy_windows(), data=st.data())
    def check(case, data):
        ctx, schedule, a, b = case
        window, inside = frame(ctx, schedule, a, b)
        assert window.holds(inside)
        order = data.draw(st.permutations(inside))
        verdict = evaluate(ctx.problem, to_solution(
            ctx, as_planned([*schedule[:a], *order, *schedule[b:]])), ctx.rules)
        assert window.holds(order) == verdict.valid
        seen.add(verdict.valid)

    check()
    assert seen == {True, False}


def test_a_stretch_cut_otherwise_takes_the_subgraphs_of_a_faster_twin_stretch():
    """The first chain runs as one subgraph, the second as [3, 4], [5]: alike op for op but
    not subgraph for subgraph, so ``spread`` never compares them; ``copy_fastest`` gives
    the second chain the first one's subgraph."""
    ctx = ScoringContext(parse_problem(two_chains(False)), every_tile=True)
    schedule = [fused(ctx, (0, 1, 2)), fused(ctx, (3, 4)), alone(ctx, 5)]
    assert schedule[0].latency < schedule[1].latency + schedule[2].latency
    out = copy_fastest(ctx, schedule, time.monotonic() + 10)
    assert [v.ops for v in out] == [(0, 1, 2), (3, 4, 5)]
    assert_valid(ctx, out)


def test_a_faster_twin_stretch_is_not_copied_where_its_tensors_are_read_later():
    """Op 6 reads T5 after the second chain: fused as the first is, it would not write T5."""
    ctx = ScoringContext(parse_problem(two_chains(True)), every_tile=True)
    schedule = [fused(ctx, (0, 1, 2)), fused(ctx, (3, 4)), alone(ctx, 5), alone(ctx, 6)]
    assert copy_fastest(ctx, schedule, time.monotonic() + 10) == schedule


def doubled(raw: dict) -> dict:
    """Two copies of a problem side by side: the second's ops and tensors follow the
    first's, numbered alike."""
    m = len(raw["widths"])
    out = dict(raw)
    for key in ("widths", "heights", "base_costs", "op_types"):
        out[key] = raw[key] * 2
    for key in ("inputs", "outputs"):
        out[key] = raw[key] + [[t + m for t in ts] for ts in raw[key]]
    return out


@QUICK
@given(raw=problems(max_ops=5))
def test_copies_onto_a_twin_copy_of_the_graph_keep_the_schedule_valid_and_faster(raw):
    """Greedy's schedule for the first copy, then the second copy unfused: every copy made
    keeps the schedule valid and makes it faster, and where greedy's copy is the faster one
    some copy is made."""
    ctx = ScoringContext(parse_problem(doubled(raw)), Rules())
    single = ScoringContext(parse_problem(raw), Rules())
    first = [make_variant(ctx, v.ops, v.retained_in, v.retained_out)
             for v in as_variants(single, greedy(single))]
    n = single.problem.num_ops
    second = [alone(ctx, q + n) for q in single.graph.topological_order]
    schedule = [*first, *second]
    assert_valid(ctx, schedule)
    out = copy_fastest(ctx, schedule, time.monotonic() + 10)
    assert_valid(ctx, out)
    assert total(out) <= total(schedule)
    if total(first) < total(second) and len(first) <= MOST_SUBGRAPHS:
        assert total(out) < total(schedule)
