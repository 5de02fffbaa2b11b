"""The ``cpsat`` fusion solver: CP-SAT over scored subgraph variants, globally or in windows.

1. The greedy schedule is the incumbent (so the answer is never worse than greedy).
2. When every connected op set of the graph fits the enumeration budget, the incumbent is
   first reshaped over a pool around it (``relink``, a quick start for what follows), then
   one model covers the whole graph: its optimum is optimal for the formulation (op sets up
   to the sizes enumerated, at most one retained tensor per side) when every variant was
   scored and the model's retention links stayed within ``LINK_BUDGET``.
3. Otherwise the shortest path over the whole graph through the incumbent's variants and
   its smallest connected op sets, scored in the order paths pick them (``_levels``,
   ``guided.py``), comes first. Then a large-neighbourhood search frees windows of
   consecutive subgraphs of the incumbent, enumerates the connected op sets of their ops,
   and re-solves each window with the rest fixed (``cpsat_model.Window``); an improvement
   replaces the window, and each stretch of twins of what it replaced too (``spread``).
   Windows last ``WINDOW_S`` at any time limit; when a round of them stops improving, they
   double in ops and time (so a long limit goes on to wider neighbourhoods, not to more of
   the same).
   Last, the incumbent's own op sets are reordered and relinked by retention over the
   whole graph, then a set partition of the whole graph over a pool of op sets around the
   incumbent (``pool.py``: halves, merges of subgraphs joined by a tensor, one-op
   reshapes) is solved, again around each new incumbent (``relink``). It stops early
   enough to leave the caller time for its bound.
4. Each model's variants first go through a shortest path over schedule states
   (``sequence.shortest_sequence``); CP-SAT starts from that path when it beats the
   incumbent, and proves what it can.
5. Under the default reading, greedy's subgraphs before the search and the final
   schedule's after it are each taken to the fastest of every integer granularity
   (``retile``): the search's own candidates are powers of two, caps and a few narrowings.

A schedule whose latency reaches the problem's lower bound (compute, I/O or the traffic
every schedule is forced into, ``bound.forced_bound``; under the TeamKorea reading what its
MatMuls pay, ``bound.split_k``) is optimal outright, and the search stops there.

Every schedule is re-checked by the evaluator before it is returned.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from solver import progress
from solver.deadline import limit_cpsat, now, run_cpsat
from solver.fusion.bound import reading_bound
from solver.fusion.bound.roles import never_together
from solver.fusion.candidates import connected_op_sets
from solver.fusion.cpsat_model import (
    BuildTimeout,
    LinkCount,
    Window,
    add_hint,
    build_model,
    decode,
    frame,
    objective_scale,
    recomputes,
)
from solver.fusion.greedy import greedy
from solver.fusion.guided import Key, score_along_paths, scored_lazily
from solver.fusion.neighbours import merged_neighbours
from solver.fusion.pool import pool
from solver.fusion.problem import lower_bounds
from solver.fusion.recompute import Pair, demanded
from solver.fusion.retile import retile
from solver.fusion.schedule import Planned, evaluated, offer
from solver.fusion.score import ScoringContext, ScoringTimeout
from solver.fusion.sequence import shortest_sequence
from solver.fusion.spread import copy_fastest, spread
from solver.fusion.variants import Variant, make_variant, retention_options, variant

WHOLE_GRAPH_BUDGET = 3000
"""Op sets enumerated for a whole-graph model; beyond it the search works in windows."""
WINDOW_BUDGET = 600
LEVELS_BUDGET = 700
"""Smallest connected op sets the whole-graph path before the windows runs over
(``_levels``): every op set of up to six ops of the 19-op ``gen-forkjoin-04`` (622)."""
LEVELS_SHARE = 0.15
"""Share of the window search's time that path gets first."""
LEVELS_LEAST_OPS = 5
"""Fewest ops the largest of those op sets must hold for that path to run: on 14 of the
suite's 15 graphs of 80 ops and more (and a few of 38-76) they hold two to four, which
every window enumerates anyway, and the path took its whole share for nothing (the 160-op
``gen-forkjoin-10``: 0.94 s of 1.09)."""
POOL_BUDGET = 600
"""Op sets in the pool of the whole-graph set partition that ends the search (``relink``)."""
MAX_REPEATS = 3
"""Most times one retaining variant may run (once per consumer of what it retains)."""
WINDOW_S = 0.3
"""Time one window gets, at every time limit. Most windows of large graphs improve the
incumbent and few are proven optimal, so more, shorter windows pay: at 1 s or 10% of the
search, a 10-s solve of the 124-op ``gen-attention-09`` ``per_op`` ran 7-9 windows
(769,744-837,215 over three seeds); at 0.3 s, 21-22 (757,887-790,954). At 30 s, 3% of the
search (about 0.7 s) instead of 0.3 s left 4 of 8 suite graphs of 53-160 ops higher (by up
to 3.1%: ``gen-residual-07``) and one lower."""
RETRY_DOUBLINGS = 3
"""Most doublings of a window's time for its earlier tries without a gain or a proof
(``2**tries`` times a first try's). A window whose model found nothing and proved nothing
comes round again (the same ops freed, the schedule around them often changed a little),
and the same time gave the same failure: ``gen-residual-07`` under the TeamKorea reading
at 10 s ran its ten-op window around op 29 (483 variants, CP-SAT 0.13-0.17 s) two or three
times without the recomputation that takes 9% off, which 3 of 5 runs found on the first
try."""
RETRY_SHARE = 0.25
"""Most share of the window loop's time left a window tried again may take (at least its
first try's)."""
WINDOW_OPS = (6, 24)
"""Smallest and largest number of ops a window frees."""
LEAST_SOLVE_S = 0.1
"""Least time left for which a window's model is built and solved: CP-SAT takes at least
0.1 s (``limit_cpsat``'s floor) however little is left, past the deadline. A step's
deadline may be passed by that floor (the next step starts later); the search's hard end
may not, so a build ends this long before it."""
LOAD_SHARE = 0.1
"""CP-SAT's time past its limit, as a share of the model's build time: loading a large
model is not cut short. A 10-op graph's whole-graph model under the TeamKorea reading (973
variants, 0.7 s to build) took 0.13-0.17 s at a 0.1-s limit (a 2-s solve whose build ended
just before the search's end ran to 2.05-2.19 s); an 872-variant one (0.27 s) 0.11 s. A
model whose build (and hint) leaves less than ``LEAST_SOLVE_S`` and this before the hard
end is not solved, and CP-SAT's limit ends this long before it."""
POOL_FIRST_SHARE = 0.25
"""Share of a whole-graph solve's time spent first on ``relink`` from greedy's schedule: on
a 15-op fork-join with ample capacity the whole-graph model (38,901 variants) found nothing
better than greedy in 60 s, where merging two of greedy's subgraphs over the pool reached
the lower bound in 0.15 s."""
RETILE_SHARE = 0.05
"""Share of the search's time for taking greedy's subgraphs to the fastest of every
integer granularity (``retile``), and again for the final schedule's: a schedule's own
subgraphs are few, and most take milliseconds (a 36-op transformer's 28: 0.06 s)."""
SCORING_SHARE = 0.6
"""Share of a model's time spent scoring its variants (the model gets the rest)."""
GUIDED_SHARE = 0.5
"""Most share of the scoring time the plain variants leave that goes to the retention
variants a shortest path over estimates picks (``guided.py``); the rest scores the others
in order. With all of it, the 26 windows of a 10-s solve of the 124-op
``gen-attention-09`` ``per_native_k`` spent 1.9 s of the search's 8 s there."""
PATH_SHARE = 0.3
"""Most share of a model's time the shortest path through its variants may take before
CP-SAT starts (``sequence.shortest_sequence``)."""
NEIGHBOURS_SHARE = 0.5
"""Share of the relinking's time the pass merging neighbours may take before it
(``neighbours.py``); a scoring per pair, it took at most 0.2 s on the suite graphs."""
RELINK_SHARE = 0.15
"""Share of the window search's time kept for reordering and relinking the incumbent's own
op sets over the whole graph at the end (``relink``). Relinking first instead left the
windows nothing to improve on benchmark 13 at twice its capacity (15.65M, against
14.39-14.71M over three seeds this way)."""


