"""A lower bound for graphs too large for one model: the LP relaxation, part by part.

The schedule is cut into consecutive parts (``cuts``). Each part becomes a problem of its
own (``part``) that relaxes the whole problem's terms it holds:

* its ops keep every candidate and pay their full latency;
* a tensor made in the part keeps its home, copy, spill and residency terms for its
  readers inside the part (readers after it are dropped, so its residency and copies end
  no later than in the whole plan);
* a graph input keeps them in the first part that reads it;
* any other tensor a part reads is *loose* (``LayoutProblem.loose``): the reading op pays
  for where it reads from, and nothing else is charged or held in L1.

Every term of the whole plan is then paid in at most one part, never more than there, and
each part's L1 holds a subset of what the whole plan holds at that step; so the whole
plan's decisions, restricted to a part, are a solution of the part no dearer than its
share, and the sum of the parts' optima (a fortiori of their LP bounds) is a lower bound
of the whole optimum. Cuts go where the fewest tensors cross, which is where the parts
lose the least. Parts built alike (a transformer's layers) are one problem up to names:
each distinct part is solved once. A part not solved in time counts its per-op floor, so
the bound holds whenever it stops.

The parts' LP solutions, rounded and put together, are also a plan worth pricing.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from solver.deadline import charge_model, now
from solver.layout import cpsat_model
from solver.layout.cpsat import latency_floor_us
from solver.layout.cpsat_model import UNITS_PER_US, build_estimate_s, lp_estimate_s
from solver.layout.memory import MemConfig
from solver.layout.plan import Assignment
from solver.layout.problem import LayoutProblem
from solver.relaxation import relax

PART_SIZES = ((12, 48), (24, 96), (48, 192))
"""Fewest and most ops per part, one cut of the schedule per pair while time lasts. On
BERT-base (279 ops, Wormhole) parts of 12 to 48 ops bound within 0.02% of the whole
graph's LP in 2.9 s, against 6.2 s for the whole model; on the 16-layer Llama-3.2-1B
prefill (Blackhole) the three cuts bound 9,925.9, 9,975.0 and 9,999.6 us in 3.2, 7.5 and
15.4 s, the whole graph's LP being 10,018.0 (``docs/layout-cpsat.md``)."""

def crossings(problem: LayoutProblem) -> list[int]:
    """For each step k, how many tensors a cut before k separates from a reader: made
    before k (or graph inputs first read before k) and read at k or later."""
    n = len(problem.order)
    step = {op: k for k, op in enumerate(problem.order)}
    delta = [0] * (n + 1)
    for t in problem.tensors.values():
        steps = [step[op] for op, _ in t.consumers]
        if not steps:
            continue
        first = min(steps) if t.producer is None else step[t.producer]
        last = max(steps)
        if last > first:  # separated by every cut at first + 1 .. last
            delta[first + 1] += 1
            delta[last + 1] -= 1
    out, running = [], 0
    for k in range(n):
        running += delta[k]
        out.append(running)
    return out


