"""The independent checker of a layout plan. It never calls a solver.

It reads only the plan and the analysed problem (op rules and cost model), re-derives
every fact a plan claims and reports *every* violation: the schedule is a topological
order; every op's configuration is legal and accepts the memory configuration each
operand is read from; every such read is possible at that step (home copy resident,
DRAM copy written, or a listed reshard/reload); placements, shard shapes and bytes per
core match the producers; the L1 bytes per core of every resident tensor and copy plus
the running op's scratch fit the usable L1 at every step; every latency, the timeline
and the total recompute.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from models.layout import Copy, Evaluation, LayoutPlan, Violation
from solver.layout.memory import ALIGNMENT, DRAM, MemConfig
from solver.layout.ops import Candidate
from solver.layout.problem import LayoutProblem


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


@dataclass
class _Check:
    problem: LayoutProblem
    plan: LayoutPlan
    found: list[Violation] = field(default_factory=list)
    step: dict[str, int] = field(default_factory=dict)
    configs: dict[str, Candidate] = field(default_factory=dict)
    total: float = 0.0

    def add(self, kind: str, where: str, msg: str) -> None:
        self.found.append(Violation(kind=kind, where=where, msg=msg))

    def latency(self, kind: str, where: str, reported: float, actual: float) -> None:
        self.total += actual
        if not close(reported, actual):
            self.add(kind, where, f"reported latency {reported!r} us but it recomputes to "
                     f"{actual!r} us")

    # ------------------------------------------------------------ helpers on the plan

    def home(self, tensor: str) -> MemConfig:
        producer = self.problem.tensors[tensor].producer
        if producer in self.configs:
            return self.configs[producer].output
        placed = self.plan.tensors.get(tensor)
        if producer is None or placed is None:
            return DRAM
        grid = tuple(placed.grid) if placed.grid and placed.layout != "interleaved" else None
        return MemConfig(placed.buffer, placed.layout, grid)  # type: ignore[arg-type]

    def spill_step(self, tensor: str) -> int | None:
        steps = [s.step for s in self.plan.spills if s.tensor == tensor]
        return min(steps) if steps else None

    def home_resident(self, tensor: str, k: int) -> bool:
        spill = self.spill_step(tensor)
        return not self.home(tensor).is_l1 or spill is None or k <= spill

    def in_dram(self, tensor: str, k: int) -> bool:
        spill = self.spill_step(tensor)
        return not self.home(tensor).is_l1 or (spill is not None and spill < k)


def evaluate(problem: LayoutProblem, plan: LayoutPlan) -> Evaluation:
    """Check ``plan`` against ``problem``; valid only when no violation is found."""
    c = _Check(problem, plan)
    _check_schedule(c)
    _check_ops(c)
    _check_tensors(c)
    _check_spills(c)
    copies = _check_copies(c)
    _check_reads(c, copies)
    _check_capacity(c, copies)
    _check_dram(c, copies)
    if not close(plan.total_latency_us, c.total):
        c.add("total.mismatch", "total_latency_us", f"reported {plan.total_latency_us!r} us "
              f"but ops, copies and spills add up to {c.total!r} us")
    return Evaluation(valid=not c.found, total_latency_us=c.total, violations=c.found)


def _check_schedule(c: _Check) -> None:
    ops = c.problem.ops
    for k, op in enumerate(c.plan.schedule):
        if op not in ops:
            c.add("schedule.unknown", f"schedule[{k}]", f"'{op}' is not an op of the graph")
        elif op in c.step:
            c.add("schedule.duplicate", f"schedule[{k}]", f"'{op}' is scheduled twice")
        else:
            c.step[op] = k
    for op in ops:
        if op not in c.step:
            c.add("schedule.missing", "schedule", f"op '{op}' is never scheduled")
    for op, k in c.step.items():
        for t in ops[op].inputs:
            p = c.problem.tensors[t].producer
            if p in c.step and c.step[p] >= k:
                c.add("schedule.order", f"schedule[{k}]", f"'{op}' runs at step {k} but its "
                      f"operand '{t}' is produced by '{p}' at step {c.step[p]}")


def _placed(c: _Check, kind: str, plan_items: dict, graph_items: dict):
    """(name, graph info, plan entry) for every graph item the plan places; faults for the rest."""
    for name in sorted(plan_items.keys() - graph_items.keys()):
        c.add(f"{kind}.unknown", f"{kind}s.{name}", f"'{name}' is not a {kind} of the graph")
    for name, info in graph_items.items():
        if name not in plan_items:
            c.add(f"{kind}.missing", f"{kind}s.{name}", f"{kind} '{name}' is not in the plan")
        else:
            yield name, info, plan_items[name]


def _check_ops(c: _Check) -> None:
    for name, info, placed in _placed(c, "op", c.plan.ops, c.problem.ops):
        cand = c.problem.candidate(name, placed.config)
        if isinstance(cand, str):
            c.add("op.config_illegal", f"ops.{name}", f"config '{placed.config}': {cand}")
            continue
        c.configs[name] = cand
        if len(placed.inputs) != len(info.inputs):
            c.add("op.inputs", f"ops.{name}", f"lists {len(placed.inputs)} operand "
                  f"configurations for {len(info.inputs)} operands")
            continue
        reads = [MemConfig.parse(m) for m in placed.inputs]
        bad = False
        for i, m in enumerate(reads):
            reason = c.problem.input_reason(name, cand, i, m)
            if reason:
                bad = True
                c.add("op.input_not_accepted", f"ops.{name}.inputs[{i}]",
                      f"config '{cand.id}' cannot read operand '{info.inputs[i]}' from "
                      f"{m.key}: {reason}")
        if not bad:
            c.latency("op.latency", f"ops.{name}", placed.latency_us, cand.latency_us(reads))
        if placed.cb_bytes_per_core != cand.cb_bytes_per_core:
            c.add("op.cb", f"ops.{name}", f"reported {placed.cb_bytes_per_core} scratch bytes "
                  f"per core; config '{cand.id}' needs {cand.cb_bytes_per_core}")


def _check_tensors(c: _Check) -> None:
    device = c.problem.device
    for name, info, placed in _placed(c, "tensor", c.plan.tensors, c.problem.tensors):
        home = c.home(name)
        if info.producer is None and (placed.buffer, placed.layout) != ("dram", "interleaved"):
            c.add("tensor.fixed_home", f"tensors.{name}", f"graph {info.kind} '{name}' lives "
                  "in DRAM interleaved, where the host writes it")
            continue
        grid = list(home.grid) if home.grid else (list(device.grid_rc) if home.is_l1 else None)
        if (placed.buffer, placed.layout, placed.grid) != (home.buffer, home.layout, grid):
            c.add("tensor.placement", f"tensors.{name}", f"placed {placed.buffer}/"
                  f"{placed.layout}/{placed.grid} but its producer writes {home.key}")
        expected = info.geom.shard_shape(home)
        if placed.shard_shape is not None or expected is not None:
            _check_shard(c, name, placed.shard_shape, home, expected)
        want = info.geom.bytes_per_core(home, device.cores)
        if placed.bytes_per_core != want:
            c.add("tensor.bytes_per_core", f"tensors.{name}", f"reported {placed.bytes_per_core}"
                  f" bytes per core; {home.key} holds {want}")


def _check_shard(c: _Check, name: str, shard: list[int] | None, home: MemConfig,
                 expected: tuple[int, int] | None) -> None:
    geom = c.problem.tensors[name].geom
    if shard is None or expected is None or len(shard) != 2 or home.grid is None:
        c.add("tensor.shard_shape", f"tensors.{name}", f"shard shape {shard} does not fit "
              f"{home.key} (expected {list(expected) if expected else None})")
        return
    rows, cols = home.grid
    along_h, along_w = {"height_sharded": (rows * cols, 1), "width_sharded": (1, rows * cols),
                        "block_sharded": (rows, cols)}[home.layout]
    covered = shard[0] * along_h >= geom.ht * 32 and shard[1] * along_w >= geom.wt * 32
    if not covered or tuple(shard) != expected:
        c.add("tensor.shard_shape", f"tensors.{name}", f"shard {shard} on {home.key} "
              f"{'does not cover' if not covered else 'differs from the tile-rounded shard of'}"
              f" the {geom.ht * 32}x{geom.wt * 32} tensor (expected {list(expected)})")


def _check_spills(c: _Check) -> None:
    seen: set[str] = set()
    n = len(c.plan.schedule)
    for j, s in enumerate(c.plan.spills):
        where = f"spills[{j}]"
        info = c.problem.tensors.get(s.tensor)
        if info is None:
            c.add("spill.unknown", where, f"'{s.tensor}' is not a tensor of the graph")
            continue
        if s.tensor in seen:
            c.add("spill.duplicate", where, f"'{s.tensor}' is spilled twice")
        seen.add(s.tensor)
        home = c.home(s.tensor)
        if not home.is_l1:
            c.add("spill.not_l1", where, f"'{s.tensor}' lives in DRAM; there is nothing to spill")
            continue
        produced = c.step.get(info.producer, 0)  # type: ignore[arg-type]
        if not produced <= s.step < n:
            c.add("spill.step", where, f"spill after step {s.step} but '{s.tensor}' is produced "
                  f"at step {produced} of {n}")
        c.latency("spill.latency", where, s.latency_us, c.problem.spill_us(s.tensor, home))
    for name, info in c.problem.tensors.items():
        if info.is_output and c.home(name).is_l1 and name not in seen:
            c.add("output.not_in_dram", f"tensors.{name}", f"graph output '{name}' stays in "
                  "L1; it must be written to DRAM (spilled)")


def _check_copies(c: _Check) -> list[tuple[Copy, MemConfig, MemConfig]]:
    """Valid-looking copies as (entry, from, to); every fault of every copy reported."""
    kept = []
    for kind, entries in (("reshards", c.plan.reshards), ("reloads", c.plan.reloads)):
        for j, cp in enumerate(entries):
            where = f"{kind}[{j}]"
            if cp.tensor not in c.problem.tensors:
                c.add("copy.unknown", where, f"'{cp.tensor}' is not a tensor of the graph")
                continue
            src, dst = MemConfig.parse(cp.from_), MemConfig.parse(cp.to)
            if src == dst:
                c.add("copy.noop", where, f"copies '{cp.tensor}' from {src.key} to itself")
            _check_copy_timing(c, where, cp, src)
            home = c.home(cp.tensor)
            is_reload = src == DRAM and home.is_l1
            if is_reload != (kind == "reloads"):
                c.add("copy.kind", where, f"a copy of '{cp.tensor}' from {src.key} with home "
                      f"{home.key} belongs in {'reloads' if is_reload else 'reshards'}")
            c.latency("copy.latency", where, cp.latency_us,
                      c.problem.copy_us(cp.tensor, src, dst))
            kept.append((cp, src, dst))
    return kept


def _check_copy_timing(c: _Check, where: str, cp: Copy, src: MemConfig) -> None:
    producer = c.problem.tensors[cp.tensor].producer
    first = min((c.step.get(op, -1) for op in cp.consumers), default=-1)
    readers = {op for op, _ in c.problem.tensors[cp.tensor].consumers}
    for op in cp.consumers:
        if op not in readers:
            c.add("copy.consumer", where, f"'{op}' does not read '{cp.tensor}'")
    earliest = c.step[producer] + 1 if producer in c.step else 0
    if not earliest <= cp.step <= first:
        c.add("copy.step", where, f"copy at step {cp.step} must come after the producer "
              f"(from step {earliest}) and by its first consumer (step {first})")
    ok = (src == c.home(cp.tensor) and c.home_resident(cp.tensor, cp.step)) or (
        src == DRAM and c.in_dram(cp.tensor, cp.step))
    if not ok:
        c.add("copy.source_unavailable", where, f"at step {cp.step} '{cp.tensor}' cannot be "
              f"read from {src.key} (home {c.home(cp.tensor).key}, spill after "
              f"{c.spill_step(cp.tensor)})")


def _check_reads(c: _Check, copies: list[tuple[Copy, MemConfig, MemConfig]]) -> None:
    via_copy = {(cp.tensor, op, dst) for cp, _, dst in copies for op in cp.consumers}
    for name, k in c.step.items():
        placed = c.plan.ops.get(name)
        if placed is None or len(placed.inputs) != len(c.problem.ops[name].inputs):
            continue
        for i, (t, text) in enumerate(zip(c.problem.ops[name].inputs, placed.inputs,
                                          strict=True)):
            m = MemConfig.parse(text)
            direct = (m == c.home(t) and c.home_resident(t, k)) or (m == DRAM and c.in_dram(t, k))
            if not direct and (t, name, m) not in via_copy:
                c.add("op.input_unavailable", f"ops.{name}.inputs[{i}]", f"at step {k} '{t}' "
                      f"is not available in {m.key}: home {c.home(t).key}, spill after "
                      f"{c.spill_step(t)}, and no reshard or reload lists '{name}'")


@dataclass(frozen=True)
class _Buffer:
    """An L1 buffer as the plan implies it: bytes per core, steps live, offset given."""

    where: str
    size: int
    first: int
    last: int
    offset: int | None


def _l1_buffers(c: _Check, copies: list[tuple[Copy, MemConfig, MemConfig]]) -> list[_Buffer]:
    """Every L1 home (producer to spill, or to its last read from home) and L1 copy
    (its step to its last reader), recomputed from the plan's reads, copies and spills."""
    n = len(c.plan.schedule)
    found = []
    last_home_use: dict[str, int] = defaultdict(lambda: -1)
    for name, k in c.step.items():
        placed = c.plan.ops.get(name)
        texts = placed.inputs if placed else []
        for t, text in zip(c.problem.ops[name].inputs[:len(texts)], texts, strict=True):
            if MemConfig.parse(text) == c.home(t) and c.home_resident(t, k):
                last_home_use[t] = max(last_home_use[t], k)
    for cp, src, dst in copies:
        if src == c.home(cp.tensor) and src.is_l1:
            last_home_use[cp.tensor] = max(last_home_use[cp.tensor], cp.step)
        if dst.is_l1:
            end = max((c.step.get(op, cp.step) for op in cp.consumers), default=cp.step)
            found.append(_Buffer(f"copy of {cp.tensor} to {cp.to}",
                                 c.problem.bytes_per_core(cp.tensor, dst), max(cp.step, 0),
                                 min(end, n - 1), cp.l1_offset))
    for name, info in c.problem.tensors.items():
        home = c.home(name)
        if home.is_l1 and info.producer in c.step:
            start = c.step[info.producer]
            spill = c.spill_step(name)
            end = spill if spill is not None else max(start, last_home_use[name])
            placed = c.plan.tensors.get(name)
            found.append(_Buffer(f"tensors.{name}", c.problem.bytes_per_core(name, home), start,
                                 min(end, n - 1), placed.l1_offset if placed else None))
    return found