@dataclass
class SearchResult:
    """The best schedule found and what was proven about it."""

    schedule: list[Variant]
    optimal: bool
    windows: int
    improvements: int


def as_variants(ctx: ScoringContext, planned: Sequence[Planned]) -> list[Variant]:
    """A schedule of configured subgraphs as variants (the retention chain made explicit)."""
    out: list[Variant] = []
    resident: frozenset[int] = frozenset()
    for item in planned:
        out.append(variant(ctx, item.ops, resident, item.retained, item.config.latency,
                           item.config))
        resident = item.retained
    return out


def as_planned(schedule: Sequence[Variant]) -> list[Planned]:
    return [Planned(v.ops, v.config, v.retained_out) for v in schedule]


def total(schedule: Sequence[Variant]) -> Fraction:
    return sum((v.latency for v in schedule), Fraction(0))


def cpsat_search(ctx: ScoringContext, deadline: float, *, seed: int = 0, workers: int = 1,
                 windows_end: float | None = None, hard_end: float | None = None
                 ) -> SearchResult:
    """The best schedule found before ``deadline`` (a ``deadline.now()`` value); the
    window search (graphs too large for one model) stops at ``windows_end`` if earlier,
    leaving the rest of the time to the caller (the lower bound). A CP-SAT model may end
    past ``deadline`` (its 0.1-s floor), never past ``hard_end`` (default: ``deadline``).

    With ``ctx.every_tile`` (the default reading), greedy's subgraphs and, at the end, the
    search's own are each taken to the fastest of every integer granularity (``retile``),
    in ``RETILE_SHARE`` of the time each."""
    floor = max(lower_bounds(ctx.problem, ctx.rules.reduction_cost, ctx.semantics).total,
                reading_bound(ctx))
    hard_end = deadline if hard_end is None else max(hard_end, deadline)
    if not (ctx.every_tile and ctx.semantics == "default"):
        return _search(ctx, deadline, windows_end, hard_end, floor, seed, workers, 0.0)
    final = min(deadline, windows_end or deadline)
    share = RETILE_SHARE * (final - now())
    found = _search(ctx, deadline - share, None if windows_end is None else windows_end - share,
                    hard_end, floor, seed, workers, share)
    # the search may end late (a CP-SAT model takes 0.1 s however little is left), never
    # the retiling
    schedule = retile(ctx, found.schedule, min(final, now() + share))
    if not _better(ctx, schedule, found.schedule):
        return found
    _improved(ctx, schedule, floor)
    return SearchResult(schedule, total(schedule) <= floor, found.windows,
                        found.improvements + 1)


