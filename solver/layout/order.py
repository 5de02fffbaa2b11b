"""An op order that makes room in L1 for the plan the layout would like.

The layout model takes the schedule as given, and L1 pressure (so spills, reloads and
tensors left in DRAM) depends on it: two branches run interleaved keep both branches'
intermediates alive at once. ``memory_order`` takes an assignment (the plan the model
chooses when L1 is unlimited, ``without_capacity``) and finds, by CP-SAT over the
positions of the ops (every topological order), one whose fullest step holds the fewest
bytes per core of that plan's L1 buffers and circular buffers, then among those one whose
buffers are live for the fewest byte-steps. ``search_order`` solves the layout on that
order too and keeps the better plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from solver.deadline import limit_cpsat, now, run_cpsat
from solver.layout import dram
from solver.layout.cpsat import fits_whole, solve_model
from solver.layout.cpsat_model import build_estimate_s
from solver.layout.plan import (
    Assignment,
    Residency,
    derive_copies,
    l1_usage,
    with_output_spills,
)
from solver.layout.problem import LayoutProblem

if TYPE_CHECKING:
    from solver.layout import Outcome, Policy, SolveOptions

MIN_ORDER_S = 0.2
"""Least time the order model is started with: two CP-SAT solves of at least 0.1 s."""
UNLIMITED = 1 << 40
"""Bytes per core added to every step's room by ``without_capacity``: more than any L1."""


def without_capacity(problem: LayoutProblem) -> LayoutProblem:
    """``problem`` with room for everything at every step, for the ``cpsat`` model alone
    (the baselines and the evaluator keep the device's L1): the plan it finds is the one
    capacity holds back."""
    return replace(problem, reserved_l1=dict.fromkeys(range(len(problem.order)), -UNLIMITED))


@dataclass(frozen=True)
class _Buffer:
    """An L1 buffer whose lifetime follows the order: from the first of ``first`` to the
    last of ``last`` (from the first step when ``first`` is empty, to the last when
    ``last`` is)."""

    name: str
    first: tuple[str, ...]
    last: tuple[str, ...]
    size: int


def _buffers(problem: LayoutProblem, decided: Assignment) -> list[_Buffer]:
    """``decided``'s L1 homes and copies. A home lives from its producer to its last
    reader, a copy from its first reader to its last; on a segment (``lns.segment``) a
    tensor entering in L1 lives from its start, one still read after it to its end.
    Spills of the assignment other than graph outputs' are ignored: it is meant to be a
    plan without them."""
    a = with_output_spills(problem, decided)
    res = Residency(problem, a)
    out = []
    for t, info in problem.tensors.items():
        readers = tuple(op for op, _ in info.consumers)
        if not res.home(t).is_l1 or not (info.producer or readers):
            continue
        made = (info.producer,) if info.producer else ()
        last = () if t in problem.live_out else (*made, *readers)
        out.append(_Buffer(t, made, last, problem.bytes_per_core(t, res.home(t))))
    for c in derive_copies(problem, a):
        if c.dst.is_l1:
            out.append(_Buffer(f"{c.tensor}@{c.dst.key}", tuple(c.consumers),
                               tuple(c.consumers), problem.bytes_per_core(c.tensor, c.dst)))
    return out


def peak_bytes(problem: LayoutProblem, decided: Assignment, order: list[str]) -> int:
    """Bytes per core at the fullest step of ``order`` under ``decided``'s L1 buffers
    (as ``memory_order`` counts them), circular buffers and reserved room."""
    pos = {op: k for k, op in enumerate(order)}
    delta = [0] * (len(order) + 1)
    for b in _buffers(problem, decided):
        delta[min((pos[op] for op in b.first), default=0)] += b.size
        delta[max((pos[op] for op in b.last), default=len(order) - 1) + 1] -= b.size
    running, peak = 0, 0
    for k, op in enumerate(order):
        running += delta[k]
        peak = max(peak, running + decided.configs[op].cb_bytes_per_core
                   + max(0, problem.reserved_l1.get(k, 0)))
    return peak