def _check_capacity(c: _Check, copies: list[tuple[Copy, MemConfig, MemConfig]]) -> None:
    n = len(c.plan.schedule)
    cap = c.problem.usable_l1
    if c.plan.l1_capacity_bytes_per_core != cap:
        c.add("capacity.mismatch", "l1_capacity_bytes_per_core", f"reported "
              f"{c.plan.l1_capacity_bytes_per_core}; the device allows {cap}")
    buffers = _l1_buffers(c, copies)
    used = [0] * n
    for b in buffers:
        for k in range(b.first, b.last + 1):
            used[k] += b.size
    for k, op in enumerate(c.plan.schedule):
        cand = c.configs.get(op)
        used[k] += cand.cb_bytes_per_core if cand else 0
        if used[k] > cap:
            c.add("capacity.exceeded", f"step {k}", f"L1 holds {used[k]} bytes per core while "
                  f"'{op}' runs; usable L1 is {cap}")
    reported = {s.step: s.bytes_per_core for s in c.plan.l1_timeline}
    if len(c.plan.l1_timeline) != n or any(reported.get(k) != used[k] for k in range(n)):
        wrong = [k for k in range(n) if reported.get(k) != used[k]][:5]
        c.add("timeline.mismatch", "l1_timeline", f"the reported L1 timeline differs from the "
              f"recomputed one at steps {wrong} (first five shown)")
    _check_addresses(c, buffers)