def _search(ctx: ScoringContext, deadline: float, windows_end: float | None, hard_end: float,
            floor: Fraction, seed: int, workers: int, retile_s: float) -> SearchResult:
    """``cpsat_search`` but the last retiling: from greedy's schedule, retiled for at most
    ``retile_s`` first."""
    start = now()
    # the baseline greedy (powers of two only), whatever tiles the search itself tries;
    # ``every_tile`` means nothing under the teamkorea reading, whose greedy shares ``ctx``
    baseline = ScoringContext(ctx.graph, ctx.rules) \
        if ctx.every_tile and ctx.semantics == "default" else ctx
    incumbent = as_variants(ctx, greedy(baseline, start + 0.5 * (deadline - start)))
    if retile_s > 0:
        retiled = retile(ctx, incumbent, now() + retile_s)
        if accepted_whole(ctx, retiled):
            incumbent = retiled
    _improved(ctx, incumbent, floor)
    if total(incumbent) <= floor:
        return SearchResult(incumbent, True, 0, 0)
    n = ctx.problem.num_ops
    # op sets S6.4 rules out take no budget (``never_together``, under SEMANTICS.md; the
    # teamkorea reading lets a k-step span K, and then S6.4 does not bind)
    apart = never_together(ctx) if ctx.semantics == "default" else frozenset()
    everything = connected_op_sets(ctx.graph, range(n), WHOLE_GRAPH_BUDGET, apart)
    windows = improvements = 0
    if everything.complete:
        pooled = relink(ctx, incumbent, now() + POOL_FIRST_SHARE * (deadline - now()), seed,
                        workers, on_better=lambda schedule: _improved(ctx, schedule, floor),
                        hard_end=hard_end)
        if total(pooled) < total(incumbent):
            incumbent, improvements = pooled, 1
            if total(incumbent) <= floor:
                return SearchResult(incumbent, True, 1, improvements)
        # scoring may go on after a quick solve unless the time after the search is kept
        # for the lower bound (one worker: the cover runs after the search)
        rescore = windows_end is None or windows_end >= deadline
        found, optimal = _solve_window(ctx, _whole_graph(ctx), everything.sets, incumbent, deadline,
                                       seed, workers, rescore=rescore, hard_end=hard_end)
        if _better(ctx, found, incumbent):
            incumbent, improvements = found, improvements + 1
            _improved(ctx, incumbent, floor)
        return SearchResult(incumbent, _proves(optimal, found, incumbent), 1, improvements)
    final = min(deadline, windows_end or deadline)
    deadline = final - RELINK_SHARE * (final - now())
    found = _levels(ctx, incumbent, apart, now() + LEVELS_SHARE * (deadline - now()))
    if _better(ctx, found, incumbent):
        incumbent, improvements = found, improvements + 1
        _improved(ctx, incumbent, floor)
    rng = random.Random(seed)
    size = WINDOW_OPS[0] * 2
    stale = reach = 0  # windows are 2**reach times WINDOW_OPS and WINDOW_S
    # windows proven optimal as they stand: solving one again finds nothing
    proven: set[AsItStands] = set()
    failed: dict[frozenset[int], int] = {}  # tries without a gain, by the ops a window frees
    while now() < deadline - 2 * LEAST_SOLVE_S:  # a window's least time before its end
        if stale >= 2 * max(1, len(incumbent)):  # these windows are spent: wider ones
            if WINDOW_OPS[0] << (reach + 1) >= n:
                break
            reach, stale = reach + 1, 0
            size = max(size, WINDOW_OPS[0] << reach)
        a, b = _pick_window(incumbent, size, rng)
        window, inside = frame(ctx, incumbent, a, b)
        stands = _as_it_stands(window, inside)
        if stands in proven:
            stale += 1
            size = _next_size(size, reach, True)
            continue
        freed = frozenset(q for v in inside for q in v.ops)
        tries = failed.get(freed, 0)
        sets = connected_op_sets(ctx.graph, freed, WINDOW_BUDGET, apart)
        budget = min(deadline, now() + _window_time(reach, tries, deadline - now()))
        # the relinking's share is kept from the last window's CP-SAT floor too
        found, optimal = _solve_window(ctx, window, sets.sets, inside, budget, seed + windows,
                                       workers, hard_end=deadline)
        windows += 1
        joined = None if found is None else incumbent[:a] + found + incumbent[b:]
        if _better(ctx, joined, incumbent):
            incumbent = joined
            copied = spread(ctx, incumbent, inside, found, a)
            if _better(ctx, copied, incumbent):
                incumbent = copied
            copied = copy_fastest(ctx, incumbent, min(deadline, now() + WINDOW_S))
            if _better(ctx, copied, incumbent):
                incumbent = copied
            _improved(ctx, incumbent, floor)
            improvements += 1
            stale = 0
            failed.pop(freed, None)
            if total(incumbent) <= floor:
                return SearchResult(incumbent, True, windows, improvements)
        else:
            stale += 1
            if _proves(optimal, found, inside):
                proven.add(stands)
            else:
                failed[freed] = tries + 1
        size = _next_size(size, reach, optimal)
    merged = merged_neighbours(ctx, incumbent, now() + NEIGHBOURS_SHARE * (final - now()))
    if _better(ctx, merged, incumbent):
        incumbent, improvements = merged, improvements + 1
        _improved(ctx, incumbent, floor)
    found = relink(ctx, incumbent, final, seed, workers,
                   on_better=lambda schedule: _improved(ctx, schedule, floor), hard_end=hard_end)
    if total(found) < total(incumbent):
        incumbent, improvements = found, improvements + 1
    return SearchResult(incumbent, total(incumbent) <= floor, windows + 1, improvements)