def cuts(problem: LayoutProblem, sizes: tuple[int, int] = PART_SIZES[0]) -> list[tuple[int, int]]:
    """Consecutive parts of ``sizes[0]`` to ``sizes[1]`` ops (one part for a graph no larger),
    with the fewest tensors crossing the cuts (dynamic programming over cut positions);
    equal parts of at most ``sizes[1]`` ops when no cut gives every part such a size."""
    n = len(problem.order)
    fewest, most = sizes
    if n <= most:
        return [(0, n)]
    cross = crossings(problem)
    inf = float("inf")
    best: list[float] = [inf] * (n + 1)  # the fewest crossings of parts ending at step j
    back = [0] * (n + 1)
    best[0] = 0
    for j in range(fewest, n + 1):
        for i in range(max(0, j - most), j - fewest + 1):
            cost = best[i] + (cross[j] if j < n else 0)
            if cost < best[j]:
                best[j], back[j] = cost, i
    if best[n] == inf:  # e.g. 50 ops in parts of 30 to 40
        parts = -(-n // most)
        edges = [round(n * p / parts) for p in range(parts + 1)]
        return list(zip(edges, edges[1:], strict=False))
    out, j = [], n
    while j:
        out.append((back[j], j))
        j = back[j]
    return out[::-1]


def part(problem: LayoutProblem, lo: int, hi: int) -> LayoutProblem:
    """Steps ``lo`` to ``hi - 1`` of a whole problem as a relaxation of their share of it
    (module doc). A segment's problem (``lns.segment``: tensors entering with homes, or
    held to its end) is not one: its entering L1 homes would turn into DRAM inputs."""
    if problem.fixed_homes or problem.live_out:
        raise ValueError("part() needs a whole problem, not a segment of one")
    order = problem.order[lo:hi]
    step = {op: k for k, op in enumerate(problem.order)}
    inside = set(order)
    tensors = {}
    loose = set()
    for op in order:
        for name in (*problem.ops[op].inputs, *problem.ops[op].outputs):
            if name in tensors:
                continue
            info = problem.tensors[name]
            readers = [(c, i) for c, i in info.consumers if c in inside]
            if info.producer in inside:
                tensors[name] = replace(info, consumers=readers)
                continue
            first = min(step[c] for c, _ in info.consumers)
            if info.producer is not None or first < lo:
                loose.add(name)
            tensors[name] = replace(info, producer=None, consumers=readers, is_output=False)
    reserved = {k - lo: b for k, b in problem.reserved_l1.items() if lo <= k < hi}
    return replace(problem, tensors=tensors, order=order, ops={op: problem.ops[op]
                                                               for op in order},
                   fixed_homes={}, live_out=frozenset(), reserved_l1=reserved,
                   loose=frozenset(loose))


def shape_key(sub: LayoutProblem) -> Hashable:
    """Equal for two parts that are the same problem up to names (so the same optimum)."""
    index = _numbering(sub)
    pos = {op: k for k, op in enumerate(sub.order)}
    ops = []
    for op in sub.order:
        info = sub.ops[op]
        measured = tuple(sorted((c, us) for (o, c), us in sub.measured_ops.items() if o == op))
        ops.append((info.sig, measured, tuple(index[t] for t in (*info.inputs, *info.outputs))))
    tensors = []
    for name, _ in sorted(index.items(), key=lambda item: item[1]):
        t = sub.tensors[name]
        copies = tuple(sorted((s, d, us) for (n, s, d), us in sub.measured_copies.items()
                              if n == name))
        tensors.append((pos.get(t.producer), tuple(sorted((pos[c], i) for c, i in t.consumers)),
                        t.is_output, name in sub.loose, t.geom, t.stored_bytes, copies))
    return tuple(ops), tuple(tensors), tuple(sorted(sub.reserved_l1.items()))


@dataclass
class PartAnswer:
    """A part's LP bound (us) and its rounded decisions by position, so that a twin part
    can take them: per op the candidate's id and the configurations read, per spilled
    tensor (by its number in ``_numbering``) the step after which it is spilled."""

    bound_us: float
    configs: list[str]
    reads: list[list[MemConfig]]
    spills: dict[int, int]


@dataclass
class Bound:
    """What ``lower_bound`` found: the bound, how many parts (and distinct ones) it cut,
    and how many it solved."""

    bound_us: float
    parts: int
    distinct: int
    solved: int
    """Parts whose LP was solved (of the cut giving the bound); the others count their
    per-op floor."""
    rounded: Assignment | None
    """The parts' rounded LP solutions put together, the ``fallback``'s decisions in the
    parts not solved (None when no part was solved, or some part was not and there is no
    fallback)."""
    spans: list[tuple[int, int]]
    """The parts of the cut giving the bound, as steps ``lo`` to ``hi - 1``."""
    values: list[float]
    """What each of those parts adds to the bound: its LP bound, or its per-op floor."""


def _solve_part(sub: LayoutProblem, deadline: float, clock: _Clock | None = None) -> \
        PartAnswer | None:
    """The part's LP, solved by ``deadline`` (``deadline.now()``), and its rounding; None
    when the LP is not solved in time. The LP is started only when it is expected to end
    in time (``clock``'s rate once one was timed, else ``lp_estimate_s``): converting the
    model for it cannot be interrupted."""
    lm = cpsat_model.build(sub)
    charge_model(len(lm.model.proto.variables))
    clock = clock or _Clock()
    if deadline - now() < clock.lp_s(lm):
        return None
    started = now()
    relaxed = relax(lm.model, deadline - now())
    if relaxed is None:
        return None
    clock.relaxed(lm, now() - started)
    a = cpsat_model.decode_values(sub, lm, lambda v: relaxed.values[v.index])
    numbered = _numbering(sub)
    return PartAnswer(relaxed.objective / UNITS_PER_US,
                      [a.configs[op].id for op in sub.order],
                      [list(a.reads[op]) for op in sub.order],
                      {numbered[t]: k for t, k in a.spills.items()})


def _numbering(sub: LayoutProblem) -> dict[str, int]:
    """Tensors numbered in the order ``shape_key`` meets them."""
    index: dict[str, int] = {}
    for op in sub.order:
        for t in (*sub.ops[op].inputs, *sub.ops[op].outputs):
            index.setdefault(t, len(index))
    return index


def lower_bound(problem: LayoutProblem, deadline: float,
                sizes: Sequence[tuple[int, int]] = PART_SIZES,
                fallback: Assignment | None = None, starts_until: float | None = None) -> Bound:
    """The parts' LP bounds summed (module doc), cut with each of ``sizes`` in turn while
    time lasts (larger parts, fewer cuts, a tighter bound); the highest sum is the bound.
    Distinct parts are solved largest share of the graph first, each started before
    ``starts_until`` (default: ``deadline``) when it would end by ``deadline``
    (``deadline.now()``). The rounding is the last round's whose parts were all solved,
    else the first round's with ``fallback`` standing in for the parts not solved."""
    last_start = deadline if starts_until is None else min(starts_until, deadline)
    clock = _Clock()
    best: Bound | None = None
    spans: list[tuple[int, int]] = []
    for size in sizes:
        candidate = cuts(problem, size)
        if candidate == spans:
            continue  # the graph fits the previous parts already
        spans = candidate
        cut = _Cut.of(problem, spans)
        if best is not None and not clock.fits(problem, cut.distinct_ops(), last_start,
                                               deadline):
            break  # its parts would not all be solved, and only then is its sum higher
        found = _round(problem, cut, deadline, last_start, clock, fallback if best is None
                       else None)
        if best is None:
            best = found
        else:
            rounded = found.rounded if found.rounded is not None else best.rounded
            best = found if found.bound_us > best.bound_us else best
            best = replace(best, rounded=rounded)
        if found.solved < found.parts:
            break
    assert best is not None, "sizes is empty"
    return best


@dataclass
class _Cut:
    """One cut of the schedule: its parts, their keys, and the parts of each key."""

    spans: list[tuple[int, int]]
    subs: list[LayoutProblem]
    keys: list[Hashable]
    groups: dict[Hashable, list[int]]

    @staticmethod
    def of(problem: LayoutProblem, spans: list[tuple[int, int]]) -> _Cut:
        subs = [part(problem, lo, hi) for lo, hi in spans]
        keys = [shape_key(sub) for sub in subs]
        groups: dict[Hashable, list[int]] = {}
        for p, key in enumerate(keys):
            groups.setdefault(key, []).append(p)
        return _Cut(spans, subs, keys, groups)

    def distinct_ops(self) -> list[str]:
        """The ops of the parts that are not twins of an earlier one."""
        return [op for members in self.groups.values() for op in self.subs[members[0]].order]


LP_MARGIN = 1.25
"""A part's LP is expected to take this many times the slowest rate per variable seen in
the parts before it. Measured on whole ResNet-50 and BERT models and their parts (31,000 to
192,000 variables, 2 cores), conversion and LP took 1.4-1.7e-5 s per variable, near linear;
``lp_estimate_s`` (2.5e-5) stands until one is timed. With it alone the 89-op part of
ResNet-50 at batch 1 on Blackhole (133,000 variables) was built and then left unsolved,
its LP expected to take 3.3 s of the 3.3 s left where it takes 2.0."""


@dataclass
class _Clock:
    """How long parts take to build and solve: ``build_estimate_s`` until one has been
    timed, then the slowest rate per estimated second seen (scaled estimates); and their
    LPs: ``lp_estimate_s`` until one has been timed, then ``LP_MARGIN`` times the slowest
    rate per variable seen."""

    scale: float | None = None
    lp_rate: float | None = None

    def lp_s(self, lm: cpsat_model.LayoutModel) -> float:
        if self.lp_rate is None:
            return lp_estimate_s(lm)
        return LP_MARGIN * self.lp_rate * len(lm.model.proto.variables)

    def relaxed(self, lm: cpsat_model.LayoutModel, seconds: float) -> None:
        rate = seconds / max(len(lm.model.proto.variables), 1)
        self.lp_rate = rate if self.lp_rate is None else max(self.lp_rate, rate)

    def fits(self, problem: LayoutProblem, ops: list[str], last_start: float,
             deadline: float) -> bool:
        started = now()
        needed = build_estimate_s(problem, ops) * (self.scale or 1.0)
        return started < last_start and deadline - started >= needed

    def took(self, problem: LayoutProblem, ops: list[str], started: float) -> None:
        rate = (now() - started) / max(build_estimate_s(problem, ops), 1e-9)
        self.scale = rate if self.scale is None else max(self.scale, rate)


def _round(problem: LayoutProblem, cut: _Cut, deadline: float, last_start: float,
           clock: _Clock, fallback: Assignment | None) -> Bound:
    """One cut of the schedule: its parts' bounds summed, the floor for those not solved."""
    spans, subs, keys, groups = cut.spans, cut.subs, cut.keys, cut.groups
    answers: dict[Hashable, PartAnswer | None] = {}
    by_weight = sorted(groups, key=lambda key: -sum(spans[p][1] - spans[p][0]
                                                    for p in groups[key]))
    for key in by_weight:
        sub = subs[groups[key][0]]
        if now() >= last_start:
            break
        if not clock.fits(problem, sub.order, last_start, deadline):
            continue  # the model would not be built in time; a smaller part may be
        started = now()
        answers[key] = _solve_part(sub, deadline, clock)
        clock.took(problem, sub.order, started)
    values = []
    for p, (lo, hi) in enumerate(spans):
        answer = answers.get(keys[p])
        values.append(latency_floor_us(problem, lo, hi) if answer is None else answer.bound_us)
    solved = sum(answers.get(key) is not None for key in keys)
    complete = solved == len(spans) or fallback is not None
    rounded = _assemble(problem, spans, subs, [answers.get(k) for k in keys], fallback) \
        if solved and complete else None
    return Bound(sum(values), len(spans), len(groups), solved, rounded, spans, values)


def rebound(problem: LayoutProblem, found: Bound, changed: set[int], deadline: float,
            starts_until: float | None = None) -> float:
    """``found``'s bound for ``problem``'s schedule, which differs from the one it was cut
    on only by reorders within the parts numbered ``changed`` (``order_moves.py``): the
    other parts are the same problems as before, and each changed one is relaxed again on
    its new order, or counts its per-op floor when its LP is not started before
    ``starts_until`` (default: ``deadline``) or not solved by ``deadline``
    (``deadline.now()``). The parts are still a partition of the ops, so the sum is a
    lower bound for the new schedule (module doc)."""
    values = list(found.values)
    clock = _Clock()
    for p in sorted(changed, key=lambda p: found.spans[p][0] - found.spans[p][1]):
        lo, hi = found.spans[p]
        sub = part(problem, lo, hi)
        answer = None
        if clock.fits(problem, sub.order, deadline if starts_until is None else starts_until,
                      deadline):
            started = now()
            answer = _solve_part(sub, deadline, clock)
            clock.took(problem, sub.order, started)
        values[p] = latency_floor_us(problem, lo, hi) if answer is None else answer.bound_us
    return sum(values)


def _assemble(problem: LayoutProblem, spans: list[tuple[int, int]],
              subs: list[LayoutProblem], answers: list[PartAnswer | None],
              fallback: Assignment | None) -> Assignment:
    """The whole assignment the parts' rounded solutions point at, ``fallback``'s in the
    parts without one (the spills of the tensors they make included)."""
    configs, reads, spills = {}, {}, {}
    for (lo, _hi), sub, answer in zip(spans, subs, answers, strict=True):
        if answer is None:
            assert fallback is not None
            made = {t for op in sub.order for t in problem.ops[op].outputs}
            configs.update({op: fallback.configs[op] for op in sub.order})
            reads.update({op: fallback.reads[op] for op in sub.order})
            spills.update({t: k for t, k in fallback.spills.items() if t in made})
            continue
        names = {i: t for t, i in _numbering(sub).items()}
        for k, op in enumerate(sub.order):
            # by id: twins list the same candidates, measured ones maybe in another order
            configs[op] = next(c for c in problem.ops[op].candidates
                               if c.id == answer.configs[k])
            reads[op] = answer.reads[k]
        for i, k in answer.spills.items():
            spills[names[i]] = k + lo
    return Assignment(list(problem.order), configs, reads, spills)
