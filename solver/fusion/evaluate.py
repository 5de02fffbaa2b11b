"""The exact evaluator: validity of a solution and its latency, per SEMANTICS.md.

Checks run in the order of S13.2 and the first violation stops evaluation: the list rules
of S2.1/S2.2 for all subgraphs, then per subgraph availability (S4.2), structure (S2.3-S2.5),
granularity (S9), retention (S5), prologue (S6.4), traversal (S7.3) and the working set
(S12), then graph outputs (S4.4) and claimed latencies (S13.1). Each error is an ``Issue``
whose path points into the solution, whose rule names the SEMANTICS section and whose
message names the subgraph, op and tensor involved.

Latencies come from the fast scorer (``score.py``), which the tests prove equal to the
literal simulation (``simulate.py``); ``engine="reference"`` or ``details=True`` use the
simulation itself. S10.4 (every op fires) needs no check: every op of a subgraph either
produces a subgraph output (it is a root or a tile seed and fires on tile 0) or feeds an
op of the subgraph that fires and requires its output, so it always holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

import networkx as nx

from models.errors import Issue
from models.fusion import (
    ClaimedMismatch,
    ErrorDetail,
    EvaluationReport,
    EvaluationStep,
    FusionProblem,
    FusionSolution,
    Semantics,
    SubgraphSteps,
)
from solver.fusion import teamkorea
from solver.fusion.problem import (
    DEFAULT_RULES,
    FusionGraph,
    Rules,
    SubgraphShape,
    bounds_issue,
    exact,
    k_depth_issue,
    prologue_issue,
)
from solver.fusion.score import ScoringContext, Traversal, score_subgraph, tile_order
from solver.fusion.simulate import NAMED_ORDERS, Step, simulate

Engine = Literal["fast", "reference"]
CLAIM_TOLERANCE = Fraction(1, 10**6)


@dataclass
class Evaluation:
    """The evaluator's verdict, exact; ``report()`` turns it into the JSON answer."""

    rules: Rules
    semantics: Semantics = "default"
    error: Issue | None = None
    subgraph_latencies: list[Fraction] = field(default_factory=list)
    claimed_mismatches: list[tuple[int, Fraction, Fraction]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    steps: list[list[Step]] | None = None

    @property
    def valid(self) -> bool:
        return self.error is None

    @property
    def total(self) -> Fraction | None:
        return sum(self.subgraph_latencies, Fraction(0)) if self.valid else None

    @property
    def claimed_match(self) -> bool | None:
        return not self.claimed_mismatches if self.valid else None

    def report(self) -> EvaluationReport:
        total = self.total
        return EvaluationReport(
            valid=self.valid,
            error=None if self.error is None else f"{self.error.msg} [{self.error.rule}]",
            error_detail=None if self.error is None else ErrorDetail(**self.error.as_dict()),
            total_latency=None if total is None else float(total),
            subgraph_latencies=[float(x) for x in self.subgraph_latencies],
            claimed_match=self.claimed_match,
            claimed_mismatches=[ClaimedMismatch(subgraph=i, claimed=float(c), computed=float(x))
                                for i, c, x in self.claimed_mismatches],
            warnings=self.warnings,
            semantics=self.semantics,
            reduction_cost=self.rules.reduction_cost,
            retained_output_ws=self.rules.retained_output_ws,
            pointwise_epilogue_step=self.rules.epilogue_step,
            details=None if self.steps is None else [
                SubgraphSteps(subgraph=i, latency=float(self.subgraph_latencies[i]),
                              steps=[_step_model(s) for s in steps])
                for i, steps in enumerate(self.steps)],
        )


class _Invalid(Exception):
    def __init__(self, loc: tuple[str | int, ...], rule: str, msg: str):
        super().__init__(msg)
        self.issue = Issue(loc, msg, rule)


def evaluate(
    problem: FusionProblem | FusionGraph,
    solution: FusionSolution,
    rules: Rules = DEFAULT_RULES,
    *,
    strict: bool = False,
    details: bool = False,
    engine: Engine = "fast",
    context: ScoringContext | None = None,
    semantics: Semantics = "default",
) -> Evaluation:
    """Check ``solution`` against a validated ``problem`` and recompute every latency.

    ``strict`` makes a claimed latency off by more than 1e-6 (relative) an error instead of
    a reported mismatch (S13.1). ``details`` records every step (literal simulation).
    ``context`` lets a caller share scoring caches across evaluations of one problem.
    ``semantics="teamkorea"`` follows that reading (``teamkorea.py``; ``rules``,
    ``details``, ``engine`` and ``context`` do not apply to it).
    """
    if semantics == "teamkorea":
        return _evaluate_teamkorea(problem, solution, strict)
    ctx = context or ScoringContext(problem, rules)
    g = ctx.graph
    result = Evaluation(rules=rules, steps=[] if details else None)
    try:
        _check_lists(g, solution)
        state = _Availability(g)
        for i, ops in enumerate(solution.subgraphs):
            shape = g.shape(ops)
            state.check_inputs(i, shape)
            gran = tuple(solution.granularities[i])
            retained = _check_subgraph(g, solution, i, shape, gran, state.resident)
            order = _check_traversal(solution, i, shape, gran)
            latency = _run(ctx, result, i, shape, gran, order, state.resident, retained,
                           engine, details)
            result.subgraph_latencies.append(latency)
            result.warnings.extend(_warnings(g, i, shape))
            state.advance(i, shape, retained)
        state.check_outputs(len(solution.subgraphs))
        _check_claims(solution, result, strict)
    except _Invalid as exc:
        result.error = exc.issue
    return result


def _evaluate_teamkorea(problem: FusionProblem | FusionGraph, solution: FusionSolution,
                        strict: bool) -> Evaluation:
    """The TeamKorea reading, after this project's list checks (S2.1/S2.2)."""
    g = problem if isinstance(problem, FusionGraph) else FusionGraph(problem)
    result = Evaluation(rules=teamkorea.RULES, semantics="teamkorea")
    try:
        _check_lists(g, solution)
        teamkorea.run(g, solution, result.subgraph_latencies, result.claimed_mismatches,
                      strict)
    except _Invalid as exc:
        result.error = exc.issue
    except teamkorea.Rejected as exc:
        result.error = exc.issue
    return result


def _check_lists(g: FusionGraph, sol: FusionSolution) -> None:
    """S2.1 (equal lengths, coverage) and the list part of S2.2 for every subgraph."""
    lengths = {"subgraphs": len(sol.subgraphs), "granularities": len(sol.granularities),
               "tensors_to_retain": len(sol.tensors_to_retain),
               "subgraph_latencies": len(sol.subgraph_latencies)}
    if sol.traversal_orders is not None:
        lengths["traversal_orders"] = len(sol.traversal_orders)
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{name} has {n}" for name, n in lengths.items())
        raise _Invalid((), "S2.1.lengths",
                       f"the solution's lists must have one entry per subgraph: {listed}")
    n_ops = g.problem.num_ops
    for i, ops in enumerate(sol.subgraphs):
        if not ops:
            raise _Invalid(("subgraphs", i), "S2.2.empty", f"subgraph {i} is empty")
        seen: set[int] = set()
        for pos, q in enumerate(ops):
            if not 0 <= q < n_ops:
                raise _Invalid(("subgraphs", i, pos), "S2.2.op_range",
                               f"subgraph {i} lists op {q}, out of range: there are {n_ops} "
                               f"ops (valid indices 0..{n_ops - 1})")
            if q in seen:
                raise _Invalid(("subgraphs", i, pos), "S2.2.op_repeat",
                               f"subgraph {i} lists op {q} twice")
            seen.add(q)
    covered = {q for ops in sol.subgraphs for q in ops}
    missing = [q for q in range(n_ops) if q not in covered]
    if missing:
        named = f"op {missing[0]} is" if len(missing) == 1 else f"ops {_list(missing)} are"
        raise _Invalid(("subgraphs",), "S2.1.coverage",
                       f"{named} in no subgraph; every op must run at least once")


class _Availability:
    """Where every tensor is between subgraphs (S4): slow memory, or resident for one step."""

    def __init__(self, g: FusionGraph):
        self.g = g
        self.slow: set[int] = set(g.graph_inputs)
        self.resident: frozenset[int] = frozenset()
        self.produced_in: dict[int, int] = {}
        self.retained_by: dict[int, int] = {}
        self.ephemeral_in: dict[int, int] = {}

    def check_inputs(self, i: int, shape: SubgraphShape) -> None:
        """S4.2: every boundary input is resident or in slow memory; say why not."""
        for t in shape.inputs:
            if t in self.resident or t in self.slow:
                continue
            op = self.g.producer[t]
            consumer = next(q for q in shape.ops if t in self.g.problem.inputs[q])
            head = f"subgraph {i}: op {consumer} needs tensor {t}, "
            if t not in self.produced_in:
                raise _Invalid(("subgraphs", i), "S4.2.order",
                               head + f"but its producer op {op} runs in no earlier subgraph "
                               "(dependency order)")
            if t in self.retained_by:
                j = self.retained_by[t]
                raise _Invalid(("subgraphs", i), "S4.2.expired",
                               head + f"which subgraph {j} retained but never wrote to slow "
                               f"memory; retention lasts only until subgraph {j + 1}")
            j = self.ephemeral_in[t]
            raise _Invalid(("subgraphs", i), "S4.2.ephemeral",
                           head + f"which is ephemeral in subgraph {j} (produced and consumed "
                           "there, never written); recompute op "
                           f"{op} in subgraph {i}, retain the tensor into the next subgraph, "
                           "or write it from another subgraph")

    def advance(self, i: int, shape: SubgraphShape, retained: frozenset[int]) -> None:
        """S4.3: outputs not retained go to slow memory; retained tensors stay one subgraph."""
        for t in shape.produced:
            self.produced_in.setdefault(t, i)
        for t in shape.outputs:
            if t not in retained:
                self.slow.add(t)
        for t in shape.ephemerals:
            self.ephemeral_in[t] = i
        for t in retained:
            self.retained_by[t] = i
        self.resident = retained

    def check_outputs(self, n: int) -> None:
        """S4.4: every graph output ends in slow memory."""
        for t in self.g.graph_outputs:
            if t in self.slow:
                continue
            j = self.retained_by.get(t, n - 1)
            raise _Invalid(("tensors_to_retain", j), "S4.4.output",
                           f"graph output tensor {t} is never written to slow memory: subgraph "
                           f"{j} retains it instead of writing it")


def _check_subgraph(g: FusionGraph, sol: FusionSolution, i: int, shape: SubgraphShape,
                    gran: tuple[int, ...], resident: frozenset[int]) -> frozenset[int]:
    """S2.3, S2.4, S2.5, S9, S5 and S6.4 for subgraph ``i``; returns its retained set."""
    position = {q: pos for pos, q in enumerate(shape.ops)}
    if (found := g.misordered(shape.ops)) is not None:
        pos, q, t, producer = found
        raise _Invalid(("subgraphs", i, pos), "S2.3.order",
                       f"subgraph {i}: op {q} consumes tensor {t}, produced by op "
                       f"{producer} listed at position {position[producer]}, not "
                       "before it; list the ops of a subgraph in a topological order")
    links = nx.Graph()
    links.add_nodes_from(shape.ops)
    links.add_edges_from((shape.producer[t], c) for t in shape.ephemerals
                         for c in g.consumers[t] if c in position)
    if not nx.is_connected(links):
        parts = sorted(sorted(c) for c in nx.connected_components(links))
        raise _Invalid(("subgraphs", i), "S2.4.connected",
                       f"subgraph {i} is not connected through tensors its ops produce and "
                       f"consume: its ops fall into separate groups {parts}")
    w, h, k = gran
    if (msg := k_depth_issue(g, shape, k)) is not None:
        raise _Invalid(("granularities", i, 2), "S2.5.k_depth", f"subgraph {i}: {msg}")
    if (bad := bounds_issue(g, (w, h, k))) is not None:
        axis, msg = bad
        raise _Invalid(("granularities", i, axis), "S9.bounds", f"subgraph {i}: {msg}")
    retained = _check_retention(g, sol.tensors_to_retain[i], i, shape, resident)
    if (msg := prologue_issue(g, shape, (w, h, k))) is not None:
        raise _Invalid(("granularities", i), "S6.4.prologue", f"subgraph {i}: {msg}")
    return retained


def _check_retention(g: FusionGraph, listed: Sequence[int], i: int, shape: SubgraphShape,
                     resident: frozenset[int]) -> frozenset[int]:
    """S5.1 and S5.2: in range, no repeats, and produced by this very subgraph."""
    n = g.problem.num_tensors
    seen: set[int] = set()
    for pos, t in enumerate(listed):
        loc = ("tensors_to_retain", i, pos)
        if not 0 <= t < n:
            raise _Invalid(loc, "S5.1.range", f"subgraph {i} retains tensor {t}, out of range: "
                           f"there are {n} tensors")
        if t in seen:
            raise _Invalid(loc, "S5.1.repeat", f"subgraph {i} lists tensor {t} twice")
        seen.add(t)
        if t in shape.produced:
            continue
        if t in g.graph_inputs:
            why = "it is a graph input"
        elif t in resident:
            why = ("it is only resident from the previous subgraph; to keep it longer this "
                   "subgraph must produce it again")
        else:
            why = "no op of this subgraph produces it"
        raise _Invalid(loc, "S5.2.not_produced",
                       f"subgraph {i} cannot retain tensor {t}: {why}; only tensors produced "
                       "by the subgraph may be retained")
    return frozenset(seen)


def _check_traversal(sol: FusionSolution, i: int, shape: SubgraphShape,
                     gran: tuple[int, ...]) -> Traversal:
    """S7.3: null means raster; otherwise a permutation of the tile indices."""
    order = None if sol.traversal_orders is None else sol.traversal_orders[i]
    if order is None:
        return "raster"
    ntr, ntc = shape.grid(gran[0], gran[1])
    n = ntr * ntc
    if sorted(order) != list(range(n)):
        raise _Invalid(("traversal_orders", i), "S7.3.traversal",
                       f"subgraph {i}: traversal order must be a permutation of the {n} tile "
                       f"indices 0..{n - 1} of its {ntr}x{ntc} grid, got {_list(order, 12)}")
    for name, named in NAMED_ORDERS.items():
        if list(order) == named(ntr, ntc):
            return name
    return tuple(order)


def _run(ctx: ScoringContext, result: Evaluation, i: int, shape: SubgraphShape,
         gran: tuple[int, ...], traversal: Traversal, resident: frozenset[int],
         retained: frozenset[int], engine: Engine, details: bool) -> Fraction:
    """S12 and the latency: the fast scorer, or the literal simulation when asked or when
    an overflow must be located."""
    w, h, k = gran
    if engine == "fast" and not details:
        score = score_subgraph(ctx, shape.ops, (w, h, k), traversal, resident, retained)
        if score.fits:
            return score.latency
    ntr, ntc = shape.grid(w, h)
    order = tile_order(traversal, ntr, ntc)
    trace = simulate(ctx.graph, shape, (w, h, k), order, resident, retained, ctx.rules,
                     record=details, stop_at_overflow=True)
    if trace.first_overflow is not None:
        s = trace.first_overflow
        raise _Invalid(("granularities", i), "S12.capacity",
                       f"subgraph {i}: working set {s.working_set} exceeds fast_memory_capacity "
                       f"{_number(ctx.capacity)} at tile {s.tile} (row {s.row}, column {s.col}), "
                       f"k-step {s.k_step}: retained in {s.ws_retained_in} + inputs "
                       f"{s.ws_inputs} + outputs {s.ws_outputs} + retained out "
                       f"{s.ws_retained_out}")
    if result.steps is not None:
        result.steps.append(trace.steps)
    return trace.latency


def _warnings(g: FusionGraph, i: int, shape: SubgraphShape) -> list[str]:
    """S7.2 (outputs of different shapes) and S8.1 (chains of 3+ MatMuls)."""
    p = g.problem
    out: list[str] = []
    shapes = sorted({(p.widths[t], p.heights[t]) for t in shape.outputs})
    if len(shapes) > 1:
        listed = ", ".join(f"{w}x{h}" for w, h in shapes)
        out.append(f"subgraph {i}: outputs of different shapes ({listed}, w x h) share one tile "
                   "grid; the smaller ones are masked on tiles outside their extent")
    chain = _longest_matmul_chain(shape)
    if len(chain) >= 3:
        out.append(f"subgraph {i}: a chain of {len(chain)} MatMuls "
                   f"({' -> '.join(f'op {q}' for q in chain)}); every upstream MatMul is "
                   "recomputed in every step (strict reading of SEMANTICS S8.1)")
    return out


def _longest_matmul_chain(shape: SubgraphShape) -> list[int]:
    """The longest path of MatMuls of the subgraph linked through its Pointwise ops."""
    feeds = nx.DiGraph()
    feeds.add_nodes_from(shape.feeds)
    feeds.add_edges_from((q, m) for q, fed in shape.feeds.items() for m in fed)
    return nx.dag_longest_path(feeds) if feeds else []


def _check_claims(sol: FusionSolution, result: Evaluation, strict: bool) -> None:
    """S13.1: a claimed latency matches when within 1e-6 relative (absolute below 1)."""
    for i, (claimed, computed) in enumerate(zip(sol.subgraph_latencies,
                                                result.subgraph_latencies, strict=True)):
        c = exact(claimed)
        if abs(c - computed) > CLAIM_TOLERANCE * max(Fraction(1), abs(computed)):
            result.claimed_mismatches.append((i, c, computed))
    if strict and result.claimed_mismatches:
        i, c, x = result.claimed_mismatches[0]
        raise _Invalid(("subgraph_latencies", i), "S13.1.claimed",
                       f"subgraph {i}: claimed latency {float(c)} differs from the computed "
                       f"{float(x)} (strict checking)")


def _step_model(s: Step) -> EvaluationStep:
    return EvaluationStep(
        tile=s.tile, row=s.row, col=s.col, k_step=s.k_step, compute=float(s.compute),
        loaded=s.loaded, stored=s.stored, latency=float(s.latency), working_set=s.working_set,
        ws_retained_in=s.ws_retained_in, ws_inputs=s.ws_inputs, ws_outputs=s.ws_outputs,
        ws_retained_out=s.ws_retained_out)


def _number(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else str(float(x))


def _list(items: Sequence[int], most: int = 20) -> str:
    shown = ", ".join(str(x) for x in items[:most])
    return f"[{shown}{', ...' if len(items) > most else ''}]"
