"""Small layout graphs for the tests, built by hand so every number can be checked."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from models.device import DeviceSpec
from solver.layout.problem import resolve_device
from tests.conftest import ROOT

EXAMPLES = sorted((ROOT / "benchmarks" / "layout").glob("*.json"))
SMALL_EXAMPLE = ROOT / "app" / "examples" / "layout-mlp-small.json"
PRESET_PAIR = ("wormhole_n150", "blackhole_p150")
SLOW_GRAPH = ROOT / "benchmarks" / "layout" / "models" / "llama-3.2-1b-decode-kv1024-l1.json"
"""A graph whose optimum ``cpsat`` does not prove within 10 s (0.21% gap on Wormhole, the
default preset), for tests of solves their deadline stops; the llama-decoder-layer
example proves within 2 s since the LP is solved with CLP."""


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def with_usable_l1(graph, usable_l1: int, preset: str = "wormhole_n150") -> DeviceSpec:
    """``preset`` with exactly ``usable_l1`` bytes of L1 per core for tensors and scratch,
    so L1 pressure (spills, reloads, smaller layouts) can be set per test."""
    spec = resolve_device(graph, preset)
    return spec.model_copy(update={"name": f"l1-{usable_l1}", "l1_usage_cap": 1.0,
                                   "l1_size_bytes": spec.l1_unreserved_base_bytes + usable_l1})


def tensor(name: str, shape: list[int], kind: str = "activation", dtype: str = "bf16") -> dict:
    return {"name": name, "shape": shape, "dtype": dtype, "kind": kind}


def op(name: str, op_type: str, inputs: list[str], outputs: list[str], **attrs: Any) -> dict:
    return {"name": name, "type": op_type, "inputs": inputs, "outputs": outputs,
            **({"attrs": attrs} if attrs else {})}


# x -> linear(w, b) -> h -> relu -> y ; y + x -> out   (a residual fork on x)
TINY: dict[str, Any] = {
    "format": "layoutsat-graph", "version": 1, "name": "tiny",
    "tensors": [tensor("x", [1, 128, 256], "input"), tensor("w", [256, 256], "constant"),
                tensor("b", [256], "constant"), tensor("h", [1, 128, 256]),
                tensor("y", [1, 128, 256]), tensor("out", [1, 128, 256])],
    "ops": [op("fc", "linear", ["x", "w", "b"], ["h"]), op("act", "relu", ["h"], ["y"]),
            op("res", "add", ["y", "x"], ["out"])],
    "outputs": ["out"],
}


def tiny() -> dict[str, Any]:
    return copy.deepcopy(TINY)


def repeated(graph: dict, times: int) -> dict:
    """``times`` copies of ``graph`` side by side, the ``i``-th's names suffixed ``_i``."""
    def renamed(names: list[str], i: int) -> list[str]:
        return [f"{n}_{i}" for n in names]

    return {
        "format": "layoutsat-graph", "version": 1, "name": f"{graph['name']}-x{times}",
        "tensors": [{**t, "name": f"{t['name']}_{i}"} for i in range(times)
                    for t in graph["tensors"]],
        "ops": [{**o, "name": f"{o['name']}_{i}", "inputs": renamed(o["inputs"], i),
                 "outputs": renamed(o["outputs"], i)} for i in range(times)
                for o in graph["ops"]],
        "outputs": [n for i in range(times) for n in renamed(graph["outputs"], i)],
    }