def _proves(optimal: bool, found: Sequence[Variant] | None, kept: Sequence[Variant]) -> bool:
    """Whether a model's proof holds for the schedule ``kept``: an optimum faster than it
    is one the evaluator refused, and proves nothing of it."""
    return optimal and found is not None and total(kept) <= total(found)


AsItStands = tuple[Window, tuple[tuple[tuple[int, ...], frozenset[int], frozenset[int], Fraction],
                                 ...]]
"""A window and the subgraphs it frees, as far as its model sees them."""


def _as_it_stands(window: Window, inside: Sequence[Variant]) -> AsItStands:
    """The window with what its model is given of the subgraphs it frees (their op sets,
    retention and latencies; the op sets it enumerates follow from them)."""
    return window, tuple((v.ops, v.retained_in, v.retained_out, v.latency) for v in inside)


def _next_size(size: int, reach: int, optimal: bool) -> int:
    """The next window's ops: two more after a proof, two fewer otherwise, within
    ``WINDOW_OPS`` times ``2**reach``."""
    return min(WINDOW_OPS[1] << reach, size + 2) if optimal \
        else max(WINDOW_OPS[0] << reach, size - 2)


def _window_time(reach: int, tries: int, left: float) -> float:
    """A window's time: ``WINDOW_S`` doubled per ``reach`` and, for a window tried
    ``tries`` times before without a gain or a proof, per try (``RETRY_DOUBLINGS``,
    ``RETRY_SHARE``)."""
    first = WINDOW_S * (1 << reach)
    if not tries:
        return first
    return max(first, min(first * (1 << min(tries, RETRY_DOUBLINGS)), RETRY_SHARE * left))


