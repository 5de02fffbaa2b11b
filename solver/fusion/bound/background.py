"""The cover bound in a process of its own, alongside the search, for solves given two
workers or more.

Run after the search, the cover gets what the search leaves (``solvers.BOUND_SHARE`` of a
window search's time, or nothing after a whole-graph model that runs to the limit), and on
small graphs pricing every op set takes longer than that: ``gen-residual-02`` of the
generated suite (11 ops, ``per_op``, 10 s, 2 workers) priced 249 of its 345 op sets in
2.3 s and reported a bound 56% below its schedule, where the complete cover, 8.2 s of
pricing, is 0.9% below it. Pricing is single-threaded Python, as is most of the search,
so on two cores each can have the whole time.

The child is a plain ``os.fork`` (no new interpreter to start; it works from a pool
worker too), forked before the search starts any CP-SAT thread; it dies with its parent
(``PR_SET_PDEATHSIG``), sends its pickled ``CoverBound`` through a pipe, a length first,
``SEND_S`` before the deadline, and is killed and reaped when the parent stops waiting.
A child that sends nothing in time leaves the parent to price what it can itself.
Deterministic solves do not use it (the parent's work clock would not see the child's
work, and which op sets the child prices in time depends on the wall clock).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import select
import signal
import time

from solver.fusion.bound.cover import CoverBound, cover_bound
from solver.fusion.context import ScoringContext

SEND_S = 0.25
"""The child ends its cover this much before the parent's deadline, to send it in time: the
cover's last CP-SAT solve has a 0.1-s floor and may end a little past its limit."""
HEADER = 8
"""Bytes of the length sent before the pickled bound."""
PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: a signal the child gets when its parent dies (a pool worker
terminated from outside never runs the ``finally`` that stops the child)."""


def start(ctx: ScoringContext, deadline: float) -> BackgroundCover | None:
    """A ``BackgroundCover`` of ``ctx`` until ``deadline`` (a ``time.monotonic()`` value),
    or None where no child can be forked (no ``os.fork``, or the fork failed): the solve
    then computes the cover after the search."""
    if not hasattr(os, "fork"):
        return None
    try:
        return BackgroundCover(ctx, deadline)
    except OSError:
        return None


class BackgroundCover:
    """A cover bound being computed in a forked child until ``deadline`` (a
    ``time.monotonic()`` value: the wall clock, which the child shares; never used under
    the work clock)."""

    def __init__(self, ctx: ScoringContext, deadline: float) -> None:
        read, write = os.pipe()
        parent = os.getpid()
        try:
            self._pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            raise
        if self._pid == 0:  # the child: never returns
            try:
                os.close(read)
                _die_with(parent)
                _child(ctx, deadline - SEND_S, write)
            finally:
                os._exit(1)
        os.close(write)
        self._read = read
        self._done = False

    def result(self, deadline: float) -> CoverBound | None:
        """The child's bound, waited for until ``deadline`` at the latest (one sent before
        it is taken however late this is called); None when it has not sent one by then (or
        failed). The child is gone afterwards."""
        data = b""
        poller = select.poll()
        poller.register(self._read, select.POLLIN)
        try:
            # what the child sent before the deadline is read even after it: a length,
            # then the pickled bound, so the message is whole before the child exits
            while len(data) < HEADER or len(data) < HEADER + int.from_bytes(data[:HEADER]):
                left = max(0.0, deadline - time.monotonic())
                if not poller.poll(left * 1000):
                    return None
                chunk = os.read(self._read, 1 << 16)
                if not chunk:
                    return None
                data += chunk
            found = pickle.loads(data[HEADER:])
            return found if isinstance(found, CoverBound) else None
        except (OSError, pickle.UnpicklingError, EOFError):
            return None
        finally:
            self.stop()

    def stop(self) -> None:
        """Kill the child (if still running) and reap it."""
        if self._done:
            return
        self._done = True
        os.close(self._read)
        try:
            os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _die_with(parent: int) -> None:
    """Have the kernel kill this child when ``parent`` dies (Linux; elsewhere the child
    still ends by its deadline); exit at once if it is already gone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _child(ctx: ScoringContext, deadline: float, write: int) -> None:
    """Compute the cover, write it pickled to ``write`` and exit without running the
    parent's exit handlers; exit 1 on any error (the parent then has no bound from it)."""
    code = 1
    try:
        data = pickle.dumps(cover_bound(ctx, deadline))
        with os.fdopen(write, "wb") as sink:
            sink.write(len(data).to_bytes(HEADER) + data)
        code = 0
    finally:
        os._exit(code)
