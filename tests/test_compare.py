"""Batch comparison: records equal direct solver runs, the summary's arithmetic, failures
recorded without aborting, the cache, the regression gate, Ray on loopback, the API jobs."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.main import create_app
from models.fusion import parse_problem
from models.layout import parse_graph
from solver import workers
from solver.compare import backends
from solver.compare.batch import Batch, run_batch, tasks_for
from solver.compare.discover import discover
from solver.compare.summary import gate, versus
from solver.compare.task import Options, Task, run_task
from solver.fusion.solvers import solve as solve_fusion
from solver.layout import solve as solve_layout
from tests.conftest import BAD_FILES, ROOT

FUSION = ROOT / "app" / "examples" / "fusion-example.json"
FUSION_1 = ROOT / "app" / "examples" / "fusion-mlsys-2026-1.json"
LAYOUT = ROOT / "app" / "examples" / "layout-mlp-small.json"
OPTIONS = Options(time_limit_s=5.0)
PNG_MAGIC = b"\x89PNG"


def graphs_dir(tmp_path: Path, *files: Path) -> Path:
    folder = tmp_path / "graphs"
    folder.mkdir(exist_ok=True)
    for f in files:
        shutil.copy(f, folder / f.name)
    return folder


def batch_of(folder: Path, **kwargs: Any) -> Batch:
    docs, _ = discover([str(folder)])
    return Batch(docs, options=kwargs.pop("options", OPTIONS), jobs=2, **kwargs)


def comparable(records: list[dict]) -> list[tuple]:
    return sorted((Path(r["graph"]).name, r["solver"], r["status"], r["total_latency"], r["valid"])
                  for r in records)


# ----------------------------------------------------------------------------- runners
# Module-level so worker processes can import them by name.


def crashing_runner(task: Task) -> dict:
    """Kills its process for the graph named 'crash', hangs for 'hang', else runs."""
    if "crash" in task.graph:
        os._exit(3)
    if "hang" in task.graph:
        time.sleep(60)
    return run_task(task)


def worse_cpsat_runner(task: Task) -> dict:
    """A cpsat twice as slow as it is: what the regression gate exists to catch."""
    record = run_task(task)
    if task.solver == "cpsat" and record["total_latency"]:
        record["total_latency"] *= 2
    return record


def pid_runner(task: Task) -> dict:
    """The worker's process id in place of a result."""
    return {"graph": task.graph, "solver": task.solver, "pid": os.getpid()}


# ----------------------------------------------------------------------------- summary


def rec(graph: str, solver: str, total: float | None, status: str = "feasible",
        family: str = "layout") -> dict:
    return {"graph": graph, "family": family, "solver": solver, "status": status,
            "total_latency": total, "valid": status not in ("error", "timeout", "invalid"),
            "wall_time_s": 1.0, "gap": None}


def test_geomean_wins_ties_losses_by_hand():
    records = [rec("a", "cpsat", 10.0), rec("a", "greedy", 20.0),   # ratio 2, win
               rec("b", "cpsat", 5.0), rec("b", "greedy", 40.0),    # ratio 8, win
               rec("c", "cpsat", 3.0), rec("c", "greedy", 3.0),     # ratio 1, tie
               rec("d", "cpsat", 4.0), rec("d", "greedy", 2.0),     # ratio 0.5, loss
               rec("e", "cpsat", 1.0), rec("e", "greedy", None, "error")]  # not counted
    (v,) = versus(records)
    assert (v.graphs, v.wins, v.ties, v.losses) == (4, 2, 1, 1)
    assert v.geomean == pytest.approx((2 * 8 * 1 * 0.5) ** 0.25)


def test_gate_reasons():
    ok = [rec("a", "cpsat", 1.0), rec("a", "greedy", 1.0)]
    assert gate(ok, "greedy") == []
    worse = [rec("a", "cpsat", 1.5), rec("a", "greedy", 1.0)]
    assert "worse than greedy" in gate(worse, "greedy")[0]
    invalid = [rec("a", "cpsat", 1.0), rec("a", "greedy", 2.0, "invalid")]
    assert any("invalid" in r for r in gate(invalid, "greedy"))
    # a baseline the family does not have is not a reason (dram has no fusion solver)
    fusion = [rec("f", "cpsat", 1.0, family="fusion")]
    assert gate(fusion, "dram") == []


# ----------------------------------------------------------------------------- discovery


