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
* op latency ``max(compute, write + reads) + dispatch`` through one lower-bounded
  variable per op (exact at the optimum); objective: ops + copies + output spills, in
  integer nanoseconds.

The best baseline is the hint; when its plan (which may spill, outside this model) is
better than what the model found, that plan is returned instead, so the answer is never
worse than any baseline. ``solve_segment`` solves one segment of the LNS in ``lns.py``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

from ortools.sat.python import cp_model

from solver import progress
from solver.layout.memory import DRAM, MemConfig
from solver.layout.plan import Assignment
from solver.layout.problem import LayoutProblem

UNITS_PER_US = 1000
"""Objective resolution: costs are rounded to the nanosecond."""
MAX_MODEL_OPS = 60
"""Largest graph solved as one model. Up to here the model proves or improves within the
default 10 s; beyond it (ResNet-50, 89 ops, 134,000 variables, 1.3 s to build) it found
nothing in 10 s where the segment search (``lns.py``) gains 0.6-7.3% on ResNet-50 and
MobileNetV2 (BENCHMARKS.md, imported models)."""


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
    for j, c in enumerate(cands):
        if c.measured_us is not None:
            m.add(lat >= ns(c.measured_us)).only_enforce_if(x[op, j])
            continue
        m.add(lat >= ns(c.compute_us + c.dispatch_us)).only_enforce_if(x[op, j])
        reads = sum(ns(us) * r[op, i, cfg] for i, acc in enumerate(c.accepts)
                    for cfg, us in acc.items())
        m.add(lat >= ns(c.write_us + c.dispatch_us) + reads).only_enforce_if(x[op, j])
    return lat


def _least(c) -> float:
    """The candidate's latency with its cheapest reads: a floor the LP relaxation can use."""
    if c.measured_us is not None:
        return c.measured_us
    return max(c.compute_us, c.write_us + sum(min(a.values()) for a in c.accepts)) \
        + c.dispatch_us


def _worst(c) -> float:
    if c.measured_us is not None:
        return c.measured_us
    return max(c.compute_us, c.write_us + sum(max(a.values()) for a in c.accepts)) \
        + c.dispatch_us + 1


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
    direct_home: list[tuple[int, cp_model.IntVar]] = []
    for op, i in readers:
        k = step[op]
        for cfg, var in by_operand[op, i]:
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
            nd = m.new_bool_var(f"copy[{t},{op},{i},{cfg.key}]")
            m.add(nd >= var - direct)  # exactly var and not direct: it decides the first reader
            m.add(nd <= var)
            m.add(nd <= 1 - direct)
            need[cfg].append((k, nd))
            if cfg.is_l1:
                dh = m.new_bool_var(f"home_hit[{t},{op},{i},{cfg.key}]")
                m.add(dh >= var + direct - 1)
                direct_home.append((k, dh))
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
            from_home_at.append((k, at_home))
        for h, is_home in homes.items():
            if h != cfg:
                w = m.new_bool_var(f"w[{t},{h.key},{cfg.key}]")
                m.add(w >= from_home + is_home - 1)
                cost.append(ns(problem.copy_us(t, h, cfg)) * w)
        if spills:
            cost.append(ns(problem.copy_us(t, DRAM, cfg)) * from_dram)
        if cfg.is_l1:
            suffix = _running_or(m, f"suf[{t},{cfg.key}]", reads, steps, reverse=True)
            size = problem.bytes_per_core(t, cfg)
            for k in range(min(steps), max(steps) + 1):
                live = m.new_bool_var(f"cl[{t},{cfg.key},{k}]")
                m.add(live >= _at(prefix, steps, k) + _at(suffix, steps, k, after=True) - 1)
                usage[k].append(size * live)
    if not l1_homes or start is None:
        return cost
    for h, is_home in l1_homes.items():
        if info.is_output:  # written to DRAM once, by a chosen spill or after its last use
            cost.append(ns(problem.spill_us(t, h)) * is_home)
        elif spills:
            paid = m.new_bool_var(f"spill_cost[{t},{h.key}]")
            m.add(paid >= sum(spills.values()) + is_home - 1)
            cost.append(ns(problem.spill_us(t, h)) * paid)
    live = {k: m.new_bool_var(f"live[{t},{k}]") for k in range(start + 1, last + 1)}
    for k in range(start + 1, last):
        m.add(live[k] >= live[k + 1])
    for k, v in direct_home + from_home_at:
        if k in live:
            m.add(live[k] >= v)
    for s, v in spills.items():
        if s in live:
            m.add(live[s] >= v)  # resident until its spill
    if (info.is_output or t in problem.live_out) and last in live:
        m.add(live[last] >= sum(l1_homes.values()) - sum(spills.values()))
    for h, is_home in l1_homes.items():
        size = problem.bytes_per_core(t, h)
        usage[start].append(size * is_home)
        for k, alive in live.items():
            both = m.new_bool_var(f"hl[{t},{h.key},{k}]")
            m.add(both >= is_home + alive - 1)
            usage[k].append(size * both)
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
    configs = {op: next(c for j, c in enumerate(problem.ops[op].candidates)
                        if solver.boolean_value(lm.x[op, j])) for op in problem.order}
    reads = {op: [next(cfg for (q, i, cfg), v in lm.r.items()
                       if q == op and i == k and solver.boolean_value(v))
                  for k in range(len(problem.ops[op].inputs))] for op in problem.order}
    spills = {t: k for (t, k), v in lm.spill_at.items() if solver.boolean_value(v)}
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
    """The model's best assignment before ``deadline`` (``time.perf_counter()``), hinted
    with ``start``; nothing when the graph is beyond ``MAX_MODEL_OPS``."""
    if len(problem.order) > MAX_MODEL_OPS:
        return ModelAnswer(None, False, None, None)
    return _solve(problem, start, deadline - time.perf_counter(), seed, workers, False)


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


