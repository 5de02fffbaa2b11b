"""Mutation fuzzing of the solve routes: valid documents of every family, changed a few
places at a time (hypothesis), so most requests reach the parser's deep rules and many
reach the solvers. No answer may be a 5xx; every refusal names a path and a rule; every
answer is accepted by the family's evaluator route with the total it claims.
(``test_service_live.py`` fuzzes every route from the OpenAPI schema.)"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, given
from hypothesis import settings as fuzz_settings
from hypothesis import strategies as st

from app.main import create_app
from app.settings import Settings
from tests.layout_fixtures import tiny

ROOT = Path(__file__).resolve().parents[1]
SEEDS: list[tuple[str, dict[str, Any]]] = [
    ("fusion", json.loads((ROOT / "app/examples/fusion-example.json").read_text())),
    ("fusion", json.loads((ROOT / "app/examples/fusion-mlsys-2026-1.json").read_text())),
    ("layout", json.loads((ROOT / "app/examples/layout-mlp-small.json").read_text())),
    ("layout", tiny()),
]
SOLVERS = {"fusion": ["greedy", "unfused", "cpsat"],
           "layout": ["greedy", "dram", "dfsharding", "cpsat"]}
ANSWER = {"fusion": ("problem", "solution"), "layout": ("graph", "plan")}
ODD_VALUES = st.one_of(
    st.integers(-3, 3), st.sampled_from([0, -1, 2**31, 2**40, 2**63, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([1e-320, 1e308, 0.5, "", "x", None, True, [], {}, [1], ["a"]]))


@pytest.fixture(scope="module")
def client():
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="layoutsat-fuzz-")),
                        pool_workers=2, default_time_limit_s=1, max_time_limit_s=2,
                        max_body_bytes=1 << 20)
    with TestClient(create_app(settings)) as running:
        yield running


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a document a mutation may touch."""
    found = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _paths(v, (*prefix, i))
    return found


def _get(doc: Any, path: tuple) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _benign(draw: st.DrawFn, family: str, doc: dict[str, Any]) -> None:
    """A change that usually keeps the document valid, so the solve runs on a problem
    nobody tuned for: other costs, capacity, bandwidth, native tile, dtypes, device."""
    if family == "fusion":
        field = draw(st.sampled_from(["base_costs", "fast_memory_capacity",
                                      "slow_memory_bandwidth", "native_granularity", "sizes"]))
        factor = draw(st.sampled_from([0.25, 0.5, 1.5, 2, 8]))
        if field == "base_costs":
            k = draw(st.integers(0, len(doc["base_costs"]) - 1))
            doc["base_costs"][k] *= factor
        elif field == "native_granularity":
            doc["native_granularity"] = [draw(st.sampled_from([16, 32, 64, 128, 256]))
                                         for _ in doc["native_granularity"]]
        elif field == "sizes":
            doc["widths"] = [w * 2 for w in doc["widths"]]
            doc["heights"] = [h * 2 for h in doc["heights"]]
        else:
            doc[field] = max(1, int(doc[field] * factor))
    elif draw(st.booleans()):
        doc["device"] = draw(st.sampled_from(["wormhole_n150", "wormhole_n300",
                                              "blackhole_p150"]))
    else:
        t = draw(st.sampled_from([t for t in doc["tensors"] if t["dtype"] != "uint32"]))
        t["dtype"] = draw(st.sampled_from(["bf16", "f32", "bfp8", "bfp4"]))


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    family, seed = draw(st.sampled_from(SEEDS))
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 2))):
        _benign(draw, family, doc)
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        path = draw(st.sampled_from(_paths(doc)[1:]))
        parent, last = _get(doc, path[:-1]), path[-1]
        value = parent[last]
        action = draw(st.sampled_from(["odd", "scale", "delete", "copy", "swap"]))
        if action == "odd":
            parent[last] = draw(ODD_VALUES)
        elif action == "scale" and isinstance(value, int | float) and not isinstance(value, bool):
            factor = draw(st.sampled_from([0, -1, 2, 3, 1000, 0.5]))
            parent[last] = type(value)(value * factor) if factor != 0.5 else value * factor
        elif action == "delete" or (action == "copy" and not isinstance(parent, list)):
            del parent[last]
        elif action == "copy":
            parent.insert(last, copy.deepcopy(value))
        elif isinstance(parent, list) and len(parent) > 1:
            other = draw(st.integers(0, len(parent) - 1))
            parent[last], parent[other] = parent[other], parent[last]
    return family, doc


def _refusal_named(body: dict[str, Any]) -> bool:
    return bool(body.get("errors")) and all(e.get("path") and e.get("rule")
                                            for e in body["errors"])


@given(case=mutated(), solver_pick=st.integers(0, 3))
@fuzz_settings(max_examples=60, deadline=None, database=None,
               suppress_health_check=list(HealthCheck))
def test_mutated_documents_get_an_answer_or_a_named_refusal(client, case, solver_pick):
    family, doc = case
    solver = SOLVERS[family][solver_pick % len(SOLVERS[family])]
    validated = client.post(f"/v1/{family}/validate", json=doc)
    assert validated.status_code in (200, 413, 422), validated.text
    solved = client.post(f"/v1/{family}/solve", json=doc,
                         params={"solver": solver, "time_limit_s": 1})
    assert solved.status_code in (200, 413, 422), (solved.status_code, solved.text[:500])
    event(f"{family} solve {solved.status_code}")
    if solved.status_code != 200:
        assert _refusal_named(solved.json()), solved.text
        return
    assert validated.status_code == 200
    result = solved.json()
    assert result["status"] in ("optimal", "feasible"), result
    doc_key, answer_key = ANSWER[family]
    answer = result["solution"] if family == "fusion" else result
    checked = client.post(f"/v1/{family}/evaluate", json={doc_key: doc, answer_key: answer},
                          params={"reduction_cost": result["reduction_cost"]}
                          if family == "fusion" else {})
    assert checked.status_code == 200 and checked.json()["valid"], checked.text
    total = result["total_latency"] if family == "fusion" else result["total_latency_us"]
    recomputed = checked.json()["total_latency" if family == "fusion" else "total_latency_us"]
    assert recomputed == pytest.approx(total, rel=1e-6)
