"""The ``iopddl`` family (the ASPLOS/EuroSys 2025 contest on intra-operator parallelism) on
the family contract."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from models.iopddl import IopddlProblem, IopddlReport, IopddlResult, IopddlSolution
from solver import iopddl
from solver import progress as progress_sink
from solver.deadline import Deadline
from solver.family import Progress, Size, Solved, ThreadedOptions, Timeline, Verdict
from solver.iopddl.evaluate import evaluate, parse_solution, usage_profile
from solver.iopddl.problem import Problem, parse_problem, summarize
from solver.iopddl.search import SOLVERS

IOPDDL_KEYS = frozenset({"nodes", "edges"})
TIMELINE_POINTS = 2_000
"""Most points of a usage timeline drawn (each the peak of its stretch of time)."""


class IopddlOptions(ThreadedOptions):
    solver: Literal[tuple(SOLVERS)] = Field(  # type: ignore[valid-type]
        default="cpsat", description=f"one of {list(SOLVERS)}")


class IopddlEvaluateOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _body(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = doc.get("problem")
    return inner if isinstance(inner, Mapping) else doc


class IopddlFamily:
    name = "iopddl"
    title = "IOPDDL: sharding strategy per node under a memory limit (ASPLOS 2025)"
    document = "iopddl problem"
    document_key = "problem"
    answer_name = "solution"
    document_model = IopddlProblem
    answer_model = IopddlSolution
    result_model = IopddlResult
    evaluation_model = IopddlReport
    options = IopddlOptions
    evaluate_options = IopddlEvaluateOptions
    solvers = tuple(SOLVERS)
    hint = "an iopddl problem has \"problem\": {\"nodes\": ..., \"edges\": ...}"
    size_names = ("nodes", "edges")
    units = "cost"

    def recognizes(self, doc: Mapping[str, Any]) -> bool:
        body = _body(doc)
        return isinstance(body, Mapping) and IOPDDL_KEYS <= body.keys()

    def estimate(self, doc: Mapping[str, Any]) -> Size:
        body = _body(doc)
        nodes, edges = body.get("nodes"), body.get("edges")
        costs = nodes.get("costs") if isinstance(nodes, Mapping) else None
        pairs = edges.get("nodes") if isinstance(edges, Mapping) else None
        return Size(len(costs) if isinstance(costs, list) else 0,
                    len(pairs) if isinstance(pairs, list) else 0)

    def parse(self, doc: Any) -> Problem:
        return parse_problem(doc)

    def parse_answer(self, doc: Any) -> list[int]:
        return parse_solution(doc)

    def size(self, problem: Problem) -> Size:
        return Size(problem.n, problem.m)

    def solvers_for(self, doc: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[str, ...]:
        return self.solvers

    def admit(self, problem: Problem, options: IopddlOptions) -> None:
        """Every problem is admitted: one with no fitting solution is answered
        ``infeasible``."""

    def default_time_limit_s(self, options: IopddlOptions) -> float:
        return iopddl.DEFAULT_TIME_LIMIT_S

    def summarize(self, problem: Problem) -> dict[str, Any]:
        return summarize(problem)

    def solve(self, problem: Problem, options: IopddlOptions, deadline: Deadline,
              progress: Progress | None = None) -> Solved:
        with progress_sink.reporting(progress):
            result = iopddl.solve(problem, options.solver, deadline, seed=options.seed,
                                  workers=options.workers)
        return Solved(result.status, None if result.cost is None else float(result.cost),
                      None if result.bound is None else float(result.bound), result.gap,
                      result.solution, result, answer_field="solution")

    def evaluate(self, problem: Problem, answer: Any, options: IopddlEvaluateOptions) -> Verdict:
        report = evaluate(problem, parse_solution(answer))
        return Verdict(report.valid, None if report.cost is None else float(report.cost),
                       report.errors, report)

    def describe_result(self, problem: Problem, result: BaseModel) -> list[str]:
        assert isinstance(result, IopddlResult)
        s = result.stats
        lines = []
        if s.reduction is not None:
            r = s.reduction
            lines.append(f"reduced {s.nodes:,} nodes / {s.edges:,} edges to {r.nodes:,} / "
                         f"{r.edges:,} ({r.folded_nodes:,} folded, {r.removed_strategies:,} "
                         f"strategies removed, {r.memory_steps:,} steps can bind)")
        bound = "none" if result.bound is None else f"{result.bound:,}"
        gap = "" if result.gap is None else f", gap {result.gap:.2%}"
        wall = "" if s.wall_time_s is None else f"; {s.wall_time_s:.2f} s"
        lines.append(f"bound {bound}{gap}; peak usage {result.peak_usage} of limit "
                     f"{result.usage_limit}; {s.lns_rounds} neighbourhoods, "
                     f"{s.lns_improvements} improved{wall}")
        return lines + result.errors

    def describe_report(self, report: BaseModel) -> list[str]:
        assert isinstance(report, IopddlReport)
        if report.peak is None:
            return []
        p = report.peak
        return [f"node cost {report.node_cost:,}, edge cost {report.edge_cost:,}; peak usage "
                f"{p.usage:,} (limit {report.usage_limit}) at step {p.step} with "
                f"{p.live_nodes} nodes live; largest: "
                + ", ".join(f"node {i} {u:,}" for i, u in p.largest)]

    def timeline(self, problem: Problem, answer: Any) -> Timeline:
        times, totals = usage_profile(problem, parse_solution(answer))
        step = max(1, -(-len(times) // TIMELINE_POINTS))
        points = [(float(times[k]), float(max(totals[k:k + step])))
                  for k in range(0, len(times), step)]
        return Timeline("memory usage", "time step", "usage", steps=points,
                        capacity=None if problem.usage_limit is None
                        else float(problem.usage_limit))


FAMILY = IopddlFamily()
