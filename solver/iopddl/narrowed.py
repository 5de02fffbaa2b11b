"""The whole problem re-solved by CP-SAT with every unit free at once, each kept to a few
positions: its current one, its best in its neighbours' context, its ``width`` best by
the message passing's beliefs and its positions in the priced search's cheapest answers.

Compound moves and neighbourhoods of units change one region at a time. On M their answer
is proven optimal over each of the twelve most connected units with all its neighbours
free, yet 1% above the best published: what is left is a change across thousands of units
at once, which no region holds. The beliefs (each unit's priced costs plus the messages
into it, ``messages.py``) say which few positions the whole graph favours for each unit;
kept to those, the model of all of M's 4,100 units has 120,000 entries instead of 1.7
million, and CP-SAT moves them together. From an answer of M at 50.43e9 (200 s of compound
moves), with beliefs from 100 passes without prices: 49.94e9 in 60 s with two beliefs per
unit (one: 50.01e9, proven for that width; three: 50.09e9). In the search it starts from
the priced search's answer and its beliefs: S 1.5796e9 -> 1.5580e9 in 61 s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from solver import deadline as clock
from solver.iopddl.coarse import UnitGraph, UnitState
from solver.iopddl.merged import BUILD_S_PER_ENTRY, MAX_ENTRIES, solve_whole
from solver.iopddl.messages import MessagePassing
from solver.iopddl.state import State

FIRST_WIDTH = 2
"""Positions per unit taken from the beliefs in the first round (one more after each
round proven optimal for its width)."""
BELIEF_SHARE = 0.25
BELIEF_PASSES = 50
"""Without beliefs from the priced search (no memory step binds): message passes of the
plain problem, within this share of the time."""


def narrowed_rounds(state: State, graph: UnitGraph, beliefs: list[np.ndarray] | None,
                    until: float, seed: int, workers: int,
                    elite: Sequence[np.ndarray] = ()) -> int:
    """Improve ``state`` (kept fitting) by narrowed whole-problem models until ``until``;
    the number of rounds run. Each unit may also take its position in any of the ``elite``
    answers (the priced search's cheapest, cheapest first), so CP-SAT can merge good answers
    as well as follow the beliefs; a model too large drops half the elite at a time before
    any belief."""
    if beliefs is None:
        passes = MessagePassing(graph)
        if passes.solve(graph.unary, BELIEF_PASSES,
                        clock.now() + BELIEF_SHARE * (until - clock.now())) is None:
            return 0
        beliefs = passes.beliefs(graph.unary)
    allowed = graph.units.allowed
    ranked = [np.argsort(np.where(allowed[u], b, np.inf), kind="stable")
              for u, b in enumerate(beliefs)]
    width = FIRST_WIDTH
    rounds = 0
    built = 0.0  # the last round's build seconds (the estimate per entry is A's dense one)
    current = UnitState(graph, graph.of(state))  # rebuilt after each round, not each try
    while width >= 1 and clock.now() < until:
        domains = _domains(graph, current, ranked, width, elite)
        size = _size(graph, domains)
        if size > MAX_ENTRIES:
            if rounds:  # the width below was proven: nothing wider fits a model
                break
            if elite:  # fewer elite answers first, then fewer beliefs
                elite = elite[:len(elite) // 2]
            else:
                width -= 1
            continue
        if clock.now() + max(BUILD_S_PER_ENTRY * size, 1.5 * built) >= until:
            break
        result = solve_whole(state, graph.units, until, seed + rounds, workers,
                             free=list(range(graph.count)), domains=domains)
        rounds += 1
        built = result.build_s
        if not result.proven or all(len(domains[u]) == int(allowed[u].sum())
                                    for u in range(graph.count)):
            break
        width += 1
        current = UnitState(graph, graph.of(state))
    return rounds


def _domains(graph: UnitGraph, current: UnitState, ranked: list[np.ndarray], width: int,
             elite: Sequence[np.ndarray] = ()) -> dict[int, np.ndarray]:
    allowed = graph.units.allowed
    domains = {}
    for u in range(graph.count):
        best_here = int(np.argmin(current.allowed_local(u)))
        keep = np.unique(np.concatenate([[current.pos[u], best_here], ranked[u][:width],
                                        [int(e[u]) for e in elite]]).astype(np.int64))
        domains[u] = keep[allowed[u][keep]]
    return domains


def _size(graph: UnitGraph, domains: dict[int, np.ndarray]) -> int:
    """The entries of the narrowed model (as ``MergedModel.size`` counts them)."""
    return (sum(len(domains[a]) * len(domains[b]) for a, b in graph.pairs)
            + sum(len(d) for d in domains.values()))
