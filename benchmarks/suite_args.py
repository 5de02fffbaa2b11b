"""The command-line arguments that pick generated suite problems and reduction modes, shared
by the runners that time one part of the fusion solver on a few of them."""

from __future__ import annotations

import argparse

MODES = ["per_native_k", "per_op"]


def add_problem_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    """``--only NAME ...`` (suite problem names, ``default`` if none) and ``--modes``."""
    parser.add_argument("--only", nargs="+", default=[default],
                        help=f"suite problem names (default: {default})")
    parser.add_argument("--modes", nargs="+", default=MODES, choices=MODES)


def chosen(parser: argparse.ArgumentParser, names: list[str], problems: dict) -> dict:
    """The ``--only`` problems out of ``problems`` (name -> problem), in the order named; a
    usage error naming any the suite does not have."""
    unknown = [name for name in names if name not in problems]
    if unknown:
        parser.error(f"--only: no suite problem named {', '.join(unknown)}")
    return {name: problems[name] for name in names}
