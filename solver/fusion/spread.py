"""A window's improvement copied onto its twins elsewhere in the schedule.

Repeated layers and heads repeat stretches of the schedule; the window search frees one
stretch at a time, at random, and on a large graph reaches each only a few times in a
short solve. When a window improves, each other run of subgraphs that are twins of the
ones it replaced (``twins.variant_signature``, in the same order and named consistently) gets the
replacement renamed onto its own ops and tensors, kept where it scores faster and meets
what that stretch's window would ask of it (``Window.holds``, the model's constraints, and
``recomputes``, the teamkorea reading's rule across subgraphs).
"""

from __future__ import annotations

from collections.abc import Sequence

from solver.fusion.context import ScoringContext
from solver.fusion.cpsat_model import may_replace
from solver.fusion.twins import variant_signature
from solver.fusion.variants import Variant, make_variant

Renaming = tuple[dict[int, int], dict[int, int]]
"""Ops and tensors of one stretch to those of its twin."""


def spread(ctx: ScoringContext, schedule: Sequence[Variant], old: Sequence[Variant],
           new: Sequence[Variant], start: int) -> list[Variant]:
    """``schedule``, where the window's subgraphs ``old`` became ``new`` (from position
    ``start``), with the same change made on every other stretch of twins of ``old`` where
    it is valid and faster; the stretches are taken first to last, none overlapping."""
    out = list(schedule)
    signatures: dict[Variant, tuple] = {}

    def signed(v: Variant) -> tuple:
        if v not in signatures:
            signatures[v] = variant_signature(ctx, v)
        return signatures[v]

    shape = [signed(v) for v in old]
    i = 0
    while i + len(old) <= len(out):
        if start - len(old) < i < start + len(new):
            i = start + len(new)  # the window's own stretch
            continue
        stretch = out[i:i + len(old)]
        renaming = _renaming(ctx, old, stretch) \
            if [signed(v) for v in stretch] == shape else None
        copy = None if renaming is None else _renamed(ctx, new, renaming)
        if copy is None or sum(v.latency for v in copy) >= sum(v.latency for v in stretch) \
                or not may_replace(ctx, out, i, i + len(old), copy):
            i += 1
            continue
        out[i:i + len(old)] = copy
        if i < start:
            start += len(copy) - len(old)
        i += len(copy)
    return out


def _renaming(ctx: ScoringContext, old: Sequence[Variant],
              twin: Sequence[Variant]) -> Renaming | None:
    """Each op and tensor of ``old`` to its place in ``twin`` (subgraph by subgraph, op by
    op, tensor by tensor), None unless that is one-to-one throughout."""
    p = ctx.problem
    ops: dict[int, int] = {}
    tensors: dict[int, int] = {}
    for u, v in zip(old, twin, strict=True):
        for q, r in zip(u.ops, v.ops, strict=True):
            if ops.setdefault(q, r) != r:
                return None
            for t, s in zip((*p.inputs[q], *p.outputs[q]), (*p.inputs[r], *p.outputs[r]),
                            strict=True):
                if tensors.setdefault(t, s) != s:
                    return None
    if len(set(ops.values())) < len(ops) or len(set(tensors.values())) < len(tensors):
        return None
    return ops, tensors


def _renamed(ctx: ScoringContext, new: Sequence[Variant],
             renaming: Renaming) -> list[Variant] | None:
    """``new`` on the twin's ops and tensors, each scored there; None where an op or
    tensor has no counterpart or a subgraph fits nowhere."""
    ops, tensors = renaming
    out = []
    for v in new:
        if not (set(v.ops) <= ops.keys() and v.retained_in | v.retained_out <= tensors.keys()):
            return None
        found = make_variant(ctx, tuple(ops[q] for q in v.ops),
                             frozenset(tensors[t] for t in v.retained_in),
                             frozenset(tensors[t] for t in v.retained_out))
        if found is None:
            return None
        out.append(found)
    return out
