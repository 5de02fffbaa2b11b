"""Large-neighbourhood search over the layout model, for graphs too big for one model.

Each round cuts a segment of consecutive steps out of the schedule and solves the CP-SAT
model (``cpsat_model.build``) of that segment alone, everything around it held at the incumbent:

* tensors made before the segment enter with the home they have there (an L1 home still
  resident, or DRAM when it was spilled or is a graph input);
* tensors still read after the segment stay resident to its end, and the ops making them
  keep their configuration, so what comes after sees the same homes;
* the L1 bytes of tensors that only pass through the segment are reserved at every step.

The segment's model is small whatever the graph's size (a 1,472-op graph builds in tens of
milliseconds per round, where a whole-graph model took seconds before its search began).
What it does not see (a copy the rest of the graph would need, a residency it shortens) is
settled by pricing and checking the whole plan: a round's answer is kept only when the
whole plan passes the evaluator, is cheaper, and (when the solve places L1 buffers)
places (``address.places``). Segments slide over the schedule,
overlapping by half, one size per pass (``SEGMENT_SIZES``, smallest first), until the
deadline or a cycle through every size without gain. An improvement is also tried on every
twin of its segment in the model's repeated blocks (``repeats.py``), under the same rule.

``repair`` uses the same segments to turn a plan that overflows L1 (a rounding of the
bound's LP, ``bound.py``) into one that fits.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from solver import progress
from solver.deadline import now
from solver.layout import cpsat
from solver.layout.address import places
from solver.layout.cpsat_model import build_estimate_s
from solver.layout.evaluate import evaluate
from solver.layout.memory import MemConfig
from solver.layout.plan import (
    Assignment,
    Residency,
    build_plan,
    derive_copies,
    home_residency,
    total_us,
    with_output_spills,
)
from solver.layout.problem import LayoutProblem, TensorInfo
from solver.layout.repeats import Twins, batches, transplant
from solver.layout.swaps import fit, overflows

SEGMENT_SIZES = (4, 8, 16, 32)
"""Ops per segment, one size per pass over the schedule, smallest first: small rounds (about
0.1 s) cover the schedule quickly, larger ones then find what needs more ops decided
together. On the 1,472-op Llama-3.1-8B in 60 s (``benchmarks/segments.py``) this cycle
gains 5.2% over greedy, one size alone 4.3-5.1% (48, 12, 6 or 4 ops)."""
SECONDS_PER_OP = 0.125
"""A round's time limit per op of its segment (0.5 s for 4 ops, 4 s for 32)."""
MIN_ROUND_S = 0.2


@dataclass
class SearchResult:
    assignment: Assignment
    total_us: float
    rounds: int
    improved: int


@dataclass
class Segment:
    """A sub-problem and how to put its answer back into the whole assignment."""

    problem: LayoutProblem
    hint: Assignment
    lo: int
    hi: int


def segment(problem: LayoutProblem, incumbent: Assignment, lo: int, hi: int) -> Segment:
    """Steps ``lo`` to ``hi - 1`` of the schedule as a problem of their own (module doc)."""
    order = problem.order[lo:hi]
    inside = set(order)
    full = with_output_spills(problem, incumbent)
    res = Residency(problem, full)
    copies = derive_copies(problem, full)
    touched = {t for op in order for t in (*problem.ops[op].inputs, *problem.ops[op].outputs)}
    tensors: dict[str, TensorInfo] = {}
    fixed_homes: dict[str, MemConfig] = {}
    live_out: set[str] = set()
    for name in touched:
        info = problem.tensors[name]
        readers = [(op, i) for op, i in info.consumers if op in inside]
        if any(res.step[op] >= hi for op, _ in info.consumers):
            live_out.add(name)
        if info.producer in inside:
            tensors[name] = replace(info, consumers=readers)
            continue
        home = res.home(name)
        if home.is_l1 and res.home_available(name, lo):
            fixed_homes[name] = home
        tensors[name] = replace(info, producer=None, consumers=readers, is_output=False)
    keep = {tensors[name].producer for name in live_out} - {None}
    ops = {}
    for op in order:
        info = replace(problem.ops[op])
        if op in keep:
            info.candidates = [_fixed(incumbent, op)]
        ops[op] = info
    sub = replace(problem, tensors=tensors, ops=ops, order=order, fixed_homes=fixed_homes,
                  live_out=frozenset(live_out),
                  reserved_l1=_passing_through(problem, res, copies, lo, hi, touched))
    hinted = Assignment(order, {op: ops[op].candidates[0] if op in keep else
                                incumbent.configs[op] for op in order},
                        {op: incumbent.reads[op] for op in order},
                        {t: k - lo for t, k in full.spills.items()
                         if t in tensors and lo - 1 <= k < hi - 1})
    return Segment(sub, hinted, lo, hi)


def _fixed(incumbent: Assignment, op: str):
    """The incumbent's candidate for ``op``, accepting only the reads it makes."""
    chosen = incumbent.configs[op]
    return replace(chosen, accepts=tuple({m: acc[m]} for acc, m in
                                         zip(chosen.accepts, incumbent.reads[op], strict=True)))


