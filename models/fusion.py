"""Schemas of the MLSys 2026 contest problem and solution, with exactly the contest's field names.

The pydantic models check types; ``problem_issues`` checks the structural rules of
SEMANTICS.md S1 that span several fields (lengths, index ranges, shapes, cycles).
``parse_problem`` runs both and is the only sanctioned way to turn untrusted JSON into
a ``FusionProblem``: everything downstream may assume a structurally valid graph.
"""

from __future__ import annotations

import graphlib
import math
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError, WithJsonSchema
from pydantic_core import PydanticCustomError

from models.errors import InputValidationError, Issue, issues_from_pydantic, raise_if_any
from models.timing import Deterministic, WallTime

OpType = Literal["MatMul", "Pointwise"]
PER_OP_ARRAYS = ("inputs", "outputs", "base_costs", "op_types")
MAX_DIM = 2**20
"""Largest tensor dimension and native granularity: every latency and every integer the
solvers scale stays exact and far within int64 / float range below these bounds."""
MAX_COST = 1e12
MIN_POSITIVE = 1e-6
"""Smallest non-zero base cost and bandwidth (a denormal would make the exact time unit
astronomically fine)."""
MAX_CAPACITY = 2**53
MAX_BANDWIDTH = 1e12


def _finite_number(value: Any) -> int | float:
    """A JSON number kept as given (ints stay ints); bools, strings, NaN and inf are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("number_type", "Input should be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("finite_number", "Input should be a finite number")
    return value


Number = Annotated[int | float, PlainValidator(_finite_number), WithJsonSchema({"type": "number"})]
TensorList = list[int]


class FusionProblem(BaseModel):
    """An MLSys 2026 problem: a DAG of MatMul/Pointwise ops over 2-D tensors plus the hardware."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    widths: list[int] = Field(description="width (columns) of tensor[i]")
    heights: list[int] = Field(description="height (rows) of tensor[i]")
    inputs: list[TensorList] = Field(description="inputs[k]: tensors consumed by op k, in order")
    outputs: list[TensorList] = Field(description="outputs[k]: tensors produced by op k")
    base_costs: list[Number] = Field(description="base_costs[k]: cost of op k per native tile")
    op_types: list[OpType] = Field(description="op_types[k]: 'MatMul' or 'Pointwise'")
    fast_memory_capacity: Number = Field(description="fast-memory capacity in elements")
    slow_memory_bandwidth: Number = Field(description="elements moved per time unit")
    native_granularity: list[int] = Field(
        description="[w, h] (native k = w) or [w, h, k]", min_length=2, max_length=3
    )

    @property
    def num_tensors(self) -> int:
        return len(self.widths)

    @property
    def num_ops(self) -> int:
        return len(self.op_types)


class FusionSolution(BaseModel):
    """A contest solution: parallel lists, one entry per subgraph in execution order."""

    model_config = ConfigDict(strict=True, extra="ignore")

    subgraphs: list[list[int]] = Field(description="ops of each subgraph, in execution order")
    granularities: list[Annotated[list[int], Field(min_length=3, max_length=3)]] = Field(
        description="[w, h, k] of each subgraph"
    )
    tensors_to_retain: list[list[int]] = Field(
        description="tensors each subgraph keeps resident in fast memory for the next one"
    )
    traversal_orders: list[list[int] | None] | None = Field(
        default=None, description="tile order of each subgraph; null means raster"
    )
    subgraph_latencies: list[Number] = Field(description="claimed latency of each subgraph")


def parse_problem(data: Any) -> FusionProblem:
    """Validate untrusted JSON data into a FusionProblem or raise with every fault found."""
    if not isinstance(data, Mapping):
        raise InputValidationError(
            [Issue((), f"expected a JSON object, got {type(data).__name__}", "schema.type")],
            "fusion problem",
        )
    try:
        problem = FusionProblem.model_validate(data)
    except ValidationError as exc:
        raise InputValidationError(issues_from_pydantic(exc), "fusion problem") from None
    raise_if_any(problem_issues(problem), "fusion problem")
    return problem


