"""A compare request as a batch (``solver.compare``): built from accepted JSON, run into its
own output folder, and summarized as the JSON the API returns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from solver.compare.batch import Batch, Outcome, run_batch
from solver.compare.discover import GraphDoc
from solver.compare.task import Options
from solver.families import detect


def batch_for(payload: dict[str, Any], options: dict[str, Any], processes: int,
              memory_mb: int = 0) -> Batch:
    docs = [GraphDoc(g["name"], g["graph"], detect(g["graph"]).name)
            for g in payload["graphs"]]
    opts = Options(options["time_limit_s"], options["seed"], options["workers"],
                   options.get("deterministic", False), options.get("family_options", {}))
    return Batch(docs, options["solvers"], opts, jobs=processes,
                 fail_if_worse=options["fail_if_worse"], memory_mb=memory_mb)


def result_of(outcome: Outcome) -> dict[str, Any]:
    """What a client reads: the summary, the gate, the records (answers stay on disk) and
    the files it can download."""
    return {"summary": outcome.summary, "gate": outcome.gate,
            "records": [{k: v for k, v in r.items() if k != "answer"}
                        for r in outcome.records],
            "files": outcome.files}


def run_compare(payload: dict[str, Any], options: dict[str, Any], processes: int, out: Path,
                on_record: Callable[[dict[str, Any]], None] | None = None,
                stop: Callable[[], bool] | None = None, memory_mb: int = 0) -> dict[str, Any]:
    return result_of(run_batch(batch_for(payload, options, processes, memory_mb), out,
                               on_record, stop=stop))
