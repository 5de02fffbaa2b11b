"""A window's improvement copied onto its twins elsewhere in the schedule.

Repeated layers and heads repeat stretches of the schedule; the window search frees one
stretch at a time, at random, and on a large graph reaches each only a few times in a
short solve. When a window improves, each other run of subgraphs that are twins of the
ones it replaced (``twins.variant_signature``, in the same order and named consistently) gets the
replacement renamed onto its own ops and tensors, kept where it scores faster and meets
what that stretch's window would ask of it (``Window.holds``, the model's constraints, and
``recomputes``, the teamkorea reading's rule across subgraphs).

Once two heads' stretches have been changed by different windows, they are no longer
alike subgraph by subgraph, and no later improvement of one reaches the other.
``copy_fastest`` compares stretches by the ops they run instead: a stretch whose op set is
a twin of a faster stretch's (the same ops and tensors up to renaming, paired in
topological order) takes that stretch's subgraphs, under the same checks.
"""

from __future__ import annotations

from collections.abc import Sequence

from solver.deadline import now
from solver.fusion.context import ScoringContext
from solver.fusion.cpsat_model import may_replace
from solver.fusion.twins import variant_signature
from solver.fusion.variants import Variant, make_variant

Renaming = tuple[dict[int, int], dict[int, int]]
"""Ops and tensors of one stretch to those of its twin."""
MOST_SUBGRAPHS = 12
"""Longest stretch ``copy_fastest`` compares."""


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


def copy_fastest(ctx: ScoringContext, schedule: Sequence[Variant],
                 deadline: float) -> list[Variant]:
    """``schedule`` with stretches (up to ``MOST_SUBGRAPHS`` subgraphs) replaced by faster
    ones that run twin op sets elsewhere in it, renamed onto their ops and tensors, where
    valid (``may_replace``) and faster, one at a time until none is or ``deadline``."""
    out = list(schedule)
    rank = {q: i for i, q in enumerate(ctx.graph.topological_order)}
    while now() < deadline:
        copied = _copy_one(ctx, out, rank, deadline)
        if copied is None:
            break
        out = copied
    return out


def _copy_one(ctx: ScoringContext, schedule: Sequence[Variant], rank: dict[int, int],
              deadline: float) -> list[Variant] | None:
    """``schedule`` with one stretch replaced by the fastest stretch of twin ops apart from
    it, or None when no such copy is valid and faster (or ``deadline`` passed)."""
    alike: dict[tuple, list[tuple[int, int, tuple[int, ...]]]] = {}
    for a in range(len(schedule)):
        ops: set[int] = set()
        for b in range(a + 1, min(len(schedule), a + MOST_SUBGRAPHS) + 1):
            ops.update(schedule[b - 1].ops)
            ordered = tuple(sorted(ops, key=rank.__getitem__))
            alike.setdefault(_op_set_key(ctx, ordered), []).append((a, b, ordered))
    for stretches in alike.values():
        if len(stretches) < 2:
            continue
        if now() > deadline:  # read only here: under a work clock each reading costs
            return None
        cost = {(a, b): sum(v.latency for v in schedule[a:b]) for a, b, _ in stretches}
        a0, b0, fastest = min(stretches, key=lambda s: cost[s[0], s[1]])
        for a, b, ops_here in stretches:
            if cost[a, b] <= cost[a0, b0] or a0 < b and a < b0:  # as fast, or overlapping
                continue
            renaming = _paired(ctx, fastest, ops_here)
            copy = None if renaming is None else _renamed(ctx, schedule[a0:b0], renaming)
            if copy is not None and sum(v.latency for v in copy) < cost[a, b] \
                    and may_replace(ctx, schedule, a, b, copy):
                return [*schedule[:a], *copy, *schedule[b:]]
    return None


def _op_set_key(ctx: ScoringContext, ordered: Sequence[int]) -> tuple:
    """What a twin op set shares with ``ordered``, op by op: type, base cost, output
    shapes, and each input as the op of the set making it or, for one made outside, its
    first place among those and its shape. Looser than ``twins.signature``, which also
    tells a graph input from a tensor made elsewhere: a layer fed by the graph's input and
    one fed by the layer before are alike here, and the copy is scored and checked on its
    own stretch anyway."""
    g, p = ctx.graph, ctx.problem
    place = {q: i for i, q in enumerate(ordered)}
    outside: dict[int, int] = {}
    key = []
    for q in ordered:
        inputs = tuple(place[g.producer[t]] if g.producer.get(t) in place else
                       (outside.setdefault(t, len(outside)), p.heights[t], p.widths[t])
                       for t in p.inputs[q])
        key.append((p.op_types[q], p.base_costs[q],
                    tuple((p.heights[t], p.widths[t]) for t in p.outputs[q]), inputs))
    return tuple(key)


def _renaming(ctx: ScoringContext, old: Sequence[Variant],
              twin: Sequence[Variant]) -> Renaming | None:
    """Each op and tensor of ``old`` to its place in ``twin`` (subgraph by subgraph, op by
    op, tensor by tensor), None unless that is one-to-one throughout."""
    return _paired(ctx, [q for u in old for q in u.ops], [r for v in twin for r in v.ops])


def _paired(ctx: ScoringContext, ops_a: Sequence[int], ops_b: Sequence[int]) -> Renaming | None:
    """Each op of ``ops_a`` to the op at its place in ``ops_b`` and each of its tensors to
    the tensor at its place there, None unless that is one-to-one throughout."""
    p = ctx.problem
    ops: dict[int, int] = {}
    tensors: dict[int, int] = {}
    for q, r in zip(ops_a, ops_b, strict=True):
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
