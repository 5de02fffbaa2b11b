"""Baseline ``dram``: the optimizer off. Every tensor in DRAM, interleaved."""

from __future__ import annotations

from solver.layout.memory import DRAM
from solver.layout.plan import Assignment
from solver.layout.problem import LayoutProblem


def assign(problem: LayoutProblem) -> Assignment:
    """Each op's DRAM-interleaved configuration, every operand read from DRAM."""
    configs = {}
    for name, info in problem.ops.items():
        configs[name] = next(c for c in info.candidates if c.output == DRAM)
    return Assignment(schedule=list(problem.order), configs=configs,
                      reads={name: [DRAM] * len(info.inputs) for name, info in problem.ops.items()})