def _passing_through(problem: LayoutProblem, res: Residency, copies, lo: int, hi: int,
                     touched: set[str]) -> dict[int, int]:
    """L1 bytes per core at each of the segment's steps held by what the segment does not
    model: homes of untouched tensors, and copies made before it (kept conservatively),
    over the room the whole problem reserves there."""
    reserved = {k - lo: problem.reserved_l1.get(k, 0) for k in range(lo, hi)}
    for t, (first, last) in home_residency(problem, res.a, copies).items():
        if t not in touched:
            for k in range(max(first, lo), min(last, hi - 1) + 1):
                reserved[k - lo] += problem.bytes_per_core(t, res.home(t))
    for c in copies:
        if c.dst.is_l1 and (c.tensor not in touched or c.step < lo):
            last = max(res.step[op] for op in c.consumers)
            for k in range(max(c.step, lo), min(last, hi - 1) + 1):
                reserved[k - lo] += problem.bytes_per_core(c.tensor, c.dst)
    return reserved


def lift(problem: LayoutProblem, incumbent: Assignment, seg: Segment,
         found: Assignment) -> Assignment:
    """The whole assignment with the segment's decisions in place of the incumbent's."""
    configs = dict(incumbent.configs)
    reads = dict(incumbent.reads)
    for op in seg.problem.order:
        chosen = found.configs[op]
        # a kept op's candidate was narrowed to its reads; the whole problem's is the same
        configs[op] = incumbent.configs[op] if chosen.id == incumbent.configs[op].id else chosen
        reads[op] = found.reads[op]
    spills = {t: k for t, k in incumbent.spills.items()
              if t not in seg.problem.tensors or not seg.lo - 1 <= k < seg.hi - 1}
    spills.update({t: k + seg.lo for t, k in found.spills.items()})
    return Assignment(list(problem.order), configs, reads, spills)


def _unchanged(hint: Assignment, found: Assignment) -> bool:
    """The round kept the incumbent's decisions: no need to price the whole plan again."""
    return found.spills == hint.spills and all(
        found.configs[op].id == hint.configs[op].id and found.reads[op] == hint.reads[op]
        for op in hint.schedule)


def _resolved(problem: LayoutProblem, incumbent: Assignment, best: float, lo: int, hi: int,
              seconds: float, seed: int, workers: int) -> tuple[Assignment, float] | None:
    """One round: steps ``lo .. hi - 1`` of ``incumbent`` solved again for ``seconds``; the
    whole plan and its total when it changed and ``price`` keeps it (valid, cheaper than
    ``best``, placed), else None."""
    seg = segment(problem, incumbent, lo, hi)
    found = cpsat.solve_segment(seg.problem, seg.hint, seconds, seed, workers)
    if found.assignment is None or _unchanged(seg.hint, found.assignment):
        return None
    candidate = lift(problem, incumbent, seg, found.assignment)
    total = price(problem, candidate, best)
    return None if total is None else (candidate, total)


def price(problem: LayoutProblem, candidate: Assignment, best: float) -> float | None:
    """The whole plan's total when it passes the evaluator, beats ``best`` and places
    (``address.places``), else None."""
    plan = build_plan(problem, candidate, "lns", 0.0)
    if plan.total_latency_us < best - 1e-9 and evaluate(problem, plan).valid and \
            places(problem, candidate):
        return plan.total_latency_us
    return None


def _spread(problem: LayoutProblem, incumbent: Assignment, best: float, lo: int, hi: int,
            offsets: list[int], deadline: float) -> tuple[Assignment, float, list[int]]:
    """Steps ``lo .. hi - 1`` of ``incumbent`` just improved: their decisions tried on every
    twin window (``offsets``, ``repeats.py``) at once, else on each twin alone while time
    lasts. Also the offsets of the twins that took them."""
    taken: list[int] = []
    for batch in batches(offsets):
        if deadline - now() < MIN_ROUND_S:
            break
        candidate = transplant(problem, incumbent, incumbent, lo, hi, batch)
        total = None if candidate is None else price(problem, candidate, best)
        if total is not None:
            incumbent, best = candidate, total
            taken += batch
            if batch is offsets:
                break
    return incumbent, best, taken


FIT_SHARE, POLISH_SHARE = 0.25, 0.5
"""Shares of a repair's time left that the single-op moves (``swaps.fit``; 10 ms on
ResNet-50, but each move prices the whole plan) and then the segments re-solved around
the moved ops (``_polish``) may take."""
REPAIR_REACH = (6, 12, 24)
"""Steps on each side of an overflowing step that a repair round solves again, widened
when a narrower segment cannot fit (a tensor still read after it holds its L1 there)."""


