"""The ``layout`` family: TTNN-style L1/DRAM sharding on a Tensix-like device.

The solver registry maps a name to a policy that turns an analysed problem into an
``Assignment``; ``solve`` runs it, builds the plan and has the independent evaluator
check it. A new solver (``cpsat``, a batch-compare tool) registers here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from models.device import DeviceSpec
from models.errors import InputValidationError, Issue
from models.layout import L1Allocation, LayoutGraph, LayoutPlan, Order
from solver import progress
from solver.deadline import Deadline, now, wrap_up_s
from solver.layout import bound, cpsat, dfsharding, dram, greedy, lns, order_moves
from solver.layout.address import Placement, place_assignment, places
from solver.layout.cpsat_model import build_estimate_s
from solver.layout.evaluate import evaluate
from solver.layout.explain import explain as explain_plan
from solver.layout.ops import DEFAULT_MAX_CONFIGS
from solver.layout.order import search_order
from solver.layout.plan import Assignment, Offsets, build_plan, total_us
from solver.layout.problem import LayoutProblem, analyze, resolve_device

DEFAULT_TIME_LIMIT_S = 10.0


@dataclass(frozen=True)
class SolveOptions:
    """Knobs every solver receives; heuristics ignore the ones they have no use for.
    ``ends`` is the deadline on the running solve's clock (``deadline.now()``)."""

    ends: float
    seed: int = 0
    workers: int = 1
    order: Order = "given"


@dataclass(frozen=True)
class Outcome:
    """What a policy returns: its decisions plus, for exact solvers, proof information."""

    assignment: Assignment
    status: str = "feasible"
    objective: float | None = None
    best_bound: float | None = None
    gap: float | None = None


Policy = Callable[[LayoutProblem, SolveOptions], Outcome]


def _heuristic(assign: Callable[[LayoutProblem], Assignment]) -> Policy:
    return lambda problem, _options: Outcome(assign(problem))


BASELINE_POLICIES: dict[str, Callable[[LayoutProblem], Assignment]] = {
    "dram": dram.assign,
    "dfsharding": dfsharding.assign,
    "greedy": greedy.assign,
}
BASELINES = tuple(BASELINE_POLICIES)
QUICK_BASELINES = {name: BASELINE_POLICIES[name] for name in ("dram", "dfsharding")}


def _global(problem: LayoutProblem, options: SolveOptions) -> Outcome:
    """The CP-SAT model (``cpsat_model.py``, searched by ``cpsat.py``) hinted with the best
    baseline, the better of the two plans kept; graphs beyond one model
    (``cpsat.fits_whole``: too many ops, or a model that would take too long to build) get
    the bound by parts and the segment search (``_by_segments``). The answer is never
    worse than a baseline (``greedy`` counts when its walk ends before the deadline: always
    on graphs of up to 32 ops), and every plan kept passed the evaluator."""
    priced = [(total_us(problem, a), a)
              for a in (assign(problem) for assign in QUICK_BASELINES.values())]
    try:  # the slowest baseline (3 s on a 5,000-op chain) stops at the deadline
        found = greedy.assign(problem, options.ends)
        priced.append((total_us(problem, found), found))
    except greedy.TimeUp:
        pass
    deadline = options.ends
    whole = cpsat.fits_whole(problem, deadline - now())
    placed = [(total, a) for total, a in priced if places(problem, a)]  # dram's always does
    # a baseline that runs the ops in its own order (dfsharding's depth-first one) is no
    # plan of this schedule: it is returned only if the search ends above it
    here = [(total, a) for total, a in (priced if whole else placed)
            if a.schedule == problem.order]
    best_total, best = min(here, key=lambda p: p[0])
    progress.report(best_total)
    if whole:
        fallback = min((p for p in placed if p[1].schedule == problem.order),
                       key=lambda p: p[0])[1]
        outcome = _whole(problem, best, best_total, fallback, deadline, options)
    else:
        outcome = _by_segments(problem, best, best_total, deadline, options)
    others = [(total, a) for total, a in placed if a.schedule != problem.order]
    return _or_reordered(problem, outcome, others)


ADDRESS_SHARE = 0.15
"""With ``capacity="address"``, the share of a whole model's search time (what is left
after its expected build) kept after its search:
to make room where its plan fits by sum but not by address (``_make_room``), else to go on
improving it by segments (``lns.py``), keeping only plans that place."""


