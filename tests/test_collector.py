"""``solver.collector``: full collections held back during a solve, caught up after."""

from __future__ import annotations

import gc
import weakref

from solver.collector import NEVER, young_collections_only


class _Node:
    """Something to make a cycle of."""

    link: object = None


def _cycle() -> weakref.ref:
    node = _Node()
    node.link = node
    return weakref.ref(node)


def test_a_solve_holds_full_collections_back_and_gives_them_back():
    before = gc.get_threshold()
    with young_collections_only():
        assert gc.get_threshold() == (before[0], before[1], NEVER)
    assert gc.get_threshold() == before
    gc.unfreeze()


def test_what_a_solve_leaves_waits_frozen_for_the_next_one():
    """A pool worker runs one solve after another: what the first leaves in cycles (its
    caches point back at their context) is not walked while its answer goes out, and does
    not outlive the second's start."""
    gc.disable()  # no young collection may get there first
    try:
        with young_collections_only():
            left = _cycle()
        gc.collect()
        assert left() is not None  # frozen: even a full collection leaves it
        for _ in range(gc.get_threshold()[2] + 1):  # as long a solve as the collector
            gc.collect(1)                            # would have collected in full
        with young_collections_only():
            assert left() is None
    finally:
        gc.unfreeze()
        gc.enable()