def parse_solution(data: Any) -> FusionSolution:
    """Validate the JSON shape of a solution; semantic rules are the evaluator's job."""
    if not isinstance(data, Mapping):
        raise InputValidationError(
            [Issue((), f"expected a JSON object, got {type(data).__name__}", "schema.type")],
            "fusion solution",
        )
    try:
        return FusionSolution.model_validate(data)
    except ValidationError as exc:
        raise InputValidationError(issues_from_pydantic(exc), "fusion solution") from None


def problem_issues(p: FusionProblem) -> list[Issue]:
    """Every cross-field fault of a type-correct problem (SEMANTICS.md S1).

    Array lengths, index ranges and value signs are checked first; when those fail the
    per-op arrays no longer line up, so the shape and graph checks would only add noise
    and are skipped.
    """
    basic = list(_length_issues(p)) + list(_value_issues(p)) + list(_index_issues(p))
    if basic:
        return basic
    return list(_op_shape_issues(p)) + list(_producer_issues(p)) + list(_cycle_issues(p))


def _length_issues(p: FusionProblem) -> Iterator[Issue]:
    if len(p.widths) != len(p.heights):
        yield Issue(
            ("heights",),
            f"heights has {len(p.heights)} entries but widths has {len(p.widths)}; "
            "both describe the same tensors and must have equal length",
            "length.tensors",
        )
    lengths = {name: len(getattr(p, name)) for name in PER_OP_ARRAYS}
    ref = lengths["op_types"]
    for name in ("inputs", "outputs", "base_costs"):
        if lengths[name] != ref:
            yield Issue(
                (name,),
                f"{name} has {lengths[name]} entries but op_types has {ref}; "
                "every per-op array needs one entry per op",
                "length.ops",
            )
    if ref == 0:
        yield Issue(("op_types",), "the graph has no ops", "length.ops")


def _value_issues(p: FusionProblem) -> Iterator[Issue]:
    for name in ("widths", "heights"):
        for i, v in enumerate(getattr(p, name)):
            if v <= 0:
                yield Issue((name, i), f"tensor dimension must be positive, got {v}",
                            "positive.dim")
            elif v > MAX_DIM:
                yield Issue((name, i), f"tensor dimension {v} is above the largest this "
                            f"service takes, {MAX_DIM:,}", "range.dim")
    for k, cost in enumerate(p.base_costs):
        if cost < 0:
            yield Issue(("base_costs", k), f"base cost must be >= 0, got {cost}", "nonneg.cost")
        elif cost > MAX_COST or 0 < cost < MIN_POSITIVE:
            yield Issue(("base_costs", k), f"base cost {cost:g} is outside 0 or "
                        f"[{MIN_POSITIVE:g}, {MAX_COST:g}]", "range.cost")
    for name, most in (("fast_memory_capacity", MAX_CAPACITY),
                       ("slow_memory_bandwidth", MAX_BANDWIDTH)):
        v = getattr(p, name)
        if v <= 0:
            yield Issue((name,), f"{name} must be positive, got {v}", "positive.hardware")
        elif v > most or v < MIN_POSITIVE:
            yield Issue((name,), f"{name} {v:g} is outside [{MIN_POSITIVE:g}, {most:g}]",
                        "range.hardware")
    for i, v in enumerate(p.native_granularity):
        if v <= 0:
            yield Issue(
                ("native_granularity", i), f"native granularity must be positive, got {v}",
                "positive.native",
            )
        elif v > MAX_DIM:
            yield Issue(("native_granularity", i), f"native granularity {v} is above the "
                        f"largest this service takes, {MAX_DIM:,}", "range.native")


