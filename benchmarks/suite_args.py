"""The command-line arguments that pick generated suite problems and reduction modes, shared
by the runners that time one part of the fusion solver on a few of them."""

from __future__ import annotations

import argparse

MODES = ["per_native_k", "per_op"]


def add_problem_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    """``--only NAME ...`` (suite problem names, ``default`` if none) and ``--modes``."""
    parser.add_argument("--only", nargs="+", default=[default],
                        help=f"suite problem names (default: {default})")
    parser.add_argument("--modes", nargs="+", choices=MODES,
                        help="reduction modes (default: both, or the one of the reading asked for)")


def chosen(parser: argparse.ArgumentParser, names: list[str], problems: dict) -> dict:
    """The ``--only`` problems out of ``problems`` (name -> problem), in the order named; a
    usage error naming any the suite does not have."""
    unknown = [name for name in names if name not in problems]
    if unknown:
        parser.error(f"--only: no suite problem named {', '.join(unknown)}")
    return {name: problems[name] for name in names}


def reading_modes(parser: argparse.ArgumentParser, modes: list[str] | None,
                  semantics: str = "default") -> list[str]:
    """The ``--modes`` asked for (each once), else the reading's: both under SEMANTICS.md,
    ``per_op`` under teamkorea, whose one mode it is (a usage error for any other)."""
    chosen = modes or (["per_op"] if semantics == "teamkorea" else list(MODES))
    if semantics == "teamkorea" and chosen != ["per_op"] * len(chosen):
        parser.error("--semantics teamkorea has one mode: --modes per_op")
    return list(dict.fromkeys(chosen))