def complete_hint(lm: LayoutModel, seconds: float, workers: int) -> None:
    """Extend the hint (configurations, reads, spills) to every variable of the model.

    CP-SAT's own completion of a partial hint gives up on models of 10^5 variables, and
    the search then starts from nothing; with the hinted decisions fixed, a copy of the
    model solves in presolve, and its solution is a full hint."""
    probe = lm.model.clone()
    hinted = lm.model.proto.solution_hint
    for index, value in zip(hinted.vars, hinted.values, strict=True):
        probe.add(probe.get_int_var_from_proto_index(index) == value)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.1, seconds)
    solver.parameters.num_workers = workers
    if solver.solve(probe) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return
    values = list(solver.response_proto.solution)
    lm.model.clear_hints()
    hinted = lm.model.proto.solution_hint
    hinted.vars.extend(range(len(values)))
    hinted.values.extend(values)


class _Progress(cp_model.CpSolverSolutionCallback):
    """Each improving solution's objective and the model's bound, for a whole-problem
    model (a segment's objective and bound are the segment's: the LNS reports its own)."""

    def on_solution_callback(self) -> None:
        progress.report(self.objective_value / UNITS_PER_US,
                        self.best_objective_bound / UNITS_PER_US)


def _solve(problem: LayoutProblem, start: Assignment, seconds: float, seed: int,
           workers: int, segment: bool) -> ModelAnswer:
    """Build, hint and solve. The hint is completed for a segment (always) or a large model;
    a segment's solve reports no progress."""
    ends = time.perf_counter() + seconds
    lm = build(problem)
    hint(problem, lm, start)
    if segment or len(lm.model.proto.variables) > COMPLETE_HINT_VARS:
        complete_hint(lm, (ends - time.perf_counter()) / 2, workers)
    seconds = ends - time.perf_counter()
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.1, seconds)
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = workers
    watch = _Progress() if progress.active() and not segment else None
    status = solver.solve(lm.model, watch)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ModelAnswer(None, False, None, None)
    return ModelAnswer(decode(problem, lm, solver), status == cp_model.OPTIMAL,
                       solver.objective_value / UNITS_PER_US,
                       solver.best_objective_bound / UNITS_PER_US)


def latency_floor_us(problem: LayoutProblem) -> float:
    """A valid lower bound on any plan's total: every op at its cheapest candidate with its
    cheapest reads, and no copies or spills."""
    return sum(min(_least(c) for c in problem.ops[op].candidates) for op in problem.order)

