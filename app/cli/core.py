"""Family-independent subcommands: ``serve`` and ``validate``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from app.cli.io import console, fail, load_json
from app.settings import Settings
from models.errors import InputValidationError
from models.family import detect_family
from models.fusion import parse_problem
from models.layout import parse_graph
from solver.fusion.problem import summarize
from solver.layout.problem import summarize as summarize_layout


def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = Settings().host,
    port: Annotated[int, typer.Option(help="TCP port.", min=1, max=65535)] = Settings().port,
    workers: Annotated[int, typer.Option(help="Server processes.", min=1)] = 1,
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs)."""
    uvicorn.run("app.main:create_app", factory=True, host=host, port=port, workers=workers)


def validate(
    file: Annotated[Path, typer.Argument(help="Problem JSON file (family detected from content).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Check a problem file; exit 0 when valid, 1 with every fault found when not."""
    try:
        data = load_json(file, "document")
        family = detect_family(data)
        if family == "layout":
            summary = summarize_layout(parse_graph(data))
        else:
            summary = summarize(parse_problem(data))
    except InputValidationError as exc:
        raise fail(exc, as_json) from None
    if family == "layout":
        _report_layout(file, summary, as_json)
        return
    if as_json:
        console.print_json(data={"valid": True, "family": "fusion", "summary": summary})
        return
    bounds = summary["lower_bounds"]
    console.print(f"{file}: valid fusion problem, {summary['ops']} ops "
                  f"{summary['ops_by_type']}, {summary['tensors']} tensors, "
                  f"{len(summary['graph_inputs'])} graph inputs, "
                  f"{len(summary['graph_outputs'])} graph outputs")
    for mode, b in bounds.items():
        console.print(f"  lower bound ({mode}): {b['total']:,.1f} "
                      f"(compute {b['compute']:,.1f}, I/O {b['io']:,.1f})")


def _report_layout(file: Path, summary: dict, as_json: bool) -> None:
    if as_json:
        console.print_json(data={"valid": True, "family": "layout", "summary": summary})
        return
    console.print(f"{file}: valid layout graph '{summary['name']}', {summary['ops']} ops "
                  f"{summary['ops_by_type']}, {summary['tensors']} tensors ({summary['inputs']} "
                  f"inputs, {summary['constants']} constants), {len(summary['outputs'])} outputs")
