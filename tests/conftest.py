"""Shared fixtures: paths to the contest material beside the checkout, and problem builders."""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
MLSYS = SHARED / "mlsys2026"
if not MLSYS.is_dir():
    raise RuntimeError(f"the contest material is missing: expected {MLSYS} beside the checkout")
BENCHMARKS = sorted((MLSYS / "benchmarks").glob("*.json"))
BAD_FILES = sorted((MLSYS / "bad").glob("*.json"))

# PROBLEM.md Example 1: two Pointwise ops in a chain.
POINTWISE_CHAIN: dict[str, Any] = {
    "widths": [128, 128, 128],
    "heights": [128, 128, 128],
    "inputs": [[0], [1]],
    "outputs": [[1], [2]],
    "base_costs": [1000, 100],
    "op_types": ["Pointwise", "Pointwise"],
    "fast_memory_capacity": 35000,
    "slow_memory_bandwidth": 10,
    "native_granularity": [128, 128],
}

# PROBLEM.md Example 2: the same chain on 256x256 tensors.
LARGE_CHAIN: dict[str, Any] = {
    **POINTWISE_CHAIN,
    "widths": [256, 256, 256],
    "heights": [256, 256, 256],
}

# PROBLEM.md Example 4: one MatMul that needs 64x64 tiles.
SINGLE_MATMUL: dict[str, Any] = {
    "widths": [128, 128, 128],
    "heights": [128, 128, 128],
    "inputs": [[0, 1]],
    "outputs": [[2]],
    "base_costs": [1500],
    "op_types": ["MatMul"],
    "fast_memory_capacity": 25000,
    "slow_memory_bandwidth": 10,
    "native_granularity": [128, 128],
}

# PROBLEM.md Example 3 (the diamond), small enough to mutate rule by rule.
DIAMOND: dict[str, Any] = {
    "widths": [128, 128, 128, 128],
    "heights": [128, 128, 128, 128],
    "inputs": [[0], [1], [1, 2]],
    "outputs": [[1], [2], [3]],
    "base_costs": [1500, 1500, 1500],
    "op_types": ["Pointwise", "Pointwise", "Pointwise"],
    "fast_memory_capacity": 50000,
    "slow_memory_bandwidth": 10,
    "native_granularity": [128, 128],
}

# PROBLEM.md Example 5: (T0 @ T1) @ T2.
MATMUL_CHAIN: dict[str, Any] = {
    "widths": [128, 128, 128, 128, 128],
    "heights": [128, 128, 128, 128, 128],
    "inputs": [[0, 1], [3, 2]],
    "outputs": [[3], [4]],
    "base_costs": [2000, 2000],
    "op_types": ["MatMul", "MatMul"],
    "fast_memory_capacity": 45000,
    "slow_memory_bandwidth": 10,
    "native_granularity": [128, 128],
}


def load(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture
def diamond() -> dict[str, Any]:
    return copy.deepcopy(DIAMOND)


@pytest.fixture
def matmul_chain() -> dict[str, Any]:
    return copy.deepcopy(MATMUL_CHAIN)


def solution(subgraphs: list[list[int]], granularities: list[list[int]],
             retain: list[list[int]] | None = None, orders: list | None = None,
             latencies: list[float] | None = None) -> dict[str, Any]:
    """A contest solution document; unspecified lists default to empty / null / zero."""
    n = len(subgraphs)
    return {"subgraphs": subgraphs, "granularities": granularities,
            "tensors_to_retain": retain if retain is not None else [[] for _ in range(n)],
            "traversal_orders": orders if orders is not None else [None] * n,
            "subgraph_latencies": latencies if latencies is not None else [0.0] * n}


# The service keeps jobs in LAYOUTSAT_DATA_DIR (default: the user's data directory); tests
# that build an app without settings get a throwaway one instead.
os.environ.setdefault("LAYOUTSAT_DATA_DIR", tempfile.mkdtemp(prefix="layoutsat-tests-"))