def _check_addresses(c: _Check, buffers: list[_Buffer]) -> None:
    """Offsets as the allocator needs them (``solver/layout/address.py``): required for
    every L1 buffer of an ``address`` plan, and checked wherever given: aligned, within
    the usable L1, above the circular buffers of every op that runs while the buffer is
    live, and apart from every buffer live at a common step."""
    cap = c.problem.usable_l1
    placed = []
    for b in buffers:
        if b.offset is None:
            if c.plan.l1_allocation == "address":
                c.add("address.missing", b.where, "an L1 buffer of a plan checked by address "
                      "has no l1_offset")
            continue
        placed.append(b)
        if b.offset % ALIGNMENT:
            c.add("address.alignment", b.where, f"l1_offset {b.offset} is not a multiple of "
                  f"{ALIGNMENT} bytes")
        if b.offset < 0 or b.offset + b.size > cap:
            c.add("address.range", b.where, f"bytes {b.offset}..{b.offset + b.size} per core "
                  f"lie outside the usable L1 (0..{cap})")
        for k in range(b.first, b.last + 1):
            cand = c.configs.get(c.plan.schedule[k])
            cb = cand.cb_bytes_per_core if cand else 0
            if b.offset < cb:
                c.add("address.cb_clash", b.where, f"at offset {b.offset} it lies under the "
                      f"{cb} bytes of circular buffers of '{c.plan.schedule[k]}' (step {k}), "
                      "which grow from the bottom of L1")
                break
    placed.sort(key=lambda b: b.offset)
    for i, b in enumerate(placed):
        for o in placed[i + 1:]:
            if o.offset >= b.offset + b.size:
                break
            if o.first <= b.last and b.first <= o.last:
                c.add("address.overlap", b.where, f"bytes {b.offset}..{b.offset + b.size} "
                      f"overlap {o.where}'s {o.offset}..{o.offset + o.size} while both are "
                      f"live (steps {max(b.first, o.first)}..{min(b.last, o.last)})")


