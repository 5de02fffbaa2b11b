"""``layoutsat fusion solve`` as a contest harness runs it: the whole process, start-up and
exit included, ends within its time limit, and from its first schedule on the output file
holds a valid answer, so a harness that kills the process at its limit still finds one.

Each test runs the real command in a process of its own and times it from outside."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.fusion_generate import suite
from models.fusion import parse_problem
from solver import progress
from solver.deadline import now
from solver.fusion import cpsat as fusion_cpsat
from solver.fusion.family import FAMILY, FusionEvaluateOptions
from solver.fusion.problem import Rules
from solver.fusion.score import ScoringContext
from tests.conftest import MLSYS

LAYOUTSAT = Path(sys.executable).with_name("layoutsat")
GRACE_S = 0.5
"""How far past its limit a process may end (the issue's bar)."""


def bench(n: int) -> Path:
    return MLSYS / "benchmarks" / f"mlsys-2026-{n}.json"


def solve_command(problem: Path, out: Path, seconds: float, mode: str,
                  workers: int | None = 1) -> list[str]:
    """The command; ``workers`` None gives no ``--workers`` (the machine's cores)."""
    threads = [] if workers is None else ["--workers", str(workers)]
    return [str(LAYOUTSAT), "fusion", "solve", str(problem), "-o", str(out), "--time-limit",
            str(seconds), "--reduction-cost", mode, *threads]


def assert_valid_answer(problem: Path, out: Path, mode: str,
                        semantics: str = "default") -> None:
    """The file holds a solution the evaluator accepts (claimed latencies included)."""
    verdict = FAMILY.evaluate(parse_problem(json.loads(problem.read_text())),
                              json.loads(out.read_text()),
                              FusionEvaluateOptions(reduction_cost=mode, semantics=semantics,
                                                    strict=True))
    assert verdict.valid, verdict.errors


def timed_solve(problem: Path, out: Path, seconds: float, mode: str,
                semantics: str = "default", workers: int | None = 1) -> float:
    started = time.monotonic()
    subprocess.run(solve_command(problem, out, seconds, mode, workers)
                   + ["--semantics", semantics], check=True, capture_output=True)
    return time.monotonic() - started


@pytest.mark.parametrize(("n", "mode"), [(17, "per_op"), (5, "per_native_k")])
def test_the_whole_process_ends_within_a_2_s_limit(tmp_path, n, mode):
    """17 ``per_op`` overran most before (2.06 s; 2.2-2.3 s with two solves at once):
    the start-up alone took 0.8 s of the 2 s."""
    out = tmp_path / "solution.json"
    wall = timed_solve(bench(n), out, 2, mode)
    assert wall <= 2 + GRACE_S
    assert_valid_answer(bench(n), out, mode)
    assert [p.name for p in tmp_path.iterdir()] == ["solution.json"]  # no temporary left


def test_with_two_workers_the_process_and_its_bound_child_end_within_a_2_s_limit(tmp_path):
    """With two workers the cover bound runs in a forked child beside the search
    (``bound/background.py``): the child is reaped and the process ends in time."""
    out = tmp_path / "solution.json"
    wall = timed_solve(bench(17), out, 2, "per_op", workers=2)
    assert wall <= 2 + GRACE_S
    assert_valid_answer(bench(17), out, "per_op")


def test_the_teamkorea_reading_ends_within_a_2_s_limit(tmp_path):
    """Under that reading no bound follows the search, and 13's greedy alone takes 1.4 s."""
    out = tmp_path / "solution.json"
    wall = timed_solve(bench(13), out, 2, "per_op", "teamkorea")
    assert wall <= 2 + GRACE_S
    assert_valid_answer(bench(13), out, "per_op", "teamkorea")


def test_a_320_op_graph_ends_within_a_2_s_limit_under_the_reading(tmp_path: Path):
    """A gated MLP of 320 ops (60% MatMuls, K of 1,024-2,048): every op's best config
    alone took 2.0 s before the config search's floors saw what MatMul strips reload (0.4
    s after), and a 2-s solve ended after 2.7 s."""
    problem, out = tmp_path / "problem.json", tmp_path / "solution.json"
    # of the scale run: ``fusion_generate.py --count 12 --ops 320 --seed 31``
    problem.write_text(json.dumps(dict(suite(seed=31, count=12, ops=320))["gen-gated-mlp-01"]))
    assert timed_solve(problem, out, 2, "per_op", "teamkorea") <= 2 + GRACE_S
    assert_valid_answer(problem, out, "per_op", "teamkorea")


def test_the_whole_process_ends_within_a_30_s_limit(tmp_path):
    """As a harness runs it, with no ``--workers``: the machine's cores (the cover bound in
    a child beside the search where there are two or more). 13 ``per_op`` uses the whole
    limit: window search and relinking, and the cover bound until the deadline."""
    out = tmp_path / "solution.json"
    wall = timed_solve(bench(13), out, 30, "per_op", workers=None)
    assert wall <= 30 + GRACE_S
    assert_valid_answer(bench(13), out, "per_op")


def test_a_valid_answer_is_on_disk_when_the_process_is_killed_at_half_its_limit(tmp_path):
    """The first schedule (unfused) is written within a second of the start, greedy's and
    every better one replace it whole; killed mid-search, the process leaves a valid file."""
    out = tmp_path / "solution.json"
    seconds = 6.0
    started = time.monotonic()
    proc = subprocess.Popen(solve_command(bench(13), out, seconds, "per_op"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(max(0.0, started + seconds / 2 - time.monotonic()))
    still_running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert still_running
    assert_valid_answer(bench(13), out, "per_op")


def test_only_answers_better_than_the_last_kept_are_built_and_kept():
    kept: list[str] = []

    def refuse() -> str:
        raise AssertionError("built an answer no one keeps")

    with progress.keeping(kept.append):
        progress.offer(10.0, lambda: "first")
        progress.offer(12.0, refuse)
        progress.offer(9.0, lambda: None)  # the evaluator refused it: nothing kept
        progress.offer(9.5, lambda: "better")
    progress.offer(1.0, refuse)
    assert kept == ["first", "better"]


@pytest.mark.parametrize("n", [5, 13])
def test_a_search_with_no_time_left_builds_no_model(monkeypatch, n):
    """A model's building and CP-SAT's 0.1 s floor would run past the deadline: with less
    than ``LEAST_SOLVE_S`` left, neither the whole-graph model (5), nor a window, nor the
    relinking (13) is tried, and greedy's schedule stands."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was built past the deadline")

    monkeypatch.setattr(fusion_cpsat, "build_model", refuse)
    ctx = ScoringContext(parse_problem(json.loads(bench(n).read_text())),
                         Rules(reduction_cost="per_op"), every_tile=True)
    found = fusion_cpsat.cpsat_search(ctx, now())
    assert found.schedule and not found.optimal
