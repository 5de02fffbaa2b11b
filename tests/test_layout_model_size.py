"""How large a layout model will be before it is built (``cpsat_model.model_units``), and
what depends on it: one model or the segment search (``cpsat.fits_whole``), and solves of
graphs with large activations that end within their limit."""

from __future__ import annotations

import time

import pytest

from benchmarks.layout_order_suite import graph as generated
from models.device import PRESETS
from models.layout import parse_graph
from solver.layout import Outcome, _or_reordered, solve
from solver.layout.cpsat import fits_whole, latency_floor_us
from solver.layout.cpsat_model import build, build_estimate_s, model_units
from solver.layout.dfsharding import assign as depth_first
from solver.layout.dram import assign as all_in_dram
from solver.layout.plan import total_us
from solver.layout.problem import analyze
from tests.conftest import ROOT
from tests.layout_fixtures import load

DECODE = ROOT / "benchmarks" / "layout" / "models" / "llama-3.2-1b-decode-kv1024-l1.json"
WIDE = 1
"""A generated graph (``benchmarks/layout_order_suite.py``) of 49 ops on activations of
4096 x 1024: its model has three times the variables of a shipped 48-op one."""


@pytest.mark.parametrize("source", ["decode", "wide"])
def test_model_units_follow_the_variables_the_model_gets(source):
    doc = load(DECODE) if source == "decode" else generated(WIDE)
    problem = analyze(parse_graph(doc), PRESETS["wormhole_n150"])
    variables = len(build(problem).model.proto.variables)
    assert 0.7 <= model_units(problem, problem.order) / variables <= 2.5


def test_a_graph_of_large_activations_goes_to_the_segment_search():
    decode = analyze(parse_graph(load(DECODE)), PRESETS["wormhole_n150"])
    wide = analyze(parse_graph(generated(WIDE)), PRESETS["wormhole_n150"])
    assert len(wide.order) <= len(decode.order) + 1
    assert build_estimate_s(wide, wide.order) > 2 * build_estimate_s(decode, decode.order)
    assert fits_whole(decode, 5.0) and not fits_whole(wide, 5.0)
    assert fits_whole(wide, 30.0)


@pytest.mark.parametrize("limit", [2.0, 5.0])
def test_solves_of_large_activations_end_within_their_limit(limit):
    # before the model size was estimated, this graph's whole model was built and relaxed
    # whatever the time left: 12.9-15.0 s at a 10 s limit
    graph = parse_graph(generated(WIDE))
    started = time.monotonic()
    plan = solve(graph, "cpsat", "blackhole_p150", time_limit_s=limit, workers=2,
                 order="search")
    assert time.monotonic() - started < limit + 0.5
    assert plan.status != "invalid" and plan.stats.best_bound is not None
    assert plan.stats.best_bound > 0.0


def test_a_plan_on_another_schedule_is_taken_only_when_cheaper_and_bounded_by_the_floor():
    problem = analyze(parse_graph(generated(WIDE)), PRESETS["wormhole_n150"])
    mine = all_in_dram(problem)
    other = depth_first(problem)
    assert other.schedule != problem.order
    cost = total_us(problem, other)
    dear = Outcome(mine, "optimal", cost + 5.0, cost + 1.0, 0.0)
    taken = _or_reordered(problem, dear, [(cost, other)])
    assert taken.assignment is other and taken.status == "feasible"
    assert taken.best_bound == pytest.approx(min(latency_floor_us(problem), cost))
    cheap = Outcome(mine, "optimal", cost - 5.0, cost - 5.0, 0.0)
    assert _or_reordered(problem, cheap, [(cost, other)]) is cheap
