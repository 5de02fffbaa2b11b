"""When a solve must answer: one ``Deadline`` on one monotonic clock, from the route (or
the command line) to every CP-SAT call.

``time.monotonic()`` is Linux's CLOCK_MONOTONIC, shared by every process of a machine, so a
deadline made in the server holds unchanged in the worker process that solves.

Solver code never reads a clock of its own: it asks ``now()`` and sets CP-SAT's limit
with ``limit_cpsat`` and the LP solver's with ``lp_limit_ms``. Normally ``now()`` is the
wall clock. A *deterministic* solve runs under a work clock instead (``Deadline.running``):
it advances by the deterministic time each CP-SAT solve reports, by the LP solver's
iterations and by a fixed tick per ``now()`` call, so every decision that looks at the time sees the
same value in every run and repeated solves of one input give byte-identical answers.
The wall clock still stops a deterministic solve at its time limit; if it does, the
answer is not reproducible and ``Deadline.wall_stopped`` says so.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

WORK_SHARE = 0.3
"""Share of a deterministic solve's time limit given as its work budget (deterministic
seconds), so that on the reference machine the work ends well before the wall-clock
backstop and the answer repeats: there a deterministic second took up to 2 wall seconds
(the fusion search on benchmark 5 of the contest: 1.5; the layout search on BERT: 2) after
a 2 s start-up, so at half an 8 s limit the backstop ended the work."""
TICK_S = 1.5e-3
"""Deterministic seconds one clock reading costs: loops that read the clock each round
(the fusion window search, scoring, the layout segment search) advance the work clock.
Measured on the reference machine (2 cores): the fusion searches read the clock every
0.9-2.4 ms on benchmarks 5, 13 and 17 (1.7 ms on 5)."""
WRAP_UP_S_PER_OP = 3e-4
STOPPED_S = 1e9
"""How far the work clock jumps when the wall clock stops a deterministic solve."""
LP_ITERATION_S = 1e-4
"""Deterministic seconds charged per simplex iteration of an LP solve: CLP took 1.02 s for
the 9,446 iterations of BERT-base's whole-graph LP (342,614 rows, 2026-11-27)."""
EXIT_RESERVE = 0.05
EXIT_RESERVE_MAX_S = 0.5
"""Share of a command-line limit (at most this many seconds) kept for what follows the
search: a 279-op layout plan's evaluation took 0.07 s past a 6 s deadline."""
MODEL_VARIABLE_S = 5e-5
"""Deterministic seconds charged per variable of a CP-SAT model built, hinted and decoded
in Python (ResNet-50's 134,000-variable layout model: 1.3 s to build)."""


class _WallClock:
    def now(self) -> float:
        return time.monotonic()

    def charge(self, seconds: float) -> None:
        pass

    deterministic = False
    stopped = False


class _WorkClock:
    """Deterministic seconds of work since the solve started. Once the wall clock passes
    ``wall_at`` it jumps ``STOPPED_S`` ahead, past every budget, so that every loop ends
    (still finite and increasing: a loop that computes its own end from ``now()`` sees that
    end pass too)."""

    deterministic = True

    def __init__(self, wall_at: float):
        self.spent = 0.0
        self.wall_at = wall_at
        self.stopped = False

    def now(self) -> float:
        if not self.stopped and time.monotonic() >= self.wall_at:
            self.stopped = True
            self.spent += STOPPED_S
        self.spent += TICK_S
        return self.spent

    def charge(self, seconds: float) -> None:
        self.spent += max(0.0, seconds)


_WALL = _WallClock()
_clock: ContextVar[_WallClock | _WorkClock] = ContextVar("layoutsat_clock", default=_WALL)


def now() -> float:
    """The current time on the running solve's clock (wall or work), in seconds."""
    return _clock.get().now()


def deterministic() -> bool:
    """Whether the running solve is on the work clock (its answer must repeat)."""
    return _clock.get().deterministic


def limit_cpsat(parameters: Any, deadline: float, floor_s: float = 0.1) -> None:
    """Set a CP-SAT solver's limit to end by ``deadline`` (a ``now()`` value): wall seconds,
    or deterministic seconds with interleaved (reproducible) search."""
    left = max(floor_s, deadline - now())
    clock = _clock.get()
    if clock.deterministic:
        parameters.max_deterministic_time = left
        parameters.interleave_search = parameters.num_workers > 1
        wall_left = max(floor_s, clock.wall_at - time.monotonic())
        parameters.max_time_in_seconds = wall_left
    else:
        parameters.max_time_in_seconds = left


