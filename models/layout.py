"""The layout family's documents: the graph a user sends and the plan a solver returns.

``parse_graph`` is the only sanctioned way to turn untrusted JSON into a ``LayoutGraph``:
it runs the pydantic schema and then every cross-field rule of ``layout_rules`` and
reports all faults at once, each with its JSON path. Everything downstream may assume
a well-formed, acyclic graph whose declared shapes agree with its ops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from models.device import DeviceSpec
from models.errors import InputValidationError, Issue, issues_from_pydantic, raise_if_any
from models.layout_ops import OP_TYPES
from models.layout_rules import graph_issues
from models.mesh import MeshField, MeshSection, PlacementText
from models.timing import Deterministic, WallTime
from models.tx8 import DeviceField, Tx8Section, Tx8Spec

GRAPH_FORMAT = "layoutsat-graph"
PLAN_FORMAT = "layoutsat-plan"

DType = Literal["bf16", "f32", "bfp8", "bfp4", "uint32"]
TensorKind = Literal["input", "constant", "activation"]
OpType = Literal[OP_TYPES]  # type: ignore[valid-type]
Buffer = Literal["l1", "dram"]
MemLayout = Literal["interleaved", "height_sharded", "width_sharded", "block_sharded"]
MAX_DIM = 2**31 - 1
MAX_ELEMENTS = 2**40
"""Largest tensor (elements): every byte count, latency and integer the solvers scale
stays exact and within int64 below it."""
MAX_LATENCY_US = 1e9
NonNegFloat = Annotated[float, Field(ge=0, le=MAX_LATENCY_US, allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1)]

# A memory configuration as text: "dram:interleaved", "l1:interleaved" or
# "l1:<height|width|block>_sharded:<rows>x<cols>". An op configuration appends its
# knobs: "l1:block_sharded:4x8/in0_block_w=2".
MEMCFG_PATTERN = (r"dram:interleaved|l1:interleaved"
                  r"|l1:(?:height|width|block)_sharded:[1-9]\d*x[1-9]\d*")
CONFIG_PATTERN = rf"(?:{MEMCFG_PATTERN})(?:/[a-z_0-9]+=[A-Za-z0-9_]+)*"
MEMCFG_RE = re.compile(MEMCFG_PATTERN)
CONFIG_RE = re.compile(CONFIG_PATTERN)
MemCfgText = Annotated[str, Field(pattern=rf"^(?:{MEMCFG_PATTERN})$")]
ConfigText = Annotated[str, Field(pattern=rf"^{CONFIG_PATTERN}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, populate_by_name=True)


class TensorDecl(_Strict):
    """A named tensor: its logical shape, element type and role in the graph."""

    name: Name
    shape: list[Annotated[int, Field(gt=0, le=MAX_DIM)]] = Field(min_length=1, max_length=8)
    dtype: DType = Field(description="bf16, f32, bfp8, bfp4; uint32 only for embedding indices")
    kind: TensorKind = Field(
        default="activation",
        description="input: fed by the host; constant: a weight; activation: produced by an op")


    @field_validator("shape")
    @classmethod
    def _bounded(cls, shape: list[int]) -> list[int]:
        if math.prod(shape) > MAX_ELEMENTS:
            raise PydanticCustomError(
                "tensor_too_large", "the tensor has {n} elements; at most {most} are allowed",
                {"n": f"{math.prod(shape):,}", "most": f"{MAX_ELEMENTS:,}"})
        return shape


class OpDecl(_Strict):
    """One op: its type, ordered operand tensors, output tensors and type-specific attributes."""

    name: Name
    type: OpType
    inputs: list[Name] = Field(default_factory=list)
    outputs: list[Name] = Field(min_length=1)
    attrs: dict[str, Any] = Field(default_factory=dict,
                                  description="checked per op type; see docs/layout-format.md")


class MeasuredOpCost(_Strict):
    op: Name
    config: ConfigText
    latency_us: NonNegFloat


class MeasuredReshardCost(_Strict):
    tensor: Name
    from_: MemCfgText = Field(alias="from")
    to: MemCfgText
    latency_us: NonNegFloat


class MeasuredCosts(_Strict):
    """Measured latencies that replace the analytical model, entry by entry."""

    ops: list[MeasuredOpCost] = Field(default_factory=list)
    reshards: list[MeasuredReshardCost] = Field(default_factory=list)


class LayoutGraph(_Strict):
    """A compute graph for the layout optimizer (format ``layoutsat-graph``, version 1)."""

    format: Literal["layoutsat-graph"]
    version: Literal[1]
    name: str = "graph"
    device: DeviceField | None = Field(
        default=None, description="preset name (a Tensix chip or tx8) or a full device spec "
        "(a TX8 spec has \"target\": \"tx8\"); the CLI/API may override")
    tensors: list[TensorDecl] = Field(min_length=1)
    ops: list[OpDecl] = Field(min_length=1)
    outputs: list[Name] = Field(min_length=1, description="graph outputs (activations)")
    measured: MeasuredCosts = Field(default_factory=MeasuredCosts)
    mesh: MeshField | None = Field(
        default=None, description="plan over a mesh of chips: a mesh preset (n300, t3000, "
        "galaxy, p150x4) or a full mesh spec; the CLI/API may override; null: one chip")
    mesh_inputs: dict[str, list[PlacementText]] = Field(
        default_factory=dict, description="how the host sends graph inputs to a mesh: a "
        "placement per mesh axis (R, or S<dim> for a split dim); inputs not named here and "
        "every weight are placed by the planner")
    mesh_outputs: dict[str, list[PlacementText]] = Field(
        default_factory=dict, description="how the host takes graph outputs from a mesh: a "
        "placement per mesh axis it needs them in (R, or S<dim>); outputs not named here "
        "may end in any placement but a partial sum (the host joins the shards)")


def parse_graph(data: Any) -> LayoutGraph:
    """Validate untrusted JSON into a LayoutGraph or raise with every fault found."""
    graph = _validate(LayoutGraph, data, "layout graph")
    raise_if_any(graph_issues(graph), "layout graph")
    return graph


# ----------------------------------------------------------------------------- plan


L1Allocation = Literal["address", "sum"]
"""How a plan's L1 is checked: offsets like the allocator's, or bytes per step only."""
Order = Literal["given", "search"]
"""Which op orders a solve may run: the graph's own, or also one it searches for."""