def _index_issues(p: FusionProblem) -> Iterator[Issue]:
    n = min(len(p.widths), len(p.heights))
    for name in ("inputs", "outputs"):
        for k, tensors in enumerate(getattr(p, name)):
            for j, t in enumerate(tensors):
                if not 0 <= t < n:
                    yield Issue(
                        (name, k, j),
                        f"tensor index {t} of op {k} is out of range: there are {n} tensors "
                        f"(valid indices 0..{n - 1})",
                        "index.tensor",
                    )


def _op_shape_issues(p: FusionProblem) -> Iterator[Issue]:
    W, H = p.widths, p.heights
    for k, op in enumerate(p.op_types):
        ins, outs = p.inputs[k], p.outputs[k]
        if op == "MatMul":
            if len(ins) != 2:
                yield Issue(("inputs", k), f"MatMul op {k} needs exactly 2 inputs [LHS, RHS], "
                            f"got {len(ins)}", "matmul.arity")
            if len(outs) != 1:
                yield Issue(("outputs", k), f"MatMul op {k} needs exactly 1 output, "
                            f"got {len(outs)}", "matmul.arity")
            if len(ins) == 2 and len(outs) == 1:
                (lhs, rhs), out = ins, outs[0]
                if W[lhs] != H[rhs]:
                    yield Issue(("inputs", k), f"MatMul op {k}: LHS tensor {lhs} width {W[lhs]} "
                                f"must equal RHS tensor {rhs} height {H[rhs]} (the reduction "
                                "length K)", "matmul.shape")
                if (W[out], H[out]) != (W[rhs], H[lhs]):
                    yield Issue(("outputs", k, 0), f"MatMul op {k}: output tensor {out} is "
                                f"{W[out]}x{H[out]} (w x h) but must be {W[rhs]}x{H[lhs]} "
                                "(RHS width x LHS height)", "matmul.shape")
        else:
            if not ins:
                yield Issue(("inputs", k), f"Pointwise op {k} needs at least one input",
                            "pointwise.arity")
            if not outs:
                yield Issue(("outputs", k), f"Pointwise op {k} needs at least one output",
                            "pointwise.arity")
            if ins and outs:
                ref = outs[0]
                for name, tensors in (("inputs", ins), ("outputs", outs)):
                    for j, t in enumerate(tensors):
                        if (W[t], H[t]) != (W[ref], H[ref]):
                            yield Issue((name, k, j), f"Pointwise op {k}: tensor {t} is "
                                        f"{W[t]}x{H[t]} (w x h) but output tensor {ref} is "
                                        f"{W[ref]}x{H[ref]}; all tensors of a Pointwise op must "
                                        "have the same shape", "pointwise.shape")


def _producer_issues(p: FusionProblem) -> Iterator[Issue]:
    producer: dict[int, int] = {}
    for k, outs in enumerate(p.outputs):
        for j, t in enumerate(outs):
            if t in producer:
                yield Issue(("outputs", k, j), f"tensor {t} is produced by op {producer[t]} and "
                            f"again by op {k}; every tensor has at most one producer",
                            "graph.single_producer")
            else:
                producer[t] = k


def _cycle_issues(p: FusionProblem) -> Iterator[Issue]:
    producer = {t: k for k, outs in enumerate(p.outputs) for t in outs}
    sorter: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    for k, ins in enumerate(p.inputs):
        sorter.add(k, *(producer[t] for t in ins if t in producer))
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        path = " -> ".join(f"op {k}" for k in cycle)
        yield Issue(("inputs",), f"the op graph has a cycle: {path}; it must be acyclic",
                    "graph.acyclic")


ReductionCost = Literal["per_native_k", "per_op"]
"""How a MatMul's base cost scales with reduction depth (SEMANTICS.md S8.3)."""
EpilogueStep = Literal["last", "first"]
"""k-step in which Pointwise epilogues fire after a split-K root (S10.2; ``first`` is TK's)."""
RetainedOutputWS = Literal["accumulate", "slice"]
"""Working-set share of an output retained by its own subgraph (S12; ``slice`` is TK's)."""
Semantics = Literal["default", "teamkorea"]
"""Which reading of the contest: ``default`` is SEMANTICS.md; ``teamkorea`` the Track B
winners' published evaluator (../shared/mlsys2026/teamkorea/README.md)."""
SolveStatus = Literal["optimal", "feasible"]
"""``optimal`` only with a proof; heuristics answer ``feasible``."""


