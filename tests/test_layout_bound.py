"""The parts' LP bound of large layout graphs (``solver/layout/bound.py``): never above
the proven optimum on random graphs cut into small parts, never below the per-op floor,
the whole graph's LP when it is one part; cuts where the fewest tensors cross; twin parts
solved once; parts not solved in time; a repair out of time; a part's LP started only when
expected in time. (The repair of plans overflowing L1: ``test_layout_swaps.py``.)"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.layout import parse_graph
from solver.deadline import now
from solver.layout import BASELINES, bound, cpsat, cpsat_model, dram, lns, solve, swaps
from solver.layout.memory import DRAM
from solver.layout.plan import Assignment
from solver.layout.problem import analyze, resolve_device
from solver.relaxation import relax
from tests.layout_fixtures import EXAMPLES, PRESET_PAIR, ROOT, op, tensor, with_usable_l1
from tests.test_layout_cpsat import ROUNDING_US
from tests.test_layout_cpsat_random import graphs, pressed

MODELS = ROOT / "benchmarks/layout/models"
LLAMA_L16 = MODELS / "llama-3.2-1b-prefill128-l16.json"


def _problem(doc: dict, device: str = "wormhole_n150"):
    graph = parse_graph(doc)
    return analyze(graph, resolve_device(graph, device))


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=graphs(max_ops=9), usable_l1=st.sampled_from([12_000, 24_000, 64_000, 1_000_000]),
       sizes=st.sampled_from([(1, 2), (2, 3), (2, 4), (3, 5)]))
def test_parts_bound_never_exceeds_the_proven_optimum(doc, usable_l1, sizes):
    """Random graphs read their input and earlier tensors from several parts (the terms a
    naive sum of parts would pay twice): the sum stays at or below the optimum the whole
    model proves, and at or above the per-op floor."""
    graph = parse_graph(doc)
    device = pressed(graph, usable_l1)
    problem = analyze(graph, device)
    found = bound.lower_bound(problem, now() + 30, [sizes])
    assert found.solved == found.parts
    plan = solve(graph, "cpsat", device, time_limit_s=20, capacity="sum")
    assert plan.status == "optimal"
    assert found.bound_us <= plan.total_latency_us + ROUNDING_US
    assert found.bound_us >= cpsat.latency_floor_us(problem) - ROUNDING_US


@pytest.mark.parametrize("device", PRESET_PAIR)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_parts_bound_of_the_examples_stays_below_their_optimum(path, device):
    """The example graphs (weights, several inputs, forks, joins, outputs read later) cut
    into parts of 3 to 8 ops: at or below the optimum the whole model proves."""
    graph = parse_graph(json.loads(path.read_text()))
    problem = analyze(graph, resolve_device(graph, device))
    found = bound.lower_bound(problem, now() + 60, [(3, 8)])
    assert found.solved == found.parts
    plan = solve(graph, "cpsat", device, time_limit_s=30, workers=2, capacity="sum")
    assert plan.status == "optimal"
    assert found.bound_us <= plan.total_latency_us + ROUNDING_US


def test_one_part_is_the_whole_graphs_relaxation():
    problem = _problem(json.loads((MODELS / "llama-3.2-1b-prefill128-l1.json").read_text()))
    whole = relax(cpsat_model.build(problem).model, 60)
    found = bound.lower_bound(problem, now() + 60, [(1, len(problem.order))])
    assert (found.parts, found.solved) == (1, 1)
    assert found.bound_us == pytest.approx(whole.objective / cpsat_model.UNITS_PER_US, rel=1e-9)


def _chain_with_skip() -> dict:
    """o0 -> o1 -> ... -> o5, and o0's output also read by o2: a cut before o2 separates
    two tensors from their readers, a cut anywhere else one."""
    names = ["x", *(f"t{k}" for k in range(6))]
    ops = [op("o0", "relu", ["x"], ["t0"]), op("o1", "gelu", ["t0"], ["t1"]),
           op("o2", "add", ["t1", "t0"], ["t2"]), op("o3", "relu", ["t2"], ["t3"]),
           op("o4", "gelu", ["t3"], ["t4"]), op("o5", "relu", ["t4"], ["t5"])]
    return {"format": "layoutsat-graph", "version": 1, "name": "skip",
            "tensors": [tensor(n, [1, 64, 128], "input" if n == "x" else "activation")
                        for n in names], "ops": ops, "outputs": ["t5"]}


def test_cuts_go_where_the_fewest_tensors_cross():
    problem = _problem(_chain_with_skip())
    assert bound.crossings(problem) == [0, 1, 2, 1, 1, 1]
    assert bound.cuts(problem, (2, 4)) == [(0, 3), (3, 6)]
    assert bound.cuts(problem, (1, 6)) == [(0, 6)]
    # a first part of one op (cut before o1: 1 crossing) is below the fewest ops allowed
    assert bound.cuts(problem, (2, 5)) == [(0, 3), (3, 6)]
    # no cut gives both parts 4 or 5 ops: equal parts
    assert bound.cuts(problem, (4, 5)) == [(0, 3), (3, 6)]


def test_twin_parts_are_solved_once_and_add_up():
    """The 16-layer Llama: parts cut alike share a key, every part's own LP equals the LP
    of its key's first part, and the bound is their sum."""
    problem = _problem(json.loads(LLAMA_L16.read_text()), "blackhole_p150")
    found = bound.lower_bound(problem, now() + 120, bound.PART_SIZES[:1])
    assert found.solved == found.parts and found.distinct < found.parts / 3
    first_of: dict = {}
    one_by_one = 0.0
    for lo, hi in bound.cuts(problem):
        sub = bound.part(problem, lo, hi)
        lp = relax(cpsat_model.build(sub).model, 60).objective / cpsat_model.UNITS_PER_US
        assert lp == pytest.approx(first_of.setdefault(bound.shape_key(sub), lp), rel=1e-9)
        one_by_one += lp
    assert found.bound_us == pytest.approx(one_by_one, rel=1e-9)


