"""The iopddl family through the API and the command line: gzip bodies and files, the
contest's solution format, faults named, infeasible problems answered as such."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.main import create_app
from app.settings import Settings
from tests.test_service_contract import rules, wait_for

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = json.loads((ROOT / "app/examples/iopddl-asplos-2025-example.json").read_text())
runner = CliRunner()


def client(tmp_path: Path, **overrides) -> TestClient:
    return TestClient(create_app(Settings(data_dir=tmp_path, pool_workers=1, **overrides)))


def test_solve_plain_and_gzip_bodies_give_the_optimum(tmp_path):
    with client(tmp_path) as c:
        plain = c.post("/v1/iopddl/solve?time_limit_s=10", json=EXAMPLE)
        assert plain.status_code == 200, plain.text
        body = plain.json()
        assert (body["status"], body["cost"], body["bound"]) == ("optimal", 445, 445)
        assert body["solution"] == [0, 0, 2, 1, 0]
        packed = c.post("/v1/iopddl/solve?time_limit_s=10&seed=1",
                        content=gzip.compress(json.dumps(EXAMPLE).encode()),
                        headers={"content-type": "application/json",
                                 "content-encoding": "gzip"})
        assert packed.status_code == 200, packed.text
        assert packed.json()["cost"] == 445


def test_bad_encodings_are_named(tmp_path):
    with client(tmp_path) as c:
        broken = c.post("/v1/iopddl/solve", content=b"\x1f\x8bnot gzip",
                        headers={"content-type": "application/json",
                                 "content-encoding": "gzip"})
        assert broken.status_code == 422 and rules(broken) == {"gzip.invalid"}
        other = c.post("/v1/iopddl/solve", content=b"{}",
                       headers={"content-type": "application/json", "content-encoding": "br"})
        assert other.status_code == 415 and rules(other) == {"content_encoding.unsupported"}


def test_evaluate_route_recomputes_cost_and_names_the_peak(tmp_path):
    with client(tmp_path) as c:
        good = c.post("/v1/iopddl/evaluate",
                      json={"problem": EXAMPLE, "solution": [0, 0, 2, 1, 0]})
        assert good.status_code == 200, good.text
        assert good.json()["valid"] and good.json()["cost"] == 445
        assert good.json()["peak"]["usage"] == 50
        over = c.post("/v1/iopddl/evaluate",
                      json={"problem": EXAMPLE, "solution": [0, 0, 1, 1, 0]})
        assert over.status_code == 200 and not over.json()["valid"]
        assert "exceeds the limit 50" in over.json()["errors"][0]


def test_malformed_problem_is_a_422_naming_field_and_rule(tmp_path):
    doc = copy.deepcopy(EXAMPLE)
    doc["problem"]["edges"]["costs"][2] = [1, 2, 3]
    with client(tmp_path) as c:
        answer = c.post("/v1/iopddl/solve", json=doc)
        assert answer.status_code == 422
        error, = answer.json()["errors"]
        assert error["rule"] == "edge.costs_length"
        assert error["loc"] == ["problem", "edges", "costs", 2]
        for solution, rule in (("abc", "schema.type"), ([0, True, 2, 1, 0], "integer.type")):
            refused = c.post("/v1/iopddl/evaluate",
                             json={"problem": EXAMPLE, "solution": solution})
            assert refused.status_code == 422 and rule in rules(refused), refused.text
        after = c.post("/v1/iopddl/solve?time_limit_s=5", json=EXAMPLE)  # the pool still works
        assert after.status_code == 200 and after.json()["cost"] == 445


def test_infeasible_problem_says_so(tmp_path):
    doc = copy.deepcopy(EXAMPLE)
    doc["problem"]["usage_limit"] = 40  # nodes 0, 1, 2 need at least 10 + 25 + 15 at step 50
    with client(tmp_path) as c:
        answer = c.post("/v1/iopddl/solve?time_limit_s=5", json=doc)
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "infeasible" and answer.json()["solution"] is None


def test_jobs_take_the_family(tmp_path):
    with client(tmp_path) as c:
        job = c.post("/v1/jobs", json={"kind": "iopddl", "payload": EXAMPLE,
                                       "options": {"solver": "greedy", "time_limit_s": 5}})
        assert job.status_code == 202, job.text
        done = wait_for(c, job.json()["id"])
        assert done["state"] == "done" and done["result"]["cost"] >= 445


def test_node_limit_is_its_own(tmp_path):
    with client(tmp_path, max_nodes=3) as c:
        answer = c.post("/v1/iopddl/solve", json=EXAMPLE)
        assert answer.status_code == 413 and answer.json()["limit"] == "max_nodes"


def test_cli_reads_gzip_and_writes_the_contest_solution(tmp_path):
    packed = tmp_path / "example.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(EXAMPLE).encode()))
    out = tmp_path / "solution.json"
    solved = runner.invoke(cli, ["iopddl", "solve", str(packed), "-o", str(out),
                                 "--time-limit", "10", "--json"])
    assert solved.exit_code == 0, solved.output
    assert json.loads(out.read_text()) == [0, 0, 2, 1, 0]
    assert json.loads(solved.stdout)["cost"] == 445
    checked = runner.invoke(cli, ["iopddl", "evaluate", str(packed), str(out)])
    assert checked.exit_code == 0 and "445" in checked.output
    bad = tmp_path / "bad.json"
    bad.write_text("[0, 9, 0, 0, 0]")
    refused = runner.invoke(cli, ["iopddl", "evaluate", str(packed), str(bad)])
    assert refused.exit_code == 1 and "out of range" in refused.output
