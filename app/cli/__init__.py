"""The ``layoutsat`` command line: one root app, one sub-app per problem family."""

from __future__ import annotations

import typer

from app.cli import compare, core, fusion, importer, layout

cli = typer.Typer(
    name="layoutsat",
    help="Global layout, fusion and schedule optimizer for tiled ML accelerators.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
cli.command()(core.serve)
cli.command()(core.validate)
cli.command()(compare.compare)
cli.command("import")(importer.import_model)
cli.add_typer(fusion.app, name="fusion")
cli.add_typer(layout.app, name="layout")


def main() -> None:
    cli()
