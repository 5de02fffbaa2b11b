"""What every pool of solver worker processes shares (the service's pool, a comparison's):
the memory cap each worker sets on itself, and when a worker still running is killed."""

from __future__ import annotations

import resource

GRACE_S = 30.0


def grace_s(limit_s: float) -> float:
    """How long past its time limit a solve may run before its worker is killed: solvers
    stop at their limit themselves; model building, evaluation and heuristics that take no
    limit get this much more."""
    return max(GRACE_S, limit_s)


def limit_memory(max_bytes: int) -> None:
    """Pool initializer: cap the worker's data memory (heap and private mappings; not the
    address space, which thread stacks and allocator arenas inflate far beyond what a solve
    uses), so a runaway solve raises MemoryError or dies alone. 0: no cap."""
    if max_bytes > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (max_bytes, max_bytes))