class TensorPlacement(_Strict):
    """Where a tensor lives from its producer on (its home memory configuration)."""

    buffer: Buffer
    layout: MemLayout
    grid: list[int] | None = Field(description="[rows, cols] of cores; null in DRAM")
    shard_shape: list[int] | None = Field(
        description="[h, w] elements per core; null unless sharded")
    bytes_per_core: int
    l1_offset: int | None = Field(
        default=None, description="bytes above the lowest usable L1 byte where an L1 home "
        "lives, the same on every core; null in DRAM or when l1_allocation is sum")


class OpPlacement(_Strict):
    config: ConfigText = Field(description="output memory configuration plus knobs")
    inputs: list[MemCfgText] = Field(description="memory configuration each operand is read from")
    latency_us: float
    cb_bytes_per_core: int
    program: dict[str, int | str | bool] = Field(
        default_factory=dict, description="derived program config (informational)")


class Copy(_Strict):
    """A reshard or reload: one copy of a tensor into another memory configuration."""

    tensor: Name
    from_: MemCfgText = Field(alias="from")
    to: MemCfgText
    consumers: list[Name] = Field(min_length=1, description="ops that read this copy")
    step: int = Field(description="runs just before the op at this schedule step")
    latency_us: float
    l1_offset: int | None = Field(
        default=None, description="bytes above the lowest usable L1 byte where an L1 copy "
        "lives; null for a copy to DRAM or when l1_allocation is sum")


