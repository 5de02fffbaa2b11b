"""The iopddl core: the evaluator against a literal copy of the contest's ``Evaluate``, the
solvers and the exact reductions against exhaustive search on tiny problems, and one
malformed document per validation rule."""

from __future__ import annotations

import copy
import itertools
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.iopddl_generate import generate
from models.errors import InputValidationError
from solver.iopddl import search
from solver.iopddl.evaluate import evaluate, parse_solution
from solver.iopddl.problem import parse_problem
from solver.iopddl.reduce import reduce, unfold
from solver.iopddl.work import build

EXAMPLE_PATH = Path(__file__).resolve().parents[2] / "shared" / "iopddl" / "example.json"
EXAMPLE: dict[str, Any] = json.loads(EXAMPLE_PATH.read_text())
INF = 10**18
"""The contest's "forbidden" cost."""


# --- an independent oracle: the contest's Evaluate, line by line ---------------------------

def contest_evaluate(doc: dict[str, Any], solution: list[int]) -> int | None:
    """The cost of ``solution``, or None when the contest's Evaluate refuses it."""
    p = doc["problem"]
    costs, usages, intervals = (p["nodes"][k] for k in ("costs", "usages", "intervals"))
    if len(solution) != len(costs):
        return None
    cost = 0
    for i, s in enumerate(solution):
        if s < 0 or s >= len(costs[i]):
            return None
        cost += costs[i][s]
    for (u, v), edge_costs in zip(p["edges"]["nodes"], p["edges"]["costs"], strict=True):
        cost += edge_costs[solution[u] * len(costs[v]) + solution[v]]
    limit = p.get("usage_limit")
    if limit is not None:
        total = [0] * max((end for _, end in intervals), default=0)
        for i, (start, end) in enumerate(intervals):
            for t in range(start, end):
                total[t] += usages[i][solution[i]]
        if any(usage > limit for usage in total):
            return None
    return cost


def all_solutions(doc: dict[str, Any]) -> list[list[int]]:
    return [list(s) for s in itertools.product(
        *(range(len(c)) for c in doc["problem"]["nodes"]["costs"]))]


def exhaustive(doc: dict[str, Any]) -> int | None:
    """The optimum over every solution (None: none fits the limit)."""
    costs = [c for s in all_solutions(doc) if (c := contest_evaluate(doc, s)) is not None]
    return min(costs, default=None)


def peak(doc: dict[str, Any], pick: Any) -> int:
    """The peak usage when node i uses ``pick(usages[i])``."""
    nodes = doc["problem"]["nodes"]
    total = [0] * (max((e for _, e in nodes["intervals"]), default=0) + 1)
    for (start, end), use in zip(nodes["intervals"], nodes["usages"], strict=True):
        for t in range(start, end):
            total[t] += pick(use)
    return max(total)


def random_doc(rng: random.Random, forbid: float = 0.06) -> dict[str, Any]:
    """A tiny problem: 3-7 nodes of 1-3 strategies, some never live ([0, 0]), random and
    duplicate (also reversed) edges, rare self-edges, occasional forbidden costs, and a
    usage limit that is absent, loose, binding or below the smallest usages (infeasible)."""
    n = rng.randint(3, 7)
    k = [rng.randint(1, 3) for _ in range(n)]

    def cost() -> int:
        return INF if rng.random() < forbid else rng.randint(0, 60)

    intervals = []
    for _ in range(n):
        start = rng.randint(0, 6)
        intervals.append([0, 0] if rng.random() < 0.15 else [start, start + rng.randint(0, 5)])
    pairs = [rng.sample(range(n), 2) for _ in range(rng.randint(0, 2 * n))]
    if pairs and rng.random() < 0.4:
        u, v = rng.choice(pairs)
        pairs.append([u, v] if rng.random() < 0.5 else [v, u])
    if rng.random() < 0.1:  # a self-edge: its cost is the diagonal entry of the node's choice
        pairs.append([rng.randrange(n)] * 2)
    doc = {"problem": {
        "name": "random",
        "nodes": {"intervals": intervals, "costs": [[cost() for _ in range(c)] for c in k],
                  "usages": [[rng.randint(0, 20) for _ in range(c)] for c in k]},
        "edges": {"nodes": pairs, "costs": [[cost() for _ in range(k[u] * k[v])]
                                            for u, v in pairs]}}}
    low, high = peak(doc, min), peak(doc, max)
    r = rng.random()
    if r < 0.15:
        return doc
    if r < 0.3 and low > 0:
        doc["problem"]["usage_limit"] = low - rng.randint(1, low)
    else:
        doc["problem"]["usage_limit"] = rng.randint(low, high)
    return doc


