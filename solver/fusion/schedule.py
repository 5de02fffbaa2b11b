"""A schedule as solvers build it (subgraphs with configurations), its contest solution,
and offering it as a solve's answer so far."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from models.fusion import FusionSolution
from solver import progress
from solver.fusion.evaluate import Evaluation, evaluate
from solver.fusion.score import Config, ScoringContext, tile_order


@dataclass(frozen=True)
class Planned:
    """One subgraph of a schedule: its ops (topologically listed), configuration and the
    tensors it retains for the next subgraph."""

    ops: tuple[int, ...]
    config: Config
    retained: frozenset[int] = frozenset()


def to_solution(ctx: ScoringContext, schedule: Sequence[Planned]) -> FusionSolution:
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


def offer(ctx: ScoringContext, schedule: Sequence[Planned]) -> None:
    """Offer a valid schedule as the solve's answer so far (``progress.offer``): the command
    line writes it at once, so a harness that stops the process before the search ends
    still finds it. Built and checked only when kept (a better one than any before)."""
    claimed = float(sum(item.config.latency for item in schedule))
    progress.offer(claimed, lambda: _checked(ctx, schedule))


def evaluated(ctx: ScoringContext, schedule: Sequence[Planned]
              ) -> tuple[FusionSolution, Evaluation]:
    """The schedule's solution and the evaluator's verdict on it under the context's
    reading, sharing the context's scoring caches (2-3 ms for a 160-op schedule, 12-40 ms
    without them)."""
    solution = to_solution(ctx, schedule)
    return solution, evaluate(ctx.problem, solution, ctx.rules, context=ctx,
                              semantics=ctx.semantics)


def _checked(ctx: ScoringContext, schedule: Sequence[Planned]) -> dict[str, Any] | None:
    """The schedule's solution (JSON) with the evaluator's latencies, under the context's
    reading; None when the evaluator refuses it."""
    solution, verdict = evaluated(ctx, schedule)
    if not verdict.valid:
        return None
    latencies = [float(x) for x in verdict.subgraph_latencies]
    return solution.model_copy(update={"subgraph_latencies": latencies}).model_dump(mode="json")
