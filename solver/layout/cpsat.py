"""The ``cpsat`` layout solver: one CP-SAT model over the whole graph on a fixed schedule.

Decisions (an ``Assignment`` without solver-chosen spills; ``build_plan`` then derives
copies and the graph outputs' final spills by its fixed rules, and every cost term below
is the one ``build_plan`` charges for those decisions):

* ``x[op, c]``: exactly one candidate configuration per op; a tensor's home is its
  producer's output configuration (graph inputs and constants live in DRAM);
* ``r[op, i, m]``: the configuration operand ``i`` is read from, one of those the chosen
  candidate accepts;
* a read from anything but the home is served by a copy, one per (tensor, target), paid
  once (``copy_us(t, home, target)``) and resident in L1 (for L1 targets) from its first
  to its last reader;
* an L1 home is resident from its producer to its last direct read or the first reader
  of a copy made from it (to its last consumer for a graph output, which is then written
  to DRAM);
* at every step the L1 bytes per core of every resident home and copy plus the running
  op's scratch fit the usable L1;
* op latency ``max(compute, write + reads) + fixed`` through one lower-bounded
  variable per op (exact at the optimum); objective: ops + copies + output spills, in
  integer nanoseconds.

Redundant rows (unconditional latency bounds, a read is direct or paid for, residency at
each read) make the LP relaxation tight; ``_solve`` solves that relaxation with GLOP for a
bound, reduced-cost fixing and (whole problems) a rounded plan before CP-SAT searches.

The best baseline is the hint; when its plan (which may spill, outside this model) is
better than what the model found, that plan is returned instead, so the answer is never
worse than any baseline. ``solve_segment`` solves one segment of the LNS in ``lns.py``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from models.layout import LayoutPlan
from solver import progress
from solver.deadline import charge_model, limit_cpsat, now, run_cpsat
from solver.layout.evaluate import evaluate
from solver.layout.memory import DRAM, MemConfig
from solver.layout.plan import Assignment, build_plan
from solver.layout.problem import LayoutProblem
from solver.relaxation import Relaxation, relax

UNITS_PER_US = 1000
"""Objective resolution: costs are rounded to the nanosecond."""
MAX_MODEL_OPS = 60
"""Largest graph solved as one model. Up to here the model proves or improves within the
default 10 s; beyond it (ResNet-50, 89 ops, 134,000 variables, 1.3 s to build) it found
nothing in 10 s where the segment search (``lns.py``) gains 0.6-7.3% on ResNet-50 and
MobileNetV2 (BENCHMARKS.md, imported models)."""


MAX_UNITS = 2**60
"""The model's costs must sum far below CP-SAT's int64 domains; a graph whose worst
candidates (times a margin for copies and spills) pass this is left to the baselines."""


def representable(problem: LayoutProblem) -> bool:
    """Whether every cost of the model fits CP-SAT's integers (a giant tensor on a slow
    custom device can take 10^16 us)."""
    worst = sum(max(_worst(c) for c in problem.ops[op].candidates) for op in problem.order)
    return 4 * ns(worst) < MAX_UNITS


def ns(us: float) -> int:
    return round(us * UNITS_PER_US)


@dataclass
class LayoutModel:
    """The CP-SAT model and the handles decoding and hinting need."""

    model: cp_model.CpModel
    x: dict[tuple[str, int], cp_model.IntVar]
    r: dict[tuple[str, int, MemConfig], cp_model.IntVar]
    spill_at: dict[tuple[str, int], cp_model.IntVar]


def build(problem: LayoutProblem) -> LayoutModel:
    m = cp_model.CpModel()
    step = {op: k for k, op in enumerate(problem.order)}
    x = {(op, j): m.new_bool_var(f"x[{op},{j}]")
         for op in problem.order for j in range(len(problem.ops[op].candidates))}
    for op in problem.order:
        m.add_exactly_one(x[op, j] for j in range(len(problem.ops[op].candidates)))
    home = _homes(problem, x)
    r = _reads(problem, m, x)
    by_operand: dict[tuple[str, int], list[tuple[MemConfig, cp_model.IntVar]]] = defaultdict(list)
    for (op, i, cfg), var in r.items():
        by_operand[op, i].append((cfg, var))
    cost: list[cp_model.LinearExprT] = [_op_latency(problem, m, x, r, op) for op in problem.order]
    usage: dict[int, list[cp_model.LinearExprT]] = defaultdict(list)
    spill_at: dict[tuple[str, int], cp_model.IntVar] = {}
    for name, t in problem.tensors.items():
        readers = [(op, i) for op, i in t.consumers]
        if not readers and t.producer is None:
            continue
        cost += _tensor_terms(problem, m, name, home[name], readers, by_operand, step, usage,
                              spill_at)
    for op in problem.order:
        cands = problem.ops[op].candidates
        scratch = sum(c.cb_bytes_per_core * x[op, j] for j, c in enumerate(cands))
        room = problem.usable_l1 - problem.reserved_l1.get(step[op], 0)
        m.add(sum(usage[step[op]]) + scratch <= room)
    m.minimize(sum(cost))
    return LayoutModel(m, x, r, spill_at)


def _homes(problem: LayoutProblem, x: dict) -> dict[str, dict[MemConfig, cp_model.LinearExprT]]:
    """For every tensor, its possible homes as linear expressions over the producer's x."""
    out: dict[str, dict[MemConfig, cp_model.LinearExprT]] = {}
    for name, t in problem.tensors.items():
        if t.producer is None:
            out[name] = {problem.fixed_homes.get(name, DRAM): 1}
            continue
        by_home: dict[MemConfig, list] = defaultdict(list)
        for j, c in enumerate(problem.ops[t.producer].candidates):
            by_home[c.output].append(x[t.producer, j])
        out[name] = {h: sum(v) for h, v in by_home.items()}
    return out