def _levels(ctx: ScoringContext, incumbent: Sequence[Variant],
            apart: frozenset[frozenset[int]], ends: float) -> list[Variant] | None:
    """The shortest path over the whole graph (``sequence.shortest_sequence``) through the
    incumbent's variants and the ``LEVELS_BUDGET`` smallest connected op sets, scored
    lazily (``guided.py``): the op sets a path over their floors takes, then the retention
    variants of those a path over estimates takes; None if none is found by ``ends``,
    when those op sets hold fewer than ``LEVELS_LEAST_OPS`` ops, and under the teamkorea
    reading (the floors follow SEMANTICS.md). A window sees only its stretch of the
    schedule and scores its op sets smallest first: the best schedule of
    ``gen-forkjoin-04`` ``per_op`` runs a six-op set that hands a tensor on to a five-op
    one, and the windows of a 10-s solve stayed at 15,262; this path gives 14,513.82 after
    47 op sets and 8 retention variants scored (1.1 s), and the windows then 14,486.89."""
    if ctx.semantics != "default":
        return None
    sets = connected_op_sets(ctx.graph, range(ctx.problem.num_ops), LEVELS_BUDGET, apart).sets
    if max(map(len, sets), default=0) < LEVELS_LEAST_OPS:
        return None
    window = _whole_graph(ctx)
    return shortest_sequence(ctx, window, scored_lazily(ctx, window, incumbent, sets, ends),
                             ends)


def accepted_whole(ctx: ScoringContext, schedule: Sequence[Variant]) -> bool:
    """Whether the context's reading accepts the schedule as a whole. The model holds every
    SEMANTICS.md rule and the teamkorea reading's one across subgraphs (``recompute.py``: an
    ephemeral tensor's outside consumer runs with a copy of its producer); the shortest
    path does not hold the latter (``cpsat_model.recomputes`` drops its refused answers),
    and the passes outside any model (merging neighbours, copying twins, retiling) hold
    what they check, so this full evaluation stays the last word on what is kept, in
    every reading (``schedule.evaluated``, as an offered answer is checked: 2-3 ms on a
    160-op schedule, once per schedule that would be kept). Trusting the model under
    SEMANTICS.md let a merge of two neighbours that both ran one op (listed twice) become
    the answer, which the solve then refused: no schedule."""
    return evaluated(ctx, as_planned(schedule))[1].valid


def _better(ctx: ScoringContext, found: Sequence[Variant] | None,
            incumbent: Sequence[Variant]) -> bool:
    """Whether ``found`` is faster than ``incumbent`` and accepted whole: a schedule the
    reading refuses is never kept, nor offered as the answer so far. Under the teamkorea
    reading, checking only the search's last schedule had the solve return greedy's on 4
    of the 9 suite graphs checked where cpsat had ended at greedy's total
    (``gen-residual-05``, ``gen-residual-08``, ``gen-gated-mlp-09``, ``gen-conv-10``)."""
    return found is not None and total(found) < total(incumbent) and accepted_whole(ctx, found)


def _improved(ctx: ScoringContext, schedule: Sequence[Variant], floor: Fraction) -> None:
    """Report a new incumbent and offer it as the answer so far."""
    progress.report(total(schedule), floor)
    offer(ctx, as_planned(schedule))


def relink(ctx: ScoringContext, schedule: Sequence[Variant], deadline: float, seed: int,
           workers: int, on_better: Callable[[list[Variant]], None] = lambda _: None,
           hard_end: float | None = None) -> list[Variant]:
    """The schedule's own op sets, reordered and relinked by retention over the whole graph,
    in the first half of the time; then, from there, a set partition of the whole graph
    over a pool around the incumbent (``pool.pool``: each op set cut in two, reshaped by
    one op, and merged with each subgraph it exchanges a tensor with), rebuilt around each
    new incumbent while it improves. Retention pays only between neighbours, and a window
    frees only neighbours: greedy on benchmark 13 runs some ``x_i @ W0`` far from the
    ``@ W1 @ V_i`` that reads its result, which then makes a round trip through slow
    memory; here each is moved next to it and retains it (16,385,638.4 -> 16,284,057.6).
    The pool makes the model larger (with the cuts alone from the start, that one stays at
    greedy's in 10 s), hence the first stage without it. Each better schedule goes to
    ``on_better`` as it is found (the caller offers it as the answer so far). CP-SAT's
    floor may take a model past ``deadline``, never past ``hard_end`` (default:
    ``deadline``)."""
    hard_end = deadline if hard_end is None else hard_end
    best = list(schedule)
    halfway = now() + 0.5 * max(0.0, deadline - now())
    own = sorted({v.ops for v in best})
    found, _ = _solve_window(ctx, _whole_graph(ctx), own, best, halfway, seed, workers,
                             hard_end=hard_end)
    if _better(ctx, found, best):
        best = found
        on_better(best)
    while True:  # a new incumbent brings a new pool around it
        sets = pool(ctx.graph, [v.ops for v in best], POOL_BUDGET)
        found, _ = _solve_window(ctx, _whole_graph(ctx), sets, best, deadline, seed, workers,
                                 hard_end=hard_end)
        if not _better(ctx, found, best):
            return best
        best = found
        on_better(best)


