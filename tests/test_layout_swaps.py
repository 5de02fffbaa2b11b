"""Single-op moves that bring an overflowing plan under L1 (``solver/layout/swaps.py``),
and the repair that starts with them (``lns.repair``): the cheapest single move found,
nothing moved when no single move helps, the segment rounds for what moves leave, the
segments around the moves solved again."""

from __future__ import annotations

from dataclasses import replace

from models.layout import parse_graph
from solver.deadline import Deadline, now
from solver.layout import lns, swaps
from solver.layout.evaluate import evaluate
from solver.layout.memory import DRAM
from solver.layout.plan import Residency, build_plan, l1_usage, total_us
from solver.layout.problem import analyze
from tests.layout_fixtures import op, tensor, with_usable_l1
from tests.test_layout_bound import _fattest


def _skips(usable_l1: int):
    """A 24-op chain with a skip every third op, 512 kB activations."""
    n = 24
    ops = [op("o0", "relu", ["x"], ["t0"])]
    for k in range(1, n):
        inputs = [f"t{k - 1}", f"t{k - 3}"] if k >= 3 and k % 3 == 0 else [f"t{k - 1}"]
        ops.append(op(f"o{k}", "add" if len(inputs) == 2 else "gelu", inputs, [f"t{k}"]))
    doc = {"format": "layoutsat-graph", "version": 1, "name": "skips",
           "tensors": [tensor(n, [1, 256, 1024], "input" if n == "x" else "activation")
                       for n in ["x", *(f"t{k}" for k in range(n))]],
           "ops": ops, "outputs": [f"t{n - 1}"]}
    graph = parse_graph(doc)
    return analyze(graph, with_usable_l1(graph, usable_l1))


def _one_step_over():
    """Steps 8 and 9 write their output in its largest L1 configuration, on an L1 one byte
    short of what step 9 holds (and more than any other step holds), the rest reserved."""
    roomy = _skips(10_000_000)
    start = _fattest(roomy, range(8, 10))
    used = l1_usage(roomy, start)
    assert max(used) == used[9] > sorted(used)[-2]
    room = used[9] - 1
    return replace(roomy, reserved_l1={k: roomy.usable_l1 - room for k in range(24)}), start


def test_fit_takes_the_cheapest_single_move():
    """Against every single-op move of the plan (any op, any candidate, each operand read as
    now when accepted, else from its home, else from DRAM) that leaves no step
    overflowing: ``fit`` moves one op, and none of them is cheaper."""
    problem, start = _one_step_over()
    assert swaps.overflows(problem, start) == [9]
    fitted = swaps.fit(problem, start, now() + 30)
    assert swaps.overflows(problem, fitted) == []
    assert sum(fitted.configs[o] != start.configs[o] or fitted.reads[o] != start.reads[o]
               for o in problem.order) == 1
    res = Residency(problem, start)
    fixes = []
    for name in problem.order:
        homes = [res.home(t) for t in problem.ops[name].inputs]
        for c in problem.ops[name].candidates:
            reads = [next((m for m in (r, h, DRAM) if m in acc), None)
                     for acc, r, h in zip(c.accepts, start.reads[name], homes, strict=True)]
            if None in reads:
                continue
            moved = replace(start, configs={**start.configs, name: c},
                            reads={**start.reads, name: reads})
            if not swaps.overflows(problem, moved):
                fixes.append(total_us(problem, moved))
    assert fixes and total_us(problem, fitted) <= min(fixes) + 1e-9


def test_fit_leaves_a_plan_no_single_move_helps():
    """Six fat steps on 100 kB overflow at four or more steps each: one move at the first
    cannot lower the count there alone when every step around it holds more than it
    frees, or it can; either way every move kept lowered the count."""
    problem = _skips(100_000)
    start = _fattest(problem, range(8, 14))
    before = swaps.overflows(problem, start)
    fitted = swaps.fit(problem, start, now() + 30)
    assert len(swaps.overflows(problem, fitted)) < len(before) or fitted is start
    empty = replace(problem, reserved_l1={k: problem.usable_l1 for k in range(24)})
    assert swaps.fit(empty, start, now() + 30) is start  # nothing fits: nothing moved


def test_a_plan_that_overflows_l1_is_repaired_into_a_valid_plan():
    """Steps 8 to 13 writing their outputs in their largest L1 configuration on 100 kB: the
    repair (moves, then segments) leaves no step overflowing, and the plan passes the
    evaluator."""
    problem = _skips(100_000)
    start = _fattest(problem, range(8, 14))
    assert len(swaps.overflows(problem, start)) >= 4
    fixed = lns.repair(problem, start, now() + 60, 0, 1)
    assert fixed is not None and not swaps.overflows(problem, fixed)
    assert evaluate(problem, build_plan(problem, fixed, "r", 0.0)).valid


def test_repair_solves_segments_for_what_single_moves_leave(monkeypatch):
    """With ``fit`` moving nothing, the segment rounds alone turn the six fat steps into a
    valid plan. On the work clock: each round's limit is then deterministic seconds, the
    same work on any machine (in wall seconds a slower host found no segment assignment
    in the 1.6-3 s its rounds get, and the repair gave up)."""
    problem = _skips(100_000)
    start = _fattest(problem, range(8, 14))
    monkeypatch.setattr(lns, "fit", lambda problem, a, deadline: a)
    with Deadline.after(400, deterministic=True).running() as run:
        fixed = lns.repair(problem, start, run.at, 0, 1)
        assert not run.wall_stopped
    assert fixed is not None and not swaps.overflows(problem, fixed)
    assert evaluate(problem, build_plan(problem, fixed, "r", 0.0)).valid


def test_repair_solves_again_around_the_ops_fit_moved(monkeypatch):
    """The segments around the ops ``fit`` moved are solved again from the moved plan, and
    a repair is never dearer than the moves alone (a plan where the greedy move cost more
    than a change of several ops: ``test_layout_address``, room made)."""
    problem, start = _one_step_over()
    fitted = swaps.fit(problem, start, now() + 30)
    repaired = lns.repair(problem, start, now() + 60, 0, 1)
    assert repaired is not None and not swaps.overflows(problem, repaired)
    assert total_us(problem, repaired) <= total_us(problem, fitted)
    polished = []
    monkeypatch.setattr(lns, "_polish", lambda problem, a, steps, *rest: polished.append(steps)
                        or a)
    assert total_us(problem, lns.repair(problem, start, now() + 60, 0, 1)) == \
        total_us(problem, fitted)
    assert polished == [[9]]


def test_a_move_to_a_dram_output_drops_that_outputs_spill():
    """A spilled tensor whose producer a move sends to DRAM is no longer spilled (a spill
    from DRAM is invalid), and every other spill stays."""
    problem, start = _one_step_over()
    spilled = replace(start, spills={"t8": 8, "t9": 9})
    moves = list(swaps._moves(problem, spilled, 9))
    to_dram = [m for m in moves if not m.configs["o9"].output.is_l1]
    assert to_dram and len(to_dram) < len(moves)
    assert all(m.spills == {"t8": 8} for m in to_dram)
    assert all(m.spills == spilled.spills for m in moves if m.configs["o9"].output.is_l1)
