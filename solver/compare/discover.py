"""Turn command-line PATHS (files, folders, globs) into the graph documents to compare."""

from __future__ import annotations

import glob
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.errors import InputValidationError
from solver.families import detect


@dataclass(frozen=True)
class GraphDoc:
    """One input document: its display id, its family and content, or why it cannot be used.

    A document that cannot be read or parsed still becomes a ``GraphDoc`` (with ``error``)
    when it was named explicitly, so the failure is recorded for every solver instead of
    aborting the batch.
    """

    graph: str
    data: Any = None
    family: str | None = None
    """The family's name (``solver.families``)."""
    error: str | None = None


def _candidates(spec: str) -> tuple[list[Path], bool]:
    """The files a PATHS entry names, and whether they were named explicitly (a file, or a
    glob) rather than found by walking a folder."""
    path = Path(spec)
    if path.is_dir():
        return sorted(p for p in path.rglob("*.json") if p.is_file()), False
    if glob.has_magic(spec):
        return sorted(Path(p) for p in glob.glob(spec, recursive=True) if Path(p).is_file()), True
    return [path], True


def _display(path: Path) -> str:
    """The path relative to the working directory when it is below it, else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load(path: Path, graph: str) -> GraphDoc:
    """Read and classify one file; faults become ``error`` rather than exceptions."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return GraphDoc(graph, error=f"cannot read {path}: {exc.strerror or exc}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return GraphDoc(graph, error=f"{path} is not JSON: {exc}")
    try:
        return GraphDoc(graph, data, detect(data).name)
    except InputValidationError as exc:
        return GraphDoc(graph, data, error=exc.issues[0].msg)


def discover(specs: list[str]) -> tuple[list[GraphDoc], list[str]]:
    """Every graph named by ``specs``, in order and without duplicates, and the notes on
    files skipped: a JSON file found in a folder that is no graph of either family (a
    results file, a solution) is skipped, while one named explicitly is a failed graph."""
    docs: list[GraphDoc] = []
    notes: list[str] = []
    seen: set[Path] = set()
    for spec in specs:
        files, explicit = _candidates(spec)
        if not files and not Path(spec).is_dir():
            docs.append(GraphDoc(spec, error=f"{spec}: no such file, folder or matching glob"))
        for path in files:
            if path.resolve() in seen:
                continue
            doc = load(path, _display(path))
            if doc.family is None and doc.data is not None and not explicit:
                notes.append(f"skipped {doc.graph}: a document of no known problem family")
                continue
            seen.add(path.resolve())
            docs.append(doc)
    return docs, notes
