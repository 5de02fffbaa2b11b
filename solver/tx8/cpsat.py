"""``cpsat`` for TX8: the partition into groups and every group's layout chosen jointly,
with the conversions they imply (docs/tx8.md, "Solvers").

Each candidate group's cheapest configuration per layout is found exhaustively first
(configurations of different groups do not interact: groups exchange data through DDR);
the model then picks one candidate per op, a layout per candidate and the conversions;
a cycle among the chosen groups is cut and the model solved again."""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
from ortools.sat import sat_parameters_pb2
from ortools.sat.python import cp_model

from solver.deadline import limit_cpsat, now, run_cpsat
from solver.tx8.candidates import candidate_groups
from solver.tx8.configs import Choice, cheapest, cpsat_space
from solver.tx8.groupcost import no_fit
from solver.tx8.plan import Chosen, group_graph
from solver.tx8.problem import Tx8Problem

PORTFOLIO = ("reduced_costs", "default_lp", "pseudo_costs", "max_lp", "core", "quick_restart",
             "no_lp", "probing")
"""CP-SAT's full subsolvers, the one this model gains most from first (the rest join when
there are more workers)."""
SCALE = 1000
"""Model units per microsecond (nanoseconds); costs are rounded down so the model's bound
stays below every plan's true latency."""


@dataclass
class Priced:
    """The candidate groups with their cheapest configuration per layout."""

    groups: list[tuple[str, ...]]
    options: list[dict[str, tuple[float, Choice | None]]]
    complete: bool
    """every candidate priced: the model's bound holds for every plan of the space."""


def price(p: Tx8Problem, deadline: float, seeded: list[Chosen]) -> Priced:
    """Every candidate's cheapest configuration per layout (templates shared), until the
    deadline; past it only DDR ops and the baseline's own groups (at its configuration)
    are kept, so the model still holds the baseline's plan, and no bound is claimed."""
    cache: dict[tuple, Choice | None] = {}
    baseline: dict[tuple[str, ...], dict[str, tuple[float, Choice | None]]] = {}
    for c in seeded:
        if c.choice is not None:
            baseline.setdefault(c.ops, {})[c.layout] = (c.choice.latency_us, c.choice)
    groups, options = [], []
    candidates, late = candidate_groups(p, deadline)
    for names in dict.fromkeys([*candidates, *(c.ops for c in seeded)]):
        first = p.ops[p.index[names[0]]]
        if first.kind == "ddr":
            groups.append(names)
            options.append({"compact": (p.ddr_latency_us(first), None)})
            continue
        priced: dict[str, tuple[float, Choice | None]] = {}
        if late:
            priced = baseline.get(names, {})
        else:
            shape = p.shape_of(list(names))
            for layout in p.layouts(list(names)):
                key = (shape.signature(), layout)
                if key not in cache:
                    cache[key] = cheapest(shape, layout, p.device,
                                          cpsat_space(shape, p.device.tile_count))
                    late = now() > deadline  # a fresh pricing can take a while
                found = cache[key]
                _, seed = baseline.get(names, {}).get(layout, (None, None))
                if seed is not None and (found is None or seed.latency_us < found.latency_us):
                    found = seed
                if found is not None:
                    priced[layout] = (found.latency_us, found)
            if len(names) == 1 and not priced:
                raise no_fit(p, names)
        if priced:
            groups.append(names)
            options.append(priced)
    return Priced(groups, options, not late)


