"""``layoutsat <family> solve | evaluate | schema``, made from the family contract: every
field of the family's options model becomes an option of ``solve`` (``time_limit_s`` is
``--time-limit``), every field of its evaluate options one of ``evaluate``."""

from __future__ import annotations

import enum
import inspect
import json
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from app.cli import started
from app.cli.io import (
    console,
    err_console,
    fail,
    load_json,
    solver_fault,
    usage_error,
    writable,
    write_atomically,
)
from models.errors import InputValidationError, issues_from_pydantic
from solver import progress
from solver.deadline import Deadline
from solver.families import mismatch
from solver.family import Family, InvalidAnswer


def option_name(field: str) -> str:
    return "--" + field.removesuffix("_s").replace("_", "-")


def _scalar(name: str, annotation: Any) -> Any:
    """The command-line type of a field: a Literal becomes a choice; a union keeps its
    first scalar member (a device is given by preset name)."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        values = [str(a) for a in typing.get_args(annotation)]
        return enum.Enum(name, {v: v for v in values}, type=str)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                found = _scalar(name, arg)
                if found is not str or arg is str:
                    return found
        return str
    if origin is typing.Annotated:
        return _scalar(name, typing.get_args(annotation)[0])
    return annotation if annotation in (str, int, float, bool) else str


def option_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """A typer option per field of ``model`` (defaults None: the model fills them)."""
    params = []
    for name, info in model.model_fields.items():
        kind = _scalar(name, info.annotation)
        flag = option_name(name)
        names = (f"{flag}/--no-{flag[2:]}",) if kind is bool else (flag,)
        option = typer.Option(*names, help=_help(name, info))
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation=Annotated[kind | None, option]))
    return params


CLI_HELP = {"time_limit_s": "seconds for the whole process, start-up included [default: the "
                            "solver's own]"}


def _help(name: str, info: FieldInfo) -> str:
    text = CLI_HELP.get(name) or (info.description or "").rstrip(".")
    if _takes_object(info.annotation):
        text += " (an object as @FILE.json)"
    if info.default is not None and not callable(info.default) and \
            not isinstance(info.default, BaseModel):
        text += f" [default: {info.default}]"
    return text + "."


def _takes_object(annotation: Any) -> bool:
    """Whether a field accepts a model (given on the command line as a JSON file)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_takes_object(arg) for arg in typing.get_args(annotation))


def _with_signature(fn: Any, params: list[inspect.Parameter]) -> Any:
    fn.__signature__ = inspect.Signature(params)
    return fn


def _given(values: dict[str, Any]) -> dict[str, Any]:
    """The options given, a choice as its value, ``@FILE`` as the JSON it holds."""
    found = {}
    for name, value in values.items():
        if isinstance(value, enum.Enum):
            value = value.value
        elif isinstance(value, str) and value.startswith("@"):
            try:
                value = load_json(Path(value[1:]), option_name(name))
            except InputValidationError as exc:
                raise usage_error(f"{option_name(name)}: {exc.issues[0].msg}") from None
        if value is not None:
            found[name] = value
    return found


def _options(model: type[BaseModel], values: dict[str, Any]) -> Any:
    """The options model from the command line; a fault is a usage error (exit 2)."""
    try:
        return model.model_validate(_given(values))
    except ValidationError as exc:
        raise usage_error("; ".join(
            f"{option_name(str(i.loc[0])) if i.loc else 'options'}"
            f"{''.join(f'.{part}' for part in i.loc[1:])}: {i.msg}"
            for i in issues_from_pydantic(exc))) from None


def _problem(fam: Family, path: Path) -> Any:
    doc = load_json(path, fam.document)
    wrong = mismatch(fam, doc)
    if wrong is not None:
        raise wrong
    return fam.parse(doc)


def family_app(fam: Family) -> typer.Typer:
    app = typer.Typer(help=f"{fam.title}.", no_args_is_help=True)
    app.command("solve")(_solve_command(fam))
    app.command("evaluate")(_evaluate_command(fam))
    app.command("schema")(_schema_command(fam))
    return app


