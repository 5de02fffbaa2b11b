"""Planted structures where the greedy approaches decide wrongly by construction, and the
global model must find the better plan (each is proven optimal and strictly cheaper than
every baseline, and the structural decision that makes the difference is checked)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from models.layout import LayoutPlan, parse_graph
from solver.layout import BASELINE_POLICIES, BASELINES, cpsat, solve
from solver.layout.evaluate import evaluate
from solver.layout.plan import build_plan
from solver.layout.problem import analyze
from tests.layout_fixtures import op, tensor, with_usable_l1

ACTIVATION = [1, 256, 1024]


def graph(name: str, tensors: list[dict], ops: list[dict], outputs: list[str]):
    return parse_graph({"format": "layoutsat-graph", "version": 1, "name": name,
                        "tensors": tensors, "ops": ops, "outputs": outputs})


def solve_all(g, device) -> dict[str, LayoutPlan]:
    """Every solver's plan; cpsat's is proven optimal and beats the best baseline."""
    plans = {s: solve(g, s, device, time_limit_s=40, workers=2) for s in ("cpsat", *BASELINES)}
    best = min(plans[b].total_latency_us for b in BASELINES)
    assert plans["cpsat"].status == "optimal" and not plans["cpsat"].violations
    assert plans["cpsat"].total_latency_us < best * 0.97
    return plans


def chain(tensors: list[dict], ops: list[dict], start: str, prefix: str, n: int,
          shape: list[int]) -> str:
    """Append ``n`` unary ops after ``start``; the last tensor's name."""
    prev = start
    for i in range(n):
        tensors.append(tensor(f"{prefix}{i}", shape))
        ops.append(op(f"{prefix.upper()}{i}", "gelu" if i % 2 else "exp", [prev],
                      [f"{prefix}{i}"]))
        prev = f"{prefix}{i}"
    return prev


def test_a_residual_fork_greedy_spills_stays_in_l1():
    """``t`` is made by the first and read by the last op of a 5-op block. Greedy shards
    every op into L1 and, when the block overflows, evicts the tensor with the farthest
    next use, ``t``, paying a spill and a reload; the optimum sizes the block around ``t``
    and keeps it in L1 throughout."""
    ts = [tensor("x", ACTIVATION, "input"), tensor("t", ACTIVATION)]
    ops = [op("a", "relu", ["x"], ["t"])]
    last = chain(ts, ops, "t", "c", 3, ACTIVATION)
    ts.append(tensor("out", ACTIVATION))
    ops.append(op("join", "add", [last, "t"], ["out"]))
    g = graph("residual-fork", ts, ops, ["out"])
    plans = solve_all(g, with_usable_l1(g, 32_000))
    assert "t" in {s.tensor for s in plans["greedy"].spills}
    assert plans["greedy"].reloads
    best = plans["cpsat"]
    assert best.tensors["t"].buffer == "l1" and not best.spills and not best.reloads


def test_a_join_whose_second_operand_forces_a_reshard_greedy_does_not_foresee():
    """``p = gelu(x)`` is planned before ``q = softmax(y)`` is seen; greedy gives each its
    locally best sharding, and ``add(p, q)`` then needs ``q`` resharded. The optimum
    produces both in one layout the add reads directly, and needs no copy at all."""
    shape = [1, 2048, 256]
    ts = [tensor("x", shape, "input"), tensor("y", shape, "input"), tensor("p", shape),
          tensor("q", shape), tensor("r", shape), tensor("out", shape)]
    ops = [op("mk_p", "gelu", ["x"], ["p"]), op("mk_q", "softmax", ["y"], ["q"], dim=-1),
           op("sum", "add", ["p", "q"], ["r"]), op("post", "relu", ["r"], ["out"])]
    g = graph("join-reshard", ts, ops, ["out"])
    plans = solve_all(g, "wormhole_n150")
    assert [(c.tensor, c.consumers) for c in plans["greedy"].reshards] == [("q", ["sum"])]
    best = plans["cpsat"]
    assert not best.reshards and not best.reloads
    assert best.tensors["p"].buffer == best.tensors["q"].buffer == "l1"
    assert best.ops["mk_p"].config == best.ops["mk_q"].config


