"""The ``fusion`` family (the MLSys 2026 contest problem) on the family contract."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from models.errors import InputValidationError, Issue, raise_if_any
from models.fusion import (
    EvaluationReport,
    FusionProblem,
    FusionResult,
    FusionSolution,
    ReductionCost,
    Semantics,
    parse_problem,
    parse_solution,
)
from solver import progress as progress_sink
from solver.deadline import Deadline
from solver.family import Progress, Size, Solved, ThreadedOptions, Timeline, Verdict, count_items
from solver.fusion import solvers
from solver.fusion.evaluate import evaluate
from solver.fusion.problem import FusionGraph, Rules, k_steps, summarize

MAX_TILES = 2**20
"""Most native tiles one tensor may span: an answer lists the tiles of its traversal
orders, and the evaluator and the solvers walk them (the contest's largest tensors span
1,024). Tiles smaller than native (a tight capacity) can still make an answer larger; the
worker's memory limit bounds that."""
MAX_DETAIL_STEPS = 100_000
"""Most steps a report of every step may list (each is a JSON object of a dozen numbers)."""
FUSION_KEYS = frozenset({"widths", "heights", "op_types", "base_costs", "native_granularity"})


class Reading(BaseModel):
    """The options that choose a reading of the contest, shared by solve and evaluate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reduction_cost: ReductionCost | None = Field(
        default=None, description="how a MatMul's cost scales with its reduction depth "
        "(SEMANTICS.md S8.3); default per_native_k, or per_op under the teamkorea reading, "
        "which prices a k-step by k/K and refuses per_native_k")
    semantics: Semantics = Field(
        default="default", description="the reading of the contest: default (SEMANTICS.md) "
        "or teamkorea (the Track B winners' evaluator; docs/fusion.md)")

    @model_validator(mode="after")
    def _one_reading(self) -> Reading:
        """``per_native_k`` belongs to the default reading: with ``teamkorea`` it would be
        silently ignored, so it is refused."""
        if self.semantics == "teamkorea" and self.reduction_cost == "per_native_k":
            raise ValueError("reduction_cost per_native_k applies to the default semantics "
                             "only; the teamkorea reading prices each k-step by k/K of a "
                             "MatMul's base cost (per_op): leave reduction_cost unset")
        return self

    @property
    def reduction(self) -> ReductionCost:
        """The reduction pricing in force: the one given, else the reading's own."""
        if self.reduction_cost is not None:
            return self.reduction_cost
        return "per_op" if self.semantics == "teamkorea" else "per_native_k"


class FusionOptions(ThreadedOptions, Reading):
    solver: Literal[tuple(solvers.SOLVERS)] = Field(  # type: ignore[valid-type]
        default=solvers.DEFAULT_SOLVER, description=f"one of {list(solvers.SOLVERS)}")


class FusionEvaluateOptions(Reading):
    steps: bool = Field(default=False, description="include every step of every subgraph")
    strict: bool = Field(default=False,
                         description="a claimed latency off by more than 1e-6 is an error")


