"""The CP-SAT model that picks, orders and links scored subgraph variants in a window.

A window is a stretch of a schedule with everything around it fixed: what slow memory holds
when it starts, what the previous subgraph retained into it, what later subgraphs need
from slow memory, and what its last subgraph must retain for the next. The whole graph is
the window with nothing around it.

* one Boolean per variant; every op of the window covered by at least one chosen variant
  (covering an op twice is recomputation);
* positions 1..n of the n chosen variants, all different (unit intervals in a NoOverlap);
* availability (S4): a variant reading tensor ``t`` from slow memory comes after the
  variant designated to write ``t`` first; whatever must be in slow memory at the end has
  a designated writer;
* retention (S5): a variant keeping ``R`` resident is immediately followed by one whose
  retained-in set is exactly ``R`` (one link Boolean per compatible pair); the window's
  boundary sets link to its first and last positions;
* under the teamkorea reading (``recompute.py``): a chosen variant keeping a tensor
  ephemeral has each of its outside consumers run, by some chosen variant or some subgraph
  around the window, with a copy of its producer;
* objective: the sum of the chosen variants' latencies in integer units.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ortools.sat.python import cp_model

from solver.deadline import now
from solver.fusion.context import ScoringContext
from solver.fusion.recompute import Pair, demanded, paired_edges, run_together
from solver.fusion.variants import Variant

MAX_OBJECTIVE = 2**50
LINK_BUDGET = 50_000
"""Most retention links (``_retention``: a Boolean per pair of a variant keeping ``R`` and
one finding ``R`` resident) a model is given. They grow with the product of the two: the
38,901 variants of a 15-op fork-join with ample capacity made 6.3 million, whose building
took the whole 10-s solve, which then returned the greedy schedule it started from."""


@dataclass(frozen=True)
class Window:
    """What a sub-schedule must achieve, with the rest of the schedule fixed."""

    cover: frozenset[int]
    """Ops that no subgraph outside the window runs."""
    available: frozenset[int]
    """Tensors in slow memory when the window starts."""
    resident: frozenset[int] = frozenset()
    """Tensors the subgraph before the window retains into its first subgraph."""
    needed: frozenset[int] = frozenset()
    """Tensors that must be in slow memory when the window ends."""
    handoff: frozenset[int] = frozenset()
    """Tensors the window's last subgraph must retain for the subgraph after it."""
    together: frozenset[Pair] = frozenset()
    """(consumer, producer) pairs a subgraph around the window runs together
    (``recompute.py``; teamkorea reading only)."""
    owed: frozenset[Pair] = frozenset()
    """Pairs the subgraphs around the window demand and none of them runs together: the
    window must (teamkorea reading only)."""

    def holds(self, schedule: Sequence[Variant]) -> bool:
        """Whether ``schedule``, in this order, meets what the window asks as the model's
        constraints put it: every op of ``cover`` run, each tensor read from slow memory
        there when it is read, every ``needed`` one there at the end, and each subgraph
        finding resident exactly what the one before it kept (``resident`` before the
        first, ``handoff`` after the last)."""
        if not self.cover <= {q for v in schedule for q in v.ops}:
            return False
        kept = [self.resident, *(v.retained_out for v in schedule)]
        if kept != [*(v.retained_in for v in schedule), self.handoff]:
            return False
        available = set(self.available)
        for v in schedule:
            if not v.reads_from_slow <= available:
                return False
            available |= v.writes
        return self.needed <= available


def frame(ctx: ScoringContext, schedule: Sequence[Variant], a: int,
          b: int) -> tuple[Window, list[Variant]]:
    """The window freeing ``schedule[a:b]``, with everything around it fixed."""
    before, inside, after = schedule[:a], list(schedule[a:b]), schedule[b:]
    available = set(ctx.graph.graph_inputs)
    for v in before:
        available |= v.writes
    needed: set[int] = set()
    written_after: set[int] = set()
    for v in after:
        needed |= v.reads_from_slow - available - written_after
        written_after |= v.writes
    needed |= set(ctx.graph.graph_outputs) - available - written_after
    around = (*before, *after)
    together = paired_edges(ctx, (v.ops for v in around))
    demands = {pair for v in around for pair in demanded(ctx, v.ops, v.retained_out)}
    window = Window(
        cover=frozenset(q for v in inside for q in v.ops) - {q for v in around for q in v.ops},
        available=frozenset(available),
        resident=before[-1].retained_out if before else frozenset(),
        needed=frozenset(needed),
        handoff=inside[-1].retained_out if after else frozenset(),
        together=together,
        owed=frozenset(demands - together),
    )
    return window, inside


