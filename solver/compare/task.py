"""One (graph, solver) pair: run it, re-check the answer with the evaluator, record it.

``run_task`` never raises: bad input, a solver error and an invalid answer all become a
record with ``status`` and ``error``, so one pair's failure never aborts a batch. It runs
in a worker process (local or Ray), so everything it takes and returns is picklable.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from models.errors import InputValidationError
from models.family import Family
from models.fusion import ReductionCost, parse_problem
from models.layout import parse_graph, parse_plan
from solver.fusion import solvers as fusion_solvers
from solver.fusion.evaluate import evaluate as evaluate_fusion
from solver.fusion.problem import Rules
from solver.layout import SOLVERS as LAYOUT_SOLVERS
from solver.layout import solve as solve_layout
from solver.layout.evaluate import evaluate as evaluate_layout
from solver.layout.problem import analyze

FAMILY_SOLVERS: dict[Family, tuple[str, ...]] = {
    "fusion": tuple(fusion_solvers.SOLVERS),
    "layout": tuple(LAYOUT_SOLVERS),
}
FAILED_STATUSES = ("error", "timeout", "invalid")
CLAIM_TOLERANCE = 1e-6


def _package_version() -> str:
    try:
        return version("layoutsat")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Options:
    """Solve options shared by every pair of a batch; part of each pair's cache key."""

    time_limit_s: float = 10.0
    seed: int = 0
    device: str | None = None
    reduction_cost: ReductionCost = "per_native_k"
    workers: int = 1


@dataclass(frozen=True)
class Task:
    graph: str
    family: Family | None
    data: Any
    solver: str
    options: Options = field(default_factory=Options)
    load_error: str | None = None

    @property
    def key(self) -> str:
        """Content hash of the graph, solver, options and package version: equal keys mean
        the stored result can be reused."""
        blob = json.dumps({"graph": self.data, "solver": self.solver,
                           "options": asdict(self.options), "version": _package_version()},
                          sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


def blank_record(task: Task) -> dict[str, Any]:
    """The record every outcome fills in; ``answer`` (the plan or solution) is stored
    beside results.json, not in it."""
    return {"graph": task.graph, "family": task.family, "solver": task.solver,
            "key": task.key, "status": "error", "total_latency": None, "bound": None,
            "gap": None, "wall_time_s": 0.0, "valid": False, "error": task.load_error,
            "device": task.options.device if task.family == "layout" else None,
            "reduction_cost": task.options.reduction_cost if task.family == "fusion" else None,
            "answer": None}


def run_task(task: Task) -> dict[str, Any]:
    """Solve, re-check with the evaluator from the serialized answer, and record."""
    record = blank_record(task)
    if task.load_error is not None:
        return record
    started = time.perf_counter()
    try:
        if task.family == "fusion":
            record.update(_fusion(task))
        else:
            record.update(_layout(task))
    except InputValidationError as exc:
        record["error"] = f"invalid {exc.what}: " + "; ".join(str(i) for i in exc.issues)
    except Exception as exc:  # a solver crash is recorded; the batch goes on
        tail = traceback.format_exc(limit=-3)
        record["error"] = f"{type(exc).__name__}: {exc}\n{tail}"
    record["wall_time_s"] = time.perf_counter() - started
    return record


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= CLAIM_TOLERANCE * max(1.0, abs(a), abs(b))


def _fusion(task: Task) -> dict[str, Any]:
    problem = parse_problem(task.data)
    opts = task.options
    try:
        result = fusion_solvers.solve(problem, task.solver, time_limit_s=opts.time_limit_s,
                                      reduction_cost=opts.reduction_cost, seed=opts.seed,
                                      workers=opts.workers)
    except fusion_solvers.SolverBug as exc:
        return {"status": "invalid", "error": str(exc)}
    verdict = evaluate_fusion(problem, result.solution, Rules(reduction_cost=opts.reduction_cost))
    recomputed = None if verdict.total is None else float(verdict.total)
    valid = recomputed is not None and _close(recomputed, result.total_latency)
    return {"status": result.status if valid else "invalid", "valid": valid,
            "total_latency": recomputed, "bound": result.bound, "gap": result.gap,
            "error": None if valid else _mismatch(verdict.error and verdict.error.msg,
                                                  recomputed, result.total_latency),
            "answer": result.solution.model_dump(mode="json")}


def _layout(task: Task) -> dict[str, Any]:
    graph = parse_graph(task.data)
    opts = task.options
    plan = solve_layout(graph, task.solver, opts.device, time_limit_s=opts.time_limit_s,
                        seed=opts.seed, workers=opts.workers)
    answer = plan.model_dump(mode="json", by_alias=True)
    verdict = evaluate_layout(analyze(graph, plan.device), parse_plan(answer))
    valid = verdict.valid and _close(verdict.total_latency_us, plan.total_latency_us)
    error = None
    if not valid:
        error = _mismatch("; ".join(f"{v.kind} at {v.where}: {v.msg}" for v in
                                    verdict.violations) or None,
                          verdict.total_latency_us, plan.total_latency_us)
    return {"status": plan.status if valid else "invalid", "valid": valid,
            "total_latency": verdict.total_latency_us, "bound": plan.stats.best_bound,
            "gap": plan.stats.gap, "device": plan.device.name, "error": error,
            "answer": answer}


def _mismatch(fault: object, recomputed: float | None, claimed: float) -> str:
    if fault is not None:
        return f"the evaluator rejects the answer: {fault}"
    return f"the evaluator recomputes {recomputed} where the solver claims {claimed}"
