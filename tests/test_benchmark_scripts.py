"""The benchmark runners refuse bad arguments with a usage error naming the argument, not
a traceback (they are run by hand and in CI docs, so their failures should read well), and
run each solve in a process of its own; BENCHMARKS.md's tables are what
``benchmarks/render.py`` makes of the results JSONs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from benchmarks import path_oracle
from benchmarks.fusion import PERTURBATIONS, load, perturbed
from benchmarks.fusion_generate import suite as fusion_suite
from benchmarks.isolated import isolated
from benchmarks.layout_order_suite import graph, suite
from benchmarks.meta import meta as meta_now
from benchmarks.render import check, fusion_suite_tables, process_time_table
from benchmarks.render import main as render_main
from models.fusion import parse_problem as parse_fusion
from models.layout import parse_graph
from solver.fusion import teamkorea
from solver.fusion.greedy import greedy
from solver.fusion.problem import Rules
from solver.fusion.score import ScoringContext
from solver.fusion.solvers import solve
from tests.conftest import MLSYS, ROOT

GRAPH = "benchmarks/layout/mlp-block.json"


@pytest.mark.parametrize(("script", "args", "message"), [
    ("relaxation.py", ["--time-limit", "-1"], "argument --time-limit: must be positive, not -1"),
    ("relaxation.py", ["--workers", "0"], "argument --workers: must be at least 1, not 0"),
    ("relaxation.py", ["--time-limit", "abc"], "argument --time-limit: 'abc' is not a number"),
    ("segments.py", [GRAPH, "--sizes", "4,x"], "is not a comma list of integers"),
    ("segments.py", [GRAPH, "--sizes", "0"], "every segment size must be at least 1"),
    ("segments.py", ["no/such/graph.json"], "no graph file at no/such/graph.json"),
    ("segments.py", [GRAPH, "--time-limit", "0"], "argument --time-limit: must be positive"),
    ("calibrate.py", ["--table", "no/such.csv"], "no calibration table at no/such.csv"),
    ("fusion.py", ["--benchmarks", "no/such/dir"], "no benchmark directory at no/such/dir"),
    ("fusion.py", ["--benchmarks", "benchmarks"], "no mlsys-2026-*.json file in benchmarks"),
    ("fusion.py", ["--benchmarks", "../shared/mlsys2026/bad"], "expected a name mlsys-2026-"),
    ("fusion_suite.py", ["--time-limit", "0"], "argument --time-limit: must be positive"),
    ("fusion_suite.py", ["--count", "0"], "argument --count: must be at least 1"),
    ("fusion_suite.py", ["--modes", "per_tile"], "invalid choice: 'per_tile'"),
    ("fusion_suite.py", ["--only", "gen-nosuch"], "no problem of the suite matches --only"),
    ("fusion_suite.py", ["--semantics", "teamkorea", "--modes", "per_native_k"],
     "--semantics teamkorea has one mode: --modes per_op"),
    ("fusion_suite.py", ["--semantics", "vinci"], "invalid choice: 'vinci'"),
    ("fusion_generate.py", ["--count", "0"], "argument --count: must be at least 1"),
    ("fusion_generate.py", ["--ops", "3"], "argument --ops: must be at least 5, not 3"),
    ("fusion_fuzz.py", ["--count", "0"], "argument --count: must be at least 1"),
    ("process_time.py", ["no/such.json"], "no such graph or folder: no/such.json"),
    ("process_time.py", [GRAPH, "--time-limit", "0"], "argument --time-limit: must be positive"),
    ("process_time.py", [GRAPH, "--checkout", "here"], "'here': want LABEL=DIR"),
    ("cover_time.py", ["--deadline", "0"], "argument --deadline: must be positive"),
    ("cover_time.py", ["--tree", "no/such/tree"], "--tree no/such/tree holds no solver/fusion"),
    ("cover_time.py", ["--only", "gen-nosuch"], "--only: no suite problem named gen-nosuch"),
    ("cover_time.py", ["--modes", "per_tile"], "invalid choice: 'per_tile'"),
    ("path_oracle.py", ["--deadline", "0"], "argument --deadline: must be positive"),
    ("path_oracle.py", ["--budget", "0"], "argument --budget: must be at least 1"),
    ("path_oracle.py", ["--only", "gen-nosuch"], "--only: no suite problem named gen-nosuch"),
    ("path_oracle.py", ["--lazy", "--guided"], "--lazy already scores retention variants"),
    ("path_oracle.py", ["--semantics", "teamkorea", "--modes", "per_native_k"],
     "--semantics teamkorea has one mode: --modes per_op"),
    ("proofs.py", ["--time-limit", "0"], "argument --time-limit: must be positive"),
    ("proofs.py", ["--before", "no/such/tree"], "no checkout at no/such/tree"),
    ("proofs.py", ["--graphs", "no/such/dir"], "no graph directory at no/such/dir"),
    ("mesh.py", ["--time-limit", "0"], "argument --time-limit: must be positive"),
    ("mesh.py", ["--graphs", "no/such.json"], "no such graph or folder: no/such.json"),
    ("gap_split.py", ["no/such.json"], "no results file at no/such.json"),
    ("order.py", ["--graphs", "no/such/dir"], "--graphs: no such directory: no/such/dir"),
    ("order.py", ["--time-limit", "0"], "argument --time-limit: must be positive"),
    ("order.py", ["--workers", "0"], "argument --workers: must be at least 1"),
    ("layout_order_suite.py", ["--count", "0"], "argument --count: must be at least 1"),
    ("tx8.py", ["--time-limit", "0"], "argument --time-limit: must be positive"),
    ("tx8.py", ["--graphs", "no/such.json"], "no such graph or folder: no/such.json"),
    ("tx8.py", ["--generated", "-1"], "argument --generated: must be at least 0"),
    ("tx8_generate.py", ["--count", "0"], "argument --count: must be at least 1"),
    ("tx8_generate.py", ["--write", GRAPH], f"--write: {GRAPH} is a file, not a directory"),
    ("layout_order_suite.py", ["--write", GRAPH], f"--write: {GRAPH} is a file, not a directory"),
    ("fusion.py", ["--time-limit", "0"], "argument --time-limit: must be positive"),
    ("fusion.py", ["--workers", "0"], "argument --workers: must be at least 1"),
    ("teamkorea.py", ["--time-limit", "nan"], "argument --time-limit: must be positive, not nan"),
    ("layout.py", ["--time-limit", "inf"], "argument --time-limit: must be positive, not inf"),
    ("address.py", ["--workers", "two"], "argument --workers: 'two' is not an integer"),
    ("load.py", ["--repeats", "0"], "argument --repeats: must be at least 1"),
    ("load.py", ["--solves", "0"], "argument --solves: must be at least 1"),
    ("iopddl.py", ["--scale", "1", "0"], "argument --scale: must be positive, not 0"),
    ("proofs.py", ["--min-ops", "-1"], "argument --min-ops: must be at least 0"),
    ("mesh.py", ["--baseline-limit", "-2"], "argument --baseline-limit: must be positive"),
    ("iopddl_generate.py", ["-o", "x.json", "--nodes", "0"],
     "argument --nodes: must be at least 1, not 0"),
    ("iopddl_generate.py", ["-o", "x.json", "--tightness", "1.5"],
     "argument --tightness: must be from 0 to 1, not 1.5"),
    ("iopddl_generate.py", ["-o", "x.json", "--tightness", "-0.1"],
     "argument --tightness: must be from 0 to 1"),
])
def test_bad_arguments_get_a_usage_error(script, args, message):
    done = subprocess.run([sys.executable, f"benchmarks/{script}", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_each_isolated_call_gets_a_fresh_process():
    first, second = isolated(os.getpid), isolated(os.getpid)
    assert len({first, second, os.getpid()}) == 3
    assert isolated(divmod, 17, 5) == (3, 2)


def test_perturbed_benchmarks_change_only_the_machine():
    """``--perturb`` runs every benchmark at half and twice its capacity and four times its
    bandwidth: the same graph, each parameter scaled as named."""
    problems = load(MLSYS / "benchmarks")
    varied = perturbed(problems)
    assert len(varied) == len(PERTURBATIONS) * len(problems)
    base, half, double, faster = (problems["13"], varied["13 cap/2"], varied["13 cap*2"],
                                  varied["13 bw*4"])
    assert (half.fast_memory_capacity, double.fast_memory_capacity) == (300_000, 1_200_000)
    assert faster.slow_memory_bandwidth == 4 * base.slow_memory_bandwidth
    assert half.inputs == base.inputs and half.widths == base.widths


def test_a_benchmark_that_breaks_a_rule_is_named_in_the_error(tmp_path):
    """The real malformed benchmark 17 (early version), renamed as a benchmark would be."""
    bad = (MLSYS / "bad" / "mlsys-2026-17-jan2026-inconsistent.json").read_text()
    (tmp_path / "mlsys-2026-17.json").write_text(bad)
    done = subprocess.run([sys.executable, "benchmarks/fusion.py", "--benchmarks",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "mlsys-2026-17.json: invalid fusion problem" in done.stderr


def test_a_perturbation_that_breaks_a_rule_is_named_in_the_error(tmp_path):
    """Benchmark 1 with a capacity of 1: at half its capacity it has none."""
    raw = json.loads((MLSYS / "benchmarks" / "mlsys-2026-1.json").read_text())
    raw["fast_memory_capacity"] = 1
    (tmp_path / "mlsys-2026-1.json").write_text(json.dumps(raw))
    done = subprocess.run([sys.executable, "benchmarks/fusion.py", "--perturb", "--benchmarks",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "benchmark 1 at cap/2: invalid fusion problem" in done.stderr


def test_every_table_of_benchmarks_md_is_what_its_json_renders():
    """BENCHMARKS.md's tables are generated (``benchmarks/render.py``); an edited table, or a
    results JSON written without re-rendering, fails here."""
    assert check() == []


def test_every_results_json_says_how_it_was_made():
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        meta = json.loads(path.read_text())["meta"]
        assert all(meta.get(k) for k in ("command", "machine", "date")), path.name
    now = meta_now()
    assert {"command", "machine", "date", "layoutsat", "ortools"} <= now.keys()
    assert "GiB" in now["machine"] and now["date"].endswith("+00:00")


def test_a_changed_number_fails_the_check_naming_its_table(tmp_path, capsys):
    results, markdown = tmp_path / "results", tmp_path / "BENCHMARKS.md"
    shutil.copytree(ROOT / "benchmarks" / "results", results)
    shutil.copy(ROOT / "BENCHMARKS.md", markdown)
    args = ["--markdown", str(markdown), "--results", str(results)]
    assert render_main(["--check", *args]) == 0
    data = json.loads((results / "load.json").read_text())
    changed = data["runs"][1]["health_p99_ms"] + 1.1
    data["runs"][1]["health_p99_ms"] = changed
    (results / "load.json").write_text(json.dumps(data))
    assert check(markdown, results) == ["load"]
    assert render_main(["--check", *args]) == 1
    assert "table 'load' differs from load.json" in capsys.readouterr().err
    assert render_main(args) == 0  # re-render: only that cell changes, the text stays
    assert check(markdown, results) == []
    before, after = (ROOT / "BENCHMARKS.md").read_text().splitlines(), \
        markdown.read_text().splitlines()
    differ = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(differ) == 1 and differ[0][0].startswith("| 2 | 200 |")
    old, new = (line.split(" | ") for line in differ[0])
    assert [i for i, (x, y) in enumerate(zip(old, new, strict=True)) if x != y] == [8]
    assert float(new[8]) == round(changed, 1)


def test_an_unknown_or_unclosed_table_is_an_error(tmp_path, capsys):
    for text, message in (("<!-- table: nosuch -->\n<!-- /table -->\n", "unknown table"),
                          ("<!-- table: load -->\n| x |\n", "has no <!-- /table -->")):
        markdown = tmp_path / "BENCHMARKS.md"
        markdown.write_text(text)
        assert render_main(["--check", "--markdown", str(markdown)]) == 2
        assert message in capsys.readouterr().err


def test_the_suite_runner_measures_and_summarizes(tmp_path):
    """Two 5-op problems of the generated suite, one mode, a 1-s limit: a record per
    problem with both totals, the bound and the walls, and the summary BENCHMARKS.md
    renders."""
    out = tmp_path / "suite.json"
    done = subprocess.run([sys.executable, "benchmarks/fusion_suite.py", "--only",
                           "gen-transformer-00", "--only", "gen-residual-00", "--time-limit",
                           "1", "--workers", "1", "--modes", "per_op", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["meta"]["command"] and (data["time_limit_s"], data["workers"]) == (1, 1)
    records = data["records"]
    assert [(r["benchmark"], r["family"], r["mode"]) for r in records] == [
        ("gen-transformer-00", "transformer", "per_op"), ("gen-residual-00", "residual", "per_op")]
    for r in records:
        assert r["ops"] == 5 and r["bound"] <= r["cpsat"] <= r["greedy"]
        assert r["status"] in ("optimal", "feasible") and r["cpsat_s"] < 10
    summary = data["summary"]["per_op"]
    assert summary["problems"] == 2 and summary["errors"] == 0
    assert sum(summary["cpsat_gap"]["counts"].values()) == 2
    assert set(summary["families"]) == {"transformer", "residual"}
    assert "| per_op | 2 | 5-5 |" in fusion_suite_tables(data) in done.stdout


def test_the_suite_runner_solves_under_the_teamkorea_reading(tmp_path):
    """``--semantics teamkorea``: per_op only, both solvers under that reading, and the
    table says so."""
    out = tmp_path / "suite.json"
    done = subprocess.run([sys.executable, "benchmarks/fusion_suite.py", "--only",
                           "gen-transformer-00", "--time-limit", "1", "--workers", "1",
                           "--semantics", "teamkorea", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["semantics"] == "teamkorea" and list(data["summary"]) == ["per_op"]
    [record] = data["records"]
    problem = parse_fusion(dict(fusion_suite())["gen-transformer-00"])
    assert record["greedy"] == solve(problem, "greedy", semantics="teamkorea").total_latency
    assert record["bound"] <= record["cpsat"] <= record["greedy"]
    assert "with 1 workers under the TeamKorea reading;" in done.stdout


def test_the_process_time_runner_times_each_reading_in_a_process_of_its_own(tmp_path):
    """Benchmark 1 at a 2-s limit, both readings, this checkout: each run's wall time from
    outside and the total of what it wrote, as the evaluator recomputes it."""
    out = tmp_path / "process-time.json"
    problem = MLSYS / "benchmarks" / "mlsys-2026-1.json"
    done = subprocess.run([sys.executable, "benchmarks/process_time.py", str(problem),
                           "--time-limit", "2", "--checkout", f"now={ROOT}", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["checkouts"] == ["now"]
    assert [(r["problem"], r["semantics"]) for r in data["rows"]] == [
        ("mlsys-2026-1", "default"), ("mlsys-2026-1", "teamkorea")]
    raw = parse_fusion(json.loads(problem.read_text()))
    for r in data["rows"]:
        run = r["runs"]["now"]
        assert 0 < run["wall_s"] < 2 + 2
        best = solve(raw, "greedy", semantics=r["semantics"]).total_latency
        assert run["total"] <= best
    assert "| mlsys-2026-1 | 5 | teamkorea | 2 |" in process_time_table(data)


def test_the_layout_order_suite_is_seeded_and_every_graph_parses():
    docs = suite()
    assert len(docs) == 16 and docs == suite() and docs[3] == graph(3)
    sizes = [len(parse_graph(doc).ops) for doc in docs]
    assert min(sizes) == 13 and max(sizes) == 375  # as BENCHMARKS.md describes it
    assert graph(0) != graph(1)


def test_the_tx8_suite_is_seeded_and_every_graph_parses_for_a_tx8():
    from benchmarks import tx8_generate

    docs = tx8_generate.suite(8)
    assert docs == tx8_generate.suite(8) and docs[5] == tx8_generate.graph(5)
    assert {d["name"].rsplit("-", 1)[0] for d in docs} == {
        "tx8-transformer", "tx8-convs", "tx8-mlp-chain", "tx8-residual-dag"}
    for doc in docs:
        assert parse_graph(doc).device == "tx8"


def test_the_path_oracle_scores_a_small_graph_completely_and_is_no_slower_than_greedy():
    """``path_oracle.measure`` on the suite's smallest fork-join: every op set scored, and
    its path (which the evaluator checks inside) at most greedy's total."""
    raw = dict(fusion_suite())["gen-forkjoin-00"]
    row = path_oracle.measure("gen-forkjoin-00", raw, "per_op", 30000, 60)
    assert row["complete"] and row["scored"] == row["op_sets"] > 0
    ctx = ScoringContext(parse_fusion(raw), Rules(reduction_cost="per_op"))
    assert row["path"] <= float(sum(item.config.latency for item in greedy(ctx)))