def memory_order(problem: LayoutProblem, decided: Assignment, until: float,
                 workers: int = 1) -> list[str] | None:
    """A topological order of the ops under which ``decided``'s L1 buffers (``_buffers``)
    and circular buffers, with the room reserved at each step, need the fewest bytes per
    core at their fullest step (half the time), then, with the fullest step at most that
    or the usable L1, are live for the fewest byte-steps; None when CP-SAT finds none
    before ``until``. On a segment (``lns.segment``) the ops made before it come first
    whatever the order, so every order of its ops is one of the whole schedule's."""
    if until - now() < MIN_ORDER_S:
        return None
    step = {op: k for k, op in enumerate(decided.schedule)}
    m = cp_model.CpModel()
    n = len(problem.order)
    pos = {op: m.new_int_var(0, n - 1, f"pos_{op}") for op in problem.order}
    m.add_all_different(pos.values())
    for op in problem.order:
        for t in problem.ops[op].inputs:
            producer = problem.tensors[t].producer
            if producer is not None:
                m.add(pos[producer] < pos[op])
        m.add_hint(pos[op], step[op])
    intervals, demands, area = [], [], []
    for b in _buffers(problem, decided):
        start = _extreme(m, [pos[op] for op in b.first], 0, n, f"start_{b.name}", low=True)
        end = _extreme(m, [pos[op] for op in b.last], n - 1, n, f"end_{b.name}", low=False)
        steps = m.new_int_var(1, n, f"steps_{b.name}")
        intervals.append(m.new_interval_var(start, steps, end + 1, f"live_{b.name}"))
        demands.append(b.size)
        area.append(b.size * steps)
    for op in problem.order:
        intervals.append(m.new_fixed_size_interval_var(pos[op], 1, f"cb_{op}"))
        demands.append(decided.configs[op].cb_bytes_per_core)
    for k, room in problem.reserved_l1.items():
        if room > 0:
            intervals.append(m.new_fixed_size_interval_var(k, 1, f"reserved_{k}"))
            demands.append(room)
    peak = m.new_int_var(0, sum(demands), "peak")
    m.add_cumulative(intervals, demands, peak)
    m.minimize(peak)
    solver = _solver(now() + (until - now()) / 2, workers)
    if run_cpsat(solver, m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    found = {op: solver.value(pos[op]) for op in problem.order}
    # then, at that peak (or the usable L1, if higher), the fewest live byte-steps: the
    # peak step alone does not say how long the rest of L1 stays taken
    m.add(peak <= max(solver.value(peak), problem.usable_l1))
    m.minimize(sum(area))
    m.clear_hints()
    for op, k in found.items():
        m.add_hint(pos[op], k)
    solver = _solver(until, workers)
    if run_cpsat(solver, m) in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = {op: solver.value(pos[op]) for op in problem.order}
    return sorted(problem.order, key=found.__getitem__)


def _solver(until: float, workers: int) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    limit_cpsat(solver.parameters, until)
    return solver


def _extreme(m: cp_model.CpModel, values: list[cp_model.IntVar], empty: int, n: int,
             name: str, low: bool) -> cp_model.IntVar | cp_model.LinearExprT:
    """The first (``low``) or last of ``values``; ``empty`` when there are none."""
    if len(values) <= 1:
        return values[0] if values else empty
    var = m.new_int_var(0, n - 1, name)
    (m.add_min_equality if low else m.add_max_equality)(var, values)
    return var


UNLIMITED_SHARE, ORDER_SHARE, GIVEN_SHARE = 0.15, 0.2, 0.5
"""Shares of the time left: the plan without capacity (or, when more, half as long again
as its model's estimated build, ``build_estimate_s``, up to ``UNLIMITED_MOST``), then the
order model, then (when the order found differs) the plan on the given order; the last
solve gets the rest."""
UNLIMITED_MOST = 0.5


def search_order(problem: LayoutProblem, options: SolveOptions, policy: Policy) -> Outcome:
    """``policy``'s outcome on the given order, and on ``memory_order`` of the plan the
    model finds without capacity when that plan does not fit the given order as it is
    and the order found differs: the cheaper of the two. Graphs beyond one model
    (``cpsat.fits_whole``) are reordered window by window inside the segment search
    (``order_moves.py``). Each outcome's bound and status are for its own
    schedule, as every layout plan's are."""
    if not fits_whole(problem, options.ends - now()):
        return policy(problem, options)  # its order moves run inside the segment search
    options = replace(options, order="given")
    # a model expected to take longer than the share gets half as long again to search
    left = options.ends - now()
    share = max(UNLIMITED_SHARE, min(UNLIMITED_MOST, 1.5 * build_estimate_s(
        problem, problem.order) / max(left, 1e-9)))
    unlimited = solve_model(without_capacity(problem), dram.assign(problem),
                            _share(options, share).ends, options.seed, options.workers)
    if unlimited.assignment is None or _fits(problem, unlimited.assignment):
        return policy(problem, options)
    order = memory_order(problem, unlimited.assignment,
                         _share(options, ORDER_SHARE).ends, options.workers)
    if order is None or order == problem.order:
        return policy(problem, options)
    given = policy(problem, _share(options, GIVEN_SHARE))
    other = policy(replace(problem, order=order), options)
    unpriced = float("inf")
    better = (other.objective if other.objective is not None else unpriced) < (
        given.objective if given.objective is not None else unpriced) - 1e-9
    return other if better else given


def _fits(problem: LayoutProblem, decided: Assignment) -> bool:
    """The plan's L1 fits every step of its own order as it is (so L1 costs it nothing)."""
    return max(l1_usage(problem, decided), default=0) <= \
        problem.usable_l1


def _share(options: SolveOptions, share: float) -> SolveOptions:
    return replace(options, ends=now() + share * max(0.0, options.ends - now()))