class Spill(_Strict):
    tensor: Name
    step: int = Field(description="written to DRAM after the op at this step; L1 freed")
    latency_us: float


class TimelineStep(_Strict):
    step: int
    op: Name
    bytes_per_core: int


class PlanStats(_Strict):
    wall_time_s: WallTime
    deterministic: Deterministic = False
    objective: float | None = None
    best_bound: float | None = None
    gap: float | None = None


class Violation(_Strict):
    kind: str = Field(description="the rule broken, e.g. capacity.exceeded")
    where: str = Field(description="what it concerns, e.g. ops.fc1 or step 12")
    msg: str


class OpDifference(_Strict):
    """An op configured differently from the reference baseline, and what it changed."""

    op: Name
    baseline_config: ConfigText
    config: ConfigText
    baseline_inputs: list[MemCfgText]
    inputs: list[MemCfgText]
    baseline_latency_us: float
    latency_us: float


class TensorDifference(_Strict):
    """A tensor living elsewhere than in the reference baseline's plan."""

    tensor: Name
    baseline_home: str
    home: str


class Explanation(_Strict):
    """How a plan differs from the best baseline's, and where the time went."""

    baseline: str = Field(description="the best baseline, the reference for the differences")
    summary: str
    speedup_vs: dict[str, float] = Field(description="baseline total / this plan's total")
    ops: list[OpDifference]
    tensors: list[TensorDifference]
    op_time_saved_us: float = Field(description="baseline op time minus this plan's")
    copy_and_spill_time_saved_us: float = Field(
        description="baseline reshard, reload and spill time minus this plan's")


class LayoutPlan(_Strict):
    """The answer: placement of every tensor, config of every op, copies, spills, latency."""

    format: Literal["layoutsat-plan"] = PLAN_FORMAT
    version: Literal[1] = 1
    status: Literal["optimal", "feasible", "invalid"]
    solver: str
    graph: str
    device: DeviceSpec | Tx8Spec
    schedule: list[Name]
    tensors: dict[str, TensorPlacement]
    ops: dict[str, OpPlacement]
    reshards: list[Copy] = Field(default_factory=list)
    reloads: list[Copy] = Field(default_factory=list)
    spills: list[Spill] = Field(default_factory=list)
    l1_timeline: list[TimelineStep]
    l1_capacity_bytes_per_core: int
    l1_allocation: L1Allocation = Field(
        default="sum", description="address: every L1 tensor has an offset (l1_offset) and "
        "the evaluator checks them as the allocator would; sum: only bytes per step are")
    total_latency_us: float
    stats: PlanStats
    violations: list[Violation] = Field(
        default_factory=list, description="evaluator findings; empty unless status is invalid")
    explanation: Explanation | None = Field(
        default=None, description="differences from the best baseline, when asked for")
    mesh: MeshSection | None = Field(
        default=None, description="a plan over a mesh: placements, strategies, collectives "
        "and per-chip memory; its ops and tensors are then those of the per-chip graph")
    tx8: Tx8Section | None = Field(
        default=None, description="a plan for a TX8 chip: groups, shardings, splits, SPM "
        "offsets, conversions; its Tensix sections (tensors, ops, l1_timeline) are empty")


class Evaluation(_Strict):
    """The evaluator's verdict on a plan: every violation, and the recomputed total."""

    valid: bool
    total_latency_us: float = Field(description="recomputed from the plan's own decisions")
    violations: list[Violation]


def parse_plan(data: Any) -> LayoutPlan:
    """Validate the JSON shape of a plan; whether it is right is the evaluator's job."""
    return _validate(LayoutPlan, data, "layout plan")


def _validate(model: type[BaseModel], data: Any, what: str) -> Any:
    if not isinstance(data, Mapping):
        raise InputValidationError(
            [Issue((), f"expected a JSON object, got {type(data).__name__}", "schema.type")], what)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputValidationError(issues_from_pydantic(exc), what) from None