def _reads(problem: LayoutProblem, m: cp_model.CpModel, x: dict) -> dict:
    r: dict[tuple[str, int, MemConfig], cp_model.IntVar] = {}
    for op in problem.order:
        cands = problem.ops[op].candidates
        for i in range(len(problem.ops[op].inputs)):
            options = sorted({cfg for c in cands for cfg in c.accepts[i]}, key=lambda c: c.key)
            for cfg in options:
                r[op, i, cfg] = m.new_bool_var(f"r[{op},{i},{cfg.key}]")
                m.add(r[op, i, cfg] <= sum(x[op, j] for j, c in enumerate(cands)
                                           if cfg in c.accepts[i]))
            m.add_exactly_one(r[op, i, cfg] for cfg in options)
    return r


def _op_latency(problem: LayoutProblem, m: cp_model.CpModel, x: dict, r: dict,
                op: str) -> cp_model.IntVar:
    """An op's latency: at least each chosen candidate's compute and memory time."""
    cands = problem.ops[op].candidates
    top = max(ns(_worst(c)) for c in cands)
    lat = m.new_int_var(0, top, f"L[{op}]")
    m.add(lat >= sum(ns(_least(c)) * x[op, j] for j, c in enumerate(cands)))  # LP-tight floor
    if all(c.measured_us is None for c in cands):
        # Unconditional forms of the two bounds below, tight in the LP relaxation: compute
        # by the chosen candidate; memory by its write plus each operand's cheapest read
        # from the configuration it is read from.
        m.add(lat >= sum(ns(c.compute_us + c.fixed_us) * x[op, j]
                         for j, c in enumerate(cands)))
        cheapest: dict[tuple[int, MemConfig], float] = {}
        for c in cands:
            for i, acc in enumerate(c.accepts):
                for cfg, us in acc.items():
                    cheapest[i, cfg] = min(us, cheapest.get((i, cfg), us))
        m.add(lat >= sum(ns(c.write_us + c.fixed_us) * x[op, j] for j, c in enumerate(cands))
              + sum(ns(us) * r[op, i, cfg] for (i, cfg), us in cheapest.items()))
    for j, c in enumerate(cands):
        if c.measured_us is not None:
            m.add(lat >= ns(c.measured_us)).only_enforce_if(x[op, j])
            continue
        m.add(lat >= ns(c.compute_us + c.fixed_us)).only_enforce_if(x[op, j])
        reads = sum(ns(us) * r[op, i, cfg] for i, acc in enumerate(c.accepts)
                    for cfg, us in acc.items())
        m.add(lat >= ns(c.write_us + c.fixed_us) + reads).only_enforce_if(x[op, j])
    return lat


