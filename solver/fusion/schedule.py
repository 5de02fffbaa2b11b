"""A schedule as solvers build it (subgraphs with configurations) and its contest solution."""

from __future__ import annotations

from dataclasses import dataclass

from models.fusion import FusionSolution
from solver.fusion.score import Config, ScoringContext, tile_order


@dataclass(frozen=True)
class Planned:
    """One subgraph of a schedule: its ops (topologically listed), configuration and the
    tensors it retains for the next subgraph."""

    ops: tuple[int, ...]
    config: Config
    retained: frozenset[int] = frozenset()


def to_solution(ctx: ScoringContext, schedule: list[Planned]) -> FusionSolution:
    """The contest solution of a schedule, claiming the scorer's latencies.

    Raster order is ``null``; every other order is written out as a permutation.
    """
    orders: list[list[int] | None] = []
    for item in schedule:
        w, h, _ = item.config.gran
        if item.config.traversal == "raster":
            orders.append(None)
        else:
            orders.append(tile_order(item.config.traversal, *ctx.shape(item.ops).grid(w, h)))
    return FusionSolution(
        subgraphs=[list(item.ops) for item in schedule],
        granularities=[list(item.config.gran) for item in schedule],
        tensors_to_retain=[sorted(item.retained) for item in schedule],
        traversal_orders=orders,
        subgraph_latencies=[float(item.config.latency) for item in schedule],
    )