def repair(problem: LayoutProblem, a: Assignment, deadline: float, seed: int,
           workers: int) -> Assignment | None:
    """``a`` after the single-op moves of ``swaps.fit`` (in ``FIT_SHARE`` of the time
    left), then with the segment around its first step where L1 still overflows solved
    again (a segment's model holds what passes through it, so its answer fits there),
    widened until a round leaves fewer such steps, and so on; last, the segments around the
    moved ops solved again from the plan that fits (``_polish``). None unless the result
    passes the evaluator before ``deadline``. For plans put together from parts
    (``bound.py``), whose rounding can overflow L1, and plans that fit by sum but not by
    address, with room reserved where they do not (``solver.layout._make_room``)."""
    fitted = fit(problem, a, now() + FIT_SHARE * max(0.0, deadline - now()))
    moved = [k for k, op in enumerate(problem.order) if fitted.configs[op].id != a.configs[op].id]
    a, over = fitted, overflows(problem, fitted)
    while over:
        for reach in REPAIR_REACH:
            left = deadline - now()
            lo, hi = max(0, over[0] - reach), min(len(problem.order), over[0] + reach + 1)
            if left < MIN_ROUND_S + build_estimate_s(problem, problem.order[lo:hi]):
                return None  # its model could not be built and searched in time
            seg = segment(problem, a, lo, hi)
            found = cpsat.solve_segment(seg.problem, seg.hint,
                                        min((hi - lo) * SECONDS_PER_OP, left), seed, workers)
            if found.assignment is None:
                continue
            fixed = lift(problem, a, seg, found.assignment)
            still = overflows(problem, fixed)
            if len(still) < len(over):
                a, over = fixed, still
                break
        else:
            return None
    if not evaluate(problem, build_plan(problem, a, "lns", 0.0)).valid:
        return None
    return _polish(problem, a, moved, now() + POLISH_SHARE * max(0.0, deadline - now()), seed,
                   workers)


def _polish(problem: LayoutProblem, a: Assignment, steps: list[int], deadline: float,
            seed: int, workers: int) -> Assignment:
    """``a`` with the segment around each of ``steps`` (where ``swaps.fit`` moved an op; a
    step inside the previous segment is skipped) solved again from ``a``, which fits there,
    until ``deadline``: a greedy move can cost more than a change of several ops would."""
    best = total_us(problem, a)
    done = 0
    for k in sorted(steps):
        lo, hi = max(0, k - REPAIR_REACH[0]), min(len(problem.order), k + REPAIR_REACH[0] + 1)
        if k < done:
            continue
        done = hi
        left = deadline - now()
        if left < MIN_ROUND_S + build_estimate_s(problem, problem.order[lo:hi]):
            break
        better = _resolved(problem, a, best, lo, hi, min((hi - lo) * SECONDS_PER_OP, left),
                           seed, workers)
        if better is not None:
            a, best = better
    return a


def segments(n: int, size: int) -> list[tuple[int, int]]:
    """Overlapping by half, covering all ``n`` steps."""
    if n <= size:
        return [(0, n)]
    stride = max(1, size // 2)
    starts = list(range(0, n - size, stride)) + [n - size]
    return [(a, a + size) for a in starts]


def search(problem: LayoutProblem, start: Assignment, deadline: float, seed: int,
           workers: int, sizes: tuple[int, ...] = SEGMENT_SIZES) -> SearchResult:
    """Improve ``start`` segment by segment until ``deadline`` (``deadline.now()``) or
    a cycle through every segment size without gain; a round's answer is kept only when
    the whole plan it builds passes the evaluator and is cheaper. An improvement is spread
    to the window's twins; until a cycle of sizes gains nothing, a pass skips the twins of
    windows already settled in it, then passes visit every window."""
    incumbent = start
    best = total_us(problem, start)
    twins = Twins(problem)
    rounds = improved = 0
    passes_without_gain = 0
    skip_twins = True
    for size in itertools.cycle(sizes):
        gained = False
        # windows not worth a round in this pass: twins of one whose round found nothing,
        # and those an improvement was spread to
        settled: set[tuple] = set()
        spread_to: set[int] = set()
        for lo, hi in segments(len(problem.order), size):
            left = deadline - now()
            if left < MIN_ROUND_S:
                return SearchResult(incumbent, best, rounds, improved)
            key = twins.key(lo, hi)
            if skip_twins and (key in settled or lo in spread_to):
                continue
            if left < MIN_ROUND_S + build_estimate_s(problem, problem.order[lo:hi]):
                continue  # its model could not be built before the deadline; a smaller may
            better = _resolved(problem, incumbent, best, lo, hi,
                               min(size * SECONDS_PER_OP, left), seed + rounds, workers)
            rounds += 1
            if better is None:
                settled.add(key)
            else:
                candidate, total = better
                offsets = twins.of(lo, hi)
                incumbent, best, taken = _spread(problem, candidate, total, lo, hi, offsets,
                                                 deadline)
                if len(taken) == len(offsets):
                    settled.add(key)
                spread_to.update(lo + d for d in taken)
                progress.report(best)
                improved += 1
                gained = True
        passes_without_gain = 0 if gained else passes_without_gain + 1
        if passes_without_gain == len(sizes):
            if not skip_twins:
                break
            skip_twins, passes_without_gain = False, 0
    return SearchResult(incumbent, best, rounds, improved)
