"""L1 addresses for a plan: what TT-Metal's allocator needs, which a sum per step is not.

TT-Metal keeps the L1 banks of all cores in lockstep (tt-metal #1490): a buffer has one
address, reserved on every core whether or not it holds a shard there. L1 buffers are
placed from the top down and a program's circular buffers grow up from the bottom of the
unreserved L1 (tt-metal #540); a program runs only when its circular buffers end below
the lowest L1 buffer live then ("Statically allocated circular buffers ... clash with L1
buffers", tt-metal #17947, #28835). So a plan fits the chip when every L1 tensor (home
and copy) gets one offset for its whole lifetime, no two live at the same step overlap,
and each lies above the circular buffers of every op that runs while it is live. A plan
whose bytes fit at every step can still fail that (fragmentation).

Offsets count from the lowest usable L1 byte. ``place`` looks for them: first by two
greedy orders (the allocator's top-down placement, offline so it knows every lifetime),
then by CP-SAT's no-overlap over (step x address) rectangles.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from solver.deadline import limit_cpsat, now, run_cpsat
from solver.layout.memory import ALIGNMENT
from solver.layout.plan import (
    Assignment,
    DerivedCopy,
    Offsets,
    Residency,
    derive_copies,
    home_residency,
    with_output_spills,
)
from solver.layout.problem import LayoutProblem

MIN_CPSAT_S = 0.1
"""Least time a CP-SAT placement is started with (``limit_cpsat`` gives no less)."""


@dataclass(frozen=True)
class Block:
    """One L1 buffer: a tensor's home (``dst`` None) or its copy to ``dst``; bytes per
    core rounded up to the alignment, live from step ``first`` to ``last``."""

    tensor: str
    dst: str | None
    size: int
    first: int
    last: int


def blocks(problem: LayoutProblem, a: Assignment, copies: list[DerivedCopy]) -> list[Block]:
    """Every L1 buffer of an assignment whose output spills are already added
    (``plan.with_output_spills``), with the lifetimes the sum model counts."""
    res = Residency(problem, a)
    found = [Block(t, None, _aligned(problem.bytes_per_core(t, res.home(t))), first, last)
             for t, (first, last) in home_residency(problem, a, copies).items()]
    for c in copies:
        if c.dst.is_l1:
            last = max(res.step[op] for op in c.consumers)
            found.append(Block(c.tensor, c.dst.key, _aligned(problem.bytes_per_core(
                c.tensor, c.dst)), c.step, last))
    return found


def floors(a: Assignment) -> list[int]:
    """Bytes per core the circular buffers of the op at each step take from the bottom."""
    return [_aligned(a.configs[op].cb_bytes_per_core) for op in a.schedule]


def _aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


@dataclass(frozen=True)
class Placement:
    """Offsets by buffer (as ``build_plan`` takes them) and how far up L1 each step then
    reaches. When none within the capacity were found (``fits`` false) they are the
    lowest-first placement without a ceiling, which overflows somewhere."""

    offsets: Offsets
    height: list[int]
    load: list[int]
    """Bytes per core in L1 at each step, as the sum model counts them (aligned)."""
    fits: bool
    method: str
    """What found the offsets: ``top-down``, ``largest-area``, ``bottom-up``, ``cp-sat``,
    or ``none``."""


def place_assignment(problem: LayoutProblem, decided: Assignment, until: float | None,
                     workers: int = 1) -> Placement:
    """Offsets for every L1 buffer of an assignment's plan, within the usable L1 (by the
    greedy orders alone when ``until`` is None)."""
    a = with_output_spills(problem, decided)
    return place(blocks(problem, a, derive_copies(problem, a)), floors(a),
                 problem.usable_l1, until, workers)


PLACES_S = 0.2
"""Time a search gives CP-SAT to place a candidate plan the greedy orders do not (they take
0.02-0.04 s on 1,000 buffers)."""


def places(problem: LayoutProblem, decided: Assignment, workers: int = 1) -> bool:
    """Whether the plan gets L1 offsets, when the problem asks for them
    (``LayoutProblem.addresses``; always true otherwise); the offsets found are kept on
    ``decided`` (``Assignment.offsets``), so that a plan a search keeps is placed after
    it whatever time is left."""
    if not problem.addresses:
        return True
    if decided.offsets is None:
        placement = place_assignment(problem, decided, now() + PLACES_S, workers)
        if not placement.fits:
            return False
        decided.offsets = placement.offsets
    return True


def place(found: list[Block], bottom: list[int], capacity: int, until: float | None,
          workers: int = 1) -> Placement:
    """Offsets for ``found`` within ``capacity`` bytes per core above the circular buffers
    ``bottom`` of each step: two top-down greedy orders, the lowest-first one, then CP-SAT
    (until ``until``; not with None)."""
    capacity -= capacity % ALIGNMENT
    for method, order in (("top-down", _by_start), ("largest-area", _by_size)):
        offsets = _greedy(sorted(found, key=order), bottom, capacity)
        if offsets is not None:
            return _placement(offsets, bottom, method)
    loose = _greedy(sorted(found, key=_by_start), bottom, None)
    assert loose is not None  # without a ceiling every block finds room
    if max(_placement(loose, bottom, "bottom-up").height, default=0) <= capacity:
        return _placement(loose, bottom, "bottom-up")
    offsets = None if until is None else _exact(found, bottom, capacity, until, workers)
    if offsets is not None:
        return _placement(offsets, bottom, "cp-sat")
    return _placement(loose, bottom, "none")


def _by_start(b: Block) -> tuple[int, int, int, str, str]:
    return b.first, -b.size, -b.last, b.tensor, b.dst or ""


def _by_size(b: Block) -> tuple[int, int, str, str]:
    return -b.size * (b.last - b.first + 1), b.first, b.tensor, b.dst or ""


def _floor(b: Block, bottom: list[int]) -> int:
    return max(bottom[b.first:b.last + 1], default=0)


def _greedy(order: list[Block], bottom: list[int], capacity: int | None
            ) -> dict[Block, int] | None:
    """Each block in turn at the highest offset free over its lifetime (the lowest when
    there is no ceiling, to measure how high a plan reaches); None when one finds none."""
    placed: dict[Block, int] = {}
    for b in order:
        floor = _floor(b, bottom)
        clash = [(placed[o], o.size) for o in placed if o.first <= b.last and b.first <= o.last]
        if capacity is None:
            tops = sorted([floor] + [at + size for at, size in clash])
            spot = next(x for x in tops if x >= floor and _free(x, b.size, clash))
        else:
            starts = [capacity - b.size] + [at - b.size for at, _ in clash]
            spots = [x - x % ALIGNMENT for x in starts]
            spot = max((x for x in spots if x >= floor and _free(x, b.size, clash)),
                       default=None)
            if spot is None:
                return None
        placed[b] = spot
    return placed


def _free(x: int, size: int, clash: list[tuple[int, int]]) -> bool:
    return all(x + size <= at or at + other <= x for at, other in clash)


def _exact(found: list[Block], bottom: list[int], capacity: int, until: float,
           workers: int) -> dict[Block, int] | None:
    """CP-SAT over offsets in units of the alignment: a rectangle per block (its steps x
    its bytes), no two overlapping; None when it proves there is none or runs out of time."""
    if until - now() < MIN_CPSAT_S:
        return None
    m = cp_model.CpModel()
    steps, rows, at = [], [], {}
    for i, b in enumerate(found):
        lo, hi = _floor(b, bottom) // ALIGNMENT, (capacity - b.size) // ALIGNMENT
        if hi < lo:
            return None
        at[b] = m.new_int_var(lo, hi, f"at{i}")
        units = b.size // ALIGNMENT
        steps.append(m.new_fixed_size_interval_var(b.first, b.last - b.first + 1, f"s{i}"))
        rows.append(m.new_fixed_size_interval_var(at[b], units, f"r{i}"))
    m.add_no_overlap_2d(steps, rows)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    limit_cpsat(solver.parameters, until)
    if run_cpsat(solver, m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return {b: solver.value(v) * ALIGNMENT for b, v in at.items()}


def _placement(offsets: dict[Block, int], bottom: list[int], method: str) -> Placement:
    height, load = list(bottom), list(bottom)
    for b, x in offsets.items():
        for k in range(b.first, b.last + 1):
            height[k] = max(height[k], x + b.size)
            load[k] += b.size
    return Placement({(b.tensor, b.dst): x for b, x in offsets.items()}, height, load,
                     method != "none", method)
