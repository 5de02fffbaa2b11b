"""Reading input files and reporting faults the same way in every subcommand."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from app.body import inflate, parse_json
from models.errors import InputValidationError, Issue

GZIP_MAGIC = b"\x1f\x8b"
console = Console(soft_wrap=True, highlight=False)
err_console = Console(stderr=True, soft_wrap=True, highlight=False)


def load_json(path: Path, what: str) -> Any:
    """Parse a JSON file (gzip-compressed or not: a ``.json.gz`` contest file) with the
    service's checks (encoding, nesting, number size), or raise InputValidationError saying
    why it cannot be used."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputValidationError(
            [Issue((), f"cannot read {path}: {exc.strerror or exc}", "file.unreadable")], what
        ) from None
    try:
        if raw[:2] == GZIP_MAGIC:
            raw = inflate(raw, str(path))
        return parse_json(raw, str(path))
    except InputValidationError as exc:
        raise InputValidationError(exc.issues, what) from None


def fail(exc: InputValidationError, as_json: bool = False) -> typer.Exit:
    """Print every fault (as text on stderr, or as JSON on stdout) and return exit code 1."""
    if as_json:
        console.print_json(data={"valid": False, **exc.as_dict()})
    else:
        err_console.print(exc.summary(), style="red", highlight=False, markup=False, soft_wrap=True)
    return typer.Exit(code=1)


def solver_fault(exc: Exception, kept: Path | None, as_json: bool = False) -> typer.Exit:
    """Report a solver's answer the evaluator refused (a fault of ours, not of the input)
    without a traceback, naming ``kept``, the file holding the best valid answer the solve
    offered before it, if any; exit code 1."""
    note = (f"{kept} holds the best valid answer found before it" if kept
            else "no valid answer was written")
    message = f"{exc} (a fault of layoutsat: please report it with the input file); {note}"
    if as_json:
        console.print_json(data={"valid": False, "error": message,
                                 "answer_kept": None if kept is None else str(kept)})
    else:
        err_console.print(message, style="red", markup=False)
    return typer.Exit(code=1)


def usage_error(message: str) -> typer.Exit:
    """Print a usage fault on stderr; exit code 2, as for a bad option."""
    err_console.print(message, style="red", markup=False)
    return typer.Exit(code=2)


def writable(path: Path) -> None:
    """Refuse, before any work is done, an output path that cannot be written: a folder, a
    missing or read-only folder."""
    if path.is_dir():
        raise usage_error(f"cannot write {path}: it is a folder; give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise usage_error(f"cannot write {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise usage_error(f"cannot write {path}: permission denied")


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` in one step (a temporary file beside it, then
    ``os.replace``): a process killed while writing leaves the previous file whole, never
    half of the next (a contest harness kills a solve at its time limit and reads the file)."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.write_text(text)
    os.replace(part, path)
