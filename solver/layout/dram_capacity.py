"""DRAM capacity: a graph is admitted only when its plans fit the device's DRAM.

Graph inputs and constants (weights) live in DRAM for the whole run. An activation lives
from its producer's step to its last consumer's (a graph output to the end), in its home
and in any copy. DRAM has one configuration (interleaved), so a plan holds a tensor in
DRAM once (its home, a copy to DRAM or its spill) unless it both spills it and copies it
there. A plan on the graph's op order (``cpsat``, ``greedy``) therefore uses at most, at
each step, the constants and inputs plus every activation live then; when that fits, the
solvers need no DRAM constraint, and the evaluator checks each plan's own DRAM on its own
schedule for the rest (``evaluate._check_dram``). When it does not fit, the graph is
rejected with the numbers: conservative only while the excess is below what L1 could
hold instead (84.8 MB of usable L1 on a Wormhole n150 against its 12 GiB).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.errors import InputValidationError, Issue

if TYPE_CHECKING:
    from solver.layout.problem import LayoutProblem, TensorInfo

LARGEST_SHOWN = 5
"""Tensors named in the rejection: the largest live at the fullest step."""


def _lifetimes(problem: LayoutProblem) -> list[tuple[TensorInfo, int, int]]:
    """Every tensor with the first and last step of the op order it is live at."""
    steps = len(problem.order)
    at = {op: k for k, op in enumerate(problem.order)}
    spans = []
    for info in problem.tensors.values():
        if info.producer is None:
            first, last = 0, steps - 1
        else:
            first = at[info.producer]
            last = steps - 1 if info.is_output else max(
                (at[op] for op, _ in info.consumers), default=first)
        spans.append((info, first, last))
    return spans


def dram_need(problem: LayoutProblem) -> list[int]:
    """Per step of the op order, the DRAM bytes of the constants and inputs plus every
    activation live then: the most any plan of the graph holds in DRAM."""
    steps = len(problem.order)
    change = [0] * (steps + 1)
    for info, first, last in _lifetimes(problem):
        change[first] += info.stored_bytes
        change[last + 1] -= info.stored_bytes
    need, total = [], 0
    for k in range(steps):
        total += change[k]
        need.append(total)
    return need


def require_dram_capacity(problem: LayoutProblem) -> None:
    """Reject the graph (``device.dram_capacity``) when some step could need more DRAM
    than the device has; devices without a stated size are not checked."""
    capacity = problem.device.dram_size_bytes
    if capacity is None:
        return
    need = dram_need(problem)
    k = max(range(len(need)), key=need.__getitem__)
    if need[k] <= capacity:
        return
    fixed = sum(t.stored_bytes for t in problem.tensors.values() if t.producer is None)
    live = [t for t, first, last in _lifetimes(problem) if first <= k <= last]
    largest = sorted(live, key=lambda t: -t.stored_bytes)[:LARGEST_SHOWN]
    names = ", ".join(f"'{t.name}' ({t.kind}, {t.stored_bytes:,} B)" for t in largest)
    raise InputValidationError([Issue(
        ("device",), f"the graph needs {need[k]:,} bytes of DRAM at step {k} (op "
        f"'{problem.order[k]}'): {fixed:,} of constants and inputs, resident throughout, "
        f"and {need[k] - fixed:,} of activations live then; {problem.device.name} has "
        f"{capacity:,} (dram_size_bytes). Largest: {names}. Choose a device with more DRAM "
        "or split the graph", "device.dram_capacity")], "layout graph")
