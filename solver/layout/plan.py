"""From a solver's decisions to the plan JSON: copies, spills, timeline and latencies.

Every solver decides the same things (an ``Assignment``): the schedule, one candidate
per op, the memory configuration each operand is read from, and which L1 tensors are
spilled after which step. ``build_plan`` derives the rest by one fixed set of rules,
so no solver can report a number it did not earn (the evaluator re-checks anyway):

- an operand read from its tensor's home while the home copy is resident, or from DRAM
  once the tensor is in DRAM, is read directly; any other read goes through a copy,
  one per (tensor, target configuration), made just before its first consumer from the
  home copy if resident, else from DRAM (a *reload* when the home is L1);
- an L1 home copy stays resident from its producer to its spill step, or without a
  spill to its last direct read; an L1 copy from its creation to its last consumer;
- a graph output whose home is L1 and that no solver spilled is written to DRAM after
  its last use.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from models.layout import (
    Copy,
    Evaluation,
    LayoutGraph,
    LayoutPlan,
    OpPlacement,
    PlanStats,
    Spill,
    TensorPlacement,
    TimelineStep,
)
from solver.layout.memory import DRAM, Geometry, MemConfig
from solver.layout.ops import Candidate
from solver.layout.problem import LayoutProblem

Offsets = dict[tuple[str, str | None], int]
"""L1 offset per buffer: (tensor, None) for its home, (tensor, target key) for a copy."""


@dataclass
class Assignment:
    """A solver's decisions; everything else in a plan follows from them."""

    schedule: list[str]
    configs: dict[str, Candidate]
    reads: dict[str, list[MemConfig]]
    spills: dict[str, int] = field(default_factory=dict)
    offsets: Offsets | None = field(default=None, compare=False)
    """L1 offsets a search found for this plan (``address.places``), kept for the plan."""


@dataclass
class Residency:
    """Where each tensor can be read at each step, under an assignment."""

    problem: LayoutProblem
    a: Assignment

    def __post_init__(self) -> None:
        self.step = {op: k for k, op in enumerate(self.a.schedule)}

    def home(self, tensor: str) -> MemConfig:
        """Its producer's output configuration; for a tensor made before a segment
        (``lns.segment``), the home it enters with."""
        producer = self.problem.tensors[tensor].producer
        return self.a.configs[producer].output if producer else \
            self.problem.fixed_homes.get(tensor, DRAM)

    def home_available(self, tensor: str, k: int) -> bool:
        spill = self.a.spills.get(tensor)
        return not self.home(tensor).is_l1 or spill is None or k <= spill

    def dram_available(self, tensor: str, k: int) -> bool:
        spill = self.a.spills.get(tensor)
        return not self.home(tensor).is_l1 or (spill is not None and spill < k)

    def direct(self, tensor: str, m: MemConfig, k: int) -> bool:
        return (m == self.home(tensor) and self.home_available(tensor, k)) or (
            m == DRAM and self.dram_available(tensor, k))


@dataclass
class DerivedCopy:
    tensor: str
    src: MemConfig
    dst: MemConfig
    consumers: list[str]
    step: int
    reload: bool


def derive_copies(problem: LayoutProblem, a: Assignment) -> list[DerivedCopy]:
    """The copies the reads of an assignment need, one per (tensor, target)."""
    res = Residency(problem, a)
    users: dict[tuple[str, MemConfig], list[str]] = defaultdict(list)
    for op in a.schedule:
        for t, m in zip(problem.ops[op].inputs, a.reads[op], strict=True):
            if not res.direct(t, m, res.step[op]) and op not in users[(t, m)]:
                users[(t, m)].append(op)
    copies = []
    for (t, m), consumers in users.items():
        k = res.step[consumers[0]]
        from_home = res.home_available(t, k)
        src = res.home(t) if from_home else DRAM
        copies.append(DerivedCopy(t, src, m, consumers, k, reload=not from_home))
    return copies