def test_larger_parts_tighten_the_bound_and_give_the_rounding():
    """Cut in parts of 8 to 16 ops, then as one part: the second cut's bound is the whole
    graph's LP, at least the first's, and its rounding is the one returned."""
    problem = _problem(json.loads((MODELS / "llama-3.2-1b-prefill128-l1.json").read_text()))
    n = len(problem.order)
    small = bound.lower_bound(problem, now() + 60, [(8, 16)])
    whole = bound.lower_bound(problem, now() + 60, [(n, n)])
    both = bound.lower_bound(problem, now() + 60, [(8, 16), (n, n)])
    assert small.parts > 1 and whole.parts == 1
    assert small.bound_us <= whole.bound_us
    assert both.bound_us == pytest.approx(whole.bound_us, rel=1e-12) and both.parts == 1
    assert both.rounded.configs == whole.rounded.configs


def test_stopped_bound_counts_the_floor_of_unsolved_parts():
    problem = _problem(json.loads(LLAMA_L16.read_text()))
    found = bound.lower_bound(problem, now())
    assert found.solved == 0 and found.rounded is None
    assert found.bound_us == pytest.approx(cpsat.latency_floor_us(problem), rel=1e-12)


def _fattest(problem, fat: range | None = None) -> Assignment:
    """The ops at steps ``fat`` (default all) write their output in its largest L1
    configuration, the others to DRAM, each operand read from its home where accepted: a
    plan that overflows a small L1 around the fat steps."""
    configs = {}
    for k, name in enumerate(problem.order):
        info = problem.ops[name]
        if fat is None or k in fat:
            configs[name] = max(info.candidates, key=lambda c: problem.bytes_per_core(
                info.output, c.output) if c.output.is_l1 else -1)
        else:
            configs[name] = next(c for c in info.candidates if c.output == DRAM)
    reads = {}
    for name in problem.order:
        info = problem.ops[name]
        homes = [configs[p].output if p else DRAM
                 for p in (problem.tensors[t].producer for t in info.inputs)]
        reads[name] = [h if h in acc else next(iter(acc))
                       for h, acc in zip(homes, configs[name].accepts, strict=True)]
    return Assignment(list(problem.order), configs, reads, {})