def reduced_costs(problem: Any) -> list[int] | None:
    """The costs of the valid solutions the reduced working problem still holds (every
    choice of its live nodes, unfolded); None when the solvers would call it infeasible."""
    work = build(problem)
    if not work.refresh_caps():  # as the solvers do: forbidden strategies kept when needed
        work = build(problem, forbid=False)
        if not work.refresh_caps():
            return None
    reduce(work, time.monotonic() + 60)
    live = [int(i) for i in work.live_nodes]
    costs = []
    for choice in itertools.product(*(work.strategies[i].tolist() for i in live)):
        report = evaluate(problem, unfold(work, dict(zip(live, choice, strict=True))))
        if report.valid:
            costs.append(report.cost)
    return costs


def solve(name: str, problem: Any, seconds: float = 10.0) -> search.Outcome:
    return search.SOLVERS[name](problem, time.monotonic() + seconds, 0, 1)


# --- 1. the contest's example, by hand ---------------------------------------------------

def test_example_optimum_by_hand() -> None:
    problem = parse_problem(EXAMPLE)
    # Solution [0, 0, 2, 1, 0]:
    #   node costs  15 (n0 s0) + 55 (n1 s0) + 35 (n2 s2) + 75 (n3 s1) + 95 (n4 s0) = 275
    #   edge costs  (0,1): 0*2+0=0 -> 30; (0,2): 0*3+2=2 -> 40; (1,3): 0*2+1=1 -> 10;
    #               (2,4): 2*1+0=2 -> 30; (3,4): 1*1+0=1 -> 60;   30+40+10+30+60 = 170
    #   total 275 + 170 = 445.
    #   Usage: nodes 0 [30,70), 1 [40,70), 2 [50,120) overlap on [50,70): 10+25+15 = 50 <= 50;
    #   on [110,120) nodes 2, 3, 4: 15+10+15 = 40.
    # Without the limit [0, 0, 1, 1, 0] is cheaper (285 + 130 = 415) but uses
    # 10+25+20 = 55 > 50 on [50,70): the limit binds.
    report = evaluate(problem, [0, 0, 2, 1, 0])
    assert report.valid and report.errors == []
    assert (report.cost, report.node_cost, report.edge_cost) == (445, 275, 170)
    assert (report.peak.usage, report.peak.step, report.peak.live_nodes) == (50, 50, 3)
    assert contest_evaluate(EXAMPLE, [0, 0, 2, 1, 0]) == 445

    over = evaluate(problem, [0, 0, 1, 1, 0])
    assert not over.valid and over.cost is None and over.peak.usage == 55
    assert (over.node_cost, over.edge_cost) == (285, 130)
    unlimited = copy.deepcopy(EXAMPLE)
    del unlimited["problem"]["usage_limit"]
    assert evaluate(parse_problem(unlimited), [0, 0, 1, 1, 0]).cost == 415
    assert exhaustive(unlimited) == 415

    valid = {tuple(s): r.cost for s in all_solutions(EXAMPLE)
             if (r := evaluate(problem, s)).valid}
    assert len(all_solutions(EXAMPLE)) == 12 and len(valid) == 8
    assert min(valid.values()) == 445 == exhaustive(EXAMPLE)
    assert [s for s, c in valid.items() if c == 445] == [(0, 0, 2, 1, 0)]

    outcome = solve("cpsat", problem)
    assert outcome.solution == [0, 0, 2, 1, 0]
    assert evaluate(problem, outcome.solution).cost == 445
    assert outcome.status == "optimal" and outcome.bound == 445
    for name in ("greedy", "cheapest"):
        baseline = evaluate(problem, solve(name, problem).solution)
        assert baseline.valid and baseline.cost >= 445


