"""The family contract (``solver/family.py``): every family honours it, errors pickle
intact, admission agrees with the solvers, the deadline holds, deterministic solves
repeat byte for byte, and the command line made from it checks its usage first."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pickle
import pkgutil
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from hypothesis import given, settings
from typer.testing import CliRunner

import app
import models
import solver
from app.auth import Unauthorized
from app.body import UnsupportedMediaType
from app.cli import cli
from app.jobs.pool import SolveFailed
from app.limits import LimitExceeded
from app.service import Refusal
from models.errors import InputValidationError, Issue, NoSolutionError
from models.fusion import parse_problem
from models.layout_ops import ShapeError
from solver.compare.batch import BatchStopped
from solver.deadline import Deadline, now
from solver.families import FAMILIES, detect
from solver.family import Family, InvalidAnswer, Solved, Verdict
from solver.fusion.context import ScoringTimeout
from solver.fusion.cpsat_model import BuildTimeout
from solver.fusion.problem import Rules
from solver.fusion.score import ScoringContext
from solver.fusion.solvers import SolverBug
from solver.fusion.teamkorea import Rejected
from solver.fusion.unfused import unfused
from solver.iopddl.search import Infeasible
from solver.layout.greedy import TimeUp
from solver.onnx_import.builder import UnknownShape
from tests.fusion_cases import problems
from tests.pool_breakers import Unpicklable

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"fusion": ROOT / "app/examples/fusion-mlsys-2026-1.json",
            "layout": ROOT / "app/examples/layout-mlp-small.json",
            "iopddl": ROOT / "app/examples/iopddl-asplos-2025-example.json"}
runner = CliRunner()
ISSUES = [Issue(("ops", 3, "name"), "a message", "some.rule")]
SAMPLES: dict[type, BaseException] = {
    InputValidationError: InputValidationError(ISSUES, "layout graph"),
    NoSolutionError: NoSolutionError(ISSUES, "greedy"),
    UnsupportedMediaType: UnsupportedMediaType(ISSUES, "request"),
    InvalidAnswer: InvalidAnswer("the evaluator rejects it"),
    SolverBug: SolverBug("invalid solution"),
    ScoringTimeout: ScoringTimeout(),
    BatchStopped: BatchStopped("stopped after 3 of 9 pairs"),
    SolveFailed: SolveFailed("the worker process died", 503),
    LimitExceeded: LimitExceeded(413, "max_ops", 5000, ("payload",), "too many ops"),
    Unauthorized: Unauthorized("auth.missing", "no key"),
    Refusal: Refusal(422, {"detail": "invalid", "errors": []}),
    ShapeError: ShapeError("shapes [2, 3] and [4] do not broadcast"),
    TimeUp: TimeUp("the greedy walk passed its deadline at op 'fc1'"),
    UnknownShape: UnknownShape("seq", onnx.helper.make_node("Relu", ["x"], ["y"])),
    Infeasible: Infeasible(),
    BuildTimeout: BuildTimeout(),
    Rejected: Rejected(("granularities", 0), "split_k", "Two MMs without chain not allowed "
                       "with split-K"),
}


def _our_exceptions() -> set[type]:
    """Every exception class defined in the project (every module imported first)."""
    for package in (app, models, solver):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    found, todo = set(), [BaseException]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.split(".")[0] in ("app", "models", "solver"):
                found.add(sub)
    return found


def test_every_exception_type_survives_a_pickle_round_trip():
    private = {t for t in _our_exceptions() if t.__name__.startswith("_")}
    missing = _our_exceptions() - SAMPLES.keys() - private
    assert not missing, f"add a sample of {sorted(t.__name__ for t in missing)}"
    for kind, sample in SAMPLES.items():
        back = pickle.loads(pickle.dumps(sample))
        assert type(back) is kind and str(back) == str(sample)
        assert back.__dict__.keys() >= {k for k in sample.__dict__ if k != "__traceback__"}
        for name, value in vars(sample).items():
            if not inspect.isroutine(value) and name != "__traceback__":
                assert getattr(back, name) == value, (kind, name)
    with pytest.raises(TypeError):  # what the old errors did: caught by the test above
        pickle.loads(pickle.dumps(Unpicklable(1, 2)))


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_solves_and_evaluates_its_example_through_the_contract(name):
    fam = FAMILIES[name]
    members = {m for m in dir(Family) if not m.startswith("_")} | set(
        Family.__annotations__)
    assert not {m for m in members if not hasattr(fam, m)}, "a contract member is missing"
    doc = json.loads(EXAMPLES[name].read_text())
    assert detect(doc) is fam and fam.recognizes(doc)
    problem = fam.parse(doc)
    assert fam.estimate(doc) == fam.size(problem)
    runs = [({}, s) for s in fam.solvers_for(doc, {})]
    if name == "layout":  # and the mesh solvers, on the smallest mesh, and the TX8's
        runs += [({"mesh": "n300"}, s) for s in fam.solvers_for(doc, {"mesh": "n300"})]
        runs += [({"device": "tx8"}, s) for s in fam.solvers_for(doc, {"device": "tx8"})]
    assert {s for _, s in runs} == set(fam.solvers)
    for extra, solver_name in runs:
        options = fam.options(solver=solver_name, time_limit_s=5, **extra)
        fam.admit(problem, options)
        solved = fam.solve(problem, options, Deadline.after(5))
        assert isinstance(solved, Solved) and solved.status in ("optimal", "feasible")
        pickle.loads(pickle.dumps(solved))  # crosses the pool's pipe as it is
        verdict = fam.evaluate(problem, json.loads(json.dumps(solved.answer)),
                               fam.evaluate_options())
        assert isinstance(verdict, Verdict) and verdict.valid, verdict.errors
        assert verdict.total == pytest.approx(solved.objective, rel=1e-9)
        shown = fam.timeline(problem, solved.answer)
        assert shown.steps or shown.segments


@given(doc=problems(max_ops=4))
@settings(max_examples=150, deadline=None)
def test_fusion_admission_refuses_exactly_the_problems_no_schedule_can_run(doc):
    """``admit`` counts an op's elements at a 1x1x1 tile; the scorer searches every
    granularity: they agree on which problems have an op that fits nowhere (including a
    MatMul reading one tensor on both sides)."""
    for capacity in (1, 2, 3, 4, 5):
        problem = parse_problem({**doc, "fast_memory_capacity": capacity})
        fam = FAMILIES["fusion"]
        try:
            fam.admit(problem, fam.options())
            admitted = True
        except InputValidationError:
            admitted = False
        try:
            unfused(ScoringContext(problem, Rules()))
            runs = True
        except NoSolutionError:
            runs = False
        assert admitted == runs, capacity


def test_a_deadline_is_one_point_on_the_monotonic_clock_in_every_process():
    deadline = Deadline.after(30)
    before = deadline.remaining()
    shown = subprocess.run([sys.executable, "-c", (
        "import pickle, sys, time; d = pickle.loads(bytes.fromhex(sys.argv[1])); "
        "print(d.remaining())"), pickle.dumps(deadline).hex()], capture_output=True,
        text=True, check=True, cwd=ROOT).stdout
    # the child reads the clock between the parent's two readings
    assert deadline.remaining() <= float(shown) <= before
    with deadline.running() as run:
        assert run.at == deadline.at and abs(now() - time.monotonic()) < 0.01


def test_a_deterministic_deadline_counts_work_and_keeps_the_wall_clock_as_backstop():
    with Deadline.after(10, deterministic=True).running() as run:
        first = now()
        assert run.at == pytest.approx(3.0) and now() > first  # each reading is work
        assert not run.wall_stopped
    with Deadline.after(0.0, deterministic=True).running() as run:
        ends = now() + 0.6 * max(0.0, run.at - now())  # a loop's own end, from the clock
        assert ends > run.at and now() > ends and run.wall_stopped


@pytest.mark.parametrize(("family", "document", "options"), [
    ("fusion", ROOT.parent / "shared/mlsys2026/benchmarks/mlsys-2026-17.json",
     ["--time-limit", "20", "--reduction-cost", "per_op"]),
    ("layout", ROOT / "benchmarks/layout/models/bert-base-s384.json", ["--time-limit", "10"]),
])
def test_deterministic_solves_repeat_byte_for_byte_in_fresh_processes(tmp_path, family,
                                                                        document, options):
    """Each solve in its own process (string hashing differs between processes): the
    window search of fusion and the segment search of layout both decide by the clock, and
    so does the fusion cover bound's pricing (17 ``per_op`` at 20 s runs greedy, windows,
    the relinking and pricing: 3.5 s of wall time for its 6 s work budget). Layout's limit
    leaves the 2 s start-up and the 3 s work budget (up to 6 s of wall time) inside the
    wall-clock backstop."""
    outputs = []
    for run in range(2):
        out = tmp_path / f"{run}.json"
        shown = subprocess.run([str(Path(sys.executable).with_name("layoutsat")), family,
                                "solve", str(document), "-o", str(out), "--deterministic",
                                *options, "--json"], check=True, cwd=ROOT,
                               capture_output=True).stdout
        outputs.append((out.read_bytes(), shown))
    assert outputs[0] == outputs[1]
    result = json.loads(outputs[0][1])
    stats = result.get("stats", result)  # a layout plan keeps them there
    assert stats["deterministic"] is True and stats["wall_time_s"] is None


@pytest.mark.parametrize(("name", "machine"), [("fusion", True), ("iopddl", True),
                                               ("layout", False)])
def test_families_whose_search_gains_from_threads_default_to_the_machine_s_cores(name,
                                                                                 machine):
    """fusion (its cover bound in a second process beside the search) and iopddl (CP-SAT's
    own neighbourhood search) default to the cores, at most 8; layout to one thread."""
    cores = min(8, os.cpu_count() or 1)
    assert FAMILIES[name].options().workers == (cores if machine else 1)


def test_the_cli_checks_its_output_path_before_solving(tmp_path):
    started = time.monotonic()
    for output in ("/nonexistent/x.json", str(tmp_path)):
        r = runner.invoke(cli, ["fusion", "solve", str(EXAMPLES["fusion"]), "-o", output,
                                "--time-limit", "30"])
        assert r.exit_code == 2 and "cannot write" in r.stderr, r.output
    assert time.monotonic() - started < 10  # refused at once, not after a 30 s solve


def test_a_document_of_another_family_gets_one_line_naming_it(tmp_path):
    r = runner.invoke(cli, ["fusion", "solve", str(EXAMPLES["layout"])])
    assert r.exit_code == 1
    assert "this is a layout graph, not a fusion problem: use 'layoutsat layout" in r.stderr
    assert len([line for line in r.stderr.splitlines() if line.strip()]) == 2


def test_compare_on_a_missing_path_is_a_usage_error(tmp_path):
    r = runner.invoke(cli, ["compare", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "no such file" in r.stderr
    assert not (tmp_path / "o").exists()
