"""What a worker process runs: one solve of any family, from accepted JSON to result JSON.

``run_solve`` is sent to the pool by name, takes and returns plain data, and never raises
for a fault of the input or of a solver: what comes back is a ``Finished`` answer or a
``Refused`` one (status and body), so nothing unpicklable ever crosses the pool's pipe.
It is the only place a solve happens for the service (synchronous routes and jobs alike).
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
from pathlib import Path
from typing import Any, NamedTuple

from app.body import parse_json
from app.jobs.kinds import admit, evaluation
from app.jobs.store import JobStore
from app.limits import LimitExceeded
from app.settings import Settings
from models.errors import InputValidationError, Loc
from solver.deadline import Deadline
from solver.families import family

GOOD_STATUSES = ("optimal", "feasible")
CACHE_WAIT_S = 2.0
"""A solve that waited longer than this (or a tenth of its time limit, if more) for a
worker, and then used the time it had left, is answered but not cached: a later request
may get a better answer. One that stopped by itself with more time left than it lost
(a baseline, a proven optimum) did not need that time and is cached."""

log = logging.getLogger("layoutsat.worker")


class Finished(NamedTuple):
    """A solve's status and its answer already serialized, so the server process only
    passes the bytes on; ``cacheable``: more time would not have changed it (``CACHE_WAIT_S``)."""

    status: str
    body: str
    cacheable: bool


class Refused(NamedTuple):
    """A solve that gave no answer: the HTTP status a synchronous route answers with and
    a JSON body (``detail``, and ``errors`` for an input fault)."""

    status: int
    body: dict[str, Any]

    @property
    def reason(self) -> str:
        detail = str(self.body.get("detail", ""))
        errors = self.body.get("errors") or []
        return detail + "".join(f"; {e.get('path', '$')}: {e.get('msg')}" for e in errors)


Outcome = Finished | Refused


def run_solve(kind: str, payload: Any, options: dict[str, Any], deadline: Deadline,
              job: tuple[str, str] | None = None, admit_at: tuple[Loc, Loc] | None = None
              ) -> Outcome:
    """Parse, solve within ``deadline`` and serialize; ``job`` (database, job id) makes the
    solver's progress visible on the job while it runs; ``admit_at`` (where the document
    and the options sit in the request): run the family's admission check first."""
    try:
        fam = family(kind)
        problem = fam.parse(payload)
        opts = fam.options.model_validate(options)
        if admit_at is not None:
            admit(fam, problem, opts, *admit_at)
        waited = deadline.limit_s - deadline.remaining()
        sink = JobProgress(JobStore(Path(job[0])), job[1]) if job else None
        solved = fam.solve(problem, opts, deadline, sink)
        unhurried = waited <= max(CACHE_WAIT_S, 0.1 * deadline.limit_s)
        needed_no_more = solved.status == "optimal" or deadline.remaining() > waited
        return Finished(solved.status, solved.body(), unhurried or needed_no_more)
    except InputValidationError as exc:
        return Refused(422, exc.as_dict())
    except MemoryError:
        return Refused(413, {"detail": "the solve needed more memory than this worker may "
                             "use (LAYOUTSAT_WORKER_MEMORY_MB)"})
    except Exception as exc:  # a fault of ours: reported, and the worker stays usable
        log.error("solver failed", extra={"fields": {"kind": kind, "error": repr(exc),
                                                      "trace": traceback.format_exc()}})
        return Refused(500, {"detail": f"the solver failed: {type(exc).__name__}: {exc}"})


def run_evaluate(kind: str, raw: bytes, options: dict[str, Any], settings: Settings) -> Outcome:
    """An evaluate request from its raw body to the report's JSON, in a worker: a check of
    a large answer (every step of every tile) is bounded like a solve."""
    try:
        fam = family(kind)
        report = evaluation(fam, parse_json(raw), options, settings)
        return Finished("done", report.model_dump_json(exclude_none=True, by_alias=True),
                        False)
    except InputValidationError as exc:
        return Refused(422, exc.as_dict())
    except LimitExceeded as exc:
        return Refused(exc.status_code, exc.as_dict())
    except MemoryError:
        return Refused(413, {"detail": "the evaluation needed more memory than this worker "
                             "may use (LAYOUTSAT_WORKER_MEMORY_MB)"})
    except Exception as exc:  # a fault of ours
        log.error("evaluation failed", extra={"fields": {"kind": kind, "error": repr(exc),
                                                          "trace": traceback.format_exc()}})
        return Refused(500, {"detail": f"the evaluator failed: {type(exc).__name__}: {exc}"})


PROGRESS_EVERY_S = 0.5


class JobProgress:
    """The solver's progress reports written to the job's row, at most every
    ``PROGRESS_EVERY_S``, with the worker's pid and start time."""

    def __init__(self, store: JobStore, job_id: str):
        self.store = store
        self.job_id = job_id
        self.shown: dict[str, Any] = {"pid": os.getpid(), "started": time.time()}
        self.written = 0.0
        store.progress(job_id, self.shown)

    def __call__(self, objective: float, bound: float | None) -> None:
        self.shown["objective"] = objective
        if bound is not None:
            self.shown["bound"] = bound
        if time.monotonic() - self.written >= PROGRESS_EVERY_S:
            self.written = time.monotonic()
            self.store.progress(self.job_id, self.shown)


def run_import(path: str, options: Any) -> Outcome:
    """An ONNX model streamed to ``path`` (deleted here) as a layout graph and its report."""
    from app.onnx_support import importer

    try:
        module = importer()
        result = module.import_onnx(Path(path).read_bytes(), options)
        graph = {"format": "layoutsat-graph", "version": 1, **result.graph.model_dump(
            mode="json", by_alias=True, exclude_defaults=True)}
        return Finished("done", json.dumps({"graph": graph, "report": result.report}), False)
    except InputValidationError as exc:
        return Refused(422, exc.as_dict())
    except MemoryError:
        return Refused(413, {"detail": "the import needed more memory than this worker may "
                             "use (LAYOUTSAT_WORKER_MEMORY_MB)"})
    except Exception as exc:  # a fault of ours
        log.error("import failed", extra={"fields": {"error": repr(exc),
                                                      "trace": traceback.format_exc()}})
        return Refused(500, {"detail": f"the import failed: {type(exc).__name__}: {exc}"})
    finally:
        Path(path).unlink(missing_ok=True)
