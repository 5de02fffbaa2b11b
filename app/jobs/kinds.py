"""The three kinds of solve work (fusion, layout, compare): their options, how a payload is
validated and sized before it is accepted, and the cache key of a request.

Everything a worker needs is checked here, in the request, so a bad payload is a 422 at
submission and never a failed job later.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app import __version__
from app.limits import check_configs, check_graph_size, time_limit
from app.settings import Settings
from models.device import DeviceSpec
from models.errors import InputValidationError, Issue, Loc, issues_from_pydantic
from models.family import detect_family
from models.fusion import ReductionCost, parse_problem
from models.layout import parse_graph
from solver.compare.batch import check_solvers
from solver.fusion.solvers import CPSAT_TIME_LIMIT_S
from solver.fusion.solvers import DEFAULT_SOLVER as FUSION_DEFAULT
from solver.fusion.solvers import DEFAULT_TIME_LIMIT_S as FUSION_HEURISTIC_LIMIT_S
from solver.fusion.solvers import SOLVERS as FUSION_SOLVERS
from solver.layout import SOLVERS as LAYOUT_SOLVERS
from solver.layout.ops import DEFAULT_MAX_CONFIGS

Kind = Literal["fusion", "layout", "compare"]
Seed = Annotated[int, Field(ge=0, le=2**31 - 1, description="CP-SAT random seed")]
Workers = Annotated[int, Field(ge=1, le=64, description="CP-SAT search threads per solve")]
TimeLimit = Annotated[float | None, Field(
    default=None, gt=0, allow_inf_nan=False,
    description="seconds per solve; default: the service's (LAYOUTSAT_DEFAULT_TIME_LIMIT_S), "
    "else the solver's own (30 s fusion cpsat, 10 s otherwise)")]
LAYOUT_TIME_LIMIT_S = 10.0
MAX_GRAPHS = 500


class FusionOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    solver: str = Field(default=FUSION_DEFAULT, description=f"one of {list(FUSION_SOLVERS)}")
    time_limit_s: TimeLimit = None
    reduction_cost: ReductionCost = "per_native_k"
    seed: Seed = 0
    workers: Workers = 1


class LayoutOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    solver: str = Field(default="cpsat", description=f"one of {sorted(LAYOUT_SOLVERS)}")
    device: str | DeviceSpec | None = Field(
        default=None, description="preset name or spec; overrides the graph's device")
    time_limit_s: TimeLimit = None
    seed: Seed = 0
    workers: Workers = 1
    max_configs: Annotated[int, Field(ge=1)] = DEFAULT_MAX_CONFIGS
    explain: bool = Field(default=False,
                          description="add the differences from the best baseline's plan")


class CompareOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    solvers: list[str] | None = Field(
        default=None, description="default: every solver of each graph's family")
    time_limit_s: TimeLimit = None
    device: str | None = Field(default=None, description="device preset for layout graphs")
    reduction_cost: ReductionCost = "per_native_k"
    seed: Seed = 0
    workers: Workers = 1
    fail_if_worse: str | None = Field(
        default=None, description="regression gate: fails when cpsat is worse than this")


class GraphItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=200)]
    graph: dict[str, Any] = Field(description="a fusion problem or a layoutsat-graph")


class ComparePayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graphs: list[GraphItem] = Field(min_length=1, max_length=MAX_GRAPHS)


KIND_SOLVERS: dict[Kind, tuple[str, ...]] = {
    "fusion": tuple(FUSION_SOLVERS), "layout": tuple(LAYOUT_SOLVERS)}
OPTION_MODELS: dict[Kind, type[BaseModel]] = {
    "fusion": FusionOptions, "layout": LayoutOptions, "compare": CompareOptions}


@dataclass(frozen=True)
class Work:
    """An accepted request: the payload as validated JSON, the options with every default
    filled in, and what the scheduler needs to know about it."""

    kind: Kind
    payload: Any
    options: dict[str, Any]
    ops: int
    time_limit_s: float

    @property
    def cache_key(self) -> str:
        blob = json.dumps({"kind": self.kind, "payload": self.payload, "options": self.options,
                           "version": __version__}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def _located(exc: InputValidationError, loc: Loc) -> InputValidationError:
    return InputValidationError([Issue((*loc, *i.loc), i.msg, i.rule) for i in exc.issues],
                                exc.what)


def parse_options(kind: Kind, options: Any, loc: Loc = ("options",)) -> BaseModel:
    try:
        return OPTION_MODELS[kind].model_validate(options)
    except ValidationError as exc:
        raise InputValidationError(issues_from_pydantic(exc, loc), f"{kind} options") from None


def _fusion_size(payload: Any, loc: Loc) -> tuple[int, int]:
    try:
        problem = parse_problem(payload)
    except InputValidationError as exc:
        raise _located(exc, loc) from None
    return len(problem.op_types), len(problem.widths)


def _layout_size(payload: Any, loc: Loc) -> tuple[int, int]:
    try:
        graph = parse_graph(payload)
    except InputValidationError as exc:
        raise _located(exc, loc) from None
    return len(graph.ops), len(graph.tensors)


def _compare_graphs(payload: Any, settings: Settings, loc: Loc) -> tuple[list[GraphItem], int]:
    """Every graph parsed and sized up front: a malformed one is a 422, not a failed pair."""
    try:
        items = ComparePayload.model_validate(payload).graphs
    except ValidationError as exc:
        raise InputValidationError(issues_from_pydantic(exc, loc), "compare payload") from None
    issues: list[Issue] = []
    names: set[str] = set()
    largest = 0
    for i, item in enumerate(items):
        where = (*loc, "graphs", i)
        if item.name in names:
            issues.append(Issue((*where, "name"), f"duplicate graph name '{item.name}'",
                                "names.duplicate"))
        names.add(item.name)
        try:
            family = detect_family(item.graph)
            size = (_fusion_size if family == "fusion" else _layout_size)(item.graph, ())
        except InputValidationError as exc:
            issues += _located(exc, (*where, "graph")).issues
            continue
        check_graph_size(settings, *size, (*where, "graph"))
        largest = max(largest, size[0])
    if issues:
        raise InputValidationError(issues, "compare payload")
    return items, largest


def _default_limit(kind: Kind, options: BaseModel) -> float:
    if kind == "fusion" and options.solver == "cpsat":  # type: ignore[attr-defined]
        return CPSAT_TIME_LIMIT_S
    return FUSION_HEURISTIC_LIMIT_S if kind == "fusion" else LAYOUT_TIME_LIMIT_S


def accept(kind: Kind, payload: Any, options: Any, settings: Settings,
           payload_loc: Loc = ("payload",), options_loc: Loc = ("options",)) -> Work:
    """Validate, size and normalize a request, or raise a 422 / 413 naming the fault."""
    opts = parse_options(kind, options if options is not None else {}, options_loc)
    known = KIND_SOLVERS.get(kind)
    if known is not None and opts.solver not in known:  # type: ignore[attr-defined]
        raise InputValidationError([Issue(
            (*options_loc, "solver"), f"unknown solver '{opts.solver}'; known: "  # type: ignore[attr-defined]
            f"{', '.join(known)}", "solver.unknown")], "request")
    asked = opts.time_limit_s  # type: ignore[attr-defined]
    limit = time_limit(settings, asked, (*options_loc, "time_limit_s")) or _default_limit(
        kind, opts)
    opts = opts.model_copy(update={"time_limit_s": limit})
    if isinstance(opts, LayoutOptions):
        check_configs(settings, opts.max_configs, (*options_loc, "max_configs"))
    if isinstance(opts, CompareOptions):
        check_solvers(opts.solvers, opts.fail_if_worse)
        items, ops = _compare_graphs(payload, settings, payload_loc)
        payload = {"graphs": [i.model_dump() for i in items]}
    else:
        ops, tensors = (_fusion_size if kind == "fusion" else _layout_size)(payload, payload_loc)
        check_graph_size(settings, ops, tensors, payload_loc)
    dumped = opts.model_dump(mode="json", by_alias=True)
    return Work(kind, payload, dumped, ops, limit)