def test_a_repair_that_runs_out_of_time_gives_nothing():
    graph = parse_graph(_chain_with_skip())
    problem = analyze(graph, with_usable_l1(graph, 60_000))
    start = _fattest(problem)
    assert swaps.overflows(problem, start)
    assert lns.repair(problem, start, now(), 0, 1) is None


def test_parts_not_solved_take_the_fallbacks_decisions(monkeypatch):
    """A part whose LP is not solved counts its floor, and in the rounding the fallback
    plan's decisions stand in for it; the solved part keeps its own rounding. Without a
    fallback there is no rounding."""
    problem = _problem(_chain_with_skip())
    spans = bound.cuts(problem, (2, 4))
    both = bound.lower_bound(problem, now() + 30, [(2, 4)])
    first_lp = bound._solve_part(bound.part(problem, *spans[0]), now() + 30).bound_us
    later = problem.order[spans[1][0]:]
    solve_part = bound._solve_part
    monkeypatch.setattr(bound, "_solve_part", lambda sub, deadline, *clock: None
                        if sub.order[0] == later[0] else solve_part(sub, deadline))
    fallback = dram.assign(problem)
    found = bound.lower_bound(problem, now() + 30, [(2, 4)], fallback=fallback)
    assert (found.parts, found.solved) == (2, 1)
    assert found.bound_us == pytest.approx(first_lp + cpsat.latency_floor_us(problem, *spans[1]))
    assert all(found.rounded.configs[op] is fallback.configs[op] for op in later)
    assert all(found.rounded.configs[op] is both.rounded.configs[op]
               for op in problem.order[:spans[1][0]])
    assert bound.lower_bound(problem, now() + 30, [(2, 4)]).rounded is None


@pytest.mark.parametrize("limit", [1.5, 2.0, 4.0])
def test_a_short_limit_holds_and_the_bound_only_starts_what_fits(limit):
    """ResNet-50 at batch 8 (two parts of about 2,700 candidate configurations each, some
    3 s to build and solve): under short limits no part is started that would run past
    the deadline, the solve ends within its limit, and the plan is still valid and no
    worse than the best baseline."""
    graph = parse_graph(json.loads((MODELS / "resnet50-b8.json").read_text()))
    started = time.monotonic()
    plan = solve(graph, "cpsat", "wormhole_n150", time_limit_s=limit, workers=2)
    assert time.monotonic() - started <= limit + 0.3
    assert plan.status == "feasible" and not plan.violations
    best = min(solve(graph, b, "wormhole_n150").total_latency_us for b in BASELINES)
    assert plan.total_latency_us <= best


def test_a_parts_lp_is_expected_at_the_rate_timed_before_it(monkeypatch):
    """Before any LP is timed a part's LP is expected to take ``lp_estimate_s``; after, the
    slowest rate per variable seen times ``LP_MARGIN``; a part built with less time left
    than that is not relaxed (its conversion cannot be interrupted)."""
    problem = _problem(_chain_with_skip())
    lm = cpsat_model.build(problem)
    clock = bound._Clock()
    assert clock.lp_s(lm) == cpsat_model.lp_estimate_s(lm)
    variables = len(lm.model.proto.variables)
    clock.relaxed(lm, 1e-6 * variables)
    clock.relaxed(lm, 1e-7 * variables)  # a faster one does not lower the expectation
    assert clock.lp_s(lm) == pytest.approx(bound.LP_MARGIN * 1e-6 * variables)
    slow = bound._Clock(lp_rate=1.0)  # a second per variable: never in time
    relaxed = []
    monkeypatch.setattr(bound, "relax", lambda *args: relaxed.append(args))
    assert bound._solve_part(problem, now() + 30, slow) is None and not relaxed
