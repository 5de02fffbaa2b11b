"""An IOPDDL problem validated into arrays, with every fault named by its JSON path.

A contest file holds up to millions of numbers, so the checks run list by list with C-level
operations (``map(type, ...)``, numpy) and each list is turned into an array as soon as it
is checked; the caller can then drop the JSON. Strategy costs stay exact: they are int64
arrays here and summed as Python integers by the evaluator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.errors import InputValidationError, Issue, Loc

WHAT = "iopddl problem"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_ISSUES = 50
"""Faults listed per problem: a broken generator can break every one of 100,000 edges."""
MAX_EDGE_ENTRIES = 2**24
"""Most pairs one edge's cost list may hold (4,096 strategies on each side); the contest's
largest holds 469,136."""


@dataclass
class Problem:
    """A valid problem. Node ``i``'s strategies are ``costs[i]`` / ``usages[i]`` (int64
    arrays of one length); edge ``e`` joins ``edge_u[e]`` and ``edge_v[e]`` with the
    ``(len(costs[u]), len(costs[v]))`` matrix ``edge_costs[e]``."""

    name: str
    starts: np.ndarray
    ends: np.ndarray
    costs: list[np.ndarray]
    usages: list[np.ndarray]
    edge_u: np.ndarray
    edge_v: np.ndarray
    edge_costs: list[np.ndarray]
    usage_limit: int | None

    @property
    def n(self) -> int:
        return len(self.costs)

    @property
    def m(self) -> int:
        return len(self.edge_costs)

    def strategy_counts(self) -> np.ndarray:
        return np.fromiter((len(c) for c in self.costs), dtype=np.int64, count=self.n)


class _Faults:
    """Collects issues up to ``MAX_ISSUES``, then only counts them."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []
        self.more = 0

    def add(self, loc: Loc, msg: str, rule: str) -> None:
        if len(self.issues) < MAX_ISSUES:
            self.issues.append(Issue(loc, msg, rule))
        else:
            self.more += 1

    def raise_if_any(self) -> None:
        if not self.issues:
            return
        if self.more:
            self.issues.append(Issue((), f"and {self.more} more faults", "faults.more"))
        raise InputValidationError(self.issues, WHAT)


def _body(doc: Any) -> Mapping[str, Any]:
    """The problem object: the file's ``problem`` member, or the object itself."""
    if not isinstance(doc, Mapping):
        raise InputValidationError([Issue((), f"expected a JSON object, got "
                                          f"{type(doc).__name__}", "schema.type")], WHAT)
    inner = doc.get("problem")
    return inner if isinstance(inner, Mapping) else doc


def _int_array(value: Any, loc: Loc, faults: _Faults, *, nonnegative: bool = False,
               empty_ok: bool = False) -> np.ndarray | None:
    """``value`` as an int64 array when it is a list of JSON integers in int64 range."""
    if not isinstance(value, list):
        faults.add(loc, f"expected a list of integers, got {type(value).__name__}",
                   "schema.type")
        return None
    if not value and not empty_ok:
        faults.add(loc, "must not be empty: every node needs at least one strategy",
                   "strategies.empty")
        return None
    kinds = set(map(type, value))
    if kinds - {int}:
        at = next(i for i, v in enumerate(value) if type(v) is not int)
        got = "a boolean" if isinstance(value[at], bool) else type(value[at]).__name__
        faults.add((*loc, at), f"must be an integer, got {got} ({str(value[at])[:40]})",
                   "integer.type")
        return None
    try:
        array = np.array(value, dtype=np.int64)
    except OverflowError:
        at = next(i for i, v in enumerate(value) if not INT64_MIN <= v <= INT64_MAX)
        faults.add((*loc, at), "is outside the 64-bit integer range", "integer.range")
        return None
    if nonnegative and array.size and array.min() < 0:
        at = int(np.argmax(array < 0))
        faults.add((*loc, at), f"must be >= 0, got {value[at]}", "usage.negative")
        return None
    return array


def _list(body: Mapping[str, Any], key: str, loc: Loc, faults: _Faults) -> list[Any]:
    value = body.get(key)
    if value is None:
        faults.add((*loc, key), "is required", "field.missing")
        return []
    if not isinstance(value, list):
        faults.add((*loc, key), f"expected a list, got {type(value).__name__}", "schema.type")
        return []
    return value


def _section(body: Mapping[str, Any], key: str, faults: _Faults) -> Mapping[str, Any]:
    value = body.get(key)
    if isinstance(value, Mapping):
        return value
    faults.add((key,), "is required (an object)" if value is None else
               f"expected an object, got {type(value).__name__}",
               "field.missing" if value is None else "schema.type")
    return {}


def _intervals(raw: list[Any], faults: _Faults) -> tuple[np.ndarray, np.ndarray]:
    loc: Loc = ("nodes", "intervals")
    starts = np.zeros(len(raw), dtype=np.int64)
    ends = np.zeros(len(raw), dtype=np.int64)
    for i, pair in enumerate(raw):
        if not (isinstance(pair, list) and len(pair) == 2
                and all(type(x) is int for x in pair)):
            faults.add((*loc, i), "must be a pair of integers [start, end]", "interval.type")
            continue
        start, end = pair
        if not (0 <= start <= INT64_MAX and 0 <= end <= INT64_MAX):
            faults.add((*loc, i), f"times must be 64-bit integers >= 0, got {pair}",
                       "interval.range")
        elif start > end:
            faults.add((*loc, i), f"start {start} is after end {end}: an interval is "
                       "[start, end) with start <= end (start == end: never live)",
                       "interval.order")
        else:
            starts[i], ends[i] = start, end
    return starts, ends


