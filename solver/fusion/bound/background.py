"""The cover bound in a process of its own, alongside the search, for solves given two
workers or more.

Run after the search, the cover gets what the search leaves (``solvers.BOUND_SHARE`` of a
window search's time, or nothing after a whole-graph model that runs to the limit), and on
small graphs pricing every op set takes longer than that: ``gen-residual-02`` of the
generated suite (11 ops, ``per_op``, 10 s, 2 workers) priced 249 of its 345 op sets in
2.3 s and reported a bound 56% below its schedule, where the complete cover, 8.2 s of
pricing, is 0.9% below it. Pricing is single-threaded Python, as is most of the search,
so on two cores each can have the whole time.

The child is a plain ``os.fork`` (the service's pool workers may not start
``multiprocessing`` children), forked before the search starts any CP-SAT thread, and
sends its pickled ``CoverBound`` through a pipe; it is killed when the parent stops
waiting. Deterministic solves do not use it (the parent's work clock would not see the
child's work, and which op sets the child prices in time depends on the wall clock).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import time

from solver.fusion.bound.cover import CoverBound, cover_bound
from solver.fusion.context import ScoringContext

SEND_S = 0.05
"""The child ends its cover this much before the parent's deadline, to send it in time."""
HEADER = 8
"""Bytes of the length sent before the pickled bound."""


class BackgroundCover:
    """A cover bound being computed in a forked child until ``deadline`` (a
    ``time.monotonic()`` value: the wall clock, which the child shares)."""

    def __init__(self, ctx: ScoringContext, deadline: float) -> None:
        read, write = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:  # the child: never returns
            os.close(read)
            _child(ctx, deadline - SEND_S, write)
        os.close(write)
        self._read = read
        self._done = False

    def result(self, deadline: float) -> CoverBound | None:
        """The child's bound, waited for until ``deadline`` at the latest (one sent before
        it is taken however late this is called); None when it has not sent one by then (or
        failed). The child is gone afterwards."""
        data = b""
        try:
            # what the child sent before the deadline is read even after it: a length,
            # then the pickled bound, so the message is whole before the child exits
            while len(data) < HEADER or len(data) < HEADER + int.from_bytes(data[:HEADER]):
                left = max(0.0, deadline - time.monotonic())
                if not select.select([self._read], [], [], left)[0]:
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
        except ProcessLookupError:
            pass
        os.waitpid(self._pid, 0)


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