def solve_groups(p: Tx8Problem, priced: Priced, hint: list[Chosen], deadline: float,
                 seed: int, workers: int) -> tuple[list[Chosen] | None, float | None, bool]:
    """The chosen groups, the model's lower bound (us) and whether it is proven optimal.

    Groups that depend on each other both ways cannot run: the model is solved, a cycle
    among the chosen groups is cut (not all of them again), and solved again; cycles need
    interleaved parallel branches, so this rarely loops."""
    m = cp_model.CpModel()
    x: dict[tuple[int, str], cp_model.IntVar] = {}
    containing: dict[str, list[int]] = {op.name: [] for op in p.ops}
    for g, names in enumerate(priced.groups):
        for layout in priced.options[g]:
            x[g, layout] = m.new_bool_var(f"x{g}{layout[0]}")
        for n in names:
            containing[n].append(g)
    chosen_g = {g: sum(x[g, lay] for lay in priced.options[g]) for g in range(len(priced.groups))}
    for gs in containing.values():
        m.add(sum(chosen_g[g] for g in gs) == 1)
    aligned = {n: sum(x[g, "aligned"] for g in gs if (g, "aligned") in x)
               for n, gs in containing.items()}
    together = _together(p, priced, chosen_g)
    cost = [math.floor(c * SCALE) * x[g, lay] for g in range(len(priced.groups))
            for lay, (c, _) in priced.options[g].items()]
    cost += _conversions(p, aligned, together, m)
    m.minimize(sum(cost))
    _hint(priced, hint, x, m)
    while True:
        solver = cp_model.CpSolver()
        _parameters(solver.parameters, workers, seed)
        limit_cpsat(solver.parameters, deadline)
        status = run_cpsat(solver, m)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None, None, False
        picked = [g for g in range(len(priced.groups)) if solver.value(chosen_g[g])]
        cycle = _cycle(p, priced, picked)
        if not cycle:
            break
        m.add(sum(chosen_g[g] for g in cycle) <= len(cycle) - 1)
        if now() >= deadline:
            return None, None, False
    out = [Chosen(priced.groups[g], lay, priced.options[g][lay][1])
           for (g, lay), var in x.items() if solver.value(var)]
    if not priced.complete:
        return out, None, False
    return out, solver.best_objective_bound / SCALE, status == cp_model.OPTIMAL


def _parameters(parameters: sat_parameters_pb2.SatParameters, workers: int, seed: int) -> None:
    """With two workers or more, the reduced-cost search is the first full subsolver (with
    two workers CP-SAT runs one beside its LNS worker): on Gemma-2's 46 layers (5,701
    candidates) the default one stayed 0.4% from proving in 20 s, this one proved the
    optimum in 1 s, as eight default workers did."""
    parameters.num_workers = max(1, workers)
    parameters.random_seed = seed
    if workers >= 2:
        parameters.subsolvers.extend(PORTFOLIO[:workers])


def _cycle(p: Tx8Problem, priced: Priced, picked: list[int]) -> list[int]:
    """Chosen groups on a dependency cycle (empty when they can run in some order)."""
    dag = group_graph(p, {n: g for g in picked for n in priced.groups[g]})
    try:
        return sorted({g for edge in nx.find_cycle(dag) for g in edge})
    except nx.NetworkXNoCycle:
        return []


def _together(p: Tx8Problem, priced: Priced, chosen_g: dict) -> dict[tuple[str, str], object]:
    """Per producer-reader pair: 1 when one chosen group holds both."""
    both: dict[tuple[str, str], list[int]] = {}
    for g, names in enumerate(priced.groups):
        members = set(names)
        for n in names:
            for reader in p.readers.get(p.ops[p.index[n]].output, ()):
                if reader in members:
                    both.setdefault((n, reader), []).append(g)
    return {pair: sum(chosen_g[g] for g in gs) for pair, gs in both.items()}


def _conversions(p: Tx8Problem, aligned: dict, together: dict, m: cp_model.CpModel) -> list:
    """A conversion per (tensor, layout) some reader in another group needs, or the host."""
    terms = []
    for t in p.tensors.values():
        if (t.kind == "constant" or t.name not in p.readers and t.name not in p.outputs
                or p.same_in_both_layouts(t.name)):
            continue
        producer = p.ops[p.producer[t.name]].name if t.name in p.producer else None
        stored = aligned[producer] if producer else 0
        to_aligned = m.new_bool_var("")
        to_compact = m.new_bool_var("")
        for w in p.readers.get(t.name, ()):
            inside = together.get((producer, w), 0) if producer else 0
            m.add(to_aligned >= aligned[w] - stored - inside)
            m.add(to_compact >= stored - aligned[w] - inside)
        if t.name in p.outputs:
            m.add(to_compact >= stored)
        for var, layout in ((to_aligned, "aligned"), (to_compact, "compact")):
            terms.append(math.floor(p.conversion(t.name, layout)[1] * SCALE) * var)
    return terms


def _hint(priced: Priced, hint: list[Chosen], x: dict, m: cp_model.CpModel) -> None:
    at = {names: g for g, names in enumerate(priced.groups)}
    picked = {(at[c.ops], c.layout) for c in hint if c.ops in at}
    for key, var in x.items():
        m.add_hint(var, key in picked)
