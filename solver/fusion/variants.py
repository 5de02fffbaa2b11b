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
    return variant(ctx, ops, retained_in, retained_out, config.latency, config)


def variant(ctx: ScoringContext, ops: tuple[int, ...], retained_in: frozenset[int],
            retained_out: frozenset[int], latency: Fraction, config: Config | None
            ) -> Variant:
    """The variant of ``ops`` at ``latency``: it reads from slow memory every input not
    resident and writes every output it does not keep."""
    shape = ctx.shape(ops)
    return Variant(ops, retained_in, retained_out,
                   reads_from_slow=frozenset(shape.inputs) - retained_in,
                   writes=frozenset(shape.outputs) - retained_out,
                   latency=latency, config=config)


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
    apply; the pair with nothing retained first. Made once per op set (windows overlap: a
    10-s solve of the 19-op ``gen-forkjoin-04`` asked 4,570 times, for 15% of its search's
    time) unless an extra set applies; the list is shared, not to be changed."""
    ins, outs = ctx.memo("retention sides", ops, lambda: _sides(ctx, ops))
    shape = ctx.shape(ops)
    inputs, produced = frozenset(shape.inputs), shape.produced
    more_in = [(s, _held(ctx, s)) for s in dict.fromkeys(extra_in)
               if s and s <= inputs and all(s != r for r, _ in ins)]
    more_out = [(s, kept_by_last_step(ctx, s)) for s in dict.fromkeys(extra_out)
                if s and s <= produced and all(s != r for r, _ in outs)]
    if not more_in and not more_out:
        return ctx.memo("retention options", ops, lambda: _fitting_pairs(ctx, ins, outs))
    return _fitting_pairs(ctx, ins + more_in, outs + more_out)


Side = list[tuple[frozenset[int], int]]
"""Retained sets of one side of a subgraph, each with the room it takes (``_fitting_pairs``)."""


def _sides(ctx: ScoringContext, ops: tuple[int, ...]) -> tuple[Side, Side]:
    return ([(s, _held(ctx, s)) for s in _singles_and_all(retainable_inputs(ctx, ops))],
            [(s, kept_by_last_step(ctx, s))
             for s in _singles_and_all(retainable_outputs(ctx, ops))])


def _fitting_pairs(ctx: ScoringContext, ins: Side, outs: Side
                   ) -> list[tuple[frozenset[int], frozenset[int]]]:
    """The pairs whose retained tensors alone do not overflow fast memory: resident ones
    count at full size in every step (S5.5) and, under the ``accumulate`` reading, a
    retained output is whole by the last step (S12)."""
    return [(r_in, r_out) for r_in, held in ins for r_out, kept in outs
            if held + kept <= ctx.capacity]


def _held(ctx: ScoringContext, tensors: frozenset[int]) -> int:
    return sum(ctx.graph.size(t) for t in tensors)


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
