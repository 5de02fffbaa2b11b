"""The ``unfused`` baseline: every op alone, at its best legal granularity and traversal."""

from __future__ import annotations

from models.errors import Issue, NoSolutionError
from solver.deadline import now
from solver.fusion.schedule import Planned
from solver.fusion.score import (
    Config,
    ScoringContext,
    ScoringTimeout,
    best_config,
    known_best,
    quick_config,
)


def unfused(ctx: ScoringContext, solver: str = "unfused",
            deadline: float = float("inf")) -> list[Planned]:
    """One subgraph per op, in topological order, nothing retained. Ops met after
    ``deadline`` (a ``deadline.now()`` value) take the first config that fits
    (``quick_config``) instead of the best: a large graph's bests may outlast a short limit
    (under the teamkorea reading, 3 s for a 320-op graph before its config search's floors
    saw what MatMul strips reload).

    Raises ``NoSolutionError`` naming the op when some op fits at no legal granularity.
    """
    schedule = []
    for q in ctx.graph.topological_order:
        config = _alone(ctx, q, deadline)
        if config is None:
            raise NoSolutionError([Issue(
                ("op_types", q),
                f"op {q} alone does not fit in fast memory at any legal granularity "
                f"(fast_memory_capacity {ctx.problem.fast_memory_capacity})",
                "solve.op_does_not_fit")], solver)
        schedule.append(Planned((q,), config))
    return schedule


def _alone(ctx: ScoringContext, q: int, deadline: float) -> Config | None:
    """Op ``q``'s best config if its search ends by ``deadline`` (or by a config search
    deadline already set), else the best found before or a quick one (searched to its end:
    a schedule is owed)."""
    ends = min(deadline, ctx.deadline if ctx.deadline is not None else deadline)
    if now() < ends:
        try:
            with ctx.searching_until(ends):
                return best_config(ctx, (q,))
        except ScoringTimeout:
            pass
    with ctx.searching_until(float("inf")):
        return known_best(ctx, (q,)) or quick_config(ctx, (q,))
