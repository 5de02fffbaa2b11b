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
from solver.deadline import Deadline
from solver.families import FAMILIES
from solver.family import InvalidAnswer, Solved, evaluate_options_for

FAMILY_SOLVERS: dict[str, tuple[str, ...]] = {
    name: family.solvers for name, family in FAMILIES.items()}
FAILED_STATUSES = ("error", "timeout", "invalid")
CLAIM_TOLERANCE = 1e-6


def _package_version() -> str:
    try:
        return version("layoutsat")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Options:
    """Solve options shared by every pair of a batch; part of each pair's cache key.
    ``family_options`` holds, per family, the values of its own option fields (a layout
    ``device``, a fusion ``reduction_cost``)."""

    time_limit_s: float = 10.0
    seed: int = 0
    workers: int = 1
    deterministic: bool = False
    family_options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_family(self, name: str, solver: str) -> Any:
        """The family's validated options object for one solver."""
        return FAMILIES[name].options.model_validate({
            "solver": solver, "time_limit_s": self.time_limit_s, "seed": self.seed,
            "workers": self.workers, "deterministic": self.deterministic,
            **self.family_options.get(name, {})})


@dataclass(frozen=True)
class Task:
    graph: str
    family: str | None
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
            "options": task.options.family_options.get(task.family or "", {}),
            "answer": None}


def run_task(task: Task) -> dict[str, Any]:
    """Solve, re-check with the evaluator from the serialized answer, and record."""
    record = blank_record(task)
    if task.load_error is not None:
        return record
    started = time.perf_counter()
    try:
        record.update(_solve_and_check(task))
    except InvalidAnswer as exc:
        record.update(status="invalid", error=str(exc))
    except InputValidationError as exc:
        record["error"] = f"invalid {exc.what}: " + "; ".join(str(i) for i in exc.issues)
    except Exception as exc:  # a solver crash is recorded; the batch goes on
        tail = traceback.format_exc(limit=-3)
        record["error"] = f"{type(exc).__name__}: {exc}\n{tail}"
    record["wall_time_s"] = time.perf_counter() - started
    return record


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= CLAIM_TOLERANCE * max(1.0, abs(a), abs(b))


def _solve_and_check(task: Task) -> dict[str, Any]:
    """Solve through the family contract, then have the family's evaluator check the
    answer as serialized, and its total against the one claimed."""
    family = FAMILIES[task.family or ""]
    problem = family.parse(task.data)
    options = task.options.for_family(family.name, task.solver)
    family.admit(problem, options)
    deadline = Deadline.after(task.options.time_limit_s, deterministic=options.deterministic)
    solved: Solved = family.solve(problem, options, deadline)
    answer = json.loads(json.dumps(solved.answer))
    verdict = family.evaluate(problem, answer, evaluate_options_for(family, options))
    valid = (solved.status != "invalid" and verdict.valid and verdict.total is not None
             and solved.objective is not None and _close(verdict.total, solved.objective))
    error = None
    if not valid:
        error = _mismatch("; ".join(verdict.errors) or None, verdict.total, solved.objective)
    shown = asdict(family.timeline(problem, answer)) if valid else None
    return {"status": solved.status if valid else "invalid", "valid": valid,
            "total_latency": verdict.total, "bound": solved.bound, "gap": solved.gap,
            "error": error, "answer": solved.answer, "timeline": shown}


def _mismatch(fault: object, recomputed: float | None, claimed: float | None) -> str:
    if fault is not None:
        return f"the evaluator rejects the answer: {fault}"
    return f"the evaluator recomputes {recomputed} where the solver claims {claimed}"