def _least(c) -> float:
    """The candidate's latency with its cheapest reads: a floor the LP relaxation can use."""
    if c.measured_us is not None:
        return c.measured_us
    return max(c.compute_us, c.write_us + sum(min(a.values()) for a in c.accepts)) \
        + c.fixed_us


def _worst(c) -> float:
    if c.measured_us is not None:
        return c.measured_us
    return max(c.compute_us, c.write_us + sum(max(a.values()) for a in c.accepts)) \
        + c.fixed_us + 1


def _tensor_terms(problem: LayoutProblem, m: cp_model.CpModel, t: str,
                  homes: dict[MemConfig, cp_model.LinearExprT],
                  readers: list[tuple[str, int]], by_operand: dict, step: dict[str, int],
                  usage: dict[int, list], spill_at: dict) -> list[cp_model.LinearExprT]:
    """Copy, reload and spill costs of one tensor; its L1 bytes at every step into usage.

    An L1 home may be spilled after any step from its producer's to the one before its last
    consumer (``spill_at[t, s]``); from the next step on, reads from DRAM are direct and
    reads of the home configuration need a reload copy."""
    info = problem.tensors[t]
    l1_homes = {h: v for h, v in homes.items() if h.is_l1}
    # A segment's tensor made before it and resident in L1 counts from before its first step.
    start = step[info.producer] if info.producer else (-1 if l1_homes else None)
    steps = sorted({step[op] for op, _ in readers})
    last = len(problem.order) - 1 if t in problem.live_out else max(steps, default=start)
    spills = {}
    if l1_homes and start is not None:
        spills = {s: m.new_bool_var(f"spill[{t},{s}]") for s in range(start, last)}
        spill_at.update({(t, s): v for s, v in spills.items()})
        m.add(sum(spills.values()) <= sum(l1_homes.values()))

    def spilled_before(k: int) -> cp_model.LinearExprT:
        return sum(v for s, v in spills.items() if s < k)

    cost: list[cp_model.LinearExprT] = []
    need: dict[MemConfig, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
    wanted: dict[MemConfig, list[cp_model.IntVar]] = defaultdict(list)
    direct_home: list[tuple[int, MemConfig, cp_model.IntVar]] = []
    for op, i in readers:
        k = step[op]
        for cfg, var in by_operand[op, i]:
            wanted[cfg].append(var)
            if cfg == DRAM:
                direct: cp_model.LinearExprT = homes.get(DRAM, 0) + spilled_before(k)
            elif cfg in homes:
                direct = m.new_bool_var(f"home_read[{t},{op},{i},{cfg.key}]")
                m.add(direct <= homes[cfg])
                m.add(direct <= 1 - spilled_before(k))
                m.add(direct >= homes[cfg] - spilled_before(k))
            else:
                direct = 0
            if isinstance(direct, int) and direct == 0:
                need[cfg].append((k, var))
                continue
            # A read of cfg is direct (``hit``) or served by a copy (``nd``), never both;
            # the equality keeps the LP from reading cheaply without paying either way.
            hit = m.new_bool_var(f"hit[{t},{op},{i},{cfg.key}]")
            m.add(hit <= var)
            m.add(hit <= direct)
            m.add(hit >= var + direct - 1)
            nd = m.new_bool_var(f"copy[{t},{op},{i},{cfg.key}]")
            m.add(nd == var - hit)
            need[cfg].append((k, nd))
            if cfg.is_l1:
                direct_home.append((k, cfg, hit))
    from_home_at: list[tuple[int, cp_model.IntVar]] = []
    for cfg, reads in need.items():
        prefix = _running_or(m, f"pre[{t},{cfg.key}]", reads, steps)
        from_home = m.new_bool_var(f"fh[{t},{cfg.key}]")
        from_dram = m.new_bool_var(f"fd[{t},{cfg.key}]")
        for k, v in reads:
            before = prefix.get(_previous(steps, k))
            first = m.new_bool_var(f"first[{t},{cfg.key},{k}]")
            m.add(first <= v)
            if before is not None:
                m.add(first >= v - before)
                m.add(first <= 1 - before)
            else:
                m.add(first >= v)
            available = 1 - spilled_before(k)
            at_home = m.new_bool_var(f"src_home[{t},{cfg.key},{k}]")
            m.add(at_home >= first + available - 1)
            m.add(from_home >= at_home)
            m.add(from_dram >= first - available)
            # Any reader needing the copy has it made; tighter in the LP than ``first``.
            m.add(from_home + (from_dram if spills else 0) >= v)
            from_home_at.append((k, at_home))
        if not spills:
            m.add(from_dram == 0)
        # The copy from home is paid at the home's rate: one ``w`` per possible home, held
        # by that home, summing to the copy (disaggregated, so the LP pays for it too).
        source = []
        for h, is_home in homes.items():
            if h != cfg:
                w = m.new_bool_var(f"w[{t},{h.key},{cfg.key}]")
                m.add(w <= is_home)
                source.append(w)
                cost.append(ns(problem.copy_us(t, h, cfg)) * w)
        m.add(sum(source) >= from_home)
        # Redundant, over the producer's x: a read of cfg is from the home (or, for DRAM,
        # from the spilled tensor) or from a paid copy. Long linear rows stay in CP-SAT's
        # LP, where the chain above does not.
        direct_somewhere = homes.get(cfg, 0) + (sum(spills.values()) if cfg == DRAM else 0)
        for var in wanted[cfg]:
            m.add(var <= direct_somewhere + sum(source) + (from_dram if spills else 0))
        if spills:
            cost.append(ns(problem.copy_us(t, DRAM, cfg)) * from_dram)
        if cfg.is_l1:
            suffix = _running_or(m, f"suf[{t},{cfg.key}]", reads, steps, reverse=True)
            size = problem.bytes_per_core(t, cfg)
            held = {}
            for k in range(min(steps), max(steps) + 1):
                held[k] = m.new_bool_var(f"cl[{t},{cfg.key},{k}]")
                m.add(held[k] >= _at(prefix, steps, k) + _at(suffix, steps, k, after=True) - 1)
                usage[k].append(size * held[k])
            for k, v in reads:
                m.add(held[k] >= v)  # resident when read
    if not l1_homes or start is None:
        return cost
    paid = []
    for h, is_home in l1_homes.items():
        if info.is_output:  # written to DRAM once, by a chosen spill or after its last use
            cost.append(ns(problem.spill_us(t, h)) * is_home)
        elif spills:
            paid.append(m.new_bool_var(f"spill_cost[{t},{h.key}]"))
            m.add(paid[-1] <= is_home)
            cost.append(ns(problem.spill_us(t, h)) * paid[-1])
    if paid:
        m.add(sum(paid) >= sum(spills.values()))
    # The home's residency after its producer's step, per possible L1 home: a suffix-closed
    # run of steps held only by that home, so the LP pays memory for every direct read.
    steps_after = range(start + 1, last + 1)
    live = {(h, k): m.new_bool_var(f"live[{t},{h.key},{k}]") for h in l1_homes
            for k in steps_after}
    for h, is_home in l1_homes.items():
        usage[start].append(problem.bytes_per_core(t, h) * is_home)
        for k in steps_after:
            m.add(live[h, k] <= is_home)
            if k + 1 in steps_after:
                m.add(live[h, k] >= live[h, k + 1])
            usage[k].append(problem.bytes_per_core(t, h) * live[h, k])
    for k, h, v in direct_home:
        if k in steps_after:
            m.add(live[h, k] >= v)

    def alive(k: int) -> cp_model.LinearExprT:
        return sum(live[h, k] for h in l1_homes)
    for k, v in from_home_at:  # a copy made from an L1 home needs it there
        if k in steps_after:
            m.add(alive(k) + homes.get(DRAM, 0) >= v)
    for s, v in spills.items():
        if s in steps_after:
            m.add(alive(s) >= v)  # resident until its spill
    if (info.is_output or t in problem.live_out) and last in steps_after:
        m.add(alive(last) >= sum(l1_homes.values()) - sum(spills.values()))
    return cost


def _running_or(m: cp_model.CpModel, name: str, reads: list[tuple[int, cp_model.IntVar]],
                steps: list[int], reverse: bool = False) -> dict[int, cp_model.IntVar]:
    """Exact OR of the reads at steps up to (or, reversed, from) each reader step."""
    at: dict[int, list] = defaultdict(list)
    for k, v in reads:
        at[k].append(v)
    out: dict[int, cp_model.IntVar] = {}
    previous = None
    for k in (reversed(steps) if reverse else steps):
        terms = at.get(k, []) + ([previous] if previous is not None else [])
        if not terms:
            continue
        v = m.new_bool_var(f"{name}[{k}]")
        m.add_max_equality(v, terms)
        out[k] = previous = v
    return out


def _previous(steps: list[int], k: int) -> int | None:
    earlier = [s for s in steps if s < k]
    return max(earlier) if earlier else None


def _at(running: dict[int, cp_model.IntVar], steps: list[int], k: int,
        after: bool = False) -> cp_model.LinearExprT:
    """The running OR's value at step k (the nearest reader step on the right side)."""
    keys = [s for s in running if (s >= k if after else s <= k)]
    if not keys:
        return 0
    return running[min(keys) if after else max(keys)]


def decode(problem: LayoutProblem, lm: LayoutModel, solver: cp_model.CpSolver) -> Assignment:
    return _decode(problem, lm, lambda v: float(solver.boolean_value(v)))


def _decode(problem: LayoutProblem, lm: LayoutModel,
            value: Callable[[cp_model.IntVar], float]) -> Assignment:
    """The assignment a (possibly fractional) solution points at: each op's highest-valued
    candidate, each operand's highest-valued read that candidate accepts, the spills over
    one half. Exact on an integral solution; a rounding of an LP one."""
    configs = {op: max(enumerate(problem.ops[op].candidates),
                       key=lambda jc: value(lm.x[op, jc[0]]))[1] for op in problem.order}
    reads = {op: [max(configs[op].accepts[i], key=lambda cfg: value(lm.r[op, i, cfg]))
                  for i in range(len(problem.ops[op].inputs))] for op in problem.order}
    spills: dict[str, int] = {}
    for (t, k), v in sorted(lm.spill_at.items(), key=lambda item: -value(item[1])):
        if value(v) > 0.5 and t not in spills:
            spills[t] = k
    return Assignment(list(problem.order), configs, reads, spills)


def hint(problem: LayoutProblem, lm: LayoutModel, a: Assignment) -> None:
    """Hint the configurations, reads and spills of a known assignment."""
    for op in problem.order:
        for j, c in enumerate(problem.ops[op].candidates):
            lm.model.add_hint(lm.x[op, j], c is a.configs[op])
    for (op, i, cfg), v in lm.r.items():
        lm.model.add_hint(v, a.reads[op][i] == cfg)
    for (t, k), v in lm.spill_at.items():
        lm.model.add_hint(v, a.spills.get(t) == k)


@dataclass
class ModelAnswer:
    assignment: Assignment | None
    optimal: bool
    objective_us: float | None
    bound_us: float | None


def solve_model(problem: LayoutProblem, start: Assignment, deadline: float, seed: int,
                workers: int) -> ModelAnswer:
    """The model's best assignment before ``deadline`` (``deadline.now()``), hinted
    with ``start``; nothing when the graph is beyond ``MAX_MODEL_OPS``."""
    if len(problem.order) > MAX_MODEL_OPS:
        return ModelAnswer(None, False, None, None)
    return _solve(problem, start, deadline - now(), seed, workers, False)


def solve_segment(problem: LayoutProblem, start: Assignment, seconds: float, seed: int,
                  workers: int) -> ModelAnswer:
    """One LNS round (``lns.py``): the model of a segment of a larger problem, for at most
    ``seconds``; its objective and bound are the segment's, so none is reported as
    progress."""
    return _solve(problem, start, seconds, seed, workers, True)


COMPLETE_HINT_VARS = 50_000
"""Above this many variables CP-SAT's own completion of the partial hint was seen to give
up (ResNet-50's 134,000-variable model), so the hint is completed here; below it, our
completion slowed the proofs (bert-base-layer no longer proven within 10 s)."""


def complete_hint(lm: LayoutModel, seconds: float, workers: int) -> int | None:
    """Extend the hint (configurations, reads, spills) to every variable of the model;
    return that solution's objective (model units), None when it was not found.

    CP-SAT's own completion of a partial hint gives up on models of 10^5 variables, and
    the search then starts from nothing; with the hinted decisions fixed, a copy of the
    model solves in presolve, and its solution is a full hint."""
    probe = lm.model.clone()
    hinted = lm.model.proto.solution_hint
    for index, value in zip(hinted.vars, hinted.values, strict=True):
        probe.add(probe.get_int_var_from_proto_index(index) == value)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    limit_cpsat(solver.parameters, now() + seconds)
    if run_cpsat(solver, probe) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    values = list(solver.response_proto.solution)
    lm.model.clear_hints()
    hinted = lm.model.proto.solution_hint
    hinted.vars.extend(range(len(values)))
    hinted.values.extend(values)
    return round(solver.objective_value)


class _Progress(cp_model.CpSolverSolutionCallback):
    """Each improving solution's objective and a valid bound, for a whole-problem model (a
    segment's objective and bound are the segment's: the LNS reports its own). After
    reduced-cost fixing the search's bound holds only below the incumbent and above the
    LP bound, so it is reported clamped to both."""

    def __init__(self, floor: float | None, cap: float) -> None:
        super().__init__()
        self.floor, self.cap = floor, cap

    def on_solution_callback(self) -> None:
        bound = self.best_objective_bound / UNITS_PER_US
        if self.floor is not None:
            bound = max(bound, self.floor)
        progress.report(self.objective_value / UNITS_PER_US, min(bound, self.cap))


RELAXATION_SHARE = 0.5
"""At most this share of a search's remaining time goes to the LP relaxation."""


@dataclass
class _Incumbent:
    """The best plan so far, built once: its total and its copies price the fixings."""

    assignment: Assignment
    plan: LayoutPlan

    @property
    def total_us(self) -> float:
        return self.plan.total_latency_us


def _priced(problem: LayoutProblem, a: Assignment) -> _Incumbent:
    return _Incumbent(a, build_plan(problem, a, "cpsat", 0.0))


def _solve(problem: LayoutProblem, start: Assignment, seconds: float, seed: int,
           workers: int, segment: bool) -> ModelAnswer:
    """Build, hint and search the model of a whole problem (``_search_whole``) or of an
    LNS segment (``_search_segment``).

    Both first solve the model's LP relaxation with GLOP (``solver/relaxation.py``):
    CP-SAT keeps two-literal rows out of its own LP, and on this model they carry most of
    the relaxation. Its reduced costs fix every 0/1 variable that no solution cheaper than
    the incumbent can move, and CP-SAT searches what is left."""
    if not representable(problem):
        return ModelAnswer(None, False, None, None)
    ends = now() + seconds
    lm = build(problem)
    charge_model(len(lm.model.proto.variables))
    hint(problem, lm, start)
    if segment:
        return _search_segment(problem, lm, ends, seed, workers)
    return _search_whole(problem, lm, start, ends, seed, workers)


def _search_segment(problem: LayoutProblem, lm: LayoutModel, ends: float, seed: int,
                    workers: int) -> ModelAnswer:
    """A segment (a fraction of a second): the incumbent is the completed hint, priced by
    the model itself, so the fixings never cut it and the fixed model's optimum is the
    segment's. No progress is reported: the objective is the segment's."""
    priced = complete_hint(lm, (ends - now()) / 2, workers)
    if priced is not None:
        relaxed = relax(lm.model, (ends - now()) * RELAXATION_SHARE)
        if relaxed is not None:
            relaxed.fix_by_reduced_cost(lm.model, priced)
    solver = _solver(ends, seed, workers)
    status = run_cpsat(solver, lm.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ModelAnswer(None, False, None, None)
    return ModelAnswer(decode(problem, lm, solver), status == cp_model.OPTIMAL,
                       solver.objective_value / UNITS_PER_US,
                       solver.best_objective_bound / UNITS_PER_US)


def _search_whole(problem: LayoutProblem, lm: LayoutModel, start: Assignment, ends: float,
                  seed: int, workers: int) -> ModelAnswer:
    """A whole problem. The incumbent is the best baseline's plan (which may lie outside
    the model) or the relaxation's rounding when the evaluator accepts it and it is
    cheaper; the rounding is hinted even when invalid (CP-SAT repairs it). While the
    incumbent is still the baseline, the first search gets half the time so its answer
    can tighten the fixings for the second."""
    incumbent = _priced(problem, start)
    relaxed = relax(lm.model, (ends - now()) * RELAXATION_SHARE)
    lp_bound = None if relaxed is None else relaxed.objective / UNITS_PER_US
    rounds = 1
    if relaxed is not None:
        rounded = _priced(problem, _decode(problem, lm, lambda v: relaxed.values[v.index]))
        if rounded.total_us < incumbent.total_us and evaluate(problem, rounded.plan).valid:
            incumbent = rounded
        else:
            rounds = 2
        progress.report(incumbent.total_us, lp_bound)
        lm.model.clear_hints()
        hint(problem, lm, rounded.assignment)
        _fix(problem, lm, relaxed, incumbent)
    if len(lm.model.proto.variables) > COMPLETE_HINT_VARS:
        complete_hint(lm, (ends - now()) / 2, workers)
    for round_ in range(rounds, 0, -1):
        solver = _solver(now() + (ends - now()) / round_, seed, workers)
        watch = _Progress(lp_bound, incumbent.total_us) if progress.active() else None
        status = run_cpsat(solver, lm.model, watch)
        answer, best = _after_fixing(problem, lm, solver, status, lp_bound, incumbent)
        progress.report(answer.objective_us, answer.bound_us)
        if answer.optimal or round_ == 1:
            return answer
        if best is not incumbent:
            incumbent = best
            lm.model.clear_hints()
            hint(problem, lm, incumbent.assignment)
            _fix(problem, lm, relaxed, incumbent)
    raise AssertionError("unreachable: the last round returns")


def _solver(ends: float, seed: int, workers: int) -> cp_model.CpSolver:
    """CP-SAT with the limit, seed and workers, and no probing in presolve: it took whole
    rounds on 30,000-variable models (UNet: 3.9 s of 5) and the fixings already did its
    work; without it 19 of the 20 graphs of up to 60 ops prove optimal within 10 s."""
    solver = cp_model.CpSolver()
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = workers
    solver.parameters.cp_model_probing_level = 0
    limit_cpsat(solver.parameters, ends)
    return solver


def _fix(problem: LayoutProblem, lm: LayoutModel, relaxed: Relaxation,
         incumbent: _Incumbent) -> None:
    """Reduced-cost fixing against the incumbent's cost in model units: its evaluated total
    plus how far the model's rounding of each term can put it above."""
    plan = incumbent.plan
    terms = sum(1 + len(problem.ops[op].inputs) for op in problem.order)
    terms += len(plan.reshards) + len(plan.spills) + len(plan.reloads)
    relaxed.fix_by_reduced_cost(lm.model, incumbent.total_us * UNITS_PER_US + terms / 2 + 1)


def _after_fixing(problem: LayoutProblem, lm: LayoutModel, solver: cp_model.CpSolver,
                  status: int, lp_bound: float | None,
                  incumbent: _Incumbent) -> tuple[ModelAnswer, _Incumbent]:
    """The answer of a search after reduced-cost fixing. Every plan the fixings cut off
    costs more than the incumbent, so the optimum is at least the smaller of the
    incumbent and the fixed model's bound (and at least the LP bound); a fixed model
    proven optimal, or infeasible (nothing left beats the incumbent), proves the better of
    its answer and the incumbent optimal, to the model's rounding of each term. Also
    returns the better plan, priced."""
    best = incumbent
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = _priced(problem, decode(problem, lm, solver))
        if found.total_us < best.total_us:
            best = found
    proven = status in (cp_model.OPTIMAL, cp_model.INFEASIBLE)
    searched = incumbent.total_us if status == cp_model.INFEASIBLE \
        else solver.best_objective_bound / UNITS_PER_US
    bound = min(incumbent.total_us, searched)
    if lp_bound is not None:
        bound = max(bound, lp_bound)
    bound = min(bound, best.total_us)
    return ModelAnswer(best.assignment, proven, best.total_us,
                       best.total_us if proven else bound), best


def latency_floor_us(problem: LayoutProblem) -> float:
    """A valid lower bound on any plan's total: every op at its cheapest candidate with its
    cheapest reads, and no copies or spills."""
    return sum(min(_least(c) for c in problem.ops[op].candidates) for op in problem.order)

