"""Allocator-exact L1 (``solver/layout/address.py``): offsets that TT-Metal's allocator
could hold, found whenever some exist, and plans whose bytes fit every step but whose
buffers cannot be placed repaired (cpsat) or rejected (a baseline's plan)."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.device import PRESETS
from models.layout import LayoutPlan, parse_graph
from solver.deadline import now
from solver.layout import SOLVERS, SolveOptions, _make_room, solve
from solver.layout.address import Block, place, place_assignment, places
from solver.layout.cpsat import fits_whole
from solver.layout.evaluate import evaluate
from solver.layout.memory import ALIGNMENT
from solver.layout.plan import build_plan, total_us
from solver.layout.problem import analyze
from tests.conftest import ROOT
from tests.layout_fixtures import load, op, repeated, tensor, with_usable_l1

TILE = 2048


def _valid(offsets: dict, found: list[Block], bottom: list[int], capacity: int) -> bool:
    """The allocator's rules, checked pair by pair."""
    at = {b: offsets[(b.tensor, b.dst)] for b in found}
    for b in found:
        if at[b] % ALIGNMENT or at[b] + b.size > capacity:
            return False
        if any(at[b] < bottom[k] for k in range(b.first, b.last + 1)):
            return False
    return all(a.last < b.first or b.last < a.first or at[a] + a.size <= at[b]
               or at[b] + b.size <= at[a] for a, b in itertools.combinations(found, 2))


def test_circular_buffers_make_a_plan_that_fits_by_sum_unplaceable():
    # Three tiles of L1. Step 0's op has a tile of circular buffers at the bottom, so p
    # (two tiles, live at steps 0-1) sits on tiles 1-2; step 2's op also has a tile of
    # them, so q (live at steps 1-2) sits above tile 0 too, and at step 1 only tile 0 is
    # free of p. The bytes fit every step: 3, 3 and 2 tiles.
    p, q = Block("p", None, 2 * TILE, 0, 1), Block("q", None, TILE, 1, 2)
    bottom = [TILE, 0, TILE]
    assert all(bottom[k] + sum(b.size for b in (p, q) if b.first <= k <= b.last) <= 3 * TILE
               for k in range(3))
    tight = place([p, q], bottom, 3 * TILE, now() + 5)
    assert not tight.fits and tight.method == "none"
    assert max(tight.height) > 3 * TILE
    roomy = place([p, q], bottom, 4 * TILE, now() + 5)
    assert roomy.fits and _valid(roomy.offsets, [p, q], bottom, 4 * TILE)
    assert max(roomy.height) <= 4 * TILE


def test_offsets_are_placed_from_the_top_like_the_allocator():
    a, b = Block("a", None, TILE, 0, 0), Block("b", None, TILE, 0, 0)
    found = place([a, b], [0], 8 * TILE, now() + 5)
    assert found.fits and found.method == "top-down"
    assert sorted(found.offsets.values()) == [6 * TILE, 7 * TILE]


def test_the_exact_search_places_what_the_greedy_orders_cannot():
    # Five units of L1; step 1's circular buffers take units 0-1. The small buffer s
    # (steps 0-1) must sit at unit 4: below it the big one b (step 0, three units) has no
    # room, and at step 1 the middle one m (two units) needs units 2-3. Top-down puts b
    # at the top, lowest-first puts s on top of b: both fail.
    s_, m_ = Block("s", None, ALIGNMENT, 0, 1), Block("m", None, 2 * ALIGNMENT, 1, 1)
    b_ = Block("b", None, 3 * ALIGNMENT, 0, 0)
    found = place([b_, m_, s_], [0, 2 * ALIGNMENT], 5 * ALIGNMENT, now() + 5)
    assert found.fits and found.method == "cp-sat"
    assert found.offsets[("s", None)] == 4 * ALIGNMENT
    assert found.offsets[("m", None)] == 2 * ALIGNMENT
    assert _valid(found.offsets, [b_, m_, s_], [0, 2 * ALIGNMENT], 5 * ALIGNMENT)


def test_lowest_first_places_what_top_down_cannot():
    # Four units; step 1's circular buffers take unit 0. Top-down puts the big buffer on
    # units 1-3 and leaves the small one only unit 0; lowest-first puts the big one at the
    # bottom and the small one above it.
    small, big = Block("s", None, ALIGNMENT, 0, 1), Block("b", None, 3 * ALIGNMENT, 0, 0)
    found = place([small, big], [0, ALIGNMENT], 4 * ALIGNMENT, now() + 5)
    assert found.fits and found.method == "bottom-up"
    assert found.offsets == {("s", None): 3 * ALIGNMENT, ("b", None): 0}


