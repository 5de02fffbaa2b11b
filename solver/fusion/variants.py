"""Scored subgraph variants: an op set with fixed retained-in and retained-out sets.

Fixing the tensors a subgraph finds resident (retained-in) and keeps for the next one
(retained-out) makes its best latency a constant, which keeps the CP-SAT model linear. The
variants of one op set are its base variant and those with one retained tensor on either
side, or all that can be (plus any set the caller requires, e.g. at a window boundary).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from solver.fusion.floors import kept_by_last_step
from solver.fusion.score import Config, ScoringContext, best_config


@dataclass(frozen=True)
class Variant:
    """One subgraph as the model sees it; ``config`` is None for a boundary placeholder."""

    ops: tuple[int, ...]
    retained_in: frozenset[int]
    retained_out: frozenset[int]
    reads_from_slow: frozenset[int]
    writes: frozenset[int]
    latency: Fraction
    config: Config | None


def make_variant(ctx: ScoringContext, ops: tuple[int, ...], retained_in: frozenset[int],
                 retained_out: frozenset[int]) -> Variant | None:
    """The variant at its best granularity and traversal, or None when nothing fits."""
    config = best_config(ctx, ops, retained_in, retained_out)
    if config is None:
        return None
    shape = ctx.shape(ops)
    return Variant(ops, retained_in, retained_out,
                   reads_from_slow=frozenset(shape.inputs) - retained_in,
                   writes=frozenset(shape.outputs) - retained_out,
                   latency=config.latency, config=config)


def retainable_outputs(ctx: ScoringContext, ops: tuple[int, ...]) -> list[int]:
    """Tensors produced by ``ops`` that some op outside them consumes: the only ones whose
    retention can save a later load (S5.2-5.3)."""
    inside = set(ops)
    shape = ctx.shape(ops)
    produced = set(shape.outputs) | set(shape.ephemerals)
    return sorted(t for t in produced if any(c not in inside for c in ctx.graph.consumers[t]))


def retainable_inputs(ctx: ScoringContext, ops: tuple[int, ...]) -> list[int]:
    """Boundary inputs another subgraph could have retained (graph inputs never are)."""
    return sorted(t for t in ctx.shape(ops).inputs if t in ctx.graph.producer)


def retention_options(ctx: ScoringContext, ops: tuple[int, ...],
                      extra_in: Iterable[frozenset[int]] = (),
                      extra_out: Iterable[frozenset[int]] = ()
                      ) -> list[tuple[frozenset[int], frozenset[int]]]:
    """(retained-in, retained-out) pairs worth scoring for ``ops``: on each side nothing, any
    one tensor, or all of them, plus the required sets ``extra_in``/``extra_out`` where they
    apply; the pair with nothing retained first."""
    shape = ctx.shape(ops)
    consumed, produced = set(shape.inputs), set(shape.outputs) | set(shape.ephemerals)
    ins = _singles_and_all(retainable_inputs(ctx, ops))
    ins += [s for s in extra_in if s and s <= consumed and s not in ins]
    outs = _singles_and_all(retainable_outputs(ctx, ops))
    outs += [s for s in extra_out if s and s <= produced and s not in outs]
    return [(r_in, r_out) for r_in in ins for r_out in outs if _may_fit(ctx, r_in, r_out)]


def _may_fit(ctx: ScoringContext, retained_in: frozenset[int],
             retained_out: frozenset[int]) -> bool:
    """False when the retained tensors alone overflow fast memory: resident ones count at
    full size in every step (S5.5) and, under the ``accumulate`` reading, a retained output
    is whole by the last step (S12)."""
    held = sum(ctx.graph.size(t) for t in retained_in)
    return held + kept_by_last_step(ctx, retained_out) <= ctx.capacity


def _singles_and_all(tensors: list[int]) -> list[frozenset[int]]:
    sets = [frozenset()] + [frozenset({t}) for t in tensors]
    return sets + [frozenset(tensors)] if len(tensors) > 1 else sets


def variants_of(ctx: ScoringContext, ops: tuple[int, ...],
                extra_in: Iterable[frozenset[int]] = (),
                extra_out: Iterable[frozenset[int]] = ()) -> list[Variant]:
    """Every variant of ``retention_options`` that fits."""
    found = (make_variant(ctx, ops, r_in, r_out)
             for r_in, r_out in retention_options(ctx, ops, extra_in, extra_out))
    return [v for v in found if v is not None]
