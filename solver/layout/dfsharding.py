"""Baseline ``dfsharding``: tt-mlir's legacy DFShardingPolicy + ShardSolver.

Per the optimizer notes (seeds/ttnn-optimizer.md sections 3.2-3.3), limitations included:

1. Schedule in DFS order: after an op, its ready consumers run next.
2. Build L1 chains along the schedule: an op with a sharded configuration joins the
   chain; the chain continues only while the next op reads this op's output as its
   operand 0 and that output has a single use.
3. Resolve each chain with a ShardSolver: per op the sharded configurations that fit L1
   with their chain input (other operands are read from DRAM, as the IR has them);
   operand-0 edges only; a first op that cannot read interleaved input gets a reshard
   at chain entry; an edge with no compatible pair gets a reactive reshard; constraints
   propagate both ways until stable; an op left with no configuration fails the whole
   chain, which then runs in DRAM.
4. Pick the configurations that maximise the chain's total core usage.
5. Spill every chain output to DRAM right after it is produced; everything outside a
   chain runs DRAM interleaved.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from solver.layout.memory import DRAM, MemConfig
from solver.layout.ops import Candidate
from solver.layout.plan import Assignment
from solver.layout.problem import LayoutProblem


def assign(problem: LayoutProblem) -> Assignment:
    schedule = dfs_schedule(problem)
    configs = {op: dram_config(problem, op) for op in schedule}
    reads = {op: [DRAM] * len(problem.ops[op].inputs) for op in schedule}
    spills: dict[str, int] = {}
    step = {op: k for k, op in enumerate(schedule)}
    for chain in build_chains(problem, schedule):
        solved = ShardSolver(problem, chain).solve()
        if solved is None:
            continue  # a failed chain stays in DRAM
        for op, (cand, read0) in zip(chain, solved, strict=True):
            configs[op] = cand
            reads[op][0] = read0
        tail = chain[-1]
        spills[problem.ops[tail].output] = step[tail]
    return Assignment(schedule, configs, reads, spills)


def dram_config(problem: LayoutProblem, op: str) -> Candidate:
    return next(c for c in problem.ops[op].candidates if c.output == DRAM)


def dfs_schedule(problem: LayoutProblem) -> list[str]:
    """Topological order that follows the last scheduled op into its ready consumers."""
    ops = problem.ops
    index = {name: info.index for name, info in ops.items()}
    waiting = {name: len({problem.tensors[t].producer for t in info.inputs} - {None})
               for name, info in ops.items()}
    ready = [(index[n], n) for n, w in waiting.items() if w == 0]
    heapq.heapify(ready)
    schedule: list[str] = []
    while ready:
        follow = [(i, n) for i, n in ready
                  if schedule and _reads_output_of(problem, n, schedule[-1])]
        pick = min(follow) if follow else ready[0]
        ready.remove(pick)
        heapq.heapify(ready)
        schedule.append(pick[1])
        for consumer in {c for t in ops[pick[1]].outputs for c, _ in problem.tensors[t].consumers}:
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                heapq.heappush(ready, (index[consumer], consumer))
    return schedule


def _reads_output_of(problem: LayoutProblem, consumer: str, producer: str) -> bool:
    return any(problem.tensors[t].producer == producer for t in problem.ops[consumer].inputs)


def chain_configs(problem: LayoutProblem, op: str) -> list[Candidate]:
    """Sharded configurations whose non-chain operands can stay in DRAM (the IR layout)."""
    return [c for c in problem.ops[op].candidates if c.output.is_sharded and c.in_tt_mlir
            and all(DRAM in acc for acc in c.accepts[1:])]


def build_chains(problem: LayoutProblem, schedule: list[str]) -> list[list[str]]:
    chains, current = [], []
    for k, op in enumerate(schedule):
        if not chain_configs(problem, op):
            if current:
                chains.append(current)
            current = []
            continue
        current.append(op)
        nxt = schedule[k + 1] if k + 1 < len(schedule) else None
        out = problem.ops[op].output
        continues = (nxt is not None and problem.ops[nxt].inputs[0] == out
                     and len(problem.tensors[out].consumers) == 1
                     and not problem.tensors[out].is_output and len(problem.ops[op].outputs) == 1)
        if not continues:
            chains.append(current)
            current = []
    if current:
        chains.append(current)
    return chains


@dataclass
class Edge:
    """Compatible (producer config, consumer config) pairs, each with the layout read."""

    pairs: dict[tuple[int, int], MemConfig]


class ShardSolver:
    """Bitset-style constraint resolution over one chain's operand-0 edges."""

    def __init__(self, problem: LayoutProblem, chain: list[str]) -> None:
        self.problem = problem
        self.chain = chain
        self.configs = [chain_configs(problem, op) for op in chain]
        self.valid = [set(range(len(cs))) for cs in self.configs]

    def solve(self) -> list[tuple[Candidate, MemConfig]] | None:
        entry = self.entry_reads()
        edges = [self.edge(j) for j in range(len(self.chain) - 1)]
        if entry is None or any(not e.pairs for e in edges):
            return None
        self.valid[0] &= set(entry)
        if not self.propagate(edges):
            return None
        picks = self.max_core_usage(edges)
        result = [(self.configs[0][picks[0]], entry[picks[0]])]
        for j, e in enumerate(edges):
            result.append((self.configs[j + 1][picks[j + 1]], e.pairs[(picks[j], picks[j + 1])]))
        return result

    def fits(self, j: int, cand: Candidate, reads: list[tuple[str, MemConfig]]) -> bool:
        """Op j alone: the L1 copies it reads, its output and its scratch fit L1."""
        info = self.problem.ops[self.chain[j]]
        used = sum(self.problem.bytes_per_core(t, m) for t, m in set(reads))
        used += self.problem.bytes_per_core(info.output, cand.output) + cand.cb_bytes_per_core
        return used <= self.problem.usable_l1

    def entry_reads(self) -> dict[int, MemConfig] | None:
        """Chain entry: configs that read interleaved input, else a reshard at entry."""
        t = self.problem.ops[self.chain[0]].inputs[0]
        direct = {i: DRAM for i, c in enumerate(self.configs[0])
                  if DRAM in c.accepts[0] and self.fits(0, c, [])}
        if direct:
            return direct
        resharded = {}
        for i, c in enumerate(self.configs[0]):
            target = next((m for m in c.accepts[0] if m.is_sharded
                           and self.fits(0, c, [(t, m)])), None)
            if target is not None:
                resharded[i] = target
        return resharded or None

    def edge(self, j: int) -> Edge:
        """Direct pairs of op j -> j+1; when there are none, pairs through a reshard."""
        t = self.problem.ops[self.chain[j]].output
        producers, consumers = self.configs[j], self.configs[j + 1]
        direct = {(a, b): pa.output for a, pa in enumerate(producers)
                  for b, cb in enumerate(consumers)
                  if pa.output in cb.accepts[0] and self.fits(j + 1, cb, [(t, pa.output)])}
        if direct:
            return Edge(direct)
        resharded = {}
        for a, pa in enumerate(producers):
            for b, cb in enumerate(consumers):
                target = next((m for m in cb.accepts[0] if m.is_sharded and m != pa.output
                               and self.fits(j + 1, cb, [(t, pa.output), (t, m)])), None)
                if target is not None:
                    resharded[(a, b)] = target
        return Edge(resharded)

    def propagate(self, edges: list[Edge]) -> bool:
        changed = True
        while changed:
            changed = False
            for j, e in enumerate(edges):
                live = [(a, b) for a, b in e.pairs if a in self.valid[j] and b in self.valid[j + 1]]
                for side, keep in ((j, {a for a, _ in live}), (j + 1, {b for _, b in live})):
                    if self.valid[side] - keep:
                        self.valid[side] &= keep
                        changed = True
            if any(not v for v in self.valid):
                return False
        return True

    def max_core_usage(self, edges: list[Edge]) -> list[int]:
        """Walk backward summing grid volumes; take the path of highest total core usage."""
        cores = self.problem.device.cores
        n = len(self.chain)
        best = [dict.fromkeys(self.valid[j], 0) for j in range(n)]
        nxt: list[dict[int, int]] = [{} for _ in range(n)]
        for a in self.valid[n - 1]:
            best[n - 1][a] = self.configs[n - 1][a].cores(cores)
        for j in range(n - 2, -1, -1):
            for a in sorted(self.valid[j]):
                options = [b for b in sorted(self.valid[j + 1]) if (a, b) in edges[j].pairs]
                b = max(options, key=lambda b: (best[j + 1][b], -b))
                nxt[j][a] = b
                best[j][a] = self.configs[j][a].cores(cores) + best[j + 1][b]
        pick = [max(sorted(self.valid[0]), key=lambda a: (best[0][a], -a))]
        for j in range(n - 1):
            pick.append(nxt[j][pick[-1]])
        return pick
