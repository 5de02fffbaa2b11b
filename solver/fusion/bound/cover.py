"""The cover bound: the cheapest choice of priced op sets that runs every op.

Every subgraph of a schedule runs some connected op set (S2.4) with some tensors resident
from the previous subgraph and some outputs retained. Each op set is priced for each such
arrival (``pricing.py``); CP-SAT then picks the cheapest choice of them that runs every
op, writes every graph output, and writes (or keeps) every tensor it reads that a graph
input is not. No order, no one-subgraph retention limit, no availability: each is a
relaxation, so the optimum of that cover, and CP-SAT's proven bound on it, bounds every
valid schedule.

Op sets not priced (the enumeration budget or the deadline ran out) leave their ops to
per-op fillers (``Fillers``): what any such set computes for an op (``roles.py``: its area
share, or, for a MatMul that only a head role leaves to them, the recomputation that role
forces), the traffic it forces (``forced.py``: split-K reloads, loads of big graph inputs,
writes every schedule makes, and the loads or recomputation a consumer of those writes
pays), and for heads sharing a weight too big for the capacity what each pays
(``shared_heads.py``). The unpriced sets together pay at least the largest of those sums
over their (designated) ops, so the cover stays a bound, weaker than a complete one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from math import gcd

from ortools.sat.python import cp_model

from solver.deadline import limit_cpsat, now, run_cpsat
from solver.fusion.bound.forced import forced_traffic, must_write
from solver.fusion.bound.pricing import QUICK_SPLITS, Priced, least, price
from solver.fusion.bound.roles import unpriced_compute, unpriced_roots
from solver.fusion.bound.shared_heads import shared_operands
from solver.fusion.candidates import connected_op_sets
from solver.fusion.context import ScoringContext

SET_BUDGET = 30000
"""Connected op sets enumerated for pricing at most; pricing takes them smallest first
while time is left. Ten times the solver's whole-graph model: pricing is cheaper than
scoring, and on the generated suite (10 s, 2 workers) this completed the covers of five
graphs of 19-26 ops that 3,000 left partial (``gen-gated-mlp-05`` ``per_op``: 9.6% higher)."""
COVER_TIME_S, COVER_SHARE = 1.0, 0.05
"""Time kept for solving the cover: at least this, or this share of what is left. The
cover of benchmark 5 (2,343 op sets, every arrival priced) solves in 0.07 s; pricing is
what needs the time, and a cover cut short still proves a valid bound."""
COST_RESOLUTION = 2**53
"""Cover costs are rounded (down) to at most this many steps of their total: CP-SAT
reports its proven bound as a double, exact only below 2**53."""
LEVEL_SOLVE_S = 0.5
"""Most time the cover of every op set up to one size gets while pricing goes on."""
REFINE_FACTOR = 32
"""Each refinement of a price the cover picks allows this factor more range splits."""
MOST_SPLITS = QUICK_SPLITS * REFINE_FACTOR**2
"""A price is refined no further once its splits reach this: on benchmark 7 ``per_op`` one
op set's next refinement (524,288 splits) took the 23 s left of a 30-s solve and stayed
a range's floor, where 16,384 splits make most prices exact within 2 s."""
IDLE_ROUNDS = 2
"""Refinement rounds in a row that leave the cover where it was before refining stops
(one such round may only have swapped a tie; benchmark 7 ``per_op`` spent 20 s more on
rounds that raised nothing)."""


@dataclass(frozen=True)
class CoverBound:
    """The bound, and how much of the problem was priced exactly."""

    value: Fraction
    """The best proven bound among the covers solved: the last one, or the cover of every
    op set up to some size, solved while pricing went on."""
    sets_priced: int
    complete: bool
    """Every connected op set was priced (no op fell back to a filler)."""
    optimal: bool
    """CP-SAT solved the last cover to optimality (else its proven bound stands for it)."""


@dataclass(frozen=True)
class Fillers:
    """What the op sets left unpriced pay for an op they run, when one of them is the op's
    designated one: its compute (``unpriced_compute``; None when no unpriced set can run
    it) and its forced traffic (``forced_traffic``). Each unpriced subgraph pays at least
    its compute and at least its traffic, so all of them together pay at least either sum
    over the ops they are designated for."""

    compute: Sequence[int | None]
    traffic: Sequence[int]
    shared: Sequence[dict[int, int]]
    """Per group of heads sharing a weight (``shared_operands``), what each of its readers
    that an unpriced set can run only as a head pays there (``head_floor``): the unpriced
    sets together pay at least each group's sum too."""


