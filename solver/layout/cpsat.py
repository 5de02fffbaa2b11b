"""The ``cpsat`` layout solver's search over its CP-SAT model (``cpsat_model.py``).

``_solve`` builds the model, solves its LP relaxation (CLP) for a bound, reduced-cost
fixing and (whole problems) a rounded plan, and then lets CP-SAT search what is left.

The best baseline is the hint; when its plan (which may spill, outside this model) is
better than what the model found, that plan is returned instead, so the answer is never
worse than any baseline. ``solve_segment`` solves one segment of the LNS in ``lns.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from models.layout import LayoutPlan
from solver import progress
from solver.deadline import charge_model, limit_cpsat, now, run_cpsat
from solver.layout.cpsat_model import (
    UNITS_PER_US,
    LayoutModel,
    build,
    build_estimate_s,
    decode,
    decode_values,
    hint,
    least_us,
    lp_estimate_s,
    representable,
)
from solver.layout.evaluate import evaluate
from solver.layout.plan import Assignment, build_plan
from solver.layout.problem import LayoutProblem
from solver.relaxation import Relaxation, relax

MAX_MODEL_OPS = 60
"""Largest graph solved as one model. Up to here the model proves or improves within the
default 10 s; beyond it (ResNet-50, 89 ops, over 100,000 variables, 1-3 s to build) it found
nothing in 10 s where the bound by parts (``bound.py``), its rounding and the segment
search (``lns.py``) end within 1% of their bound (BENCHMARKS.md, gaps at scale)."""


@dataclass
class ModelAnswer:
    assignment: Assignment | None
    optimal: bool
    objective_us: float | None
    bound_us: float | None


def fits_whole(problem: LayoutProblem, seconds: float) -> bool:
    """Whether ``problem`` is solved as one model with ``seconds`` left: at most
    ``MAX_MODEL_OPS`` ops, and its model expected to be built and relaxed in that time
    (``build_estimate_s``, about twice what it takes: the generated 36-43-op graphs of
    large activations expected at 7.2-8.9 s were built, relaxed and proven optimal within
    6.3-7.0 s of a 10-s solve; the shipped graphs of up to 60 ops are expected at most at
    2.9 s). Beyond it the bound by parts and the segment search, whose rounds are sized to
    the time left."""
    return len(problem.order) <= MAX_MODEL_OPS and \
        build_estimate_s(problem, problem.order) <= seconds


def solve_model(problem: LayoutProblem, start: Assignment, deadline: float, seed: int,
                workers: int) -> ModelAnswer:
    """The model's best assignment before ``deadline`` (``deadline.now()``), hinted
    with ``start``; nothing when the graph is beyond ``MAX_MODEL_OPS`` or its model would
    not be built by then."""
    left = deadline - now()
    if len(problem.order) > MAX_MODEL_OPS or build_estimate_s(problem, problem.order) > left:
        return ModelAnswer(None, False, None, None)
    return _solve(problem, start, left, seed, workers, False)


def solve_segment(problem: LayoutProblem, start: Assignment, seconds: float, seed: int,
                  workers: int) -> ModelAnswer:
    """One LNS round (``lns.py``): the model of a segment of a larger problem, for at most
    ``seconds``; its objective and bound are the segment's, so none is reported as
    progress."""
    return _solve(problem, start, seconds, seed, workers, True)


COMPLETE_HINT_VARS = 50_000
"""Above this many variables CP-SAT's own completion of the partial hint was seen to give
up (ResNet-50's 134,000-variable model), so the hint is completed here; below it, our
completion slowed the proofs (bert-base-layer no longer proven within 10 s)."""


def complete_hint(lm: LayoutModel, seconds: float, workers: int) -> int | None:
    """Extend the hint (configurations, reads, spills) to every variable of the model;
    return that solution's objective (model units), None when it was not found.

    CP-SAT's own completion of a partial hint gives up on models of 10^5 variables, and
    the search then starts from nothing; with the hinted decisions fixed, a copy of the
    model solves in presolve, and its solution is a full hint."""
    probe = lm.model.clone()
    hinted = lm.model.proto.solution_hint
    for index, value in zip(hinted.vars, hinted.values, strict=True):
        probe.add(probe.get_int_var_from_proto_index(index) == value)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    limit_cpsat(solver.parameters, now() + seconds)
    if run_cpsat(solver, probe) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    values = list(solver.response_proto.solution)
    lm.model.clear_hints()
    hinted = lm.model.proto.solution_hint
    hinted.vars.extend(range(len(values)))
    hinted.values.extend(values)
    return round(solver.objective_value)


class _Progress(cp_model.CpSolverSolutionCallback):
    """Each improving solution's objective and a valid bound, for a whole-problem model (a
    segment's objective and bound are the segment's: the LNS reports its own). After
    reduced-cost fixing the search's bound holds only below the incumbent and above the
    LP bound, so it is reported clamped to both."""

    def __init__(self, floor: float | None, cap: float) -> None:
        super().__init__()
        self.floor, self.cap = floor, cap

    def on_solution_callback(self) -> None:
        bound = self.best_objective_bound / UNITS_PER_US
        if self.floor is not None:
            bound = max(bound, self.floor)
        progress.report(self.objective_value / UNITS_PER_US, min(bound, self.cap))


RELAXATION_SHARE = 0.5
"""At most this share of a search's remaining time goes to the LP relaxation."""