def test_a_copy_and_its_tensor_are_separate_buffers():
    home, copy = Block("t", None, TILE, 0, 2), Block("t", "l1:interleaved", TILE, 1, 2)
    found = place([home, copy], [0, 0, 0], 2 * TILE, now() + 5)
    assert found.fits and set(found.offsets) == {("t", None), ("t", "l1:interleaved")}
    assert _valid(found.offsets, [home, copy], [0, 0, 0], 2 * TILE)


def _exhaustive(found: list[Block], bottom: list[int], capacity: int) -> bool:
    """Whether any offsets fit, by trying every aligned offset of every buffer."""
    ranges = [range(0, capacity - b.size + 1, ALIGNMENT) for b in found]
    for offsets in itertools.product(*ranges):
        placed = {(b.tensor, b.dst): x for b, x in zip(found, offsets, strict=True)}
        if _valid(placed, found, bottom, capacity):
            return True
    return False


blocks_and_floors = st.integers(2, 4).flatmap(lambda steps: st.tuples(
    st.lists(st.tuples(st.integers(1, 3), st.integers(0, steps - 1), st.integers(0, steps - 1)),
             min_size=1, max_size=4),
    st.lists(st.integers(0, 2), min_size=steps, max_size=steps),
    st.integers(2, 5)))


@settings(max_examples=150, deadline=None)
@given(blocks_and_floors)
def test_offsets_are_found_exactly_when_some_exist(case):
    """Against exhaustive search, in units of the alignment: whatever ``place`` returns as
    fitting obeys every rule, and it says it does not fit only when nothing does."""
    spans, floor_units, capacity_units = case
    found = [Block(f"t{i}", None, size * ALIGNMENT, min(a, b), max(a, b))
             for i, (size, a, b) in enumerate(spans)]
    bottom = [f * ALIGNMENT for f in floor_units]
    capacity = capacity_units * ALIGNMENT
    placement = place(found, bottom, capacity, now() + 5)
    if placement.fits:
        assert _valid(placement.offsets, found, bottom, capacity)
    else:
        assert not _exhaustive(found, bottom, capacity)


# gelu and add ops on one [1, 64, 256] shape, on a device with 17,879 usable L1 bytes per
# core: the plan that is optimal by sum holds four activations in L1, but the ops'
# circular buffers (8-12 KiB from the bottom) leave no offsets for them. Found by a seeded
# search over small random graphs.
PLANTED = {
    "format": "layoutsat-graph", "version": 1, "name": "cb-clash",
    "tensors": [tensor("x", [1, 64, 256], "input")] + [
        tensor(name, [1, 64, 256]) for name in ("g0", "a1", "g2", "a3", "a4", "g5")],
    "ops": [op("g0", "gelu", ["x"], ["g0"]), op("a1", "add", ["g0", "x"], ["a1"]),
            op("g2", "gelu", ["g0"], ["g2"]), op("a3", "add", ["x", "a1"], ["a3"]),
            op("a4", "add", ["g2", "x"], ["a4"]), op("g5", "gelu", ["a4"], ["g5"])],
    "outputs": ["g5"],
}
PLANTED_L1 = 17_879


def test_cpsat_repairs_a_plan_that_fits_by_sum_but_not_by_address():
    graph = parse_graph(PLANTED)
    device = with_usable_l1(graph, PLANTED_L1)
    problem = analyze(graph, device)
    by_sum = solve(graph, "cpsat", device, time_limit_s=10, workers=2, capacity="sum")
    assert by_sum.status == "optimal" and by_sum.l1_allocation == "sum"
    assert all(t.l1_offset is None for t in by_sum.tensors.values())
    # the same optimum from the policy: its buffers have no offsets within the usable L1;
    # placed anyway (overflowing), the evaluator rejects them
    optimum = SOLVERS["cpsat"](problem, SolveOptions(now() + 10, 0, 2))
    assert optimum.objective == pytest.approx(by_sum.total_latency_us)
    placement = place_assignment(problem, optimum.assignment, now() + 5)
    assert not placement.fits
    rejected = evaluate(problem, build_plan(problem, optimum.assignment, "cpsat", 0.0,
                                            offsets=placement.offsets))
    assert not rejected.valid
    assert {v.kind for v in rejected.violations} & {"address.range", "address.cb_clash",
                                                    "address.overlap"}
    by_address = solve(graph, "cpsat", device, time_limit_s=10, workers=2)
    assert by_address.l1_allocation == "address" and by_address.violations == []
    assert evaluate(problem, by_address).valid
    l1 = [t for t in by_address.tensors.values() if t.buffer == "l1"]
    assert l1 and all(t.l1_offset is not None for t in l1)
    # a different plan, no cheaper than the sum model's optimum, which stays its bound
    assert by_address.total_latency_us > by_sum.total_latency_us
    assert by_address.stats.best_bound == pytest.approx(by_sum.total_latency_us)
    assert by_address.status == "feasible"
    # repaired by the model, not the fallback to a baseline plan
    fallback = min(solve(graph, name, device).total_latency_us for name in ("dram", "dfsharding"))
    assert by_address.total_latency_us < fallback - 0.5


