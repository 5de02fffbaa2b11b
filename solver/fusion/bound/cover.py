"""The cover bound: the cheapest choice of priced op sets that runs every op.

Every subgraph of a schedule runs some connected op set (S2.4) with some tensors resident
from the previous subgraph and some outputs retained. Each op set is priced for each such
arrival (``pricing.py``); CP-SAT then picks the cheapest choice of them that runs every
op, writes every graph output, and writes (or keeps) every tensor it reads that a graph
input is not; one choice keeps all of a choice's resident tensors, and no more choices
read a tensor resident than keep it (``_add_sources``, ``_add_handovers``). No order and
no availability: each is a relaxation, so the optimum of that cover, and CP-SAT's proven
bound on it, bounds every valid schedule.

Op sets not priced (the enumeration budget or the deadline ran out) leave their ops to
per-op fillers (``Fillers``): what any such set computes for an op (``roles.py``: its area
share, or, for a MatMul that only a head role leaves to them, the recomputation that role
forces), the traffic it forces (``forced.py``: split-K reloads, loads of big graph inputs,
writes every schedule makes, and the loads or recomputation a consumer of those writes
pays), and for heads sharing a weight too big for the capacity what each pays
(``shared_heads.py``). Every subgraph lies within one zone (``zones.py``: S6.4 keeps some
neighbours apart), so the unpriced sets of a zone together pay at least the largest of
those sums over their (designated) ops of that zone, and the zones add up; a zone whose
every connected op set was priced leaves nothing to fillers. The cover stays a bound,
weaker than a complete one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from math import ceil, gcd
from typing import TypeVar

from ortools.sat.python import cp_model

from models.errors import NoSolutionError
from solver.deadline import limit_cpsat, now, run_cpsat
from solver.fusion.bound.forced import forced_traffic, must_write
from solver.fusion.bound.pricing import QUICK_SPLITS, Priced, least_once, price
from solver.fusion.bound.roles import never_together, unpriced_compute, unpriced_roots
from solver.fusion.bound.shared_heads import shared_operands
from solver.fusion.bound.zones import priced_zones, zones
from solver.fusion.candidates import Attempted, connected_op_sets
from solver.fusion.context import ScoringContext
from solver.fusion.unfused import unfused

SET_BUDGET = 30000
"""Connected op sets enumerated for pricing at most; pricing takes them smallest first
while time is left. Ten times the solver's whole-graph model: pricing is cheaper than
scoring, and on the generated suite (10 s, 2 workers) this completed the covers of five
graphs of 19-26 ops that 3,000 left partial (``gen-gated-mlp-05`` ``per_op``: 9.6% higher)."""
COVER_TIME_S, COVER_TIME_SHARE, COVER_SHARE = 1.0, 0.5, 0.05
"""Time kept for solving the cover: ``COVER_TIME_S`` (but at most ``COVER_TIME_SHARE`` of
what is left), or ``COVER_SHARE`` of what is left if more. The cover of benchmark 5 (2,343
op sets, every arrival priced) solves in 0.07 s; pricing is what needs the time, and a
cover cut short still proves a valid bound. Keeping a whole second of the 1.0-1.2 s a
short solve leaves the bound had left pricing nothing (benchmark 13 ``per_op``, one
worker, 4.5-5 s: the fillers' 5,201,500)."""
COST_RESOLUTION = 2**53
"""Cover costs are rounded (down) to at most this many steps of their total (or of a
schedule's latency, when one is known): CP-SAT reports its proven bound as a double, exact
only below 2**53."""
INT64_REACH = 2**62
"""Steps the objective may reach at most, every choice taken as often as it may be."""
LEVEL_GROWTH = 4000
"""Prices from which a level's cover is solved, whatever the pace, each time they have
doubled since the last one: a cover too large for the time kept for the last solve then
leaves a smaller one's bound. In a 10-s solve of ``gen-attention-09`` (124 ops) beside the
search on two cores, the pace never asked for a level, and the last cover, of 14,670
prices, proved nothing in its 1 s (alone, 8,487 prices take 1.2-1.7 s): the solve reported
max(compute, I/O)."""
LEVEL_SOLVE_S = 0.5
"""Most time the cover of every op set up to one size gets while pricing goes on."""
REFINE_FACTOR = 32
"""Each refinement of a price the cover picks allows this factor more range splits."""
MOST_SPLITS = QUICK_SPLITS * REFINE_FACTOR**2
"""A price is refined no further once its splits reach this: on benchmark 7 ``per_op`` one
op set's next refinement (524,288 splits) took the 23 s left of a 30-s solve and stayed
a range's floor, where 16,384 splits make most prices exact within 2 s."""
LATE_CHECK = 256
"""Items of the cover's model built between two checks of its deadline (15,000 prices
build in 0.5 s: a check every few milliseconds)."""
T = TypeVar("T")
IDLE_ROUNDS = 2
"""Refinement rounds in a row that leave the cover where it was, and whose refining raised
no price, before refining stops (one such round may only have swapped a tie; benchmark 7
``per_op`` spent 20 s more on rounds that raised nothing). Rounds that raise prices go
on: ``gen-transformer-02`` ``per_op`` moved to ties at the same cover twice before its
cover rose 2.4%, to its schedule's latency."""


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
    it, as in a zone whose op sets were all priced) and its forced traffic
    (``forced_traffic``). Each unpriced subgraph pays at least its compute and at least its
    traffic, and lies within one zone, so those of a zone together pay at least either sum
    over the ops of that zone they are designated for."""

    compute: Sequence[int | None]
    traffic: Sequence[int]
    shared: Sequence[dict[int, int]]
    """Per group of heads sharing a weight (``shared_operands``), what each of its readers
    that an unpriced set can run only as a head pays there (``head_floor``): the unpriced
    sets together pay at least each group's sum too."""