def test_parse_solution() -> None:
    assert parse_solution([0, 0, 2, 1, 0]) == [0, 0, 2, 1, 0]
    assert parse_solution({"solution": [1]}) == [1]
    for bad, loc in (("[0]", ()), ({"x": 1}, ()), ([0, 1.0], (1,)), ([True], (0,))):
        with pytest.raises(InputValidationError) as info:
            parse_solution(bad)
        assert [i.loc for i in info.value.issues] == [loc]


# --- 2. evaluate() against the contest's Evaluate -----------------------------------------

def test_evaluate_matches_contest_evaluate() -> None:
    rng = random.Random(2025)
    kinds = {"valid": 0, "over": 0, "range": 0, "length": 0}
    for _ in range(200):
        doc = random_doc(rng)
        problem = parse_problem(doc)
        k = [len(c) for c in doc["problem"]["nodes"]["costs"]]
        inside = [rng.randrange(c) for c in k]
        wrong = list(inside)
        at = rng.randrange(len(k))
        wrong[at] = rng.choice([-1, k[at], k[at] + 5])
        cases = [inside, wrong, inside[:-1], inside + [0],
                 [rng.randrange(c) for c in k]]
        for solution in cases:
            expected = contest_evaluate(doc, solution)
            report = evaluate(problem, solution)
            assert report.valid == (expected is not None), (doc, solution)
            assert report.cost == expected, (doc, solution)
            if report.valid:
                assert report.node_cost + report.edge_cost == expected
                assert report.errors == []
                kinds["valid"] += 1
            else:
                assert report.errors
                kinds["length" if len(solution) != len(k) else
                      "range" if report.node_cost is None else "over"] += 1
    # the cases cover every verdict
    assert all(count >= 50 for count in kinds.values()), kinds


def test_evaluate_sums_exactly_past_int64() -> None:
    big = 2**63 - 1
    doc = {"problem": {"nodes": {"intervals": [[0, 2], [1, 3]], "costs": [[big, 1], [big]],
                                 "usages": [[5, 5], [5]]},
                       "edges": {"nodes": [[0, 1]], "costs": [[big, 2]]}, "usage_limit": 10}}
    problem = parse_problem(doc)
    assert evaluate(problem, [0, 0]).cost == 3 * big == contest_evaluate(doc, [0, 0])
    assert evaluate(problem, [1, 0]).cost == big + 3
    doc["problem"]["usage_limit"] = 9  # 5 + 5 at step 1
    assert not evaluate(parse_problem(doc), [1, 0]).valid
    assert contest_evaluate(doc, [1, 0]) is None


# --- 3. solvers and reductions against exhaustive search --------------------------------

@pytest.mark.parametrize("seed", range(450))
def test_solvers_against_exhaustive(seed: int) -> None:
    doc = random_doc(random.Random(seed), forbid=0.06 if seed < 300 else 0.15)
    problem = parse_problem(doc)
    optimum = exhaustive(doc)
    if optimum is None:
        for name in search.SOLVERS:
            with pytest.raises(search.Infeasible):
                solve(name, problem)
        return
    for name in search.SOLVERS:
        outcome = solve(name, problem)
        report = evaluate(problem, outcome.solution)
        why = (name, json.dumps(doc), outcome.solution, outcome.status, outcome.bound)
        assert report.valid, why
        assert report.cost >= optimum
        assert outcome.status in ("optimal", "feasible"), why
        if optimum >= INF:  # only "forbidden" solutions fit: any valid one will do
            continue
        if outcome.bound is not None:
            assert outcome.bound <= optimum, why
        if outcome.status == "optimal":
            assert report.cost == optimum, why
        if name == "cpsat":  # tiny problems: CP-SAT proves the optimum well within 10 s
            assert report.cost == optimum and outcome.status == "optimal", why
            assert optimum - 1 < outcome.bound <= optimum, why  # integer costs


