"""Zones: parts of the graph that no subgraph spans, so the cover's fillers pay per zone.

Some adjacent ops never run in one valid subgraph (``roles.never_together``: S6.4 keeps a
Pointwise op from making an operand of a root that always splits a K above the native
extent). A subgraph is connected (S2.4) and holds no such pair, so it is connected without
their links: it lies within one component of the graph without them, a *zone*.

Two uses (``cover.py``): the op sets left unpriced pay their fillers' largest row per zone
(the rows summed over the ops of one zone, then the zones added up) instead of the largest
row over the whole graph, where compute in one zone could hide forced traffic in another;
and a zone all of whose connected op sets were priced leaves none of its ops to a filler.
On the generated suite 1 to 28 zones per graph; the cover of ``gen-gated-mlp-10``
``per_op`` (28 zones) rose 29% with them.
"""

from __future__ import annotations

import networkx as nx

from solver.fusion.bound.roles import never_together
from solver.fusion.candidates import Attempted
from solver.fusion.context import ScoringContext


def zones(ctx: ScoringContext) -> tuple[int, ...]:
    """Per op, its zone (numbered from 0 in the order of the ops). Cached in ``ctx``."""
    return ctx.memo("zones", (), lambda: _components(ctx))


def priced_zones(ctx: ScoringContext, attempted: Attempted) -> frozenset[int]:
    """The zones every connected op set of which is among ``attempted`` (op sets the bound
    priced): no unpriced subgraph runs an op of theirs."""
    members: dict[int, list[int]] = {}
    for q, zone in enumerate(zones(ctx)):
        members.setdefault(zone, []).append(q)
    return frozenset(zone for zone, ops in members.items()
                     if attempted.covers(ctx.graph, ops, never_together(ctx)))


def _components(ctx: ScoringContext) -> tuple[int, ...]:
    """The components of the op graph without the links ``never_together`` cuts, numbered
    by their first op."""
    graph = ctx.graph.dag.to_undirected()
    graph.remove_edges_from(tuple(pair) for pair in never_together(ctx))
    zone = [0] * ctx.problem.num_ops
    for number, ops in enumerate(sorted(nx.connected_components(graph), key=min)):
        for q in ops:
            zone[q] = number
    return tuple(zone)
