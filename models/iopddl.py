"""Schemas of the IOPDDL contest (ASPLOS/EuroSys 2025) problem, solution and reports, with
the contest's field names.

The document models here describe the JSON for the API's schema; they are not what
validates a problem: a contest file holds millions of numbers, so
``solver.iopddl.problem.parse_problem`` checks it with array operations and names every
fault with its JSON path.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from models.timing import Deterministic, WallTime

Int64 = int
Status = Literal["optimal", "feasible", "infeasible", "unknown", "invalid"]


class IopddlNodes(BaseModel):
    intervals: list[tuple[int, int]] = Field(
        description="intervals[i] = [start, end): the time steps node i is live "
        "(start == end: never live)")
    costs: list[list[Int64]] = Field(description="costs[i][s]: node i's cost under strategy s")
    usages: list[list[Int64]] = Field(
        description="usages[i][s] >= 0: memory node i uses at each live step under strategy s")


class IopddlEdges(BaseModel):
    nodes: list[tuple[int, int]] = Field(description="nodes[e] = [u, v]")
    costs: list[list[Int64]] = Field(
        description="costs[e][su * len(costs[v]) + sv]: the edge's cost for the pair of "
        "strategies (row-major)")


class IopddlProblemBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str | None = None
    nodes: IopddlNodes
    edges: IopddlEdges
    usage_limit: Int64 | None = Field(
        default=None, description="at every time step, the usages of the live nodes' chosen "
        "strategies sum to at most this (absent: no limit)")


class IopddlProblem(BaseModel):
    """A contest problem file: ``{"problem": {...}}`` (the object inside is accepted too)."""

    model_config = ConfigDict(extra="ignore")

    problem: IopddlProblemBody


class IopddlSolution(RootModel[list[int]]):
    """One strategy index per node, as the contest binary printed it."""


class Peak(BaseModel):
    usage: int = Field(description="the highest total usage over time")
    step: int | None = Field(default=None, description="the first time step where it "
                             "occurs (absent: no node is ever live)")
    live_nodes: int = Field(description="nodes live at that step")
    largest: list[tuple[int, int]] = Field(
        description="up to 10 (node, usage) pairs that use the most at that step")


class IopddlReport(BaseModel):
    """The evaluator's word on a solution, as the contest's ``Evaluate`` computes it."""

    valid: bool
    cost: int | None = Field(default=None, description="the exact total cost (absent when "
                             "invalid)")
    node_cost: int | None = None
    edge_cost: int | None = None
    usage_limit: int | None = Field(default=None, description="absent: no limit")
    peak: Peak | None = Field(default=None, description="the peak usage and where it occurs")
    errors: list[str] = Field(default_factory=list)


class Reduction(BaseModel):
    nodes: int = Field(description="nodes with a choice left after the exact reductions")
    edges: int = Field(description="edges left after the exact reductions")
    strategies: int = Field(description="strategies left after the exact reductions")
    removed_strategies: int = Field(description="dominated and forbidden strategies removed")
    folded_nodes: int = Field(description="degree-1 and degree-2 nodes folded into edges")
    memory_steps: int = Field(description="memory constraints kept (maximal sets of "
                              "overlapping intervals that can exceed the limit)")


class IopddlStats(BaseModel):
    wall_time_s: WallTime = None
    deterministic: Deterministic = False
    nodes: int
    edges: int
    reduction: Reduction | None = None
    lns_rounds: int = 0
    lns_improvements: int = 0
    first_incumbent_s: float | None = Field(
        default=None, description="seconds from the start to the first valid solution")


class IopddlResult(BaseModel):
    """A solve's answer: the solution, its exact cost, a proven lower bound and the gap."""

    solver: str
    status: Status
    solution: list[int] | None = Field(default=None, description="one strategy index per node")
    cost: int | None = Field(default=None, description="the solution's exact cost, "
                             "recomputed by the evaluator")
    bound: int | None = Field(default=None, description="a proven lower bound on the optimum")
    gap: float | None = Field(default=None, description="(cost - bound) / cost")
    peak_usage: int | None = None
    usage_limit: int | None = None
    stats: IopddlStats
    errors: list[str] = Field(default_factory=list)
