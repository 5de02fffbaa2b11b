"""The CP-SAT model of the ``cpsat`` layout solver: the whole graph on a fixed schedule.

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
* an L1 home may be spilled after any step (``spill[t, s]``); from the next step on, reads
  from DRAM are direct and a read of the home configuration needs a copy made from DRAM;
* an L1 home is resident from its producer to its spill, its last direct read or the
  first reader of a copy made from it (to its last consumer for a graph output, which is
  then written to DRAM);
* at every step the L1 bytes per core of every resident home and copy plus the running
  op's scratch fit the usable L1;
* op latency ``max(compute, write + reads) + fixed`` through one lower-bounded
  variable per op (exact at the optimum); objective: ops + copies + spills, in integer
  nanoseconds.

Redundant rows (unconditional latency bounds, a read is direct or paid for, residency at
each read) make the LP relaxation tight. The search is in ``cpsat.py``. A part of the bound
of a large graph (``bound.py``) marks tensors *loose*: their reads are priced by the
reading op alone, with none of the terms above.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from solver.layout.memory import DRAM, MemConfig
from solver.layout.plan import Assignment
from solver.layout.problem import LayoutProblem

UNITS_PER_US = 1000
"""Objective resolution: costs are rounded to the nanosecond."""

MAX_UNITS = 2**60
"""The model's costs must sum far below CP-SAT's int64 domains; a graph whose worst
candidates (times a margin for copies and spills) pass this is left to the baselines."""

Expr = cp_model.LinearExprT
Reads = list[tuple[int, cp_model.IntVar]]
"""(step, variable) of each read of one copy."""


BUILD_S_PER_UNIT = 5e-5
"""Seconds to build a model and solve its LP per unit of ``model_units``, a cautious
figure for deciding whether one can be started: on 2 cores, over 38 parts and segments of
the shipped model graphs and of generated ones with large activations
(``benchmarks/layout_order_suite.py``), build and LP took 2.0-5.6e-5 s per unit (median
2.5e-5), where per candidate configuration alone they took 0.3 to 2.6 ms."""
LP_S_PER_VARIABLE = 2.5e-5
"""Seconds to convert a built model to an LP and solve it, per variable: 0.9-1.8e-5 on the
same models (median 1.3e-5). The conversion is not interruptible."""


def model_units(problem: LayoutProblem, ops: Iterable[str]) -> int:
    """A model's size before it is built: 10 per candidate configuration of ``ops``, plus
    per tensor they touch its possible homes times the configurations their reads accept
    (the copy variables' worst case; on large activations they are most of the model)."""
    inside = list(ops)
    members = set(inside)
    units = 10 * sum(len(problem.ops[op].candidates) for op in inside)
    touched = {t for op in inside for t in (*problem.ops[op].inputs, *problem.ops[op].outputs)}
    for name in touched:
        info = problem.tensors[name]
        homes = len({c.output for c in problem.ops[info.producer].candidates}) \
            if info.producer in members else 1
        wanted = {m for op, i in info.consumers if op in members
                  for c in problem.ops[op].candidates for m in c.accepts[i]}
        units += homes * len(wanted)
    return units


def build_estimate_s(problem: LayoutProblem, ops: Iterable[str]) -> float:
    """What building (and relaxing) the model of ``ops`` is expected to take, at
    ``BUILD_S_PER_UNIT``: the build cannot be interrupted, so a caller short of this
    much time should not start it."""
    return BUILD_S_PER_UNIT * model_units(problem, ops)


def lp_estimate_s(lm: LayoutModel) -> float:
    """What relaxing a built model is expected to take (``LP_S_PER_VARIABLE``)."""
    return LP_S_PER_VARIABLE * len(lm.model.proto.variables)


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


@dataclass
class _Build:
    """What every tensor's rows share: the model, the steps, the reads by operand, and the
    accumulating costs, L1 usage per step and spill variables."""

    problem: LayoutProblem
    m: cp_model.CpModel
    step: dict[str, int]
    by_operand: dict[tuple[str, int], list[tuple[MemConfig, cp_model.IntVar]]]
    cost: list[Expr]
    usage: dict[int, list[Expr]] = field(default_factory=lambda: defaultdict(list))
    spill_at: dict[tuple[str, int], cp_model.IntVar] = field(default_factory=dict)


@dataclass
class _Tensor:
    """One tensor: its possible homes, the steps it lives over, its spills, and what its
    reads leave for the copy and residency rows."""

    name: str
    homes: dict[MemConfig, Expr]
    l1_homes: dict[MemConfig, Expr]
    readers: list[tuple[str, int]]
    start: int | None
    """The producer's step; -1 for a segment's tensor resident in L1 before it."""
    steps: list[int]
    """The reader steps, sorted."""
    last: int | None
    spills: dict[int, cp_model.IntVar] = field(default_factory=dict)
    need: dict[MemConfig, Reads] = field(default_factory=lambda: defaultdict(list))
    """Per copy target, the reads that need the copy."""
    wanted: dict[MemConfig, list[cp_model.IntVar]] = field(
        default_factory=lambda: defaultdict(list))
    direct_home: list[tuple[int, MemConfig, cp_model.IntVar]] = field(default_factory=list)
    from_home_at: Reads = field(default_factory=list)
    """The copies' first readers served from the home."""

    def spilled_before(self, k: int) -> Expr:
        return sum(v for s, v in self.spills.items() if s < k)

    @property
    def after(self) -> range:
        """The steps after the producer's up to the last one the tensor is live."""
        return range(self.start + 1, self.last + 1)


@dataclass
class _Copy:
    """The copy of a tensor to ``cfg``: its readers, the running OR of them, and whether it
    is made from the home or from DRAM."""

    cfg: MemConfig
    reads: Reads
    prefix: dict[int, cp_model.IntVar]
    from_home: cp_model.IntVar
    from_dram: cp_model.IntVar


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
    cost: list[Expr] = [_op_latency(problem, m, x, r, op) for op in problem.order]
    b = _Build(problem, m, step, by_operand, cost)
    for name, t in problem.tensors.items():
        readers = [(op, i) for op, i in t.consumers]
        if (not readers and t.producer is None) or name in problem.loose:
            continue
        _tensor_terms(b, name, home[name], readers)
    _capacity(b, x)
    m.minimize(sum(b.cost))
    return LayoutModel(m, x, r, b.spill_at)


def _homes(problem: LayoutProblem, x: dict) -> dict[str, dict[MemConfig, Expr]]:
    """For every tensor, its possible homes as linear expressions over the producer's x."""
    out: dict[str, dict[MemConfig, Expr]] = {}
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
    """Each operand is read from exactly one configuration the chosen candidate accepts."""
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
    m.add(lat >= sum(ns(least_us(c)) * x[op, j] for j, c in enumerate(cands)))  # LP-tight floor
    if all(c.measured_us is None for c in cands):
        _latency_lp_rows(problem, m, x, r, op, lat)
    for j, c in enumerate(cands):
        if c.measured_us is not None:
            m.add(lat >= ns(c.measured_us)).only_enforce_if(x[op, j])
            continue
        m.add(lat >= ns(c.compute_us + c.fixed_us)).only_enforce_if(x[op, j])
        reads = sum(ns(us) * r[op, i, cfg] for i, acc in enumerate(c.accepts)
                    for cfg, us in acc.items())
        m.add(lat >= ns(c.write_us + c.fixed_us) + reads).only_enforce_if(x[op, j])
    return lat


def _latency_lp_rows(problem: LayoutProblem, m: cp_model.CpModel, x: dict, r: dict, op: str,
                     lat: cp_model.IntVar) -> None:
    """Unconditional forms of the latency bounds, tight in the LP relaxation: compute by the
    chosen candidate; memory by its write plus each operand's cheapest read from the
    configuration it is read from."""
    cands = problem.ops[op].candidates
    m.add(lat >= sum(ns(c.compute_us + c.fixed_us) * x[op, j] for j, c in enumerate(cands)))
    cheapest: dict[tuple[int, MemConfig], float] = {}
    for c in cands:
        for i, acc in enumerate(c.accepts):
            for cfg, us in acc.items():
                cheapest[i, cfg] = min(us, cheapest.get((i, cfg), us))
    m.add(lat >= sum(ns(c.write_us + c.fixed_us) * x[op, j] for j, c in enumerate(cands))
          + sum(ns(us) * r[op, i, cfg] for (i, cfg), us in cheapest.items()))


def least_us(c) -> float:
    """The candidate's latency with its cheapest reads: a floor the LP relaxation can use."""
    if c.measured_us is not None:
        return c.measured_us
    return max(c.compute_us, c.write_us + sum(min(a.values()) for a in c.accepts)) \
        + c.fixed_us


def _worst(c) -> float:
    """The candidate's latency with its dearest reads (plus 1 us): its latency's bound."""
    if c.measured_us is not None:
        return c.measured_us
    return max(c.compute_us, c.write_us + sum(max(a.values()) for a in c.accepts)) \
        + c.fixed_us + 1


def _capacity(b: _Build, x: dict) -> None:
    """At every step the resident homes and copies plus the running op's scratch fit L1."""
    problem = b.problem
    for op in problem.order:
        cands = problem.ops[op].candidates
        scratch = sum(c.cb_bytes_per_core * x[op, j] for j, c in enumerate(cands))
        room = problem.usable_l1 - problem.reserved_l1.get(b.step[op], 0)
        b.m.add(sum(b.usage[b.step[op]]) + scratch <= room)


def _tensor_terms(b: _Build, name: str, homes: dict[MemConfig, Expr],
                  readers: list[tuple[str, int]]) -> None:
    """Copy, reload and spill costs of one tensor into ``b.cost``; its L1 bytes at every
    step into ``b.usage``."""
    t = _tensor(b, name, homes, readers)
    _spill_vars(b, t)
    _split_reads(b, t)
    for cfg, reads in t.need.items():
        _copy(b, t, cfg, reads)
    if not t.l1_homes or t.start is None:
        return
    _home_spill_cost(b, t)
    live = _home_residency(b, t)
    _home_links(b, t, live)


def _tensor(b: _Build, name: str, homes: dict[MemConfig, Expr],
            readers: list[tuple[str, int]]) -> _Tensor:
    """The steps a tensor lives over: from its producer's to its last reader's (to the
    end for a segment's live-out)."""
    info = b.problem.tensors[name]
    l1_homes = {h: v for h, v in homes.items() if h.is_l1}
    # A segment's tensor made before it and resident in L1 counts from before its first step.
    start = b.step[info.producer] if info.producer else (-1 if l1_homes else None)
    steps = sorted({b.step[op] for op, _ in readers})
    last = len(b.problem.order) - 1 if name in b.problem.live_out \
        else max(steps, default=start)
    return _Tensor(name, homes, l1_homes, readers, start, steps, last)


def _spill_vars(b: _Build, t: _Tensor) -> None:
    """An L1 home may be spilled once, after any step from its producer's to the one
    before its last consumer."""
    if not t.l1_homes or t.start is None:
        return
    t.spills = {s: b.m.new_bool_var(f"spill[{t.name},{s}]") for s in range(t.start, t.last)}
    b.spill_at.update({(t.name, s): v for s, v in t.spills.items()})
    b.m.add(sum(t.spills.values()) <= sum(t.l1_homes.values()))


def _split_reads(b: _Build, t: _Tensor) -> None:
    """Sort every possible read of the tensor into direct ones and ones needing a copy
    (``t.need``), per configuration read."""
    for op, i in t.readers:
        k = b.step[op]
        for cfg, var in b.by_operand[op, i]:
            t.wanted[cfg].append(var)
            direct = _direct(b, t, op, i, cfg, k)
            if isinstance(direct, int) and direct == 0:
                t.need[cfg].append((k, var))
                continue
            t.need[cfg].append((k, _hit_or_copy(b, t, op, i, cfg, var, direct)))


def _direct(b: _Build, t: _Tensor, op: str, i: int, cfg: MemConfig, k: int) -> Expr:
    """Whether the tensor itself is in ``cfg`` at step ``k``: the home while not spilled,
    or DRAM when the home is DRAM or spilled (0: never)."""
    if cfg == DRAM:
        return t.homes.get(DRAM, 0) + t.spilled_before(k)
    if cfg not in t.homes:
        return 0
    direct = b.m.new_bool_var(f"home_read[{t.name},{op},{i},{cfg.key}]")
    b.m.add(direct <= t.homes[cfg])
    b.m.add(direct <= 1 - t.spilled_before(k))
    b.m.add(direct >= t.homes[cfg] - t.spilled_before(k))
    return direct


def _hit_or_copy(b: _Build, t: _Tensor, op: str, i: int, cfg: MemConfig,
                 var: cp_model.IntVar, direct: Expr) -> cp_model.IntVar:
    """A read of cfg is direct (``hit``) or served by a copy (returned), never both; the
    equality keeps the LP from reading cheaply without paying either way."""
    hit = b.m.new_bool_var(f"hit[{t.name},{op},{i},{cfg.key}]")
    b.m.add(hit <= var)
    b.m.add(hit <= direct)
    b.m.add(hit >= var + direct - 1)
    nd = b.m.new_bool_var(f"copy[{t.name},{op},{i},{cfg.key}]")
    b.m.add(nd == var - hit)
    if cfg.is_l1:
        t.direct_home.append((b.step[op], cfg, hit))
    return nd


def _copy(b: _Build, t: _Tensor, cfg: MemConfig, reads: Reads) -> None:
    """The copy of the tensor to ``cfg``: made at its first reader, paid once, resident in
    L1 from its first reader to its last."""
    prefix = _running_or(b.m, f"pre[{t.name},{cfg.key}]", reads, t.steps)
    c = _Copy(cfg, reads, prefix, b.m.new_bool_var(f"fh[{t.name},{cfg.key}]"),
              b.m.new_bool_var(f"fd[{t.name},{cfg.key}]"))
    _first_readers(b, t, c)
    source = _copy_cost(b, t, c)
    _copy_paid(b, t, c, source)
    if cfg.is_l1:
        _copy_residency(b, t, c)


def _first_readers(b: _Build, t: _Tensor, c: _Copy) -> None:
    """The copy is made at its first reader, from the home while it is there (``fh``),
    else from DRAM (``fd``, only once the home may be spilled)."""
    m = b.m
    for k, v in c.reads:
        before = c.prefix.get(_previous(t.steps, k))
        first = m.new_bool_var(f"first[{t.name},{c.cfg.key},{k}]")
        m.add(first <= v)
        if before is not None:
            m.add(first >= v - before)
            m.add(first <= 1 - before)
        else:
            m.add(first >= v)
        available = 1 - t.spilled_before(k)
        at_home = m.new_bool_var(f"src_home[{t.name},{c.cfg.key},{k}]")
        m.add(at_home >= first + available - 1)
        m.add(c.from_home >= at_home)
        m.add(c.from_dram >= first - available)
        # Any reader needing the copy has it made; tighter in the LP than ``first``.
        m.add(c.from_home + (c.from_dram if t.spills else 0) >= v)
        t.from_home_at.append((k, at_home))
    if not t.spills:
        m.add(c.from_dram == 0)


def _copy_cost(b: _Build, t: _Tensor, c: _Copy) -> list[cp_model.IntVar]:
    """The copy from home is paid at the home's rate: one ``w`` per rate, held by the homes
    copying at that rate, summing to the copy (disaggregated, so the LP pays for it too;
    homes of one rate share a ``w`` with the same LP); a copy from DRAM at DRAM's. Returns
    the ``w``."""
    by_rate: dict[int, list[Expr]] = defaultdict(list)
    for h, is_home in t.homes.items():
        if h != c.cfg:
            by_rate[ns(b.problem.copy_us(t.name, h, c.cfg))].append(is_home)
    source = []
    for rate, homes in by_rate.items():
        w = b.m.new_bool_var(f"w[{t.name},{c.cfg.key},{rate}]")
        b.m.add(w <= sum(homes))
        source.append(w)
        b.cost.append(rate * w)
    b.m.add(sum(source) >= c.from_home)
    if t.spills:
        b.cost.append(ns(b.problem.copy_us(t.name, DRAM, c.cfg)) * c.from_dram)
    return source


def _copy_paid(b: _Build, t: _Tensor, c: _Copy, source: list[cp_model.IntVar]) -> None:
    """Redundant, over the producer's x: a read of cfg is from the home (or, for DRAM, from
    the spilled tensor) or from a paid copy. Long linear rows stay in CP-SAT's LP, where
    the first-reader chain does not."""
    direct_somewhere = t.homes.get(c.cfg, 0) + (sum(t.spills.values()) if c.cfg == DRAM else 0)
    for var in t.wanted[c.cfg]:
        b.m.add(var <= direct_somewhere + sum(source) + (c.from_dram if t.spills else 0))


def _copy_residency(b: _Build, t: _Tensor, c: _Copy) -> None:
    """An L1 copy holds its bytes from its first reader to its last (running ORs both
    ways), and at every step it is read."""
    suffix = _running_or(b.m, f"suf[{t.name},{c.cfg.key}]", c.reads, t.steps, reverse=True)
    size = b.problem.bytes_per_core(t.name, c.cfg)
    held = {}
    for k in range(min(t.steps), max(t.steps) + 1):
        held[k] = b.m.new_bool_var(f"cl[{t.name},{c.cfg.key},{k}]")
        b.m.add(held[k] >= _at(c.prefix, t.steps, k) + _at(suffix, t.steps, k, after=True) - 1)
        b.usage[k].append(size * held[k])
    for k, v in c.reads:
        b.m.add(held[k] >= v)  # resident when read


def _home_spill_cost(b: _Build, t: _Tensor) -> None:
    """A graph output in L1 is written to DRAM once, by a chosen spill or after its last
    use; any other home pays for its spill at its own rate."""
    paid = []
    for h, is_home in t.l1_homes.items():
        if b.problem.tensors[t.name].is_output:
            b.cost.append(ns(b.problem.spill_us(t.name, h)) * is_home)
        elif t.spills:
            paid.append(b.m.new_bool_var(f"spill_cost[{t.name},{h.key}]"))
            b.m.add(paid[-1] <= is_home)
            b.cost.append(ns(b.problem.spill_us(t.name, h)) * paid[-1])
    if paid:
        b.m.add(sum(paid) >= sum(t.spills.values()))


def _home_residency(b: _Build, t: _Tensor) -> dict[tuple[MemConfig, int], cp_model.IntVar]:
    """The home's residency after its producer's step, per possible L1 home: a suffix-closed
    run of steps held only by that home, so the LP pays memory for every direct read."""
    live = {(h, k): b.m.new_bool_var(f"live[{t.name},{h.key},{k}]") for h in t.l1_homes
            for k in t.after}
    for h, is_home in t.l1_homes.items():
        b.usage[t.start].append(b.problem.bytes_per_core(t.name, h) * is_home)
        for k in t.after:
            b.m.add(live[h, k] <= is_home)
            if k + 1 in t.after:
                b.m.add(live[h, k] >= live[h, k + 1])
            b.usage[k].append(b.problem.bytes_per_core(t.name, h) * live[h, k])
    return live


def _home_links(b: _Build, t: _Tensor, live: dict[tuple[MemConfig, int], cp_model.IntVar]
                ) -> None:
    """The home is resident for its direct reads, the copies made from it, until its spill,
    and (a graph output or live-out) to the end unless spilled."""
    def alive(k: int) -> Expr:
        return sum(live[h, k] for h in t.l1_homes)

    for k, h, v in t.direct_home:
        if k in t.after:
            b.m.add(live[h, k] >= v)
    for k, v in t.from_home_at:  # a copy made from an L1 home needs it there
        if k in t.after:
            b.m.add(alive(k) + t.homes.get(DRAM, 0) >= v)
    for s, v in t.spills.items():
        if s in t.after:
            b.m.add(alive(s) >= v)  # resident until its spill
    info = b.problem.tensors[t.name]
    if (info.is_output or t.name in b.problem.live_out) and t.last in t.after:
        b.m.add(alive(t.last) >= sum(t.l1_homes.values()) - sum(t.spills.values()))


def _running_or(m: cp_model.CpModel, name: str, reads: Reads,
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
        after: bool = False) -> Expr:
    """The running OR's value at step k (the nearest reader step on the right side)."""
    keys = [s for s in running if (s >= k if after else s <= k)]
    if not keys:
        return 0
    return running[min(keys) if after else max(keys)]


def decode(problem: LayoutProblem, lm: LayoutModel, solver: cp_model.CpSolver) -> Assignment:
    return decode_values(problem, lm, lambda v: float(solver.boolean_value(v)))


def decode_values(problem: LayoutProblem, lm: LayoutModel,
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
