"""Python's cycle collector during a solve: the young generations only.

A solve builds caches that live until it ends (scores, plans, floors: millions of objects
on a large graph), and every full collection of the cycle collector walks all of them to
find almost nothing: on the generated 160-op ``gen-transformer-10`` (``per_op``, 30 s, two
workers) 39 full collections took 11 s, the longest 0.42 s, one of which pushed a 10-s
solve 0.4 s past its limit. Reference counting frees what a solve drops, and the young
collections still catch cycles that die young. What is left when it ends (its caches,
cyclic through their context) is frozen, so that no full collection walks it while the
answer is written or sent, and the next solve of the process (a pool worker's) collects
it first.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

NEVER = 1 << 30
"""A full-collection threshold no solve reaches (young collections before one)."""


@contextmanager
def young_collections_only() -> Iterator[None]:
    """Hold full collections back while the body runs, and freeze what it leaves. Before
    the body, what earlier bodies froze is unfrozen and, when the default collector would
    have run a full collection by now (more young collections since the last one than its
    threshold), collected: a process holds no more than one solve's leftovers."""
    gc.unfreeze()
    threshold = gc.get_threshold()
    if gc.get_count()[2] > threshold[2]:
        gc.collect()
    gc.set_threshold(threshold[0], threshold[1], NEVER)
    try:
        yield
    finally:
        gc.freeze()
        gc.set_threshold(*threshold)
