"""Where a long solve reports its best objective and bound while it runs, and offers its
best answer.

The service installs a sink in each worker process so a running job shows them; with no
sink installed (the CLI, the tests, compare) reporting costs nothing. The command line
keeps the answers offered (``keeping``): it writes each to its output file at once, so a
harness that kills the process at its time limit still finds the best answer so far.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Sink = Callable[[float, float | None], None]
AnswerSink = Callable[[Any], None]
"""Receives an answer document (what the family's evaluator checks), valid and better than
every one before it."""

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


_answers: AnswerSink | None = None
_kept = float("inf")


def offer(objective: float, answer: Callable[[], Any | None]) -> None:
    """A solver's answer of ``objective``: ``answer()`` builds its document, or None when
    the evaluator refuses it. Built only when a sink keeps answers and the objective beats
    every answer kept so far: building and checking one takes a solver's time."""
    global _kept
    if _answers is None or objective >= _kept:
        return
    document = answer()
    if document is not None:
        _kept = objective
        _answers(document)


@contextmanager
def keeping(sink: AnswerSink | None) -> Iterator[None]:
    """Send the answers offered while the block runs to ``sink`` (None: to nowhere)."""
    global _answers, _kept
    previous = _answers, _kept
    _answers, _kept = sink, float("inf")
    try:
        yield
    finally:
        _answers, _kept = previous
