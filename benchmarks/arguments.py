"""Types for the runners' numeric options, so that every runner refuses a bad number the
same way: a usage error naming the option and the rule (``argument --time-limit: must be
positive, not 0``) as argparse reads it, not a check after parsing in each runner (or
none: a zero limit once ran every solve of a runner at no time at all)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

Number = TypeVar("Number", int, float)


def positive(text: str) -> float:
    """A finite number above zero (a time limit, a deadline)."""
    value = _number(text, float)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def share(text: str) -> float:
    """A number from 0 to 1 (a tightness, a fraction of a range)."""
    value = _number(text, float)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, not {text}")
    return value


def at_least(least: int) -> Callable[[str], int]:
    """An integer type refusing values below ``least`` (workers, counts, budgets)."""
    def integer(text: str) -> int:
        value = _number(text, int)
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {text}")
        return value
    return integer


def _number(text: str, kind: type[Number]) -> Number:
    try:
        return kind(text)
    except ValueError:
        wanted = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"'{text}' is not {wanted}") from None
