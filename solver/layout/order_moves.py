"""Order moves: the op-order search for graphs beyond the order model, as LNS rounds.

``order.py`` orders a graph solved as one model (``cpsat.fits_whole``) by a CP-SAT model
of its positions. A larger graph (``--order search``) keeps its schedule through the
bound, then is reordered window by window, where L1 is fullest first, before the segment
search (``lns.py``). A round, on a window of consecutive steps within one part of the
bound's cut:

1. the window as a segment of the incumbent (``lns.segment``: what enters, what must stay
   to its end, what passes through), solved without capacity (``order.without_capacity``):
   the plan the window would like;
2. when that plan does not fit the window's order (its fullest step, with what passes
   through, holds more than L1), ``order.memory_order`` orders the window's ops so that it
   needs less; ops outside the window keep their steps, so every order it finds is a
   topological order of the whole graph;
3. the window solved again, with capacity, on the new order; the round is kept only when
   the whole plan passes the evaluator and is cheaper.

Windows stay inside the bound's parts so that the bound can follow the new schedule
(``bound.rebound``: only the parts reordered are relaxed again).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from solver import progress
from solver.deadline import now
from solver.layout import cpsat, lns
from solver.layout.cpsat_model import build_estimate_s
from solver.layout.order import memory_order, peak_bytes, without_capacity
from solver.layout.plan import Assignment, l1_usage
from solver.layout.problem import LayoutProblem
from solver.layout.repeats import Twins, batches, transplant

WINDOW = 16
"""Steps per window, overlapping by half: enough for a few branches to interleave, and
its models build in about a second on graphs of large activations (and far less on
most)."""
PRESSURE = 0.5
"""Windows whose fullest step holds less than this share of L1 are not tried: capacity
cannot be what holds their plan back."""
FREE_SHARE = 0.25
"""Share of a window's search time (``lns.SECONDS_PER_OP`` per op) for the solve without
capacity; the solve on the new order gets all of it. Each also gets its model's build
(``build_estimate_s``)."""
ORDER_S = 0.4
"""The order model's time per window (two solves of 0.2 s at most; a window's are
usually proven sooner)."""


@dataclass
class Moved:
    """The schedule and plan the order moves ended with, and the bound's parts they
    reordered (by index)."""

    problem: LayoutProblem
    assignment: Assignment
    total_us: float
    parts: set[int]
    rounds: int


def windows(problem: LayoutProblem, a: Assignment, spans: list[tuple[int, int]],
            size: int = WINDOW) -> list[tuple[int, tuple[int, int]]]:
    """Windows of at most ``size`` steps inside each of ``spans`` (with the span's index),
    fullest L1 step first, those under ``PRESSURE`` left out."""
    used = l1_usage(problem, a)
    found = []
    for p, (first, end) in enumerate(spans):
        for lo, hi in lns.segments(end - first, size):
            fullest = max(used[first + lo:first + hi])
            if fullest >= PRESSURE * problem.usable_l1:
                found.append((-fullest, first + lo, p, (first + lo, first + hi)))
    return [(p, window) for *_, p, window in sorted(found)]


def reorder(problem: LayoutProblem, incumbent: Assignment, best: float,
            spans: list[tuple[int, int]], deadline: float, seed: int,
            workers: int) -> Moved:
    """Order moves over ``incumbent`` (module doc), priced ``best``, until ``deadline``
    (``deadline.now()``) or every window tried once."""
    moved = Moved(problem, incumbent, best, set(), 0)
    spread_to: set[int] = set()
    for p, (lo, hi) in windows(problem, incumbent, spans):
        ops = moved.problem.order[lo:hi]
        if lo in spread_to:
            continue
        if deadline - now() < _round_s(moved.problem, ops):
            continue  # a window of smaller models may still fit
        before = moved.problem
        found = _round(moved, lo, hi, seed + moved.rounds, workers)
        moved.rounds += 1
        if found is not None:
            moved.problem, moved.assignment, moved.total_us = found
            moved.parts.add(p)
            progress.report(moved.total_us)
            moves = [ops.index(op) for op in moved.problem.order[lo:hi]]
            spread_to |= _spread(moved, Twins(before), lo, hi, moves, spans, deadline)
    return moved


def _round_s(problem: LayoutProblem, ops: list[str]) -> float:
    """The most a round on ``ops`` takes: two models built and searched, the order model."""
    search = len(ops) * lns.SECONDS_PER_OP
    return 2 * build_estimate_s(problem, ops) + (1 + FREE_SHARE) * search + ORDER_S


def _spread(moved: Moved, twins: Twins, lo: int, hi: int, moves: list[int],
            spans: list[tuple[int, int]], deadline: float) -> set[int]:
    """Window ``lo .. hi - 1`` was just reordered (its ``k``-th op is the one that was
    ``moves[k]``-th): the same order and decisions tried on its twins (``repeats.py``)
    inside one part, all at once, else one at a time while time lasts. The steps where
    the twins that took them start."""
    part_of = {d: p for d in twins.of(lo, hi) if (p := _part(spans, lo + d, hi + d)) is not None}
    taken: set[int] = set()
    for batch in batches(list(part_of)):
        if deadline - now() < lns.MIN_ROUND_S or taken & {lo + d for d in batch}:
            continue
        schedule = list(moved.problem.order)
        for d in batch:
            window = schedule[lo + d:hi + d]
            schedule[lo + d:hi + d] = [window[k] for k in moves]
        reordered = replace(moved.problem, order=schedule)
        target = Assignment(schedule, moved.assignment.configs, moved.assignment.reads,
                            moved.assignment.spills)
        candidate = transplant(reordered, target, moved.assignment, lo, hi, batch)
        total = None if candidate is None else lns.price(reordered, candidate, moved.total_us)
        if total is not None:
            moved.problem, moved.assignment, moved.total_us = reordered, candidate, total
            moved.parts |= {part_of[d] for d in batch}
            taken |= {lo + d for d in batch}
            progress.report(total)
    return taken


def _part(spans: list[tuple[int, int]], lo: int, hi: int) -> int | None:
    """The index of the span holding steps ``lo .. hi - 1``, if one does."""
    return next((p for p, (first, end) in enumerate(spans) if first <= lo and hi <= end), None)


def _round(moved: Moved, lo: int, hi: int, seed: int,
           workers: int) -> tuple[LayoutProblem, Assignment, float] | None:
    """One window (module doc, steps 1-3): the reordered problem, its plan and total, or
    None when the window keeps its order."""
    problem, incumbent = moved.problem, moved.assignment
    build = build_estimate_s(problem, problem.order[lo:hi])
    search = (hi - lo) * lns.SECONDS_PER_OP
    seg = lns.segment(problem, incumbent, lo, hi)
    free = cpsat.solve_segment(without_capacity(seg.problem), seg.hint,
                               build + FREE_SHARE * search, seed, workers)
    if free.assignment is None:
        return None
    fullest = peak_bytes(seg.problem, free.assignment, seg.problem.order)
    if fullest <= seg.problem.usable_l1:
        return None  # the plan it would like fits its order: capacity holds nothing back
    order = memory_order(seg.problem, free.assignment, now() + ORDER_S, workers)
    if order is None or peak_bytes(seg.problem, free.assignment, order) >= fullest:
        return None
    schedule = problem.order[:lo] + order + problem.order[hi:]
    reordered = replace(problem, order=schedule)
    inside = set(order)
    # the incumbent's spills inside the window named steps of the old order: the window's
    # solve decides them again
    spills = {t: k for t, k in incumbent.spills.items()
              if not (lo - 1 <= k < hi - 1 and _touched(problem, t, inside))}
    start = Assignment(schedule, incumbent.configs, incumbent.reads, spills)
    seg = lns.segment(reordered, start, lo, hi)
    found = cpsat.solve_segment(seg.problem, seg.hint, build + search, seed, workers)
    if found.assignment is None:
        return None
    candidate = lns.lift(reordered, start, seg, found.assignment)
    total = lns.price(reordered, candidate, moved.total_us)
    return None if total is None else (reordered, candidate, total)


def _touched(problem: LayoutProblem, tensor: str, ops: set[str]) -> bool:
    """Whether one of ``ops`` makes or reads ``tensor``."""
    info = problem.tensors[tensor]
    return info.producer in ops or any(op in ops for op, _ in info.consumers)