def _whole(problem: LayoutProblem, best: Assignment, best_total: float, fallback: Assignment,
           deadline: float, options: SolveOptions) -> Outcome:
    """The whole graph's model, hinted with ``best``; the better of the two plans. When
    plans must place (``LayoutProblem.addresses``) and the search ends before proving its
    plan optimal, the time kept (``ADDRESS_SHARE``) goes to a plan that places (else
    ``fallback``, which does)."""
    # kept from the search, not from the build (``cpsat.fits_whole`` counted on all of it)
    search = max(0.0, deadline - now() - build_estimate_s(problem, problem.order))
    ends = deadline - (ADDRESS_SHARE * search if problem.addresses else 0.0)
    found = cpsat.solve_model(problem, best, ends, options.seed, options.workers)
    if found.assignment is not None:
        plan = build_plan(problem, found.assignment, "cpsat", 0.0)
        if plan.total_latency_us <= best_total and evaluate(problem, plan).valid:
            best_total, best = plan.total_latency_us, found.assignment
    # The model's bound bounds every plan the model expresses, the baseline's included; a
    # proven optimum no better than the incumbent makes the incumbent optimal too. The proof
    # is in the model's integer cost units, so an optimal plan's gap is 0 even though its
    # evaluated total differs from the bound by the rounding of each term.
    lower = max(found.bound_us or 0.0, cpsat.latency_floor_us(problem))
    optimal = found.optimal
    if problem.addresses and not optimal:
        if not places(problem, best):
            roomy = _make_room(problem, best, deadline, options)
            best = roomy if roomy is not None else fallback
            best_total = total_us(problem, best)
        best, best_total = _improve(problem, best, best_total, deadline, options)
    lower = min(lower, best_total)
    gap = 0.0 if optimal else _gap(best_total, lower)
    return Outcome(best, "optimal" if optimal else "feasible", best_total, lower, gap)


def _make_room(problem: LayoutProblem, a: Assignment, deadline: float,
               options: SolveOptions) -> Assignment | None:
    """``a`` re-solved around the steps where its L1 buffers could not be placed
    (``lns.repair``), with room reserved there (``_reserve``), until it places by the
    greedy orders (``address.places``); None when it does not by ``deadline``."""
    reserved = dict(problem.reserved_l1)
    for _ in range(REPAIRS):
        if places(problem, a, options.workers):
            return a
        placement = place_assignment(problem, a, None)
        _reserve(reserved, placement, problem.usable_l1)
        found = lns.repair(replace(problem, reserved_l1=dict(reserved)), a, deadline,
                           options.seed, options.workers)
        if found is None:
            return None
        a = found
    return a if places(problem, a) else None


def _reserve(reserved: dict[int, int], placement: Placement, room: int) -> None:
    """More room reserved at the steps ``placement`` overflows: the bytes missing there,
    and at least enough that the plan's own load no longer fits, so that a plan re-solved
    under the reservation differs there."""
    for k, height in enumerate(placement.height):
        if height > room:
            reserved[k] = max(reserved.get(k, 0) + height - room, room - placement.load[k] + 1)


def _or_reordered(problem: LayoutProblem, outcome: Outcome,
                  others: list[tuple[float, Assignment]]) -> Outcome:
    """``outcome``, or the cheapest of ``others`` (plans on other schedules) when it is
    cheaper, against the per-op floor: the one bound here that holds for every schedule."""
    if not others or outcome.objective is None:
        return outcome
    total, a = min(others, key=lambda p: p[0])
    if total >= outcome.objective - 1e-9:
        return outcome
    lower = min(cpsat.latency_floor_us(problem), total)
    return Outcome(a, "feasible", total, lower, _gap(total, lower))


BOUND_SHARE = 0.6
"""Parts of a large graph's lower bound (``bound.py``) are started within this share of
its search's time, when they would end before the search's deadline: a part started
late can leave the repair and the segment search little time, but on the graphs measured
the bound's rounding is worth more than the segment search's last seconds (ResNet-50 at
batch 8, 10 s: 2.2% below the search alone)."""


MOVES_SHARE, REBOUND_SHARE = 0.5, 0.5
"""With ``order="search"``, the share of a large graph's time after its bound that the
order moves (``order_moves.py``) may start rounds in, then the share of what is left in
which the parts they reordered may start being relaxed again (``bound.rebound``); the
segment search gets the rest."""


