"""Which sets of ops may form a group (docs/tx8.md, "Groups"), and the candidate groups
cpsat chooses among: every single op and every legal connected set of up to
MAX_GROUP_OPS ops."""

from __future__ import annotations

import math

from solver.deadline import now
from solver.tx8.problem import Tx8Problem

MAX_GROUP_OPS = 6
"""Largest candidate group: a gated MLP with its norm, or a conv with its bias, residual and
activation, fits; larger groups add candidates faster than they add gains."""
MAX_PER_OP = 256
"""Candidates grown from one op at most, so wide fan-outs cannot flood the model."""
MAX_EXPLORED = 4096
"""Sets (legal or not) grown from one op at most, for the same reason."""
CLOCK_EVERY = 16
"""Ops grown from between two readings of the clock (a deterministic solve's clock
advances per reading)."""


def group_faults(p: Tx8Problem, names: list[str]) -> list[str]:
    """Why these ops may not form one group (empty when they may)."""
    ops = [p.ops[p.index[n]] for n in names]
    if len(ops) == 1:
        return []
    faults = []
    if any(op.kind == "ddr" for op in ops):
        faults.append("a DDR op runs alone")
    if len({op.out_shape for op in ops}) > 1:
        faults.append("its ops' outputs differ in shape")
    members = set(names)
    for op in ops:
        if op.head and any(p.ops[p.producer[o.tensor]].name in members
                           for o in op.operands if o.tensor in p.producer):
            faults.append(f"{op.name} reads its operands from DDR only")
    if not _convex(p, names):
        faults.append("a path leaves the group and comes back")
    if not _connected(p, names):
        faults.append("its ops are not connected")
    return faults


def _bits(p: Tx8Problem, names: list[str]) -> int:
    mask = 0
    for n in names:
        mask |= 1 << p.index[n]
    return mask


def _convex(p: Tx8Problem, names: list[str]) -> bool:
    inside = _bits(p, names)
    reach = 0
    for n in names:
        reach |= p.descendants[p.index[n]]
    outside = reach & ~inside
    while outside:
        low = outside & -outside
        if p.descendants[low.bit_length() - 1] & inside:
            return False
        outside ^= low
    return True


def _connected(p: Tx8Problem, names: list[str]) -> bool:
    members, seen, todo = set(names), {names[0]}, [names[0]]
    while todo:
        for n in set(p.neighbours(todo.pop())) & members:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen == members


def candidate_groups(p: Tx8Problem, deadline: float = math.inf
                     ) -> tuple[list[tuple[str, ...]], bool]:
    """Every single op, then legal multi-op groups, each in run order, grown from each op
    in run order (at most MAX_PER_OP from one op, MAX_EXPLORED sets looked at) until the
    deadline (a ``now()`` value); and whether the deadline cut the growth short."""
    found: list[tuple[str, ...]] = [(op.name,) for op in p.ops]
    seen: set[frozenset[str]] = set()
    for i, start in enumerate(p.ops):
        if i % CLOCK_EVERY == 0 and now() > deadline:
            return found, True
        if start.kind == "ddr":
            continue
        grown = explored = 0
        frontier = [(start.name,)]
        while frontier and grown < MAX_PER_OP and explored < MAX_EXPLORED:
            nxt: list[tuple[str, ...]] = []
            for members in frontier:
                for n in dict.fromkeys(x for m in members for x in p.neighbours(m)):
                    op = p.ops[p.index[n]]
                    if (n in members or op.kind == "ddr" or op.out_shape != start.out_shape
                            or p.index[n] < i):
                        continue
                    bigger = tuple(sorted((*members, n), key=p.index.__getitem__))
                    if frozenset(bigger) in seen:
                        continue
                    seen.add(frozenset(bigger))
                    explored += 1
                    if not group_faults(p, list(bigger)):
                        found.append(bigger)
                        grown += 1
                    if len(bigger) < MAX_GROUP_OPS:
                        nxt.append(bigger)
                    if grown >= MAX_PER_OP or explored >= MAX_EXPLORED:
                        break
                if grown >= MAX_PER_OP or explored >= MAX_EXPLORED:
                    break
            frontier = nxt
    return found, False