def make_fillers(ctx: ScoringContext, attempted: Sequence[tuple[int, ...]]) -> Fillers:
    """The fillers for every op outside the ``attempted`` op sets."""
    priced = Attempted.of(attempted)
    free_roots = unpriced_roots(ctx, priced)
    shared = [{q: group.head_floor for q in group.readers if q not in free_roots}
              for group in shared_operands(ctx) if group.head_floor is not None]
    done, zone = priced_zones(ctx, priced), zones(ctx)
    compute = [None if zone[q] in done else c
               for q, c in enumerate(unpriced_compute(ctx, free_roots))]
    return Fillers(compute, forced_traffic(ctx), [floors for floors in shared if floors])


def cover_bound(ctx: ScoringContext, deadline: float) -> CoverBound:
    """The cover bound, priced and solved before ``deadline`` (a ``deadline.now()`` value).

    Every op set is first priced with ``QUICK_SPLITS``, every tile as if entered from a
    neighbour; then, while time is left, the prices the cover's optimum picks that are not
    exact are refined (``REFINE_FACTOR`` times their splits each time, up to
    ``MOST_SPLITS``), those not yet priced with a traversal's first tile entered with
    nothing present are priced so (``pricing.least``), and the cover is solved again: only
    those can hold the bound down. Refining stops after ``IDLE_ROUNDS`` rounds that raise
    nothing.

    Op sets are priced smallest first, and each time every op set up to a size is priced
    while the pace so far says not all will be, that cover is solved too (at most
    ``LEVEL_SOLVE_S``): the bound is the best of them. So is it, whatever the pace, each
    time the prices have doubled past ``LEVEL_GROWTH``. A level's cover that proves
    nothing in that time ends the pricing, and the rest of the time goes to solving and
    refining that cover: one of more prices would be larger still (on ``gen-attention-09``
    the covers of 8,487 and 12,996 prices proved nothing in 0.5 s, nor the last one, of
    13,134, in its 1 s; stopping at the first, the last cover is 496,011.2, not 494,807.2).
    More op sets priced may lower the cover, not only raise it (a large op set's quick
    price, a range's floor, can undercut what the fillers charge its ops): on benchmark 13
    ``per_op`` the cover is 16,273,899.52 with the op sets of up to three ops priced, and
    was 13,589,544.96 with some of up to eight priced as well."""
    n = ctx.problem.num_ops
    sets = connected_op_sets(ctx.graph, range(n), SET_BUDGET, never_together(ctx))
    upper = _unfused_units(ctx)

    def kept_for_cover() -> float:
        left = deadline - now()
        return max(min(COVER_TIME_S, COVER_TIME_SHARE * left), COVER_SHARE * left)

    pricing_ends = deadline - kept_for_cover()
    priced: list[Priced] = []
    best = Fraction(0)
    done, pricing_s = 0, 0.0  # op sets priced, and the time pricing them took
    solved = 0  # prices of the last level's cover solved
    for ops in sets.sets:
        if now() > pricing_ends:
            break
        if done and len(ops) > len(sets.sets[done - 1]) and (
                now() + pricing_s / done * (len(sets.sets) - done) > pricing_ends
                or len(priced) >= max(LEVEL_GROWTH, 2 * solved)):
            # every smaller op set is priced, and at this pace not every op set will be,
            # or the cover has doubled since the last level's: one is kept in hand
            value, _, _ = _solve_cover(ctx, priced, make_fillers(ctx, sets.sets[:done]),
                                       min(pricing_ends, now() + LEVEL_SOLVE_S), upper)
            best, solved = max(best, value), len(priced)
            if not value:
                break  # proved nothing in its time: more prices would only make it larger
        started = now()
        priced.extend(price(ctx, ops, QUICK_SPLITS))
        done, pricing_s = done + 1, pricing_s + now() - started
    complete = sets.complete and done == len(sets.sets)
    fillers = None if complete else make_fillers(ctx, sets.sets[:done])
    idle, last, rose = 0, Fraction(-1), False
    while True:
        value, optimal, chosen = _solve_cover(ctx, priced, fillers, deadline, upper)
        # idle: the refined cover is where it was (a level's cover may stay above it) and
        # refining raised no price (a raised price may only have moved the cover to a tie)
        best, idle, last = max(best, value), 0 if value > last or rose else idle + 1, value
        loose = [i for i in chosen if not priced[i].first_tile or
                 (not priced[i].exact and priced[i].splits < MOST_SPLITS)]
        refine_ends = deadline - kept_for_cover()
        if not optimal or not loose or idle >= IDLE_ROUNDS or now() > refine_ends:
            return CoverBound(best, done, complete, optimal)
        refined: dict[int, Priced | None] = {}
        for i in loose:
            if now() > refine_ends:
                break
            v = priced[i]
            splits = v.splits * REFINE_FACTOR \
                if not v.exact and v.splits < MOST_SPLITS else v.splits
            found = least_once(ctx, ctx.shape(v.ops), v.resident, v.kept, v.relaxed,
                               splits, refine_ends, first_tile=True)
            refined[i] = None if found is None else replace(
                v, units=max(found[0], v.units), exact=found[1], splits=splits,
                first_tile=True)
        rose = any(v is None or v.units > priced[i].units for i, v in refined.items())
        priced = [refined.get(i, v) for i, v in enumerate(priced) if refined.get(i, v)]


