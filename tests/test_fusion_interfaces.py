"""``layoutsat fusion solve|evaluate`` and ``/v1/fusion/solve|evaluate``: defaults, answers
the evaluator agrees with, and clear errors."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.main import create_app
from models.fusion import parse_problem, parse_solution
from solver import progress
from solver.fusion import solvers
from solver.fusion.evaluate import evaluate
from solver.fusion.problem import Rules
from tests.conftest import BAD_FILES, DIAMOND, MLSYS, load

runner = CliRunner()
BENCH_3 = MLSYS / "benchmarks" / "mlsys-2026-3.json"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def test_cli_solve_defaults_to_cpsat_and_writes_a_solution_the_evaluator_accepts(tmp_path):
    out = tmp_path / "solution.json"
    r = runner.invoke(cli, ["fusion", "solve", str(BENCH_3), "--time-limit", "10", str(out)])
    assert r.exit_code == 0, r.output
    assert "cpsat: optimal" in r.output and "(per_native_k)" in r.output
    verdict = evaluate(parse_problem(load(BENCH_3)), parse_solution(json.loads(out.read_text())),
                       strict=True)
    assert verdict.valid and f"total {float(verdict.total):,.2f}" in r.output
    assert "2 subgraphs (per_native_k); latencies " in r.output


def test_cli_solve_counts_one_subgraph_in_the_singular(tmp_path):
    """The example fuses into one subgraph (PROBLEM.md, Example 1, strategy B: 3,276.8)."""
    example = MLSYS / "benchmarks" / "example_problem.json"
    r = runner.invoke(cli, ["fusion", "solve", str(example), str(tmp_path / "out.json")])
    assert r.exit_code == 0, r.output
    assert "1 subgraph (per_native_k); latency 3,276.80" in r.output


@pytest.mark.parametrize("mode", ["per_native_k", "per_op"])
def test_cli_evaluate_agrees_with_the_solution_it_was_given(tmp_path, mode):
    out = tmp_path / "solution.json"
    solved = runner.invoke(cli, ["fusion", "solve", str(BENCH_3), "--solver", "greedy",
                                 "--reduction-cost", mode, str(out), "--json"])
    total = json.loads(solved.stdout)["total_latency"]
    r = runner.invoke(cli, ["fusion", "evaluate", str(BENCH_3), str(out),
                            "--reduction-cost", mode, "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["valid"] and report["claimed_match"] and report["total_latency"] == total


def test_cli_solve_reports_an_answer_the_evaluator_refuses_without_a_traceback(
        tmp_path, monkeypatch):
    """A solver bug (an answer the evaluator refuses) ends the command with exit 1 and a
    message saying so, and the file keeps the valid answer offered before it."""
    greedy = solvers.SOLVERS["greedy"]

    def faulty(problem, ends, **options):
        found = greedy(problem, ends, **options)
        progress.offer(found.total_latency, lambda: found.solution.model_dump(mode="json"))
        raise solvers.SolverBug("solver 'cpsat' produced an invalid solution: made up")

    monkeypatch.setitem(solvers.SOLVERS, "cpsat", faulty)
    out = tmp_path / "solution.json"
    r = runner.invoke(cli, ["fusion", "solve", str(BENCH_3), str(out)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "made up (a fault of layoutsat" in r.output
    assert f"{out} holds the best valid answer found before it" in r.output
    assert evaluate(parse_problem(load(BENCH_3)),
                    parse_solution(json.loads(out.read_text()))).valid
    r = runner.invoke(cli, ["fusion", "solve", str(BENCH_3), "--json"])
    assert r.exit_code == 1
    assert json.loads(r.stdout)["answer_kept"] is None


def test_cli_solve_takes_the_output_as_an_option_too(tmp_path):
    out = tmp_path / "solution.json"
    r = runner.invoke(cli, ["fusion", "solve", str(BENCH_3), "--solver", "unfused", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert evaluate(parse_problem(load(BENCH_3)), parse_solution(json.loads(out.read_text())),
                    strict=True).valid
    clash = runner.invoke(cli, ["fusion", "solve", str(BENCH_3), str(out), "-o", "other.json"])
    assert clash.exit_code == 2 and "--output" in clash.output


def test_cli_evaluate_rejects_a_solution_that_misses_an_op(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"subgraphs": [[0]], "granularities": [[128, 128, 1]],
                               "tensors_to_retain": [[]], "subgraph_latencies": [1]}))
    path = tmp_path / "diamond.json"
    path.write_text(json.dumps(DIAMOND))
    r = runner.invoke(cli, ["fusion", "evaluate", str(path), str(bad)])
    assert r.exit_code == 1
    assert "invalid" in r.stderr and "op" in r.stderr


def test_cli_solve_rejects_a_malformed_problem_with_its_faults():
    r = runner.invoke(cli, ["fusion", "solve", str(BAD_FILES[0])])
    assert r.exit_code == 1
    assert "invalid fusion problem" in r.stderr


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "unfused"])
def test_api_solve_answers_with_the_evaluators_latencies(client, solver):
    problem = load(BENCH_3)
    r = client.post("/v1/fusion/solve", json=problem,
                    params={"solver": solver, "time_limit_s": 10, "reduction_cost": "per_op"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["solver"] == solver and body["status"] in {"optimal", "feasible"}
    verdict = evaluate(parse_problem(problem), parse_solution(body["solution"]),
                       Rules(reduction_cost="per_op"), strict=True)
    assert verdict.valid and float(verdict.total) == body["total_latency"]
    assert body["lower_bounds"]["total"] <= body["total_latency"]


def test_api_solve_reports_the_bound_and_gap_of_cpsat(client):
    body = client.post("/v1/fusion/solve", json=load(BENCH_3)).json()
    assert body["solver"] == "cpsat"
    assert body["bound"] == body["lower_bounds"]["total"]
    assert body["gap"] == pytest.approx((body["objective"] - body["bound"]) / body["objective"])


def test_api_solve_rejects_an_unknown_solver_and_a_bad_problem(client):
    r = client.post("/v1/fusion/solve", json=DIAMOND, params={"solver": "magic"})
    assert r.status_code == 422
    assert r.json()["errors"][0]["rule"] == "solver.unknown"
    r = client.post("/v1/fusion/solve", json=load(BAD_FILES[0]))
    assert r.status_code == 422
    assert r.json()["errors"][0]["rule"] == "pointwise.shape"
    r = client.post("/v1/fusion/solve", json=DIAMOND, params={"time_limit_s": 0})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"][-1] == "time_limit_s"


def test_api_evaluate_reports_an_invalid_solution_as_an_answer(client):
    solution = {"subgraphs": [[0]], "granularities": [[128, 128, 1]],
                "tensors_to_retain": [[]], "subgraph_latencies": [1]}
    r = client.post("/v1/fusion/evaluate", json={"problem": DIAMOND, "solution": solution})
    assert r.status_code == 200
    assert r.json()["valid"] is False and r.json()["error"]


def test_api_evaluate_returns_steps_on_request(client):
    solved = client.post("/v1/fusion/solve", json=DIAMOND, params={"solver": "greedy"}).json()
    r = client.post("/v1/fusion/evaluate", json={"problem": DIAMOND,
                                                 "solution": solved["solution"]},
                    params={"steps": True})
    assert r.status_code == 200
    details = r.json()["details"]
    assert len(details) == len(solved["solution"]["subgraphs"])
    assert sum(d["latency"] for d in details) == pytest.approx(solved["total_latency"])