def make_fillers(ctx: ScoringContext, attempted: Sequence[tuple[int, ...]]) -> Fillers:
    """The fillers for every op outside the ``attempted`` op sets."""
    free_roots = unpriced_roots(ctx, attempted)
    shared = [{q: group.head_floor for q in group.readers if q not in free_roots}
              for group in shared_operands(ctx) if group.head_floor is not None]
    return Fillers(unpriced_compute(ctx, free_roots), forced_traffic(ctx),
                   [floors for floors in shared if floors])


def cover_bound(ctx: ScoringContext, deadline: float) -> CoverBound:
    """The cover bound, priced and solved before ``deadline`` (a ``deadline.now()`` value).

    Every op set is first priced with ``QUICK_SPLITS``; then, while time is left, the
    prices the cover's optimum picks that are not exact are refined (``REFINE_FACTOR``
    times their splits each time, up to ``MOST_SPLITS``) and the cover solved again: only
    those can hold the bound down. Refining stops after ``IDLE_ROUNDS`` rounds that raise
    nothing.

    Op sets are priced smallest first, and each time every op set up to a size is priced
    while the pace so far says not all will be, that cover is solved too (at most
    ``LEVEL_SOLVE_S``): the bound is the best of them. More op sets priced may lower the
    cover, not only raise it (a large op set's quick price, a range's floor, can undercut
    what the fillers charge its ops): on benchmark 13 ``per_op`` the cover is
    16,273,899.52 with the op sets of up to three ops priced, and was 13,589,544.96 with
    some of up to eight priced as well."""
    n = ctx.problem.num_ops
    sets = connected_op_sets(ctx.graph, range(n), SET_BUDGET)

    def kept_for_cover() -> float:
        return max(COVER_TIME_S, COVER_SHARE * (deadline - now()))

    pricing_ends = deadline - kept_for_cover()
    priced: list[Priced] = []
    best = Fraction(0)
    done, pricing_s = 0, 0.0  # op sets priced, and the time pricing them took
    for ops in sets.sets:
        if now() > pricing_ends:
            break
        if done and len(ops) > len(sets.sets[done - 1]) and \
                now() + pricing_s / done * (len(sets.sets) - done) > pricing_ends:
            # every smaller op set is priced, and at this pace not every op set will be
            value, _, _ = _solve_cover(ctx, priced, make_fillers(ctx, sets.sets[:done]),
                                       min(pricing_ends, now() + LEVEL_SOLVE_S))
            best = max(best, value)
        started = now()
        priced.extend(price(ctx, ops, QUICK_SPLITS))
        done, pricing_s = done + 1, pricing_s + now() - started
    complete = sets.complete and done == len(sets.sets)
    fillers = None if complete else make_fillers(ctx, sets.sets[:done])
    idle, last = 0, Fraction(-1)
    while True:
        value, optimal, chosen = _solve_cover(ctx, priced, fillers, deadline)
        # idle: the refined cover is where it was (a level's cover may stay above it)
        best, idle, last = max(best, value), 0 if value > last else idle + 1, value
        loose = [i for i in chosen if not priced[i].exact and priced[i].splits < MOST_SPLITS]
        refine_ends = deadline - kept_for_cover()
        if not optimal or not loose or idle >= IDLE_ROUNDS or now() > refine_ends:
            return CoverBound(best, done, complete, optimal)
        refined: dict[int, Priced | None] = {}
        for i in loose:
            if now() > refine_ends:
                break
            v = priced[i]
            splits = v.splits * REFINE_FACTOR
            found = least(ctx, ctx.shape(v.ops), v.resident, v.kept, v.relaxed, splits,
                           refine_ends)
            refined[i] = None if found is None else replace(
                v, units=max(found[0], v.units), exact=found[1], splits=splits)
        priced = [refined.get(i, v) for i, v in enumerate(priced) if refined.get(i, v)]