class FusionFamily:
    name = "fusion"
    title = "MLSys 2026 fusion scheduling"
    document = "fusion problem"
    document_key = "problem"
    answer_name = "solution"
    document_model = FusionProblem
    answer_model = FusionSolution
    result_model = FusionResult
    evaluation_model = EvaluationReport
    options = FusionOptions
    evaluate_options = FusionEvaluateOptions
    solvers = tuple(solvers.SOLVERS)
    hint = f"a fusion problem has the keys {sorted(FUSION_KEYS)}"
    size_names = ("ops", "tensors")
    units = "time units"

    def recognizes(self, doc: Mapping[str, Any]) -> bool:
        return bool(FUSION_KEYS & doc.keys())

    def estimate(self, doc: Mapping[str, Any]) -> Size:
        return Size(count_items(doc.get("op_types")), count_items(doc.get("widths")))

    def parse(self, doc: Any) -> FusionProblem:
        return parse_problem(doc)

    def parse_answer(self, doc: Any) -> FusionSolution:
        return parse_solution(doc)

    def size(self, problem: FusionProblem) -> Size:
        return Size(problem.num_ops, problem.num_tensors)

    def solvers_for(self, doc: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[str, ...]:
        return self.solvers

    def admit(self, problem: FusionProblem, options: FusionOptions) -> None:
        """Every op must fit alone at its smallest tile, ``[1, 1, 1]``, or no schedule
        exists: a MatMul holds an LHS, an RHS and an output element (two slices even when
        both sides read one tensor), a Pointwise op one element of each distinct tensor."""
        capacity = problem.fast_memory_capacity
        issues = []
        for q in range(problem.num_ops):
            least = 3 if problem.op_types[q] == "MatMul" else \
                len(set(problem.inputs[q]) | set(problem.outputs[q]))
            if least > capacity:
                issues.append(Issue(
                    ("op_types", q), f"op {q} alone does not fit in fast memory at any "
                    f"granularity: even 1x1 tiles hold {least} elements, "
                    f"fast_memory_capacity is {capacity}", "capacity.op_does_not_fit"))
        native_w, native_h = problem.native_granularity[:2]
        for t, (w, h) in enumerate(zip(problem.widths, problem.heights, strict=True)):
            tiles = -(-w // native_w) * -(-h // native_h)
            if tiles > MAX_TILES:
                issues.append(Issue(
                    ("widths", t), f"tensor {t} ({w}x{h}) spans {tiles:,} native tiles; this "
                    f"service takes at most {MAX_TILES:,} (an answer lists the tiles it "
                    "walks)", "limit.max_tiles"))
        raise_if_any(issues, "fusion problem")

    def default_time_limit_s(self, options: FusionOptions) -> float:
        return solvers.default_time_limit_s(options.solver)

    def summarize(self, problem: FusionProblem) -> dict[str, Any]:
        return summarize(problem)

    def solve(self, problem: FusionProblem, options: FusionOptions, deadline: Deadline,
              progress: Progress | None = None) -> Solved:
        with progress_sink.reporting(progress):
            result = solvers.solve(problem, options.solver, deadline=deadline,
                                   reduction_cost=options.reduction, seed=options.seed,
                                   workers=options.workers, semantics=options.semantics)
        return Solved(result.status, result.total_latency, result.bound, result.gap,
                      result.solution.model_dump(mode="json"), result, answer_field="solution")

    def evaluate(self, problem: FusionProblem, answer: Any,
                 options: FusionEvaluateOptions) -> Verdict:
        solution = answer if isinstance(answer, FusionSolution) else parse_solution(answer)
        if options.steps:
            steps = step_count(problem, solution)
            if steps > MAX_DETAIL_STEPS:
                raise InputValidationError([Issue(
                    ("granularities",), f"the solution runs {steps:,} steps; a report of every "
                    f"step (steps=true) lists at most {MAX_DETAIL_STEPS:,}",
                    "limit.max_detail_steps")], "fusion solution")
        if options.steps and options.semantics == "teamkorea":
            raise InputValidationError([Issue(
                ("steps",), "steps=true lists the steps of the default reading; the "
                "teamkorea reading reports subgraph latencies only", "options.steps")],
                "fusion evaluate options")
        verdict = evaluate(problem, solution, Rules(reduction_cost=options.reduction),
                           strict=options.strict, details=options.steps,
                           semantics=options.semantics)
        report = verdict.report()
        errors = [] if report.error is None else [report.error]
        return Verdict(report.valid, report.total_latency, errors, report)

    def describe_result(self, problem: FusionProblem, result: BaseModel) -> list[str]:
        assert isinstance(result, FusionResult)
        wall = "" if result.wall_time_s is None else f"; {result.wall_time_s:.2f} s"
        reading = "teamkorea" if result.semantics == "teamkorea" else result.reduction_cost
        count = len(result.solution.subgraphs)
        return [f"{count} subgraph{'' if count == 1 else 's'} ({reading}); "
                f"latenc{'y' if count == 1 else 'ies'} "
                + ", ".join(f"{x:,.2f}" for x in result.subgraph_latencies) + wall]

    def describe_report(self, report: BaseModel) -> list[str]:
        assert isinstance(report, EvaluationReport)
        reading = "teamkorea reading" if report.semantics == "teamkorea" else \
            report.reduction_cost
        lines = [f"{reading}; subgraphs "
                 + ", ".join(f"{x:,.4f}" for x in report.subgraph_latencies)]
        lines += [f"subgraph {m.subgraph}: claimed {m.claimed:,.4f}, computed "
                  f"{m.computed:,.4f}" for m in report.claimed_mismatches]
        for sub in report.details or []:
            lines.append(f"subgraph {sub.subgraph}: {len(sub.steps)} steps")
            lines += [f"  tile {s.tile} (r{s.row} c{s.col}) k{s.k_step}: compute "
                      f"{s.compute:,.2f}, loaded {s.loaded}, stored {s.stored}, latency "
                      f"{s.latency:,.2f}, working set {s.working_set}" for s in sub.steps]
        return lines

    def timeline(self, problem: Any, answer: Mapping[str, Any]) -> Timeline:
        return _timeline(answer)


def _timeline(solution: Mapping[str, Any]) -> Timeline:
    return Timeline("subgraph timeline", "time (subgraphs in order; labels: ops per "
                    "subgraph)", segments=[(latency, str(len(ops))) for ops, latency in zip(
                        solution["subgraphs"], solution["subgraph_latencies"], strict=True)])


def step_count(problem: FusionProblem, solution: FusionSolution) -> int:
    """Tiles times k-steps of every subgraph the evaluator would simulate; malformed entries
    count nothing (the evaluator refuses them)."""
    g = FusionGraph(problem)
    total = 0
    for ops, gran in zip(solution.subgraphs, solution.granularities, strict=False):
        if not ops or not all(0 <= q < problem.num_ops for q in ops) or \
                min(gran, default=0) <= 0:
            continue
        shape = g.shape(tuple(ops))
        rows, cols = shape.grid(gran[0], gran[1])
        total += rows * cols * max(k_steps(g, shape, gran[2]).values(), default=1)
    return total


FAMILY = FusionFamily()
