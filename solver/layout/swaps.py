"""One op's configuration changed at a time, to bring a plan that overflows L1 under it.

The bound's parts (``bound.py``) round their LP solutions into a plan that can overflow
L1 by a few kilobytes at a step or two: an op whose circular buffers the LP took in part.
The cheapest fix is usually one op's other configuration there (a smaller buffer block,
or an output kept elsewhere), a move a segment's CP-SAT model on one thread may not find
from an infeasible hint (ResNet-50 at batch 8 on Wormhole: 1.7 s on a 13-op segment ended
76% above its LP bound, and the plan 14% above the rounding it repaired). ``fit`` tries
those moves first; ``lns.repair`` re-solves segments for what they leave.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from solver.deadline import now
from solver.layout.memory import DRAM, MemConfig
from solver.layout.ops import Candidate
from solver.layout.plan import (
    Assignment,
    Residency,
    derive_copies,
    home_residency,
    l1_usage,
    total_us,
    with_output_spills,
)
from solver.layout.problem import LayoutProblem


def overflows(problem: LayoutProblem, a: Assignment) -> list[int]:
    """The steps at which ``a``'s plan holds more L1 than the device has (less the room
    ``problem.reserved_l1`` keeps)."""
    used = l1_usage(problem, a)
    return [k for k, b in enumerate(used) if b > problem.usable_l1 - problem.reserved_l1.get(k, 0)]


def fit(problem: LayoutProblem, a: Assignment, deadline: float) -> Assignment:
    """``a`` after the cheapest single-op moves that each leave fewer steps overflowing,
    first overflowing step first, until none does, no move helps, or ``deadline``
    (``deadline.now()``). A move gives one op (the op at the step, or one whose output is
    in L1 there) another of its candidates, each operand read as now when that candidate
    accepts it, else from the operand's home, else from DRAM (``_moves``)."""
    over = overflows(problem, a)
    while over and now() < deadline:
        best: tuple[float, Assignment, list[int]] | None = None
        for moved in _moves(problem, a, over[0]):
            if now() >= deadline:
                return a
            still = overflows(problem, moved)
            if len(still) >= len(over):
                continue
            total = total_us(problem, moved)
            if best is None or total < best[0]:
                best = (total, moved, still)
        if best is None:
            return a
        _, a, over = best
    return a


def _moves(problem: LayoutProblem, a: Assignment, k: int) -> Iterator[Assignment]:
    """Single-op moves that may free L1 at step ``k``: of the op there, and of the
    producers of the tensors whose L1 home is resident there, each to a candidate whose
    own buffers and output take less L1, or whose reads change."""
    full = with_output_spills(problem, a)
    res = Residency(problem, full)
    holders = [problem.order[k]]
    for t, (first, last) in home_residency(problem, full, derive_copies(problem, full)).items():
        producer = problem.tensors[t].producer
        if first <= k <= last and producer is not None and producer not in holders:
            holders.append(producer)
    for op in holders:
        info = problem.ops[op]
        homes = [res.home(t) for t in info.inputs]
        now_takes = _footprint(problem, op, a.configs[op])
        for c in info.candidates:
            reads = _reads(c, a.reads[op], homes)
            if c.id == a.configs[op].id or reads is None or (
                    reads == a.reads[op] and _footprint(problem, op, c) >= now_takes):
                continue
            # a tensor no longer homed in L1 cannot be spilled from it
            spills = a.spills if c.output.is_l1 else \
                {t: after for t, after in a.spills.items() if t not in info.outputs}
            yield replace(a, configs={**a.configs, op: c}, reads={**a.reads, op: reads},
                          spills=spills, offsets=None)


def _footprint(problem: LayoutProblem, op: str, c: Candidate) -> int:
    """L1 bytes per core the op's circular buffers and its output take under ``c``."""
    out = problem.ops[op].output
    return c.cb_bytes_per_core + (problem.bytes_per_core(out, c.output) if c.output.is_l1 else 0)


def _reads(c: Candidate, reads: list[MemConfig],
           homes: list[MemConfig]) -> list[MemConfig] | None:
    """Each operand read as in ``reads`` when ``c`` accepts it, else from its home, else from
    DRAM; None when ``c`` accepts none of them."""
    out = []
    for acc, read, home in zip(c.accepts, reads, homes, strict=True):
        chosen = next((m for m in (read, home, DRAM) if m in acc), None)
        if chosen is None:
            return None
        out.append(chosen)
    return out
