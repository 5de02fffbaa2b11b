"""Python's cycle collector during a solve: the young generations only.

A solve builds caches that live until it ends (scores, plans, floors: millions of objects
on a large graph), and every full collection of the cycle collector walks all of them to
find almost nothing: on the generated 160-op ``gen-transformer-10`` (``per_op``, 30 s, two
workers) 39 full collections took 11 s, the longest 0.42 s, one of which pushed a 10-s
solve 0.4 s past its limit. Reference counting frees what a solve drops, and the young
collections still catch cycles that die young; longer-lived cycles wait for the next full
collection, once the solve is over.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

NEVER = 1 << 30
"""A full-collection threshold no solve reaches (young collections before one)."""

_ran = False
"""A solve of this process ended with full collections held back (a pool worker's)."""


@contextmanager
def young_collections_only() -> Iterator[None]:
    """Hold full collections back while the body runs. A pool worker's later solve first
    collects what earlier ones left in cycles (their caches: the default collector would
    have walked them during this solve anyway), so it holds no more than one solve's."""
    global _ran
    if _ran:
        gc.collect()
    threshold = gc.get_threshold()
    gc.set_threshold(threshold[0], threshold[1], NEVER)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        _ran = True