def _by_segments(problem: LayoutProblem, best: Assignment, best_total: float, deadline: float,
                 options: SolveOptions) -> Outcome:
    """The parts' LP bound (``bound.py``), whose rounded plan replaces ``best`` when it
    is valid and cheaper, then LNS over segments of the schedule (``lns.py``) until the
    deadline; the best plan against the better of that bound and the per-op floor. With
    ``order="search"``, order moves (``order_moves.py``) come before the segment search,
    and a plan they reorder gets the bound of its own schedule (``bound.rebound``)."""
    parts = bound.lower_bound(problem, deadline, fallback=best,
                              starts_until=now() + BOUND_SHARE * (deadline - now()))
    floor = cpsat.latency_floor_us(problem)
    lower = max(parts.bound_us, floor)
    if parts.rounded is not None:
        rounded = lns.repair(problem, parts.rounded, deadline, options.seed, options.workers)
        rounded_total = None if rounded is None or not places(problem, rounded) else \
            total_us(problem, rounded)
        if rounded_total is not None and rounded_total < best_total:
            best, best_total = rounded, rounded_total
    moving = options.order == "search"
    progress.report(best_total, None if moving else lower)
    if moving:
        moved = order_moves.reorder(problem, best, best_total, parts.spans,
                                    now() + MOVES_SHARE * max(0.0, deadline - now()),
                                    options.seed, options.workers)
        if moved.parts:
            problem, best, best_total = moved.problem, moved.assignment, moved.total_us
            lower = max(bound.rebound(problem, parts, moved.parts, deadline,
                                      now() + REBOUND_SHARE * max(0.0, deadline - now())),
                        floor)
        progress.report(best_total, lower)
    best, best_total = _improve(problem, best, best_total, deadline, options)
    lower = min(lower, best_total)
    return Outcome(best, "feasible", best_total, lower, _gap(best_total, lower))


def _improve(problem: LayoutProblem, best: Assignment, best_total: float, until: float,
             options: SolveOptions) -> tuple[Assignment, float]:
    """``best`` after the segment search (``lns.py``) until ``until``, when it gains."""
    found = lns.search(problem, best, until, options.seed, options.workers)
    if found.improved and found.total_us < best_total and evaluate(
            problem, build_plan(problem, found.assignment, "cpsat", 0.0)).valid:
        return found.assignment, found.total_us
    return best, best_total


def _gap(objective: float | None, lower: float | None) -> float | None:
    if objective is None or lower is None:
        return None
    return max(0.0, (objective - lower) / objective) if objective else 0.0


def _cpsat(problem: LayoutProblem, options: SolveOptions) -> Outcome:
    """``_global`` on the given order, or with ``order="search"`` also on an order that
    makes room in L1 (``order.py``)."""
    if options.order == "search":
        return search_order(problem, options, _global)
    return _global(problem, options)


SOLVERS: dict[str, Policy] = {
    "cpsat": _cpsat,
    **{name: _heuristic(assign) for name, assign in BASELINE_POLICIES.items()},
}


REPAIRS = 8
"""Most re-solves with room reserved where a plan's L1 buffers could not be placed."""
PLACE_S, PLACE_S_PER_OP = 0.15, 2e-4
"""Time kept after the search for placing the buffers (``address.py``: the top-down order
takes 0.02 s for 850 buffers, CP-SAT placed 108 in 0.01 s; it is started with at least
0.1 s)."""


def place_reserve_s(ops: int) -> float:
    return PLACE_S + PLACE_S_PER_OP * ops