def recomputes(ctx: ScoringContext, window: Window, schedule: Sequence[Variant]) -> bool:
    """Whether the window's ``schedule`` meets ``recompute.py``'s rule with the subgraphs
    around it (always, under the default reading)."""
    wanted = set(window.owed)
    for v in schedule:
        wanted |= demanded(ctx, v.ops, v.retained_out)
    wanted -= window.together
    return not wanted or wanted <= run_together((v.ops for v in schedule), wanted)


def may_replace(ctx: ScoringContext, schedule: Sequence[Variant], a: int, b: int,
                replacement: Sequence[Variant]) -> bool:
    """Whether ``replacement`` may take the place of ``schedule[a:b]`` as the model of that
    window would allow: its constraints (``Window.holds``) and the teamkorea reading's rule
    across subgraphs (``recomputes``)."""
    window = frame(ctx, schedule, a, b)[0]
    return window.holds(replacement) and recomputes(ctx, window, replacement)


class BuildTimeout(Exception):
    """The deadline passed while the model was being built (a window's variants can make
    millions of retention links: 6.3 million for 38,901 variants of a 15-op fork-join)."""


class LinkCount:
    """The retention links a model's variants make, counted as variants are added, so the
    caller can stop adding retention variants before the model outgrows ``LINK_BUDGET``."""

    def __init__(self, window: Window) -> None:
        self.senders: Counter[frozenset[int]] = Counter()
        self.receivers: Counter[frozenset[int]] = Counter()
        self.total = 0
        if window.resident:
            self.senders[window.resident] += 1
        if window.handoff:
            self.receivers[window.handoff] += 1

    def extra(self, retained_in: frozenset[int], retained_out: frozenset[int],
              copies: int = 1) -> int:
        """Links that ``copies`` more variants with these retained sets would add (copies
        keeping what they find resident link to each other, not to themselves)."""
        among = copies * (copies - 1) if retained_in and retained_in == retained_out else 0
        return among + copies * ((self.senders[retained_in] if retained_in else 0)
                                 + (self.receivers[retained_out] if retained_out else 0))

    def admits(self, retained_in: frozenset[int], retained_out: frozenset[int],
               copies: int = 1) -> bool:
        return self.total + self.extra(retained_in, retained_out, copies) <= LINK_BUDGET

    def add(self, retained_in: frozenset[int], retained_out: frozenset[int],
            copies: int = 1) -> None:
        self.total += self.extra(retained_in, retained_out, copies)
        if retained_in:
            self.receivers[retained_in] += copies
        if retained_out:
            self.senders[retained_out] += copies


@dataclass
class ModelVars:
    """Handles to the decision variables, for hints and decoding."""

    chosen: list[cp_model.IntVar]
    position: list[cp_model.IntVar]
    count: cp_model.IntVar
    links: dict[tuple[int, int], cp_model.IntVar]
    designated: dict[tuple[int, int], cp_model.IntVar]
    written_at: dict[int, cp_model.IntVar]


START, END = -1, -2
"""Link endpoints for the window's boundary (the subgraphs just before and after it)."""


def objective_scale(variants: Sequence[Variant], unit: int) -> Fraction:
    """Integer units per latency unit: the problem's exact unit when the objective fits in
    the solver's integers, else the finest power-of-ten fraction of it that does."""
    total = sum(v.latency for v in variants) or Fraction(1)
    scale = Fraction(unit)
    while total * scale > MAX_OBJECTIVE:
        scale /= 10
    return scale


