"""Baseline ``greedy``: today's tt-mlir optimizer (layout propagation + L1 spill management).

As DESIGN.md 2.2 describes it, after tt-mlir's LayoutPropagation and L1SpillManagement:

1. Forward pass in schedule order. Per operand the input candidates are the producer's
   beam outputs, an L1-interleaved fallback (when the producer beam has L1-sharded but
   no L1-interleaved output) and a few sharded reshard targets (only from sharded
   sources, largest grids first); the op's legal configurations are tried against the
   cross product and the best ``BEAM_WIDTH`` kept by the lexicographic score: L1 over
   DRAM, sharded over interleaved, fewer DRAM input bytes, no reshard, more cores, less
   output L1. A combination is valid when the op alone fits L1 (no global pressure).
2. Backward pass: single consumers follow their back-pointers; a fork takes the
   producer candidate most consumers used, the others get a reshard.
3. A sweep over the schedule: where L1 overflows, evict the resident tensor with the
   farthest next use to DRAM (later L1 readers get a reload); as a last resort put the
   op's own output in DRAM, and then read its inputs from DRAM.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from solver.deadline import now
from solver.layout.memory import DRAM, L1_INTERLEAVED, MemConfig, sharded_configs
from solver.layout.ops import Candidate
from solver.layout.plan import (
    Assignment,
    Residency,
    derive_copies,
    home_residency,
    l1_timeline,
    with_output_spills,
)
from solver.layout.problem import LayoutProblem

BEAM_WIDTH = 8
MAX_RESHARD_CANDIDATES = 4
MAX_INPUT_CANDIDATES = 16


@dataclass(frozen=True)
class InputOption:
    layout: MemConfig
    producer_index: int  # which producer beam entry it comes from (0 for graph inputs)
    reshard: bool


@dataclass(frozen=True)
class BeamEntry:
    cand: Candidate
    reads: tuple[MemConfig, ...]
    producer_index: tuple[int, ...]
    score: tuple


CLOCK_EVERY_OPS = 32
"""Ops walked between clock readings (a reading is charged as work in a deterministic
solve; one op takes about 0.5 ms); the first ones are always walked, so a small graph
always gets its greedy plan."""


class TimeUp(Exception):
    """The walk passed the deadline it was given (``assign(problem, ends)``)."""


def assign(problem: LayoutProblem, ends: float = math.inf) -> Assignment:
    """Today's production approach (DESIGN.md 2.2); raises ``TimeUp`` when the forward
    walk passes ``ends`` (a ``deadline.now()`` value), as the CP-SAT solver gives it."""
    beams = forward_pass(problem, ends)
    choice = backward_pass(problem, beams)
    configs = {op: beams[op][choice[op]].cand for op in problem.order}
    reads = {op: list(beams[op][choice[op]].reads) for op in problem.order}
    return fit_l1(problem, Assignment(list(problem.order), configs, reads))


# ----------------------------------------------------------------------- forward pass


def forward_pass(problem: LayoutProblem, ends: float = math.inf) -> dict[str, list[BeamEntry]]:
    beams: dict[str, list[BeamEntry]] = {}
    for i, op in enumerate(problem.order):
        if i and i % CLOCK_EVERY_OPS == 0 and now() > ends:
            raise TimeUp(f"the greedy walk passed its deadline at op '{op}'")
        options = [input_options(problem, beams, op, i) for i in range(len(problem.ops[op].inputs))]
        beams[op] = best_entries(problem, op, options) or [dram_fallback(problem, op)]
    return beams


def input_options(problem: LayoutProblem, beams: dict[str, list[BeamEntry]], op: str,
                  i: int) -> list[InputOption]:
    info = problem.ops[op]
    tensor = problem.tensors[info.inputs[i]]
    producer_beam = beams.get(tensor.producer or "", [])
    options = [InputOption(e.cand.output, k, False) for k, e in enumerate(producer_beam)]
    options = options or [InputOption(DRAM, 0, False)]
    layouts = {o.layout for o in options}
    if any(m.is_sharded for m in layouts) and L1_INTERLEAVED not in layouts:
        options += [InputOption(L1_INTERLEAVED, o.producer_index, True)
                    for o in options if o.layout.is_sharded]
    accepted = {m for c in info.candidates for m in c.accepts[i]}
    options = [o for o in options if o.layout in accepted] or [InputOption(DRAM, 0, True)]
    if any(m.is_sharded for m in layouts):
        targets = [m for m in sharded_configs(tensor.geom, problem.device.grid_rc)
                   if m in accepted and m not in layouts][:MAX_RESHARD_CANDIDATES]
        for m in targets:
            options += [InputOption(m, k, True) for k in range(max(1, len(producer_beam)))]
    unique = {(o.layout, o.reshard): o for o in reversed(options)}  # keep the best producer
    return sorted(unique.values(), key=options.index)[:MAX_INPUT_CANDIDATES]


def best_entries(problem: LayoutProblem, op: str,
                 options: list[list[InputOption]]) -> list[BeamEntry]:
    entries = []
    for cand in filter(lambda c: c.in_tt_mlir, problem.ops[op].candidates):
        usable = [[o for o in opts if o.layout in cand.accepts[i]]
                  for i, opts in enumerate(options)]
        for combo in itertools.product(*usable):
            if fits_alone(problem, op, cand, combo):
                entries.append(BeamEntry(cand, tuple(o.layout for o in combo),
                                         tuple(o.producer_index for o in combo),
                                         score(problem, op, cand, combo)))
    entries.sort(key=lambda e: e.score, reverse=True)  # stable: candidate order breaks ties
    return entries[:BEAM_WIDTH]


def fits_alone(problem: LayoutProblem, op: str, cand: Candidate,
               combo: tuple[InputOption, ...]) -> bool:
    """The op's own inputs, output and scratch fit L1 (what OpModel validation checks)."""
    info = problem.ops[op]
    inputs = {(t, o.layout) for t, o in zip(info.inputs, combo, strict=True)}
    used = sum(problem.bytes_per_core(t, m) for t, m in inputs)
    used += problem.bytes_per_core(info.output, cand.output) + cand.cb_bytes_per_core
    return used <= problem.usable_l1


