"""The cheapest sequence of scored variants through a window, by a shortest path.

A schedule of a window (``cpsat_model.Window``) is a path through states: which ops have
run, which tensors slow memory holds, and what the last subgraph kept resident. Each
variant whose retained-in set is what is resident and whose slow reads are there moves to
the next state at the cost of its latency (S4, S5), so Dijkstra over those states finds
the cheapest sequence. CP-SAT's model of the same window has to guess positions and
links; on a 19-op fork-join (``gen-forkjoin-04`` ``per_op``, 30,915 variants of its 7,529
op sets) it was at 16,394.19 after 240 s, where this path is 14,514.08, found in 0.33 s
over 959 states. Graphs with many independent branches have far more states (the
relinking model of the 63-op benchmark 13 passed 200,000 without reaching the end), so
the search gives up at ``MOST_STATES``.

Two restrictions keep the states few, so the path is a schedule, not a proven optimum
over the variants (CP-SAT still proves that):

* each subgraph runs an op not run before (recomputing ones that did run is allowed), so
  no variant runs twice: a subgraph recomputed once per consumer to hand each the tensor
  it keeps (``cpsat._repeats``) is left to CP-SAT;
* slow memory is tracked only for tensors some op not yet run consumes, or the window
  must leave there: a later subgraph cannot recompute an op from a tensor only a finished
  op read.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence

from solver.deadline import charge, now
from solver.fusion.context import ScoringContext
from solver.fusion.cpsat_model import Window, objective_scale
from solver.fusion.variants import Variant

MOST_STATES = 20_000
"""States reached at most before the search gives up (about 400 bytes each; reached in
0.33-0.54 s relinking greedy's schedules of benchmarks 13 and 17)."""
CHECK_EVERY, OPS_PER_CHECK, LOOKUPS_PER_CHECK = 256, 16_384, 262_144
"""States expanded between two checks of the deadline at most; fewer where they look at
more ops (states times the ops of the window: every 25 states over a 640-op graph, where
256 took 0.09 s) or more variants (every window whose states look up more than a
thousand each)."""
STATE_S, LOOKUP_S = 2.5e-5, 8e-8
"""Deterministic seconds charged per state reached and per variant looked up from a state
(``deadline.charge``), fitted to the wall time of three searches (within 15%): 959 states
and 4.2 million lookups in 0.35 s (``gen-forkjoin-04``, all 30,915 variants), 20,000
states and 49,000-63,000 lookups in 0.49-0.59 s (relinking greedy's schedules of
benchmarks 13 and 17). A clock tick per check of the deadline undercharged them 4-14x.
Steps have since become cheaper where slow memory holds many tensors (those relinkings:
0.33-0.54 s), so there these charges run ahead of the wall clock: a deterministic solve's
path stops sooner, never later."""

State = tuple[int, int, int]
"""Ops run, tensors in slow memory (bit masks) and the index of what is resident."""


def _mask(items: Sequence[int] | frozenset[int]) -> int:
    out = 0
    for i in items:
        out |= 1 << i
    return out


def shortest_sequence(ctx: ScoringContext, window: Window, variants: Sequence[Variant],
                      deadline: float, most_states: int = MOST_STATES) -> list[Variant] | None:
    """The cheapest sequence of ``variants`` that meets ``window`` under the module's two
    restrictions, or None when there is none or the search passes ``deadline`` or
    ``most_states``."""
    g = ctx.graph
    scale = objective_scale(variants, ctx.unit)
    cost = [round(v.latency * scale) for v in variants]
    residents: dict[frozenset[int], int] = {}

    def resident_id(kept: frozenset[int]) -> int:
        return residents.setdefault(kept, len(residents))

    start_resident, handoff = resident_id(window.resident), resident_id(window.handoff)
    universe = sorted({q for v in variants for q in v.ops} | window.cover)
    reads, writes, ops_of, kept_in, kept_out, touched = [], [], [], [], [], []
    by_op_in: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, v in enumerate(variants):
        reads.append(_mask(v.reads_from_slow))
        writes.append(_mask(v.writes))
        ops_of.append(_mask(v.ops))
        touched.append(writes[i] | _mask({t for q in v.ops for t in ctx.problem.inputs[q]}))
        kept_in.append(resident_id(v.retained_in))
        kept_out.append(resident_id(v.retained_out))
        for q in v.ops:
            by_op_in[q, kept_in[i]].append(i)
    kept_mask = {r: _mask(kept) for kept, r in residents.items()}
    needed, cover = _mask(window.needed), _mask(window.cover)
    consumers = {t: _mask([c for c in g.consumers.get(t, ()) if c in universe])
                 for q in universe for t in ctx.problem.inputs[q]}
    inputs = {q: [(t, 1 << g.producer[t] if t in g.producer else 0)
                  for t in ctx.problem.inputs[q]] for q in universe}

    def still_needed(avail: int, run: int, among: int = -1) -> int:
        """``avail`` without the tensors of ``among`` (every one by default) that no op
        left to run reads and the window need not leave in slow memory. A state's tensors
        are all still needed, so after a variant only the inputs of its ops and what it
        writes (``touched``) can cease to be: checking those alone costs a large graph's
        path far less than checking every tensor slow memory holds."""
        rest = avail & ~needed & among
        kept = avail & ~rest
        while rest:
            low = rest & -rest
            t = low.bit_length() - 1
            if consumers.get(t, 0) & ~run:
                kept |= low
            rest ^= low
        return kept

    start: State = (0, still_needed(_mask(window.available), 0), start_resident)
    best: dict[State, int] = {start: 0}
    came: dict[State, tuple[State, int]] = {}
    heap: list[tuple[int, int, State]] = [(0, 0, start)]
    pushed = expanded = looked_up = charged = 0
    check_every = max(1, min(CHECK_EVERY, OPS_PER_CHECK // max(1, len(universe))))
    try:
        while heap:
            d, _, state = heapq.heappop(heap)
            if d > best[state]:
                continue
            run, avail, kept = state
            if run & cover == cover and avail & needed == needed and kept == handoff:
                return _path(variants, came, state)
            expanded += 1
            if expanded % check_every == 0 or looked_up >= LOOKUPS_PER_CHECK:
                charge(looked_up * LOOKUP_S + (len(best) - charged) * STATE_S)
                looked_up, charged = 0, len(best)
                if now() > deadline:
                    return None
            present = avail | kept_mask[kept]
            tried: set[int] = set()
            for q in universe:
                if run >> q & 1 or not all(present >> t & 1 or run & producer
                                           for t, producer in inputs[q]):
                    continue
                candidates = by_op_in.get((q, kept), ())
                looked_up += len(candidates)
                for i in candidates:
                    if i in tried or reads[i] & ~avail:
                        continue
                    tried.add(i)
                    after = run | ops_of[i]
                    nxt = (after, still_needed(avail | writes[i], after, touched[i]),
                           kept_out[i])
                    nd = d + cost[i]
                    if nd < best.get(nxt, nd + 1):
                        if len(best) >= most_states:
                            return None
                        best[nxt], came[nxt] = nd, (state, i)
                        pushed += 1
                        heapq.heappush(heap, (nd, pushed, nxt))
        return None
    finally:  # what the last check did not charge
        charge(looked_up * LOOKUP_S + (len(best) - charged) * STATE_S)


def _path(variants: Sequence[Variant], came: dict[State, tuple[State, int]],
          state: State) -> list[Variant]:
    out: list[Variant] = []
    while state in came:
        state, i = came[state]
        out.append(variants[i])
    out.reverse()
    return out