def build_model(window: Window, variants: Sequence[Variant], scale: Fraction,
                deadline: float = float("inf"), demands: Sequence[frozenset[Pair]] = ()
                ) -> tuple[cp_model.CpModel, ModelVars]:
    """The model of the window; ``BuildTimeout`` once ``deadline`` (a ``deadline.now()``
    value) passes while it is built. ``demands`` holds, per variant, the pairs it demands
    (``recompute.demanded``; none given, none demanded)."""
    model = cp_model.CpModel()
    horizon = max(1, len(window.cover) + 1)
    chosen = [model.new_bool_var(f"x{i}") for i in range(len(variants))]
    position = [model.new_int_var(0, horizon, f"pos{i}") for i in range(len(variants))]
    count = model.new_int_var(1, horizon, "count")
    model.add(sum(chosen) == count)
    intervals = [model.new_optional_fixed_size_interval_var(p, 1, x, f"slot{i}")
                 for i, (x, p) in enumerate(zip(chosen, position, strict=True))]
    model.add_no_overlap(intervals)
    for x, p in zip(chosen, position, strict=True):
        model.add(p >= 1).only_enforce_if(x)
        model.add(p <= count).only_enforce_if(x)
        model.add(p == 0).only_enforce_if(~x)
    _coverage(model, window, variants, chosen)
    _together(model, window, variants, chosen, demands)
    designated, written_at = _availability(model, window, variants, chosen, position, horizon,
                                           deadline)
    links = _retention(model, window, variants, chosen, position, count, deadline)
    model.minimize(sum(round(v.latency * scale) * x for v, x in zip(variants, chosen, strict=True)))
    return model, ModelVars(chosen, position, count, links, designated, written_at)


def _coverage(model: cp_model.CpModel, window: Window, variants: Sequence[Variant],
              chosen: Sequence[cp_model.IntVar]) -> None:
    covering: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    for v, x in zip(variants, chosen, strict=True):
        for op in v.ops:
            covering[op].append(x)
    for op in sorted(window.cover):
        model.add_bool_or(covering[op])


def _together(model: cp_model.CpModel, window: Window, variants: Sequence[Variant],
              chosen: Sequence[cp_model.IntVar], demands: Sequence[frozenset[Pair]]) -> None:
    """A chosen variant's demanded pairs, and the window's owed ones, are each run together
    by a chosen variant, unless a subgraph around the window runs them."""
    required = {(pair, i) for i, pairs in enumerate(demands) for pair in pairs
                if pair not in window.together}
    if not required and not window.owed:
        return
    by_consumer: dict[int, set[int]] = defaultdict(set)
    for consumer, producer in {pair for pair, _ in required} | window.owed:
        by_consumer[consumer].add(producer)
    runners: dict[Pair, list[cp_model.IntVar]] = defaultdict(list)
    for v, x in zip(variants, chosen, strict=True):
        ops = set(v.ops)
        for c in ops & by_consumer.keys():
            for producer in by_consumer[c] & ops:
                runners[c, producer].append(x)
    for pair in sorted(window.owed):
        model.add_bool_or(runners[pair])
    for pair, i in sorted(required):
        if runners[pair]:
            model.add_bool_or(runners[pair]).only_enforce_if(chosen[i])
        else:
            model.add(chosen[i] == 0)


def _availability(model: cp_model.CpModel, window: Window, variants: Sequence[Variant],
                  chosen: Sequence[cp_model.IntVar], position: Sequence[cp_model.IntVar],
                  horizon: int, deadline: float) -> tuple[dict, dict]:
    """Each tensor read from slow memory, or needed there at the end, has one designated
    writer, placed before every reader."""
    writers: dict[int, list[int]] = defaultdict(list)
    readers: dict[int, list[int]] = defaultdict(list)
    for i, v in enumerate(variants):
        for t in v.writes:
            writers[t].append(i)
        for t in v.reads_from_slow:
            readers[t].append(i)
    designated: dict[tuple[int, int], cp_model.IntVar] = {}
    written_at: dict[int, cp_model.IntVar] = {}
    for t in sorted((set(readers) | window.needed) - window.available):
        _check(deadline)
        ds = []
        for i in writers[t]:
            d = designated[t, i] = model.new_bool_var(f"w{t}_{i}")
            model.add_implication(d, chosen[i])
            ds.append(d)
        if t in window.needed:
            model.add_exactly_one(ds)
        else:
            model.add_at_most_one(ds)
        if not readers[t]:
            continue
        at = written_at[t] = model.new_int_var(0, horizon, f"written{t}")
        for i in writers[t]:
            model.add(at == position[i]).only_enforce_if(designated[t, i])
        for r in readers[t]:
            model.add_bool_or(ds).only_enforce_if(chosen[r])
            model.add(position[r] > at).only_enforce_if(chosen[r])
    return designated, written_at