def test_discover_skips_non_graphs_found_in_folders_but_not_named_ones(tmp_path):
    folder = graphs_dir(tmp_path, LAYOUT, FUSION)
    (folder / "results.json").write_text('{"records": []}')
    docs, notes = discover([str(folder), str(folder / "results.json"),
                            str(tmp_path / "missing.json"), str(folder / "*.json")])
    by_name = {Path(d.graph).name: d for d in docs}
    assert [n for n in notes if "results.json" in n]
    assert by_name["results.json"].error and by_name["missing.json"].error
    assert by_name[LAYOUT.name].family == "layout" and by_name[FUSION.name].family == "fusion"
    assert len(docs) == 4  # the glob repeats files already found: no duplicates


# ----------------------------------------------------------------------------- batch


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Any]:
    tmp = tmp_path_factory.mktemp("cmp")
    folder = graphs_dir(tmp, LAYOUT, FUSION_1)
    out = tmp / "out"
    return out, run_batch(batch_of(folder), out)


def test_records_equal_direct_solver_runs(finished):
    out, outcome = finished
    stored = json.loads((out / "results.json").read_text())["records"]
    assert len(stored) == len(outcome.records) == 4 + 3
    for r in stored:
        assert r["valid"] and r["error"] is None, r
        data = json.loads((ROOT / "app" / "examples" / Path(r["graph"]).name).read_text())
        if r["family"] == "layout":
            direct = solve_layout(parse_graph(data), r["solver"], time_limit_s=5.0)
            assert r["total_latency"] == pytest.approx(direct.total_latency_us, rel=1e-9)
        else:
            direct = solve_fusion(parse_problem(data), r["solver"], time_limit_s=5.0)
            assert r["total_latency"] == pytest.approx(direct.total_latency, rel=1e-9)


def test_summary_geomean_matches_a_hand_computation_over_the_records(finished):
    _, outcome = finished
    for v in outcome.summary["versus"]:
        totals = {(r["graph"], r["solver"]): r["total_latency"] for r in outcome.records
                  if r["family"] == v["family"]}
        ratios = [totals[g, v["baseline"]] / totals[g, "cpsat"]
                  for (g, s) in totals if s == "cpsat" and (g, v["baseline"]) in totals]
        expected = math.exp(sum(map(math.log, ratios)) / len(ratios))
        assert v["geomean_ratio"] == pytest.approx(expected)
        assert v["wins"] + v["ties"] + v["losses"] == v["graphs"] == len(ratios)


def test_report_and_plots_exist_and_are_non_empty(finished):
    out, outcome = finished
    report = (out / "report.md").read_text()
    assert "## Ratios" in report and "## Per graph" in report and "layout-mlp-small" in report
    pngs = list((out / "plots").glob("*.png"))
    svgs = list((out / "plots").glob("*.svg"))
    # latency by solver, ratio distribution, and one timeline per graph
    assert len(pngs) == len(svgs) == 2 + 2
    for p in pngs:
        assert p.read_bytes()[:4] == PNG_MAGIC and p.stat().st_size > 5000
    for s in svgs:
        assert "<svg" in s.read_text()[:2000]
    assert {f"plots/{p.name}" for p in pngs + svgs} <= set(outcome.files)


def test_rerun_reuses_finished_results_unless_forced(finished, tmp_path):
    out, first = finished
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    folder = graphs_dir(tmp_path, LAYOUT, FUSION_1)
    again = run_batch(batch_of(folder), copy)
    assert again.reused == len(first.records)
    assert comparable(again.records) == comparable(first.records)
    assert all(r["cached"] for r in json.loads((copy / "results.json").read_text())["records"])
    changed = run_batch(batch_of(folder, solvers=["greedy"],
                                 options=Options(time_limit_s=4.0)), copy)
    assert changed.reused == 0  # another time limit is another key
    forced = run_batch(batch_of(folder, solvers=["greedy"], options=Options(time_limit_s=4.0),
                                force=True), copy)
    assert forced.reused == 0 and not forced.failed


def test_planted_failures_are_recorded_and_the_batch_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "GRACE_S", 2.0)
    folder = graphs_dir(tmp_path, LAYOUT)
    shutil.copy(LAYOUT, folder / "crash.json")
    shutil.copy(LAYOUT, folder / "hang.json")
    batch = batch_of(folder, solvers=["greedy"], options=Options(time_limit_s=1.0))
    started = time.monotonic()
    outcome = run_batch(batch, tmp_path / "out", runner=crashing_runner)
    assert time.monotonic() - started < 30
    status = {Path(r["graph"]).stem: r for r in outcome.records}
    assert status["crash"]["status"] == "error" and "died" in status["crash"]["error"]
    assert status["hang"]["status"] == "timeout"
    assert status["layout-mlp-small"]["valid"]
    assert outcome.failed and outcome.summary["failed"] == 2
    assert "## Failures" in (tmp_path / "out" / "report.md").read_text()