def parse_problem(doc: Any) -> Problem:
    """A valid problem from a contest document, or an InputValidationError with every fault
    (up to ``MAX_ISSUES``) named by its path in ``doc`` and its rule."""
    body = _body(doc)
    if body is doc:
        return _parse(body)
    try:
        return _parse(body)
    except InputValidationError as exc:
        raise InputValidationError([Issue(("problem", *i.loc), i.msg, i.rule)
                                    for i in exc.issues], WHAT) from None


def _parse(body: Mapping[str, Any]) -> Problem:
    faults = _Faults()
    nodes = _section(body, "nodes", faults)
    edges = _section(body, "edges", faults)
    faults.raise_if_any()
    raw_intervals = _list(nodes, "intervals", ("nodes",), faults)
    raw_costs = _list(nodes, "costs", ("nodes",), faults)
    raw_usages = _list(nodes, "usages", ("nodes",), faults)
    raw_pairs = _list(edges, "nodes", ("edges",), faults)
    raw_edge_costs = _list(edges, "costs", ("edges",), faults)
    n = len(raw_costs)
    for key, value in (("intervals", raw_intervals), ("usages", raw_usages)):
        if len(value) != n:
            faults.add(("nodes", key), f"has {len(value)} entries but nodes.costs has {n}: "
                       "one per node", "nodes.length")
    if len(raw_edge_costs) != len(raw_pairs):
        faults.add(("edges", "costs"), f"has {len(raw_edge_costs)} entries but edges.nodes "
                   f"has {len(raw_pairs)}: one per edge", "edges.length")
    limit = body.get("usage_limit")
    if limit is not None and (type(limit) is not int or not 0 <= limit <= INT64_MAX):
        faults.add(("usage_limit",), f"must be a non-negative 64-bit integer, got "
                   f"{str(limit)[:40]}", "usage_limit.range")
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        faults.add(("name",), "must be a string", "schema.type")
    faults.raise_if_any()

    starts, ends = _intervals(raw_intervals, faults)
    costs: list[np.ndarray] = []
    usages: list[np.ndarray] = []
    for i in range(n):
        c = _int_array(raw_costs[i], ("nodes", "costs", i), faults)
        u = _int_array(raw_usages[i], ("nodes", "usages", i), faults, nonnegative=True)
        if c is not None and u is not None and len(c) != len(u):
            faults.add(("nodes", "usages", i), f"has {len(u)} strategies but nodes.costs[{i}] "
                       f"has {len(c)}: one usage per strategy", "strategies.length")
        costs.append(c if c is not None else np.zeros(0, dtype=np.int64))
        usages.append(u if u is not None else np.zeros(0, dtype=np.int64))
    faults.raise_if_any()

    m = len(raw_pairs)
    edge_u = np.zeros(m, dtype=np.int64)
    edge_v = np.zeros(m, dtype=np.int64)
    edge_costs: list[np.ndarray] = []
    for e in range(m):
        pair = raw_pairs[e]
        loc: Loc = ("edges", "nodes", e)
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(x) is int for x in pair)):
            faults.add(loc, "must be a pair of node indices [u, v]", "edge.type")
            edge_costs.append(np.zeros((0, 0), dtype=np.int64))
            continue
        if not all(0 <= x < n for x in pair):
            faults.add(loc, f"node index out of range: {pair} with {n} nodes", "edge.node_range")
            edge_costs.append(np.zeros((0, 0), dtype=np.int64))
            continue
        u, v = pair
        edge_u[e], edge_v[e] = u, v
        rows, cols = len(costs[u]), len(costs[v])
        expected = rows * cols
        if expected > MAX_EDGE_ENTRIES:
            faults.add(loc, f"joins nodes of {rows} and {cols} strategies: {expected} pairs, "
                       f"more than the {MAX_EDGE_ENTRIES} an edge may have", "edge.size")
            edge_costs.append(np.zeros((0, 0), dtype=np.int64))
            continue
        raw = raw_edge_costs[e]
        if isinstance(raw, list) and len(raw) != expected:
            faults.add(("edges", "costs", e), f"has {len(raw)} entries; nodes {u} and {v} have "
                       f"{rows} and {cols} strategies, so it needs {rows} x {cols} = {expected} "
                       "(row-major)", "edge.costs_length")
            edge_costs.append(np.zeros((0, 0), dtype=np.int64))
            continue
        c = _int_array(raw, ("edges", "costs", e), faults, empty_ok=True)
        edge_costs.append(c.reshape(rows, cols) if c is not None
                          else np.zeros((0, 0), dtype=np.int64))
    faults.raise_if_any()
    return Problem(name if isinstance(name, str) else "", starts, ends, costs, usages,
                   edge_u, edge_v, edge_costs, limit)


def summarize(problem: Problem) -> dict[str, Any]:
    counts = problem.strategy_counts()
    return {"name": problem.name, "nodes": problem.n, "edges": problem.m,
            "strategies": int(counts.sum()), "max_strategies": int(counts.max(initial=0)),
            "usage_limit": problem.usage_limit,
            "time_steps": int(problem.ends.max(initial=0))}