def _solve_command(fam: Family) -> Any:
    def solve(**values: Any) -> None:
        problem_file: Path = values.pop("problem_file")
        output, also = values.pop("output"), values.pop("output_option")
        if output and also and output != also:
            raise usage_error(f"OUTPUT is {output} but --output is {also}; give one")
        output = output or also
        as_json = values.pop("as_json")
        if output is not None:
            writable(output)
        written = False  # whether an answer of this solve is in the output yet
        try:
            options = _options(fam.options, values)
            problem = _problem(fam, problem_file)
            fam.admit(problem, options)
            limit = options.time_limit_s or fam.default_time_limit_s(options)
            deadline = Deadline.for_command(limit, started.at, deterministic=options.deterministic)

            def keep(answer: Any) -> None:
                nonlocal written
                _write_answer(output, answer)
                written = True

            with progress.keeping(None if output is None else keep):
                solved = fam.solve(problem, options, deadline)
        except InputValidationError as exc:
            raise fail(exc, as_json) from None
        except InvalidAnswer as exc:
            raise solver_fault(exc, output if written else None, as_json) from None
        if output is not None:
            _write_answer(output, solved.answer)
        if as_json:
            console.print_json(solved.body(without_answer=output is not None))
        else:
            gap = "" if solved.gap is None else f", gap {solved.gap:.1%}"
            bound = "" if solved.bound is None else f"; lower bound {solved.bound:,.2f}"
            console.print(f"{problem_file}: {options.solver}: {solved.status}, total "
                          f"{solved.objective:,.2f} {fam.units}{bound}{gap}"
                          + (f"; {fam.answer_name} written to {output}" if output else ""),
                          markup=False)
            for line in fam.describe_result(problem, solved.result):
                console.print(f"  {line}", markup=False)
        if solved.status == "invalid":
            raise typer.Exit(code=1)

    solve.__doc__ = (f"Solve a {fam.document}; the answer is checked by the evaluator "
                     "before it is written. Exit 1 on bad input or an invalid answer, 2 on "
                     "bad usage.")
    params = [
        inspect.Parameter("problem_file", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          annotation=Annotated[Path, typer.Argument(
                              help=f"The {fam.document} (JSON).")]),
        inspect.Parameter("output", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                          annotation=Annotated[Path | None, typer.Argument(
                              help=f"Write the {fam.answer_name} here.")]),
        inspect.Parameter("output_option", inspect.Parameter.KEYWORD_ONLY, default=None,
                          annotation=Annotated[Path | None, typer.Option(
                              "-o", "--output", help="Same as OUTPUT.")]),
        *option_parameters(fam.options),
        inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, default=False,
                          annotation=Annotated[bool, typer.Option(
                              "--json", help="Print the whole result as JSON (a contest "
                              "solution written to a file is left out of it).")]),
    ]
    return _with_signature(solve, params)


def _write_answer(path: Path, answer: Any) -> None:
    """Write an answer: the solve's final one, and before it each better one the solver
    offers (``progress.offer``), so the file holds a valid answer from the first one on."""
    write_atomically(path, json.dumps(answer, indent=1) + "\n")


def _evaluate_command(fam: Family) -> Any:
    def evaluate(**values: Any) -> None:
        problem_file: Path = values.pop("problem_file")
        answer_file: Path = values.pop("answer_file")
        as_json = values.pop("as_json")
        try:
            options = _options(fam.evaluate_options, values)
            problem = _problem(fam, problem_file)
            answer = fam.parse_answer(load_json(answer_file, fam.answer_name))
            verdict = fam.evaluate(problem, answer, options)
        except InputValidationError as exc:
            raise fail(exc, as_json) from None
        if as_json:
            console.print_json(verdict.report.model_dump_json(exclude_none=True))
        elif verdict.valid:
            console.print(f"{answer_file}: valid, total {verdict.total:,.4f} {fam.units}",
                          markup=False)
            for line in fam.describe_report(verdict.report):
                console.print(f"  {line}", markup=False)
        else:
            err_console.print(f"{answer_file}: invalid ({len(verdict.errors)} faults)",
                              markup=False)
            for error in verdict.errors:
                err_console.print(f"  {error}", markup=False)
        if not verdict.valid:
            raise typer.Exit(code=1)

    evaluate.__doc__ = (f"Check a {fam.answer_name} independently; exit 0 when valid, 1 with "
                        "every fault when not.")
    params = [
        inspect.Parameter("problem_file", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          annotation=Annotated[Path, typer.Argument(
                              help=f"The {fam.document} (JSON).")]),
        inspect.Parameter("answer_file", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          annotation=Annotated[Path, typer.Argument(
                              help=f"The {fam.answer_name} to check (JSON).")]),
        *option_parameters(fam.evaluate_options),
        inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, default=False,
                          annotation=Annotated[bool, typer.Option(
                              "--json", help="Print the verdict as JSON.")]),
    ]
    return _with_signature(evaluate, params)


def _schema_command(fam: Family) -> Any:
    def schema(answer: bool) -> None:
        model = fam.answer_model if answer else fam.document_model
        typer.echo(json.dumps(model.model_json_schema(by_alias=True), indent=1))

    schema.__doc__ = f"Print the JSON Schema of a {fam.document} (or of a {fam.answer_name})."
    return _with_signature(schema, [inspect.Parameter(
        "answer", inspect.Parameter.KEYWORD_ONLY, default=False,
        annotation=Annotated[bool, typer.Option(
            "--answer", help=f"The {fam.answer_name}'s schema instead.")])])