def cpsat_elapsed() -> Callable[[Any], float]:
    """How a CP-SAT solution callback reads the seconds its solve has taken: deterministic
    time under the work clock, else wall time. Called where the solve is started: the
    callback runs in CP-SAT's thread, where the running solve's clock is not seen."""
    if _clock.get().deterministic:
        return lambda callback: callback.deterministic_time
    return lambda callback: callback.wall_time


def charge(seconds: float) -> None:
    """Advance the work clock by ``seconds`` of work a loop priced itself (its count of
    steps times their measured cost), where one clock tick per round would be far off."""
    _clock.get().charge(seconds)


def charge_cpsat(solver: Any) -> None:
    """Advance the work clock by what a finished CP-SAT solve reports."""
    _clock.get().charge(solver.deterministic_time)


def lp_limit_ms(seconds: float) -> int:
    """The LP solver's wall limit in milliseconds: ``seconds`` normally; in a deterministic
    solve, the wall-clock backstop (it has no deterministic limit; its iterations are
    charged)."""
    clock = _clock.get()
    if clock.deterministic:
        seconds = clock.wall_at - time.monotonic()
    return max(1, int(seconds * 1000))


def charge_lp(iterations: int) -> None:
    _clock.get().charge(iterations * LP_ITERATION_S)


def charge_model(variables: int) -> None:
    """Advance the work clock by the Python work of a model of ``variables`` variables."""
    _clock.get().charge(variables * MODEL_VARIABLE_S)


@dataclass(frozen=True)
class Deadline:
    """A solve's end: ``at`` on ``time.monotonic()``; ``limit_s`` the time limit it was
    made from; ``deterministic``: bound the work by ``WORK_SHARE x limit_s`` deterministic
    seconds (the wall clock stays a backstop at ``at``)."""

    at: float
    limit_s: float
    deterministic: bool = False

    @classmethod
    def after(cls, seconds: float, *, deterministic: bool = False,
              start: float | None = None) -> Deadline:
        """``seconds`` from ``start`` (a ``time.monotonic()`` value; default: now)."""
        begun = time.monotonic() if start is None else start
        return cls(begun + seconds, seconds, deterministic)

    @classmethod
    def for_command(cls, seconds: float, started: float | None, *,
                    deterministic: bool = False) -> Deadline:
        """A command's limit: ``seconds`` from ``started`` (the process's start, when the
        command is the process, so the interpreter's start-up counts: a contest harness
        times the whole process; else now), less ``EXIT_RESERVE`` of it for what follows
        the search (the final evaluation, writing the answer)."""
        reserve = min(EXIT_RESERVE_MAX_S, EXIT_RESERVE * seconds)
        begun = time.monotonic() if started is None else started
        # the limit asked stays the work budget's base: the same options give the same
        # deterministic answer from the command line and from the service
        return cls(begun + seconds - reserve, seconds, deterministic)

    def remaining(self) -> float:
        """Wall seconds left (never negative)."""
        return max(0.0, self.at - time.monotonic())

    @contextmanager
    def running(self) -> Iterator[_RunningSolve]:
        """Run a solve under this deadline: yields the deadline as a ``now()`` value on the
        solve's clock (the wall clock, or a fresh work clock)."""
        if not self.deterministic:
            yield _RunningSolve(self.at, _WALL)
            return
        clock = _WorkClock(self.at)
        token = _clock.set(clock)
        try:
            yield _RunningSolve(WORK_SHARE * self.limit_s, clock)
        finally:
            _clock.reset(token)


@dataclass(frozen=True)
class _RunningSolve:
    at: float
    """The deadline on the running clock's scale (compare with ``now()``)."""
    clock: _WallClock | _WorkClock

    @property
    def wall_stopped(self) -> bool:
        """A deterministic solve that the wall clock ended: its answer may not repeat."""
        return self.clock.stopped



def process_start() -> float:
    """This process's start on ``time.monotonic()``: /proc's start time in clock ticks
    since boot against CLOCK_BOOTTIME; now when /proc is not there."""
    try:
        with open(f"/proc/{os.getpid()}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        started_after_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        since_start = time.clock_gettime(time.CLOCK_BOOTTIME) - started_after_boot
        return time.monotonic() - max(0.0, since_start)
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic()


def wrap_up_s(ops: int) -> float:
    """Time a solve keeps, out of its deadline, for what follows its search: building the
    answer and the evaluator's check of it grow with the graph (0.43 s for a 2,000-op
    fusion chain; 0.07 s for a 279-op layout graph)."""
    return WRAP_UP_S_PER_OP * ops


def run_cpsat(solver: Any, model: Any, callback: Any = None) -> int:
    """``solver.solve(model, callback)``, its work charged to the running solve's clock."""
    status = solver.solve(model, callback)
    charge_cpsat(solver)
    return status