def _solve_cover(ctx: ScoringContext, priced: Sequence[Priced], fillers: Fillers | None,
                 deadline: float) -> tuple[Fraction, bool, list[int]]:
    """CP-SAT's proven bound on the cheapest cover (in time units), whether it is the
    optimum, and which prices that cover picks. With ``fillers``, every op an unpriced set
    can run may also be covered that way; those ops together cost the largest of their
    compute, traffic and shared-weight sums (``Fillers``)."""
    g = ctx.graph
    filled_ops = [] if fillers is None else \
        [q for q, c in enumerate(fillers.compute) if c is not None]
    # each row: what the unpriced subgraphs cost together at least, over the ops designated
    # to them (``forced_traffic``'s designation; the compute and shared-weight rows hold for
    # any unpriced subgraph that runs the op)
    rows = [] if fillers is None else [
        [fillers.compute[q] or 0 for q in filled_ops],
        [fillers.traffic[q] for q in filled_ops],
        *([floors.get(q, 0) for q in filled_ops] for floors in fillers.shared)]
    # costs in multiples of their common divisor (exact; ``ctx`` units carry large powers
    # of two), rounded down to a multiple of it only where the sums would leave int64: a
    # rounded bound holds, but one a few units short of a schedule no longer proves it
    grain = max(1, gcd(*(v.units for v in priced), *(c for row in rows for c in row)))
    total = sum(v.units for v in priced) + max(map(sum, rows), default=0)
    scale = grain * max(1, total // grain // COST_RESOLUTION)
    model = cp_model.CpModel()
    chosen = [model.new_bool_var(f"p{i}") for i in range(len(priced))]
    filled = [model.new_bool_var(f"f{q}") for q in filled_ops]
    runs: dict[int, list[cp_model.IntVar]] = {}
    writers: dict[int, list[cp_model.IntVar]] = {}
    keepers: dict[int, list[cp_model.IntVar]] = {}
    for v, x in zip(priced, chosen, strict=True):
        shape = ctx.shape(v.ops)
        for q in v.ops:
            runs.setdefault(q, []).append(x)
        for t in shape.outputs:
            if v.relaxed or t not in v.kept:
                writers.setdefault(t, []).append(x)
            if v.relaxed or t in v.kept:
                keepers.setdefault(t, []).append(x)
        for t in shape.ephemerals:
            keepers.setdefault(t, []).append(x)
    for q, x in zip(filled_ops, filled, strict=True):
        runs.setdefault(q, []).append(x)
        for t in ctx.problem.outputs[q]:
            writers.setdefault(t, []).append(x)
            keepers.setdefault(t, []).append(x)
    # linear rows, not clauses: CP-SAT's LP, which proves the bound, only sees those
    for q in range(ctx.problem.num_ops):
        model.add(sum(runs.get(q, [])) >= 1)
    for t in g.producer:  # graph outputs and what some always-split root must load
        if must_write(ctx, t):
            model.add(sum(writers.get(t, [])) >= 1)
    # one row per tensor says whether any choice writes (keeps) it; a choice that reads it
    # from slow memory (as resident) implies that row's literal; a relaxed choice stands
    # for every arrival, so either source serves it
    sources: dict[tuple[int, str], cp_model.IntVar] = {}
    for v, x in zip(priced, chosen, strict=True):
        for t in ctx.shape(v.ops).inputs:
            if t in g.graph_inputs:
                continue
            source = "either" if v.relaxed else "kept" if t in v.resident else "written"
            if (t, source) not in sources:
                literal = sources[t, source] = model.new_bool_var(f"s{t}{source}")
                found = [*(writers.get(t, []) if source != "kept" else []),
                         *(keepers.get(t, []) if source != "written" else [])]
                model.add(sum(found) >= literal)
            model.add(sources[t, source] >= x)
    unpriced = model.new_int_var(0, max(map(sum, rows), default=0) // scale, "unpriced")
    for row in rows:
        model.add(unpriced >= sum(c // scale * x for c, x in zip(row, filled, strict=True)))
    model.minimize(unpriced + sum(v.units // scale * x
                                  for v, x in zip(priced, chosen, strict=True)))
    solver = cp_model.CpSolver()
    # one worker: it runs the LP that proves the bound (a two-worker portfolio proved
    # nothing in 10 s on benchmark 5, where one worker solves the cover in 1 s)
    solver.parameters.num_workers = 1
    solver.parameters.linearization_level = 2
    # presolve proved nothing in 1 s on partial covers that solve without it in 0.2-0.4 s
    # (gen-forkjoin-03: 7,364 prices with fillers; 2.6 s with it, 0.35 s without)
    solver.parameters.cp_model_presolve = False
    limit_cpsat(solver.parameters, deadline)
    status = run_cpsat(solver, model)
    if status in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
        return Fraction(0), False, []  # cannot happen for a problem with a valid schedule
    bound = int(solver.best_objective_bound) * scale
    picked = [i for i, x in enumerate(chosen) if status == cp_model.OPTIMAL and solver.value(x)]
    return ctx.latency(bound), status == cp_model.OPTIMAL, picked
