"""Which sets of ops may form a group (docs/tx8.md, "Groups"), and the candidate groups
cpsat chooses among: every single op and every legal connected set of up to
MAX_GROUP_OPS ops."""

from __future__ import annotations

from solver.tx8.problem import Tx8Problem

MAX_GROUP_OPS = 6
"""Largest candidate group: a gated MLP with its norm, or a conv with its bias, residual and
activation, fits; larger groups add candidates faster than they add gains."""
MAX_PER_OP = 256
"""Candidates grown from one op at most, so wide fan-outs cannot flood the model."""
MAX_EXPLORED = 4096
"""Sets (legal or not) grown from one op at most, for the same reason."""


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


def _neighbours(p: Tx8Problem, name: str) -> set[str]:
    op = p.ops[p.index[name]]
    near = {p.ops[p.producer[o.tensor]].name for o in op.operands if o.tensor in p.producer}
    near |= p.readers.get(op.output, set())
    return near


def _connected(p: Tx8Problem, names: list[str]) -> bool:
    members, seen, todo = set(names), {names[0]}, [names[0]]
    while todo:
        for n in _neighbours(p, todo.pop()) & members:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen == members


def candidate_groups(p: Tx8Problem) -> list[tuple[str, ...]]:
    """Every single op, then every legal multi-op group, each in run order."""
    found: list[tuple[str, ...]] = [(op.name,) for op in p.ops]
    seen: set[frozenset[str]] = set()
    for start in p.ops:
        if start.kind == "ddr":
            continue
        grown = explored = 0
        frontier = [frozenset({start.name})]
        while frontier and grown < MAX_PER_OP and explored < MAX_EXPLORED:
            nxt = []
            for members in frontier:
                for m in members:
                    for n in _neighbours(p, m) - members:
                        op = p.ops[p.index[n]]
                        if (op.kind == "ddr" or op.out_shape != start.out_shape
                                or p.index[n] < p.index[start.name]):
                            continue
                        bigger = members | {n}
                        if bigger in seen:
                            continue
                        seen.add(bigger)
                        explored += 1
                        ordered = sorted(bigger, key=p.index.__getitem__)
                        if not group_faults(p, ordered):
                            found.append(tuple(ordered))
                            grown += 1
                        if len(bigger) < MAX_GROUP_OPS:
                            nxt.append(bigger)
            frontier = nxt
    return found
