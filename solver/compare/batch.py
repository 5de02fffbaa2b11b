"""A whole comparison: tasks from the graphs, the cache in ``--out``, the chosen backend,
then ``results.json``, ``report.md`` and the plots."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from models.errors import InputValidationError, Issue
from solver.compare import report
from solver.compare.backends import Record, Runner, run_local, run_ray
from solver.compare.discover import GraphDoc
from solver.compare.summary import REFERENCE, gate, succeeded, summarize
from solver.compare.task import FAMILY_SOLVERS, Options, Task, run_task
from solver.families import FAMILIES

Backend = Literal["local", "ray"]
RESULTS = "results.json"
REPORT = "report.md"
ANSWERS = "answers"
PLOTS = "plots"
FLUSH_EVERY_S = 5.0


@dataclass
class Batch:
    """What to compare and how."""

    docs: list[GraphDoc]
    solvers: list[str] | None = None
    options: Options = field(default_factory=Options)
    jobs: int = 1
    backend: Backend = "local"
    ray_address: str | None = None
    force: bool = False
    fail_if_worse: str | None = None
    memory_mb: int = 0
    """Memory cap of each local worker process (0: none)."""


@dataclass
class Outcome:
    records: list[Record]
    summary: dict[str, Any]
    gate: list[str] | None
    reused: int
    files: list[str]

    @property
    def failed(self) -> bool:
        """What the exit code reports: a failed pair, or a tripped gate."""
        return bool(self.summary["failed"]) or bool(self.gate)


def check_solvers(solvers: list[str] | None, fail_if_worse: str | None) -> None:
    """Reject names no family knows, and a gate against a solver that is not compared."""
    known = sorted({s for names in FAMILY_SOLVERS.values() for s in names})
    issues = [Issue(("solvers",), f"unknown solver '{s}'; known: {', '.join(known)}",
                    "solver.unknown") for s in solvers or () if s not in known]
    if fail_if_worse is not None:
        compared = solvers or known
        if fail_if_worse not in known or fail_if_worse == REFERENCE:
            issues.append(Issue(("fail_if_worse",), f"'{fail_if_worse}' is no baseline; choose "
                                f"one of {', '.join(s for s in known if s != REFERENCE)}",
                                "gate.baseline"))
        elif REFERENCE not in compared or fail_if_worse not in compared:
            issues.append(Issue(("fail_if_worse",), f"the gate compares {REFERENCE} with "
                                f"{fail_if_worse}: both must be among the solvers",
                                "gate.solvers"))
    if issues:
        raise InputValidationError(issues, "compare request")


def tasks_for(batch: Batch) -> list[Task]:
    """One task per (graph, solver) the graph's family has, in the requested order."""
    tasks = []
    for doc in batch.docs:
        if doc.family is None:
            names = [s for s in batch.solvers or [REFERENCE]]
        else:
            data = doc.data if isinstance(doc.data, dict) else {}
            applies = FAMILIES[doc.family].solvers_for(
                data, batch.options.family_options.get(doc.family, {}))
            names = [s for s in batch.solvers or applies if s in applies]
        tasks += [Task(doc.graph, doc.family, doc.data, s, batch.options, doc.error)
                  for s in names]
    return tasks


def _load_cache(out: Path) -> dict[str, Record]:
    """Finished records of an earlier run, by key, with their answers reattached."""
    try:
        stored = json.loads((out / RESULTS).read_text())["records"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    cache = {}
    for r in stored:
        answer = out / ANSWERS / f"{r.get('key')}.json"
        if succeeded(r) and answer.is_file():
            cache[r["key"]] = {**r, "answer": json.loads(answer.read_text())}
    return cache


class _Store:
    """Keeps ``results.json`` current while a batch runs (flushed every few seconds), so
    an interrupted batch resumes from what finished."""

    def __init__(self, out: Path, batch: Batch):
        self.out, self.batch = out, batch
        self.records: dict[tuple[str, str], Record] = {}
        self.flushed = time.monotonic()
        (out / ANSWERS).mkdir(parents=True, exist_ok=True)

    def add(self, record: Record) -> None:
        if record.get("answer") is not None:
            (self.out / ANSWERS / f"{record['key']}.json").write_text(
                json.dumps(record["answer"], separators=(",", ":")))
        self.records[record["graph"], record["solver"]] = record
        if time.monotonic() - self.flushed > FLUSH_EVERY_S:
            self.flush(list(self.records.values()))

    def flush(self, records: list[Record], extra: dict[str, Any] | None = None) -> None:
        body = {"options": asdict(self.batch.options), "solvers": self.batch.solvers,
                "records": [{k: v for k, v in r.items() if k != "answer"} for r in records],
                **(extra or {})}
        tmp = self.out / f"{RESULTS}.tmp"
        tmp.write_text(json.dumps(body, indent=1) + "\n")
        tmp.replace(self.out / RESULTS)
        self.flushed = time.monotonic()


class BatchStopped(Exception):
    """``stop`` asked the batch to end early; the pairs finished so far stay cached."""


def run_batch(batch: Batch, out: Path, on_record: Callable[[Record], None] | None = None,
              runner: Runner = run_task, stop: Callable[[], bool] | None = None) -> Outcome:
    """Run every pair not already finished in ``out``; write results, report and plots.
    ``stop`` (local backend) is polled while pairs run: when it answers True the running
    pairs are killed and ``BatchStopped`` is raised."""
    check_solvers(batch.solvers, batch.fail_if_worse)
    out.mkdir(parents=True, exist_ok=True)
    tasks = tasks_for(batch)
    cache = {} if batch.force else _load_cache(out)
    store = _Store(out, batch)

    def done(record: Record, cached: bool = False) -> None:
        store.add({**record, "cached": cached})
        if on_record:
            on_record(record)

    todo = []
    for t in tasks:
        if t.key in cache:
            done({**cache[t.key], "graph": t.graph}, cached=True)
        else:
            todo.append(t)

    if batch.backend == "ray":
        run_ray(todo, batch.ray_address, done, runner)
    else:
        run_local(todo, batch.jobs, done, runner, stop, batch.memory_mb)
    if stop is not None and stop():
        store.flush(list(store.records.values()))
        raise BatchStopped(f"stopped after {len(store.records)} of {len(tasks)} pairs")
    records = [store.records[t.graph, t.solver] for t in tasks]
    verdict = gate(records, batch.fail_if_worse) if batch.fail_if_worse else None
    summary = summarize(records)
    store.flush(records, {"summary": summary, "gate": verdict})
    from solver.compare import plots  # matplotlib: 1 s of start-up no other command needs

    files = [RESULTS, REPORT, *plots.render_all(records, out / PLOTS)]
    options = {**asdict(batch.options), "solvers": ",".join(batch.solvers or ["all"])}
    (out / REPORT).write_text(report.render(records, options, verdict, files[2:]))
    return Outcome(records, summary, verdict, len(tasks) - len(todo), files)
