"""``solver.collector``: full collections held back during a solve, caught up after."""

from __future__ import annotations

import gc
import weakref

from solver.collector import NEVER, young_collections_only


class _Node:
    """Something to make a cycle of."""

    link: object = None


def test_a_solve_holds_full_collections_back_and_gives_them_back():
    before = gc.get_threshold()
    with young_collections_only():
        assert gc.get_threshold() == (before[0], before[1], NEVER)
    assert gc.get_threshold() == before


def test_a_later_solve_first_collects_the_cycles_an_earlier_one_left():
    """A pool worker runs one solve after another: what the first left in cycles (its
    caches point back at their context) must not outlive the second's start."""
    with young_collections_only():
        pass
    gc.disable()  # no young collection may get there first
    try:
        node = _Node()
        node.link = node
        left = weakref.ref(node)
        del node
        assert left() is not None
        with young_collections_only():
            assert left() is None
    finally:
        gc.enable()