def test_a_baseline_plan_that_cannot_be_placed_is_rejected_and_cpsat_places_one():
    """Baselines imitate tools that count bytes; their plans are not repaired. On the
    inception example with 104,000 usable L1 bytes per core, greedy's plan fits by sum
    (valid with ``capacity="sum"``) but has no offsets: rejected, naming the rule."""
    graph = parse_graph(load(ROOT / "benchmarks" / "layout" / "inception-concat.json"))
    device = with_usable_l1(graph, 104_000)
    assert solve(graph, "greedy", device, capacity="sum").status == "feasible"
    plan = solve(graph, "greedy", device)
    assert plan.status == "invalid" and plan.l1_allocation == "address"
    kinds = {v.kind for v in plan.violations}
    assert kinds and kinds <= {"address.range", "address.cb_clash", "address.overlap"}
    placed = solve(graph, "cpsat", device, time_limit_s=10, workers=2)
    assert placed.status in ("optimal", "feasible") and placed.violations == []
    assert placed.total_latency_us < solve(graph, "dram", device).total_latency_us
    assert placed.total_latency_us <= solve(graph, "greedy", device,
                                            capacity="sum").total_latency_us + 1e-6


def test_copies_carry_their_own_offsets_and_the_evaluator_checks_them():
    graph = parse_graph(load(ROOT / "benchmarks" / "layout" / "resnet50-bottleneck.json"))
    problem = analyze(graph, PRESETS["wormhole_n150"])
    plan = solve(graph, "greedy", "wormhole_n150")
    copies = [c for c in plan.reshards if c.to.startswith("l1")]
    assert copies and all(c.l1_offset is not None for c in copies)
    data = plan.model_dump(by_alias=True)
    data["reshards"][plan.reshards.index(copies[0])]["l1_offset"] += ALIGNMENT // 2
    verdict = evaluate(problem, LayoutPlan.model_validate(data))
    where = f"copy of {copies[0].tensor} to {copies[0].to}"
    assert ("address.alignment", where) in {(v.kind, v.where) for v in verdict.violations}


@pytest.mark.parametrize("mode", [{"capacity": "address"}, {"order": "search"}])
def test_a_solve_with_placement_or_order_search_ends_within_its_limit(mode):
    graph = parse_graph(PLANTED)
    device = with_usable_l1(graph, PLANTED_L1)
    started = time.monotonic()
    plan = solve(graph, "cpsat", device, time_limit_s=1.0, workers=2, **mode)
    assert time.monotonic() - started < 1.4
    assert plan.status != "invalid"


def test_the_segment_search_keeps_only_plans_that_place():
    # twelve copies of PLANTED (72 ops): beyond one model, so no time is left after the
    # segment search to repair its plan; it keeps only plans the greedy orders place
    graph = parse_graph(repeated(PLANTED, 12))
    device = with_usable_l1(graph, PLANTED_L1)
    problem = analyze(graph, device)
    assert not fits_whole(problem, 10.0)
    by_sum = solve(graph, "cpsat", device, time_limit_s=10, workers=2, capacity="sum")
    plan = solve(graph, "cpsat", device, time_limit_s=10, workers=2)
    assert plan.schedule == [o.name for o in graph.ops] and evaluate(problem, plan).valid
    assert all(t.l1_offset is not None for t in plan.tensors.values() if t.buffer == "l1")
    # not the fallback to the all-DRAM plan (the cheapest baseline here), and no cheaper
    # than what the sum model allows
    assert plan.total_latency_us < solve(graph, "dram", device).total_latency_us - 2.0
    assert plan.total_latency_us >= by_sum.stats.best_bound - 1e-6


def test_room_is_made_where_a_plan_fits_by_sum_but_not_by_address():
    graph = parse_graph(PLANTED)
    device = with_usable_l1(graph, PLANTED_L1)
    problem = replace(analyze(graph, device), addresses=True)
    by_sum = SOLVERS["cpsat"](replace(problem, addresses=False), SolveOptions(now() + 10, 0, 2))
    assert not places(problem, by_sum.assignment)
    assert places(replace(problem, addresses=False), by_sum.assignment)  # nothing asked
    roomy = _make_room(problem, by_sum.assignment, now() + 10, SolveOptions(now() + 10, 0, 2))
    assert roomy is not None and places(problem, roomy)
    assert evaluate(problem, build_plan(problem, roomy, "cpsat", 0.0)).valid
    assert total_us(problem, roomy) < solve(graph, "dram", device).total_latency_us
