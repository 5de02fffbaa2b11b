"""SPM offsets of a group's buffers, placed as the seed's SPMAllocPass does: in order of
the first op that needs them (ties: larger first), each at the lowest aligned offset
clear of every placed buffer whose lifetime overlaps its own."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    key: int
    size: int
    """bytes of all its copies, each padded to the alignment."""
    start: int
    end: int


def place(requests: list[Request], alignment: int) -> dict[int, int]:
    """Offset per request key."""
    placed: list[tuple[int, int, Request]] = []
    offsets: dict[int, int] = {}
    for r in sorted(requests, key=lambda r: (r.start, -r.size, r.key)):
        busy = sorted((lo, hi) for lo, hi, other in placed
                      if other.start <= r.end and r.start <= other.end)
        offset = 0
        for lo, hi in busy:
            if offset + r.size <= lo:
                break
            offset = max(offset, -(-hi // alignment) * alignment)
        offsets[r.key] = offset
        placed.append((offset, offset + r.size, r))
    return offsets
