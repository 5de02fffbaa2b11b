"""The production service: jobs (submit, poll, cancel, cache), limits, restart recovery,
worker faults, metrics and request ids, all against the app in this process."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.jobs import kinds
from app.jobs.pool import SolveFailed, SolvePool
from app.jobs.store import JobStore
from app.jobs.work import run_solve
from app.main import create_app
from app.observability import JsonFormatter
from app.settings import Settings
from models.fusion import parse_problem
from solver import workers
from solver.deadline import Deadline
from solver.fusion.solvers import SOLVERS, SolverBug
from solver.fusion.solvers import solve as solve_fusion
from tests.layout_fixtures import SLOW_GRAPH

ROOT = Path(__file__).resolve().parents[1]
FUSION = json.loads((ROOT / "app/examples/fusion-example.json").read_text())
LAYOUT = json.loads((ROOT / "app/examples/layout-mlp-small.json").read_text())
SLOW_LAYOUT = json.loads(SLOW_GRAPH.read_text())


def make(tmp_path: Path, **overrides) -> TestClient:
    settings = Settings(data_dir=tmp_path, pool_workers=overrides.pop("pool_workers", 2),
                        **overrides)
    return TestClient(create_app(settings))


def wait_for(client: TestClient, job_id: str, states=("done", "failed", "cancelled"),
             within_s: float = 90) -> dict:
    deadline = time.monotonic() + within_s
    while (job := client.get(f"/v1/jobs/{job_id}").json())["state"] not in states:
        assert time.monotonic() < deadline, f"job stuck in {job['state']}"
        time.sleep(0.05)
    return job


def running_pid(client: TestClient, job_id: str) -> int:
    deadline = time.monotonic() + 30
    while not (job := client.get(f"/v1/jobs/{job_id}").json())["progress"]["pid"]:
        assert time.monotonic() < deadline and job["state"] in ("queued", "running")
        time.sleep(0.05)
    return job["progress"]["pid"]


# ------------------------------------------------------------------------------- jobs


def test_a_fusion_job_gives_the_direct_solvers_answer_and_is_cached(tmp_path):
    with make(tmp_path) as client:
        submitted = client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                                  "options": {"solver": "greedy"}})
        assert submitted.status_code == 202 and submitted.json()["state"] in ("queued",
                                                                              "running", "done")
        assert submitted.headers["location"].endswith(f"/v1/jobs/{submitted.json()['id']}")
        job = wait_for(client, submitted.json()["id"])
        direct = solve_fusion(parse_problem(FUSION), "greedy")
        assert job["state"] == "done" and not job["cached"] and job["attempts"] == 1
        assert job["result"]["total_latency"] == direct.total_latency
        assert job["progress"]["elapsed_s"] >= 0

        again = client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                              "options": {"solver": "greedy"}}).json()
        assert again["state"] == "done" and again["cached"]
        assert again["result"]["total_latency"] == direct.total_latency
        assert client.get("/v1/jobs/nope").status_code == 404


def test_layout_jobs_and_the_synchronous_routes_share_the_cache(tmp_path):
    with make(tmp_path) as client:
        first = client.post("/v1/layout/solve?solver=greedy", json=LAYOUT)
        second = client.post("/v1/layout/solve?solver=greedy", json=LAYOUT)
        assert first.status_code == second.status_code == 200
        assert first.headers["x-layoutsat-cache"] == "miss"
        assert second.headers["x-layoutsat-cache"] == "hit"
        assert first.json() == second.json()
        job = client.post("/v1/jobs", json={"kind": "layout", "payload": LAYOUT,
                                            "options": {"solver": "greedy"}}).json()
        assert job["cached"] and job["result"]["total_latency_us"] == first.json()[
            "total_latency_us"]
        other_seed = client.post("/v1/layout/solve?solver=greedy&seed=7", json=LAYOUT)
        assert other_seed.headers["x-layoutsat-cache"] == "miss"


def test_an_answer_cached_by_other_code_is_not_reused(tmp_path, monkeypatch):
    """The cache key holds a digest of the answering code: after the code changed (here,
    its digest), the same request is solved again, not answered from the cache."""
    with make(tmp_path) as client:
        def asked() -> str:
            answer = client.post("/v1/fusion/solve?solver=greedy", json=FUSION)
            assert answer.status_code == 200
            return answer.headers["x-layoutsat-cache"]

        assert [asked(), asked()] == ["miss", "hit"]
        monkeypatch.setattr(kinds, "answering_code", lambda: "a later commit")
        assert [asked(), asked()] == ["miss", "hit"]


def test_the_code_digest_follows_every_file_its_name_and_its_bytes(tmp_path):
    root = tmp_path / "solver"
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("A = 1\n")
    (root / "sub" / "b.py").write_text("B = 2\n")
    (root / "notes.txt").write_text("not code")
    first = kinds.code_digest((root,))
    (root / "notes.txt").write_text("still not code")
    assert kinds.code_digest((root,)) == first
    (root / "sub" / "b.py").write_text("B = 3\n")
    second = kinds.code_digest((root,))
    assert second != first
    (root / "sub" / "b.py").rename(root / "b.py")
    assert kinds.code_digest((root,)) not in (first, second)
    assert len(kinds.answering_code()) == 64


def test_an_answer_after_a_long_wait_is_cached_only_if_more_time_would_not_change_it():
    """After a long wait for a worker: a greedy answer (it stops by itself) and a proven
    optimum are cached; a search its deadline stopped is not."""
    def lost(limit_s: float, waited_s: float) -> Deadline:
        return Deadline.after(limit_s, start=time.monotonic() - waited_s)

    assert run_solve("layout", LAYOUT, {"solver": "greedy"}, lost(6.0, 2.5)).cacheable
    proven = run_solve("layout", LAYOUT, {"solver": "cpsat"}, lost(20.0, 15.0))
    assert proven.status == "optimal" and proven.cacheable
    cut = run_solve("layout", SLOW_LAYOUT, {"solver": "cpsat"}, lost(6.0, 4.5))
    assert cut.status == "feasible" and not cut.cacheable
    assert run_solve("layout", LAYOUT, {"solver": "greedy"}, Deadline.after(6.0)).cacheable


def test_a_solver_fault_is_a_500_naming_it_and_the_worker_solves_the_next(monkeypatch):
    """An answer the evaluator refuses (``SolverBug``, a fault of ours, not of the input)
    is reported as such by the code a pool worker runs, which then answers the next
    request."""
    def faulty(problem, ends, **options):
        raise SolverBug("solver 'cpsat' produced an invalid solution: made up")

    with monkeypatch.context() as patched:
        patched.setitem(SOLVERS, "cpsat", faulty)
        refused = run_solve("fusion", FUSION, {"solver": "cpsat"}, Deadline.after(5.0))
    assert refused.status == 500
    assert refused.body["detail"] == ("the solver failed: SolverBug: solver 'cpsat' produced "
                                      "an invalid solution: made up")
    assert run_solve("fusion", FUSION, {"solver": "cpsat"}, Deadline.after(5.0)).status \
        in ("optimal", "feasible")


def test_cancel_kills_a_running_solve_and_the_pool_goes_on(tmp_path):
    with make(tmp_path, pool_workers=1) as client:
        slow = client.post("/v1/jobs", json={"kind": "layout", "payload": SLOW_LAYOUT,
                                             "options": {"time_limit_s": 120}}).json()
        pid = running_pid(client, slow["id"])
        deadline = time.monotonic() + 30
        while (shown := client.get(f"/v1/jobs/{slow['id']}").json()["progress"])[
                "objective"] is None:
            assert time.monotonic() < deadline, "a running solve shows no objective"
            time.sleep(0.1)
        assert shown["objective"] > 0 and shown["elapsed_s"] > 0
        cancelled = client.delete(f"/v1/jobs/{slow['id']}")
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        deadline = time.monotonic() + 20
        while _alive(pid):
            assert time.monotonic() < deadline, "the cancelled solve's worker still runs"
            time.sleep(0.1)
        assert client.delete(f"/v1/jobs/{slow['id']}").status_code == 409
        after = client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                              "options": {"solver": "greedy"}}).json()
        assert wait_for(client, after["id"], within_s=60)["state"] == "done"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone for our purpose
        return stat.read().split()[2] != "Z"


def test_killing_a_worker_fails_only_its_job(tmp_path):
    with make(tmp_path, pool_workers=2) as client:
        victim = client.post("/v1/jobs", json={"kind": "layout", "payload": SLOW_LAYOUT,
                                               "options": {"time_limit_s": 60}}).json()
        pid = running_pid(client, victim["id"])
        bystander = client.post("/v1/jobs", json={"kind": "layout", "payload": LAYOUT,
                                                  "options": {"time_limit_s": 2}}).json()
        os.kill(pid, signal.SIGKILL)
        failed = wait_for(client, victim["id"])
        assert failed["state"] == "failed" and "worker process died" in failed["error"]
        assert wait_for(client, bystander["id"])["state"] == "done"
        later = client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                              "options": {"solver": "greedy"}}).json()
        assert wait_for(client, later["id"])["state"] == "done"


def test_a_solve_at_its_time_limit_returns_its_best_plan_as_feasible(tmp_path):
    with make(tmp_path) as client:
        job = client.post("/v1/jobs", json={"kind": "layout", "payload": SLOW_LAYOUT,
                                            "options": {"time_limit_s": 1}}).json()
        done = wait_for(client, job["id"])
    assert done["state"] == "done" and done["result"]["status"] == "feasible"
    assert done["progress"]["objective"] == done["result"]["stats"]["objective"]
    assert done["progress"]["bound"] <= done["progress"]["objective"]


def test_compare_jobs_run_cancel_and_free_their_lane(tmp_path):
    graphs = [{"name": "slow", "graph": SLOW_LAYOUT}]
    with make(tmp_path, compare_jobs=1) as client:
        slow = client.post("/v1/jobs", json={"kind": "compare", "payload": {"graphs": graphs},
                                             "options": {"time_limit_s": 60}}).json()
        deadline = time.monotonic() + 30
        while client.get(f"/v1/jobs/{slow['id']}").json()["state"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert client.delete(f"/v1/jobs/{slow['id']}").json()["state"] == "cancelled"
        quick = client.post("/v1/jobs", json={
            "kind": "compare", "payload": {"graphs": [{"name": "mlp", "graph": LAYOUT}]},
            "options": {"solvers": ["greedy", "dram"], "time_limit_s": 2}}).json()
        done = wait_for(client, quick["id"], within_s=60)
        assert done["state"] == "done" and done["result"]["summary"]["failed"] == 0
        assert {r["solver"] for r in done["result"]["records"]} == {"greedy", "dram"}
        assert client.get(f"/v1/jobs/{slow['id']}").json()["state"] == "cancelled"


def test_a_restart_loses_no_job(tmp_path):
    """Jobs queued and running when the server stops are all done after it starts again."""
    first = create_app(Settings(data_dir=tmp_path, pool_workers=1))
    client = TestClient(first)
    running = client.post("/v1/jobs", json={"kind": "layout", "payload": SLOW_LAYOUT,
                                            "options": {"time_limit_s": 3}}).json()
    running_pid(client, running["id"])
    queued = [client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                            "options": {"solver": s}}).json()
              for s in ("greedy", "unfused")]
    started = time.monotonic()
    first.state.service.close()  # what a shutdown does: the pool and dispatcher stop
    assert time.monotonic() - started < first.state.service.settings.shutdown_timeout_s + 5
    store = JobStore(tmp_path / "layoutsat.db")
    assert store.get(running["id"]).state == "queued"  # stopped, and back in the queue
    assert [store.get(j["id"]).state for j in queued] == ["queued", "queued"]

    with make(tmp_path, pool_workers=1) as again:
        for job in (running, *queued):
            finished = wait_for(again, job["id"])
            assert finished["state"] == "done", finished
        assert wait_for(again, running["id"])["attempts"] == 2


def test_recovery_gives_up_after_the_configured_attempts(tmp_path):
    store = JobStore(tmp_path / "jobs.db")
    job = store.create("fusion", "me", FUSION, {"solver": "greedy"}, "k")
    for _ in range(2):
        assert store.claim_next(("fusion",)).id == job.id
        store.recover(max_attempts=2)
    failed = store.get(job.id)
    assert failed.state == "failed" and "2 time(s)" in failed.error


def test_finished_jobs_and_cached_results_expire(tmp_path):
    store = JobStore(tmp_path / "jobs.db")
    job = store.create("fusion", "me", FUSION, {}, "k", result='{"status": "feasible"}')
    store.remember("k", '{"status": "feasible"}')
    assert store.expire(older_than_s=3600) == [] and store.get(job.id) is not None
    time.sleep(0.01)
    assert store.expire(older_than_s=0.001) == [job.id]
    assert store.get(job.id) is None and store.cached("k") is None


def test_solvers_report_progress_that_ends_at_their_answer(monkeypatch):
    from models.layout import parse_graph
    from solver import progress
    from solver.layout import solve as solve_layout

    def reported(run):
        reports: list[tuple[float, float | None]] = []
        progress.install(lambda objective, bound: reports.append((objective, bound)))
        try:
            return run(), reports
        finally:
            progress.install(None)

    plan, reports = reported(lambda: solve_layout(parse_graph(SLOW_LAYOUT), "cpsat",
                                                  time_limit_s=3, workers=2))
    objectives = [o for o, _ in reports]
    assert objectives and all(later <= earlier * (1 + 1e-4) for earlier, later in
                              zip(objectives, objectives[1:], strict=False))
    assert min(objectives) == pytest.approx(plan.total_latency_us, rel=1e-4)
    assert all(bound <= objective + 1e-3 for objective, bound in reports if bound is not None)
    monkeypatch.setattr("solver.layout.cpsat.MAX_MODEL_OPS", 10)  # the segment search
    plan, reports = reported(lambda: solve_layout(parse_graph(SLOW_LAYOUT), "cpsat",
                                                  time_limit_s=3, workers=2))
    assert len(reports) > 1 and reports[-1][0] == pytest.approx(plan.total_latency_us)
    assert min(objective for objective, _ in reports) == pytest.approx(plan.total_latency_us)
    fused, reports = reported(lambda: solve_fusion(parse_problem(FUSION), "cpsat",
                                                   time_limit_s=3))
    assert reports and reports[-1][0] == pytest.approx(fused.total_latency)
    assert reports[-1][1] == pytest.approx(fused.bound)


# ----------------------------------------------------------------------------- limits


def test_each_limit_names_itself_and_its_value(tmp_path):
    with make(tmp_path, max_ops=2, max_time_limit_s=5, max_body_bytes=4096) as client:
        big = client.post("/v1/jobs", json={"kind": "layout", "payload": LAYOUT})
        assert big.status_code == 413
        assert big.json()["limit"] == "max_ops" and big.json()["value"] == 2
        assert big.json()["errors"][0]["loc"] == ["payload"]
        slow = client.post("/v1/fusion/solve?time_limit_s=60", json=FUSION)
        assert slow.status_code == 422 and slow.json()["limit"] == "max_time_limit_s"
        assert "5 s" in slow.json()["errors"][0]["msg"]
        foreign = client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                                "options": {"max_configs": 9}})
        assert foreign.status_code == 422  # not a fusion option at all
        huge = client.post("/v1/layout/evaluate", content=b"{" + b" " * 5000 + b"}",
                           headers={"content-type": "application/json"})
        assert huge.status_code == 413 and huge.json()["limit"] == "max_body_bytes"

        def chunks():
            yield b'{"graph": '
            for _ in range(10):
                yield b" " * 1000

        streamed = client.post("/v1/layout/evaluate", content=chunks(),
                               headers={"content-type": "application/json"})
        assert streamed.status_code == 413 and streamed.json()["limit"] == "max_body_bytes"


def test_configs_limit(tmp_path):
    with make(tmp_path) as client:
        refused = client.post("/v1/layout/solve?max_configs=5000", json=LAYOUT)
        assert refused.status_code == 422
        assert refused.json()["errors"][0]["loc"] == ["query", "max_configs"]
        assert "4096" in refused.json()["errors"][0]["msg"]


def test_large_graphs_are_pointed_to_the_jobs_api(tmp_path):
    with make(tmp_path, sync_max_ops=3) as client:
        refused = client.post("/v1/layout/solve?solver=greedy", json=LAYOUT)
        assert refused.status_code == 413 and refused.json()["limit"] == "sync_max_ops"
        assert "POST /v1/jobs" in refused.json()["errors"][0]["msg"]
        job = client.post("/v1/jobs", json={"kind": "layout", "payload": LAYOUT,
                                            "options": {"solver": "greedy"}})
        assert job.status_code == 202


def test_queued_jobs_per_client_are_bounded(tmp_path):
    ci, other = ({"authorization": f"Bearer {key}"} for key in ("ci-key", "other-key"))
    with make(tmp_path, pool_workers=1, max_queued_jobs_per_client=1,
              api_keys="ci-key,other-key") as client:
        slow = {"kind": "layout", "payload": SLOW_LAYOUT, "options": {"time_limit_s": 30}}
        first = client.post("/v1/jobs", json=slow, headers=ci)
        assert first.status_code == 202
        refused = client.post("/v1/jobs", json=slow, headers=ci)
        assert refused.status_code == 429 and refused.headers["retry-after"]
        assert refused.json()["limit"] == "max_queued_jobs_per_client"
        spoofed = client.post("/v1/jobs", json=slow, headers={**ci, "x-client-id": "new"})
        assert spoofed.status_code == 429  # the key decides, not a header the client picks
        second = client.post("/v1/jobs", json={**slow, "options": {"solver": "greedy"}},
                             headers=other)
        assert second.status_code == 202
        client.delete(f"/v1/jobs/{first.json()['id']}", headers=ci)


# ----------------------------------------------------------------------- worker faults


def sleep_for(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def allocate(mib: int) -> int:
    return len(bytearray(mib << 20))


def test_a_solve_past_its_hard_deadline_is_stopped_with_a_reason(monkeypatch):
    import asyncio

    monkeypatch.setattr(workers, "GRACE_S", 0.5)
    pool = SolvePool(1, 0)
    try:
        with pytest.raises(SolveFailed) as stopped:
            asyncio.run(pool.run(sleep_for, (30,), Deadline.after(0.5)))
        assert stopped.value.status == 504 and "no answer within the time limit" in str(
            stopped.value)
        assert asyncio.run(pool.run(sleep_for, (0,), Deadline.after(5))) == "slept"
    finally:
        pool.close()


def test_a_solve_beyond_the_memory_limit_fails_alone():
    import asyncio

    pool = SolvePool(1, memory_mb=1024)
    try:
        with pytest.raises(SolveFailed) as refused:
            asyncio.run(pool.run(allocate, (4096,), Deadline.after(30)))
        assert refused.value.status == 413 and "1024 MiB" in str(refused.value)
        assert asyncio.run(pool.run(allocate, (64,), Deadline.after(30))) == 64 << 20
    finally:
        pool.close()


# ------------------------------------------------------------------ observability


def test_metrics_count_requests_jobs_pool_and_cache(tmp_path):
    with make(tmp_path) as client:
        client.get("/healthz")
        # a 60 s limit: the first solve's wait for a starting worker (2 s on the 2-core
        # machine) stays under CACHE_WAIT_S's tenth of the limit, so its answer is cached
        client.post("/v1/layout/solve?solver=greedy&time_limit_s=60", json=LAYOUT)
        client.post("/v1/layout/solve?solver=greedy&time_limit_s=60", json=LAYOUT)
        job = client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                            "options": {"solver": "greedy"}}).json()
        wait_for(client, job["id"])
        text = client.get("/metrics").text
    assert 'layoutsat_requests_total{method="GET",route="/healthz",status="200"} 1.0' in text
    assert 'route="/v1/layout/solve",status="200"} 2.0' in text
    assert 'layoutsat_cache_lookups_total{outcome="hit"} 1.0' in text
    assert 'layoutsat_cache_lookups_total{outcome="miss"} 2.0' in text
    assert 'layoutsat_jobs{state="done"} 1.0' in text
    assert "layoutsat_pool_workers 2.0" in text
    assert 'layoutsat_solve_duration_seconds_count{kind="fusion",solver="greedy"} 1.0' in text


def test_every_response_carries_a_request_id_that_is_logged(tmp_path):
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    logging.getLogger("layoutsat.http").addHandler(handler)
    try:
        with make(tmp_path) as client:
            given = client.get("/healthz", headers={"x-request-id": "abc-123"})
            fresh = client.post("/v1/fusion/validate", json={"widths": []})
    finally:
        logging.getLogger("layoutsat.http").removeHandler(handler)
    assert given.headers["x-request-id"] == "abc-123"
    assert len(fresh.headers["x-request-id"]) == 32 and fresh.status_code == 422
    lines = [json.loads(JsonFormatter().format(r)) for r in seen]
    assert {"request_id": "abc-123", "status": 200, "path": "/healthz"}.items() <= lines[0].items()
    assert lines[1]["request_id"] == fresh.headers["x-request-id"] and lines[1]["status"] == 422


# --------------------------------------------------------------------- adversarial


ADVERSARIAL = [
    ("deep nesting", b'{"graph": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("huge integer", b'{"graph": {"format": "layoutsat-graph", "version": 1' + b"0" * 5000
     + b"}}"),
    ("not json", b"{'graph': }"),
    ("NaN", b'{"graph": {}, "time_limit_s": NaN}'),
    ("Infinity", b'{"graph": {}, "time_limit_s": Infinity}'),
]


@pytest.mark.parametrize("name,body", ADVERSARIAL, ids=[a[0] for a in ADVERSARIAL])
def test_adversarial_bodies_get_a_4xx(tmp_path, name, body):
    with make(tmp_path) as client:
        answer = client.post("/v1/layout/solve", content=body,
                             headers={"content-type": "application/json"})
    assert 400 <= answer.status_code < 500, (name, answer.status_code, answer.text[:200])


def test_adversarial_graphs_get_a_422(tmp_path):
    negative = json.loads(json.dumps(LAYOUT))
    negative["tensors"][0]["shape"][0] = -4
    duplicate = json.loads(json.dumps(LAYOUT))
    duplicate["ops"].append(duplicate["ops"][0])
    cyclic = json.loads(json.dumps(FUSION))
    cyclic["inputs"][0] = cyclic["outputs"][-1]
    nan_fusion = json.loads(json.dumps(FUSION))
    nan_fusion["base_costs"][0] = float("nan")
    with make(tmp_path) as client:
        for graph in (negative, duplicate):
            assert client.post("/v1/jobs", json={"kind": "layout", "payload": graph}
                               ).status_code == 422
        for problem in (cyclic,):
            assert client.post("/v1/jobs", json={"kind": "fusion", "payload": problem}
                               ).status_code == 422
        nan_body = json.dumps({"kind": "fusion", "payload": nan_fusion})
        assert client.post("/v1/jobs", content=nan_body,
                           headers={"content-type": "application/json"}).status_code == 422
        huge = client.post("/v1/jobs", json={"kind": "fusion", "payload": FUSION,
                                             "options": {"seed": 10**30}})
        assert huge.status_code == 422