def test_the_path_oracle_under_the_teamkorea_reading_scores_there_and_meets_greedy():
    """``--semantics teamkorea`` scores every op set of ``gen-gated-mlp-02`` (11 ops) under
    that reading: its path, which the reading accepts, is at most that reading's greedy
    total, and not the SEMANTICS.md path's (129,405.16 against 124,800 when written)."""
    raw = dict(fusion_suite())["gen-gated-mlp-02"]
    row = path_oracle.measure("gen-gated-mlp-02", raw, "per_op", 30000, 60,
                              semantics="teamkorea")
    assert row["complete"] and row["accepted"]
    ctx = ScoringContext(parse_fusion(raw), teamkorea.RULES, semantics="teamkorea")
    assert row["path"] <= float(sum(item.config.latency for item in greedy(ctx)))
    default = path_oracle.measure("gen-gated-mlp-02", raw, "per_op", 30000, 60)
    assert row["path"] != default["path"]


def test_the_lazy_path_oracle_scores_a_few_op_sets_for_a_path_no_slower_than_greedy():
    """``--lazy`` scores only the op sets a path over their floors takes (and retention
    variants of those): on the suite's smallest fork-join fewer than all of them, and its
    path (checked by the evaluator inside) is still at most greedy's total, whose
    variants it starts from."""
    raw = dict(fusion_suite())["gen-forkjoin-00"]
    row = path_oracle.measure("gen-forkjoin-00", raw, "per_op", 30000, 60, lazy=True)
    assert row["complete"] is None and 0 < row["scored"] < row["op_sets"]
    ctx = ScoringContext(parse_fusion(raw), Rules(reduction_cost="per_op"))
    assert row["path"] <= float(sum(item.config.latency for item in greedy(ctx)))


def test_the_guided_path_oracle_scores_fewer_retention_variants_for_no_worse_a_path():
    """``--guided`` scores each op set's plain variant and only the retention variants a
    path over estimates takes; its path is never below the complete oracle's (fewer
    variants), and on ``gen-gated-mlp-01`` ``per_op`` no higher either. There the path
    needs a MatMul whose LHS is retained, which its plain config loads once per column
    tile: an estimate of one load saved missed it (533,630.72 against 457,301.76)."""
    raw = dict(fusion_suite())["gen-gated-mlp-01"]
    full = path_oracle.measure("gen-gated-mlp-01", raw, "per_op", 30000, 60)
    row = path_oracle.measure("gen-gated-mlp-01", raw, "per_op", 30000, 60, guide=True)
    assert row["complete"] and 0 < row["retention_scored"] < row["retention_keys"]
    assert row["variants"] < full["variants"]
    assert row["path"] == full["path"]
