"""``layoutsat import``: an ONNX model in, a layoutsat graph out, with the import report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from app.cli.io import console, err_console, fail
from app.onnx_support import importer, parse_dims
from models.errors import InputValidationError

DType = Literal["bf16", "f32", "bfp8", "bfp4"]


def import_model(
    model: Annotated[Path, typer.Argument(help="ONNX model file.")],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write the graph here (default: stdout).")] = None,
    batch: Annotated[int | None, typer.Option(help="Value of a dynamic batch dimension.",
                                              min=1)] = None,
    seq_len: Annotated[int | None, typer.Option(
        help="Value of a dynamic sequence-length dimension.", min=1)] = None,
    dim: Annotated[list[str], typer.Option(
        help="Value of any named dynamic dimension, NAME=VALUE (repeatable).")] = [],  # noqa: B006
    dtype: Annotated[DType, typer.Option(help="Activation dtype.")] = "bf16",
    weight_dtype: Annotated[DType | None, typer.Option(
        help="Dtype of matmul/linear/conv/embedding weights (default: --dtype).")] = None,
    repeat: Annotated[int, typer.Option(
        help="Stack N copies of the model, chained through the input and first output of the "
             "same shape (export one decoder layer, get N).", min=1, max=1024)] = 1,
    name: Annotated[str | None, typer.Option(help="Graph name (default: the model's).")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Import an ONNX model: shape inference, constant folding, operator mapping; anything
    unmapped becomes an opaque op with its real shapes. Exit 1 on a bad model."""
    try:
        importer_module = importer()
        data = model.read_bytes()
        options = importer_module.ImportOptions(batch, seq_len, parse_dims(dim), dtype,
                                                weight_dtype, repeat, name)
        result = importer_module.import_onnx(data, options)
    except OSError as exc:
        err_console.print(f"cannot read {model}: {exc.strerror or exc}", markup=False)
        raise typer.Exit(code=1) from None
    except InputValidationError as exc:
        raise fail(exc, as_json) from None
    text = result.graph.model_dump_json(by_alias=True, exclude_defaults=True)
    doc = {"format": "layoutsat-graph", "version": 1, **json.loads(text)}
    body = json.dumps(doc, separators=(",", ":")) + "\n"
    if output:
        output.write_text(body)
    else:
        typer.echo(body, nl=False)
    report = result.report
    if not (as_json and not output):  # there the report, warnings included, is on stderr
        for warning in report["warnings"]:
            err_console.print(f"warning: {warning}", style="yellow", markup=False)
    if as_json:
        err_console.print_json(data=report) if not output else console.print_json(data=report)
        return
    out = console if output else err_console
    out.print(f"{model} -> {output or 'stdout'}: {report['ops']} ops, {report['tensors']} "
              f"tensors", markup=False)
    for key in ("mapped", "fused", "folded", "opaque"):
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report[key].items())) or "none"
        out.print(f"  {key}: {counts}", markup=False)
    if report["permutes_inserted"]:
        out.print(f"  permutes inserted between channels-last and channels-first ops: "
                  f"{report['permutes_inserted']}", markup=False)
    removed = [f"{report[key]} {what}" for key, what in (
        ("permutes_cancelled", "permutes cancelled"),
        ("permutes_as_reshape", "permutes that only relabel dims made reshapes"),
        ("reshapes_cancelled", "reshapes cancelled")) if report[key]]
    if removed:
        out.print(f"  layout ops: {', '.join(removed)}", markup=False)
    for note in report["notes"]:
        out.print(f"  note: {note}", markup=False)
