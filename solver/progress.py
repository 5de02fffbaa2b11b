"""Where a long solve reports its best objective and bound while it runs.

The service installs a sink in each worker process so a running job shows them; with no
sink installed (the CLI, the tests, compare) reporting costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

Sink = Callable[[float, float | None], None]

_sink: Sink | None = None
_best = float("inf")


def install(sink: Sink | None) -> None:
    """Send this process's reports to ``sink`` (None: nowhere)."""
    global _sink, _best
    _sink = sink
    _best = float("inf")


def active() -> bool:
    return _sink is not None


def report(objective: float, bound: float | None = None) -> None:
    """A solution's objective, and a valid lower bound on the optimum if known. The sink
    sees the best objective so far: a model's early solutions can be worse than the
    baseline plan it was hinted with, which the solve still holds. The bound is clamped to
    that best objective: a solver's objectives and bounds in its model's rounded units can
    sit a nanosecond either side of its evaluated totals."""
    global _best
    if _sink is not None:
        _best = min(_best, float(objective))
        _sink(_best, None if bound is None else min(float(bound), _best))


@contextmanager
def reporting(sink: Sink | None) -> Iterator[None]:
    """Send this process's reports to ``sink`` while the block runs (None: leave the
    installed sink in place)."""
    if sink is None:
        yield
        return
    previous = _sink
    install(sink)
    try:
        yield
    finally:
        install(previous)