def test_every_task_runs_in_a_fresh_worker_process(tmp_path):
    """A solve must not inherit the heap of the solves before it (it changed a fusion
    answer in a reused worker); one worker, four tasks, four processes."""
    batch = batch_of(graphs_dir(tmp_path, LAYOUT), solvers=["dram", "dfsharding", "greedy",
                                                             "cpsat"])
    tasks = tasks_for(batch)  # the runner only reports its process: nothing is solved
    records: list[dict] = []
    backends.run_local(tasks, 1, records.append, runner=pid_runner)
    assert len(records) == len(tasks) >= 4
    assert len({r["pid"] for r in records}) == len(tasks)
    assert os.getpid() not in {r["pid"] for r in records}


def test_a_graph_on_a_mesh_is_compared_by_the_mesh_solvers(tmp_path):
    """A graph naming a mesh (or a mesh in the batch's options) runs cpsat and the mesh
    baselines; a one-chip graph the one-chip solvers; each pair re-checked as usual."""
    folder = graphs_dir(tmp_path, LAYOUT)
    doc = json.loads(LAYOUT.read_text())
    (folder / "on-mesh.json").write_text(json.dumps({**doc, "device": None, "mesh": "n300"}))
    pairs = {(Path(t.graph).name, t.solver) for t in tasks_for(batch_of(folder))}
    assert {s for g, s in pairs if g == "on-mesh.json"} == {"cpsat", "replicate", "megatron",
                                                            "autoshard"}
    assert {s for g, s in pairs if g == LAYOUT.name} == {"cpsat", "dram", "dfsharding",
                                                         "greedy"}
    meshed = Options(time_limit_s=5.0, family_options={"layout": {"mesh": "n300"}})
    (tmp_path / "b").mkdir()
    outcome = run_batch(batch_of(graphs_dir(tmp_path / "b", LAYOUT), options=meshed,
                                 solvers=["cpsat", "megatron"]), tmp_path / "out")
    assert {(r["solver"], r["status"], r["valid"]) for r in outcome.records} == {
        ("cpsat", "feasible", True), ("megatron", "feasible", True)}


def test_a_graph_for_a_tx8_is_compared_by_the_tx8_solvers(tmp_path):
    """A graph whose device is a TX8 (or a TX8 in the batch's options) runs cpsat and
    groupcost, each plan re-checked by the TX8 evaluator; cpsat passes the gate."""
    folder = graphs_dir(tmp_path, LAYOUT)
    doc = json.loads(LAYOUT.read_text())
    (folder / "on-tx8.json").write_text(json.dumps({**doc, "device": "tx8"}))
    pairs = {(Path(t.graph).name, t.solver) for t in tasks_for(batch_of(folder))}
    assert {s for g, s in pairs if g == "on-tx8.json"} == {"cpsat", "groupcost"}
    on_tx8 = Options(time_limit_s=5.0, family_options={"layout": {"device": "tx8"}})
    (tmp_path / "b").mkdir()
    outcome = run_batch(batch_of(graphs_dir(tmp_path / "b", LAYOUT), options=on_tx8,
                                 solvers=["cpsat", "groupcost"], fail_if_worse="groupcost"),
                        tmp_path / "out")
    assert {(r["solver"], r["status"], r["valid"]) for r in outcome.records} == {
        ("cpsat", "optimal", True), ("groupcost", "feasible", True)}
    assert not outcome.gate and not outcome.failed


def test_gate_trips_when_cpsat_is_worse(tmp_path):
    folder = graphs_dir(tmp_path, LAYOUT)
    outcome = run_batch(batch_of(folder, solvers=["cpsat", "greedy"], fail_if_worse="greedy"),
                        tmp_path / "out", runner=worse_cpsat_runner)
    assert outcome.gate and "worse than greedy" in outcome.gate[0] and outcome.failed
    assert "**failed**" in (tmp_path / "out" / "report.md").read_text()


# ----------------------------------------------------------------------------- CLI