def _addressed(problem: LayoutProblem, outcome: Outcome, solver: str,
               options: SolveOptions, until: float) -> tuple[Outcome, Offsets]:
    """``outcome`` with L1 offsets for its plan (``address.py``). A ``cpsat`` plan that
    fits by sum but not by address is solved again by the model alone, on its schedule,
    with room reserved at the steps that overflowed (the bytes missing there, and at least
    enough that the plan's own load no longer fits, so each round cuts it off), while the
    search's deadline allows; failing that, the cheaper of the ``dram`` and ``dfsharding``
    plans that places is kept (``dram`` always does). The sum model is a relaxation of the
    address one, so its bound still holds for plans on its schedule, and an optimum that
    places is optimal. A baseline's plan is kept as it is: the evaluator rejects it if it
    does not place. Placements run until ``until``."""
    if outcome.assignment.offsets is not None:  # placed during the search
        return outcome, outcome.assignment.offsets
    placement = place_assignment(problem, outcome.assignment, until, options.workers)
    if placement.fits or solver != "cpsat":
        return outcome, placement.offsets
    lower, reserved = outcome.best_bound, dict(problem.reserved_l1)
    schedule = list(outcome.assignment.schedule)
    room = problem.usable_l1
    for _ in range(REPAIRS):
        if now() >= options.ends:
            break
        _reserve(reserved, placement, room)
        tight = replace(problem, order=schedule, reserved_l1=dict(reserved))
        # started from the all-DRAM plan, which every reservation admits (the model
        # returns its start when it finds nothing better, and the last plan no longer fits)
        found = cpsat.solve_model(tight, dram.assign(tight), options.ends, options.seed,
                                  options.workers)
        if found.assignment is None:
            break
        last = found.assignment
        placement = place_assignment(problem, last, until, options.workers)
        if placement.fits:
            return _rebound(last, total_us(problem, last), lower), placement.offsets
    priced = sorted((total_us(problem, a), name, a)
                    for name, a in ((n, assign(problem)) for n, assign in
                                    QUICK_BASELINES.items()))
    for total, _name, a in priced:
        placement = place_assignment(problem, a, until, options.workers)
        if placement.fits:
            same_order = a.schedule == schedule
            return _rebound(a, total, lower if same_order else None), placement.offsets
    raise AssertionError("unreachable: the dram baseline holds no L1 buffer")


def _rebound(assignment: Assignment, total: float, lower: float | None) -> Outcome:
    """A repaired plan against the first model's bound (a tightened model's is not one;
    None for a plan on another schedule than the model's)."""
    gap = _gap(total, lower)
    status = "optimal" if gap is not None and gap <= 1e-9 else "feasible"
    return Outcome(assignment, status, total, lower, gap)


def solve(graph: LayoutGraph, solver: str = "cpsat", device: str | DeviceSpec | None = None,
          *, deadline: Deadline | None = None, time_limit_s: float | None = None,
          seed: int = 0, workers: int = 1, max_configs: int = DEFAULT_MAX_CONFIGS,
          explain: bool = False, capacity: L1Allocation = "address",
          order: Order = "given") -> LayoutPlan:
    """Plan ``graph`` with the named solver until ``deadline`` (default: ``time_limit_s``
    from now, else 10 s); the evaluator's verdict is in the plan, and with ``explain`` the
    differences from the best baseline's plan. With ``capacity="address"`` every L1
    buffer gets an offset the evaluator checks as the allocator would (``address.py``);
    ``"sum"`` checks bytes per step only, as before. With ``order="search"`` ``cpsat`` also
    tries an op order that makes room in L1 (``order.py``); the plan's ``schedule`` is the
    order it runs. A deterministic deadline gives a plan that repeats byte for byte (its
    wall time is left out)."""
    if solver not in SOLVERS:
        raise InputValidationError([Issue(("solver",), f"unknown solver '{solver}'; choose one "
                                          f"of {sorted(SOLVERS)}", "solver.unknown")], "request")
    if deadline is None:
        deadline = Deadline.after(time_limit_s or DEFAULT_TIME_LIMIT_S)
    started = time.monotonic()
    placing = capacity == "address"
    problem = replace(analyze(graph, resolve_device(graph, device), max_configs),
                      addresses=placing)
    with deadline.running() as run:
        ends = run.at - wrap_up_s(len(problem.order))
        options = SolveOptions(ends - (place_reserve_s(len(problem.order)) if placing else 0.0),
                               seed, workers, order)
        outcome = SOLVERS[solver](problem, options)
        offsets = None
        if placing:
            outcome, offsets = _addressed(problem, outcome, solver, options, ends)
        repeatable = deadline.deterministic and not run.wall_stopped
    plan = build_plan(problem, outcome.assignment, solver, 0.0, outcome.status,
                      outcome.objective, outcome.best_bound, outcome.gap, offsets)
    verdict = evaluate(problem, plan)
    wall = None if repeatable else time.monotonic() - started
    stats = plan.stats.model_copy(update={"wall_time_s": wall, "deterministic": repeatable})
    if not verdict.valid:
        return plan.model_copy(update={"stats": stats, "status": "invalid",
                                       "violations": verdict.violations})
    plan = plan.model_copy(update={"stats": stats})
    if explain:
        baselines = {b: build_plan(problem, BASELINE_POLICIES[b](problem), b, 0.0)
                     for b in BASELINES}
        plan = plan.model_copy(update={"explanation": explain_plan(graph, plan, baselines)})
    return plan
