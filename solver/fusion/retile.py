"""Each subgraph of a schedule at the fastest of every integer granularity.

The config search (``score.best_config``) tries powers of two, extent caps and a few
narrowings of the cheapest tiles that do not fit: every op set of a window model is
scored, so that search has to be quick, and it misses tiles such as 128 x 52 x 8 for a
MatMul whose 256 x 128 weight, resident, leaves room for a 52-row strip (16,915.2 at its
best candidate, 128 x 32 x 64; 13,169.1 there; generated ``gen-attention-01``). A
schedule's own subgraphs are few, so each gets the walk the cover bound prices op sets
with (``pricing.least``: cells of every integer w, h and k under floors, cheapest first),
each single value priced at the latency of its best named traversal: the first such price
to come out of the heap is the fastest of them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from solver.deadline import now
from solver.fusion.bound.pricing import least
from solver.fusion.closed_form import Granularity
from solver.fusion.score import (
    Config,
    ScoringContext,
    ScoringTimeout,
    legal_config_at,
    remember_best,
)
from solver.fusion.twins import variant_signature
from solver.fusion.variants import Variant

SPLITS = 4096
"""Range splits a subgraph's walk may make before it gives up and keeps its config."""
WALK_SHARE = 0.5
"""Most of the time left one subgraph's walk may take. Most walks take milliseconds, but on
the generated ``gen-residual-08`` one took 0.6 s, the whole time a 10-s solve gives them."""


def retile(ctx: ScoringContext, schedule: Sequence[Variant], deadline: float) -> list[Variant]:
    """``schedule`` with each subgraph at the fastest granularity and named traversal that
    fits its ops and retention, slowest subgraphs first, while ``deadline`` (a
    ``deadline.now()`` value) allows; each faster config found becomes the one
    ``best_config`` answers (``remember_best``), so later searches build on it."""
    out = list(schedule)
    for i in sorted(range(len(out)), key=lambda i: -out[i].latency):
        if now() > deadline:
            break
        v = out[i]
        walked = (v.ops, v.retained_in, v.retained_out)
        if v.config is None or ctx.has("retiled", walked):
            continue
        shape = ctx.shape(v.ops)
        twin = variant_signature(ctx, v)
        if ctx.has("retiled like", twin):  # a twin's walk: its tile, scored on this one
            found = ctx.memo("retiled like", twin, lambda: None)
            found = found and legal_config_at(ctx, shape, found.gran, v.retained_in,
                                              v.retained_out)
        else:
            try:  # no walk takes more than half the time left: one slow walk leaves the rest
                found = _fastest(ctx, v, now() + WALK_SHARE * (deadline - now()))
            except _OutOfTime:
                continue
            ctx.remember("retiled like", twin, found)
        ctx.remember("retiled", walked, True)  # its walk is done: the next pass skips it
        if found is not None and found.latency < v.latency:
            remember_best(ctx, v.ops, v.retained_in, v.retained_out, found)
            out[i] = replace(v, latency=found.latency, config=found)
    return out


def _fastest(ctx: ScoringContext, v: Variant, deadline: float) -> Config | None:
    """The fastest config of ``v``'s subgraph over every integer granularity, None if none
    is faster than its own or the walk ran out of splits first (``_OutOfTime`` if out of
    time)."""
    shape = ctx.shape(v.ops)
    configs: dict[int, Config] = {}

    def price_at(gran: Granularity) -> int | None:
        if now() > deadline:  # the walk itself looks at the time only where it splits
            raise _OutOfTime
        config = legal_config_at(ctx, shape, gran, v.retained_in, v.retained_out)
        if config is None:
            return None
        units = int(config.latency * ctx.unit)
        configs.setdefault(units, config)
        return units

    try:  # the peak working-set checks of a walk read ``ctx.deadline`` (``floors.peak_fits``)
        with ctx.searching_until(deadline):
            found = least(ctx, shape, v.retained_in, v.retained_out, False, SPLITS, deadline,
                          price_at=price_at, below=int(v.latency * ctx.unit))
    except ScoringTimeout:
        raise _OutOfTime from None
    if found is not None and not found[1] and now() > deadline:
        raise _OutOfTime  # a range's floor: the walk stopped for the time, not its splits
    return configs.get(found[0]) if found is not None and found[1] else None


class _OutOfTime(Exception):
    """The deadline passed in the middle of a walk."""