def test_cli_gate_passes_and_planted_bad_graph_exits_1(tmp_path):
    folder = graphs_dir(tmp_path, LAYOUT)
    result = CliRunner().invoke(cli, ["compare", str(folder), "--solvers", "cpsat,greedy",
                                      "--time-limit", "3", "--jobs", "1", "--out",
                                      str(tmp_path / "a"), "--fail-if-worse", "greedy"])
    assert result.exit_code == 0, result.output
    assert "gate: passed" in result.output
    bad = graphs_dir(tmp_path, LAYOUT, BAD_FILES[0])
    result = CliRunner().invoke(cli, ["compare", str(bad), "--solvers", "greedy",
                                      "--time-limit", "3", "--out", str(tmp_path / "b")])
    assert result.exit_code == 1
    records = json.loads((tmp_path / "b" / "results.json").read_text())["records"]
    failed = [r for r in records if not r["valid"]]
    assert len(failed) == 1 and failed[0]["status"] == "error"
    assert "invalid fusion problem" in failed[0]["error"]
    assert sum(r["valid"] for r in records) == 1


def test_cli_usage_errors_exit_2(tmp_path):
    runner = CliRunner()
    unknown = runner.invoke(cli, ["compare", str(LAYOUT), "--solvers", "nope"])
    assert unknown.exit_code == 2 and "unknown solver 'nope'" in unknown.output
    gate_without = runner.invoke(cli, ["compare", str(LAYOUT), "--solvers", "greedy",
                                       "--fail-if-worse", "dram"])
    assert gate_without.exit_code == 2 and "both must be among the solvers" in gate_without.output
    empty = runner.invoke(cli, ["compare", str(tmp_path)])
    assert empty.exit_code == 2 and "no graphs found" in empty.output


# ----------------------------------------------------------------------------- Ray


def test_ray_backend_on_loopback_equals_local(finished, tmp_path):
    ray = pytest.importorskip("ray")
    _, local = finished
    folder = graphs_dir(tmp_path, LAYOUT, FUSION_1)
    ray.init(address="local", _node_ip_address="127.0.0.1", num_cpus=2,
             include_dashboard=False, log_to_driver=False)
    try:
        remote = run_batch(batch_of(folder, backend="ray"), tmp_path / "out")
    finally:
        ray.shutdown()
    assert comparable(remote.records) == comparable(local.records)


# ----------------------------------------------------------------------------- API


def test_api_job_flow(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYOUTSAT_DATA_DIR", str(tmp_path))
    client = TestClient(create_app())
    graphs = [{"name": "mlp", "graph": json.loads(LAYOUT.read_text())},
              {"name": "fx", "graph": json.loads(FUSION.read_text())}]
    inline = client.post("/v1/compare", json={"graphs": graphs, "time_limit_s": 2})
    assert inline.status_code == 200 and inline.json()["state"] == "done"
    assert inline.json()["summary"]["failed"] == 0 and inline.json()["total"] == 4 + 3

    started = client.post("/v1/compare", json={"graphs": graphs[:1], "time_limit_s": 2,
                                               "background": True, "solvers": ["cpsat", "greedy"],
                                               "fail_if_worse": "greedy"})
    assert started.status_code == 202
    poll = started.headers["location"]
    deadline = time.monotonic() + 60
    while (job := client.get(poll).json())["state"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert job["state"] == "done" and job["gate"] == [] and job["done"] == job["total"] == 2
    report = client.get(next(f for f in job["files"] if f.endswith("report.md")))
    assert report.status_code == 200 and "## Regression gate" in report.text
    png = client.get(next(f for f in job["files"] if f.endswith(".png")))
    assert png.status_code == 200 and png.content[:4] == PNG_MAGIC
    assert client.get(poll + "/files/../../etc/passwd").status_code == 404
    assert client.get("/v1/compare/unknown").status_code == 404


def test_api_rejects_bad_batches_with_422():
    client = TestClient(create_app())
    bad = client.post("/v1/compare", json={"graphs": [{"name": "x", "graph": {"a": 1}}]})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["loc"] == ["graphs", 0, "graph"]
    malformed = json.loads(BAD_FILES[0].read_text())
    faulty = client.post("/v1/compare", json={"graphs": [{"name": "m", "graph": malformed}]})
    assert faulty.status_code == 422 and faulty.json()["errors"][0]["loc"][:3] == ["graphs", 0,
                                                                                   "graph"]
    unknown = client.post("/v1/compare", json={
        "graphs": [{"name": "m", "graph": json.loads(LAYOUT.read_text())}], "solvers": ["zz"]})
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["rule"] == "solver.unknown"