@dataclass
class _Incumbent:
    """The best plan so far, built once: its total and its copies price the fixings."""

    assignment: Assignment
    plan: LayoutPlan

    @property
    def total_us(self) -> float:
        return self.plan.total_latency_us


def _priced(problem: LayoutProblem, a: Assignment) -> _Incumbent:
    return _Incumbent(a, build_plan(problem, a, "cpsat", 0.0))


def _solve(problem: LayoutProblem, start: Assignment, seconds: float, seed: int,
           workers: int, segment: bool) -> ModelAnswer:
    """Build, hint and search the model of a whole problem (``_search_whole``) or of an
    LNS segment (``_search_segment``).

    Both first solve the model's LP relaxation with CLP (``solver/relaxation.py``):
    CP-SAT keeps two-literal rows out of its own LP, and on this model they carry most of
    the relaxation. Its reduced costs fix every 0/1 variable that no solution cheaper than
    the incumbent can move, and CP-SAT searches what is left."""
    if not representable(problem):
        return ModelAnswer(None, False, None, None)
    ends = now() + seconds
    lm = build(problem)
    charge_model(len(lm.model.proto.variables))
    hint(problem, lm, start)
    if segment:
        return _search_segment(problem, lm, ends, seed, workers)
    return _search_whole(problem, lm, start, ends, seed, workers)


