"""Run one solve in a fresh process, so no solve inherits the heap of the ones before it.

In one long-lived process a 10-s fusion solve came out 4.4% worse after a series of
layout solves than alone (``solver/compare/backends.py`` has the measurement); a benchmark
table must not depend on the order of its rows. The child is forked from a server that
has the solver's module imported, so a call costs a fork, not an interpreter start.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def isolated(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a process of its own; ``fn`` must be importable by name."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([fn.__module__])
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(fn, *args, **kwargs).result()
