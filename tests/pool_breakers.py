"""Work a test sends to the service's pool to break it on purpose: an exception that the
server process cannot unpickle (its constructor wants two arguments, its pickle has one),
which makes pebble's result thread fail and the whole pool stop."""

from __future__ import annotations


class Unpicklable(Exception):
    def __init__(self, first: int, second: int):
        super().__init__(f"{first}, {second}")


def raise_unpicklable() -> None:
    raise Unpicklable(1, 2)
