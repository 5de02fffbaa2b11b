"""Which retention variants to score first: those a shortest path over their estimates picks.

An op set has one variant with nothing retained and, often, ten or more that retain a
tensor on either side (``variants.retention_options``); a window lists them after every
op set's plain variant, and in a window's share of a 10-s solve most are never scored
(93% of the keys waiting in the windows of ``gen-forkjoin-04`` ``per_op``). Yet the best
schedule of that graph hands one tensor on twice, through variants whose plain twins are
scored long before. So each waiting retention variant of an op set that fits is priced
at an ``estimate`` from its plain variant, the shortest path
(``sequence.shortest_sequence``) runs over the scored variants and these, and the
estimates on it are scored; again, until the path holds none. Over every op set of up to
six ops of that graph, 47 of its 8,407 retention variants scored so gave 14,513.82, what
scoring all of them gives (``benchmarks/path_oracle.py --guided``: 11 s against 68 s). An
estimate is not a bound (a retention may crowd the tiles, or save more than it can see),
so this orders the scoring; it proves nothing, and what it leaves is scored after it in
the usual order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

from solver.deadline import now
from solver.fusion.context import ScoringContext, ScoringTimeout
from solver.fusion.cpsat_model import Window
from solver.fusion.floors import least_compute
from solver.fusion.score import score_subgraph
from solver.fusion.sequence import shortest_sequence
from solver.fusion.variants import Variant, variant

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
    done: set[Key] = set()
    if now() >= ends:
        return done
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
                return done
    while guessed and now() < ends:
        path = shortest_sequence(ctx, window, [*variants, *guessed.values()], ends)
        picked = [] if path is None else [(v.ops, v.retained_in, v.retained_out)
                                           for v in path if v.config is None]
        if not picked:
            break
        for key in picked:
            try:
                score(key)
            except ScoringTimeout:
                return done
            done.add(key)
            del guessed[key]
    return done