class ErrorDetail(BaseModel):
    """Where a solution breaks a rule: JSON path into the solution, rule name and message."""

    path: str
    loc: list[str | int]
    rule: str
    msg: str


class ClaimedMismatch(BaseModel):
    subgraph: int
    claimed: float
    computed: float


class EvaluationStep(BaseModel):
    """One step of a subgraph (a tile and one of its k-steps) in the literal simulation."""

    tile: int = Field(description="tile index in raster numbering")
    row: int
    col: int
    k_step: int
    compute: float
    loaded: int = Field(description="elements moved from slow memory in this step")
    stored: int = Field(description="elements written to slow memory in this step")
    latency: float = Field(description="max(compute, (loaded + stored) / bandwidth)")
    working_set: int
    ws_retained_in: int
    ws_inputs: int
    ws_outputs: int
    ws_retained_out: int


class SubgraphSteps(BaseModel):
    subgraph: int
    latency: float
    steps: list[EvaluationStep]


class EvaluationReport(BaseModel):
    """What the evaluator says about a solution (SEMANTICS.md S13.2)."""

    valid: bool
    error: str | None = Field(description="the first rule broken, null when valid")
    error_detail: ErrorDetail | None = None
    total_latency: float | None = Field(description="null when invalid")
    subgraph_latencies: list[float] = Field(
        description="recomputed latency of each subgraph evaluated before the first error")
    claimed_match: bool | None = Field(
        description="whether every claimed latency is within 1e-6 (relative) of the recomputed "
                    "one; null when the solution is invalid")
    claimed_mismatches: list[ClaimedMismatch] = []
    warnings: list[str] = []
    semantics: Semantics = Field("default", description="the reading the verdict follows")
    reduction_cost: ReductionCost
    retained_output_ws: RetainedOutputWS
    pointwise_epilogue_step: EpilogueStep
    details: list[SubgraphSteps] | None = None


class LowerBoundsReport(BaseModel):
    """Bounds no valid solution of the problem can beat (time units)."""

    compute: float = Field(description="total compute of every op over its whole output, "
                           "in whole native tiles on every dimension no subgraph streams")
    io: float = Field(description="graph inputs read and graph outputs written once")
    forced: float | None = Field(
        None, description="the slow-memory traffic every schedule is forced into, summed "
        "over the ops (split-K reloads, writes every schedule makes, loads of big graph "
        "inputs and of must-write tensors; cpsat); under the teamkorea reading, what its "
        "ops pay: a MatMul's operand reloads where K is split, else the few tiles its "
        "whole-K strips allow and their loads; a Pointwise op's compute and I/O")
    cover: float | None = Field(
        None, description="the cheapest cover of the ops by connected op sets, each priced "
        "at the least latency any subgraph of them can have (cpsat, when time allows)")
    cover_complete: bool | None = Field(
        None, description="every connected op set was priced; when false, ops of the "
        "unpriced sets count at their compute floor or their forced traffic only "
        "(still a valid bound)")
    total: float = Field(description="the largest of the bounds above")


class FusionResult(BaseModel):
    """A solver's answer: a contest solution and the evaluator's verdict on it."""

    solver: str
    status: SolveStatus
    reduction_cost: ReductionCost
    semantics: Semantics = Field("default", description="the reading the schedule was "
                                 "solved and evaluated under")
    solution: FusionSolution
    total_latency: float = Field(description="recomputed by the evaluator")
    subgraph_latencies: list[float]
    lower_bounds: LowerBoundsReport
    wall_time_s: WallTime
    deterministic: Deterministic = False
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