@pytest.mark.parametrize(("nodes", "seed", "tightness"), [(3000, 1, 0.3), (1500, 2, 0.8)])
def test_generated_problems_at_scale(nodes: int, seed: int, tightness: float) -> None:
    """Problems no file holds (``benchmarks/iopddl_generate.py``): every solver answers
    by its deadline with a solution the evaluator accepts, cpsat's bound (before anything
    clamps it) is at most that solution's cost, and cpsat is no worse than greedy."""
    problem = parse_problem(generate(nodes, seed, tightness=tightness))
    costs = {}
    for name in search.SOLVERS:
        until = time.monotonic() + 4.0
        outcome = search.SOLVERS[name](problem, until, 0, 2)
        assert time.monotonic() <= until + 0.5, name
        report = evaluate(problem, outcome.solution)
        assert report.valid, (name, report.errors)
        costs[name] = report.cost
        if name == "cpsat":
            assert outcome.bound is not None and outcome.bound <= report.cost
            assert outcome.work is not None and outcome.work.alive.sum() < nodes  # reduced
    assert costs["cpsat"] <= costs["greedy"]


@pytest.mark.parametrize("limit_s", [0.0, 1.0, 2.5])
def test_cpsat_answers_under_a_deadline_too_short_for_its_phases(limit_s: float) -> None:
    """Deadlines that end cpsat in its first phases (which ones depends on the machine: the
    reductions, the units' graph, the greedy): it answers on time with a valid solution and
    a bound no higher than its cost."""
    problem = parse_problem(generate(4000, 3, tightness=0.7))
    until = time.monotonic() + limit_s
    outcome = search.cpsat(problem, until, 0, 2)
    assert time.monotonic() <= until + 1.0
    report = evaluate(problem, outcome.solution)
    assert report.valid, report.errors
    assert outcome.bound is not None and outcome.bound <= report.cost


def test_dominance_sums_over_edges() -> None:
    """Node 0 costs [10, 0]; its edges to nodes 1 and 2 (one strategy each) cost [0, 6]:
    strategy 0 totals 10 + 0 + 0 = 10, strategy 1 totals 0 + 6 + 6 = 12. Strategy 1 does
    not dominate 0 (0 + (6 - 0) + (6 - 0) = 12 > 10), so the optimum [0, 0, 0] must stay."""
    doc = {"problem": {
        "nodes": {"intervals": [[0, 1]] * 3, "costs": [[10, 0], [0], [0]],
                  "usages": [[0, 0], [0], [0]]},
        "edges": {"nodes": [[0, 1], [0, 2]], "costs": [[0, 6], [0, 6]]}}}
    problem = parse_problem(doc)
    assert exhaustive(doc) == 10
    assert min(reduced_costs(problem)) == 10
    outcome = solve("cpsat", problem)
    assert evaluate(problem, outcome.solution).cost == 10 and outcome.bound <= 10


def test_cpsat_bound_with_forbidden_pair() -> None:
    """Two nodes live together under a limit of 1: only one may use its strategy 0 (usage
    1). The pair (1, 1) is forbidden, so the optimum is 100 ([0, 1] or [1, 0]); a proven
    lower bound must not exceed it."""
    doc = {"problem": {
        "nodes": {"intervals": [[0, 1], [0, 1]], "costs": [[0, 0], [0, 0]],
                  "usages": [[1, 0], [1, 0]]},
        "edges": {"nodes": [[0, 1]], "costs": [[0, 100, 100, INF]]}, "usage_limit": 1}}
    problem = parse_problem(doc)
    assert exhaustive(doc) == 100
    outcome = solve("cpsat", problem)
    assert evaluate(problem, outcome.solution).cost == 100 and outcome.status == "optimal"
    assert 99 < outcome.bound <= 100


@pytest.mark.parametrize("seed", range(1000, 2000))
def test_reductions_preserve_optimum(seed: int) -> None:
    doc = random_doc(random.Random(seed))
    problem = parse_problem(doc)
    optimum = exhaustive(doc)
    costs = reduced_costs(problem)
    if costs is None:
        assert optimum is None, json.dumps(doc)
        return
    assert optimum is not None and costs, json.dumps(doc)
    if optimum < INF:
        assert min(costs) == optimum, json.dumps(doc)