def score(problem: LayoutProblem, op: str, cand: Candidate,
          combo: tuple[InputOption, ...]) -> tuple:
    info = problem.ops[op]
    dram_in = sum(problem.tensors[t].geom.total_bytes
                  for t, o in zip(info.inputs, combo, strict=True) if not o.layout.is_l1)
    return (cand.output.is_l1, cand.output.is_sharded, -dram_in,
            not any(o.reshard for o in combo), cand.cores(problem.device.cores),
            -problem.bytes_per_core(info.output, cand.output))


def dram_fallback(problem: LayoutProblem, op: str) -> BeamEntry:
    cand = next(c for c in problem.ops[op].candidates if c.output == DRAM)
    reads = tuple(DRAM for _ in problem.ops[op].inputs)
    return BeamEntry(cand, reads, tuple(0 for _ in reads), ())


# ---------------------------------------------------------------------- backward pass


def backward_pass(problem: LayoutProblem, beams: dict[str, list[BeamEntry]]) -> dict[str, int]:
    choice: dict[str, int] = {}
    for op in reversed(problem.order):
        used = []  # producer beam index each consumer's chosen entry assumed
        for out in problem.ops[op].outputs:
            seen = set()
            for consumer, i in problem.tensors[out].consumers:
                if consumer not in seen:
                    seen.add(consumer)
                    used.append(beams[consumer][choice[consumer]].producer_index[i])
        if len(used) <= 1:
            choice[op] = used[0] if used and used[0] < len(beams[op]) else 0
        else:
            counts = [used.count(k) for k in range(len(beams[op]))]
            choice[op] = max(range(len(beams[op])), key=lambda k: (counts[k], -k))
    return choice


# ------------------------------------------------------------------ spill management


def fit_l1(problem: LayoutProblem, a: Assignment) -> Assignment:
    """Sweep the schedule; at the first step over capacity evict, else demote, repeat."""
    for _ in range(4 * len(a.schedule) + 16):
        full = with_output_spills(problem, a)
        copies = derive_copies(problem, full)
        used = l1_timeline(problem, full, copies)
        over = next((k for k, b in enumerate(used) if b > problem.usable_l1), None)
        if over is None:
            return a
        relieved = relieve(problem, a, full, copies, over)
        if (relieved.spills, relieved.reads, relieved.configs) == (a.spills, a.reads, a.configs):
            return a  # nothing left to move at this step; the evaluator reports the overflow
        a = relieved
    return a


def relieve(problem, a: Assignment, full: Assignment, copies, k: int) -> Assignment:
    """One step of relief at step ``k``: evict the farthest-next-use tensor, or demote op k."""
    op = a.schedule[k]
    victim = farthest_next_use(problem, full, copies, k)
    if victim is not None:
        return Assignment(a.schedule, a.configs, a.reads, {**a.spills, victim: k - 1})
    cand = a.configs[op]
    if cand.output.is_l1:
        demoted = next((c for c in problem.ops[op].candidates if c.output == DRAM
                        and all(m in c.accepts[i] for i, m in enumerate(a.reads[op]))), None)
        if demoted is not None:
            return Assignment(a.schedule, {**a.configs, op: demoted}, a.reads, a.spills)
    return read_from_dram(problem, a, k)


def farthest_next_use(problem, full: Assignment, copies, k: int) -> str | None:
    """The resident L1 tensor not needed at step ``k`` whose next read is farthest away."""
    res = Residency(problem, full)
    needed_now = set(problem.ops[full.schedule[k]].inputs)
    best, best_next = None, -1
    for t, (start, end) in home_residency(problem, full, copies).items():
        if not start < k <= end or t in needed_now or t in full.spills and full.spills[t] < k:
            continue
        later = [res.step[c] for c, _ in problem.tensors[t].consumers if res.step[c] > k]
        later += [c.step for c in copies if c.tensor == t and c.step > k]
        nxt = min(later, default=len(full.schedule))
        if nxt > best_next:
            best, best_next = t, nxt
    return best


def read_from_dram(problem: LayoutProblem, a: Assignment, k: int) -> Assignment:
    """Last resort: op ``k`` runs fully in DRAM; its L1 inputs are spilled just before it."""
    op = a.schedule[k]
    res = Residency(problem, a)
    spills = dict(a.spills)
    for t in problem.ops[op].inputs:
        if res.home(t).is_l1 and (t not in spills or spills[t] >= k):
            spills[t] = k - 1
    dram = next(c for c in problem.ops[op].candidates if c.output == DRAM)
    reads = {**a.reads, op: [DRAM] * len(problem.ops[op].inputs)}
    return Assignment(a.schedule, {**a.configs, op: dram}, reads, spills)