def _unfused_units(ctx: ScoringContext) -> int | None:
    """The unfused schedule's latency (``ctx`` units), at least the optimum's; None if
    some op alone fits nowhere."""
    try:
        schedule = unfused(ctx)
    except NoSolutionError:
        return None
    return ceil(sum(planned.config.latency for planned in schedule) * ctx.unit)


def _solve_cover(ctx: ScoringContext, priced: Sequence[Priced], fillers: Fillers | None,
                 deadline: float, upper: int | None = None) -> tuple[Fraction, bool, list[int]]:
    """CP-SAT's proven bound on the cheapest cover (in time units), whether it is the
    optimum, and which prices that cover picks; nothing (0) when its model cannot be built
    by ``deadline`` (15,000 prices take 0.5 s, more on a loaded machine: a background
    cover that overran had sent nothing in time). With ``fillers``, every op an unpriced set
    can run may also be covered that way; those ops of each zone together cost the largest
    of their compute, traffic and shared-weight sums (``Fillers``).

    With ``upper`` (``ctx`` units, at least an optimal schedule's latency), a choice that
    keeps tensors may be picked as often as that latency pays for it, and each kept tensor
    is resident in at most as many choices as keep it: a subgraph's resident tensors were
    retained by the one before it (S4.3), and no two subgraphs have the same one before
    them. Two subgraphs that read a tensor resident need two that keep it, even when both
    of those run the same ops the same way."""
    try:
        return _built_and_solved(ctx, priced, fillers, deadline, upper)
    except _Late:
        return Fraction(0), False, []


class _Late(Exception):
    """The cover's model was not built by its deadline."""


def _in_time(items: Iterable[T], deadline: float) -> Iterator[T]:
    """``items``, with a check every ``LATE_CHECK`` of them that ``deadline`` has not
    passed (``_Late``)."""
    for i, item in enumerate(items):
        if i % LATE_CHECK == 0 and now() > deadline:
            raise _Late
        yield item