def with_output_spills(problem: LayoutProblem, a: Assignment) -> Assignment:
    """Spill every L1 graph output the solver left resident, after its last use."""
    res = Residency(problem, a)
    spills = dict(a.spills)
    for name, t in problem.tensors.items():
        if t.is_output and res.home(name).is_l1 and name not in spills:
            uses = [res.step[op] for op, _ in t.consumers]
            spills[name] = max([res.step[t.producer], *uses])  # type: ignore[index]
    return Assignment(a.schedule, a.configs, a.reads, spills)


def home_residency(problem: LayoutProblem, a: Assignment,
                   copies: list[DerivedCopy]) -> dict[str, tuple[int, int]]:
    """[first, last] step each L1 home copy is resident: producer to spill or last home read."""
    res = Residency(problem, a)
    last_read: dict[str, int] = {}
    for op in a.schedule:
        for t, m in zip(problem.ops[op].inputs, a.reads[op], strict=True):
            if m == res.home(t) and res.home_available(t, res.step[op]):
                last_read[t] = res.step[op]
    for c in copies:
        if not c.reload and c.src == res.home(c.tensor):
            last_read[c.tensor] = max(last_read.get(c.tensor, -1), c.step)
    spans = {}
    for op in a.schedule:
        for t in problem.ops[op].outputs:
            if res.home(t).is_l1:
                start = res.step[op]
                spans[t] = (start, max(start, a.spills.get(t, last_read.get(t, start))))
    return spans


def l1_usage(problem: LayoutProblem, decided: Assignment) -> list[int]:
    """``l1_timeline`` of the plan ``decided`` gives: its graph outputs spilled, its copies
    derived."""
    a = with_output_spills(problem, decided)
    return l1_timeline(problem, a, derive_copies(problem, a))


def l1_timeline(problem: LayoutProblem, a: Assignment,
                copies: list[DerivedCopy]) -> list[int]:
    """Bytes per core in L1 at every step: resident tensors, L1 copies and the op's scratch."""
    res = Residency(problem, a)
    delta = [0] * (len(a.schedule) + 1)
    for t, (start, end) in home_residency(problem, a, copies).items():
        delta[start] += problem.bytes_per_core(t, res.home(t))
        delta[end + 1] -= problem.bytes_per_core(t, res.home(t))
    for c in copies:
        if c.dst.is_l1:
            end = max(res.step[op] for op in c.consumers)
            delta[c.step] += problem.bytes_per_core(c.tensor, c.dst)
            delta[end + 1] -= problem.bytes_per_core(c.tensor, c.dst)
    used, running = [], 0
    for k, op in enumerate(a.schedule):
        running += delta[k]
        used.append(running + a.configs[op].cb_bytes_per_core)
    return used


def build_plan(problem: LayoutProblem, decided: Assignment, solver: str,
               wall_time_s: float, status: str = "feasible", objective: float | None = None,
               best_bound: float | None = None, gap: float | None = None,
               offsets: Offsets | None = None) -> LayoutPlan:
    """The plan JSON of an assignment, every number computed from the cost model; with
    ``offsets`` (``address.py``) each L1 buffer's offset, checked by address."""
    where = offsets or {}
    a = with_output_spills(problem, decided)
    res = Residency(problem, a)
    copies = derive_copies(problem, a)
    device = problem.device
    tensors = {}
    for name, t in problem.tensors.items():
        home = res.home(name)
        shard = t.geom.shard_shape(home)
        grid = home.grid or (device.grid_rc if home.is_l1 else None)
        tensors[name] = TensorPlacement(
            buffer=home.buffer, layout=home.layout, grid=list(grid) if grid else None,
            shard_shape=list(shard) if shard else None,
            bytes_per_core=problem.bytes_per_core(name, home), l1_offset=where.get((name, None)))
    ops = {op: OpPlacement(config=a.configs[op].id, inputs=[m.key for m in a.reads[op]],
                           latency_us=a.configs[op].latency_us(a.reads[op]),
                           cb_bytes_per_core=a.configs[op].cb_bytes_per_core,
                           program=a.configs[op].program)
           for op in a.schedule}
    copy_entries: dict[bool, list[Copy]] = {False: [], True: []}
    for c in copies:
        copy_entries[c.reload].append(Copy(
            tensor=c.tensor, from_=c.src.key, to=c.dst.key, consumers=c.consumers, step=c.step,
            latency_us=problem.copy_us(c.tensor, c.src, c.dst),
            l1_offset=where.get((c.tensor, c.dst.key))))
    spills = [Spill(tensor=t, step=k, latency_us=problem.spill_us(t, res.home(t)))
              for t, k in sorted(a.spills.items(), key=lambda kv: (kv[1], kv[0]))]
    timeline = l1_timeline(problem, a, copies)
    total = _total(problem, a, res, copies)
    return LayoutPlan(
        status=status, solver=solver, graph=problem.graph.name, device=device,
        schedule=list(a.schedule), tensors=tensors, ops=ops, reshards=copy_entries[False],
        reloads=copy_entries[True], spills=spills,
        l1_timeline=[TimelineStep(step=k, op=op, bytes_per_core=b)
                     for k, (op, b) in enumerate(zip(a.schedule, timeline, strict=True))],
        l1_capacity_bytes_per_core=problem.usable_l1,
        l1_allocation="sum" if offsets is None else "address", total_latency_us=total,
        stats=PlanStats(wall_time_s=wall_time_s, objective=objective, best_bound=best_bound,
                        gap=gap))