def _whole_graph(ctx: ScoringContext) -> Window:
    """The window with nothing around it: every op, graph inputs in slow memory at the
    start, graph outputs there at the end."""
    return Window(cover=frozenset(range(ctx.problem.num_ops)),
                  available=frozenset(ctx.graph.graph_inputs),
                  needed=frozenset(ctx.graph.graph_outputs))


def _pick_window(schedule: Sequence[Variant], size: int, rng: random.Random) -> tuple[int, int]:
    """A random run of consecutive subgraphs holding about ``size`` ops (at least two
    subgraphs when there are two). A run that reaches the schedule's end grows backwards:
    cut there, a third of the windows of a 10-s solve of the 19-op ``gen-forkjoin-04``
    freed two or three single ops, which nothing can improve."""
    a = rng.randrange(len(schedule))
    b, ops = a, 0
    while b < len(schedule) and (ops < size or b - a < 2):
        ops += len(schedule[b].ops)
        b += 1
    while a > 0 and (ops < size or b - a < 2):
        a -= 1
        ops += len(schedule[a].ops)
    return a, b


def _copies(ctx: ScoringContext, ops: tuple[int, ...], retained_out: frozenset[int]) -> int:
    """How many times a variant goes into the model: once, or, when it retains tensors
    other subgraphs also consume, once per such consumer (up to ``MAX_REPEATS``). A model
    Boolean picks a variant once, but recomputing the same subgraph to hand the same tensor
    to each of its consumers in turn can be optimal."""
    outside = {c for t in retained_out for c in ctx.graph.consumers[t]} - set(ops)
    return max(1, min(len(outside), MAX_REPEATS))


def _repeats(ctx: ScoringContext, variants: Sequence[Variant]) -> list[Variant]:
    """The extra copies ``_copies`` asks for."""
    return [v for v in variants for _ in range(_copies(ctx, v.ops, v.retained_out) - 1)]


def _linkable(ctx: ScoringContext, window: Window, universe: set[int], ops: tuple[int, ...],
              retained_in: frozenset[int], retained_out: frozenset[int]) -> bool:
    """Whether a variant could be linked in the window: what it finds resident is what the
    window starts with or made by the window's ops, and what it keeps is what the window
    hands on or read by a window op it does not run (the next subgraph is one of them).
    Half the retention variants of a window on benchmark 13 fail this; not scoring them
    leaves the time to the rest."""
    g = ctx.graph
    made = retained_in == window.resident or all(g.producer.get(t) in universe
                                                  for t in retained_in)
    read = retained_out == window.handoff or all(
        any(c in universe and c not in ops for c in g.consumers[t]) for t in retained_out)
    return made and read


