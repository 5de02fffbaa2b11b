"""The contract every problem family implements, and the one thing the service, the jobs,
the command line and the batch comparison know about a family.

A family turns a JSON document into a validated problem (``parse``), says how big it is
(``size``), checks solve options against it (``admit``), solves it within a ``Deadline``
(``solve``) and checks an answer independently (``evaluate``). Every fault is an
``InputValidationError``; every result is plain data that pickles across the worker
boundary. Adding a family is a folder under ``solver/`` with a ``family.py`` that builds
one ``Family`` object, plus its line in ``solver/families.py``.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from solver.deadline import Deadline

Progress = Callable[[float, float | None], None]
"""Receives a running solve's best objective and, when known, a proven lower bound."""

Seed = Annotated[int, Field(ge=0, le=2**31 - 1, description="random seed (CP-SAT and search)")]
Workers = Annotated[int, Field(ge=1, le=64, description="CP-SAT search threads per solve")]
TimeLimit = Annotated[float | None, Field(
    default=None, gt=0, le=86_400, allow_inf_nan=False,
    description="seconds for the whole solve; default: the service's "
    "(LAYOUTSAT_DEFAULT_TIME_LIMIT_S), else the solver's own")]


class SolveOptions(BaseModel):
    """What every family's solve takes; a family subclasses it with its own fields (and
    narrows ``solver`` to its solver names). Immutable, and validated where a request
    enters: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    solver: str = Field(description="which solver; see the family's list")
    time_limit_s: TimeLimit = None
    seed: Seed = 0
    workers: Workers = 1
    deterministic: bool = Field(
        default=False, description="bound the search by deterministic work instead of "
        "wall-clock time, so repeated solves of one input give byte-identical answers "
        "(the time limit still stops it; see docs/service.md)")

    @field_validator("solver", mode="wrap")
    @classmethod
    def _known_solver(cls, value: Any, handler: Any) -> Any:
        """An unknown solver named as such, with the family's solvers listed."""
        try:
            return handler(value)
        except ValidationError:
            known = typing.get_args(cls.model_fields["solver"].annotation)
            raise PydanticCustomError("solver.unknown", "unknown solver '{name}'; known: "
                                      "{known}", {"name": str(value)[:100],
                                                  "known": ", ".join(known)}) from None


class ThreadedOptions(SolveOptions):
    """The options of a family whose search gains from every core: more CP-SAT threads
    (iopddl: with one, CP-SAT runs no neighbourhood search of its own), and for fusion its
    cover bound in a second process beside the search. ``workers`` defaults to the
    machine's cores, at most 8."""

    workers: Workers = Field(default=min(8, os.cpu_count() or 1), description=(
        "CP-SAT search threads per solve (default: this machine's cores, at most 8)"))


class InvalidAnswer(RuntimeError):
    """A solver produced an answer its family's evaluator rejects: a bug of ours, never
    returned as an answer."""


@dataclass(frozen=True)
class Size:
    """What the service's limits count."""

    ops: int
    tensors: int


@dataclass(frozen=True)
class Solved:
    """A solve's answer as plain data: ``answer`` is the document the evaluator checks (a
    contest solution, a plan), ``result`` the whole response (answer, latencies, bounds)."""

    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    answer: Any
    result: BaseModel
    answer_field: str | None = None
    """The result's field that holds the answer, when the answer is part of the result and
    not the result itself (a contest solution, not a plan)."""

    def body(self, without_answer: bool = False) -> str:
        """The result as JSON; ``without_answer`` leaves out the answer (written to a file
        instead: a 65,000-entry solution buries the cost and the gap)."""
        omit = {self.answer_field} if without_answer and self.answer_field else None
        return self.result.model_dump_json(by_alias=True, exclude=omit)


@dataclass(frozen=True)
class Verdict:
    """The evaluator's word on an answer: valid or not, its recomputed total, every fault
    in words, and the family's full report."""

    valid: bool
    total: float | None
    errors: list[str] = field(default_factory=list)
    report: BaseModel | None = None


@dataclass(frozen=True)
class Timeline:
    """An answer over its schedule, for a plot: a ``steps`` series (x, y) against a
    ``capacity``, or ``segments`` (length, label) laid end to end."""

    title: str
    xlabel: str
    ylabel: str = ""
    steps: list[tuple[float, float]] = field(default_factory=list)
    capacity: float | None = None
    segments: list[tuple[float, str]] = field(default_factory=list)


P = TypeVar("P")
O = TypeVar("O", bound=SolveOptions)  # noqa: E741
E = TypeVar("E", bound=BaseModel)


class Family(Protocol, Generic[P, O, E]):
    """One problem family. ``document_model`` and ``answer_model`` document the JSON in the
    API's schema; ``parse`` is what validates it."""

    name: str
    title: str
    document: str
    """What a document is called in messages ("fusion problem")."""
    document_key: str
    """The document's field in an evaluate request ("problem", "graph")."""
    answer_name: str
    """What an answer is called in requests ("solution", "plan")."""
    document_model: type[BaseModel]
    answer_model: type[BaseModel]
    result_model: type[BaseModel]
    evaluation_model: type[BaseModel]
    options: type[O]
    evaluate_options: type[E]
    solvers: tuple[str, ...]
    hint: str
    """How to recognize a document of this family, for a message naming what was seen."""
    units: str
    """What totals are in ("us", "time units")."""
    size_names: tuple[str, str]
    """What ``Size`` counts, as the service's limits name them ("ops", "tensors")."""

    def recognizes(self, doc: Mapping[str, Any]) -> bool: ...

    def estimate(self, doc: Mapping[str, Any]) -> Size:
        """The size a raw document claims, counted before it is validated, so a huge one
        is refused before the work of validating it."""

    def parse(self, doc: Any) -> P: ...

    def parse_answer(self, doc: Any) -> Any: ...

    def size(self, problem: P) -> Size: ...

    def solvers_for(self, doc: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[str, ...]:
        """The solvers that apply to one raw document under these family options (a
        comparison runs each): ``solvers``, or a part of it (a layout graph on a mesh)."""

    def admit(self, problem: P, options: O) -> None:
        """Refuse options that cannot work on this problem (a device it does not fit)."""

    def default_time_limit_s(self, options: O) -> float: ...

    def summarize(self, problem: P) -> dict[str, Any]: ...

    def solve(self, problem: P, options: O, deadline: Deadline,
              progress: Progress | None = None) -> Solved: ...

    def evaluate(self, problem: P, answer: Any, options: E) -> Verdict: ...

    def describe_result(self, problem: P, result: BaseModel) -> list[str]:
        """Lines a person reads under a solve's headline (the command line)."""

    def describe_report(self, report: BaseModel) -> list[str]:
        """Lines a person reads under a valid answer's verdict."""

    def timeline(self, problem: P, answer: Any) -> Timeline:
        """An answer document over its schedule (the comparison's plots)."""


def evaluate_options_for(family: Family, options: SolveOptions) -> BaseModel:
    """The evaluate options that re-check a solve's answer: the solve options of the same
    names (a fusion solve's ``reduction_cost``), the rest at their defaults."""
    names = family.evaluate_options.model_fields.keys() & type(options).model_fields.keys()
    return family.evaluate_options.model_validate({n: getattr(options, n) for n in names})


def count_items(value: Any) -> int:
    """The length of a raw JSON list (0 for anything else), for ``Family.estimate``."""
    return len(value) if isinstance(value, list) else 0