def test_random_problems_cover_the_cases() -> None:
    """The generator makes what the tests above need: infeasible limits, binding limits,
    forbidden costs, duplicate edges and never-live nodes."""
    seen = {"infeasible": 0, "binding": 0, "forbidden": 0, "duplicate": 0, "empty": 0,
            "infinite_optimum": 0, "self_edge": 0}
    for seed in range(450):
        doc = random_doc(random.Random(seed), forbid=0.06 if seed < 300 else 0.15)
        p = doc["problem"]
        optimum = exhaustive(doc)
        free = copy.deepcopy(doc)
        free["problem"].pop("usage_limit", None)
        seen["infeasible"] += optimum is None
        seen["binding"] += optimum is not None and optimum > exhaustive(free)
        seen["infinite_optimum"] += optimum is not None and optimum >= INF
        seen["forbidden"] += any(INF in c for c in p["nodes"]["costs"] + p["edges"]["costs"])
        pairs = [tuple(sorted(e)) for e in p["edges"]["nodes"]]
        seen["duplicate"] += len(set(pairs)) < len(pairs)
        seen["self_edge"] += any(u == v for u, v in pairs)
        seen["empty"] += [0, 0] in p["nodes"]["intervals"]
    assert all(count >= 5 for count in seen.values()), seen


# --- 4. validation: one malformed document per rule -------------------------------------

def faults(doc: Any) -> list[tuple[str, tuple]]:
    """Each fault's rule and location inside the problem object (a wrapped document's
    faults are located under its ``problem`` member: checked, then stripped)."""
    with pytest.raises(InputValidationError) as info:
        parse_problem(doc)
    wrapped = isinstance(doc, dict) and isinstance(doc.get("problem"), dict)
    locs = [tuple(issue.loc) for issue in info.value.issues]
    if wrapped:
        assert all(loc[:1] == ("problem",) for loc in locs), locs
        locs = [loc[1:] for loc in locs]
    return [(issue.rule, loc) for issue, loc in zip(info.value.issues, locs, strict=True)]


def example_with(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(EXAMPLE)
    change(doc["problem"])
    return doc


def test_wrapped_and_inner_documents_parse() -> None:
    wrapped, inner = parse_problem(EXAMPLE), parse_problem(EXAMPLE["problem"])
    for problem in (wrapped, inner):
        assert (problem.n, problem.m, problem.usage_limit, problem.name) == (5, 5, 50, "example")
        assert problem.starts.tolist() == [30, 40, 50, 110, 110]
        assert problem.edge_costs[1].tolist() == [[50, 10, 40]]
        assert problem.edge_costs[2].tolist() == [[90, 10], [20, 80]]
    unlimited = example_with(lambda p: p.pop("usage_limit"))
    assert parse_problem(unlimited).usage_limit is None
    # start == end is "never live" (the contest files hold thousands of [0, 0])
    never = example_with(lambda p: p["nodes"]["intervals"].__setitem__(0, [0, 0]))
    assert evaluate(parse_problem(never), [0, 0, 1, 1, 0]).cost == 415
    assert parse_problem(example_with(
        lambda p: p["nodes"]["intervals"].__setitem__(0, [7, 7]))).ends[0] == 7


@pytest.mark.parametrize("doc", [[], "problem", 3, None])
def test_non_object_document(doc: Any) -> None:
    assert faults(doc) == [("schema.type", ())]


def _set(path: tuple, value: Any) -> Any:
    def change(p: dict[str, Any]) -> None:
        target = p
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def _drop(*path: str) -> Any:
    def change(p: dict[str, Any]) -> None:
        target = p
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return change


CASES = [
    ("schema.type", _set(("nodes",), [1, 2]), ("nodes",)),
    ("schema.type", _set(("nodes", "costs"), {"a": 1}), ("nodes", "costs")),  # + nodes.length
    ("schema.type", _set(("nodes", "costs", 0), 15), ("nodes", "costs", 0)),
    ("schema.type", _set(("name",), 7), ("name",)),
    ("field.missing", _drop("edges"), ("edges",)),
    ("field.missing", _drop("nodes", "usages"), ("nodes", "usages")),  # + nodes.length
    ("nodes.length", _set(("nodes", "intervals"), [[30, 70]] * 4), ("nodes", "intervals")),
    ("nodes.length", _set(("nodes", "usages"), [[10]] * 6), ("nodes", "usages")),
    ("edges.length", _set(("edges", "costs"), EXAMPLE["problem"]["edges"]["costs"][:4]),
     ("edges", "costs")),
    ("usage_limit.range", _set(("usage_limit",), -1), ("usage_limit",)),
    ("usage_limit.range", _set(("usage_limit",), 2**63), ("usage_limit",)),
    ("usage_limit.range", _set(("usage_limit",), 50.0), ("usage_limit",)),
    ("usage_limit.range", _set(("usage_limit",), True), ("usage_limit",)),
    ("interval.type", _set(("nodes", "intervals", 1), [40]), ("nodes", "intervals", 1)),
    ("interval.type", _set(("nodes", "intervals", 1), [40, 70.0]), ("nodes", "intervals", 1)),
    ("interval.type", _set(("nodes", "intervals", 1), "40-70"), ("nodes", "intervals", 1)),
    ("interval.range", _set(("nodes", "intervals", 2), [-1, 120]), ("nodes", "intervals", 2)),
    ("interval.range", _set(("nodes", "intervals", 2), [50, 2**63]), ("nodes", "intervals", 2)),
    ("interval.order", _set(("nodes", "intervals", 3), [140, 110]), ("nodes", "intervals", 3)),
    ("strategies.empty", _set(("nodes", "costs", 0), []), ("nodes", "costs", 0)),
    ("strategies.length", _set(("nodes", "usages", 1), [25]), ("nodes", "usages", 1)),
    ("integer.type", _set(("nodes", "costs", 1), [55, 65.0]), ("nodes", "costs", 1, 1)),
    ("integer.type", _set(("nodes", "costs", 1), [True, 65]), ("nodes", "costs", 1, 0)),
    ("integer.type", _set(("nodes", "usages", 2), [15, "20", 15]), ("nodes", "usages", 2, 1)),
    ("integer.type", _set(("edges", "costs", 0), [30, None]), ("edges", "costs", 0, 1)),
    ("integer.range", _set(("nodes", "costs", 1), [55, 2**63]), ("nodes", "costs", 1, 1)),
    ("integer.range", _set(("edges", "costs", 4), [-(2**63) - 1, 60]), ("edges", "costs", 4, 0)),
    ("usage.negative", _set(("nodes", "usages", 2), [15, -1, 15]), ("nodes", "usages", 2, 1)),
    ("edge.type", _set(("edges", "nodes", 2), [1]), ("edges", "nodes", 2)),
    ("edge.type", _set(("edges", "nodes", 2), [1, 3.0]), ("edges", "nodes", 2)),
    ("edge.node_range", _set(("edges", "nodes", 3), [2, 5]), ("edges", "nodes", 3)),
    ("edge.node_range", _set(("edges", "nodes", 3), [-1, 4]), ("edges", "nodes", 3)),
    ("edge.costs_length", _set(("edges", "costs", 1), [50, 10]), ("edges", "costs", 1)),
]


@pytest.mark.parametrize(("rule", "change", "loc"), CASES,
                         ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(CASES)])