def total_us(problem: LayoutProblem, decided: Assignment) -> float:
    """The total ``build_plan`` reports for an assignment, without building the plan
    document (what the solvers compare candidates by)."""
    a = with_output_spills(problem, decided)
    return _total(problem, a, Residency(problem, a), derive_copies(problem, a))


def _total(problem: LayoutProblem, a: Assignment, res: Residency,
           copies: list[DerivedCopy]) -> float:
    """Ops, then spills (by step), then reshards, then reloads: the plan's own order, so
    ``total_us`` and ``build_plan`` agree to the last bit."""
    ops = sum(a.configs[op].latency_us(a.reads[op]) for op in a.schedule)
    spills = sum(problem.spill_us(t, res.home(t))
                 for t, _ in sorted(a.spills.items(), key=lambda kv: (kv[1], kv[0])))
    moved = sum(problem.copy_us(c.tensor, c.src, c.dst)
                for reload in (False, True) for c in copies if c.reload == reload)
    return ops + spills + moved


def plan_summary(graph: LayoutGraph, plan: LayoutPlan) -> dict[str, object]:
    """The headline numbers of a plan: latency, activations in L1, copies, spills."""
    activations = [t.name for t in graph.tensors if t.kind == "activation"]
    in_l1 = [t for t in activations if plan.tensors[t].buffer == "l1"]
    size = {t.name: Geometry.of(t.shape, t.dtype).total_bytes for t in graph.tensors}
    act_bytes = sum(size[t] for t in activations)
    return {"graph": graph.name, "solver": plan.solver, "status": plan.status,
            "device": plan.device.name, "total_latency_us": plan.total_latency_us,
            "ops": len(plan.ops), "activations": len(activations),
            "activations_in_l1": len(in_l1),
            "activation_bytes_in_l1": sum(size[t] for t in in_l1) / act_bytes if act_bytes else 0.0,
            "reshards": len(plan.reshards),
            "reloads": len(plan.reloads), "spills": len(plan.spills),
            "peak_l1_bytes_per_core": max((s.bytes_per_core for s in plan.l1_timeline), default=0),
            "wall_time_s": plan.stats.wall_time_s}


def with_verdict(plan: LayoutPlan, verdict: Evaluation, started: float,
                 repeatable: bool) -> LayoutPlan:
    """The plan as a solve returns it: its wall time (none when a deterministic solve
    repeats) and, when the evaluator found faults, status invalid with them."""
    stats = plan.stats.model_copy(update={
        "wall_time_s": None if repeatable else time.monotonic() - started,
        "deterministic": repeatable})
    if not verdict.valid:
        return plan.model_copy(update={"stats": stats, "status": "invalid",
                                       "violations": verdict.violations})
    return plan.model_copy(update={"stats": stats})
