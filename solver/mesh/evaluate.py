"""The independent check of a mesh plan: every decision legal, every mismatch covered by
a collective, every chip's memory and L1 within bounds, the latency recomputed.

It trusts nothing the solver reports: strategies are looked up by name in the op library
and checked against the placements the plan gives each tensor; the collectives the
placements need are derived again and compared with the plan's, and their latency
recomputed from the published fits; the per-chip graph is rebuilt from the decisions and
the plan's per-chip part goes through the one-chip evaluator (L1 by step or by address,
DRAM per chip); the total is the per-chip latency plus the collectives'.
"""

from __future__ import annotations

from models.errors import InputValidationError
from models.layout import Evaluation, LayoutGraph, LayoutPlan, Violation
from models.mesh import MESH_PRESETS, CollectiveStep, MeshSpec
from solver.layout.evaluate import close
from solver.layout.evaluate import evaluate as evaluate_chip
from solver.layout.problem import analyze
from solver.mesh.local import Decisions, chip_memory, collectives_of, local_graph
from solver.mesh.placement import Placement
from solver.mesh.problem import MeshProblem, analyze_mesh


def _key(c: CollectiveStep) -> tuple[str, str, int, tuple[str, ...], tuple[str, ...], str,
                                      tuple[str, ...]]:
    return (c.tensor, c.kind, c.axis, tuple(c.from_), tuple(c.to), c.local,
            tuple(sorted(c.consumers)))


def decisions_of(problem: MeshProblem, plan: LayoutPlan,
                 violations: list[Violation]) -> Decisions | None:
    """The plan's placements and strategies as indices, each fault a violation."""
    assert plan.mesh is not None
    section = plan.mesh
    sources: dict[str, Placement] = {}
    for name in problem.sources:
        p = tuple(section.placements.get(name, ()))
        if p not in problem.options[name]:
            violations.append(Violation(kind="placement.illegal", where=f"tensors.{name}",
                                        msg=f"{list(p)} is not a placement this input or "
                                        f"weight may have on the {list(problem.mesh.shape)} "
                                        "mesh (an even split; as pinned in mesh_inputs)"))
        else:
            sources[name] = p
    strategies: dict[str, int] = {}
    for name, op in problem.ops.items():
        names = tuple(section.strategies.get(name, ()))
        k = next((i for i, s in enumerate(problem.strategies[name]) if s.name == names), None)
        if k is None:
            violations.append(Violation(
                kind="strategy.illegal", where=f"ops.{name}", msg=f"{list(names)} is not a "
                f"strategy of this {op.type} on the {list(problem.mesh.shape)} mesh; it has "
                f"{[list(s.name) for s in problem.strategies[name]][:8]}"))
            continue
        strategies[name] = k
        made = problem.strategies[name][k].output
        for t in op.outputs:
            if tuple(section.placements.get(t, ())) != made:
                violations.append(Violation(
                    kind="placement.mismatch", where=f"tensors.{t}",
                    msg=f"placed {section.placements.get(t)} but op '{name}' under "
                    f"{list(names)} makes it {list(made)}"))
    if violations:
        return None
    return Decisions(sources, strategies)


def _mesh_violations(plan: LayoutPlan, asked: MeshSpec | None) -> list[Violation]:
    """The plan's mesh must be the one asked for, and a preset's own constants."""
    section = plan.mesh
    assert section is not None
    preset = MESH_PRESETS.get(section.mesh.name)
    for expected, why in ((asked, "was asked for"), (preset, "the preset of that name is")):
        if expected is not None and expected != section.mesh:
            return [Violation(kind="mesh.mismatch", where="mesh.mesh",
                              msg=f"the plan is for a mesh other than the one that {why} "
                              f"({expected.name}, {list(expected.shape)} of {expected.chip})")]
    return []


def _collective_violations(needed: list[CollectiveStep],
                           listed: list[CollectiveStep]) -> list[Violation]:
    """The plan's collectives must be those the placements need, each at its cost."""
    if sorted(map(_key, needed)) != sorted(map(_key, listed)):
        return [Violation(
            kind="collectives.mismatch", where="mesh.collectives",
            msg=f"the placements need {len(needed)} collective steps "
            f"({', '.join(f'{c.kind} of {c.tensor} on axis {c.axis}' for c in needed[:6])}"
            f"{', ...' if len(needed) > 6 else ''}); the plan lists {len(listed)} others")]
    found = []
    for want, got in zip(sorted(needed, key=_key), sorted(listed, key=_key), strict=True):
        if want.bytes_per_chip != got.bytes_per_chip or not close(want.latency_us,
                                                                   got.latency_us):
            found.append(Violation(
                kind="collectives.latency", where=f"mesh.collectives.{got.tensor}",
                msg=f"{got.kind} on axis {got.axis}: reported {got.bytes_per_chip:,} B in "
                f"{got.latency_us!r} us; it moves {want.bytes_per_chip:,} B in "
                f"{want.latency_us!r} us"))
    return found


def evaluate_mesh(graph: LayoutGraph, plan: LayoutPlan,
                  asked: MeshSpec | None = None) -> Evaluation:
    """Check a mesh plan of ``graph`` asked for on mesh ``asked`` (the option or the
    graph's own; None: any); valid only when no violation is found."""
    assert plan.mesh is not None
    section = plan.mesh
    violations = _mesh_violations(plan, asked)
    problem = analyze_mesh(graph, section.mesh, priced=False)
    d = decisions_of(problem, plan, violations)
    if d is None:
        return Evaluation(valid=False, total_latency_us=plan.total_latency_us,
                          violations=violations)
    try:
        needed = collectives_of(problem, d)
    except ValueError as exc:  # an operand no collective turns into what its reader needs
        return Evaluation(valid=False, total_latency_us=plan.total_latency_us,
                          violations=[*violations, Violation(
                              kind="collectives.impossible", where="mesh.strategies",
                              msg=str(exc))])
    violations += _collective_violations(needed, section.collectives)
    collective_us = sum(c.latency_us for c in needed)
    if not close(collective_us, section.collective_latency_us):
        violations.append(Violation(
            kind="collectives.latency", where="mesh.collective_latency_us",
            msg=f"reported {section.collective_latency_us!r} us; the collectives take "
            f"{collective_us!r}"))
    try:
        chip_problem = analyze(local_graph(problem, d), problem.chip)
    except InputValidationError as exc:
        violations += [Violation(kind=f"chip.{i.rule}", where="mesh.graph", msg=i.msg)
                       for i in exc.issues]
        return Evaluation(valid=False, total_latency_us=plan.total_latency_us,
                          violations=violations)
    if chip_memory(chip_problem) != section.memory:
        violations.append(Violation(
            kind="memory.mismatch", where="mesh.memory",
            msg=f"reported {section.memory.model_dump()}; each chip holds "
            f"{chip_memory(chip_problem).model_dump()}"))
    chip_plan = plan.model_copy(update={"mesh": None,
                                        "total_latency_us": section.chip_latency_us})
    chip = evaluate_chip(chip_problem, chip_plan)
    violations += chip.violations
    total = chip.total_latency_us + collective_us
    if not close(plan.total_latency_us, total):
        violations.append(Violation(
            kind="total.mismatch", where="total_latency_us",
            msg=f"reported {plan.total_latency_us!r} us; per-chip {chip.total_latency_us!r} "
            f"plus collectives {collective_us!r} is {total!r}"))
    return Evaluation(valid=not violations, total_latency_us=total, violations=violations)