def _solve_window(ctx: ScoringContext, window: Window, sets: Sequence[tuple[int, ...]],
                  incumbent: Sequence[Variant], deadline: float, seed: int,
                  workers: int, rescore: bool = False, hard_end: float | None = None
                  ) -> tuple[list[Variant] | None, bool]:
    """The best schedule of the window's variants, and whether it is proven optimal over
    all of them. Scoring stops at ``SCORING_SHARE`` of the time left (the model gets the
    rest): every op set with nothing retained first, then the retention variants a shortest
    path over estimates takes (``guided.py``, in at most ``GUIDED_SHARE`` of what is left),
    then the rest; retention variants only of op sets that fit without retention. With
    ``rescore``, a model solved to optimality with op sets left unscored goes back to
    scoring them, with ``SCORING_SHARE`` of the time left, and is solved again from its
    answer (the whole-graph model: benchmark 5's solves in
    0.3 s of the 40% kept for it; windows of a larger graph are better left for the next
    window, and the time after the search, with one worker, is the lower bound's). Nothing
    is tried with less than ``LEAST_SOLVE_S`` left. The window's time ends by ``deadline``
    and at least ``LEAST_SOLVE_S`` before ``hard_end`` (default: ``deadline``), which
    CP-SAT's floor and a large model's load do not pass (``_solve_model``)."""
    hard_end = deadline if hard_end is None else hard_end
    # the window's own time ends one CP-SAT floor before the hard end: its scoring and path
    # take their shares of what its build may use
    deadline = min(deadline, hard_end - LEAST_SOLVE_S)
    if deadline - now() < LEAST_SOLVE_S:
        return None, False
    variants = list(incumbent)
    # the incumbent's own subgraphs are scored again: it may come from a context that tried
    # fewer tiles (the baseline greedy), and then a key's best may be lower here
    given = {(v.ops, v.retained_in, v.retained_out): v.latency for v in variants}
    universe = {q for ops in sets for q in ops} | {q for v in incumbent for q in v.ops}
    options = {ops: [(ops, r_in, r_out) for r_in, r_out in
                     retention_options(ctx, ops, [window.resident], [window.handoff])
                     if _linkable(ctx, window, universe, ops, r_in, r_out)]
               for ops in sets}
    waiting = list(dict.fromkeys([o[0] for o in options.values() if o] +
                                 [k for o in options.values() for k in o[1:]]))
    waiting.reverse()  # popped from the end: every op set plain first
    fits = {v.ops for v in variants if not v.retained_in and not v.retained_out}
    links = LinkCount(window)
    for v in variants:
        links.add(v.retained_in, v.retained_out, _copies(ctx, v.ops, v.retained_out))
    best: list[Variant] | None = None
    hint: Sequence[Variant] = incumbent
    dropped = 0
    while True:
        scoring_ends = now() + SCORING_SHARE * max(0.0, deadline - now())
        dropped += _score_waiting(ctx, waiting, variants, given, fits, links, scoring_ends,
                                  plain_only=True)
        dropped += _score_guided(ctx, window, waiting, variants, given, fits, links,
                                 now() + GUIDED_SHARE * max(0.0, scoring_ends - now()))
        dropped += _score_waiting(ctx, waiting, variants, given, fits, links, scoring_ends)
        scored_all = not waiting and not dropped
        found = _solve_variants(ctx, window, variants + _repeats(ctx, variants), hint,
                                deadline, hard_end, seed, workers)
        if found is None or (best is not None and total(found[0]) > total(best)):
            return best, False  # a round cut short: the last one's answer stands
        best, optimal = found
        if not (rescore and optimal and waiting) or deadline - now() < 2 * LEAST_SOLVE_S:
            return best, optimal and scored_all
        hint = best  # made of variants scored so far, each with at least its copies again


def _score_waiting(ctx: ScoringContext, waiting: list[Key], variants: list[Variant],
                   given: dict[Key, Fraction], fits: set[tuple[int, ...]], links: LinkCount,
                   scoring_ends: float, plain_only: bool = False) -> int:
    """Score the waiting (op set, retained in, retained out) keys, last first, into
    ``variants`` until ``scoring_ends`` (a key whose search it stops stays waiting), with
    ``plain_only`` only up to the first that retains; the number of keys dropped because
    the model could not take their links."""
    dropped = 0
    with ctx.searching_until(scoring_ends), suppress(ScoringTimeout):
        while waiting and now() <= scoring_ends:
            key = waiting[-1]
            if plain_only and (key[1] or key[2]):
                break
            dropped += _score_key(ctx, key, variants, given, fits, links)
            waiting.pop()
    return dropped


def _score_key(ctx: ScoringContext, key: Key, variants: list[Variant],
               given: dict[Key, Fraction], fits: set[tuple[int, ...]], links: LinkCount
               ) -> bool:
    """Score one key into ``variants`` (unless it cannot fit or its latency is the
    incumbent's, already there); True when it is dropped because the model could not take
    its links. Raises ``ScoringTimeout`` past ``ctx.deadline``, the key unscored."""
    retains = bool(key[1] or key[2])
    if retains and key[0] not in fits:
        return False  # retention only adds to the working set: no fit without, none with
    copies = _copies(ctx, key[0], key[2])
    if key not in given and not links.admits(key[1], key[2], copies):
        return True  # a model too large to build in time finds nothing
    found = make_variant(ctx, *key)
    if found is not None:
        if given.get(key) != found.latency:
            variants.append(found)
            links.add(key[1], key[2], copies)
        if not retains:
            fits.add(key[0])
    return False