def _retention(model: cp_model.CpModel, window: Window, variants: Sequence[Variant],
               chosen: Sequence[cp_model.IntVar], position: Sequence[cp_model.IntVar],
               count: cp_model.IntVar, deadline: float
               ) -> dict[tuple[int, int], cp_model.IntVar]:
    """A variant keeping R resident is followed at once by one whose retained-in set is R;
    START keeps ``window.resident`` for position 1, END receives ``window.handoff``."""
    receivers: dict[frozenset[int], list[int]] = defaultdict(list)
    for j, v in enumerate(variants):
        if v.retained_in:
            receivers[v.retained_in].append(j)
    if window.handoff:
        receivers[window.handoff].append(END)
    senders = [(i, v.retained_out) for i, v in enumerate(variants) if v.retained_out]
    if window.resident:
        senders.append((START, window.resident))
    links: dict[tuple[int, int], cp_model.IntVar] = {}
    outgoing: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    incoming: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    for i, kept in senders:
        _check(deadline)
        for j in receivers.get(kept, ()):
            if i == j or (i == START and j == END):
                continue
            z = links[i, j] = model.new_bool_var(f"link{i}_{j}")
            if i == START:
                model.add(position[j] == 1).only_enforce_if(z)
            elif j == END:
                model.add(position[i] == count).only_enforce_if(z)
            else:
                model.add(position[j] == position[i] + 1).only_enforce_if(z)
            for k in (i, j):
                if k >= 0:
                    model.add_implication(z, chosen[k])
            outgoing[i].append(z)
            incoming[j].append(z)
    for i, _ in senders:
        if i == START:
            model.add_exactly_one(outgoing[i])
        else:
            model.add(sum(outgoing[i]) == 1).only_enforce_if(chosen[i])
    for j in [k for ks in receivers.values() for k in ks]:
        if j == END:
            model.add_exactly_one(incoming[j])
        else:
            model.add(sum(incoming[j]) == 1).only_enforce_if(chosen[j])
    return links


def _check(deadline: float) -> None:
    if now() > deadline:
        raise BuildTimeout


def decode(solver: cp_model.CpSolver, variants: Sequence[Variant],
           mv: ModelVars) -> list[Variant]:
    """The chosen variants in execution order."""
    picked = [i for i, x in enumerate(mv.chosen) if solver.boolean_value(x)]
    picked.sort(key=lambda i: solver.value(mv.position[i]))
    return [variants[i] for i in picked]


def add_hint(model: cp_model.CpModel, window: Window, variants: Sequence[Variant],
             mv: ModelVars, sequence: Sequence[int]) -> None:
    """Hint a known schedule of the window, given as variant indices in execution order,
    including the designated writers (first writer of each tensor) and the links."""
    order = {i: p + 1 for p, i in enumerate(sequence)}
    for i, (x, pos) in enumerate(zip(mv.chosen, mv.position, strict=True)):
        model.add_hint(x, i in order)
        model.add_hint(pos, order.get(i, 0))
    model.add_hint(mv.count, len(sequence))
    first_writer: dict[int, int] = {}
    for i in sequence:
        for t in variants[i].writes:
            first_writer.setdefault(t, i)
    for (t, i), d in mv.designated.items():
        model.add_hint(d, first_writer.get(t) == i)
    for t, at in mv.written_at.items():
        model.add_hint(at, order.get(first_writer.get(t, -1), 0))
    for (i, j), z in mv.links.items():
        if i == START:
            model.add_hint(z, order.get(j) == 1)
        elif j == END:
            model.add_hint(z, order.get(i) == len(sequence))
        else:
            model.add_hint(z, i in order and j in order and order[j] == order[i] + 1)