def test_an_early_reshard_unlocks_a_faster_configuration_downstream():
    """A narrow matmul (M = 128) followed by activations. Greedy never pays for a copy it
    can avoid: it gives the matmul a block sharding the activations can read as it is, and
    runs them on those 32 cores. The optimum reshards once, right after the matmul: the
    matmul takes its fastest (width-sharded) configuration and the activations run
    interleaved on all 64 cores, each faster than greedy's."""
    m, k, n = 128, 4096, 1024
    ts = [tensor("x", [1, m, k], "input"), tensor("w", [k, n], "constant"),
          tensor("h", [1, m, n])]
    ops = [op("fc", "matmul", ["x", "w"], ["h"])]
    chain(ts, ops, "h", "e", 4, [1, m, n])
    g = graph("early-reshard", ts, ops, ["e3"])
    plans = solve_all(g, "wormhole_n150")
    greedy, best = plans["greedy"], plans["cpsat"]
    assert not greedy.reshards
    (copy,) = best.reshards
    assert copy.tensor == "h" and copy.step == 1 and copy.consumers == ["E0"]
    assert best.ops["fc"].latency_us < greedy.ops["fc"].latency_us
    for name in ("E0", "E1", "E2"):
        assert best.ops[name].latency_us < greedy.ops[name].latency_us
        assert best.ops[name].config != greedy.ops[name].config


def test_a_late_spill_beats_an_early_one():
    """``t`` (2 MiB) is read by four ops in a row, then only at the very end, after an
    L1-hungry chain. Spilling it right after it is made (as chain-based sharding does)
    sends all four reads to DRAM; keeping it forces the chain out of L1. The optimum
    spills it later, after a reader used the L1 copy; moving that spill early costs more."""
    big = [1, 1024, 1024]
    ts = [tensor("x", big, "input"), tensor("t", big)]
    ops = [op("a", "relu", ["x"], ["t"])]
    prev = "t"
    for i in range(4):
        ts.append(tensor(f"u{i}", big))
        ops.append(op(f"B{i}", "mul", [prev, "t"], [f"u{i}"]))
        prev = f"u{i}"
    last = chain(ts, ops, prev, "d", 4, big)
    ts.append(tensor("out", big))
    ops.append(op("join", "add", [last, "t"], ["out"]))
    g = graph("late-spill", ts, ops, ["out"])
    device = with_usable_l1(g, 96_000)
    plans = solve_all(g, device)
    assert [(s.tensor, s.step) for s in plans["dfsharding"].spills if s.tensor == "t"] == [
        ("t", 0)]
    spill = next(s for s in plans["cpsat"].spills if s.tensor == "t")
    assert 0 < spill.step < plans["cpsat"].schedule.index("join") - 1

    problem = analyze(g, device)
    found = cpsat.solve_model(problem, BASELINE_POLICIES["greedy"](problem),
                              time.perf_counter() + 40, 0, 2)
    assert found.optimal and found.assignment.spills["t"] > 0
    late = build_plan(problem, found.assignment, "late", 0.0)
    early = build_plan(problem, replace(found.assignment,
                                        spills={**found.assignment.spills, "t": 0}), "early", 0.0)
    assert late.total_latency_us == pytest.approx(plans["cpsat"].total_latency_us)
    assert early.total_latency_us > late.total_latency_us or not evaluate(problem, early).valid


def test_two_chains_competing_for_l1_share_it_by_global_benefit():
    """Two interleaved chains, one with 8x the bytes of the other, and L1 for about two big
    tensors. Greedy puts each output in L1 because it fits at that step, then evicts big
    tensors at a high spill cost; the optimum decides per step which chain's tensors get
    L1 and never spills."""
    big, small = [1, 1024, 1024], [1, 128, 1024]
    ts = [tensor("xa", big, "input"), tensor("xb", small, "input")]
    ops: list[dict] = []
    prev = {"a": "xa", "b": "xb"}
    for i in range(4):
        for name, shape in (("a", big), ("b", small)):
            ts.append(tensor(f"{name}{i}", shape))
            ops.append(op(f"{name.upper()}{i}", "gelu" if i % 2 else "exp", [prev[name]],
                          [f"{name}{i}"]))
            prev[name] = f"{name}{i}"
    g = graph("two-chains", ts, ops, [prev["a"], prev["b"]])
    plans = solve_all(g, with_usable_l1(g, 56_000))
    greedy, best = plans["greedy"], plans["cpsat"]
    assert any(s.tensor.startswith("a") and s.tensor != prev["a"] for s in greedy.spills)
    assert not best.spills and not best.reloads
    in_l1 = {name for name, p in best.tensors.items() if p.buffer == "l1"}
    assert in_l1 & {"a0", "a1", "a2"} and in_l1 & {"b0", "b1", "b2"}
    assert best.total_latency_us < 0.7 * greedy.total_latency_us
