"""Reading input files and reporting faults the same way in every subcommand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from models.errors import InputValidationError, Issue

console = Console(soft_wrap=True, highlight=False)
err_console = Console(stderr=True, soft_wrap=True, highlight=False)


def load_json(path: Path, what: str) -> Any:
    """Parse a JSON file, or raise InputValidationError saying why it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputValidationError(
            [Issue((), f"cannot read {path}: {exc.strerror or exc}", "file.unreadable")], what
        ) from None
    except UnicodeDecodeError:
        raise InputValidationError(
            [Issue((), f"{path} is not UTF-8 text", "file.encoding")], what
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputValidationError(
            [Issue((), f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column "
                   f"{exc.colno}", "json.invalid")],
            what,
        ) from None


def fail(exc: InputValidationError, as_json: bool = False) -> typer.Exit:
    """Print every fault (as text on stderr, or as JSON on stdout) and return exit code 1."""
    if as_json:
        console.print_json(data={"valid": False, **exc.as_dict()})
    else:
        err_console.print(exc.summary(), style="red", highlight=False, markup=False, soft_wrap=True)
    return typer.Exit(code=1)
