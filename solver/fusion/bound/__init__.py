"""A lower bound on the whole fusion problem, far above max(compute, I/O) where it matters,
by job: ``pricing.py`` bounds what one connected op set costs for each arrival,
``cover.py`` picks the cheapest choice of priced op sets that runs every op (with per-op
fillers for op sets left unpriced), ``forced.py`` the traffic every schedule is forced
into (a bound of its own, and a filler), ``roles.py`` the compute an unpriced set pays
for an op by the roles it can take (and the roles S6.4 leaves an op), ``zones.py`` the
parts of the graph no subgraph spans, over which the fillers pay, ``shared_heads.py`` what
heads sharing a weight too big for the capacity pay. ``split_k.py`` is the TeamKorea
reading's: what its MatMuls pay, split or not."""

from fractions import Fraction

from solver.fusion.bound.cover import CoverBound, cover_bound
from solver.fusion.bound.forced import forced_bound
from solver.fusion.bound.split_k import split_k_bound
from solver.fusion.context import ScoringContext

__all__ = ["CoverBound", "cover_bound", "forced_bound", "reading_bound"]


def reading_bound(ctx: ScoringContext) -> Fraction:
    """The instant bound of the context's reading past compute and I/O (time units): the
    forced traffic under SEMANTICS.md, what the MatMuls pay under the TeamKorea reading
    (kept in ``ctx``: the search and the solver's report both ask)."""
    if ctx.semantics == "teamkorea":
        return ctx.memo("split_k_bound", (), lambda: split_k_bound(ctx.graph))
    return forced_bound(ctx)
