"""The ``unfused`` baseline: every op alone, at its best legal granularity and traversal."""

from __future__ import annotations

from models.errors import Issue, NoSolutionError
from solver.fusion.schedule import Planned
from solver.fusion.score import ScoringContext, best_config


def unfused(ctx: ScoringContext, solver: str = "unfused") -> list[Planned]:
    """One subgraph per op, in topological order, nothing retained.

    Raises ``NoSolutionError`` naming the op when some op fits at no legal granularity.
    """
    schedule = []
    for q in ctx.graph.topological_order:
        config = best_config(ctx, (q,))
        if config is None:
            raise NoSolutionError([Issue(
                ("op_types", q),
                f"op {q} alone does not fit in fast memory at any legal granularity "
                f"(fast_memory_capacity {ctx.problem.fast_memory_capacity})",
                "solve.op_does_not_fit")], solver)
        schedule.append(Planned((q,), config))
    return schedule
