"""Family-independent subcommands: ``serve`` and ``validate``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from app.cli.io import console, fail, load_json
from app.settings import Settings
from models.errors import InputValidationError
from solver.families import detect


def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = Settings().host,
    port: Annotated[int, typer.Option(help="TCP port.", min=1, max=65535)] = Settings().port,
    workers: Annotated[int, typer.Option(help="Server processes.", min=1)] = 1,
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs)."""
    uvicorn.run("app.main:create_app", factory=True, host=host, port=port, workers=workers,
                timeout_graceful_shutdown=max(1, round(Settings().shutdown_timeout_s)))


def validate(
    file: Annotated[Path, typer.Argument(help="A document of any family (told apart by "
                                               "its content).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Check a problem file; exit 0 when valid, 1 with every fault found when not."""
    try:
        data = load_json(file, "document")
        fam = detect(data)
        summary = fam.summarize(fam.parse(data))
    except InputValidationError as exc:
        raise fail(exc, as_json) from None
    if as_json:
        console.print_json(data={"valid": True, "family": fam.name, "summary": summary})
        return
    console.print(f"{file}: valid {fam.document}", markup=False)
    for key, value in summary.items():
        console.print(f"  {key}: {_shown(value)}", markup=False)


def _shown(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_shown(v)}" for k, v in value.items())
    if isinstance(value, list) and len(value) > 12:
        return f"{value[:12]} ... ({len(value)} in all)"
    return str(value)