def _built_and_solved(ctx: ScoringContext, priced: Sequence[Priced], fillers: Fillers | None,
                      deadline: float, upper: int | None) -> tuple[Fraction, bool, list[int]]:
    """``_solve_cover``, or ``_Late`` once ``deadline`` passes before the solve starts."""
    g = ctx.graph
    filled_ops = [] if fillers is None else \
        [q for q, c in enumerate(fillers.compute) if c is not None]
    # each row: what the unpriced subgraphs of a zone cost together at least, over the ops
    # of that zone designated to them (``forced_traffic``'s designation; the compute and
    # shared-weight rows hold for any unpriced subgraph that runs the op)
    rows = [] if fillers is None else [
        [fillers.compute[q] or 0 for q in filled_ops],
        [fillers.traffic[q] for q in filled_ops],
        *([floors.get(q, 0) for q in filled_ops] for floors in fillers.shared)]
    zone_of = zones(ctx)
    by_zone: dict[int, list[int]] = {}  # zone -> positions in ``filled_ops``
    for i, q in enumerate(filled_ops):
        by_zone.setdefault(zone_of[q], []).append(i)
    zone_most = [max(sum(row[i] for i in members) for row in rows)
                 for members in by_zone.values()]
    # how often an optimal schedule may run each choice: each run costs at least its price
    most = [1 if upper is None or not v.kept or v.units <= 0 else max(1, upper // v.units)
            for v in priced]
    # costs in multiples of their common divisor (exact; ``ctx`` units carry large powers
    # of two), rounded down to a multiple of it only where the sums would leave int64: a
    # rounded bound holds, but one a few units short of a schedule no longer proves it
    grain = max(1, gcd(*(v.units for v in priced), *(c for row in rows for c in row)))
    total = sum(v.units * m for v, m in zip(priced, most, strict=True)) + sum(zone_most)
    # the objective's reach must fit int64, and the values near the optimum (at most
    # ``upper``, or ``total``) a double
    scale = grain * max(1, min(total, upper or total) // grain // COST_RESOLUTION,
                        total // grain // INT64_REACH)
    model = cp_model.CpModel()
    chosen = [model.new_int_var(0, m, f"p{i}") if m > 1 else model.new_bool_var(f"p{i}")
              for i, m in _in_time(enumerate(most), deadline)]
    filled = [model.new_bool_var(f"f{q}") for q in filled_ops]
    runs: dict[int, list[cp_model.IntVar]] = {}
    writers: dict[int, list[cp_model.IntVar]] = {}
    keepers: dict[int, list[cp_model.IntVar]] = {}
    for v, x in _in_time(zip(priced, chosen, strict=True), deadline):
        shape = ctx.shape(v.ops)
        reentrant = g.reentrant(v.ops)
        for q in v.ops:
            if q not in reentrant:  # an op's first run (``FusionGraph.reentrant``)
                runs.setdefault(q, []).append(x)
        for t in shape.outputs:
            if v.relaxed or t not in v.kept:
                writers.setdefault(t, []).append(x)
            if t in v.kept:
                keepers.setdefault(t, []).append(x)
        for t in shape.ephemerals:
            if t in v.kept:
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
    filler_of = dict(zip(filled_ops, filled, strict=True))
    keeping: dict[int, list[int]] = {}  # tensor -> the choices that may keep it
    for i, v in enumerate(priced):
        for t in v.kept:
            keeping.setdefault(t, []).append(i)
    _add_sources(ctx, model, priced, chosen, most, writers, keepers, keeping, filler_of,
                 deadline)
    if upper is not None:
        _add_handovers(ctx, model, priced, chosen, most, keeping, filler_of)
    if now() > deadline:
        raise _Late  # CP-SAT would take its 0.1-s floor past it
    unpriced = []
    for members, most_here in zip(by_zone.values(), zone_most, strict=True):
        paid = model.new_int_var(0, most_here // scale, "unpriced")
        for row in rows:
            model.add(paid >= sum(row[i] // scale * filled[i] for i in members))
        unpriced.append(paid)
    model.minimize(sum(unpriced) + sum(v.units // scale * x
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
    picked = [i for i, x in enumerate(chosen)
              if status == cp_model.OPTIMAL and solver.value(x) > 0]
    return ctx.latency(bound), status == cp_model.OPTIMAL, picked


def _at_least_once(model: cp_model.CpModel, x: cp_model.IntVar, most: int) -> cp_model.IntVar:
    """A literal that holds whenever ``x`` (0..``most``) is positive."""
    literal = model.new_bool_var("u")
    model.add(x <= most * literal)
    return literal


def _add_sources(ctx: ScoringContext, model: cp_model.CpModel, priced: Sequence[Priced],
                 chosen: Sequence[cp_model.IntVar], most: Sequence[int],
                 writers: dict[int, list[cp_model.IntVar]],
                 keepers: dict[int, list[cp_model.IntVar]], keeping: dict[int, list[int]],
                 filled: dict[int, cp_model.IntVar], deadline: float) -> None:
    """Rows saying where what the chosen prices read comes from.

    One row per tensor and source says whether any choice writes (keeps) it; a choice that
    reads it from slow memory (as resident) implies that row's literal; a relaxed choice
    stands for arrivals with any of its resident tensors resident, so either source serves
    those. Two more hold for every schedule (S4.3, S5.2): a choice's resident tensors were
    all retained by one subgraph, the one before it, so one choice keeps all of them; and
    a relaxed choice's arrivals hold only as many resident tensors as fit the capacity
    (the smallest first), so all but that many are written by some choice. ``keeping``:
    per tensor, the choices that may keep it; ``most``: how often each choice may be picked
    (``chosen`` counts it: a choice that keeps tensors may run several times, and each run
    reads the same sources, so a row on one Boolean source reads ``most * source >= x``,
    and a row counting sources takes a literal of any pick, ``_at_least_once``);
    ``filled``: the filler literal of each op an unpriced subgraph may run (one may keep
    anything such an op makes); ``_Late`` past ``deadline``."""
    g = ctx.graph
    sources: dict[tuple[int, str], cp_model.IntVar] = {}

    def source(t: int, kind: str) -> cp_model.IntVar:
        if (t, kind) not in sources:
            literal = sources[t, kind] = model.new_bool_var(f"s{t}{kind}")
            found = [*(writers.get(t, []) if kind != "kept" else []),
                     *(keepers.get(t, []) if kind != "written" else [])]
            model.add(sum(found) >= literal)
        return sources[t, kind]

    retainers: dict[frozenset[int], cp_model.IntVar] = {}
    for v, x, m in _in_time(zip(priced, chosen, most, strict=True), deadline):
        made = [t for t in ctx.shape(v.ops).inputs if t not in g.graph_inputs]
        for t in made:
            model.add(m * source(t, "written" if t not in v.resident else
                                 "either" if v.relaxed else "kept") >= x)
        if v.relaxed:
            held = _most_held(ctx, v.resident)
            if held < len(v.resident):
                once = x if m == 1 else _at_least_once(model, x, m)
                model.add(sum(source(t, "written") for t in v.resident)
                          >= (len(v.resident) - held) * once)
        elif len(v.resident) > 1:
            if v.resident not in retainers:
                literal = retainers[v.resident] = model.new_bool_var("r")
                by = set.intersection(*(set(keeping.get(t, ())) for t in v.resident))
                unpriced = {g.producer[t] for t in v.resident} & filled.keys()
                model.add(sum(chosen[i] for i in by) + sum(filled[q] for q in unpriced)
                          >= literal)
            model.add(m * retainers[v.resident] >= x)


def _add_handovers(ctx: ScoringContext, model: cp_model.CpModel, priced: Sequence[Priced],
                   chosen: Sequence[cp_model.IntVar], most: Sequence[int],
                   keeping: dict[int, list[int]], filled: dict[int, cp_model.IntVar]) -> None:
    """Per tensor, the choices that read it resident are at most as many as those that
    keep it (``_solve_cover``). A relaxed choice may keep it but is not counted as reading
    it; an unpriced subgraph may keep it as often as it is read (its filler lifts the row)."""
    reading: dict[int, list[int]] = {}
    for i, v in enumerate(priced):
        if not v.relaxed:
            for t in v.resident:
                reading.setdefault(t, []).append(i)
    for t, readers in reading.items():
        if any(priced[i].units <= 0 for i in keeping.get(t, [])):
            continue  # a keeper priced at nothing may run any number of times
        lifted = []
        producer = ctx.graph.producer[t]
        if producer in filled:
            lifted = [sum(most[i] for i in readers) * filled[producer]]
        model.add(sum(chosen[i] for i in readers)
                  <= sum(chosen[i] for i in keeping.get(t, [])) + sum(lifted))


def _most_held(ctx: ScoringContext, tensors: Collection[int]) -> int:
    """The most of ``tensors`` that fit the capacity together."""
    room, held = ctx.capacity, 0
    for size in sorted(ctx.graph.size(t) for t in tensors):
        if size > room:
            break
        room, held = room - size, held + 1
    return held