def test_validation_rule(rule: str, change: Any, loc: tuple) -> None:
    found = faults(example_with(change))
    assert found[0] == (rule, loc)
    # a list that is missing or not a list also counts as 0 entries: nodes.length may follow
    assert all(r == "nodes.length" for r, _ in found[1:]), found
    if loc[:2] not in (("nodes", "costs"), ("nodes", "usages")) or len(loc) > 2:
        assert found == [(rule, loc)]
    # the inner object alone is refused the same way
    assert faults(example_with(change)["problem"]) == found


def test_edge_size_rule() -> None:
    wide = 4097  # 4097 * 4097 = 16,785,409 pairs > 2**24 = 16,777,216
    doc = {"problem": {
        "nodes": {"intervals": [[0, 1], [0, 1]], "costs": [[0] * wide, [0] * wide],
                  "usages": [[0] * wide, [0] * wide]},
        "edges": {"nodes": [[0, 1]], "costs": [[]]}}}
    assert faults(doc) == [("edge.size", ("edges", "nodes", 0))]
    doc["problem"]["nodes"]["costs"][1] = [0] * 4096  # 16,781,312: still too many
    doc["problem"]["nodes"]["usages"][1] = [0] * 4096
    assert faults(doc) == [("edge.size", ("edges", "nodes", 0))]


def test_every_fault_is_listed() -> None:
    def change(p: dict[str, Any]) -> None:
        p["nodes"]["usages"][0] = [-5]
        p["nodes"]["costs"][4] = [1.5]
    assert faults(example_with(change)) == [("usage.negative", ("nodes", "usages", 0, 0)),
                                            ("integer.type", ("nodes", "costs", 4, 0))]