def _search_segment(problem: LayoutProblem, lm: LayoutModel, ends: float, seed: int,
                    workers: int) -> ModelAnswer:
    """A segment (a fraction of a second): the incumbent is the completed hint, priced by
    the model itself, so the fixings never cut it and the fixed model's optimum is the
    segment's. No progress is reported: the objective is the segment's."""
    priced = complete_hint(lm, (ends - now()) / 2, workers)
    if priced is not None and _relaxable(lm, ends):
        relaxed = relax(lm.model, (ends - now()) * RELAXATION_SHARE)
        if relaxed is not None:
            relaxed.fix_by_reduced_cost(lm.model, priced)
    solver = _solver(ends, seed, workers)
    status = run_cpsat(solver, lm.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ModelAnswer(None, False, None, None)
    return ModelAnswer(decode(problem, lm, solver), status == cp_model.OPTIMAL,
                       solver.objective_value / UNITS_PER_US,
                       solver.best_objective_bound / UNITS_PER_US)


def _search_whole(problem: LayoutProblem, lm: LayoutModel, start: Assignment, ends: float,
                  seed: int, workers: int) -> ModelAnswer:
    """A whole problem. The incumbent is the best baseline's plan (which may lie outside
    the model) or the relaxation's rounding when the evaluator accepts it and it is
    cheaper; the rounding is hinted even when invalid (CP-SAT repairs it). While the
    incumbent is still the baseline, the first search gets half the time so its answer
    can tighten the fixings for the second."""
    incumbent = _priced(problem, start)
    relaxed = relax(lm.model, (ends - now()) * RELAXATION_SHARE) if _relaxable(lm, ends) \
        else None
    lp_bound = None if relaxed is None else relaxed.objective / UNITS_PER_US
    rounds = 1
    if relaxed is not None:
        rounded = _priced(problem, decode_values(problem, lm, lambda v: relaxed.values[v.index]))
        if rounded.total_us < incumbent.total_us and evaluate(problem, rounded.plan).valid:
            incumbent = rounded
        else:
            rounds = 2
        progress.report(incumbent.total_us, lp_bound)
        lm.model.clear_hints()
        hint(problem, lm, rounded.assignment)
        _fix(problem, lm, relaxed, incumbent)
    if len(lm.model.proto.variables) > COMPLETE_HINT_VARS:
        complete_hint(lm, (ends - now()) / 2, workers)
    for round_ in range(rounds, 0, -1):
        solver = _solver(now() + (ends - now()) / round_, seed, workers)
        watch = _Progress(lp_bound, incumbent.total_us) if progress.active() else None
        status = run_cpsat(solver, lm.model, watch)
        answer, best = _after_fixing(problem, lm, solver, status, lp_bound, incumbent)
        progress.report(answer.objective_us, answer.bound_us)
        if answer.optimal or round_ == 1:
            return answer
        if best is not incumbent:
            incumbent = best
            lm.model.clear_hints()
            hint(problem, lm, incumbent.assignment)
            _fix(problem, lm, relaxed, incumbent)
    raise AssertionError("unreachable: the last round returns")


def _relaxable(lm: LayoutModel, ends: float) -> bool:
    """Whether the LP is expected to end before ``ends`` (``lp_estimate_s``, cautious):
    converting the model is not interruptible, and the LP's fixings are what proves the
    larger models optimal, so it is skipped only when it would overrun."""
    return lp_estimate_s(lm) <= ends - now()


def _solver(ends: float, seed: int, workers: int) -> cp_model.CpSolver:
    """CP-SAT with the limit, seed and workers, and no probing in presolve: it took whole
    rounds on 30,000-variable models (UNet: 3.9 s of 5) and the fixings already did its
    work; without it 19 of the 20 graphs of up to 60 ops prove optimal within 10 s."""
    solver = cp_model.CpSolver()
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = workers
    solver.parameters.cp_model_probing_level = 0
    limit_cpsat(solver.parameters, ends)
    return solver


def _fix(problem: LayoutProblem, lm: LayoutModel, relaxed: Relaxation,
         incumbent: _Incumbent) -> None:
    """Reduced-cost fixing against the incumbent's cost in model units: its evaluated total
    plus how far the model's rounding of each term can put it above."""
    plan = incumbent.plan
    terms = sum(1 + len(problem.ops[op].inputs) for op in problem.order)
    terms += len(plan.reshards) + len(plan.spills) + len(plan.reloads)
    relaxed.fix_by_reduced_cost(lm.model, incumbent.total_us * UNITS_PER_US + terms / 2 + 1)


def _after_fixing(problem: LayoutProblem, lm: LayoutModel, solver: cp_model.CpSolver,
                  status: int, lp_bound: float | None,
                  incumbent: _Incumbent) -> tuple[ModelAnswer, _Incumbent]:
    """The answer of a search after reduced-cost fixing. Every plan the fixings cut off
    costs more than the incumbent, so the optimum is at least the smaller of the
    incumbent and the fixed model's bound (and at least the LP bound); a fixed model
    proven optimal, or infeasible (nothing left beats the incumbent), proves the better of
    its answer and the incumbent optimal, to the model's rounding of each term. Also
    returns the better plan, priced."""
    best = incumbent
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = _priced(problem, decode(problem, lm, solver))
        if found.total_us < best.total_us:
            best = found
    proven = status in (cp_model.OPTIMAL, cp_model.INFEASIBLE)
    searched = incumbent.total_us if status == cp_model.INFEASIBLE \
        else solver.best_objective_bound / UNITS_PER_US
    bound = min(incumbent.total_us, searched)
    if lp_bound is not None:
        bound = max(bound, lp_bound)
    bound = min(bound, best.total_us)
    return ModelAnswer(best.assignment, proven, best.total_us,
                       best.total_us if proven else bound), best


def latency_floor_us(problem: LayoutProblem, lo: int = 0, hi: int | None = None) -> float:
    """A valid lower bound on any plan's total (or on its ops at steps ``lo .. hi - 1``):
    every op at its cheapest candidate with its cheapest reads, and no copies or spills."""
    return sum(min(least_us(c) for c in problem.ops[op].candidates)
               for op in problem.order[lo:hi])