def _check_dram(c: _Check, copies: list[tuple[Copy, MemConfig, MemConfig]]) -> None:
    """The plan's own DRAM use on its own schedule: inputs and constants all run, a DRAM
    home from its producer to its last use, a spilled L1 home from after its spill, a copy
    to DRAM from its step to its last reader; at most the device's ``dram_size_bytes``
    (the admission check bounds this for plans on the graph's order; a plan on another
    order, or holding a tensor in DRAM twice, is checked here)."""
    capacity = c.problem.device.dram_size_bytes
    n = len(c.plan.schedule)
    if capacity is None or not n:
        return
    change = [0] * (n + 1)

    def hold(first: int, last: int, size: int) -> None:
        first, last = max(first, 0), min(last, n - 1)
        if first <= last:
            change[first] += size
            change[last + 1] -= size

    for name, info in c.problem.tensors.items():
        size = info.stored_bytes
        if info.producer is None:
            hold(0, n - 1, size)
            continue
        if info.producer not in c.step:
            continue
        start = c.step[info.producer]
        last = n - 1 if info.is_output else max(
            (c.step[op] for op, _ in info.consumers if op in c.step), default=start)
        spill = c.spill_step(name)
        if not c.home(name).is_l1:
            hold(start, last, size)
        elif spill is not None:
            hold(spill + 1, last, size)
    for cp, _, dst in copies:
        if not dst.is_l1:
            end = max((c.step.get(op, cp.step) for op in cp.consumers), default=cp.step)
            hold(cp.step, end, c.problem.tensors[cp.tensor].stored_bytes)
    used = 0
    for k in range(n):
        used += change[k]
        if used > capacity:
            c.add("dram.exceeded", f"step {k}", f"DRAM holds {used:,} bytes while "
                  f"'{c.plan.schedule[k]}' runs; {c.problem.device.name} has {capacity:,}")
            return
