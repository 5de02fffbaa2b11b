"""Groups of nodes whose strategies determine each other.

In the contest's graphs most edges are "equalities up to renaming": every strategy of one
end is compatible (finite cost) with exactly one strategy of the other, and the other way
round (a tensor and its consumer must agree on a sharding). Nodes joined by such edges act
as one variable: choosing the group's root strategy fixes every member's. In benchmark A,
23,031 of 23,183 nodes left after the reductions fall in 131 groups. Single-node moves
cannot change a group at all, so the models (``merged.py``) take one variable per group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver.iopddl.work import FORBIDDEN, Work


@dataclass
class Group:
    root: int
    members: list[int]
    maps: dict[int, np.ndarray]
    """``maps[v][s]``: member v's strategy (position) when the root takes position s."""
    allowed: np.ndarray
    """Root positions under which every equality inside the group holds."""
    internal: list[int]
    """Edges with both ends in the group."""


def _bijection(cost: np.ndarray) -> np.ndarray | None:
    """For an edge matrix whose finite entries match rows and columns one to one, the
    column of each row (None otherwise)."""
    finite = cost < FORBIDDEN
    if finite.shape[0] != finite.shape[1] or not (
            (finite.sum(axis=1) == 1).all() and (finite.sum(axis=0) == 1).all()):
        return None
    return finite.argmax(axis=1)


def find_groups(work: Work) -> list[Group]:
    """Every group of two or more live nodes joined by bijective edges whose equalities
    can all hold together."""
    links: dict[int, list[tuple[int, int, np.ndarray]]] = {}
    for e, edge in work.edges.items():
        match = _bijection(edge.cost)
        if match is not None:
            inverse = np.empty_like(match)
            inverse[match] = np.arange(len(match))
            links.setdefault(edge.u, []).append((edge.v, e, match))
            links.setdefault(edge.v, []).append((edge.u, e, inverse))
    seen: set[int] = set()
    groups = []
    for root in sorted(links):
        if root in seen:
            continue
        seen.add(root)
        maps = {root: np.arange(len(work.cost[root]))}
        allowed = np.ones(len(work.cost[root]), dtype=bool)
        queue = [root]
        for i in queue:
            for j, _, match in links[i]:
                image = match[maps[i]]
                if j in maps:
                    allowed &= maps[j] == image
                else:
                    maps[j] = image
                    seen.add(j)
                    queue.append(j)
        members = list(maps)
        if not allowed.any():
            continue  # the equalities contradict each other: some must be paid, so the
            # members stay separate units
        inside = set(members)
        internal = sorted({e for i in members for j, e in work.adjacent[i].items()
                           if j in inside})
        groups.append(Group(root, members, maps, allowed, internal))
    return groups
