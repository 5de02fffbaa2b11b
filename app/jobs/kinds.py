"""The kinds of work the service accepts (a solve of any family, or a comparison): options
and payload validated, sized and admitted before a request is answered, and the cache key.

Everything a worker needs is checked here, in the request, so a bad payload is a 4xx at
submission and never a failed job later. Families are known only through the contract
(``solver.family``) and the registry (``solver.families``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

import models
import solver
from app import __version__
from app.limits import check_graph_size, time_limit
from app.settings import Settings
from models.errors import InputValidationError, Issue, Loc, issues_from_pydantic
from solver.compare.batch import check_solvers
from solver.compare.task import Options
from solver.families import FAMILIES, detect, family, mismatch
from solver.family import Family, Seed, SolveOptions, TimeLimit, Workers

COMPARE = "compare"
MAX_GRAPHS = 500
COMPARE_TIME_LIMIT_S = 10.0
COMMON_OPTIONS = frozenset(SolveOptions.model_fields)


class CompareOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    solvers: Annotated[list[str], Field(min_length=1)] | None = Field(
        default=None, description="default: every solver of each graph's family")
    time_limit_s: TimeLimit = None
    seed: Seed = 0
    workers: Workers = 1
    deterministic: bool = Field(default=False, description="as for a single solve")
    family_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per family, its own options for every graph of "
        "it, e.g. {\"layout\": {\"device\": \"blackhole_p150\"}, \"fusion\": "
        "{\"reduction_cost\": \"per_op\"}}")
    fail_if_worse: str | None = Field(
        default=None, description="regression gate: fails when cpsat is worse than this")


class GraphItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=200)]
    graph: dict[str, Any] = Field(description="a document of any family")


class ComparePayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graphs: list[GraphItem] = Field(min_length=1, max_length=MAX_GRAPHS)


@dataclass(frozen=True)
class Work:
    """An accepted request: the payload as validated JSON, the options with every default
    filled in, and what the scheduler needs to know about it."""

    kind: str
    payload: Any
    options: dict[str, Any]
    ops: int
    time_limit_s: float

    @property
    def deterministic(self) -> bool:
        return bool(self.options.get("deterministic", False))

    @property
    def size_name(self) -> str:
        """What ``ops`` counts: the family's items ("ops", "nodes")."""
        return FAMILIES[self.kind].size_names[0] if self.kind in FAMILIES else "ops"

    @property
    def cache_key(self) -> str:
        blob = json.dumps({"kind": self.kind, "payload": self.payload, "options": self.options,
                           "version": __version__, "code": answering_code()},
                          sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


@cache
def answering_code() -> str:
    """A digest of the code that decides answers (``solver`` and ``models``): a cached
    answer is reused only by the code that made it. The release alone does not tell: a
    server updated to a later commit of the same release answered a benchmark with the
    total an earlier one had cached, not the lower one it now finds."""
    return code_digest(tuple(Path(package.__file__).parent for package in (solver, models)))


def code_digest(roots: tuple[Path, ...]) -> str:
    """SHA-256 over every Python file under ``roots``, named and in order."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{root.name}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def located(exc: InputValidationError, loc: Loc) -> InputValidationError:
    """The same faults under ``loc`` (where the document sits in the request)."""
    return InputValidationError([Issue((*loc, *i.loc), i.msg, i.rule) for i in exc.issues],
                                exc.what)


def parse_options(model: type[BaseModel], options: Any, loc: Loc, what: str) -> Any:
    try:
        return model.model_validate(options if options is not None else {})
    except ValidationError as exc:
        raise InputValidationError(issues_from_pydantic(exc, loc), what) from None


def parse_document(fam: Family, payload: Any, settings: Settings, loc: Loc) -> Any:
    """The family's problem from ``payload``: its size checked against the limits before
    and after validation, faults located under ``loc``, a document of another family
    named as such."""
    wrong = mismatch(fam, payload)
    if wrong is not None:
        raise located(wrong, loc)
    estimate = fam.estimate(payload) if isinstance(payload, dict) else None
    if estimate is not None:
        check_graph_size(settings, fam.size_names, estimate.ops, estimate.tensors, loc)
    try:
        problem = fam.parse(payload)
    except InputValidationError as exc:
        raise located(exc, loc) from None
    size = fam.size(problem)
    check_graph_size(settings, fam.size_names, size.ops, size.tensors, loc)
    return problem


def admit(fam: Family, problem: Any, options: SolveOptions, payload_loc: Loc,
          options_loc: Loc) -> None:
    """The family's check of options against the problem; a fault whose location starts
    with ``options`` concerns an option, any other the document."""
    try:
        fam.admit(problem, options)
    except InputValidationError as exc:
        issues = [Issue((*options_loc, *i.loc[1:]) if i.loc[:1] == ("options",)
                        else (*payload_loc, *i.loc), i.msg, i.rule) for i in exc.issues]
        raise InputValidationError(issues, exc.what) from None


def _solve(fam: Family, payload: Any, options: Any, settings: Settings, payload_loc: Loc,
           options_loc: Loc, admitted: bool) -> Work:
    opts = parse_options(fam.options, options, options_loc, f"{fam.name} options")
    limit = time_limit(settings, opts.time_limit_s, (*options_loc, "time_limit_s")) \
        or fam.default_time_limit_s(opts)
    opts = opts.model_copy(update={"time_limit_s": limit})
    problem = parse_document(fam, payload, settings, payload_loc)
    if admitted:
        admit(fam, problem, opts, payload_loc, options_loc)
    return Work(fam.name, payload, opts.model_dump(mode="json", by_alias=True),
                fam.size(problem).ops, limit)


def family_option_issues(given: dict[str, dict[str, Any]], loc: Loc) -> list[Issue]:
    """Each family's own options in a comparison, checked against its options model."""
    issues = []
    for name, values in given.items():
        where = (*loc, "family_options", name)
        if name not in FAMILIES:
            issues.append(Issue(where, f"unknown problem family '{name[:100]}'; known: "
                                f"{', '.join(FAMILIES)}", "family.unknown"))
            continue
        shared = sorted(COMMON_OPTIONS & values.keys())
        if shared:
            issues.append(Issue(where, f"{', '.join(shared)} apply to every graph: give "
                                "them beside family_options", "options.shared"))
            continue
        try:
            compare_options_of(FAMILIES[name], values)
        except ValidationError as exc:
            issues += issues_from_pydantic(exc, where)
    return issues


def compare_options_of(fam: Family, values: dict[str, Any],
                       time_limit_s: float = COMPARE_TIME_LIMIT_S) -> SolveOptions:
    """A family's options model for a comparison's graphs of it, as each pair will build
    it (``solver.compare.task.Options``), under its first solver."""
    return Options(time_limit_s, family_options={fam.name: values}).for_family(
        fam.name, fam.solvers[0])


def _compare(payload: Any, options: Any, settings: Settings, payload_loc: Loc,
             options_loc: Loc) -> Work:
    """Every graph parsed, sized and admitted up front: a malformed one is a 4xx, not a
    failed pair."""
    opts = parse_options(CompareOptions, options, options_loc, "compare options")
    limit = time_limit(settings, opts.time_limit_s, (*options_loc, "time_limit_s")) \
        or COMPARE_TIME_LIMIT_S
    opts = opts.model_copy(update={"time_limit_s": limit})
    if opts.solvers and len(set(opts.solvers)) < len(opts.solvers):
        raise InputValidationError([Issue((*options_loc, "solvers"), "a solver is listed "
                                          "twice; list each once", "solvers.duplicate")],
                                   "compare options")
    check_solvers(opts.solvers, opts.fail_if_worse)
    issues = family_option_issues(opts.family_options, options_loc)
    try:
        items = ComparePayload.model_validate(payload).graphs
    except ValidationError as exc:
        raise InputValidationError(issues + issues_from_pydantic(exc, payload_loc),
                                   "compare payload") from None
    names: set[str] = set()
    largest = 0
    for i, item in enumerate(items):
        where = (*payload_loc, "graphs", i)
        if item.name in names:
            issues.append(Issue((*where, "name"), f"duplicate graph name '{item.name}'",
                                "names.duplicate"))
        names.add(item.name)
        try:
            fam = detect(item.graph)
        except InputValidationError as exc:
            issues += located(exc, (*where, "graph")).issues
            continue
        try:
            problem = parse_document(fam, item.graph, settings, (*where, "graph"))
            solver_options = compare_options_of(fam, opts.family_options.get(fam.name, {}),
                                                time_limit_s=limit)
            admit(fam, problem, solver_options, (*where, "graph"),
                  (*options_loc, "family_options", fam.name))
        except InputValidationError as exc:
            issues += exc.issues
            continue
        except ValidationError:
            continue  # the family's options fault is already listed
        largest = max(largest, fam.size(problem).ops)
    if issues:
        raise InputValidationError(issues, "compare request")
    payload = {"graphs": [i.model_dump() for i in items]}
    return Work(COMPARE, payload, opts.model_dump(mode="json"), largest, limit)


def evaluation(fam: Family, body: Any, options: Any, settings: Settings) -> Any:
    """The family's report on the answer in an evaluate request's ``body`` (``{document:
    ..., answer: ...}``), every fault located in the request."""
    opts = parse_options(fam.evaluate_options, options, ("query",), "evaluate options")
    keys = {fam.document_key, fam.answer_name}
    if not isinstance(body, dict) or set(body) != keys:
        shown = f"an object with {sorted(map(str, body))[:6]}" if isinstance(body, dict) \
            else type(body).__name__
        raise InputValidationError([Issue(
            (), f"the body is {{\"{fam.document_key}\": ..., \"{fam.answer_name}\": ...}}, "
            f"got {shown}", "schema.evaluate_body")], "request")
    problem = parse_document(fam, body[fam.document_key], settings, (fam.document_key,))
    try:
        answer = fam.parse_answer(body[fam.answer_name])
        return fam.evaluate(problem, answer, opts).report
    except InputValidationError as exc:
        raise located(exc, (fam.answer_name,)) from None


def accept(kind: str, payload: Any, options: Any, settings: Settings,
           payload_loc: Loc = ("payload",), options_loc: Loc = ("options",),
           admitted: bool = True) -> Work:
    """Validate, size, admit and normalize a request, or raise a 4xx naming the fault.
    ``admitted=False`` leaves the family's admission check (options against the problem,
    milliseconds of analysis) to the worker: a synchronous solve gets the same 422 on the
    same request, without that work in the server process."""
    if kind == COMPARE:
        return _compare(payload, options, settings, payload_loc, options_loc)
    return _solve(family(kind), payload, options, settings, payload_loc, options_loc,
                  admitted)
