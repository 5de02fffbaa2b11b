"""The ``layout`` family (TTNN-style L1/DRAM sharding on a Tensix-like chip) on the family
contract."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from models.device import DeviceSpec
from models.errors import TX8_TAG, InputValidationError, Issue
from models.layout import (
    GRAPH_FORMAT,
    Evaluation,
    L1Allocation,
    LayoutGraph,
    LayoutPlan,
    Order,
    parse_graph,
    parse_plan,
)
from models.mesh import MESH_PRESETS, MeshField, MeshSpec
from models.tx8 import DEVICE_PRESETS, TX8_PRESETS, DeviceField, Tx8Spec, device_kind
from solver import layout, mesh, tx8
from solver import progress as progress_sink
from solver.deadline import Deadline
from solver.family import Progress, Size, Solved, SolveOptions, Timeline, Verdict, count_items
from solver.layout.evaluate import evaluate
from solver.layout.ops import DEFAULT_MAX_CONFIGS
from solver.layout.plan import plan_summary
from solver.layout.problem import analyze, resolve_device, summarize
from solver.mesh.evaluate import evaluate_mesh
from solver.mesh.problem import analyze_mesh, resolve_mesh

SOLVERS = tuple(dict.fromkeys((*layout.SOLVERS, *mesh.MESH_SOLVERS, *tx8.TX8_SOLVERS)))
"""One-chip solvers, then the mesh baselines, then the TX8 baseline (``cpsat`` plans all)."""

LAYOUT_KEYS = frozenset({"tensors", "ops"})
MAX_CONFIGS = 4096
"""Most candidate configurations per op a request may ask for: the model grows with them."""




def _known_mesh(value: str | MeshSpec | None) -> str | MeshSpec | None:
    if isinstance(value, str) and value not in MESH_PRESETS:
        raise PydanticCustomError(
            "mesh.unknown", "unknown mesh preset '{name}'; presets are {presets}",
            {"name": value[:100], "presets": ", ".join(sorted(MESH_PRESETS))})
    return value


MeshOption = Annotated[MeshField | None, AfterValidator(_known_mesh)]
"""A mesh preset's name or a mesh spec, in the solve and the evaluate options."""


def _known_device(value: str | DeviceSpec | Tx8Spec | None) -> str | DeviceSpec | Tx8Spec | None:
    if isinstance(value, str) and value not in DEVICE_PRESETS:
        raise PydanticCustomError(
            "device.unknown", "unknown device preset '{name}'; presets are {presets}",
            {"name": value[:100], "presets": ", ".join(DEVICE_PRESETS)})
    return value


DeviceOption = Annotated[DeviceField | None, AfterValidator(_known_device)]
"""A device preset's name, a Tensix device spec or a TX8 spec (``"target": "tx8"``)."""


class LayoutOptions(SolveOptions):
    solver: Literal[SOLVERS] = Field(  # type: ignore[valid-type]
        default="cpsat", description=f"one chip: one of {list(layout.SOLVERS)}; a mesh: one "
        f"of {list(mesh.MESH_SOLVERS)}; a TX8: one of {list(tx8.TX8_SOLVERS)}")
    device: DeviceOption = Field(
        default=None, description=f"a preset ({', '.join(DEVICE_PRESETS)}) "
        "or a full device spec (a TX8 spec has \"target\": \"tx8\"); overrides the graph's "
        "own device")
    mesh: MeshOption = Field(
        default=None, description=f"plan over a mesh of chips: a preset "
        f"({', '.join(MESH_PRESETS)}) or a full mesh spec; overrides the graph's own mesh")
    max_configs: Annotated[int, Field(
        ge=1, le=MAX_CONFIGS, description="candidate configurations per op")] = \
        DEFAULT_MAX_CONFIGS
    explain: bool = Field(default=False,
                          description="add the differences from the best baseline's plan")
    capacity: L1Allocation = Field(
        default="address", description="address: every L1 buffer gets an offset, checked as "
        "TT-Metal's allocator places them (fragmentation and circular buffers included); "
        "sum: bytes per step only (faster, but a plan may not place on the chip)")
    order: Order = Field(
        default="given", description="given: the graph's op order; search: cpsat also tries "
        "an order that makes room in L1 (the whole order on graphs solved as one model, "
        "windows of 16 steps on larger ones)")


class LayoutEvaluateOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mesh: MeshOption = Field(
        default=None, description="the mesh the plan was asked for, when not the graph's "
        "own: a mesh plan must be for it")
    device: DeviceOption = Field(
        default=None, description="the device the plan was asked for, when not the graph's "
        "own: a TX8 plan must be for it")


class LayoutFamily:
    name = "layout"
    title = "TTNN-style L1/DRAM layout planning"
    document = "layout graph"
    document_key = "graph"
    answer_name = "plan"
    document_model = LayoutGraph
    answer_model = LayoutPlan
    result_model = LayoutPlan
    evaluation_model = Evaluation
    options = LayoutOptions
    evaluate_options = LayoutEvaluateOptions
    solvers = SOLVERS
    hint = f"a layout graph has \"format\": \"{GRAPH_FORMAT}\""
    size_names = ("ops", "tensors")
    units = "us"

    def recognizes(self, doc: Mapping[str, Any]) -> bool:
        return doc.get("format") == GRAPH_FORMAT or LAYOUT_KEYS <= doc.keys()

    def estimate(self, doc: Mapping[str, Any]) -> Size:
        return Size(count_items(doc.get("ops")), count_items(doc.get("tensors")))

    def parse(self, doc: Any) -> LayoutGraph:
        return parse_graph(doc)

    def parse_answer(self, doc: Any) -> LayoutPlan:
        return parse_plan(doc)

    def size(self, problem: LayoutGraph) -> Size:
        return Size(len(problem.ops), len(problem.tensors))

    def solvers_for(self, doc: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[str, ...]:
        """A TX8 device has the TX8 solvers; a mesh graph (or a mesh in the options) the mesh
        solvers; one Tensix chip the rest."""
        device = options.get("device", doc.get("device"))
        if device is None:
            device = doc.get("device")
        if device_kind(device) == TX8_TAG or device in TX8_PRESETS:
            return tuple(tx8.TX8_SOLVERS)
        on_mesh = options.get("mesh") is not None or doc.get("mesh") is not None
        return tuple(mesh.MESH_SOLVERS) if on_mesh else tuple(layout.SOLVERS)

    def admit(self, problem: LayoutGraph, options: LayoutOptions) -> None:
        """The device must be known and hold every op's smallest scratch (the analysis
        refuses a graph with an op that fits no configuration); on a mesh, the solver must
        plan meshes, no device may be asked for (the mesh names its chip) and pinned
        inputs must split evenly."""
        chip = tx8.resolve_tx8(problem, options.device)
        if chip is not None:
            _admit_tx8(problem, options, chip)
            return
        on_mesh = resolve_mesh(problem, options.mesh)
        if on_mesh is not None:
            _admit_mesh(problem, options, on_mesh)
            return
        if options.solver not in layout.SOLVERS:
            raise InputValidationError([Issue(
                ("options", "solver"), f"'{options.solver}' plans a mesh; give a mesh (--mesh "
                f"or the graph's mesh) or choose one of {list(layout.SOLVERS)}",
                "solver.needs_mesh")], "request")
        try:
            analyze(problem, resolve_device(problem, options.device), options.max_configs)
        except InputValidationError as exc:
            if options.device is None:
                raise
            raise InputValidationError([*exc.issues, Issue(
                ("options", "device"), "the device chosen in the options is too small for "
                "this graph", "device.fit")], exc.what) from None

    def default_time_limit_s(self, options: LayoutOptions) -> float:
        return layout.DEFAULT_TIME_LIMIT_S

    def summarize(self, problem: LayoutGraph) -> dict[str, Any]:
        return summarize(problem)

    def solve(self, problem: LayoutGraph, options: LayoutOptions, deadline: Deadline,
              progress: Progress | None = None) -> Solved:
        chip = tx8.resolve_tx8(problem, options.device)
        on_mesh = resolve_mesh(problem, options.mesh)
        with progress_sink.reporting(progress):
            if chip is not None:
                plan = tx8.solve(problem, chip, options.solver, deadline=deadline,
                                 seed=options.seed, workers=options.workers)
            elif on_mesh is not None:
                plan = mesh.solve(problem, on_mesh, options.solver, deadline=deadline,
                                  seed=options.seed, workers=options.workers,
                                  max_configs=options.max_configs, capacity=options.capacity)
            else:
                plan = layout.solve(problem, options.solver, options.device, deadline=deadline,
                                    seed=options.seed, workers=options.workers,
                                    max_configs=options.max_configs, explain=options.explain,
                                    capacity=options.capacity, order=options.order)
        return Solved(plan.status, plan.total_latency_us, plan.stats.best_bound,
                      plan.stats.gap, plan.model_dump(mode="json", by_alias=True), plan)

    def evaluate(self, problem: LayoutGraph, answer: Any,
                 options: LayoutEvaluateOptions) -> Verdict:
        plan = answer if isinstance(answer, LayoutPlan) else parse_plan(answer)
        chip = tx8.resolve_tx8(problem, options.device)
        if plan.tx8 is not None or chip is not None:
            return _verdict(_evaluate_tx8(problem, plan, chip))
        if plan.mesh is None and resolve_mesh(problem, options.mesh) is not None:
            raise InputValidationError([Issue(
                ("mesh",), "the graph names a mesh; this plan is for one chip: plan "
                "it with the mesh (or remove the graph's mesh)", "mesh.missing")], "layout plan")
        if isinstance(plan.device, Tx8Spec):
            raise InputValidationError([Issue(
                ("tx8",), "the plan's device is a TX8 but it has no tx8 section",
                "tx8.missing")], "layout plan")
        return _verdict(evaluate_mesh(problem, plan, resolve_mesh(problem, options.mesh))
                        if plan.mesh is not None
                        else evaluate(analyze(problem, plan.device), plan))

    def describe_result(self, problem: LayoutGraph, result: BaseModel) -> list[str]:
        assert isinstance(result, LayoutPlan)
        if result.tx8 is not None:
            return [*_describe_tx8(result), *(f"{v.kind} at {v.where}: {v.msg}"
                                              for v in result.violations)]
        s = plan_summary(problem, result)
        wall = "" if result.stats.wall_time_s is None else f"; {result.stats.wall_time_s:.2f} s"
        lines = _describe_mesh(result) if result.mesh is not None else []
        lines += [f"on {result.device.name}: activations in L1 {s['activations_in_l1']}/"
                 f"{s['activations']}, reshards {s['reshards']}, reloads {s['reloads']}, "
                 f"spills {s['spills']}{wall}"]
        lines += [f"{v.kind} at {v.where}: {v.msg}" for v in result.violations]
        e = result.explanation
        if e is not None:
            lines += [e.summary, f"vs {e.baseline}: op time saved {e.op_time_saved_us:,.2f} us, "
                      f"reshard/reload/spill time saved {e.copy_and_spill_time_saved_us:,.2f} us"]
            lines += [f"op {d.op}: {d.baseline_config} reading {d.baseline_inputs} -> "
                      f"{d.config} reading {d.inputs} ({d.baseline_latency_us:,.2f} -> "
                      f"{d.latency_us:,.2f} us)" for d in e.ops]
            lines += [f"tensor {d.tensor}: {d.baseline_home} -> {d.home}" for d in e.tensors]
        return lines

    def describe_report(self, report: BaseModel) -> list[str]:
        return []

    def timeline(self, problem: Any, answer: Mapping[str, Any]) -> Timeline:
        if answer.get("tx8") is not None:
            return Timeline("SPM use", "group", "KiB per tile",
                            steps=[(i, g["spm_peak_bytes"] / 1024)
                                   for i, g in enumerate(answer["tx8"]["groups"])],
                            capacity=answer["l1_capacity_bytes_per_core"] / 1024)
        return Timeline("L1 use", "schedule step (op)", "KiB per core",
                        steps=[(s["step"], s["bytes_per_core"] / 1024)
                               for s in answer["l1_timeline"]],
                        capacity=answer["l1_capacity_bytes_per_core"] / 1024)


def _admit_mesh(problem: LayoutGraph, options: LayoutOptions, on_mesh: MeshSpec) -> None:
    issues = []
    if options.solver not in mesh.MESH_SOLVERS:
        issues.append(Issue(("options", "solver"), f"'{options.solver}' plans one chip; on a "
                            f"mesh choose one of {list(mesh.MESH_SOLVERS)}", "solver.mesh"))
    if options.device is not None:
        issues.append(Issue(("options", "device"), f"a mesh names its chip ({on_mesh.chip}); "
                            "give a custom mesh spec to change it, not a device",
                            "device.with_mesh"))
    if options.explain:
        issues.append(Issue(("options", "explain"), "explain compares one-chip plans; a mesh "
                            "plan lists its collectives and strategies instead",
                            "explain.with_mesh"))
    if options.order != "given":
        issues.append(Issue(("options", "order"), "a mesh plan runs the graph's op order; "
                            "order search is for one chip", "order.with_mesh"))
    if issues:
        raise InputValidationError(issues, "request")
    analyze_mesh(problem, on_mesh, priced=False)


def _verdict(evaluation: Evaluation) -> Verdict:
    errors = [f"{v.kind} at {v.where}: {v.msg}" for v in evaluation.violations]
    return Verdict(evaluation.valid, evaluation.total_latency_us, errors, evaluation)


def _evaluate_tx8(problem: LayoutGraph, plan: LayoutPlan, chip: Tx8Spec | None) -> Evaluation:
    """A TX8 plan checked against the chip asked for (the option's or the graph's; else the
    one the plan names); a graph meant for a TX8 needs a TX8 plan."""
    if plan.tx8 is None:
        raise InputValidationError([Issue(
            ("tx8",), "the graph (or the options) names a TX8 device; this plan is for "
            "a Tensix chip: plan it for the TX8", "tx8.missing")], "layout plan")
    if chip is None:
        if not isinstance(plan.device, Tx8Spec):
            raise InputValidationError([Issue(
                ("device",), "a plan with a tx8 section must name a TX8 device",
                "tx8.device")], "layout plan")
        chip = plan.device
    return tx8.evaluate_tx8(problem, plan, chip)


def _admit_tx8(problem: LayoutGraph, options: LayoutOptions, chip: Tx8Spec) -> None:
    issues = []
    if options.solver not in tx8.TX8_SOLVERS:
        issues.append(Issue(("options", "solver"), f"'{options.solver}' plans a Tensix chip; "
                            f"for a TX8 choose one of {list(tx8.TX8_SOLVERS)}", "solver.tx8"))
    tensix_only = {"mesh": None, "explain": False, "capacity": "address", "order": "given",
                   "max_configs": DEFAULT_MAX_CONFIGS}
    for name, default in tensix_only.items():
        if getattr(options, name) != default:
            issues.append(Issue(("options", name), f"'{name}' is for Tensix chips; a TX8 plan "
                                "has groups, shardings and SPM offsets instead", "tx8.option"))
    if issues:
        raise InputValidationError(issues, "request")
    tx8.admit(problem, chip)


def _describe_tx8(plan: LayoutPlan) -> list[str]:
    t = plan.tx8
    assert t is not None
    grouped = sum(1 for g in t.groups if len(g.ops) > 1)
    ops = sum(len(g.ops) for g in t.groups)
    return [f"on {plan.device.name}: {len(t.groups)} groups for {ops} ops ({grouped} of several "
            f"ops), groups {t.group_latency_us:,.2f} us, {len(t.conversions)} layout "
            f"conversions {t.conversion_latency_us:,.2f} us, SPM peak "
            f"{t.spm_peak_bytes / 1024:,.1f} KiB of {plan.l1_capacity_bytes_per_core / 1024:,.0f}"
            " per tile"]


def _describe_mesh(plan: LayoutPlan) -> list[str]:
    m = plan.mesh
    assert m is not None
    kinds: dict[str, int] = {}
    for c in m.collectives:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    used = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"
    shape = "x".join(str(a.size) for a in m.mesh.axes)
    return [f"mesh {m.mesh.name} ({shape} {m.mesh.chip}): per chip {m.chip_latency_us:,.2f} "
            f"us, collectives {m.collective_latency_us:,.2f} us ({used}); DRAM per chip "
            f"{m.memory.dram_peak_bytes / 2**30:,.2f} GiB of "
            f"{(m.memory.dram_capacity_bytes or 0) / 2**30:,.0f} (weights "
            f"{m.memory.weight_bytes / 2**30:,.2f})"]


FAMILY = LayoutFamily()
