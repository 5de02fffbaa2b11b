"""Where a long solve reports its best objective and bound while it runs.

The service installs a sink in each worker process so a running job shows them; with no
sink installed (the CLI, the tests, compare) reporting costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable

Sink = Callable[[float, float | None], None]

_sink: Sink | None = None


def install(sink: Sink | None) -> None:
    """Send this process's reports to ``sink`` (None: nowhere)."""
    global _sink
    _sink = sink


def active() -> bool:
    return _sink is not None


def report(objective: float, bound: float | None = None) -> None:
    """The best objective found so far, and a valid lower bound on the optimum if known."""
    if _sink is not None:
        _sink(float(objective), None if bound is None else float(bound))
