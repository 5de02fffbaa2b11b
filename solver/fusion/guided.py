"""Which variants to score first: those a shortest path over placeholders picks.

A window lists more variants than its time can score. Each unscored variant stands in the
shortest path (``sequence.shortest_sequence``) as a placeholder, and the placeholders on
the path are worked on first, again until the path holds none:

- **Retention variants** (``score_along_paths``, the solver's order after every plain
  variant) of an op set that fits stand at an ``estimate`` from its plain variant. The
  best schedule of ``gen-forkjoin-04`` hands one tensor on twice, through variants whose
  plain twins are scored long before. Over every op set of up to six ops of that graph,
  47 of its 8,407 retention variants scored so gave 14,513.82, what scoring all of them
  gives (``benchmarks/path_oracle.py --guided``: 11 s against 68 s). An estimate is not a
  bound (a retention may crowd the tiles, or save more than it can see), so this orders
  the scoring and proves nothing.
- **Op sets** (their variant with nothing retained, ``score_plain_along_paths``) stand at
  a lower bound: their ``floors.op_set_roofline`` (O(ops)), raised to their
  ``score.least_floor`` when a path takes them, scored when a path takes them there. A
  path with no placeholder left is the shortest over every op set listed, from a few of
  them scored: on every op set of up to six ops of ``gen-forkjoin-04`` ``per_op`` (622),
  47 (``benchmarks/path_oracle.py --lazy``). The solver's whole-graph path before its
  windows takes this order (``cpsat._levels``); the windows keep scoring op sets smallest
  first, where it changed nothing measurable (BENCHMARKS.md, "The whole graph first, over
  its smallest op sets scored lazily").

What a path leaves is scored after it in the usual order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

from solver.deadline import now
from solver.fusion.context import ScoringContext, ScoringTimeout
from solver.fusion.cpsat_model import Window
from solver.fusion.floors import least_compute, op_set_roofline
from solver.fusion.score import least_floor, score_subgraph
from solver.fusion.sequence import shortest_sequence
from solver.fusion.variants import Variant, make_variant, retention_options, variant

CHECK_EVERY = 256
"""Placeholders made between two checks of the deadline."""

Key = tuple[tuple[int, ...], frozenset[int], frozenset[int]]
"""A variant to score: its op set, what it finds resident and what it keeps."""


def estimate(ctx: ScoringContext, plain: Variant, retained_in: frozenset[int],
             retained_out: frozenset[int]) -> Fraction:
    """A retention variant's latency guessed from its op set's plain variant: the lesser
    of that variant's config scored with the retention (when it still fits there: one
    closed-form score, about 0.04 ms, and the variant's best is at most it) and the plain
    latency less one load of each retained input and one write of each retained output,
    never below the compute every op pays (``floors.least_compute``). The first sees a
    retained MatMul operand that the plain variant loads once per tile (``gen-gated-mlp-01``
    ``per_op``: 89,128.96 exact, where one load less gives 162,529.28); few retentions fit
    at the plain config on a tight graph (286 of 8,395 on ``gen-forkjoin-04``). The
    closed form scores SEMANTICS.md's reading, so under the teamkorea one only the second
    stands."""
    size = ctx.graph.size
    outputs = ctx.shape(plain.ops).outputs
    saved = sum(size(t) for t in retained_in) + \
        sum(size(t) for t in retained_out if t in outputs)
    compute = sum(least_compute(ctx, q) for q in plain.ops)
    guess = max(ctx.latency(compute), plain.latency - ctx.latency(saved * ctx.per_element))
    if plain.config is not None and ctx.semantics == "default":  # that reading's scorer
        there = score_subgraph(ctx, plain.ops, plain.config.gran, plain.config.traversal,
                               retained_in, retained_out)
        if there.fits:
            guess = min(guess, there.latency)
    return guess


def placeholder(ctx: ScoringContext, plain: Variant, retained_in: frozenset[int],
                retained_out: frozenset[int]) -> Variant:
    """An unscored retention variant at its ``estimate`` (no config), made once per
    problem: windows overlap, and the 26 windows of a 10-s solve of the 124-op
    ``gen-attention-09`` asked for 24,646 of them (0.85 s)."""
    return ctx.memo("placeholder", (plain.ops, plain.config, retained_in, retained_out),
                    lambda: variant(ctx, plain.ops, retained_in, retained_out,
                                    estimate(ctx, plain, retained_in, retained_out), None))


def score_along_paths(ctx: ScoringContext, window: Window, variants: Sequence[Variant],
                      waiting: Sequence[Key], fits: set[tuple[int, ...]],
                      score: Callable[[Key], None], ends: float) -> set[Key]:
    """Score (``score``, which adds what it finds to ``variants``) the waiting retention
    keys of op sets that fit which the shortest path over ``variants`` and their
    placeholders takes, until a path takes none, none is found, or ``ends``; the keys
    scored. Stops quietly on ``ScoringTimeout`` (the key it was scoring stays waiting)."""
    if now() >= ends:
        return set()
    plain: dict[tuple[int, ...], Variant] = {}
    for v in variants:
        if not v.retained_in and not v.retained_out and \
                (v.ops not in plain or v.latency < plain[v.ops].latency):
            plain[v.ops] = v
    guessed: dict[Key, Variant] = {}
    for key in waiting:
        if (key[1] or key[2]) and key[0] in fits and key[0] in plain:
            guessed[key] = placeholder(ctx, plain[key[0]], key[1], key[2])
            if len(guessed) % CHECK_EVERY == 0 and now() >= ends:
                return set()
    return _along_paths(ctx, window, variants, guessed, score, ends)


def floor_placeholder(ctx: ScoringContext, ops: tuple[int, ...], raised: bool) -> Variant | None:
    """An op set's unscored plain variant at its ``op_set_roofline``, or, ``raised``, at
    its ``least_floor`` if that is more; None when it has no candidate (made once per
    problem, as ``placeholder``)."""
    def make() -> Variant | None:
        roof = ctx.latency(op_set_roofline(ctx, ctx.shape(ops)))
        floor = least_floor(ctx, ops) if raised else roof
        return None if floor is None else \
            variant(ctx, ops, frozenset(), frozenset(), max(roof, floor), None)
    return ctx.memo("floor placeholder", (ops, raised), make)


def score_plain_along_paths(ctx: ScoringContext, window: Window, variants: Sequence[Variant],
                            waiting: Sequence[Key], score: Callable[[Key], None],
                            ends: float) -> set[Key]:
    """Score (``score``, which adds what it finds to ``variants``) the waiting op sets
    (keys with nothing retained) which the shortest path over ``variants`` and their
    ``floor_placeholder`` takes, raising each to its least floor the first time a path
    takes it and scoring it the next, until a path takes none, none is found, or
    ``ends``; the keys scored. Stops quietly as ``score_along_paths``."""
    def raised(ops: tuple[int, ...]) -> bool:  # its least floor is known (memoized)
        return ctx.has("least floor", ops)

    guessed: dict[Key, Variant] = {}
    for key in waiting:
        if not key[1] and not key[2] and \
                (guess := floor_placeholder(ctx, key[0], raised(key[0]))) is not None:
            guessed[key] = guess
            if len(guessed) % CHECK_EVERY == 0 and now() >= ends:
                return set()

    def raise_or_score(key: Key) -> Variant | None:
        if not raised(key[0]):
            guess = floor_placeholder(ctx, key[0], True)
            if guess is not None and guess.latency > guessed[key].latency:
                return guess
        score(key)
        return None

    return _along_paths(ctx, window, variants, guessed, raise_or_score, ends)


def scored_lazily(ctx: ScoringContext, window: Window, start: Sequence[Variant],
                  sets: Sequence[tuple[int, ...]], ends: float) -> list[Variant]:
    """``start`` and the variants paths pick until ``ends``: of ``sets``, the op sets a
    path over their floors takes (``score_plain_along_paths``), then, of every op set that
    fits, the retention variants a path over estimates takes (``score_along_paths``)."""
    variants = list(start)

    def score(key: Key) -> None:
        found = make_variant(ctx, *key)
        if found is not None:
            variants.append(found)

    with ctx.searching_until(ends):
        score_plain_along_paths(ctx, window, variants,
                                [(ops, frozenset(), frozenset()) for ops in sets], score, ends)
        fits = {v.ops for v in variants if not v.retained_in and not v.retained_out}
        keys = [(ops, r_in, r_out) for ops in sorted(fits)
                for r_in, r_out in retention_options(ctx, ops) if r_in or r_out]
        score_along_paths(ctx, window, variants, keys, fits, score, ends)
    return variants


def _along_paths(ctx: ScoringContext, window: Window, variants: Sequence[Variant],
                 guessed: dict[Key, Variant], work: Callable[[Key], Variant | None],
                 ends: float) -> set[Key]:
    """Shortest paths over ``variants`` and the ``guessed`` placeholders until one takes
    no placeholder, none is found, or ``ends``: ``work`` on each placeholder a path takes,
    which either scores its key (into ``variants``; None) or gives a better placeholder.
    The keys scored; stops quietly on ``ScoringTimeout``."""
    done: set[Key] = set()
    while guessed and now() < ends:
        path = shortest_sequence(ctx, window, [*variants, *guessed.values()], ends)
        picked = [] if path is None else list(dict.fromkeys(
            (v.ops, v.retained_in, v.retained_out) for v in path if v.config is None))
        if not picked:
            break
        for key in picked:
            try:
                better = work(key)
            except ScoringTimeout:
                return done
            if better is None:
                done.add(key)
                del guessed[key]
            else:
                guessed[key] = better
    return done