def _score_guided(ctx: ScoringContext, window: Window, waiting: list[Key],
                  variants: list[Variant], given: dict[Key, Fraction],
                  fits: set[tuple[int, ...]], links: LinkCount, ends: float) -> int:
    """``guided.score_along_paths`` over the waiting retention keys until ``ends``, those
    it scores taken out of ``waiting``; the number dropped as in ``_score_waiting``."""
    dropped = 0

    def score(key: Key) -> None:
        nonlocal dropped
        dropped += _score_key(ctx, key, variants, given, fits, links)

    with ctx.searching_until(ends):
        done = score_along_paths(ctx, window, variants, waiting, fits, score, ends)
    if done:
        waiting[:] = [key for key in waiting if key not in done]
    return dropped


def _solve_variants(ctx: ScoringContext, window: Window, variants: list[Variant],
                    hint: Sequence[Variant], deadline: float, hard_end: float, seed: int,
                    workers: int) -> tuple[list[Variant], bool] | None:
    """The best schedule of ``variants`` in the window, and whether it is proven optimal;
    None if none was found. The shortest path through the window's states
    (``sequence.shortest_sequence``, at most ``PATH_SHARE`` of the time) comes first; CP-SAT
    then starts from it (or from ``hint``, a schedule of ``variants``, if it found nothing
    better) and proves what it can in the rest."""
    path = shortest_sequence(ctx, window, variants,
                             now() + PATH_SHARE * max(0.0, deadline - now()))
    if path is not None and window.holds(hint) and total(path) >= total(hint):
        path = None  # no better than the hint, which CP-SAT starts from anyway
    if path is not None and not recomputes(ctx, window, path):
        path = None  # the path knows nothing of the teamkorea rule across subgraphs
    demands = [demanded(ctx, v.ops, v.retained_out) for v in variants]
    found = _solve_model(window, variants, _indices(variants, hint if path is None else path),
                         ctx.unit, deadline, hard_end, seed, workers, demands)
    if path is not None and (found is None or total(path) < total(found[0])):
        return path, False  # the model's time ran out, or the path has more subgraphs than
        # it has positions (a window whose ops other subgraphs also run)
    return found


def _indices(variants: Sequence[Variant], schedule: Sequence[Variant]) -> list[int]:
    """Where each variant of ``schedule`` stands in ``variants``, a variant run again at its
    next copy (``_repeats`` copies are the same object), for the model's hint."""
    at: dict[int, list[int]] = {}
    for i, v in enumerate(variants):
        at.setdefault(id(v), []).append(i)
    runs: dict[int, int] = {}
    out = []
    for v in schedule:
        k = runs[id(v)] = runs.get(id(v), -1) + 1
        out.append(at[id(v)][k])
    return out


def _solve_model(window: Window, variants: list[Variant], hinted: Sequence[int],
                 unit: int, deadline: float, hard_end: float, seed: int, workers: int,
                 demands: Sequence[frozenset[Pair]]) -> tuple[list[Variant], bool] | None:
    """CP-SAT's best schedule of ``variants`` in the window, hinted with the variants at
    ``hinted`` (in order), each variant demanding its ``demands`` (``recompute.py``), and
    whether it is proven optimal; None if none was found, or if the build leaves CP-SAT
    too little time before ``hard_end`` (``LEAST_SOLVE_S``, ``LOAD_SHARE``). The build
    stops at ``deadline``, which ``_solve_window`` ends ``LEAST_SOLVE_S`` before it."""
    started = now()
    try:
        model, mv = build_model(window, variants, objective_scale(variants, unit), deadline,
                                demands)
    except BuildTimeout:
        return None
    add_hint(model, window, variants, mv, hinted)
    built = now()
    load = LOAD_SHARE * (built - started)
    if hard_end - built < LEAST_SOLVE_S + load:
        return None
    solver = cp_model.CpSolver()
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = max(1, workers)
    limit_cpsat(solver.parameters, min(deadline, hard_end - load))
    # presolve can take a window's whole time and leave no solution at all, not even the
    # hinted incumbent (10 of 13 windows of 3,000-13,000 variables at 1 s on benchmark 13 with
    # twice its capacity); without it each found at least the incumbent, most improved on
    # it. Whole-graph models (this path too) reached the same proven optima, a little faster
    solver.parameters.cp_model_presolve = False
    status = run_cpsat(solver, model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return decode(solver, variants, mv), status == cp_model.OPTIMAL
